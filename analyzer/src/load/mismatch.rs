//! Why a journal's schedule check fails (SPEC §J.4): the schedule regenerated from its header,
//! and for a closed or semi-open run each follow-up against the model, each a kind with the
//! numbers it names.

use std::fmt;

use percentes_formats::journal::hex;

/// What the schedule check found.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ScheduleMismatch {
    /// No journal was given.
    NoJournal,
    /// The verification reports are not one per journal file.
    Reports,
    /// The shards' headers name different configurations or schedules.
    ShardsDiffer,
    /// A shard's index is not below the shard count.
    NoSuchShard {
        /// The shard's index.
        index: u32,
        /// The shard count.
        count: u32,
    },
    /// The header's schedule parameters are not the ones its configuration defines.
    Parameters,
    /// The parameters regenerate another digest than the header's.
    Digest {
        /// Regenerated.
        regenerated: [u8; 32],
        /// Recorded.
        recorded: [u8; 32],
    },
    /// The schedule regenerates another number of requests than the header's.
    Requests {
        /// Regenerated.
        regenerated: u64,
        /// Recorded.
        recorded: u64,
    },
    /// A closed or semi-open run in shards (its follow-ups are numbered as they are sent).
    Sharded {
        /// The workload model.
        model: &'static str,
    },
    /// A request index past every follow-up the journal's records can hold.
    PastFollowUps {
        /// The highest index.
        highest: u64,
        /// The journal's records.
        records: u64,
        /// The schedule's own requests.
        scheduled: u64,
    },
    /// A closed or semi-open run's follow-ups against its model.
    FollowUp(FollowUpMismatch),
}

/// What the check of a closed or semi-open run's follow-ups found.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum FollowUpMismatch {
    /// A follow-up whose extension lacks its session and turn.
    Unplaced {
        /// The request.
        index: u64,
    },
    /// A follow-up naming a session that is none, or turn 0.
    NoSuchTurn {
        /// The request.
        index: u64,
        /// Its session.
        session: u64,
        /// Its turn.
        turn: u32,
        /// The sessions there are.
        sessions: u64,
    },
    /// Two requests with one session and turn.
    TurnTwice {
        /// The first.
        first: u64,
        /// The second.
        second: u64,
        /// Their session.
        session: u64,
        /// Their turn.
        turn: u32,
    },
    /// A follow-up whose turn before has no record.
    NoTurnBefore {
        /// The request.
        index: u64,
        /// Its session.
        session: u64,
        /// Its turn.
        turn: u32,
    },
    /// A follow-up at another time or route than the model gives.
    NotTheModels {
        /// The request.
        index: u64,
        /// Its session.
        session: u64,
        /// Its turn.
        turn: u32,
        /// Its intended time and route.
        recorded: (u64, u32),
        /// The model.
        model: &'static str,
        /// What the model gives: `None`, the session had ended.
        expected: Option<(u64, u32)>,
    },
    /// A session that stopped before the model ended it, in a run that ended as scheduled.
    EndedEarly {
        /// The session.
        session: u64,
        /// Its last turn.
        turn: u32,
        /// Its last request.
        index: u64,
        /// The model.
        model: &'static str,
        /// The turn the model has next, and its intended time.
        next: (u32, u64),
    },
}

impl fmt::Display for ScheduleMismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use ScheduleMismatch as M;
        match self {
            M::NoJournal => f.write_str("no journal given"),
            M::Reports => f.write_str("one verification report per journal file"),
            M::ShardsDiffer => {
                f.write_str("the shard journals do not share one configuration and schedule")
            }
            M::NoSuchShard { index, count } => write!(f, "shard {index} of {count} does not exist"),
            M::Parameters => f.write_str(
                "the header's schedule parameters are not the ones its configuration defines",
            ),
            M::Digest {
                regenerated,
                recorded,
            } => write!(
                f,
                "the parameters regenerate digest {}, the header recorded {}",
                hex(regenerated),
                hex(recorded)
            ),
            M::Requests {
                regenerated,
                recorded,
            } => write!(
                f,
                "{regenerated} requests regenerated, the header recorded {recorded}"
            ),
            M::Sharded { model } => write!(
                f,
                "a {model} run is recorded by one recorder (its follow-ups are numbered as they are sent); these are shards"
            ),
            M::PastFollowUps {
                highest,
                records,
                scheduled,
            } => write!(
                f,
                "request index {highest} is past every follow-up a journal of {records} records can hold ({scheduled} scheduled)"
            ),
            M::FollowUp(mismatch) => write!(f, "{mismatch}"),
        }
    }
}

impl fmt::Display for FollowUpMismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use FollowUpMismatch as F;
        match self {
            F::Unplaced { index } => write!(
                f,
                "follow-up {index} has no session and turn (its kind-6 extension lacks them)"
            ),
            F::NoSuchTurn {
                index,
                session,
                turn,
                sessions,
            } => write!(
                f,
                "follow-up {index} names session {session} turn {turn}; sessions are 0..{sessions} and follow-ups start at turn 1"
            ),
            F::TurnTwice {
                first,
                second,
                session,
                turn,
            } => write!(
                f,
                "requests {first} and {second} are both turn {turn} of session {session}"
            ),
            F::NoTurnBefore {
                index,
                session,
                turn,
            } => write!(
                f,
                "request {index} is turn {turn} of session {session}, whose turn {} has no record",
                turn - 1
            ),
            F::NotTheModels {
                index,
                session,
                turn,
                recorded: (intended_ns, route),
                model,
                expected,
            } => {
                write!(
                    f,
                    "request {index} (session {session}, turn {turn}) says intended {intended_ns} ns, route {route}; the {model} model says "
                )?;
                match expected {
                    Some((ns, route)) => write!(f, "{ns} ns, route {route}"),
                    None => f.write_str("the session had ended"),
                }
            }
            F::EndedEarly {
                session,
                turn,
                index,
                model,
                next: (next_turn, next_ns),
            } => write!(
                f,
                "session {session} ends at turn {turn} (request {index}), and the {model} model has its turn {next_turn} at {next_ns} ns, before the schedule's end: a request was never sent or never recorded"
            ),
        }
    }
}
