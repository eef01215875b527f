//! Amendment A4 (spec v0.5) on scripted journals whose stream records are known exactly
//! (`synthetic::stream_for`). The STEADY configuration (time factor 10) sends 20 rps from 0 s:
//! the measurement window is 6-36 s, `MEASURED` requests.
//!
//! Every request is dispatched 0.1 ms after t_i; its first answer content event is at 400 ms from
//! t_i and
//! it ends at 500 ms, its usage 30 completion tokens. Its stream record: 20 reasoning deltas
//! from 20 ms (380 ms before the first answer), 19 ms apart (the last at 381 ms), then 10 answer
//! deltas from 400 ms to 500 ms, 11.111 ms apart; each delta its own delivery. So, by hand:
//! - TTFT (A4) 20 ms; time to first answer token 400 ms; the reasoning span 361 ms;
//! - TPOT (500 - 20) / 29 = 16.552 ms;
//! - 29 delivery gaps a request: 20 of 19 ms (19 within the reasoning, one to the first
//!   answer) and 9 of 11.111 ms, so the pooled p50 is 19 ms and the p90 19 ms;
//! - 20 reasoning tokens, one a delta; 30 deltas and 30 tokens: one token a delta.
//!
//! Under v0.4 the same journal reads TTFT at the first answer content event (400 ms), as it was
//! published: A4 moves it only under v0.5.

use super::*;

/// The measurement window's requests: 30 s at 20 rps.
const MEASURED: u64 = 30 * 20;

fn reasoning_journal(lead_ms: u64, counts: (u32, u32)) -> Vec<u8> {
    let bytes = synthetic::scripted(
        &config(STEADY),
        &|e: &Entry| {
            let mut r = completed(e, 100_000, 400 * MS, 500 * MS, vec![11_111; 9]);
            r.usage_completion_tokens = Some(counts.0 + counts.1);
            Some(r)
        },
        Vec::new(),
        quiet_telemetry(42),
        SealStatus::Completed,
    );
    synthetic::with_streams(&bytes, counts, lead_ms * MS)
}

fn us(d: &Distribution, q: &str) -> u64 {
    d.percentiles_us
        .iter()
        .find(|(n, _)| n == q)
        .unwrap_or_else(|| panic!("no {q}: {:?} (refused: {:?})", d.percentiles_us, d.refused))
        .1
}

/// Within the pinned histogram's three significant figures of `expected_us`.
fn close(found: u64, expected_us: u64) -> bool {
    (found as f64 / expected_us as f64 - 1.0).abs() < 1e-3
}

#[test]
fn a_reasoning_stream_reads_its_first_token_answer_span_tokens_and_deliveries() {
    let r = analyze_bytes("a4.pj", &reasoning_journal(380, (20, 10)), Spec::V0_5);
    let w = window(&r, "measurement");
    assert_eq!(w.outcomes.completed, MEASURED);
    assert!(
        close(us(&w.ttft, "p50"), 20_000),
        "{:?}",
        w.ttft.percentiles_us
    );
    let s = w.streams.as_ref().expect("A4's stream figures");
    assert!(close(us(&s.ttfat, "p50"), 400_000));
    assert!(close(us(&s.reasoning_span, "p50"), 361_000));
    assert!(
        close(us(&w.tokens.tpot, "p50"), 16_552),
        "{:?}",
        w.tokens.tpot.percentiles_us
    );
    assert_eq!(w.inter_chunk.n, MEASURED * 29);
    assert!(
        close(us(&w.inter_chunk, "p50"), 19_000),
        "{:?}",
        w.inter_chunk.percentiles_us
    );
    assert!(close(us(&w.inter_chunk, "p90"), 19_000));
    assert!(w.inter_chunk.refused.is_empty());
    assert_eq!(s.output.get("answer+reasoning"), Some(&MEASURED));
    assert_eq!(s.reasoning_tokens.percentiles[0], ("p50".to_owned(), 20));
    assert_eq!((s.deliveries, s.deltas), (MEASURED * 30, MEASURED * 30));
    assert_eq!(s.one_token_per_delta, Some(true));
    assert!(s.reasoning_reconciled.ends_with("one token a delta"));
    assert_eq!(w.tokens.multi_token_chunks, 0);
    assert!(
        w.tokens.itl_per_token.is_none(),
        "A4 divides no read among tokens"
    );
    // The figures and thresholds read them.
    let summary = crate::figures::of(&r, &[]);
    let m = summary
        .windows
        .iter()
        .find(|w| w.window == "measurement")
        .unwrap();
    let figure = |name: &str| m.figures.iter().find(|f| f.name == name).unwrap();
    assert_eq!(figure("reasoning_tokens_p99").value, Some(20.0));
    assert!((figure("ttfat_p50").value.unwrap() - 0.4).abs() < 1e-3);
    // The old reading of the same journal.
    let old = analyze_bytes("a4-v0.4.pj", &reasoning_journal(380, (20, 10)), Spec::V0_4);
    let ow = window(&old, "measurement");
    assert!(close(us(&ow.ttft, "p50"), 400_000));
    assert!(ow.streams.is_none() && ow.tokens.itl_per_token.is_some());
}

/// A server whose usage counts fewer reasoning tokens than it streamed reasoning deltas (vLLM
/// counts none when the chat template opens the block in the prompt) is said not to cover its
/// own stream: a non-empty delta carries at least one token.
#[test]
fn a_reasoning_count_below_the_deltas_is_said_not_to_cover_the_stream() {
    use percentes_formats::journal::records::Record;
    let bytes = synthetic::with_records(&reasoning_journal(380, (20, 10)), |records| {
        for record in records.iter_mut() {
            if let Record::Stream(s) = record {
                s.reasoning_tokens = Some(0);
            }
        }
    });
    let r = analyze_bytes("undercount.pj", &bytes, Spec::V0_5);
    let s = window(&r, "measurement").streams.clone().unwrap();
    assert_eq!(s.reasoning_tokens.percentiles[0], ("p50".to_owned(), 0));
    assert!(
        s.reasoning_reconciled.starts_with(&format!(
            "the {MEASURED} requests that reasoned and reported reasoning tokens: {} reasoning deltas, 0 reasoning tokens",
            MEASURED * 20
        )) && s
            .reasoning_reconciled
            .contains("does not cover its own reasoning stream"),
        "{}",
        s.reasoning_reconciled
    );
}

/// Deltas read together are one delivery: with every answer delta at one instant (a proxy that
/// holds the stream, say) there are no gaps between them, where v0.4 published 1 us gaps.
/// And where most gaps sit at the 1 us floor (a journal without stream records, its events read
/// together), every inter-token quantile is refused, with the share; a threshold on one fails.
#[test]
fn the_read_floor_is_never_published_as_a_latency() {
    // 9 content gaps at the floor, no stream records: 90 % of the gaps at 1 us.
    let bytes = synthetic::scripted(
        &config(STEADY),
        &|e: &Entry| Some(completed(e, 100_000, 400 * MS, 500 * MS, vec![1; 9])),
        Vec::new(),
        quiet_telemetry(42),
        SealStatus::Completed,
    );
    let r = analyze_bytes("floor.pj", &bytes, Spec::V0_5);
    let w = window(&r, "measurement");
    assert_eq!(w.inter_chunk.n, MEASURED * 9);
    assert!(w.inter_chunk.percentiles_us.is_empty());
    assert_eq!(w.inter_chunk.refused.len(), 4);
    assert!(
        w.inter_chunk.refused[0]
            .1
            .contains("100.0 % of the window's 5400 gaps are at the 1 us floor"),
        "{:?}",
        w.inter_chunk.refused
    );
    let threshold =
        percentes_formats::config::thresholds::Threshold::parse("itl_p50 < 0.01ms").unwrap();
    let summary = crate::figures::of(&r, &[threshold]);
    assert!(!summary.thresholds[0].passed);
    assert!(
        summary.thresholds[0].reason.contains("1 us floor"),
        "{}",
        summary.thresholds[0].reason
    );
    // v0.4 published the floor as a gap: the same threshold passed on it.
    let old = analyze_bytes("floor-v0.4.pj", &bytes, Spec::V0_4);
    let threshold =
        percentes_formats::config::thresholds::Threshold::parse("itl_p50 < 0.01ms").unwrap();
    assert!(crate::figures::of(&old, &[threshold]).thresholds[0].passed);
}

/// A tool-call-only answer (no answer content event at all) has its first token at its first
/// tool-call delta, and TPOT; v0.4 read TTFT = e2e and no TPOT.
#[test]
fn a_tool_call_only_answer_has_a_first_token_and_a_tpot() {
    use percentes_formats::journal::records::Record;
    use percentes_formats::journal::stream::{Delivery, KindTally, OutputKind, StreamRecord};
    let bytes = synthetic::scripted(
        &config(STEADY),
        &|e: &Entry| {
            let mut r = completed(e, 100_000, 10 * MS, 60 * MS, vec![]);
            r.first_content_ns = None;
            r.content_events = 0;
            r.usage_completion_tokens = Some(6);
            Some(r)
        },
        Vec::new(),
        quiet_telemetry(42),
        SealStatus::Completed,
    );
    // Six tool-call deltas, 10 ms apart from 10 ms.
    let bytes = synthetic::with_records(&bytes, |records| {
        let mut out = Vec::new();
        for record in records.drain(..) {
            if let Record::Request(r) = &record {
                let t = r.intended_ns;
                out.push(Record::Stream(StreamRecord {
                    index: r.index,
                    kinds: vec![KindTally {
                        kind: OutputKind::ToolCall as u8,
                        first_ns: t + 10 * MS,
                        last_ns: t + 60 * MS,
                        deltas: 6,
                    }],
                    reasoning_tokens: None,
                    deliveries: (0..6)
                        .map(|k| Delivery {
                            gap_us: if k == 0 { 0 } else { 10_000 },
                            deltas: 1,
                        })
                        .collect(),
                    deliveries_total: 6,
                }));
            }
            out.push(record);
        }
        *records = out;
    });
    let w5 = window(
        &analyze_bytes("tools.pj", &bytes, Spec::V0_5),
        "measurement",
    )
    .clone();
    assert!(close(us(&w5.ttft, "p50"), 10_000));
    assert!(close(us(&w5.e2e, "p50"), 60_000));
    assert!(close(us(&w5.tokens.tpot, "p50"), 10_000));
    assert!(close(us(&w5.inter_chunk, "p50"), 10_000));
    let s = w5.streams.as_ref().unwrap();
    assert_eq!(s.output.keys().collect::<Vec<_>>(), ["tool-call"]);
    assert_eq!(s.ttfat.n, 0);
    let w4 = window(
        &analyze_bytes("tools-v0.4.pj", &bytes, Spec::V0_4),
        "measurement",
    )
    .clone();
    assert_eq!(us(&w4.ttft, "p50"), us(&w4.e2e, "p50"));
    assert_eq!(w4.tokens.tpot.n, 0);
}

/// Issue 52 item 1: the first delivery's size per request, as the export carries it: 1 where
/// each delta came in a read of its own, the record's count where the first read brought
/// several (here the first request's, made 9), null without a stream record.
#[test]
fn the_export_carries_each_requests_first_delivery() {
    use polars_core::prelude::AnyValue;
    // The first request's first nine deltas in one read: one delivery of 9, the tenth's gap
    // now from the first (the gaps still sum to the span).
    let bytes = synthetic::with_records(&reasoning_journal(380, (20, 10)), |records| {
        let stream = synthetic::first_stream(records);
        let merged: u32 = stream.deliveries[1..=9].iter().map(|d| d.gap_us).sum();
        stream.deliveries.drain(1..9);
        stream.deliveries[0].deltas = 9;
        stream.deliveries[1].gap_us = merged;
        stream.deliveries_total -= 8;
    });
    let file = journal_file("first-delivery.pj", &bytes);
    let run = crate::load::load(&file).unwrap();
    let rows = run.requests.len();
    let frame = crate::export::requests_frame(&run.requests, 0..rows, &[], &[]).unwrap();
    let column = frame.column("first_delivery_deltas").unwrap();
    let first = (0..rows)
        .find(|&row| run.requests.streams.as_ref().unwrap().kinds[row] != 0)
        .unwrap();
    assert_eq!(column.get(first).unwrap(), AnyValue::UInt32(9));
    assert_eq!(column.get(first + 1).unwrap(), AnyValue::UInt32(1));
    let plain = synthetic::scripted(
        &config(STEADY),
        &|e: &Entry| Some(completed(e, 100_000, 400 * MS, 500 * MS, vec![])),
        Vec::new(),
        quiet_telemetry(42),
        SealStatus::Completed,
    );
    let file = journal_file("plain.pj", &plain);
    let run = crate::load::load(&file).unwrap();
    let frame =
        crate::export::requests_frame(&run.requests, 0..run.requests.len(), &[], &[]).unwrap();
    let column = frame.column("first_delivery_deltas").unwrap();
    assert_eq!(column.null_count(), column.len());
}
