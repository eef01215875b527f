//! Kind 8: how one response's generated output arrived (formats/JOURNAL.md "8 stream"; SPEC §3
//! "What a stream's figures are about", amendment A4).
//!
//! A request record (kind 1) times the first *answer* content event and the gaps between answer
//! content events, which is all a recorder before 2026-12-05 read of a stream. Today's streams
//! carry more than answer text: a reasoning model's thinking (`delta.reasoning_content`,
//! `delta.reasoning`, the Responses API's `response.reasoning_text.delta`), tool calls whose
//! arguments arrive in pieces (`delta.tool_calls`, `response.function_call_arguments.delta`),
//! refusals. A stream record says, for the request of the same index, when each kind of output
//! first and last arrived and how many deltas of it came, what the usage said of reasoning
//! tokens, and how the deltas were delivered: a **delivery** is one moment the recorder's read
//! loop saw new deltas (several events read together are one delivery), with the gap since the
//! previous delivery and the deltas it carried. So no figure has to divide a coalesced read into
//! invented per-token gaps.
//!
//! [`StreamRecord::check`] states the record's invariants; the recorder asserts them just before
//! a record is encoded and the analyzer refuses a record that breaks them, naming the rule.
//!
//! ```
//! use percentes_formats::journal::stream::{Delivery, KindTally, OutputKind, StreamRecord};
//! let record = StreamRecord {
//!     index: 3,
//!     kinds: vec![
//!         KindTally { kind: OutputKind::Reasoning as u8, first_ns: 100, last_ns: 300, deltas: 2 },
//!         KindTally { kind: OutputKind::Answer as u8, first_ns: 400, last_ns: 400, deltas: 1 },
//!     ],
//!     reasoning_tokens: Some(2),
//!     deliveries: vec![
//!         Delivery { gap_us: 0, deltas: 1 },
//!         Delivery { gap_us: 1, deltas: 1 },
//!         Delivery { gap_us: 1, deltas: 1 },
//!     ],
//!     deliveries_total: 3,
//! };
//! assert_eq!(record.check(), Ok(()));
//! assert_eq!(record.first_ns(), Some(100));
//! ```

use bincode::{Decode, Encode};
use serde::Serialize;

use crate::pins;

/// Deliveries a stream record lists at most (SPEC §2's client limit
/// `client.stream_deliveries_max`); the rest are counted in its total only.
pub const DELIVERIES_MAX: usize = pins::value::CLIENT_STREAM_DELIVERIES_MAX as usize;

/// What a delta carried. The code is stable; a reader meeting a code it does not know counts the
/// delta as generated output of an unnamed kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum OutputKind {
    /// Answer text: chat `delta.content`, a completion's `text`, the Responses API's
    /// `response.output_text.delta`.
    Answer = 0,
    /// Reasoning: `delta.reasoning_content`, `delta.reasoning`, `response.reasoning_text.delta`
    /// and its summary deltas.
    Reasoning = 1,
    /// A tool call: `delta.tool_calls` (its name, or a piece of its arguments),
    /// `response.function_call_arguments.delta`.
    ToolCall = 2,
    /// A refusal: `delta.refusal`, `response.refusal.delta`.
    Refusal = 3,
}

impl OutputKind {
    /// Every kind, in code order.
    pub const ALL: [OutputKind; 4] = [
        OutputKind::Answer,
        OutputKind::Reasoning,
        OutputKind::ToolCall,
        OutputKind::Refusal,
    ];

    /// The kind with this code, if this build names it.
    pub fn from_code(code: u8) -> Option<OutputKind> {
        OutputKind::ALL.into_iter().find(|k| *k as u8 == code)
    }

    /// Its name in `inspect`, the report and the Parquet export.
    pub fn name(self) -> &'static str {
        match self {
            OutputKind::Answer => "answer",
            OutputKind::Reasoning => "reasoning",
            OutputKind::ToolCall => "tool-call",
            OutputKind::Refusal => "refusal",
        }
    }
}

/// One kind of output in one response: when its first and last deltas arrived and how many came.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Encode, Decode, Serialize)]
pub struct KindTally {
    /// An [`OutputKind`] code.
    pub kind: u8,
    /// When its first delta was read, ns from the epoch.
    pub first_ns: u64,
    /// When its last delta was read, ns from the epoch.
    pub last_ns: u64,
    /// Its deltas (a chunk carrying this kind of output counts once).
    pub deltas: u32,
}

/// One delivery: a moment the read loop saw new deltas.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Encode, Decode, Serialize)]
pub struct Delivery {
    /// Microseconds since the previous delivery, at least 1 (a shorter gap is recorded as 1, as
    /// §3 floors every gap); 0 for the first delivery, which is at the earliest `first_ns`.
    pub gap_us: u32,
    /// The deltas it carried, at least 1.
    pub deltas: u32,
}

/// Kind 8: a response's generated output, for the request record of the same index.
#[derive(Clone, Debug, PartialEq, Eq, Encode, Decode, Serialize)]
pub struct StreamRecord {
    /// The request's schedule index.
    pub index: u64,
    /// One tally per kind of output the response carried, each kind at most once, in the order
    /// the kinds first arrived.
    pub kinds: Vec<KindTally>,
    /// The usage's reasoning tokens (`completion_tokens_details.reasoning_tokens`, or the
    /// Responses API's `output_tokens_details.reasoning_tokens`), when the server reported them.
    pub reasoning_tokens: Option<u32>,
    /// The deliveries in order, at most [`DELIVERIES_MAX`].
    pub deliveries: Vec<Delivery>,
    /// Every delivery, the ones past the limit included.
    pub deliveries_total: u32,
}

impl StreamRecord {
    /// When the first delta of any kind was read: the time to first token's end (A4).
    pub fn first_ns(&self) -> Option<u64> {
        self.kinds.iter().map(|k| k.first_ns).min()
    }

    /// When the last delta of any kind was read.
    pub fn last_ns(&self) -> Option<u64> {
        self.kinds.iter().map(|k| k.last_ns).max()
    }

    /// The tally of one kind, if the response carried it.
    pub fn tally(&self, kind: OutputKind) -> Option<&KindTally> {
        self.kinds.iter().find(|k| k.kind == kind as u8)
    }

    /// Deltas of every kind.
    pub fn deltas(&self) -> u64 {
        self.kinds.iter().map(|k| u64::from(k.deltas)).sum()
    }

    /// The rules JOURNAL.md states for a stream record, checked in order; the first broken one
    /// is the error, in words an auditor can find in the document.
    pub fn check(&self) -> Result<(), BrokenRule> {
        self.check_kinds()?;
        self.check_deliveries()
    }

    fn check_kinds(&self) -> Result<(), BrokenRule> {
        if self.kinds.is_empty() {
            return broken("it lists no kind of output");
        }
        for (i, tally) in self.kinds.iter().enumerate() {
            let kind = tally.kind;
            if self.kinds[..i].iter().any(|k| k.kind == kind) {
                return broken(format!("kind {kind} is listed twice"));
            }
            if tally.deltas == 0 {
                return broken(format!("kind {kind} has no delta"));
            }
            if tally.first_ns > tally.last_ns {
                return broken(format!(
                    "kind {kind}'s first delta ({} ns) is after its last ({} ns)",
                    tally.first_ns, tally.last_ns
                ));
            }
            if tally.deltas == 1 && tally.first_ns != tally.last_ns {
                return broken(format!(
                    "kind {kind} has one delta but two times ({} and {} ns)",
                    tally.first_ns, tally.last_ns
                ));
            }
        }
        Ok(())
    }

    fn check_deliveries(&self) -> Result<(), BrokenRule> {
        let Some(first) = self.deliveries.first() else {
            return broken("it lists no delivery");
        };
        if first.gap_us != 0 {
            return broken(format!(
                "its first delivery has a gap of {} us (the first has 0)",
                first.gap_us
            ));
        }
        let listed = self.deliveries.len() as u64;
        if listed > DELIVERIES_MAX as u64 {
            return broken(format!(
                "it lists {listed} deliveries, over the limit of {DELIVERIES_MAX}"
            ));
        }
        if let Some(k) = self.deliveries[1..].iter().position(|d| d.gap_us == 0) {
            return broken(format!("delivery {} has a gap of 0 us", k + 1));
        }
        if let Some(k) = self.deliveries.iter().position(|d| d.deltas == 0) {
            return broken(format!("delivery {k} carried no delta"));
        }
        let total = u64::from(self.deliveries_total);
        if total < listed {
            return broken(format!(
                "its total of {total} deliveries is below the {listed} it lists"
            ));
        }
        let carried: u64 = self.deliveries.iter().map(|d| u64::from(d.deltas)).sum();
        let complete = total == listed;
        if (complete && carried != self.deltas()) || carried > self.deltas() {
            return broken(format!(
                "its deliveries carry {carried} deltas and its kinds count {}",
                self.deltas()
            ));
        }
        if total > self.deltas() {
            return broken(format!(
                "{total} deliveries cannot carry {} deltas",
                self.deltas()
            ));
        }
        if complete {
            self.check_span()?;
        }
        Ok(())
    }

    /// Each gap is the time since the previous delivery floored to the microsecond and raised to
    /// at least 1: their sum is within one microsecond a gap of the span from the first delta to
    /// the last.
    fn check_span(&self) -> Result<(), BrokenRule> {
        let gaps_us: u64 = self.deliveries.iter().map(|d| u64::from(d.gap_us)).sum();
        let span_ns = self.last_ns().unwrap_or(0) - self.first_ns().unwrap_or(0);
        let slack_us = self.deliveries.len() as u64 - 1;
        let (low, high) = (
            (span_ns / 1000).saturating_sub(slack_us),
            span_ns / 1000 + slack_us,
        );
        if !(low..=high).contains(&gaps_us) {
            return broken(format!(
                "its delivery gaps sum to {gaps_us} us, outside {low}-{high} us (the span from its first delta to its last, {span_ns} ns)"
            ));
        }
        Ok(())
    }
}

/// A stream record that breaks one of JOURNAL.md's rules for kind 8, in the document's words.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BrokenRule {
    /// The rule broken, as it applies to this record.
    pub rule: String,
}

impl std::fmt::Display for BrokenRule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.rule)
    }
}

impl std::error::Error for BrokenRule {}

fn broken(rule: impl Into<String>) -> Result<(), BrokenRule> {
    Err(BrokenRule { rule: rule.into() })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::journal::records::{Record, RecordKind};

    fn record() -> StreamRecord {
        StreamRecord {
            index: 9,
            kinds: vec![
                KindTally {
                    kind: 1,
                    first_ns: 10_000,
                    last_ns: 30_000,
                    deltas: 3,
                },
                KindTally {
                    kind: 0,
                    first_ns: 40_000,
                    last_ns: 50_000,
                    deltas: 2,
                },
            ],
            reasoning_tokens: Some(3),
            deliveries: vec![
                Delivery {
                    gap_us: 0,
                    deltas: 2,
                },
                Delivery {
                    gap_us: 40,
                    deltas: 3,
                },
            ],
            deliveries_total: 2,
        }
    }

    /// JOURNAL.md's layout: the index, the kinds as a u64 count of (u8, u64, u64, u32), an
    /// option byte and a u32, the deliveries as a u64 count of (u32, u32), the total.
    #[test]
    fn the_layout_is_the_documented_one() {
        let bytes = Record::Stream(record()).encode_body();
        let mut expected = Vec::new();
        expected.extend(9u64.to_le_bytes());
        expected.extend(2u64.to_le_bytes());
        for (kind, first, last, deltas) in
            [(1u8, 10_000u64, 30_000u64, 3u32), (0, 40_000, 50_000, 2)]
        {
            expected.push(kind);
            expected.extend(first.to_le_bytes());
            expected.extend(last.to_le_bytes());
            expected.extend(deltas.to_le_bytes());
        }
        expected.push(1);
        expected.extend(3u32.to_le_bytes());
        expected.extend(2u64.to_le_bytes());
        for (gap, deltas) in [(0u32, 2u32), (40, 3)] {
            expected.extend(gap.to_le_bytes());
            expected.extend(deltas.to_le_bytes());
        }
        expected.extend(2u32.to_le_bytes());
        assert_eq!(bytes, expected);
        assert_eq!(
            Record::decode(RecordKind::Stream as u8, &bytes),
            Ok(Record::Stream(record()))
        );
    }

    #[test]
    fn each_rule_is_its_own_error() {
        assert_eq!(record().check(), Ok(()));
        assert_eq!(record().first_ns(), Some(10_000));
        assert_eq!(record().last_ns(), Some(50_000));
        assert_eq!(record().deltas(), 5);
        type Edit = fn(&mut StreamRecord);
        let broken: [(Edit, &str); 11] = [
            (|r| r.kinds.clear(), "no kind"),
            (|r| r.kinds[1].kind = 1, "listed twice"),
            (|r| r.kinds[0].deltas = 0, "has no delta"),
            (|r| r.kinds[0].first_ns = 31_000, "is after its last"),
            (|r| r.kinds[1].deltas = 1, "one delta but two times"),
            (|r| r.deliveries.clear(), "no delivery"),
            (|r| r.deliveries[0].gap_us = 5, "first delivery has a gap"),
            (|r| r.deliveries[1].gap_us = 0, "delivery 1 has a gap of 0"),
            (|r| r.deliveries[1].deltas = 4, "carry 6 deltas"),
            (|r| r.deliveries_total = 1, "below the 2 it lists"),
            (
                |r| r.deliveries[1].gap_us = 400,
                "sum to 400 us, outside 39-41 us",
            ),
        ];
        for (edit, expected) in broken {
            let mut r = record();
            edit(&mut r);
            let error = r.check().unwrap_err().rule;
            assert!(error.contains(expected), "{error} (expected {expected:?})");
        }
        // Past the limit the listed deliveries carry fewer deltas than the kinds count: allowed,
        // but never more deliveries than deltas.
        let mut cut = record();
        cut.deliveries.pop();
        cut.deliveries_total = 2;
        assert_eq!(cut.check(), Ok(()));
        cut.deliveries_total = 6;
        assert!(cut.check().unwrap_err().rule.contains("cannot carry"));
    }

    #[test]
    fn kinds_read_by_code() {
        for kind in OutputKind::ALL {
            assert_eq!(OutputKind::from_code(kind as u8), Some(kind));
        }
        assert_eq!(OutputKind::from_code(9), None);
    }
}
