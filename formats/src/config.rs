//! The run configuration: strict TOML, three profiles, pins enforced at load.
//!
//! Loading is two-staged. First every keyed pin in [`crate::pins::PINS`] is looked up in the parsed
//! table, type-checked and compared with its rule; a weakened pin refuses the whole file with an
//! error naming the key, the clause, the pinned value and the configured one. The pinned keys are
//! then removed and the rest is deserialized into typed sections that refuse unknown keys. The raw
//! bytes are kept, and their BLAKE3 hash identifies the configuration in journals and reports.
//!
//! Profiles (SPEC.md §6 and §P):
//! - `experiment`: every pin in force; the only profile whose runs can be published.
//! - `dev`: identical rules, plus one declared `dev.time_factor` that divides the timeline
//!   durations (the pins marked dev-scaled) and nothing else. Everything derived is NOT PUBLISHABLE.
//! - `hosted`: a third-party endpoint. Client pins apply; server pins are reported "not
//!   verifiable"; `ignore_eos` must be false; no fault can be injected.

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

use serde::Deserialize;
use toml::de::{DeTable, DeValue};
use toml::Spanned;

use crate::pins::{self, Pin, Rule, Side, Value, PINS};
use crate::schedule::{Grid, Phase, RouteWeight, ScheduleParams};

/// Largest configuration file accepted, in bytes ([`crate::files::CONFIG_FILE_BYTES_MAX`]).
pub const CONFIG_BYTES_MAX: usize = crate::files::CONFIG_FILE_BYTES_MAX as usize;
/// The dev profile's time factor must lie in 1..=this.
pub const DEV_TIME_FACTOR_MAX: u32 = 1000;
/// The dev profile's time factor when `dev.time_factor` is absent.
pub const DEV_TIME_FACTOR_DEFAULT: u32 = 10;

/// What went wrong loading a configuration, with where and what to do.
///
/// Every error about one key names the full dotted key (`routes[0].weight`) and, where the key
/// is written in the file, its line and column (`at`).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum ConfigError {
    /// The file could not be read.
    Read {
        /// The path as given.
        path: String,
        /// What the operating system said.
        message: String,
    },
    /// Not valid TOML, not UTF-8, or too large.
    Syntax {
        /// What the parser said.
        message: String,
        /// Where, when the parser could say.
        at: Option<Location>,
    },
    /// A key this schema version does not know.
    UnknownKey {
        /// The full dotted key, as the file writes it.
        key: String,
        /// The keys this schema knows in the same section.
        known: Vec<String>,
        /// Where the key is written.
        at: Option<Location>,
    },
    /// A value of the wrong type or out of its domain.
    Invalid {
        /// The full dotted key (`routes[0].weight`, `schedule.seed`).
        key: String,
        /// What is wrong with its value, and what it should be.
        message: String,
        /// Where the key (or the table it is missing from) is written.
        at: Option<Location>,
    },
    /// A value that weakens a pin.
    WeakensPin {
        /// The pin's key.
        key: &'static str,
        /// The SPEC.md clause that pins it.
        clause: &'static str,
        /// What the pin is, in a few words.
        what: &'static str,
        /// How a configured value may relate to the pin.
        rule: Rule,
        /// The pinned value.
        pinned: Value,
        /// The value as the file writes it.
        configured: String,
        /// Where the key is written.
        at: Option<Location>,
    },
    /// A rule that relates several keys (profile, rate, target kind).
    Inconsistent {
        /// The clause whose rule the keys break.
        clause: &'static str,
        /// Which keys, and what the rule asks.
        message: String,
    },
}

impl ConfigError {
    /// Where in the file the error is, when it is about one place.
    pub fn location(&self) -> Option<Location> {
        match self {
            ConfigError::Syntax { at, .. }
            | ConfigError::UnknownKey { at, .. }
            | ConfigError::Invalid { at, .. }
            | ConfigError::WeakensPin { at, .. } => *at,
            ConfigError::Read { .. } | ConfigError::Inconsistent { .. } => None,
        }
    }

    /// The same error placed where its key is written, if it names one the text has.
    fn placed(mut self, index: &Index) -> ConfigError {
        let (key, at) = match &mut self {
            ConfigError::UnknownKey { key, at, .. } | ConfigError::Invalid { key, at, .. } => {
                (key.as_str(), at)
            }
            ConfigError::WeakensPin { key, at, .. } => (*key, at),
            _ => return self,
        };
        if at.is_none() {
            *at = index.locate(key);
        }
        self
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let place = |at: &Option<Location>| at.map(|at| format!(" ({at})")).unwrap_or_default();
        match self {
            ConfigError::Read { path, message } => write!(
                f,
                "cannot read the configuration {path}: {message}; check the path and its permissions"
            ),
            ConfigError::Syntax { message, at } => {
                write!(f, "not a valid configuration{}: {message}", place(at))
            }
            ConfigError::UnknownKey { key, known, at } => write!(
                f,
                "unknown config key `{key}`{} (schema_version 1 knows: {}); remove it or fix its spelling",
                place(at),
                known.join(", ")
            ),
            ConfigError::Invalid { key, message, at } => {
                write!(f, "config key `{key}`{}: {message}", place(at))
            }
            ConfigError::WeakensPin { key, clause, what, rule, pinned, configured, at } => write!(
                f,
                "config key `{key}` = {configured}{} weakens a pin of SPEC {clause} ({what}): the pinned \
                 value is {pinned} and a configuration may set it to {} {pinned}; remove the key to use \
                 the pin",
                place(at),
                pins::rule_words(*rule)
            ),
            ConfigError::Inconsistent { clause, message } => {
                write!(f, "configuration refused by SPEC {clause}: {message}")
            }
        }
    }
}

impl std::error::Error for ConfigError {}

mod design;
mod domains;
mod lengths;
mod located;
pub mod parts;
mod pinned;
mod quick;
mod relations;
pub mod schema;
mod secrets;
mod sections;
pub mod slo;
pub mod thresholds;
mod timing;
pub mod workload;

pub use design::{design_hash, TESTBED_LOCAL_KEYS, TESTBED_LOCAL_NAMESPACE_KEYS};
pub use lengths::{Lengths, TokenSide, INPUT_TOKENS_SALT, OUTPUT_TOKENS_MAX, OUTPUT_TOKENS_SALT};
use located::Index;
pub use located::Location;
pub use quick::{
    check_quick_files, parse_duration_s, rate_flag, DurationError, FlagError, Quick, QuickParts,
    QuickWorkload, QUICK_PATH_DEFAULT,
};
use sections::Typed;
pub use sections::*;
pub use timing::{format_s, DevTiming};

/// Removes from `spanned` every key that `kept` (the same document after the pin stage) lacks.
fn keep_only(spanned: &mut DeTable<'_>, kept: &toml::Table) {
    let dropped: Vec<String> = spanned
        .iter()
        .map(|(key, _)| key.get_ref().to_string())
        .filter(|key| !kept.contains_key(key))
        .collect();
    for key in dropped {
        spanned.remove(key.as_str());
    }
    for (key, value) in spanned.iter_mut() {
        if let (DeValue::Table(inner), Some(toml::Value::Table(kept))) =
            (value.get_mut(), kept.get(&**key.get_ref()))
        {
            keep_only(inner, kept);
        }
    }
}

/// A loaded, validated configuration.
#[derive(Clone, Debug)]
pub struct Config {
    raw: Vec<u8>,
    hash: [u8; 32],
    /// `experiment`, `dev` or `hosted` (§6, §P).
    pub profile: Profile,
    /// 1 unless the profile is dev.
    pub time_factor: u32,
    /// `[dev]`'s durations in seconds and `scale_timeout` (all absent unless the profile is dev).
    pub dev: DevTiming,
    /// `[target]`: what the recorder talks to.
    pub target: Target,
    /// `[schedule]`: seed, arrivals and rate.
    pub schedule: ScheduleSection,
    /// `[calibration]`: lambda_max and whether this run is a calibration step.
    pub calibration: Calibration,
    /// `[fault]`: the one named fault and how it is injected.
    pub fault: Fault,
    /// `[[routes]]`: the request templates and their weights, in the order the schedule indexes them.
    pub routes: Vec<Route>,
    /// The seeds/004 declaration and abort triggers, when the run is a governed experiment.
    pub declaration: Option<Declaration>,
    /// `[server_metrics]`: what of the server's own metrics is scraped and journaled (§2).
    pub server_metrics: ServerMetrics,
    /// `[thresholds] fail_on`: the user's own pass/fail criteria (SPEC §9 "Thresholds"), read.
    pub thresholds: Vec<thresholds::Threshold>,
    /// `[workload]`: the generation model (SPEC §1 "Workload models").
    pub workload: workload::WorkloadSection,
    /// `[slo] declared` and `[slo.routes]`: the user's own SLO beside the pinned one (SPEC §4
    /// "A declared SLO"), read; `None` where the file declares none.
    pub slo: Option<slo::DeclaredSlo>,
    /// Pinned keys the file sets (to the pin or stricter).
    configured: BTreeMap<&'static str, Value>,
}

/// How one pin stands in a loaded configuration (what `config check` prints).
#[derive(Clone, Debug)]
pub struct PinInForce {
    /// The pin, from [`PINS`].
    pub pin: &'static Pin,
    /// The value in force: the configured one if set, else the pin.
    pub value: Value,
    /// Whether the file sets it (to the pin or stricter).
    pub configured: bool,
    /// The value after the dev time factor, for dev-scaled durations under the dev profile.
    pub effective: Option<String>,
    /// Under the hosted profile a server-side pin cannot be verified.
    pub not_verifiable: bool,
}

/// Why a configuration's results may not be published (SPEC §P): the dev profile, and how its
/// timeline was shortened. Said as a line that starts `NOT PUBLISHABLE`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NotPublishable {
    /// Durations stated in seconds, no other pin divided.
    DevStated,
    /// Durations stated in seconds, the other dev-scaled pins divided by the time factor.
    DevStatedScaled {
        /// `dev.time_factor`.
        time_factor: u32,
    },
    /// The pinned timeline divided by the time factor.
    DevScaled {
        /// `dev.time_factor`.
        time_factor: u32,
    },
}

impl std::fmt::Display for NotPublishable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NotPublishable::DevStated => {
                f.write_str("NOT PUBLISHABLE: dev profile, durations stated in seconds (SPEC §P)")
            }
            NotPublishable::DevStatedScaled { time_factor } => write!(
                f,
                "NOT PUBLISHABLE: dev profile, durations stated in seconds, the other dev-scaled pins divided by {time_factor} (SPEC §P)"
            ),
            NotPublishable::DevScaled { time_factor } => write!(
                f,
                "NOT PUBLISHABLE: dev profile, timeline durations divided by {time_factor} (SPEC §P)"
            ),
        }
    }
}

impl Config {
    /// Reads and validates a configuration file.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let raw = crate::files::read_bounded(
            path,
            crate::files::CONFIG_FILE_BYTES_MAX,
            "a configuration",
        )
        .map_err(|e| ConfigError::Read {
            path: path.display().to_string(),
            message: e.to_string(),
        })?;
        Config::parse(&raw)
    }

    /// Validates configuration bytes (the same rules as [`Config::load`]).
    pub fn parse(raw: &[u8]) -> Result<Config, ConfigError> {
        Config::parse_checked(raw, true)
    }

    /// Validates the configuration a journal carries: every rule but the secrets stage
    /// (`secrets.rs`), which guards what a recording writes. A journal already holds its
    /// bytes, so refusing them would hide nothing and would only stop its analysis.
    pub fn parse_journaled(raw: &[u8]) -> Result<Config, ConfigError> {
        Config::parse_checked(raw, false)
    }

    fn parse_checked(raw: &[u8], secrets: bool) -> Result<Config, ConfigError> {
        if raw.len() > CONFIG_BYTES_MAX {
            return Err(ConfigError::Syntax {
                message: format!(
                    "{} bytes is more than the {CONFIG_BYTES_MAX} a config may have",
                    raw.len()
                ),
                at: None,
            });
        }
        let text = std::str::from_utf8(raw).map_err(|e| ConfigError::Syntax {
            message: format!("not UTF-8: {e}"),
            at: None,
        })?;
        let syntax = |e: toml::de::Error| ConfigError::Syntax {
            at: e.span().map(|span| located::location(text, span.start)),
            message: e.message().trim().to_owned(),
        };
        let spanned = DeTable::parse(text).map_err(syntax)?;
        let index = Index::new(text, spanned.get_ref());
        let config = Config::parse_indexed(raw, text, spanned, &index, secrets)
            .map_err(|e| e.placed(&index))?;
        Ok(config)
    }

    fn parse_indexed(
        raw: &[u8],
        text: &str,
        mut spanned: Spanned<DeTable<'_>>,
        index: &Index,
        secrets: bool,
    ) -> Result<Config, ConfigError> {
        let mut table: toml::Table = toml::from_str(text).map_err(|e| ConfigError::Syntax {
            at: e.span().map(|span| index.location(span.start)),
            message: e.message().trim().to_owned(),
        })?;
        let configured = pinned::take_pins(&mut table)?;
        let server_metrics_written = table.contains_key("server_metrics");
        // The typed stage reads the spanned tree, less what the pin stage took, so that its
        // errors keep their place in the file.
        keep_only(spanned.get_mut(), &table);
        let typed = Typed::deserialize(toml::de::Deserializer::from(spanned)).map_err(|e| {
            let (message, missing) = located::plain(e.message());
            let span = e.span().unwrap_or_default();
            let mut key = index.key_at(&span).unwrap_or("(file)").to_owned();
            if let Some(missing) = missing {
                key = if key == "(file)" {
                    missing
                } else {
                    format!("{key}.{missing}")
                };
            }
            ConfigError::Invalid {
                key,
                message,
                at: Some(index.location(span.start)),
            }
        })?;
        let time_factor = match (typed.profile, &typed.dev) {
            (Profile::Dev, None) => DEV_TIME_FACTOR_DEFAULT,
            (Profile::Dev, Some(dev)) => dev.time_factor.unwrap_or(DEV_TIME_FACTOR_DEFAULT),
            (_, None) => 1,
            (profile, Some(_)) => {
                return Err(ConfigError::Inconsistent {
                    clause: "§P",
                    message: format!(
                        "a [dev] section is only allowed under profile = \"dev\", not \"{}\"; remove it",
                        profile.name()
                    ),
                })
            }
        };
        if !(1..=DEV_TIME_FACTOR_MAX).contains(&time_factor) {
            return Err(ConfigError::Invalid {
                key: "dev.time_factor".into(),
                message: format!("{time_factor} is outside 1..={DEV_TIME_FACTOR_MAX}"),
                at: None,
            });
        }
        let slo = declared_slo_of(typed.slo, &typed.routes)?;
        let server_metrics = ServerMetrics {
            written: server_metrics_written,
            ..typed.server_metrics
        };
        let config = Config {
            hash: *blake3::hash(raw).as_bytes(),
            raw: raw.to_vec(),
            profile: typed.profile,
            time_factor,
            dev: DevTiming::of(typed.dev.as_ref())?,
            target: typed.target,
            schedule: typed.schedule,
            calibration: typed.calibration,
            fault: typed.fault,
            routes: typed.routes,
            declaration: typed.declaration,
            server_metrics,
            thresholds: thresholds_of(typed.thresholds)?,
            slo,
            workload: typed.workload,
            configured,
        };
        config.check_relations()?;
        config.check_scrape_sources(server_metrics_written)?;
        config.check_domains()?;
        config.check_timing()?;
        if secrets {
            config.check_for_recording()?;
            config.check_secrets(text)?;
        }
        Ok(config)
    }

    /// The exact bytes loaded; the journal header carries them.
    pub fn raw_bytes(&self) -> &[u8] {
        &self.raw
    }

    /// BLAKE3 of [`Config::raw_bytes`].
    pub fn hash(&self) -> [u8; 32] {
        self.hash
    }

    /// Whether results derived from this configuration may be published, and if not, why.
    pub fn publishability(&self) -> Result<(), NotPublishable> {
        match self.profile {
            Profile::Experiment => Ok(()),
            Profile::Dev if self.dev.stated() && self.time_factor == 1 => {
                Err(NotPublishable::DevStated)
            }
            // The stated durations are the timeline; the factor divides only the other
            // dev-scaled pins (the timeout too when dev.scale_timeout says so).
            Profile::Dev if self.dev.stated() => Err(NotPublishable::DevStatedScaled {
                time_factor: self.time_factor,
            }),
            Profile::Dev => Err(NotPublishable::DevScaled {
                time_factor: self.time_factor,
            }),
            Profile::Hosted => Ok(()),
        }
    }

    /// The value in force for a pin: the configured one (equal or stricter), else the pin.
    pub fn value(&self, pin: &Pin) -> Value {
        self.configured.get(pin.key).copied().unwrap_or(pin.value)
    }

    /// [`Config::value`] as a number.
    pub fn number(&self, pin: &Pin) -> f64 {
        self.value(pin).as_f64()
    }

    /// A duration pin in seconds, as nanoseconds after the dev time factor.
    pub fn duration_ns(&self, pin: &Pin) -> u64 {
        debug_assert!(pin.unit == "s", "{} is not a duration in seconds", pin.key);
        let seconds = self.number(pin);
        let ns = (seconds * 1e9) as u64;
        if self.divides(pin) {
            ns / u64::from(self.time_factor)
        } else {
            ns
        }
    }

    /// The period of the recorder's scrapes of the server's metrics, ms (SPEC §2): the pinned
    /// period divided by the dev time factor, never below the pinned floor of real time between
    /// reads of a replica's metrics.
    pub fn scrape_period_ms(&self) -> u64 {
        let pinned = pins::value::SERVER_SCRAPE_PERIOD_MS as u64;
        let floor = pins::value::CLIENT_GAUGE_PERIOD_FLOOR_MS as u64;
        (pinned / u64::from(self.time_factor.max(1))).max(floor)
    }

    /// Every pin, with its value in force, for `config check` and reports.
    pub fn pins_in_force(&self) -> Vec<PinInForce> {
        PINS.iter()
            .map(|pin| {
                let configured = self.configured.get(pin.key).copied();
                let value = configured.unwrap_or(pin.value);
                let effective = (self.time_factor > 1 && self.divides(pin) && pin.unit == "s")
                    .then(|| {
                        // The duration the recorder uses, in whole ns, printed to the ms
                        // (rounded): 2.857 s, not 2.857142857142857 s.
                        format!(
                            "{} after the dev time factor {}",
                            format_s(self.duration_ns(pin)),
                            self.time_factor
                        )
                    });
                PinInForce {
                    pin,
                    value,
                    configured: configured.is_some(),
                    effective,
                    not_verifiable: self.profile == Profile::Hosted && pin.side == Side::Server,
                }
            })
            .collect()
    }

    /// The total offered rate: the configured one, or replicas x lambda_r under a fault variant.
    /// Under a closed workload, the user count (it sizes the connection pool; the rate is an
    /// outcome); under replay, 1 until the recorder puts the trace's mean rate in its header.
    pub fn rate_rps(&self) -> f64 {
        match self.workload() {
            crate::schedule::Workload::Closed { users, .. } => return f64::from(users),
            crate::schedule::Workload::Replay { .. } => return 1.0,
            _ => {}
        }
        match (self.schedule.rate_rps, self.derived_rate_rps()) {
            (Some(rate), _) => rate,
            (None, Some(rate)) => rate,
            (None, None) => 0.0, // check_relations refuses this combination
        }
    }

    fn derived_rate_rps(&self) -> Option<f64> {
        let lambda_max = self.calibration.lambda_max_rps?;
        let fraction = self.number(&pins::CALIBRATION_LAMBDA_R_FRACTION);
        Some(self.target.replicas.len() as f64 * fraction * lambda_max)
    }

    /// When the fault fires, in ns from the schedule's start (end of warm-up plus baseline).
    pub fn inject_at_ns(&self) -> Option<u64> {
        (self.fault.variant != FaultVariant::None).then(|| {
            self.duration_ns(&pins::EXPERIMENT_WARMUP_S)
                + self.duration_ns(&pins::EXPERIMENT_BASELINE_S)
        })
    }

    /// The schedule parameters this configuration defines (SPEC §1 phases, §J schedule).
    pub fn schedule_params(&self) -> ScheduleParams {
        let rate_rps = self.rate_rps();
        let phase = |name: &str, pin: &Pin| Phase {
            name: name.into(),
            duration_ns: self.duration_ns(pin),
            rate_rps,
        };
        let spike = self
            .schedule
            .spike_factor
            .filter(|_| self.fault.variant == FaultVariant::Degradation);
        let phases = if let Some(factor) = spike {
            let recovery = self.duration_ns(&pins::EXPERIMENT_RECOVERY_TIMEOUT_S);
            let spike_ns = self.duration_ns(&pins::FAULT_DEGRADATION_S).min(recovery);
            vec![
                phase("warmup", &pins::EXPERIMENT_WARMUP_S),
                phase("baseline", &pins::EXPERIMENT_BASELINE_S),
                Phase {
                    name: "spike".into(),
                    duration_ns: spike_ns,
                    rate_rps: rate_rps * factor,
                },
                Phase {
                    name: "fault-recovery".into(),
                    duration_ns: recovery - spike_ns,
                    rate_rps,
                },
                phase("cooldown", &pins::EXPERIMENT_COOLDOWN_S),
            ]
        } else if self.calibration.step {
            vec![
                phase("warmup", &pins::CALIBRATION_SETTLE_S),
                phase("measurement", &pins::CALIBRATION_MEASURE_S),
            ]
        } else if self.fault.variant == FaultVariant::None {
            // Durations stated in seconds (`[dev]`, §P) stand in for the dev-scaled pins; a
            // stated zero leaves its phase out.
            let stated = |name: &str, ns: Option<u64>, pin: &Pin| match ns {
                Some(duration_ns) => Phase {
                    name: name.into(),
                    duration_ns,
                    rate_rps,
                },
                None => phase(name, pin),
            };
            [
                stated("warmup", self.dev.warmup_ns, &pins::EXPERIMENT_WARMUP_S),
                stated(
                    "measurement",
                    self.dev.measure_ns,
                    &pins::EXPERIMENT_BASELINE_S,
                ),
                stated(
                    "cooldown",
                    self.dev.cooldown_ns,
                    &pins::EXPERIMENT_COOLDOWN_S,
                ),
            ]
            .into_iter()
            .filter(|p| p.duration_ns > 0)
            .collect()
        } else {
            vec![
                phase("warmup", &pins::EXPERIMENT_WARMUP_S),
                phase("baseline", &pins::EXPERIMENT_BASELINE_S),
                phase("fault-recovery", &pins::EXPERIMENT_RECOVERY_TIMEOUT_S),
                phase("cooldown", &pins::EXPERIMENT_COOLDOWN_S),
            ]
        };
        ScheduleParams {
            seed: self.schedule.seed,
            arrival: self.schedule.arrival,
            phases,
            routes: self
                .routes
                .iter()
                .map(|r| RouteWeight {
                    label: r.label.clone(),
                    weight: r.weight,
                })
                .collect(),
            inject_at_ns: self.inject_at_ns(),
            // What this build records under; a journal's header says which rule it used.
            grid: Grid::Continuous,
            workload: self.workload(),
            prefixes: self.prefix_pool(),
            abandon: self.abandonment(),
            history: self.history(),
        }
    }
}

/// The commented example configuration `percentes init` writes for a profile.
pub fn example(profile: Profile) -> &'static str {
    match profile {
        Profile::Dev => include_str!("config/examples/dev.toml"),
        Profile::Experiment => include_str!("config/examples/experiment.toml"),
        Profile::Hosted => include_str!("config/examples/hosted.toml"),
    }
}

/// `[thresholds] fail_on`, each read, an error naming the entry's key.
fn thresholds_of(
    section: Option<ThresholdsSection>,
) -> Result<Vec<thresholds::Threshold>, ConfigError> {
    let entries = section.map(|s| s.fail_on).unwrap_or_default();
    if entries.len() > thresholds::THRESHOLDS_MAX {
        return Err(ConfigError::Invalid {
            key: "thresholds.fail_on".into(),
            message: format!(
                "{} thresholds; at most {} are read",
                entries.len(),
                thresholds::THRESHOLDS_MAX
            ),
            at: None,
        });
    }
    entries
        .iter()
        .enumerate()
        .map(|(i, text)| {
            thresholds::Threshold::parse(text).map_err(|e| ConfigError::Invalid {
                key: format!("thresholds.fail_on[{i}]"),
                message: e.to_string(),
                at: None,
            })
        })
        .collect()
}

/// `[slo] declared` and `[slo.routes]`, each list read, an error naming its key; a route's list
/// must name a route the configuration has.
fn declared_slo_of(
    section: Option<SloSection>,
    routes: &[Route],
) -> Result<Option<slo::DeclaredSlo>, ConfigError> {
    let Some(section) = section else {
        return Ok(None);
    };
    let invalid = |key: String, e: slo::SloError| ConfigError::Invalid {
        key,
        message: e.to_string(),
        at: None,
    };
    if section.declared.is_empty() && section.routes.is_empty() {
        return Ok(None);
    }
    let (objectives, target) =
        slo::objectives_and_target(section.declared.iter().map(String::as_str))
            .map_err(|e| invalid("slo.declared".into(), e))?;
    if section.routes.len() > slo::ROUTES_MAX {
        return Err(invalid(
            "slo.routes".into(),
            slo::SloError::TooManyRoutes {
                given: section.routes.len(),
            },
        ));
    }
    let mut own = BTreeMap::new();
    for (label, texts) in section.routes {
        let key = format!("slo.routes.{label}");
        if !routes.iter().any(|r| r.label == label) {
            let labels: Vec<&str> = routes.iter().map(|r| r.label.as_str()).collect();
            return Err(ConfigError::Invalid {
                key,
                message: format!(
                    "names no route of this configuration; its routes are {}",
                    labels.join(", ")
                ),
                at: None,
            });
        }
        let objectives =
            slo::objectives(texts.iter().map(String::as_str)).map_err(|e| invalid(key, e))?;
        own.insert(label, objectives);
    }
    Ok(Some(slo::DeclaredSlo {
        objectives,
        routes: own,
        target,
    }))
}

#[cfg(test)]
mod tests;
