//! Goldens that tell v0.5's readings apart (issue 53 item 4): scripted journals of the cases the
//! recorded goldens could not tell, each committed in `golden/readings/` with its v0.5 report.
//! The journals are the scripted generator's bytes (regenerated and compared here, so a change
//! to the generator shows), and the reports the analyzer's (`UPDATE_GOLDEN=1` rewrites both).
//!
//! The cases, on the clean-delete FAULT configuration (time factor 10: buckets 0.1 s, R and H
//! widened twice to 2 s and 6 s, T_inject 36 s, recovery deadline 96 s):
//! - `anchor-off-grid`: the fire recorded at 35.95 s, before T_inject, so the fire anchor (the
//!   earlier of the two) is off the 0.1 s grid; the replacement answers at 60 s. The outage runs
//!   from the anchor's instant (35.95 s), the detector from its bucket (36.0 s), the plateau
//!   from that bucket plus R (38.0 s).
//! - `relapse-after-bound`: the same, the recovery within R of the removal (a bound), then the
//!   victim refuses again from 70 to 75 s: the relapse is flagged on the bound.
//! - `removal-after-deadline`: the replacement answers at 97 s, after the deadline: ResidualFailure,
//!   entered at the deadline and held at the removal.
//! - `empty-windows`: the same at a capacity of 0.04 rps, so that detector windows after the
//!   anchor hold nothing; the thin count includes them, and they are given apart.
//! - `span-without-start-scrape`: a steady run (20 rps, measurement 6-36 s) whose server
//!   (replica-0) is scraped each second from 7 s only, so the measurement window has no scrape
//!   at or before its start: its span starts at the first scrape after it.

use super::recovery_reports::INJECT;
use super::*;

/// The scripted journal of a clean-delete run: `fate` decides a request's record, else it
/// completes in 500 ms on its replica (index parity).
fn journal(fate: impl Fn(&Entry) -> Option<RequestRecord>, events: Vec<EventRecord>) -> Vec<u8> {
    journal_of(FAULT, fate, events)
}

/// [`journal`] of the configuration `text`.
fn journal_of(
    text: &str,
    fate: impl Fn(&Entry) -> Option<RequestRecord>,
    events: Vec<EventRecord>,
) -> Vec<u8> {
    let request = |e: &Entry| {
        Some(fate(e).unwrap_or_else(|| {
            let mut r = completed(e, 100_000, 100 * MS, 500 * MS, vec![]);
            r.replica = format!("replica-{}", e.index % 2);
            r
        }))
    };
    synthetic::scripted(
        &config(text),
        &request,
        events,
        quiet_telemetry(102),
        SealStatus::Completed,
    )
}

/// The victim (odd indices) refuses from T_inject to 46 s and while `again(t)`; the router sends
/// everything to the survivor from 46 s until the replacement answers its probe at `ready_s`.
fn replaced(
    ready_s: u64,
    again: impl Fn(u64) -> bool,
) -> (impl Fn(&Entry) -> Option<RequestRecord>, Vec<EventRecord>) {
    super::a3::replaced_with(ready_s, 46, again)
}

fn golden_dir() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../golden/readings")
}

/// `actual` against the committed file `name`, or written there under `UPDATE_GOLDEN`.
fn check(name: &str, actual: &[u8]) {
    let path = golden_dir().join(name);
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::create_dir_all(golden_dir()).unwrap();
        std::fs::write(&path, actual).unwrap();
        return;
    }
    let expected = std::fs::read(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e}; run UPDATE_GOLDEN=1 cargo test -p percentes-analyzer readings",
            path.display()
        )
    });
    assert!(
        expected == actual,
        "{} differs from this build's (review, then UPDATE_GOLDEN=1 cargo test -p percentes-analyzer readings)",
        path.display()
    );
}

/// Each case's journal, and its report under the current version, as committed.
fn case(name: &str, bytes: &[u8]) -> Report {
    check(&format!("{name}.pj"), bytes);
    let report = analyze_bytes(&format!("{name}.pj"), bytes, Spec::CURRENT);
    check(
        &format!("{name}.report.json"),
        crate::report::json(&report).as_bytes(),
    );
    check(
        &format!("{name}.report.md"),
        crate::report::markdown(&report).as_bytes(),
    );
    report
}

#[test]
fn an_anchor_off_the_bucket_grid() {
    let (fate, mut events) = replaced(60, |_| false);
    // The fire recorded 50 ms before T_inject (a controller that ran early), confirmed 10 ms on.
    for e in &mut events {
        if e.kind == EventKind::FaultFired.code() {
            e.at_ns = INJECT - 50 * MS;
        } else if e.kind == EventKind::FaultConfirmed.code() {
            e.at_ns = INJECT - 40 * MS;
        }
    }
    let r = case("anchor-off-grid", &journal(fate, events));
    let rec = r.recovery.as_ref().unwrap();
    // The outage from the anchor's instant, not its bucket edge; the plateau from the anchor's
    // bucket (36.0 s) plus R (2 s, widened).
    assert_eq!(rec.survivor[0].from_s, 35.95);
    assert_eq!((rec.window_s, rec.equilibrium.from_s), (2.0, 38.0));
}

#[test]
fn a_relapse_after_a_bound() {
    let (fate, events) = replaced(60, |t| (70 * S..75 * S).contains(&t));
    let r = case("relapse-after-bound", &journal(fate, events));
    let pre = &r.recovery.as_ref().unwrap().to_pre_fault;
    assert_eq!(pre.status, "bounded", "{pre:?}");
    assert!(
        pre.flags.iter().any(|f| f.starts_with("relapsed")),
        "{:?}",
        pre.flags
    );
}

#[test]
fn a_removal_after_the_deadline() {
    let (fate, events) = replaced(97, |_| false);
    let r = case("removal-after-deadline", &journal(fate, events));
    let rec = r.recovery.as_ref().unwrap();
    assert_eq!(rec.to_pre_fault.status, "residual failure");
    let last = rec.timeline.last().unwrap();
    assert_eq!((last.state, last.from_s), ("ResidualFailure", Some(97.0)));
}

/// An empty window after the anchor: the FAULT configuration at a capacity of 0.04 rps (0.052
/// rps offered, one request every 19.2 s), so that even R widened to its limit (10 s) leaves
/// windows with no request. The thin count holds the empty ones, given apart too.
#[test]
fn empty_windows_after_the_anchor() {
    let sparse = FAULT.replace("lambda_max_rps = 20.0", "lambda_max_rps = 0.04");
    let (fate, events) = replaced(60, |_| false);
    let r = case("empty-windows", &journal_of(&sparse, fate, events));
    let a = r.recovery.as_ref().unwrap().amended.as_ref().unwrap();
    let [_, thin, empty] = a.windows;
    assert!(empty > 0 && thin >= empty, "{:?}", a.windows);
}

/// A steady run scraped from 7 s: the measurement window [6 s, 36 s) has no scrape at or before
/// its start, and its span starts at the first after it (7 s); the warm-up has no span.
/// replica-0's first-token histogram gains 10 observations a second, all in (50, 100] ms.
#[test]
fn a_span_without_a_start_scrape() {
    use percentes_formats::journal::scrape::Scraper;
    use percentes_formats::prometheus::{Exposed, SeriesKind};
    let family = "vllm:time_to_first_token_seconds";
    let sample = |suffix: &str, le: Option<&str>, value: f64| Exposed {
        name: format!("{family}{suffix}"),
        family: family.into(),
        labels: le.map_or_else(Vec::new, |le| vec![("le".to_owned(), le.to_owned())]),
        kind: SeriesKind::Histogram,
        value,
    };
    let mut scraper = Scraper::default();
    let scrapes = (7..=41u64)
        .map(|t| {
            let n = 10.0 * (t - 7) as f64;
            let samples = [
                sample("_bucket", Some("0.05"), 0.0),
                sample("_bucket", Some("0.1"), n),
                sample("_bucket", Some("+Inf"), n),
                sample("_count", None, n),
                sample("_sum", None, 0.099 * n),
            ];
            scraper.record("replica-0", (t * S - 5 * MS, t * S + 5 * MS), &samples)
        })
        .collect();
    let request = |e: &Entry| {
        let mut r = completed(e, 100_000, 100 * MS, 500 * MS, vec![]);
        r.replica = format!("replica-{}", e.index % 2);
        Some(r)
    };
    let bytes = synthetic::scripted_with_scrapes(
        &config(STEADY),
        &request,
        (Vec::new(), quiet_telemetry(42), scrapes),
        SealStatus::Completed,
        // The scripted stall readings stand for the workers' own tickers, as `scripted` says.
        vec![(
            percentes_formats::journal::header::HostFact::Placement
                .key()
                .to_owned(),
            "synthetic: the scripted stall readings are each worker's own ticker".to_owned(),
        )],
    );
    let r = case("span-without-start-scrape", &bytes);
    let server = r.server.as_ref().expect("scrapes journaled");
    let span = |name: &str| {
        server
            .windows
            .iter()
            .find(|w| w.window == name)
            .and_then(|w| w.span_s)
    };
    assert_eq!(
        span("measurement"),
        Some((7.0, 36.0)),
        "{:?}",
        server.windows
    );
    assert_eq!(span("warm-up"), None);
}
