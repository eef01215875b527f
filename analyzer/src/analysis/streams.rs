//! A4 (v0.5): a window's stream figures (SPEC §3 "What a stream's figures are about"): the
//! kinds of output the completed requests carried, the time to their first answer token, their
//! reasoning span and reasoning tokens, and the inter-token figure per delivery: the pooled gaps
//! between the reads that brought new deltas, with the deltas each carried, read in a second
//! pass over the journal's stream records (or, for a request without one, the gaps between its
//! answer content events, as recorded). A quantile at the 1 us floor, the read's resolution, is
//! refused, and so is every inter-token quantile of a window whose gaps are mostly there.

use std::collections::BTreeMap;

use percentes_formats::journal::records::{
    request_gaps, Outcome, RecordKind, REQUEST_OUTCOME_OFFSET,
};
use percentes_formats::journal::stream::StreamRecord;
use percentes_formats::pins;
use percentes_formats::spec::TailSample;

use super::distribution::{distribution_of, QUANTILES};
use super::rows::{completed, completion_tokens, first_answer_ns};
use crate::estimate::compare::nearest_rank;
use crate::estimate::histogram::LatencyHistogram;
use crate::estimate::quantile;
use crate::frame::{Requests, NONE};
use crate::load::Run;
use crate::model::{Counts, Distribution, StreamFigures};
use crate::windows::{self, Window};
use crate::JournalFile;

/// What the inter-token distribution is under A4, in words.
pub(super) const INTER_DELIVERY: &str = "conditional on completion; pooled gaps between deliveries (reads of the stream that brought new deltas of any kind), each delivery however many tokens it carried; for a request the journal holds no stream record of, the gaps between its answer content events (A4, a per-request p99 is not computed, §3)";
/// What the time to first answer token is, in words.
const TTFAT: &str = "conditional on completion; time to first answer token from t_i (the first answer delta: content, output text), requests whose answer came (A4)";
/// What the reasoning span is, in words.
const REASONING_SPAN: &str = "conditional on completion; the reasoning span, first reasoning delta to last, requests that reasoned (A4)";

/// One window's deliveries, from the second pass.
#[derive(Clone, Debug)]
pub(super) struct Delivered {
    /// The pooled gaps between deliveries, us (at least 1, §3).
    pub(super) gaps: LatencyHistogram,
    /// How many deltas each listed delivery carried: count of deliveries by deltas.
    pub(super) deltas: BTreeMap<u32, u64>,
    /// How many deltas each completed request's first delivery carried: count of requests by
    /// deltas (SPEC §2 "The first token's path").
    pub(super) first_deltas: BTreeMap<u32, u64>,
}

impl Default for Delivered {
    fn default() -> Delivered {
        Delivered {
            gaps: LatencyHistogram::pinned(),
            deltas: BTreeMap::new(),
            first_deltas: BTreeMap::new(),
        }
    }
}

/// The deliveries of each window's completed requests: a second pass over the journal, holding
/// one histogram per window. Where `longest` is not empty (one entry per row, for a declared
/// SLO's `itl` objective, SPEC §4), each completed row's longest gap between deliveries is
/// written into it, us, or [`super::declared::GAP_UNKNOWN`] where its record lists only part.
pub(super) fn delivered(
    run: &Run,
    files: &[JournalFile],
    cut: &[Window],
    longest: &mut [u32],
) -> Vec<Delivered> {
    let mut out = vec![Delivered::default(); cut.len()];
    let requests = &run.requests;
    let streams = requests.streams.as_ref();
    let row_of = |index: u64| requests.index.binary_search(&index).ok();
    for (file, report) in files.iter().zip(&run.parts) {
        let mut released = 0u64;
        for framed in file.framed(report) {
            if framed.byte_offset >= released + crate::RELEASE_EVERY_BYTES {
                file.release_before(framed.byte_offset);
                released = framed.byte_offset;
            }
            if framed.kind == RecordKind::Stream as u8 {
                // Decoded and checked in full by the load pass.
                let Ok(percentes_formats::journal::Record::Stream(record)) =
                    percentes_formats::journal::Record::decode(framed.kind, framed.body)
                else {
                    continue;
                };
                let Some(row) = row_of(record.index).filter(|&r| completed(requests, r)) else {
                    continue;
                };
                if let Some(slot) = longest.get_mut(row) {
                    *slot = longest_gap(&record);
                }
                if let Some(w) = windows::locate(cut, requests.intended_ns[row]) {
                    take_stream(&mut out[w], &record);
                }
            } else if framed.kind == RecordKind::Request as u8
                && framed.body.get(REQUEST_OUTCOME_OFFSET) == Some(&(Outcome::Completed as u8))
            {
                let Some((intended_ns, gaps)) = request_gaps(framed.body) else {
                    continue;
                };
                let row = framed
                    .body
                    .get(..8)
                    .and_then(|b| b.try_into().ok())
                    .map(u64::from_le_bytes)
                    .and_then(row_of);
                // A request with a stream record is read from it, above.
                if row.is_some_and(|row| streams.is_some_and(|s| s.kinds[row] != 0)) {
                    continue;
                }
                if let Some(slot) = row.and_then(|row| longest.get_mut(row)) {
                    *slot = gaps.clone().max().unwrap_or(0);
                }
                if let Some(w) = windows::locate(cut, intended_ns) {
                    let events = row.map_or(0, |row| u64::from(requests.content_events[row]));
                    take_gaps(&mut out[w], gaps, events);
                }
            }
        }
    }
    out
}

/// A completed request without a stream record: its gaps between answer content events, each
/// event its own delivery of one delta, as recorded.
fn take_gaps(d: &mut Delivered, gaps: impl Iterator<Item = u32> + Clone, events: u64) {
    let first = first_delivery(gaps.clone());
    for gap in gaps {
        d.gaps.record_us(u64::from(gap));
    }
    if events > 0 {
        *d.deltas.entry(1).or_insert(0) += events;
        *d.first_deltas.entry(first).or_insert(0) += 1;
    }
}

/// The deltas of a request's first delivery when it has no stream record: its first content
/// event and those after it at the 1 us floor, which the recorder read with it (§3: a shorter
/// gap is recorded as 1 us).
fn first_delivery(gaps: impl Iterator<Item = u32>) -> u32 {
    1 + gaps.take_while(|&gap| gap <= 1).count() as u32
}

/// A stream record's longest gap between deliveries, us; [`super::declared::GAP_UNKNOWN`]
/// where it lists only part of them; 0 with one delivery or none.
fn longest_gap(record: &StreamRecord) -> u32 {
    if u64::from(record.deliveries_total) > record.deliveries.len() as u64 {
        return super::declared::GAP_UNKNOWN;
    }
    let gaps = record.deliveries.iter().skip(1).map(|d| d.gap_us);
    gaps.max().unwrap_or(0)
}

fn take_stream(d: &mut Delivered, record: &StreamRecord) {
    if let Some(first) = record.deliveries.first() {
        *d.first_deltas.entry(first.deltas).or_insert(0) += 1;
    }
    for (k, delivery) in record.deliveries.iter().enumerate() {
        if k > 0 {
            d.gaps.record_us(u64::from(delivery.gap_us));
        }
        *d.deltas.entry(delivery.deltas).or_insert(0) += 1;
    }
}

/// `gaps` as the inter-token distribution under A4: its quantiles at the floor refused, and all
/// of them where most gaps are at the floor. With the floor's share.
pub(super) fn inter_token(gaps: LatencyHistogram) -> (Distribution, f64) {
    let n = gaps.len();
    let floor = gaps.at_floor();
    let share = if n > 0 { floor as f64 / n as f64 } else { 0.0 };
    let mut d = distribution_of(Vec::new(), Some(gaps), TailSample::Independent);
    d.label = INTER_DELIVERY;
    let limit_percent = pins::value::ANALYSIS_INTERTOKEN_FLOOR_PERCENT_MAX as f64;
    let most = share * 100.0 > limit_percent;
    let at_floor: Vec<String> = d
        .percentiles_us
        .iter()
        .filter(|(_, us)| *us <= 1)
        .map(|(q, _)| q.clone())
        .collect();
    for q in QUANTILES.map(quantile::name) {
        let refused = if n == 0 {
            None
        } else if most {
            Some(format!(
                "refused: {:.1} % of the window's {n} gaps are at the 1 us floor, the read's resolution (events read together), above the {limit_percent:.0} % a published inter-token figure may rest on (A4, §3)",
                share * 100.0,
            ))
        } else if at_floor.contains(&q) {
            Some(format!(
                "refused: {q} falls at the 1 us floor, the read's resolution, not a measured gap ({:.1} % of {n} gaps are there; A4, §3)",
                share * 100.0
            ))
        } else {
            None
        };
        if let Some(why) = refused {
            d.percentiles_us.retain(|(name, _)| *name != q);
            d.refused.push((q, why));
        }
    }
    if most {
        d.p99_9_us = None;
        d.max_us = None;
    }
    (d, share)
}

/// The counts of `values` by nearest rank.
pub(super) fn counts(mut values: Vec<u64>) -> Counts {
    values.sort_unstable();
    Counts {
        n: values.len() as u64,
        total: values.iter().sum(),
        percentiles: QUANTILES
            .iter()
            .filter_map(|&q| Some((quantile::name(q), nearest_rank(&values, q)?)))
            .collect(),
        max: values.last().copied(),
    }
}

/// Counts from a histogram of (value, how many).
pub(super) fn counts_of(by_value: &BTreeMap<u32, u64>) -> Counts {
    let n: u64 = by_value.values().sum();
    let total = by_value.iter().map(|(v, c)| u64::from(*v) * c).sum();
    let at = |q: f64| -> Option<u64> {
        let rank = ((q * n as f64).ceil() as u64).clamp(1, n.max(1));
        let mut seen = 0;
        by_value.iter().find_map(|(v, c)| {
            seen += c;
            (seen >= rank).then_some(u64::from(*v))
        })
    };
    Counts {
        n,
        total,
        percentiles: QUANTILES
            .iter()
            .filter_map(|&q| Some((quantile::name(q), at(q).filter(|_| n > 0)?)))
            .collect(),
        max: by_value.keys().next_back().map(|v| u64::from(*v)),
    }
}

/// What a window's completed requests' streams say, gathered row by row.
#[derive(Default)]
struct Gathered {
    output: BTreeMap<String, u64>,
    ttfat_ns: Vec<u64>,
    span_ns: Vec<u64>,
    reasoning_tokens: Vec<u64>,
    /// Over the requests that reasoned and reported reasoning tokens: (requests, reasoning
    /// deltas, reasoning tokens).
    reconciled: (u64, u64, u64),
    with_record: u64,
    with_usage: u64,
    /// Every request with usage counted as many tokens as deltas.
    one_each: bool,
}

impl Gathered {
    fn row(&mut self, requests: &Requests, row: usize) {
        let streams = requests.streams.as_ref();
        let recorded = streams.filter(|s| s.kinds[row] != 0);
        let label = recorded.map_or_else(|| fallback_label(requests, row), |s| s.kinds_label(row));
        *self.output.entry(label).or_insert(0) += 1;
        if let Some(first_answer) = first_answer_ns(requests, row) {
            self.ttfat_ns
                .push(first_answer.saturating_sub(requests.intended_ns[row]));
        }
        if let Some(tokens) = completion_tokens(requests, row) {
            self.with_usage += 1;
            let deltas =
                recorded.map_or(u64::from(requests.content_events[row]), |s| s.deltas(row));
            self.one_each &= tokens == deltas;
        }
        let Some(s) = recorded else {
            return;
        };
        self.with_record += 1;
        if s.first_reasoning_ns[row] != NONE {
            self.span_ns
                .push(s.last_reasoning_ns[row] - s.first_reasoning_ns[row]);
        }
        let reported = s.reasoning_tokens[row];
        if reported != u32::MAX {
            self.reasoning_tokens.push(u64::from(reported));
            if s.reasoning_deltas[row] > 0 || reported > 0 {
                let (n, deltas, tokens) = &mut self.reconciled;
                *n += 1;
                *deltas += u64::from(s.reasoning_deltas[row]);
                *tokens += u64::from(reported);
            }
        }
    }

    fn reconciliation(&self) -> String {
        let (n, deltas, tokens) = self.reconciled;
        let of = format!("the {n} requests that reasoned and reported reasoning tokens: {deltas} reasoning deltas, {tokens} reasoning tokens in their usage");
        if n == 0 {
            "no completed request both reasoned and reported its reasoning tokens".to_owned()
        } else if deltas == tokens {
            format!("{of}: one token a delta")
        } else if tokens < deltas {
            // Every non-empty delta carries at least one token, so fewer tokens than deltas is
            // the server's count missing part of what it streamed (vLLM counts only tokens
            // between the markers it generated, none when the template opens the block).
            format!("{of}: fewer tokens than deltas, so the server's count does not cover its own reasoning stream; read the deltas, not its reasoning-token figure")
        } else {
            format!(
                "{of} ({:.2} tokens a delta)",
                tokens as f64 / deltas.max(1) as f64
            )
        }
    }
}

/// The stream figures of a window's `rows`, with its deliveries from [`delivered`] and the
/// floor's share of its inter-token gaps.
pub(super) fn figures(
    requests: &Requests,
    rows: &[usize],
    delivered: &Delivered,
    floor_share: f64,
    sample: TailSample,
) -> StreamFigures {
    let mut g = Gathered {
        one_each: true,
        ..Gathered::default()
    };
    let mut completed_n = 0u64;
    for &row in rows.iter().filter(|&&r| completed(requests, r)) {
        completed_n += 1;
        g.row(requests, row);
    }
    let deliveries = counts_of(&delivered.deltas);
    let mut ttfat = distribution_of(std::mem::take(&mut g.ttfat_ns), None, sample);
    ttfat.label = TTFAT;
    let mut reasoning_span = distribution_of(std::mem::take(&mut g.span_ns), None, sample);
    reasoning_span.label = REASONING_SPAN;
    let one_token_per_delta = (g.with_usage > 0).then_some(g.one_each);
    let text = words(
        &deliveries,
        one_token_per_delta,
        floor_share,
        (g.with_record, completed_n - g.with_record),
    );
    StreamFigures {
        reasoning_reconciled: g.reconciliation(),
        output: g.output,
        with_record: g.with_record,
        ttfat,
        reasoning_span,
        reasoning_tokens: counts(g.reasoning_tokens),
        deliveries: deliveries.n,
        deltas: deliveries.total,
        deltas_per_delivery: deliveries,
        one_token_per_delta,
        text,
    }
}

/// A completed request without a stream record: `answer` when its first content was seen (a
/// journal before stream records), else `none`.
fn fallback_label(requests: &Requests, row: usize) -> String {
    if requests.first_content_ns[row] != NONE {
        "answer".into()
    } else {
        "none".into()
    }
}

fn words(
    deliveries: &Counts,
    one_each: Option<bool>,
    floor_share: f64,
    (with, without): (u64, u64),
) -> String {
    let mut out = if with == 0 {
        format!(
            "this journal has no stream records (recorded before 2026-12-05): the first token is the first answer content event and the inter-token gaps are those between answer content events as recorded, {} events, where events read together sit at the 1 us floor",
            deliveries.total
        )
    } else {
        format!(
            "inter-token latency is the gap between deliveries (reads that brought new deltas): {} deliveries carried {} deltas",
            deliveries.n, deliveries.total
        )
    };
    match one_each {
        Some(true) => out.push_str("; one token a delta by the usage"),
        Some(false) => out.push_str(
            "; the usage counts more tokens than deltas for some requests, so a delta is not always one token",
        ),
        None => out.push_str("; no usage to say how many tokens a delta carried"),
    }
    if floor_share > 0.0 {
        out.push_str(&format!(
            "; {:.1} % of the gaps are at the 1 us floor, the read's resolution",
            floor_share * 100.0
        ));
    }
    if with > 0 && without > 0 {
        out.push_str(&format!(
            "; {without} completed requests have no stream record: their first token is their first answer content event, and their gaps those between answer content events"
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use percentes_formats::journal::stream::Delivery;

    /// Hand-worked: gaps 1, 1, 0, 40, 1 us after the first event: the first three read with it
    /// (four events), the one 40 us later a delivery of its own; no gaps, one event.
    #[test]
    fn a_request_without_a_stream_record_reads_its_first_delivery_from_its_floor_gaps() {
        assert_eq!(first_delivery([1, 1, 0, 40, 1].into_iter()), 4);
        assert_eq!(first_delivery(std::iter::empty()), 1);
        assert_eq!(first_delivery([2].into_iter()), 1);
    }

    /// A stream record's first delivery is counted as it was listed: deltas 3, then 1 and 1.
    #[test]
    fn a_stream_records_first_delivery_is_its_first_listed_one() {
        let mut d = Delivered::default();
        let record = StreamRecord {
            index: 0,
            kinds: Vec::new(),
            reasoning_tokens: None,
            deliveries: [(0, 3), (40, 1), (30, 1)]
                .iter()
                .map(|&(gap_us, deltas)| Delivery { gap_us, deltas })
                .collect(),
            deliveries_total: 3,
        };
        take_stream(&mut d, &record);
        assert_eq!(d.first_deltas, BTreeMap::from([(3, 1)]));
        assert_eq!(d.deltas, BTreeMap::from([(3, 1), (1, 2)]));
        assert_eq!(d.gaps.len(), 2);
    }
}
