//! The schedule: every request's intended send time, fixed before the first send (SPEC §J.4).
//!
//! `t_i` is a pure function of the parameters and `i`. Each random draw `k` comes from a
//! counter-based generator (SplitMix64's finalizer over seed, stream and `k`), so no draw depends
//! on generator state carried between calls; the Poisson gaps use `libm`'s `ln`, which gives the same bits on every
//! OS, and times are summed in integer nanoseconds. An analyzer regenerates the schedule from the
//! journal header years later and must get the same digest.
//!
//! ```
//! use percentes_formats::schedule::{Arrival, Phase, RouteWeight, ScheduleParams};
//! let params = ScheduleParams {
//!     seed: 7,
//!     arrival: Arrival::Deterministic,
//!     phases: vec![Phase { name: "measurement".into(), duration_ns: 1_000_000_000, rate_rps: 4.0 }],
//!     routes: vec![RouteWeight { label: "chat".into(), weight: 1 }],
//!     inject_at_ns: None,
//! };
//! let times: Vec<u64> = params.iter().map(|e| e.intended_ns).collect();
//! assert_eq!(times, [0, 250_000_000, 500_000_000, 750_000_000]);
//! ```

use serde::Deserialize;

/// Highest offered rate a schedule may have. Well above what one recorder host sustains; the
/// bound keeps a typo (an extra zero or five) from building a schedule that fills memory.
pub const RATE_RPS_MAX: f64 = 1_000_000.0;
/// Most requests one schedule may hold (2^32: a request's route and phase are u32 indices).
pub const REQUESTS_MAX: u64 = 1 << 32;

/// How arrivals are spaced within a phase.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Arrival {
    /// Exponential gaps (characterization runs, §1).
    Poisson,
    /// Evenly spaced (diagnostics, §1).
    Deterministic,
}

impl Arrival {
    /// The byte that stands for it in the journal header.
    pub fn code(self) -> u8 {
        match self {
            Arrival::Poisson => 0,
            Arrival::Deterministic => 1,
        }
    }
    /// The arrival law with this header byte.
    pub fn from_code(code: u8) -> Option<Arrival> {
        match code {
            0 => Some(Arrival::Poisson),
            1 => Some(Arrival::Deterministic),
            _ => None,
        }
    }
    /// Its name in a configuration file.
    pub fn name(self) -> &'static str {
        match self {
            Arrival::Poisson => "poisson",
            Arrival::Deterministic => "deterministic",
        }
    }
}

/// A stretch of the run at one offered rate.
#[derive(Clone, Debug, PartialEq)]
pub struct Phase {
    /// The phase's name (`warmup`, `baseline`, `spike`, `fault-recovery`, `measurement`, `cooldown`).
    pub name: String,
    /// Its length, ns (after the dev time factor).
    pub duration_ns: u64,
    /// Its offered rate, requests per second.
    pub rate_rps: f64,
}

/// A route label and its weight in the mix.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RouteWeight {
    /// The route's label.
    pub label: String,
    /// Its weight in the mix.
    pub weight: u32,
}

/// Everything that determines the schedule.
#[derive(Clone, Debug, PartialEq)]
pub struct ScheduleParams {
    /// The seed of the counter-based draws.
    pub seed: u64,
    /// How arrivals are spaced.
    pub arrival: Arrival,
    /// The phases, in order.
    pub phases: Vec<Phase>,
    /// The route mix, in configuration order.
    pub routes: Vec<RouteWeight>,
    /// T_inject in ns from the schedule's start, for runs with a fault.
    pub inject_at_ns: Option<u64>,
}

/// One scheduled request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry {
    /// Its index in the schedule: unique, from 0.
    pub index: u64,
    /// Intended send time, ns from the journal's epoch.
    pub intended_ns: u64,
    /// Index into [`ScheduleParams::routes`].
    pub route: u32,
    /// Index into [`ScheduleParams::phases`].
    pub phase: u32,
}

/// The phases that are not measured: the warm-up (discarded, §1) and the cooldown.
pub const UNMEASURED_PHASES: [&str; 2] = ["warmup", "cooldown"];

impl ScheduleParams {
    /// The schedule's length, ns.
    pub fn total_duration_ns(&self) -> u64 {
        self.phases.iter().map(|p| p.duration_ns).sum()
    }

    /// The measured span, ns from the schedule's start: from the first phase that is neither
    /// warm-up nor cooldown to the end of the last such phase (`(0, 0)` when there is none). The
    /// recorder's telemetry and the analyzer's windows both read this one definition (§2 reads
    /// the client gate over it).
    pub fn measured_span_ns(&self) -> (u64, u64) {
        let mut at = 0u64;
        let (mut start, mut end) = (None, 0u64);
        for phase in &self.phases {
            let measured = !UNMEASURED_PHASES.contains(&phase.name.as_str());
            if measured && start.is_none() {
                start = Some(at);
            }
            at += phase.duration_ns;
            if measured {
                end = at;
            }
        }
        (start.unwrap_or(0), end)
    }

    /// The entries in index order. Lazily generated: memory stays constant.
    pub fn iter(&self) -> ScheduleIter<'_> {
        ScheduleIter {
            params: self,
            index: 0,
            draws: 0,
            phase: 0,
            phase_start_ns: 0,
            within: 0,
            poisson_at_ns: 0,
        }
    }

    /// BLAKE3 over every entry's canonical bytes (SPEC §J.4): the domain string
    /// `percentes schedule v1`, then per entry `index u64, intended_ns u64, route u32, phase u32`,
    /// little-endian.
    pub fn digest(&self) -> [u8; 32] {
        let mut hasher = blake3::Hasher::new();
        hasher.update(b"percentes schedule v1");
        let mut buffer = Vec::with_capacity(24 * 4096);
        for entry in self.iter() {
            buffer.extend_from_slice(&entry.index.to_le_bytes());
            buffer.extend_from_slice(&entry.intended_ns.to_le_bytes());
            buffer.extend_from_slice(&entry.route.to_le_bytes());
            buffer.extend_from_slice(&entry.phase.to_le_bytes());
            if buffer.len() >= 24 * 4096 {
                hasher.update(&buffer);
                buffer.clear();
            }
        }
        hasher.update(&buffer);
        *hasher.finalize().as_bytes()
    }

    /// Checks the parameters can build a schedule; the message says which field is wrong.
    pub fn validate(&self) -> Result<(), String> {
        if self.phases.is_empty() {
            return Err("a schedule needs at least one phase".into());
        }
        for (i, phase) in self.phases.iter().enumerate() {
            if !(phase.rate_rps.is_finite()
                && phase.rate_rps > 0.0
                && phase.rate_rps <= RATE_RPS_MAX)
            {
                return Err(format!(
                    "phase {i} ({}) rate {} is not in (0, {RATE_RPS_MAX}]",
                    phase.name, phase.rate_rps
                ));
            }
            let expected = phase.rate_rps * phase.duration_ns as f64 / 1e9;
            if expected > REQUESTS_MAX as f64 / 2.0 {
                return Err(format!(
                    "phase {i} ({}) would schedule about {expected:.0} requests",
                    phase.name
                ));
            }
        }
        if self.routes.is_empty() || self.routes.iter().any(|r| r.weight == 0) {
            return Err("a schedule needs at least one route, each with weight >= 1".into());
        }
        Ok(())
    }

    fn route_for(&self, index: u64) -> u32 {
        if self.routes.len() == 1 {
            return 0;
        }
        let total: u64 = self.routes.iter().map(|r| u64::from(r.weight)).sum();
        // Multiply-shift maps the 64-bit draw onto 0..total without modulo bias worth naming.
        let pick =
            ((u128::from(draw(self.seed, STREAM_ROUTE, index)) * u128::from(total)) >> 64) as u64;
        let mut acc = 0u64;
        for (i, route) in self.routes.iter().enumerate() {
            acc += u64::from(route.weight);
            if pick < acc {
                return i as u32;
            }
        }
        (self.routes.len() - 1) as u32
    }
}

const STREAM_GAP: u64 = 0;
const STREAM_ROUTE: u64 = 1;

/// SplitMix64's output function (Steele, Lea and Flood 2014).
fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The 64-bit draw for (seed, stream, counter): `mix64(seed ^ mix64(counter * 2 + stream))`.
fn draw(seed: u64, stream: u64, counter: u64) -> u64 {
    mix64(seed ^ mix64(counter.wrapping_mul(2).wrapping_add(stream)))
}

/// A uniform in (0, 1]: the top 53 bits of the draw, plus one, over 2^53.
fn unit_open_closed(seed: u64, stream: u64, counter: u64) -> f64 {
    ((draw(seed, stream, counter) >> 11) + 1) as f64 * (1.0 / (1u64 << 53) as f64)
}

/// Iterator over a schedule's entries.
#[derive(Debug)]
pub struct ScheduleIter<'a> {
    params: &'a ScheduleParams,
    index: u64,
    /// Poisson draws taken so far. Separate from `index`: the draw that overruns a phase is spent,
    /// so the next phase's first gap is a fresh draw, not the overrunning one at a new rate.
    draws: u64,
    phase: usize,
    phase_start_ns: u64,
    /// Requests already issued in the current phase.
    within: u64,
    /// Poisson: the running arrival time within the phase.
    poisson_at_ns: u64,
}

impl Iterator for ScheduleIter<'_> {
    type Item = Entry;

    fn next(&mut self) -> Option<Entry> {
        loop {
            let phase = self.params.phases.get(self.phase)?;
            let offset_ns = match self.params.arrival {
                Arrival::Deterministic => {
                    // k / rate seconds, computed afresh for each k so no rounding accumulates.
                    (self.within as f64 * 1e9 / phase.rate_rps) as u64
                }
                Arrival::Poisson => {
                    let u = unit_open_closed(self.params.seed, STREAM_GAP, self.draws);
                    self.draws += 1;
                    let gap_ns = (-libm::log(u) / phase.rate_rps * 1e9) as u64;
                    self.poisson_at_ns.saturating_add(gap_ns)
                }
            };
            if offset_ns >= phase.duration_ns || self.index >= REQUESTS_MAX {
                self.phase_start_ns += phase.duration_ns;
                self.phase += 1;
                self.within = 0;
                self.poisson_at_ns = 0;
                continue;
            }
            if self.params.arrival == Arrival::Poisson {
                self.poisson_at_ns = offset_ns;
            }
            let entry = Entry {
                index: self.index,
                intended_ns: self.phase_start_ns + offset_ns,
                route: self.params.route_for(self.index),
                phase: self.phase as u32,
            };
            self.index += 1;
            self.within += 1;
            return Some(entry);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(arrival: Arrival, rate: f64, seconds: u64) -> ScheduleParams {
        ScheduleParams {
            seed: 42,
            arrival,
            phases: vec![Phase {
                name: "m".into(),
                duration_ns: seconds * 1_000_000_000,
                rate_rps: rate,
            }],
            routes: vec![
                RouteWeight {
                    label: "a".into(),
                    weight: 3,
                },
                RouteWeight {
                    label: "b".into(),
                    weight: 1,
                },
            ],
            inject_at_ns: None,
        }
    }

    #[test]
    fn deterministic_spacing_is_exact() {
        let p = params(Arrival::Deterministic, 1000.0, 2);
        let entries: Vec<_> = p.iter().collect();
        assert_eq!(entries.len(), 2000);
        assert!(entries
            .iter()
            .enumerate()
            .all(|(i, e)| e.intended_ns == i as u64 * 1_000_000));
    }

    #[test]
    fn poisson_rate_and_gap_mean_are_right() {
        let p = params(Arrival::Poisson, 500.0, 200);
        let entries: Vec<_> = p.iter().collect();
        let n = entries.len() as f64;
        // 100,000 expected; Poisson sd is about 316.
        assert!((n - 100_000.0).abs() < 1_500.0, "count {n}");
        assert!(entries
            .windows(2)
            .all(|w| w[1].intended_ns >= w[0].intended_ns));
        let share_a = entries.iter().filter(|e| e.route == 0).count() as f64 / n;
        assert!((share_a - 0.75).abs() < 0.01, "route share {share_a}");
    }

    #[test]
    fn same_seed_same_digest_other_seed_other_digest() {
        let a = params(Arrival::Poisson, 50.0, 10);
        let mut b = a.clone();
        assert_eq!(a.digest(), b.digest());
        b.seed = 43;
        assert_ne!(a.digest(), b.digest());
    }

    #[test]
    fn phases_follow_each_other() {
        let mut p = params(Arrival::Deterministic, 10.0, 1);
        p.phases.push(Phase {
            name: "n".into(),
            duration_ns: 1_000_000_000,
            rate_rps: 2.0,
        });
        let times: Vec<_> = p.iter().map(|e| (e.intended_ns, e.phase)).collect();
        assert_eq!(times.len(), 12);
        assert_eq!(times[10], (1_000_000_000, 1));
        assert_eq!(times[11], (1_500_000_000, 1));
    }

    #[test]
    fn digest_is_pinned() {
        // Changing the generator changes every archived journal's schedule digest: this test
        // is the alarm. The value was produced by this code when schedule v1 was frozen.
        let p = params(Arrival::Poisson, 20.0, 5);
        let hex: String = p.digest().iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(hex, SCHEDULE_V1_DIGEST);
    }

    const SCHEDULE_V1_DIGEST: &str =
        "8eae1333b1e0f4d70987a503a79b534a7eea8ba7b8d0dea6852106fbca9e54da";
}
