//! The schedule: every request's intended send time, fixed before the first send (SPEC §J.4).
//!
//! `t_i` is a pure function of the parameters and `i`. Each random draw `k` comes from a
//! counter-based generator (SplitMix64's finalizer over seed, stream and `k`), so no draw depends
//! on generator state carried between calls; the Poisson gaps use `libm`'s `ln`, which gives the same bits on every
//! OS, and times are summed in integer nanoseconds. An analyzer regenerates the schedule from the
//! journal header years later and must get the same digest.
//!
//! ```
//! use percentes_formats::schedule::{Arrival, Grid, Phase, RouteWeight, ScheduleParams};
//! let params = ScheduleParams {
//!     seed: 7,
//!     arrival: Arrival::Deterministic,
//!     phases: vec![Phase { name: "measurement".into(), duration_ns: 1_000_000_000, rate_rps: 4.0 }],
//!     routes: vec![RouteWeight { label: "chat".into(), weight: 1 }],
//!     inject_at_ns: None,
//!     grid: Grid::Continuous,
//!     workload: Default::default(),
//!     prefixes: None,
//!     abandon: None,
//!     history: None,
//! };
//! let times: Vec<u64> = params.iter().map(|e| e.intended_ns).collect();
//! assert_eq!(times, [0, 250_000_000, 500_000_000, 750_000_000]);
//! ```

use serde::Deserialize;

mod abandon;
mod history;
mod prefix;
mod workload;
pub use abandon::{AbandonError, Abandonment, ABANDON_EXTENSION, ABANDON_MEAN_NS_MAX};
pub use history::{History, HistoryError, HISTORY_EXTENSION};
pub use prefix::{
    PrefixError, PrefixPool, PREFIX_ENTRIES_MAX, PREFIX_EXTENSION, PREFIX_LENGTHS_MAX,
    PREFIX_TOKENS_MAX, SHARE_SCALE,
};
pub use workload::{
    Think, ThinkLaw, Workload, WorkloadDecodeError, TURNS_MAX, USERS_MAX, WORKLOAD_EXTENSION,
};

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

/// How deterministic arrivals are placed across phase boundaries (SPEC §J.4). The journal header
/// records it (formats/JOURNAL.md, the `schedule-rule` extension), so a journal regenerates under
/// the rule it was recorded with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Grid {
    /// Rule 1, journals recorded before 2026-12-01 (no `schedule-rule` extension): each phase
    /// restarts its k / rate grid at its own start, so a boundary that is not a multiple of
    /// 1 / rate puts two sends closer (or further) than 1 / rate apart.
    PerPhase,
    /// Rule 2: a phase at the same rate as the one before continues that phase's grid, so a run
    /// at one rate is the one grid k / rate from the schedule's start; a phase at a new rate
    /// starts its grid at its own start.
    Continuous,
}

/// The header extension that names the schedule rule (absent: rule 1).
pub const SCHEDULE_RULE_EXTENSION: &str = "schedule-rule";

impl Grid {
    /// The rule's number as the header's extension writes it; `None` for rule 1, which journals
    /// from before the extension carry by its absence.
    pub fn code(self) -> Option<u8> {
        match self {
            Grid::PerPhase => None,
            Grid::Continuous => Some(2),
        }
    }

    /// The rule an extension value names, if this build knows it.
    pub fn from_code(code: &[u8]) -> Option<Grid> {
        match code {
            [2] => Some(Grid::Continuous),
            _ => None,
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
    /// How deterministic arrivals continue across phases (the rule the journal was recorded
    /// under).
    pub grid: Grid,
    /// The workload model ([`Workload`]): open unless the header's `workload` extension says
    /// otherwise.
    pub workload: Workload,
    /// The shared-prefix pool ([`PrefixPool`]), when the workload declares one (the header's
    /// `prefix-pool` extension).
    pub prefixes: Option<PrefixPool>,
    /// The requests the client abandons ([`Abandonment`]), when the workload declares it (the
    /// header's `abandonment` extension).
    pub abandon: Option<Abandonment>,
    /// What each turn carries of its session's earlier turns ([`History`]), when the workload
    /// declares it (the header's `conversation-history` extension).
    pub history: Option<History>,
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
    /// The session (closed: the user) it belongs to: its first request's index (for an open or
    /// replayed request, its own).
    pub session: u64,
    /// Its place in the session, from 0.
    pub turn: u32,
}

/// The phases that are not measured: the warm-up (discarded, §1) and the cooldown.
pub const UNMEASURED_PHASES: [&str; 2] = ["warmup", "cooldown"];

/// Why schedule parameters cannot build a schedule; a phase is named by its index and name.
#[derive(Clone, Debug, PartialEq)]
pub enum ScheduleError {
    /// No phase.
    NoPhase,
    /// A phase's rate outside (0, [`RATE_RPS_MAX`]].
    Rate {
        /// The phase's index and name.
        phase: (usize, String),
        /// Its rate.
        rate_rps: f64,
    },
    /// A phase that would schedule more than half of [`REQUESTS_MAX`].
    TooMany {
        /// The phase's index and name.
        phase: (usize, String),
        /// About how many it would schedule.
        expected: f64,
    },
    /// No route, or a route of weight 0.
    NoRoute,
    /// A closed loop's users outside 1..=[`USERS_MAX`].
    Users(u32),
    /// Sessions' turns outside 1..=[`TURNS_MAX`].
    Turns(u32),
    /// A trace of at least [`REQUESTS_MAX`] requests.
    Trace(usize),
}

impl std::fmt::Display for ScheduleError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ScheduleError::NoPhase => f.write_str("a schedule needs at least one phase"),
            ScheduleError::Rate {
                phase: (i, name),
                rate_rps,
            } => write!(
                f,
                "phase {i} ({name}) rate {rate_rps} is not in (0, {RATE_RPS_MAX}]"
            ),
            ScheduleError::TooMany {
                phase: (i, name),
                expected,
            } => write!(
                f,
                "phase {i} ({name}) would schedule about {expected:.0} requests"
            ),
            ScheduleError::NoRoute => {
                f.write_str("a schedule needs at least one route, each with weight >= 1")
            }
            ScheduleError::Users(users) => {
                write!(f, "{users} users is outside 1..={USERS_MAX}")
            }
            ScheduleError::Turns(turns) => {
                write!(f, "{turns} turns is outside 1..={TURNS_MAX}")
            }
            ScheduleError::Trace(n) => write!(f, "a trace of {n} requests"),
        }
    }
}

impl std::error::Error for ScheduleError {}

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
            grid_origin_ns: 0,
            within: 0,
            poisson_at_ns: 0,
        }
    }

    /// BLAKE3 over every entry's canonical bytes (SPEC §J.4): the domain string
    /// `percentes schedule v1`, then per entry `index u64, intended_ns u64, route u32, phase u32`,
    /// little-endian. A workload other than open hashes `percentes schedule v2`, the `workload`
    /// extension's length (u32) and bytes, then the same entries (the requests it fixes in
    /// advance): so the model, the think law and a replayed trace are covered too. A shared-prefix
    /// pool adds, after that opening, `prefix-pool`, its extension's length (u32) and bytes, so
    /// which request shares which prefix is covered as well, and an abandonment then
    /// `abandonment`, its length and bytes, and a conversation history then
    /// `conversation-history`, its length and bytes (a schedule without any hashes as before).
    pub fn digest(&self) -> [u8; 32] {
        let mut hasher = blake3::Hasher::new();
        match self.workload.encode() {
            None => {
                hasher.update(b"percentes schedule v1");
            }
            Some(bytes) => {
                hasher.update(b"percentes schedule v2");
                hasher.update(&(bytes.len() as u32).to_le_bytes());
                hasher.update(&bytes);
            }
        }
        let extensions = [
            self.prefixes
                .as_ref()
                .map(|pool| (PREFIX_EXTENSION, pool.encode())),
            self.abandon.map(|a| (ABANDON_EXTENSION, a.encode())),
            self.history.map(|h| (HISTORY_EXTENSION, h.encode())),
        ];
        for (key, bytes) in extensions.into_iter().flatten() {
            hasher.update(key.as_bytes());
            hasher.update(&(bytes.len() as u32).to_le_bytes());
            hasher.update(&bytes);
        }
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

    /// A replay's parameters with its trace's times: every phase's rate field holds the trace's
    /// mean rate over the whole schedule (it sizes the connection pool; each time is the
    /// trace's).
    pub fn replaying(mut self, offsets_ns: Vec<u64>) -> ScheduleParams {
        let seconds = self.total_duration_ns() as f64 / 1e9;
        let rate = if seconds > 0.0 {
            (offsets_ns.len() as f64 / seconds).max(f64::MIN_POSITIVE)
        } else {
            1.0
        };
        for phase in &mut self.phases {
            phase.rate_rps = rate;
        }
        self.workload = Workload::Replay {
            offsets_ns: offsets_ns.into(),
        };
        self
    }

    /// Which prompt `entry` sends (request i of a route uses prompt i mod n): an open or
    /// replayed request's index; under semi-open `session x turns + turn`, so a session's turns
    /// are the prompts in a row (a ShareGPT conversation's human turns, SPEC §1 "Workload
    /// models"); under closed `session + turn x users`. A follow-up's prompt is fixed by its
    /// session and turn, not by the order follow-ups were handed their indices.
    pub fn content(&self, entry: &Entry) -> u64 {
        match &self.workload {
            Workload::SemiOpen { turns, .. } => entry
                .session
                .wrapping_mul(u64::from(*turns))
                .wrapping_add(u64::from(entry.turn)),
            Workload::Closed { users, .. } => entry
                .session
                .wrapping_add(u64::from(entry.turn).wrapping_mul(u64::from(*users))),
            _ => entry.index,
        }
    }

    /// The phase a time (ns from the schedule's start) falls in; `None` at or past the end.
    pub fn phase_at(&self, at_ns: u64) -> Option<u32> {
        let mut end = 0u64;
        for (i, phase) in self.phases.iter().enumerate() {
            end += phase.duration_ns;
            if at_ns < end {
                return Some(i as u32);
            }
        }
        None
    }

    /// The request that follows `previous` in its session under a closed or semi-open model,
    /// given `previous`'s terminal time (ns from the epoch): intended at that time plus the
    /// think time drawn for its turn, on the session's route, in the phase that time falls in.
    /// `None` when the session ends there: the model has no follow-ups, a semi-open session has
    /// had its turns, or the time is past the schedule's end (a user stops with the run).
    /// `index` is called only when there is a follow-up, for the index it takes.
    pub fn follow_up(
        &self,
        previous: &Entry,
        terminal_ns: u64,
        index: impl FnOnce() -> u64,
    ) -> Option<Entry> {
        let turn = previous.turn.checked_add(1)?;
        let think = match &self.workload {
            Workload::Closed { think, .. } => *think,
            Workload::SemiOpen { turns, think } if turn < *turns => *think,
            _ => return None,
        };
        let intended_ns =
            terminal_ns.saturating_add(think.draw_ns(self.seed, previous.session, turn));
        let phase = self.phase_at(intended_ns)?;
        Some(Entry {
            index: index(),
            intended_ns,
            route: previous.route,
            phase,
            session: previous.session,
            turn,
        })
    }

    /// The users' first requests under a closed model: user `u` at `floor(u x W / users)` ns,
    /// `W` the warm-up's length when the first phase is the warm-up (so the measured windows
    /// see the whole population at work), else 0 (all at once).
    fn closed_start_ns(&self, user: u64, users: u32) -> u64 {
        let ramp = match self.phases.first() {
            Some(p) if p.name == "warmup" => p.duration_ns,
            _ => 0,
        };
        (u128::from(user) * u128::from(ramp) / u128::from(users)) as u64
    }

    /// Checks the parameters can build a schedule; the error says which field is wrong.
    pub fn validate(&self) -> Result<(), ScheduleError> {
        if self.phases.is_empty() {
            return Err(ScheduleError::NoPhase);
        }
        for (i, phase) in self.phases.iter().enumerate() {
            let at = || (i, phase.name.clone());
            if !(phase.rate_rps.is_finite()
                && phase.rate_rps > 0.0
                && phase.rate_rps <= RATE_RPS_MAX)
            {
                return Err(ScheduleError::Rate {
                    phase: at(),
                    rate_rps: phase.rate_rps,
                });
            }
            let expected = phase.rate_rps * phase.duration_ns as f64 / 1e9;
            if expected > REQUESTS_MAX as f64 / 2.0 {
                return Err(ScheduleError::TooMany {
                    phase: at(),
                    expected,
                });
            }
        }
        if self.routes.is_empty() || self.routes.iter().any(|r| r.weight == 0) {
            return Err(ScheduleError::NoRoute);
        }
        match &self.workload {
            Workload::Closed { users, .. } if !(1..=USERS_MAX).contains(users) => {
                Err(ScheduleError::Users(*users))
            }
            Workload::SemiOpen { turns, .. } if !(1..=TURNS_MAX).contains(turns) => {
                Err(ScheduleError::Turns(*turns))
            }
            Workload::Replay { offsets_ns } if offsets_ns.len() as u64 >= REQUESTS_MAX => {
                Err(ScheduleError::Trace(offsets_ns.len()))
            }
            _ => Ok(()),
        }
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

/// SplitMix64's output function (Steele, Lea and Flood 2014): a frozen, well-spread hash of one
/// word (the schedule's draws; a simulated target's per-request draw).
pub fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// What tags the shared-prefix draws, so they share no counter with the arrival, route and
/// think draws.
const PREFIX_TAG: u64 = 0x7072_6566_6978_0000;

impl PrefixPool {
    /// The entry session `session` opens with, or `None` (the shared-prefix module's
    /// documentation; JOURNAL.md "Schedule" rule 6).
    pub fn draw(&self, seed: u64, session: u64) -> Option<u32> {
        let d = mix64(seed ^ mix64(session ^ PREFIX_TAG));
        if d % u64::from(SHARE_SCALE) >= u64::from(self.share_ppm) || self.entries == 0 {
            return None;
        }
        Some((mix64(d) % u64::from(self.entries)) as u32)
    }
}

/// What tags the abandonment draws.
const ABANDON_TAG: u64 = 0x6162_616e_646f_6e00;

impl Abandonment {
    /// Request `index`'s delay from its intended time to its abandonment, ns, or `None` when it
    /// is not marked (the abandonment module's documentation; JOURNAL.md "Schedule" rule 7).
    pub fn draw(&self, seed: u64, index: u64) -> Option<u64> {
        let d = mix64(seed ^ mix64(index ^ ABANDON_TAG));
        if d % u64::from(SHARE_SCALE) >= u64::from(self.share_ppm) {
            return None;
        }
        Some(match self.law {
            ThinkLaw::Fixed => self.mean_ns,
            ThinkLaw::Exponential => {
                let u = ((mix64(d) >> 11) + 1) as f64 * (1.0 / (1u64 << 53) as f64);
                (-libm::log(u) * self.mean_ns as f64) as u64
            }
        })
    }
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
    /// Deterministic: where the current k / rate grid starts (the phase's start, or under
    /// [`Grid::Continuous`] the start of the first phase of a run of phases at one rate).
    grid_origin_ns: u64,
    /// Requests already issued on the current grid (deterministic) or in the phase (Poisson).
    within: u64,
    /// Poisson: the running arrival time within the phase.
    poisson_at_ns: u64,
}

impl ScheduleIter<'_> {
    /// The next entry of a closed or replayed schedule (a list of times, in order); `None` for
    /// the arrival processes.
    fn listed(&mut self) -> Option<Option<Entry>> {
        let at = match &self.params.workload {
            Workload::Closed { users, .. } => (self.index < u64::from(*users))
                .then(|| self.params.closed_start_ns(self.index, *users)),
            Workload::Replay { offsets_ns } => offsets_ns.get(self.index as usize).copied(),
            _ => return None,
        };
        let Some(at) = at else {
            return Some(None);
        };
        // The list is in time order, so the phase only moves forward.
        loop {
            let Some(phase) = self.params.phases.get(self.phase) else {
                return Some(None);
            };
            if at < self.phase_start_ns + phase.duration_ns {
                break;
            }
            self.phase_start_ns += phase.duration_ns;
            self.phase += 1;
        }
        let entry = Entry {
            index: self.index,
            intended_ns: at,
            route: self.params.route_for(self.index),
            phase: self.phase as u32,
            session: self.index,
            turn: 0,
        };
        self.index += 1;
        Some(Some(entry))
    }
}

impl Iterator for ScheduleIter<'_> {
    type Item = Entry;

    fn next(&mut self) -> Option<Entry> {
        // Closed and replayed schedules are lists, not arrival processes.
        if let Some(listed) = self.listed() {
            return listed;
        }
        loop {
            let phase = self.params.phases.get(self.phase)?;
            let (origin_ns, offset_ns) = match self.params.arrival {
                Arrival::Deterministic => {
                    // k / rate seconds from the grid's origin, computed afresh for each k so no
                    // rounding accumulates.
                    (
                        self.grid_origin_ns,
                        (self.within as f64 * 1e9 / phase.rate_rps) as u64,
                    )
                }
                Arrival::Poisson => {
                    let u = unit_open_closed(self.params.seed, STREAM_GAP, self.draws);
                    self.draws += 1;
                    let gap_ns = (-libm::log(u) / phase.rate_rps * 1e9) as u64;
                    (
                        self.phase_start_ns,
                        self.poisson_at_ns.saturating_add(gap_ns),
                    )
                }
            };
            let phase_end_ns = self.phase_start_ns + phase.duration_ns;
            if origin_ns.saturating_add(offset_ns) >= phase_end_ns || self.index >= REQUESTS_MAX {
                let rate = phase.rate_rps;
                self.phase_start_ns = phase_end_ns;
                self.phase += 1;
                self.poisson_at_ns = 0;
                // Rule 2: the next phase at the same rate takes the grid point that overran
                // this one as its first; anything else starts afresh at its own start.
                let continues = self.params.grid == Grid::Continuous
                    && self.params.arrival == Arrival::Deterministic
                    && self
                        .params
                        .phases
                        .get(self.phase)
                        .is_some_and(|next| next.rate_rps.to_bits() == rate.to_bits());
                if !continues {
                    self.within = 0;
                    self.grid_origin_ns = self.phase_start_ns;
                }
                continue;
            }
            if self.params.arrival == Arrival::Poisson {
                self.poisson_at_ns = offset_ns;
            }
            let entry = Entry {
                index: self.index,
                intended_ns: origin_ns + offset_ns,
                route: self.params.route_for(self.index),
                phase: self.phase as u32,
                session: self.index,
                turn: 0,
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
            grid: Grid::Continuous,
            workload: Workload::Open,
            prefixes: None,
            abandon: None,
            history: None,
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

    /// Issue 20's finding: at 1,000 rps with phase lengths that are not whole milliseconds (time
    /// factor 21), rule 1 restarts the grid at each boundary and two sends come 0.86 ms apart.
    #[test]
    fn rule_2_keeps_one_grid_across_phases_at_one_rate() {
        let phases = |second: f64| {
            vec![
                Phase {
                    name: "warmup".into(),
                    duration_ns: 1_000_500_000,
                    rate_rps: 1000.0,
                },
                Phase {
                    name: "measurement".into(),
                    duration_ns: 1_000_000_000,
                    rate_rps: second,
                },
            ]
        };
        let schedule = |grid, second| ScheduleParams {
            grid,
            workload: Workload::Open,
            phases: phases(second),
            ..params(Arrival::Deterministic, 1000.0, 1)
        };
        let times = |p: &ScheduleParams| p.iter().map(|e| e.intended_ns).collect::<Vec<_>>();
        // Rule 1: 0, 1, ..., 1000 ms in the first phase; the second restarts at 1000.5 ms.
        let old = times(&schedule(Grid::PerPhase, 1000.0));
        assert_eq!(old[1000], 1_000_000_000);
        assert_eq!(
            old[1001], 1_000_500_000,
            "the restart: 0.5 ms after the last send"
        );
        // Rule 2: every gap is 1 ms; the second phase's first send is the grid's next point.
        let new = schedule(Grid::Continuous, 1000.0);
        let t = times(&new);
        assert!(t.windows(2).all(|w| w[1] - w[0] == 1_000_000), "one grid");
        assert_eq!(t[1001], 1_001_000_000);
        let entries: Vec<Entry> = new.iter().collect();
        assert_eq!((entries[1000].phase, entries[1001].phase), (0, 1));
        assert_eq!(t.len(), 2001, "2.0005 s at 1 ms: 0 to 2000 ms");
        // A new rate starts its own grid at its phase's start under either rule.
        for grid in [Grid::PerPhase, Grid::Continuous] {
            let t = times(&schedule(grid, 500.0));
            assert_eq!(t[1001], 1_000_500_000, "{grid:?}");
            assert_eq!(t[1002] - t[1001], 2_000_000, "{grid:?}");
        }
        // The two rules are different schedules, with different digests.
        assert_ne!(
            schedule(Grid::PerPhase, 1000.0).digest(),
            schedule(Grid::Continuous, 1000.0).digest()
        );
        // Poisson arrivals do not depend on the rule.
        let poisson = |grid| ScheduleParams {
            grid,
            workload: Workload::Open,
            phases: phases(1000.0),
            ..params(Arrival::Poisson, 1000.0, 1)
        };
        assert_eq!(
            poisson(Grid::PerPhase).digest(),
            poisson(Grid::Continuous).digest()
        );
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
