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

use crate::pins::{self, Pin, Rule, Side, Value, PINS};
use crate::schedule::{Arrival, Phase, RouteWeight, ScheduleParams};

/// Largest configuration file accepted, in bytes. A config is a page of TOML; a larger file is a
/// mistake (a journal or a prompt set passed by accident).
pub const CONFIG_BYTES_MAX: usize = 1 << 20;
/// The dev profile's time factor must lie in 1..=this.
pub const DEV_TIME_FACTOR_MAX: u32 = 1000;
/// The dev profile's time factor when `dev.time_factor` is absent.
pub const DEV_TIME_FACTOR_DEFAULT: u32 = 10;

/// What went wrong loading a configuration, with where and what to do.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum ConfigError {
    /// Not valid TOML, or too large. The message carries the line and column.
    Syntax { message: String },
    /// A key this schema version does not know.
    UnknownKey { key: String, known: Vec<String> },
    /// A value of the wrong type or out of its domain.
    Invalid { key: String, message: String },
    /// A value that weakens a pin.
    WeakensPin {
        key: &'static str,
        clause: &'static str,
        what: &'static str,
        rule: Rule,
        pinned: Value,
        configured: String,
    },
    /// A rule that relates several keys (profile, rate, target kind).
    Inconsistent {
        clause: &'static str,
        message: String,
    },
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigError::Syntax { message } => write!(f, "not a valid configuration: {message}"),
            ConfigError::UnknownKey { key, known } => write!(
                f,
                "unknown config key `{key}` (schema_version 1 knows: {}); remove it or fix its spelling",
                known.join(", ")
            ),
            ConfigError::Invalid { key, message } => write!(f, "config key `{key}`: {message}"),
            ConfigError::WeakensPin { key, clause, what, rule, pinned, configured } => write!(
                f,
                "config key `{key}` = {configured} weakens a pin of SPEC {clause} ({what}): the pinned \
                 value is {pinned} and a configuration may set it to {} {pinned}; remove the key to use \
                 the pin",
                pins::rule_words(*rule)
            ),
            ConfigError::Inconsistent { clause, message } => {
                write!(f, "configuration refused by SPEC {clause}: {message}")
            }
        }
    }
}

impl std::error::Error for ConfigError {}

/// The three profiles.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Profile {
    Experiment,
    Dev,
    Hosted,
}

impl Profile {
    pub fn name(self) -> &'static str {
        match self {
            Profile::Experiment => "experiment",
            Profile::Dev => "dev",
            Profile::Hosted => "hosted",
        }
    }
    pub fn from_name(name: &str) -> Option<Profile> {
        match name {
            "experiment" => Some(Profile::Experiment),
            "dev" => Some(Profile::Dev),
            "hosted" => Some(Profile::Hosted),
            _ => None,
        }
    }
}

/// What the recorder talks to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TargetKind {
    /// percentes' own mock server (scenarios crate).
    Mock,
    /// A serving stack the operator controls (vLLM and the like).
    SelfHosted,
    /// A third-party endpoint: server pins cannot be verified.
    Hosted,
}

impl TargetKind {
    pub fn name(self) -> &'static str {
        match self {
            TargetKind::Mock => "mock",
            TargetKind::SelfHosted => "self-hosted",
            TargetKind::Hosted => "hosted",
        }
    }
}

/// The fault a run injects.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FaultVariant {
    None,
    /// Delete the victim with grace 0; never called node loss.
    CleanDelete,
    /// Pre-armed full network partition of the victim for the pinned duration.
    BlackHole,
    /// A named degradation of the victim for the pinned duration (`fault.degradation_s`), such
    /// as a store outage or a CPU throttle (seeds/004's scenario catalogue), armed through the
    /// mock's admin API or an exec'd command. A governed scenario, not the §1 experiment: the
    /// replica-loss gates (G1, G3, G4) and the headline do not apply.
    Degradation,
}

impl FaultVariant {
    pub fn name(self) -> &'static str {
        match self {
            FaultVariant::None => "none",
            FaultVariant::CleanDelete => "clean-delete",
            FaultVariant::BlackHole => "black-hole",
            FaultVariant::Degradation => "degradation",
        }
    }

    /// Whether this is a variant of the §1 replica-loss experiment.
    pub fn is_replica_loss(self) -> bool {
        matches!(self, FaultVariant::CleanDelete | FaultVariant::BlackHole)
    }
}

/// `[target]`.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Target {
    pub kind: TargetKind,
    /// Where requests go: the service (router) address, `http://` or `https://`.
    pub base_url: String,
    /// The `model` field sent in each request body.
    pub model: String,
    /// Replica names the service is declared to have (G1 fails when traffic reaches fewer).
    #[serde(default)]
    pub replicas: Vec<String>,
    /// Whether requests stream (SSE). Default true.
    #[serde(default = "yes")]
    pub stream: bool,
    /// Sent as `ignore_eos`; must be true for mock and self-hosted, false for hosted (§6).
    pub ignore_eos: Option<bool>,
    #[serde(default)]
    pub tls: Tls,
    /// Each replica's own address (`name = "ip:port"`), probed directly by the recorder: its
    /// waiting-queue gauge from /metrics (G7) and whether it answers (replica-ready, §5).
    #[serde(default)]
    pub replica_addresses: BTreeMap<String, String>,
}

fn yes() -> bool {
    true
}

/// `[target.tls]`.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Tls {
    /// PEM file of extra trust anchors.
    pub ca_file: Option<String>,
    /// SNI and verification name, when it differs from the URL's host.
    pub server_name: Option<String>,
    /// Skip certificate verification. Recorded in the journal and printed in every report.
    #[serde(default)]
    pub insecure: bool,
}

/// `[schedule]`.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScheduleSection {
    pub seed: u64,
    pub arrival: Arrival,
    /// Total offered rate. Under a fault variant it must equal replicas x lambda_r (§1).
    pub rate_rps: Option<f64>,
    /// A traffic spike with a degradation: the rate times this from T_inject for the pinned
    /// degradation (phase `spike`), then the rate again (seeds/004's store-outage-under-spike).
    pub spike_factor: Option<f64>,
}

/// `[calibration]` (the non-pinned part).
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Calibration {
    /// Measured single-replica capacity (§10). Required for a fault run.
    pub lambda_max_rps: Option<f64>,
    /// This run is one step of a calibration ramp (§10, written by `percentes calibrate`): one
    /// replica addressed directly, no fault, `schedule.rate_rps` is the step's rate, and the
    /// schedule is the pinned settle (phase `warmup`) then the pinned measured span (phase
    /// `measurement`).
    #[serde(default)]
    pub step: bool,
}

/// `[declaration]` (seeds/004): the experiment's identity and blast radius, recorded in the
/// journal before injection, and the abort triggers the recorder enforces live. A run whose
/// trigger fires is an escaped experiment: load stops, the clock is kept, the seal says `escaped`.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Declaration {
    pub experiment_id: String,
    /// The release and dataset under test, as the operator names them.
    pub release: String,
    pub dataset: String,
    /// The one replica the fault may affect (one of `target.replicas`; the fault's victim).
    pub target: String,
    /// The exact boundary: pod, network path, resource pool.
    pub boundary: String,
    /// Protected traffic, in words (health, control, the survivors' traffic ...).
    #[serde(default)]
    pub protected: Vec<String>,
    /// Work allowed to shed, in words, with its expected status and error classes.
    #[serde(default)]
    pub shed: Vec<String>,
    /// State that must remain authoritative (manifests, catalogs, caches, endpoint lists).
    #[serde(default)]
    pub authoritative: Vec<String>,
    /// Route labels whose traffic is protected (the abort budget applies to them).
    #[serde(default)]
    pub protected_routes: Vec<String>,
    /// Route labels allowed to shed.
    #[serde(default)]
    pub shed_routes: Vec<String>,
    /// Protections expected to act (timeouts, breakers, caches, admission, shedding).
    #[serde(default)]
    pub protections: Vec<String>,
    /// The cleanup path, which must not depend on the disrupted component.
    pub cleanup: String,
    #[serde(default)]
    pub abort: Abort,
}

/// `[declaration.abort]`: the triggers. Durations are in experiment seconds (the dev profile
/// divides them by its time factor).
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Abort {
    /// Escape when the share of protected requests that end errored or censored, among those
    /// ending in the last `window_s`, exceeds this (with at least `min_requests` of them).
    pub protected_failure_rate: Option<f64>,
    #[serde(default = "abort_window_default")]
    pub window_s: f64,
    #[serde(default = "abort_min_requests_default")]
    pub min_requests: u32,
    /// Escape when a request answered by a replica other than the declared target errors.
    #[serde(default)]
    pub undeclared_replica_errors: bool,
    /// Escape when the fault's removal fails (cleanup cannot restore state).
    #[serde(default = "yes")]
    pub cleanup_failure: bool,
}

impl Default for Abort {
    fn default() -> Abort {
        Abort {
            protected_failure_rate: None,
            window_s: abort_window_default(),
            min_requests: abort_min_requests_default(),
            undeclared_replica_errors: false,
            cleanup_failure: true,
        }
    }
}

fn abort_window_default() -> f64 {
    5.0
}
fn abort_min_requests_default() -> u32 {
    10
}

/// `[fault]` (the non-pinned part).
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Fault {
    pub variant: FaultVariant,
    /// The replica taken out; must be one of `target.replicas`.
    pub victim: Option<String>,
    /// How the recorder applies the fault at T_inject. Required for a fault run.
    pub injector: Option<Injector>,
    /// `exec`: the command (argv) run at T_inject, e.g. a `kubectl delete pod` line.
    #[serde(default)]
    pub fire_command: Vec<String>,
    /// `exec`: the command run when the fault is removed (black-hole: at the pinned partition's end).
    #[serde(default)]
    pub remove_command: Vec<String>,
    /// `kill-pid-file`: the file holding the victim's process id (SIGKILL at T_inject).
    pub pid_file: Option<String>,
    /// `mock-admin`: the victim mock's address (`host:port`), and the mock fault mode to arm there.
    pub admin_address: Option<String>,
    pub mock_mode: Option<String>,
    /// Independent confirmation: `host:port` of the victim, which must stop answering.
    pub confirm_address: Option<String>,
    /// Confirmation of a degradation instead: `confirm_method confirm_path` at
    /// `confirm_address` must answer `confirm_status` (a store outage: an uncached lookup answers
    /// 503), and its body contain `confirm_contains` when set (a resource gauge in `/metrics`).
    pub confirm_path: Option<String>,
    pub confirm_status: Option<u16>,
    /// `GET` or `POST` (the default; the body is `{}`).
    pub confirm_method: Option<String>,
    pub confirm_contains: Option<String>,
}

/// The recorder's fault injectors (SPEC §1; the armed, fired, confirmed and expiry events go in
/// the journal).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Injector {
    Exec,
    KillPidFile,
    MockAdmin,
}

impl Injector {
    pub fn name(self) -> &'static str {
        match self {
            Injector::Exec => "exec",
            Injector::KillPidFile => "kill-pid-file",
            Injector::MockAdmin => "mock-admin",
        }
    }
}

/// `[[routes]]`: one request template and its weight in the route mix.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Route {
    pub label: String,
    pub path: String,
    #[serde(default = "one")]
    pub weight: u32,
    /// Fixed input length of the generated prompt, in tokens.
    #[serde(default = "prompt_tokens_default")]
    pub prompt_tokens: u32,
    /// A prompt set: one prompt per line; request i uses line i mod n, after its unique prefix.
    /// Without it, prompts are generated to `prompt_tokens`.
    pub prompt_file: Option<String>,
    /// What a success must show to count as a correct success (otherwise: incorrect success).
    #[serde(default)]
    pub verify: Verify,
    /// Whether this route's responses stream (SSE); default `target.stream`. A route that
    /// answers one JSON body (a lookup beside the generation routes) sets `false`.
    pub stream: Option<bool>,
}

impl Route {
    /// Whether requests of this route ask for, and expect, a stream.
    pub fn streams(&self, target: &Target) -> bool {
        self.stream.unwrap_or(target.stream)
    }
}

/// `[routes.verify]`: the per-route verification rule. By default the `model` field of every
/// response must equal `target.model`.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Verify {
    /// The exact HTTP status required (default: any 2xx).
    pub status: Option<u16>,
    /// A response header that must be present: `name` or `name: value` (value compared exactly).
    pub header: Option<String>,
    /// A top-level JSON field every chunk (or the body) must carry, and its value
    /// (default: `model` = `target.model`).
    pub json_field: Option<String>,
    pub json_value: Option<String>,
    /// BLAKE3 (hex) of the whole generated text.
    pub content_blake3: Option<String>,
}

fn one() -> u32 {
    1
}
fn prompt_tokens_default() -> u32 {
    128
}

/// Everything after the pinned keys are removed.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Typed {
    profile: Profile,
    #[serde(default)]
    dev: Option<Dev>,
    target: Target,
    schedule: ScheduleSection,
    #[serde(default)]
    calibration: Calibration,
    fault: Fault,
    routes: Vec<Route>,
    #[serde(default)]
    declaration: Option<Declaration>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Dev {
    time_factor: Option<u32>,
}

/// A loaded, validated configuration.
#[derive(Clone, Debug)]
pub struct Config {
    raw: Vec<u8>,
    hash: [u8; 32],
    pub profile: Profile,
    /// 1 unless the profile is dev.
    pub time_factor: u32,
    pub target: Target,
    pub schedule: ScheduleSection,
    pub calibration: Calibration,
    pub fault: Fault,
    pub routes: Vec<Route>,
    /// The seeds/004 declaration and abort triggers, when the run is a governed experiment.
    pub declaration: Option<Declaration>,
    /// Pinned keys the file sets (to the pin or stricter).
    configured: BTreeMap<&'static str, Value>,
}

/// How one pin stands in a loaded configuration (what `config check` prints).
#[derive(Clone, Debug)]
pub struct PinInForce {
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

impl Config {
    /// Reads and validates a configuration file.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let raw = std::fs::read(path).map_err(|e| ConfigError::Syntax {
            message: format!("cannot read {}: {e}", path.display()),
        })?;
        Config::parse(&raw)
    }

    /// Validates configuration bytes (the same rules as [`Config::load`]).
    pub fn parse(raw: &[u8]) -> Result<Config, ConfigError> {
        if raw.len() > CONFIG_BYTES_MAX {
            return Err(ConfigError::Syntax {
                message: format!(
                    "{} bytes is more than the {CONFIG_BYTES_MAX} a config may have",
                    raw.len()
                ),
            });
        }
        let text = std::str::from_utf8(raw).map_err(|e| ConfigError::Syntax {
            message: format!("not UTF-8: {e}"),
        })?;
        let mut table: toml::Table = toml::from_str(text).map_err(|e| ConfigError::Syntax {
            message: e.to_string().trim().to_owned(),
        })?;

        let configured = take_pins(&mut table)?;
        let typed: Typed = toml::Value::Table(table)
            .try_into()
            .map_err(|e: toml::de::Error| ConfigError::Invalid {
                key: "(file)".into(),
                message: e.message().to_owned(),
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
            });
        }
        let config = Config {
            hash: *blake3::hash(raw).as_bytes(),
            raw: raw.to_vec(),
            profile: typed.profile,
            time_factor,
            target: typed.target,
            schedule: typed.schedule,
            calibration: typed.calibration,
            fault: typed.fault,
            routes: typed.routes,
            declaration: typed.declaration,
            configured,
        };
        config.check_relations()?;
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
    pub fn publishability(&self) -> Result<(), String> {
        match self.profile {
            Profile::Experiment => Ok(()),
            Profile::Dev => Err(format!(
                "NOT PUBLISHABLE: dev profile, timeline durations divided by {} (SPEC §P)",
                self.time_factor
            )),
            Profile::Hosted => Ok(()),
        }
    }

    /// The value in force for a pin: the configured one (equal or stricter), else the pin.
    pub fn value(&self, key: &str) -> Value {
        self.configured
            .get(key)
            .copied()
            .unwrap_or(pins::pin(key).value)
    }

    /// A keyed duration pin in seconds, as nanoseconds after the dev time factor.
    pub fn duration_ns(&self, key: &str) -> u64 {
        let pin = pins::pin(key);
        debug_assert!(pin.unit == "s", "{key} is not a duration in seconds");
        let seconds = self.value(key).as_f64().unwrap_or_default();
        let ns = (seconds * 1e9) as u64;
        if pin.dev_scaled {
            ns / u64::from(self.time_factor)
        } else {
            ns
        }
    }

    /// Every pin, with its value in force, for `config check` and reports.
    pub fn pins_in_force(&self) -> Vec<PinInForce> {
        PINS.iter()
            .map(|pin| {
                let configured = self.configured.get(pin.key).copied();
                let value = configured.unwrap_or(pin.value);
                let effective =
                    (self.time_factor > 1 && pin.dev_scaled && pin.unit == "s").then(|| {
                        let s = value.as_f64().unwrap_or_default() / f64::from(self.time_factor);
                        format!("{s} s after the dev time factor {}", self.time_factor)
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
    pub fn rate_rps(&self) -> f64 {
        match (self.schedule.rate_rps, self.derived_rate_rps()) {
            (Some(rate), _) => rate,
            (None, Some(rate)) => rate,
            (None, None) => 0.0, // check_relations refuses this combination
        }
    }

    fn derived_rate_rps(&self) -> Option<f64> {
        let lambda_max = self.calibration.lambda_max_rps?;
        let fraction = self.value("calibration.lambda_r_fraction").as_f64()?;
        Some(self.target.replicas.len() as f64 * fraction * lambda_max)
    }

    /// When the fault fires, in ns from the schedule's start (end of warm-up plus baseline).
    pub fn inject_at_ns(&self) -> Option<u64> {
        (self.fault.variant != FaultVariant::None).then(|| {
            self.duration_ns("experiment.warmup_s") + self.duration_ns("experiment.baseline_s")
        })
    }

    /// The schedule parameters this configuration defines (SPEC §1 phases, §J schedule).
    pub fn schedule_params(&self) -> ScheduleParams {
        let rate_rps = self.rate_rps();
        let phase = |name: &str, key: &str| Phase {
            name: name.into(),
            duration_ns: self.duration_ns(key),
            rate_rps,
        };
        let spike = self
            .schedule
            .spike_factor
            .filter(|_| self.fault.variant == FaultVariant::Degradation);
        let phases = if let Some(factor) = spike {
            let recovery = self.duration_ns("experiment.recovery_timeout_s");
            let spike_ns = self.duration_ns("fault.degradation_s").min(recovery);
            vec![
                phase("warmup", "experiment.warmup_s"),
                phase("baseline", "experiment.baseline_s"),
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
                phase("cooldown", "experiment.cooldown_s"),
            ]
        } else if self.calibration.step {
            vec![
                phase("warmup", "calibration.settle_s"),
                phase("measurement", "calibration.measure_s"),
            ]
        } else if self.fault.variant == FaultVariant::None {
            vec![
                phase("warmup", "experiment.warmup_s"),
                phase("measurement", "experiment.baseline_s"),
                phase("cooldown", "experiment.cooldown_s"),
            ]
        } else {
            vec![
                phase("warmup", "experiment.warmup_s"),
                phase("baseline", "experiment.baseline_s"),
                phase("fault-recovery", "experiment.recovery_timeout_s"),
                phase("cooldown", "experiment.cooldown_s"),
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
        }
    }

    /// The declaration's references: its target and route labels exist, the classes are
    /// disjoint, the budget is a share and the window positive.
    fn check_declaration(&self, d: &Declaration) -> Result<(), ConfigError> {
        let invalid = |key: &str, message: String| ConfigError::Invalid {
            key: format!("declaration.{key}"),
            message,
        };
        if !self.target.replicas.contains(&d.target) {
            return Err(invalid(
                "target",
                format!(
                    "{:?} must name one of target.replicas {:?}",
                    d.target, self.target.replicas
                ),
            ));
        }
        if let Some(victim) = &self.fault.victim {
            if self.fault.variant != FaultVariant::None && *victim != d.target {
                return Err(ConfigError::Inconsistent {
                    clause: "seeds/004",
                    message: format!(
                        "the declared target {:?} is not the fault's victim {victim:?}: one named fault, one declared blast radius",
                        d.target
                    ),
                });
            }
        }
        let labels: Vec<&str> = self.routes.iter().map(|r| r.label.as_str()).collect();
        for (key, list) in [
            ("protected_routes", &d.protected_routes),
            ("shed_routes", &d.shed_routes),
        ] {
            if let Some(unknown) = list.iter().find(|l| !labels.contains(&l.as_str())) {
                return Err(invalid(
                    key,
                    format!("{unknown:?} is not a route label (routes: {labels:?})"),
                ));
            }
        }
        if let Some(both) = d
            .protected_routes
            .iter()
            .find(|l| d.shed_routes.contains(l))
        {
            return Err(invalid(
                "shed_routes",
                format!("{both:?} is also protected; a route is one or the other"),
            ));
        }
        if let Some(rate) = d.abort.protected_failure_rate {
            if !(0.0..1.0).contains(&rate) {
                return Err(invalid(
                    "abort.protected_failure_rate",
                    format!("{rate} must be a share in [0, 1)"),
                ));
            }
            if d.protected_routes.is_empty() {
                return Err(invalid(
                    "abort.protected_failure_rate",
                    "a budget for protected traffic needs declaration.protected_routes".into(),
                ));
            }
        }
        if !(d.abort.window_s.is_finite() && d.abort.window_s > 0.0) {
            return Err(invalid(
                "abort.window_s",
                format!("{} must be a positive number of seconds", d.abort.window_s),
            ));
        }
        if d.experiment_id.trim().is_empty() {
            return Err(invalid("experiment_id", "must not be empty".into()));
        }
        Ok(())
    }

    /// Rules that relate several keys.
    fn check_relations(&self) -> Result<(), ConfigError> {
        let invalid = |key: &str, message: String| ConfigError::Invalid {
            key: key.into(),
            message,
        };
        let url = &self.target.base_url;
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            return Err(invalid(
                "target.base_url",
                format!("{url:?} must start with http:// or https://"),
            ));
        }
        if self.routes.is_empty() {
            return Err(invalid(
                "routes",
                "at least one [[routes]] entry is needed".into(),
            ));
        }
        let mut labels = std::collections::BTreeSet::new();
        for (i, route) in self.routes.iter().enumerate() {
            if route.weight == 0 {
                return Err(invalid(
                    &format!("routes[{i}].weight"),
                    "must be at least 1".into(),
                ));
            }
            if !route.path.starts_with('/') {
                return Err(invalid(
                    &format!("routes[{i}].path"),
                    format!("{:?} must start with /", route.path),
                ));
            }
            if !labels.insert(route.label.as_str()) {
                return Err(invalid(
                    &format!("routes[{i}].label"),
                    format!("{:?} appears twice", route.label),
                ));
            }
        }
        let hosted_kind = self.target.kind == TargetKind::Hosted;
        if (self.profile == Profile::Hosted) != hosted_kind {
            return Err(ConfigError::Inconsistent {
                clause: "§6",
                message: format!(
                    "profile \"{}\" with target.kind \"{}\": the hosted profile and a hosted target go together",
                    self.profile.name(),
                    self.target.kind.name()
                ),
            });
        }
        // §6: the one pin whose value depends on the target.
        let required_ignore_eos = !hosted_kind;
        if let Some(ignore_eos) = self.target.ignore_eos {
            if ignore_eos != required_ignore_eos {
                return Err(ConfigError::Inconsistent {
                    clause: "§6",
                    message: format!(
                        "config key `target.ignore_eos` = {ignore_eos}: {} targets must send ignore_eos = {}",
                        if hosted_kind { "hosted" } else { "self-hosted and mock" },
                        required_ignore_eos
                    ),
                });
            }
        }
        if hosted_kind && self.fault.variant != FaultVariant::None {
            return Err(ConfigError::Inconsistent {
                clause: "§6",
                message:
                    "a hosted run is not a run of the §1 experiment: fault.variant must be \"none\""
                        .into(),
            });
        }
        for (name, address) in &self.target.replica_addresses {
            let key = format!("target.replica_addresses.{name}");
            if !self.target.replicas.contains(name) {
                return Err(invalid(
                    &key,
                    format!(
                        "{name:?} is not one of target.replicas {:?}",
                        self.target.replicas
                    ),
                ));
            }
            if address.parse::<std::net::SocketAddr>().is_err() {
                return Err(invalid(
                    &key,
                    format!("{address:?} is not an ip:port address (the probe does no DNS)"),
                ));
            }
        }
        if let Some(factor) = self.schedule.spike_factor {
            if self.fault.variant != FaultVariant::Degradation {
                return Err(ConfigError::Inconsistent {
                    clause: "§1",
                    message: format!(
                        "schedule.spike_factor changes the offered rate, which the {} experiment pins; a spike belongs to a degradation scenario",
                        self.fault.variant.name()
                    ),
                });
            }
            if !(factor.is_finite() && (1.0..=10.0).contains(&factor)) {
                return Err(invalid(
                    "schedule.spike_factor",
                    format!("{factor} must lie in 1..=10"),
                ));
            }
        }
        if self.fault.variant == FaultVariant::Degradation && self.target.replicas.is_empty() {
            return Err(invalid(
                "target.replicas",
                "a degradation needs the replica it degrades".into(),
            ));
        }
        if self.fault.variant != FaultVariant::None {
            if self.fault.variant.is_replica_loss() && self.target.replicas.len() != 2 {
                return Err(ConfigError::Inconsistent {
                    clause: "§1",
                    message: format!(
                        "the replica-loss experiment has 2 replicas; target.replicas lists {}",
                        self.target.replicas.len()
                    ),
                });
            }
            match &self.fault.victim {
                Some(victim) if self.target.replicas.contains(victim) => {}
                other => {
                    return Err(invalid(
                        "fault.victim",
                        format!(
                            "{other:?} must name one of target.replicas {:?}",
                            self.target.replicas
                        ),
                    ))
                }
            }
            let Some(derived) = self.derived_rate_rps() else {
                return Err(ConfigError::Inconsistent {
                    clause: "§1",
                    message: "a fault run's rate is replicas x 0.65 x lambda_max: set calibration.lambda_max_rps \
                              (measured by `percentes calibrate`, §10)"
                        .into(),
                });
            };
            if let Some(rate) = self.schedule.rate_rps {
                if (rate - derived).abs() > 1e-9 * derived.max(1.0) {
                    return Err(ConfigError::Inconsistent {
                        clause: "§1",
                        message: format!(
                            "schedule.rate_rps = {rate} but replicas x lambda_r = {derived}; remove \
                             schedule.rate_rps to use the derived rate"
                        ),
                    });
                }
            }
        } else if self.schedule.rate_rps.is_none() {
            return Err(invalid(
                "schedule.rate_rps",
                "required when fault.variant = \"none\"".into(),
            ));
        }
        if let Some(d) = &self.declaration {
            self.check_declaration(d)?;
        }
        if self.calibration.step {
            if self.fault.variant != FaultVariant::None {
                return Err(ConfigError::Inconsistent {
                    clause: "§10",
                    message: "a calibration step (calibration.step = true) injects no fault; set fault.variant = \"none\"".into(),
                });
            }
            if self.target.replicas.len() != 1 {
                return Err(ConfigError::Inconsistent {
                    clause: "§10",
                    message: format!(
                        "a calibration step addresses one replica directly; target.replicas lists {}",
                        self.target.replicas.len()
                    ),
                });
            }
        }
        for key in ["schedule.rate_rps", "calibration.lambda_max_rps"] {
            let value = if key == "schedule.rate_rps" {
                self.schedule.rate_rps
            } else {
                self.calibration.lambda_max_rps
            };
            if let Some(v) = value {
                if !(v.is_finite() && v > 0.0 && v <= crate::schedule::RATE_RPS_MAX) {
                    return Err(invalid(
                        key,
                        format!(
                            "{v} must be a positive rate of at most {} rps",
                            crate::schedule::RATE_RPS_MAX
                        ),
                    ));
                }
            }
        }
        if self.fault.variant != FaultVariant::None {
            let f = &self.fault;
            let missing = |what: &str| ConfigError::Invalid {
                key: "fault.injector".into(),
                message: what.into(),
            };
            match f.injector {
                None => {
                    return Err(missing(
                        "a fault run needs an injector: exec, kill-pid-file or mock-admin",
                    ))
                }
                Some(Injector::Exec) if f.fire_command.is_empty() => {
                    return Err(missing(
                        "injector \"exec\" needs fault.fire_command (an argv list)",
                    ))
                }
                Some(Injector::KillPidFile) if f.pid_file.is_none() => {
                    return Err(missing("injector \"kill-pid-file\" needs fault.pid_file"))
                }
                Some(Injector::MockAdmin) if f.admin_address.is_none() || f.mock_mode.is_none() => {
                    return Err(missing(
                        "injector \"mock-admin\" needs fault.admin_address and fault.mock_mode",
                    ))
                }
                _ if f.confirm_path.is_some() != f.confirm_status.is_some()
                    || (f.confirm_path.is_some() && f.confirm_address.is_none()) =>
                {
                    return Err(ConfigError::Invalid {
                        key: "fault.confirm_path".into(),
                        message: "fault.confirm_path, fault.confirm_status and fault.confirm_address go together".into(),
                    })
                }
                _ if (f.confirm_method.is_some() || f.confirm_contains.is_some())
                    && f.confirm_path.is_none() =>
                {
                    return Err(ConfigError::Invalid {
                        key: "fault.confirm_method".into(),
                        message: "fault.confirm_method and fault.confirm_contains qualify fault.confirm_path, which is missing".into(),
                    })
                }
                _ if f
                    .confirm_method
                    .as_deref()
                    .is_some_and(|m| m != "GET" && m != "POST") =>
                {
                    return Err(ConfigError::Invalid {
                        key: "fault.confirm_method".into(),
                        message: format!("{:?}: GET or POST", f.confirm_method.as_deref().unwrap_or_default()),
                    })
                }
                _ if f.variant == FaultVariant::Degradation
                    && f.confirm_address.is_some()
                    && f.confirm_path.is_none() =>
                {
                    return Err(ConfigError::Invalid {
                        key: "fault.confirm_path".into(),
                        message: "a degraded replica still answers: confirm a degradation with fault.confirm_path and fault.confirm_status, not by silence".into(),
                    })
                }
                Some(Injector::KillPidFile) if f.variant == FaultVariant::Degradation => {
                    return Err(missing(
                        "a degradation is removed after the pinned fault.degradation_s; a kill cannot be: use mock-admin or exec",
                    ))
                }
                _ => {}
            }
        }
        if let Some(victim) = &self.fault.victim {
            if self.fault.variant == FaultVariant::None {
                return Err(invalid(
                    "fault.victim",
                    format!("{victim:?} set, but fault.variant = \"none\""),
                ));
            }
        }
        if self.schedule_params().total_duration_ns() == 0 {
            return Err(invalid(
                "experiment",
                "the phases add up to zero seconds".into(),
            ));
        }
        Ok(())
    }
}

/// A TOML value as the user wrote it, for error messages.
fn show(value: &toml::Value) -> String {
    match value {
        toml::Value::Integer(v) => v.to_string(),
        toml::Value::Float(v) => format!("{v:?}"),
        toml::Value::Boolean(v) => v.to_string(),
        toml::Value::String(v) => format!("{v:?}"),
        other => format!("a {}", other.type_str()),
    }
}

/// Sections that hold only pinned keys.
const PINNED_ONLY_SECTIONS: &[&str] = &[
    "experiment",
    "client",
    "gates",
    "slo",
    "recovery",
    "analysis",
    "campaign",
    "statistics",
];

/// Checks and removes every keyed pin from the table; returns the configured values.
fn take_pins(table: &mut toml::Table) -> Result<BTreeMap<&'static str, Value>, ConfigError> {
    let mut configured = BTreeMap::new();
    for pin in PINS.iter().filter(|p| p.configurable) {
        let key = pin.key;
        let (section, leaf) = match key.split_once('.') {
            Some((s, l)) => (Some(s), l),
            None => (None, key),
        };
        let holder = match section {
            None => Some(&mut *table),
            Some(s) => match table.get_mut(s) {
                Some(toml::Value::Table(t)) => Some(t),
                Some(_) => {
                    return Err(ConfigError::Invalid {
                        key: s.into(),
                        message: "must be a [section]".into(),
                    })
                }
                None => None,
            },
        };
        let Some(found) = holder.and_then(|t| t.remove(leaf)) else {
            if key == "schema_version" {
                return Err(ConfigError::Invalid {
                    key: key.into(),
                    message: "missing; this build reads schema_version = 1 (§6)".into(),
                });
            }
            continue;
        };
        let value = match (pin.value, &found) {
            (Value::Int(_), toml::Value::Integer(v)) => Value::Int(*v),
            (Value::Float(_), toml::Value::Float(v)) => Value::Float(*v),
            (Value::Float(_), toml::Value::Integer(v)) => Value::Float(*v as f64),
            (Value::Bool(_), toml::Value::Boolean(v)) => Value::Bool(*v),
            (expected, other) => {
                return Err(ConfigError::Invalid {
                    key: key.into(),
                    message: format!(
                        "expected {} like {expected}, found {}",
                        match expected {
                            Value::Int(_) => "an integer",
                            Value::Float(_) => "a number",
                            Value::Bool(_) => "a boolean",
                        },
                        other.type_str()
                    ),
                })
            }
        };
        if key == "schema_version" && pins::weakens(pin, value) {
            return Err(ConfigError::Invalid {
                key: key.into(),
                message: format!(
                    "{value} is not a schema this build reads; it reads schema_version = 1 (§6)"
                ),
            });
        }
        if pins::weakens(pin, value) || value.as_f64().is_some_and(|v| !v.is_finite()) {
            return Err(ConfigError::WeakensPin {
                key,
                clause: pin.clause,
                what: pin.what,
                rule: pin.rule,
                pinned: pin.value,
                configured: show(&found),
            });
        }
        configured.insert(key, value);
    }
    for section in PINNED_ONLY_SECTIONS {
        match table.get(*section) {
            Some(toml::Value::Table(rest)) => {
                if let Some(unknown) = rest.keys().next() {
                    let prefix = format!("{section}.");
                    return Err(ConfigError::UnknownKey {
                        key: format!("{section}.{unknown}"),
                        known: PINS
                            .iter()
                            .filter(|p| p.configurable && p.key.starts_with(&prefix))
                            .map(|p| p.key.to_owned())
                            .collect(),
                    });
                }
                table.remove(*section);
            }
            Some(_) => {
                return Err(ConfigError::Invalid {
                    key: (*section).into(),
                    message: "must be a [section]".into(),
                })
            }
            None => {}
        }
    }
    // [calibration] may hold only pins; once they are taken, an empty section is dropped so the
    // typed stage sees an absent (defaulted) section rather than an empty table.
    if matches!(table.get("calibration"), Some(toml::Value::Table(t)) if t.is_empty()) {
        table.remove("calibration");
    }
    Ok(configured)
}

/// The commented example configuration `percentes init` writes for a profile.
pub fn example(profile: Profile) -> &'static str {
    match profile {
        Profile::Dev => include_str!("config/examples/dev.toml"),
        Profile::Experiment => include_str!("config/examples/experiment.toml"),
        Profile::Hosted => include_str!("config/examples/hosted.toml"),
    }
}

#[cfg(test)]
mod tests;
