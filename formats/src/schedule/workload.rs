//! The workload model (SPEC §1 "Workload models", issue 37 item 3): which of seed 003's four
//! generation models a run used, chosen explicitly and journaled.
//!
//! - **open**: every request's intended time fixed before the first send (the default; the
//!   schedule of [`super::ScheduleParams`] as it always was).
//! - **closed**: `users` users, each sending its next request `think` after its previous one's
//!   terminal event. The users' first requests are fixed in advance (spread evenly over the
//!   warm-up); every later one is a *follow-up*, its intended time its user's previous terminal
//!   time plus a think time drawn in advance.
//! - **semi-open**: sessions arrive open-loop (the `[schedule]` arrivals, at the session rate),
//!   and each is a closed sequence of `turns` requests, a think time apart.
//! - **replay**: a trace's timestamps are the intended times (open-loop, fixed in advance).
//!
//! A follow-up's index is handed out when it is created, after every index the schedule fixes in
//! advance; its session and turn travel in its kind-6 extension (JOURNAL.md), and the analyzer
//! checks each against the model: turn `k` of session `s` intended at turn `k - 1`'s terminal time
//! plus [`Think::draw_ns`]`(seed, s, k)`.

use std::sync::Arc;

/// The header extension that names the workload model (absent: open).
pub const WORKLOAD_EXTENSION: &str = "workload";

/// Most users a closed run may have: one connection each, and a recorder host's sockets.
pub const USERS_MAX: u32 = 100_000;
/// Most turns a semi-open session may have.
pub const TURNS_MAX: u32 = 10_000;

/// How think times are drawn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ThinkLaw {
    /// Every think time is the mean.
    Fixed,
    /// Exponential think times with the mean (a memoryless user).
    Exponential,
}

impl ThinkLaw {
    /// Its name in a configuration and a report.
    pub fn name(self) -> &'static str {
        match self {
            ThinkLaw::Fixed => "fixed",
            ThinkLaw::Exponential => "exponential",
        }
    }
}

/// A user's think time between a response and its next request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Think {
    /// Mean think time, ns (after the dev time factor).
    pub mean_ns: u64,
    /// How each is drawn.
    pub law: ThinkLaw,
}

/// What tags the think-time draws, so they share no counter with the arrival and route streams.
const THINK_TAG: u64 = 0x7468_696e_6b00_0000;

impl Think {
    /// The think time before turn `turn` of session `session`, ns: the mean, or under
    /// [`ThinkLaw::Exponential`] `floor(-ln(u) x mean)` for `u = ((d >> 11) + 1) / 2^53` and
    /// `d = mix(seed XOR mix(mix(session XOR TAG) + turn))` (JOURNAL.md, "Schedule" rule 5).
    pub fn draw_ns(&self, seed: u64, session: u64, turn: u32) -> u64 {
        match self.law {
            ThinkLaw::Fixed => self.mean_ns,
            ThinkLaw::Exponential => {
                let counter = super::mix64(session ^ THINK_TAG).wrapping_add(u64::from(turn));
                let d = super::mix64(seed ^ super::mix64(counter));
                let u = ((d >> 11) + 1) as f64 * (1.0 / (1u64 << 53) as f64);
                (-libm::log(u) * self.mean_ns as f64) as u64
            }
        }
    }
}

/// Which generation model a run used (seed 003).
#[derive(Clone, Debug, Default, PartialEq)]
pub enum Workload {
    /// Every intended time fixed in advance by the arrival law.
    #[default]
    Open,
    /// A fixed population of users, each waiting for its response and a think time.
    Closed {
        /// How many users.
        users: u32,
        /// Their think time.
        think: Think,
    },
    /// Sessions arriving open-loop, each a closed sequence of turns.
    SemiOpen {
        /// Requests per session.
        turns: u32,
        /// The think time between turns.
        think: Think,
    },
    /// A trace's times, in order (ns from the schedule's start, after the dev time factor;
    /// empty in a configuration's own parameters, which do not read the trace file).
    Replay {
        /// Each request's intended time.
        offsets_ns: Arc<[u64]>,
    },
}

impl Workload {
    /// Its name: `open`, `closed`, `semi-open` or `replay`.
    pub fn name(&self) -> &'static str {
        match self {
            Workload::Open => "open",
            Workload::Closed { .. } => "closed",
            Workload::SemiOpen { .. } => "semi-open",
            Workload::Replay { .. } => "replay",
        }
    }

    /// Whether requests follow their predecessors' terminal events (closed and semi-open): those
    /// runs hold follow-ups beyond the schedule fixed in advance.
    pub fn follows(&self) -> bool {
        matches!(self, Workload::Closed { .. } | Workload::SemiOpen { .. })
    }

    /// The think time of a model that has one.
    pub fn think(&self) -> Option<Think> {
        match self {
            Workload::Closed { think, .. } | Workload::SemiOpen { think, .. } => Some(*think),
            _ => None,
        }
    }

    /// The header extension's value (JOURNAL.md field 23, `workload`); `None` for open, whose
    /// journals carry none, as every journal from before the models did.
    pub fn encode(&self) -> Option<Vec<u8>> {
        let think = |out: &mut Vec<u8>, t: &Think| {
            out.extend_from_slice(&t.mean_ns.to_le_bytes());
            out.push(match t.law {
                ThinkLaw::Fixed => 0,
                ThinkLaw::Exponential => 1,
            });
        };
        let mut out = Vec::new();
        match self {
            Workload::Open => return None,
            Workload::Closed { users, think: t } => {
                out.push(1);
                out.extend_from_slice(&users.to_le_bytes());
                think(&mut out, t);
            }
            Workload::SemiOpen { turns, think: t } => {
                out.push(2);
                out.extend_from_slice(&turns.to_le_bytes());
                think(&mut out, t);
            }
            Workload::Replay { offsets_ns } => {
                out.push(3);
                out.extend_from_slice(&(offsets_ns.len() as u64).to_le_bytes());
                out.reserve(8 * offsets_ns.len());
                for t in offsets_ns.iter() {
                    out.extend_from_slice(&t.to_le_bytes());
                }
            }
        }
        Some(out)
    }

    /// Reads the extension's value; the error says what is wrong with it.
    pub fn decode(bytes: &[u8]) -> Result<Workload, WorkloadDecodeError> {
        use WorkloadDecodeError as E;
        let u32_at = |at: usize| -> Option<u32> {
            Some(u32::from_le_bytes(bytes.get(at..at + 4)?.try_into().ok()?))
        };
        let u64_at = |at: usize| -> Option<u64> {
            Some(u64::from_le_bytes(bytes.get(at..at + 8)?.try_into().ok()?))
        };
        let think = || -> Result<Think, WorkloadDecodeError> {
            let mean_ns = u64_at(5).ok_or(E::Short("a think time's mean"))?;
            let law = match bytes.get(13) {
                Some(0) => ThinkLaw::Fixed,
                Some(1) => ThinkLaw::Exponential,
                Some(other) => return Err(E::ThinkLaw(*other)),
                None => return Err(E::Short("the think law")),
            };
            if bytes.len() != 14 {
                return Err(E::Length(bytes.len()));
            }
            Ok(Think { mean_ns, law })
        };
        match bytes.first() {
            Some(1) => {
                let users = u32_at(1).ok_or(E::Short("the user count"))?;
                if !(1..=USERS_MAX).contains(&users) {
                    return Err(E::Users(users));
                }
                Ok(Workload::Closed {
                    users,
                    think: think()?,
                })
            }
            Some(2) => {
                let turns = u32_at(1).ok_or(E::Short("the turn count"))?;
                if !(1..=TURNS_MAX).contains(&turns) {
                    return Err(E::Turns(turns));
                }
                Ok(Workload::SemiOpen {
                    turns,
                    think: think()?,
                })
            }
            Some(3) => {
                let count = u64_at(1).ok_or(E::Short("the trace's length"))?;
                let body = &bytes[9..];
                if count.checked_mul(8) != Some(body.len() as u64) {
                    return Err(E::TraceBytes {
                        count,
                        bytes: body.len(),
                    });
                }
                let offsets: Vec<u64> = body
                    .chunks_exact(8)
                    .map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes")))
                    .collect();
                if let Some(i) = offsets.windows(2).position(|w| w[1] < w[0]) {
                    return Err(E::TraceOrder(i + 1));
                }
                Ok(Workload::Replay {
                    offsets_ns: offsets.into(),
                })
            }
            Some(other) => Err(E::Code(*other)),
            None => Err(E::Empty),
        }
    }
}

/// What is wrong with a journal's workload extension ([`Workload::decode`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WorkloadDecodeError {
    /// The bytes end before this part.
    Short(&'static str),
    /// A think law other than 0 (fixed) and 1 (exponential).
    ThinkLaw(u8),
    /// A closed or semi-open extension of this many bytes, where 14 belong.
    Length(usize),
    /// Users outside 1..=[`USERS_MAX`].
    Users(u32),
    /// Turns outside 1..=[`TURNS_MAX`].
    Turns(u32),
    /// A trace whose count and bytes disagree.
    TraceBytes {
        /// The count it states.
        count: u64,
        /// The bytes it carries.
        bytes: usize,
    },
    /// Trace time `i` comes before time `i - 1`.
    TraceOrder(usize),
    /// A model code this build does not know.
    Code(u8),
    /// No bytes at all.
    Empty,
}

impl std::fmt::Display for WorkloadDecodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        use WorkloadDecodeError as E;
        match *self {
            E::Short(part) => write!(f, "{part} is cut short"),
            E::ThinkLaw(law) => write!(f, "think law {law} is neither 0 nor 1"),
            E::Length(n) => write!(f, "{n} bytes where 14 belong"),
            E::Users(users) => write!(f, "{users} users is outside 1..={USERS_MAX}"),
            E::Turns(turns) => write!(f, "{turns} turns is outside 1..={TURNS_MAX}"),
            E::TraceBytes { count, bytes } => {
                write!(f, "the trace says {count} times and carries {bytes} bytes")
            }
            E::TraceOrder(i) => write!(f, "trace time {i} comes before time {}", i - 1),
            E::Code(code) => write!(
                f,
                "workload code {code} is none this build knows (1 closed, 2 semi-open, 3 replay)"
            ),
            E::Empty => f.write_str("the workload extension is empty"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every model survives its extension bytes; damage is refused with its reason.
    #[test]
    fn the_extension_round_trips_and_refuses_damage() {
        let think = Think {
            mean_ns: 250_000_000,
            law: ThinkLaw::Exponential,
        };
        for w in [
            Workload::Closed { users: 8, think },
            Workload::SemiOpen { turns: 3, think },
            Workload::Replay {
                offsets_ns: vec![0, 5, 5, 90].into(),
            },
        ] {
            let bytes = w.encode().unwrap();
            assert_eq!(Workload::decode(&bytes).unwrap(), w);
            assert!(Workload::decode(&bytes[..bytes.len() - 1]).is_err());
        }
        assert_eq!(Workload::Open.encode(), None);
        let mut closed = Workload::Closed { users: 0, think }.encode().unwrap();
        assert_eq!(
            Workload::decode(&closed),
            Err(WorkloadDecodeError::Users(0))
        );
        assert!(Workload::decode(&closed)
            .unwrap_err()
            .to_string()
            .contains("0 users"));
        closed[1] = 1;
        closed[13] = 7;
        assert_eq!(
            Workload::decode(&closed),
            Err(WorkloadDecodeError::ThinkLaw(7))
        );
        let backwards = Workload::Replay {
            offsets_ns: vec![10, 9].into(),
        };
        let err = Workload::decode(&backwards.encode().unwrap()).unwrap_err();
        assert_eq!(err, WorkloadDecodeError::TraceOrder(1));
        assert_eq!(err.to_string(), "trace time 1 comes before time 0");
        assert_eq!(Workload::decode(&[9]), Err(WorkloadDecodeError::Code(9)));
        assert_eq!(Workload::decode(&[]), Err(WorkloadDecodeError::Empty));
    }

    fn params(workload: Workload) -> crate::schedule::ScheduleParams {
        use crate::schedule::{Arrival, Grid, Phase, RouteWeight, ScheduleParams};
        let phase = |name: &str, s: u64| Phase {
            name: name.into(),
            duration_ns: s * 1_000_000_000,
            rate_rps: 2.0,
        };
        ScheduleParams {
            seed: 5,
            arrival: Arrival::Deterministic,
            phases: vec![phase("warmup", 1), phase("measurement", 4)],
            routes: vec![RouteWeight {
                label: "chat".into(),
                weight: 1,
            }],
            inject_at_ns: None,
            grid: Grid::Continuous,
            workload,
            prefixes: None,
            abandon: None,
            history: None,
        }
    }

    /// Hand-computed: 4 closed users start a quarter of the 1 s warm-up apart; a follow-up is
    /// its predecessor's terminal time plus the think time, on its route, in the phase that time
    /// falls in; none past the schedule's end (5 s); a semi-open session stops at its turns; an
    /// open run has no follow-ups. The digest covers the model: the same first requests under
    /// another think time hash differently.
    #[test]
    fn closed_users_start_over_the_warm_up_and_follow_their_responses() {
        let think = Think {
            mean_ns: 100_000_000,
            law: ThinkLaw::Fixed,
        };
        let closed = params(Workload::Closed { users: 4, think });
        let starts: Vec<(u64, u32, u64)> = closed
            .iter()
            .map(|e| (e.intended_ns, e.phase, e.session))
            .collect();
        assert_eq!(
            starts,
            [
                (0, 0, 0),
                (250_000_000, 0, 1),
                (500_000_000, 0, 2),
                (750_000_000, 0, 3)
            ]
        );
        let first = closed.iter().nth(1).unwrap();
        let next = closed.follow_up(&first, 950_000_000, || 9).unwrap();
        assert_eq!(
            (
                next.index,
                next.intended_ns,
                next.phase,
                next.session,
                next.turn
            ),
            (9, 1_050_000_000, 1, 1, 1)
        );
        assert_eq!(closed.content(&next), 1 + 4, "session + turn x users");
        assert_eq!(closed.content(&first), 1);
        assert_eq!(closed.follow_up(&next, 4_900_000_000, || 10), None);
        let semi = params(Workload::SemiOpen { turns: 2, think });
        assert_eq!(semi.iter().count(), 10, "2 sessions/s over 5 s");
        let s0 = semi.iter().next().unwrap();
        let t1 = semi.follow_up(&s0, 0, || 10).unwrap();
        assert_eq!(t1.turn, 1);
        assert_eq!(
            semi.content(&t1),
            1,
            "session 0's turns are prompts 0 and 1"
        );
        let s3 = semi.iter().nth(3).unwrap();
        assert_eq!(semi.content(&s3), 6);
        assert_eq!(semi.follow_up(&t1, 200_000_000, || 11), None, "2 turns");
        let open = params(Workload::Open);
        assert_eq!(open.follow_up(&open.iter().next().unwrap(), 0, || 0), None);
        let slower = params(Workload::Closed {
            users: 4,
            think: Think {
                mean_ns: 200_000_000,
                ..think
            },
        });
        assert_ne!(closed.digest(), slower.digest());
        assert_ne!(open.digest(), semi.digest());
    }

    /// A replay's entries are its times, phase by time, and its phases' rate the trace's mean.
    #[test]
    fn a_replay_schedules_its_trace() {
        let replay =
            params(Workload::Open).replaying(vec![0, 999_999_999, 1_000_000_000, 4_000_000_000]);
        let entries: Vec<(u64, u32)> = replay.iter().map(|e| (e.intended_ns, e.phase)).collect();
        assert_eq!(
            entries,
            [
                (0, 0),
                (999_999_999, 0),
                (1_000_000_000, 1),
                (4_000_000_000, 1)
            ]
        );
        assert!(replay.phases.iter().all(|p| p.rate_rps == 4.0 / 5.0));
        assert!(replay.validate().is_ok());
    }

    /// Hand-checked: a fixed think time is its mean; exponential draws are deterministic per
    /// (seed, session, turn), differ between turns, and average to the mean (10,000 draws within
    /// 3 %: the standard error is 1 %).
    #[test]
    fn think_times_are_fixed_by_seed_session_and_turn() {
        let fixed = Think {
            mean_ns: 7,
            law: ThinkLaw::Fixed,
        };
        assert_eq!(fixed.draw_ns(1, 2, 3), 7);
        let exp = Think {
            mean_ns: 1_000_000,
            law: ThinkLaw::Exponential,
        };
        assert_eq!(exp.draw_ns(1, 2, 3), exp.draw_ns(1, 2, 3));
        assert_ne!(exp.draw_ns(1, 2, 3), exp.draw_ns(1, 2, 4));
        assert_ne!(exp.draw_ns(1, 2, 3), exp.draw_ns(1, 3, 3));
        let mean = (0..10_000u64)
            .map(|s| exp.draw_ns(42, s, 1) as f64)
            .sum::<f64>()
            / 10_000.0;
        assert!((mean / 1e6 - 1.0).abs() < 0.03, "{mean}");
    }
}
