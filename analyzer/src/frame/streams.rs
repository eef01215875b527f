//! Each request's generated output by kind, from its stream record (kind 8; SPEC §3 "What a
//! stream's figures are about"). Made when a journal's first stream record is read, so a
//! journal without any (every one recorded before 2026-12-05) costs no byte a row.

use percentes_formats::journal::stream::{OutputKind, StreamRecord};

use super::{Column, Place, SpillError, NONE};

/// A row's kinds of output as bits, for segments and exports.
pub const ANSWER: u8 = 1;
/// Reasoning output.
pub const REASONING: u8 = 2;
/// A tool call.
pub const TOOL_CALL: u8 = 4;
/// A refusal.
pub const REFUSAL: u8 = 8;
/// A kind this build does not name.
pub const OTHER: u8 = 16;

/// The stream columns: one row per scheduled request, like the table they belong to. A row
/// without a stream record has [`NONE`] times, zero deltas and no kinds.
#[derive(Debug, Default)]
pub struct Streams {
    /// The first delta of any kind, ns from the epoch.
    pub first_ns: Column<u64>,
    /// The first answer delta.
    pub first_answer_ns: Column<u64>,
    /// The first reasoning delta.
    pub first_reasoning_ns: Column<u64>,
    /// The last reasoning delta.
    pub last_reasoning_ns: Column<u64>,
    /// The first tool-call delta.
    pub first_tool_call_ns: Column<u64>,
    /// The last delta of any kind.
    pub last_ns: Column<u64>,
    /// Answer deltas.
    pub answer_deltas: Column<u32>,
    /// Reasoning deltas.
    pub reasoning_deltas: Column<u32>,
    /// Tool-call deltas.
    pub tool_call_deltas: Column<u32>,
    /// Refusal deltas and those of kinds this build does not name.
    pub other_deltas: Column<u32>,
    /// The usage's reasoning tokens, `u32::MAX` when not reported.
    pub reasoning_tokens: Column<u32>,
    /// Deliveries (reads that brought new deltas), the unlisted ones included.
    pub deliveries: Column<u32>,
    /// The deltas the first delivery brought (the first token's read: SPEC §2 "The first
    /// token's path"), 0 without a listed delivery.
    pub first_delivery_deltas: Column<u32>,
    /// The kinds present, as [`ANSWER`], [`REASONING`], ... bits.
    pub kinds: Vec<u8>,
}

impl Streams {
    /// Every row without a record, `rows` of them, in `place`.
    pub(super) fn empty(rows: usize, place: &Place) -> Result<Streams, SpillError> {
        Ok(Streams {
            first_ns: Column::filled(rows, NONE, place)?,
            first_answer_ns: Column::filled(rows, NONE, place)?,
            first_reasoning_ns: Column::filled(rows, NONE, place)?,
            last_reasoning_ns: Column::filled(rows, NONE, place)?,
            first_tool_call_ns: Column::filled(rows, NONE, place)?,
            last_ns: Column::filled(rows, NONE, place)?,
            answer_deltas: Column::filled(rows, 0, place)?,
            reasoning_deltas: Column::filled(rows, 0, place)?,
            tool_call_deltas: Column::filled(rows, 0, place)?,
            other_deltas: Column::filled(rows, 0, place)?,
            reasoning_tokens: Column::filled(rows, u32::MAX, place)?,
            deliveries: Column::filled(rows, 0, place)?,
            first_delivery_deltas: Column::filled(rows, 0, place)?,
            kinds: vec![0; rows],
        })
    }

    /// Writes `record` into row `row`.
    pub(super) fn fill(&mut self, row: usize, record: &StreamRecord) {
        self.first_ns[row] = record.first_ns().unwrap_or(NONE);
        self.last_ns[row] = record.last_ns().unwrap_or(NONE);
        for tally in &record.kinds {
            let (bit, deltas) = match OutputKind::from_code(tally.kind) {
                Some(OutputKind::Answer) => {
                    self.first_answer_ns[row] = tally.first_ns;
                    (ANSWER, &mut self.answer_deltas)
                }
                Some(OutputKind::Reasoning) => {
                    self.first_reasoning_ns[row] = tally.first_ns;
                    self.last_reasoning_ns[row] = tally.last_ns;
                    (REASONING, &mut self.reasoning_deltas)
                }
                Some(OutputKind::ToolCall) => {
                    self.first_tool_call_ns[row] = tally.first_ns;
                    (TOOL_CALL, &mut self.tool_call_deltas)
                }
                Some(OutputKind::Refusal) => (REFUSAL, &mut self.other_deltas),
                None => (OTHER, &mut self.other_deltas),
            };
            self.kinds[row] |= bit;
            deltas[row] = deltas[row].saturating_add(tally.deltas);
        }
        self.reasoning_tokens[row] = record.reasoning_tokens.unwrap_or(u32::MAX);
        self.deliveries[row] = record.deliveries_total;
        self.first_delivery_deltas[row] = record.deliveries.first().map_or(0, |d| d.deltas);
    }

    /// Deltas of every kind in row `row`.
    pub fn deltas(&self, row: usize) -> u64 {
        [
            &self.answer_deltas,
            &self.reasoning_deltas,
            &self.tool_call_deltas,
            &self.other_deltas,
        ]
        .iter()
        .map(|c| u64::from(c[row]))
        .sum()
    }

    /// Row `row`'s kinds as one categorical value: the kinds joined by `+` in code order
    /// (`answer+reasoning`), `none` without a record.
    pub fn kinds_label(&self, row: usize) -> String {
        let bits = self.kinds[row];
        if bits == 0 {
            return "none".into();
        }
        [
            (ANSWER, "answer"),
            (REASONING, "reasoning"),
            (TOOL_CALL, "tool-call"),
            (REFUSAL, "refusal"),
            (OTHER, "other"),
        ]
        .iter()
        .filter(|(bit, _)| bits & bit != 0)
        .map(|(_, name)| *name)
        .collect::<Vec<_>>()
        .join("+")
    }

    /// Hands every column's pages back ([`Column::release`]).
    pub(super) fn release(&self) {
        for column in [
            &self.first_ns,
            &self.first_answer_ns,
            &self.first_reasoning_ns,
            &self.last_reasoning_ns,
            &self.first_tool_call_ns,
            &self.last_ns,
        ] {
            column.release();
        }
        for column in [
            &self.answer_deltas,
            &self.reasoning_deltas,
            &self.tool_call_deltas,
            &self.other_deltas,
            &self.reasoning_tokens,
            &self.deliveries,
            &self.first_delivery_deltas,
        ] {
            column.release();
        }
    }
}
