//! The follow-ups of a closed or semi-open run (SPEC §1 "Workload models"): the requests beyond
//! the schedule fixed in advance, each numbered as it was created and placed in its session by
//! its kind-6 extension. The loader gives them rows after the schedule's own; this module says how
//! many, fills their schedule columns from their records, and checks every one against the
//! model: turn k of session s intended at turn k - 1's terminal time plus the think time drawn for
//! (s, k), on the session's route, in the phase that time falls in; and, in a run that ended as
//! scheduled, every session continued until the model ended it.

use std::collections::HashMap;

use percentes_formats::journal::records::{
    class_code, ExtensionKey, Outcome, Record, RequestExtension, RequestRecord,
};
use percentes_formats::journal::verify::VerifyReport;
use percentes_formats::schedule::{Entry, ScheduleParams};

use super::mismatch::{FollowUpMismatch, ScheduleMismatch};
use super::LoadError;
use crate::frame::{Requests, NO_RECORD};
use crate::JournalFile;

/// The follow-up rows of one run being loaded.
pub(super) struct Turns {
    /// The schedule's own requests (the sessions): follow-up rows come after them.
    first: u64,
    /// Per follow-up row: its session and turn, from its extension (`None` until read).
    placed: Vec<Option<(u64, u32)>>,
}

fn schedule_error(mismatch: FollowUpMismatch) -> LoadError {
    LoadError::Schedule(ScheduleMismatch::FollowUp(mismatch))
}

/// A follow-up's record the schedule cannot place.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum FollowUpError {
    /// Intended at or past the schedule's end.
    PastTheEnd { index: u64, intended_ns: u64 },
    /// A route the schedule lacks.
    NoRoute { index: u64, route: u32 },
}

impl std::fmt::Display for FollowUpError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            FollowUpError::PastTheEnd { index, intended_ns } => write!(
                f,
                "follow-up {index} is intended at {intended_ns} ns, at or past the schedule's end"
            ),
            FollowUpError::NoRoute { index, route } => write!(
                f,
                "follow-up {index} names route {route}, which the schedule lacks"
            ),
        }
    }
}

impl Turns {
    /// The follow-ups of a run of `files` (one journal: a closed or semi-open run is recorded
    /// unsharded) under `params`, whose schedule fixes `first` requests: as many rows as the
    /// highest request index the journal holds asks for. One pass over the records, before the
    /// loading pass; nothing for an open or replayed run.
    pub(super) fn of(
        params: &ScheduleParams,
        files: &[JournalFile],
        parts: &[VerifyReport],
        first: u64,
    ) -> Result<Turns, LoadError> {
        let mut turns = Turns {
            first,
            placed: Vec::new(),
        };
        if !params.workload.follows() {
            return Ok(turns);
        }
        let sharded = files.len() != 1
            || parts
                .iter()
                .any(|p| p.header.as_ref().is_some_and(|h| h.shard_count != 1));
        if sharded {
            return Err(LoadError::Schedule(ScheduleMismatch::Sharded {
                model: params.workload.name(),
            }));
        }
        let highest = files[0]
            .records(&parts[0])
            .filter_map(|(_, decoded)| match decoded {
                Ok(Record::Request(r)) => Some(r.index),
                _ => None,
            })
            .max();
        // Bounded by the records the journal holds: a forged index cannot make rows it lacks.
        let records = parts[0].records;
        if let Some(highest) = highest.filter(|&h| h >= first) {
            let rows = highest - first + 1;
            if rows > records {
                return Err(LoadError::Schedule(ScheduleMismatch::PastFollowUps {
                    highest,
                    records,
                    scheduled: first,
                }));
            }
            turns.placed = vec![None; rows as usize];
        }
        Ok(turns)
    }

    /// Rows the table needs beyond the schedule's.
    pub(super) fn rows(&self) -> usize {
        self.placed.len()
    }

    /// Row `row`'s session: a follow-up's from its extension, any other row's its own index.
    pub(super) fn session(&self, row: usize, index: u64) -> u64 {
        match self
            .placed
            .get((row as u64).wrapping_sub(self.first) as usize)
        {
            Some(Some((session, _))) if self.is_follow_up(row) => *session,
            _ => index,
        }
    }

    /// Row `row`'s place in its session: a follow-up's turn from its extension, any other
    /// row's 0 (it opens its session).
    pub(super) fn turn(&self, row: usize) -> u32 {
        match self
            .placed
            .get((row as u64).wrapping_sub(self.first) as usize)
        {
            Some(Some((_, turn))) if self.is_follow_up(row) => *turn,
            _ => 0,
        }
    }

    /// Whether `row` is a follow-up's.
    pub(super) fn is_follow_up(&self, row: usize) -> bool {
        row as u64 >= self.first
    }

    /// A follow-up's record: its intended time and route are its own (checked later against its
    /// session), its phase the one its intended time falls in.
    pub(super) fn fill(
        &self,
        requests: &mut Requests,
        row: usize,
        record: &RequestRecord,
        params: &ScheduleParams,
    ) -> Result<(), FollowUpError> {
        let phase = params
            .phase_at(record.intended_ns)
            .ok_or(FollowUpError::PastTheEnd {
                index: record.index,
                intended_ns: record.intended_ns,
            })?;
        if record.route as usize >= params.routes.len() {
            return Err(FollowUpError::NoRoute {
                index: record.index,
                route: record.route,
            });
        }
        requests.intended_ns[row] = record.intended_ns;
        requests.route[row] = record.route;
        requests.phase[row] = phase;
        Ok(())
    }

    /// A follow-up's extension: its session and turn.
    pub(super) fn note(&mut self, row: usize, extension: &RequestExtension) {
        let Some(slot) = self.placed.get_mut(row - self.first as usize) else {
            return;
        };
        if let (Some(s), Some(t)) = (
            extension.get(ExtensionKey::Session),
            extension.get(ExtensionKey::Turn),
        ) {
            *slot = Some((s, u32::try_from(t).unwrap_or(u32::MAX)));
        }
    }

    /// Every recorded follow-up's row by (session, turn), each named once and in range.
    fn rows_by_turn(&self, requests: &Requests) -> Result<HashMap<(u64, u32), usize>, LoadError> {
        let first = self.first as usize;
        // (session, turn) -> row; turn 0 is the session's own row.
        let mut rows: HashMap<(u64, u32), usize> = HashMap::with_capacity(self.placed.len());
        for (j, placed) in self.placed.iter().enumerate() {
            let row = first + j;
            if requests.outcome[row] == NO_RECORD {
                continue; // listed as missing by the loader
            }
            let index = requests.index[row];
            let (session, turn) =
                placed.ok_or_else(|| schedule_error(FollowUpMismatch::Unplaced { index }))?;
            if session >= self.first || turn == 0 {
                return Err(schedule_error(FollowUpMismatch::NoSuchTurn {
                    index,
                    session,
                    turn,
                    sessions: self.first,
                }));
            }
            if let Some(other) = rows.insert((session, turn), row) {
                return Err(schedule_error(FollowUpMismatch::TurnTwice {
                    first: requests.index[other],
                    second: index,
                    session,
                    turn,
                }));
            }
        }
        Ok(rows)
    }

    /// Every follow-up against the model; with `ended_as_scheduled` (every part sealed
    /// completed), also that no session stopped before the model ended it.
    pub(super) fn check(
        &self,
        params: &ScheduleParams,
        requests: &Requests,
        ended_as_scheduled: bool,
    ) -> Result<(), LoadError> {
        if self.placed.is_empty() && !params.workload.follows() {
            return Ok(());
        }
        let rows = self.rows_by_turn(requests)?;
        let entry = |row: usize, session: u64, turn: u32| Entry {
            index: requests.index[row],
            intended_ns: requests.intended_ns[row],
            route: requests.route[row],
            phase: requests.phase[row],
            session,
            turn,
        };
        for (&(session, turn), &row) in &rows {
            let before = if turn == 1 {
                Some(session as usize)
            } else {
                rows.get(&(session, turn - 1)).copied()
            };
            let before = before
                .filter(|&b| requests.outcome[b] != NO_RECORD)
                .ok_or_else(|| {
                    schedule_error(FollowUpMismatch::NoTurnBefore {
                        index: requests.index[row],
                        session,
                        turn,
                    })
                })?;
            let expected = params.follow_up(
                &entry(before, session, turn - 1),
                requests.terminal_ns[before],
                || requests.index[row],
            );
            if expected != Some(entry(row, session, turn)) {
                return Err(schedule_error(FollowUpMismatch::NotTheModels {
                    index: requests.index[row],
                    session,
                    turn,
                    recorded: (requests.intended_ns[row], requests.route[row]),
                    model: params.workload.name(),
                    expected: expected.map(|e| (e.intended_ns, e.route)),
                }));
            }
        }
        if ended_as_scheduled {
            self.check_sessions_ran_out(params, requests, &rows)?;
        }
        Ok(())
    }

    /// In a run that ended as scheduled, each session's last request is one the model follows
    /// with nothing: a session cut short without a stop would be requests never sent and never
    /// counted.
    fn check_sessions_ran_out(
        &self,
        params: &ScheduleParams,
        requests: &Requests,
        rows: &HashMap<(u64, u32), usize>,
    ) -> Result<(), LoadError> {
        let mut last: Vec<(u32, usize)> = (0..self.first as usize).map(|row| (0, row)).collect();
        for (&(session, turn), &row) in rows {
            let slot = &mut last[session as usize];
            if turn > slot.0 {
                *slot = (turn, row);
            }
        }
        let run_end = class_code("run-end");
        for (session, &(turn, row)) in last.iter().enumerate() {
            let stopped = requests.outcome[row] == Outcome::Censored as u8
                && Some(requests.class[row]) == run_end;
            if requests.outcome[row] == NO_RECORD || stopped {
                continue;
            }
            let previous = Entry {
                index: requests.index[row],
                intended_ns: requests.intended_ns[row],
                route: requests.route[row],
                phase: requests.phase[row],
                session: session as u64,
                turn,
            };
            if let Some(next) = params.follow_up(&previous, requests.terminal_ns[row], || 0) {
                return Err(schedule_error(FollowUpMismatch::EndedEarly {
                    session: session as u64,
                    turn,
                    index: requests.index[row],
                    model: params.workload.name(),
                    next: (next.turn, next.intended_ns),
                }));
            }
        }
        Ok(())
    }
}
