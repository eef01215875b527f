//! The dev profile's durations as a user states them (SPEC §P "Durations in seconds"), whether
//! the time factor divides the client timeout, and the warnings a configuration earns when its
//! timeout cannot hold the requests it sends.
//!
//! A dev run is time-compressed by `dev.time_factor`, which divides every timeline pin. For a
//! run without a fault that is the wrong knob: a user wants "30 s of load", not "the 5-minute
//! baseline divided by 10", and dividing the client timeout with it censors every request of a
//! slow server silently. So `[dev]` may state the fault-free timeline in seconds
//! (`warmup_s`, `measure_s`, `cooldown_s`), and `scale_timeout` says whether the factor divides
//! `client.timeout_s`. Its default keeps every archived configuration's meaning: a
//! configuration that states its durations in seconds keeps the pinned timeout; one that only
//! states a time factor divides it, as it always has, and is warned about.

use super::{Config, ConfigError, Dev, FaultVariant};
use crate::pins;

/// The longest dev duration a configuration may state: a week, far past any dev run, short of
/// any overflow in nanoseconds.
const DEV_DURATION_S_MAX: f64 = 7.0 * 24.0 * 3600.0;

/// What `[dev]` states beyond the time factor, resolved to nanoseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DevTiming {
    /// `dev.warmup_s`: the fault-free run's warm-up (discarded), in ns; the dev-scaled pin when
    /// absent.
    pub warmup_ns: Option<u64>,
    /// `dev.measure_s`: the fault-free run's measured span, in ns; the dev-scaled baseline pin
    /// when absent.
    pub measure_ns: Option<u64>,
    /// `dev.cooldown_s`: the fault-free run's cooldown, in ns (0 leaves it out); the dev-scaled
    /// pin when absent.
    pub cooldown_ns: Option<u64>,
    /// `dev.scale_timeout` as written.
    pub scale_timeout: Option<bool>,
}

impl DevTiming {
    /// Whether any duration is stated in seconds.
    pub fn stated(&self) -> bool {
        self.warmup_ns.is_some() || self.measure_ns.is_some() || self.cooldown_ns.is_some()
    }

    /// Reads `[dev]`'s duration keys, each checked for its domain.
    pub(super) fn of(dev: Option<&Dev>) -> Result<DevTiming, ConfigError> {
        let Some(dev) = dev else {
            return Ok(DevTiming::default());
        };
        let seconds = |key: &str, value: Option<f64>, zero_allowed: bool| {
            let Some(s) = value else { return Ok(None) };
            let low_ok = if zero_allowed { s >= 0.0 } else { s > 0.0 };
            if !(s.is_finite() && low_ok && s <= DEV_DURATION_S_MAX) {
                return Err(ConfigError::Invalid {
                    key: format!("dev.{key}"),
                    message: format!(
                        "{s} s is not in {}0, {DEV_DURATION_S_MAX}] (seconds)",
                        if zero_allowed { "[" } else { "(" }
                    ),
                    at: None,
                });
            }
            Ok(Some((s * 1e9).round() as u64))
        };
        Ok(DevTiming {
            warmup_ns: seconds("warmup_s", dev.warmup_s, true)?,
            measure_ns: seconds("measure_s", dev.measure_s, false)?,
            cooldown_ns: seconds("cooldown_s", dev.cooldown_s, true)?,
            scale_timeout: dev.scale_timeout,
        })
    }
}

impl Config {
    /// Whether `dev.time_factor` divides `client.timeout_s`: as `dev.scale_timeout` says, and
    /// when it is absent, yes unless the durations are stated in seconds (SPEC §P).
    pub fn timeout_scaled(&self) -> bool {
        self.time_factor > 1 && self.dev.scale_timeout.unwrap_or_else(|| !self.dev.stated())
    }

    /// Whether the dev time factor divides this pin here.
    pub(super) fn divides(&self, pin: &pins::Pin) -> bool {
        if pin.key == pins::CLIENT_TIMEOUT_S.key {
            return self.timeout_scaled();
        }
        pin.dev_scaled
    }

    /// Checks the stated durations fit the run: only a fault-free run that is not a
    /// calibration step has the warm-up, measured span and cooldown they set.
    pub(super) fn check_timing(&self) -> Result<(), ConfigError> {
        if !self.dev.stated() {
            return Ok(());
        }
        let why = if self.calibration.step {
            Some("a calibration step's timeline is its pinned settle and measured span (§10)")
        } else if self.fault.variant != FaultVariant::None {
            Some("a fault run's timeline is §1's phases, time-compressed by dev.time_factor")
        } else {
            None
        };
        match why {
            Some(why) => Err(ConfigError::Inconsistent {
                clause: "§P",
                message: format!(
                    "dev.warmup_s, dev.measure_s and dev.cooldown_s state a fault-free run's timeline (fault.variant = \"none\"), and {why}: remove them, or use dev.time_factor"
                ),
            }),
            None => Ok(()),
        }
    }

    /// What a user should hear about this configuration before recording it: a client timeout
    /// the time factor shortens without saying so, and one shorter than `max_tokens` tokens at
    /// the stated `target.token_gap_ms`. `config check` and `record` print them.
    pub fn warnings(&self) -> Vec<String> {
        let mut out = Vec::new();
        let timeout_ns = self.duration_ns(&pins::CLIENT_TIMEOUT_S);
        let timeout = format_s(timeout_ns);
        if self.timeout_scaled() && self.dev.scale_timeout.is_none() {
            out.push(format!(
                "client.timeout_s ({} s, the censoring horizon) is divided by dev.time_factor {} to {timeout}: a request slower than that is censored at it. Set dev.scale_timeout = true to say that is meant, or false to keep the pin (SPEC §P)",
                self.number(&pins::CLIENT_TIMEOUT_S),
                self.time_factor
            ));
        }
        if let Some(gap_ms) = self.target.token_gap_ms {
            let tokens = self.number(&pins::TARGET_MAX_TOKENS);
            let needed_ns = (tokens * gap_ms * 1e6) as u64;
            if needed_ns >= timeout_ns {
                out.push(format!(
                    "target.max_tokens {tokens} x target.token_gap_ms {gap_ms} = {} does not fit in the client timeout {timeout}: a request that generates all its tokens is censored{}",
                    format_s(needed_ns),
                    if self.timeout_scaled() {
                        " (set dev.scale_timeout = false to keep the pinned timeout)"
                    } else {
                        ""
                    }
                ));
            }
        }
        if self.unattributed_under_layer_7() {
            out.push(format!(
                "target.routing is not declared, so G1 assumes layer-7 balancing and fails the run unless each request names its replica, and this {} target has no target.replica_header: set it to the header your proxy adds, or declare target.routing = \"layer-4\" (a Kubernetes Service: G1 recorded only; SPEC §1)",
                self.target.kind.name()
            ));
        }
        out
    }
}

/// Nanoseconds as seconds rounded to the millisecond, half up: `0.300 s`, 14.2857 s as
/// `14.286 s`. The one such formatter (`config check`, the warnings, the analyzer's v0.3 text).
pub fn format_s(ns: u64) -> String {
    let ms = ns / 1_000_000 + u64::from(ns % 1_000_000 >= 500_000);
    format!("{}.{:03} s", ms / 1000, ms % 1000)
}
