//! A4 (spec v0.5): goodput under a declared SLO (SPEC §4 "A declared SLO"), by hand, on
//! scripted journals whose every request is known exactly.
//!
//! The reasoning journal (`synthetic::with_streams`, as `a4.rs` describes it): every request
//! has its first delta 20 ms after t_i, its first answer delta at 400 ms, its end at 500 ms,
//! 30 completion tokens, and deliveries 19 ms apart at most (20 reasoning deltas 19 ms apart,
//! 19 ms to the first answer, then 11.111 ms apart). So, by hand: TTFT 20 ms, first answer
//! token 400 ms, TPOT (500 - 20) / 29 = 16.55 ms, longest gap 19 ms, e2e 500 ms; and each
//! objective either holds for every request of the window or for none.
//!
//! The alternating journal: requests of even index end at 500 ms, odd ones at 900 ms (first
//! content at 50 ms, no stream record, no usage). `e2e <= 600ms` holds for exactly half; the
//! met series alternates, so it shows no positive correlation (Geyer's first pair is
//! gamma_0 + gamma_1 = 0) and n_eff = n: Wilson's interval at 300 of 600 is 0.46012 to 0.53988
//! (`(p + z^2/2n) / (1 + z^2/n) -/+ z sqrt(p(1-p)/n + z^2/4n^2) / (1 + z^2/n)`, z = 1.96).

use super::*;

const MEASURED: u64 = 30 * 20;

fn with_slo(declared: &str) -> String {
    format!("{STEADY}[slo]\ndeclared = [{declared}]\n")
}

fn reasoning(slo: &str) -> Vec<u8> {
    let bytes = synthetic::scripted(
        &config(&with_slo(slo)),
        &|e: &Entry| {
            let mut r = completed(e, 100_000, 400 * MS, 500 * MS, vec![11_111; 9]);
            r.usage_completion_tokens = Some(30);
            Some(r)
        },
        Vec::new(),
        quiet_telemetry(42),
        SealStatus::Completed,
    );
    synthetic::with_streams(&bytes, (20, 10), 380 * MS)
}

fn alternating(slo: &str) -> Vec<u8> {
    synthetic::scripted(
        &config(&with_slo(slo)),
        &|e: &Entry| {
            let end = if e.index.is_multiple_of(2) { 500 } else { 900 };
            let mut r = completed(e, 100_000, 50 * MS, end * MS, vec![2_000; 4]);
            r.usage_completion_tokens = None;
            Some(r)
        },
        Vec::new(),
        quiet_telemetry(42),
        SealStatus::Completed,
    )
}

fn declared(bytes: &[u8], spec: Spec) -> Option<crate::model::DeclaredGoodput> {
    let r = analyze_bytes("declared.pj", bytes, spec);
    window(&r, "measurement").declared_goodput.clone()
}

fn share(bytes: &[u8]) -> f64 {
    let d = declared(bytes, Spec::V0_5).expect("a declared goodput under v0.5");
    assert_eq!(d.goodput.n, MEASURED);
    d.goodput.value.unwrap()
}

#[test]
fn each_metric_is_judged_per_request_by_hand() {
    // Each bound a little above and a little below the request's value.
    for (slo, expected) in [
        ("\"ttft <= 25ms\"", 1.0),
        ("\"ttft <= 15ms\"", 0.0),
        ("\"ttfat <= 410ms\"", 1.0),
        ("\"ttfat <= 390ms\"", 0.0),
        ("\"tpot <= 17ms\"", 1.0),
        ("\"tpot <= 16ms\"", 0.0),
        ("\"itl <= 20ms\"", 1.0),
        ("\"itl <= 18ms\"", 0.0),
        ("\"e2e <= 510ms\"", 1.0),
        ("\"e2e < 490ms\"", 0.0),
        // Every objective must hold: one that fails is enough.
        ("\"ttft <= 25ms\", \"itl <= 18ms\"", 0.0),
        (
            "\"ttft <= 25ms\", \"itl <= 20ms\", \"tpot <= 17ms\", \"e2e <= 1s\"",
            1.0,
        ),
    ] {
        assert_eq!(share(&reasoning(slo)), expected, "{slo}");
    }
}

#[test]
fn a_route_replaces_the_run_list_and_the_pinned_goodput_stays_beside_it() {
    let slo = "\"ttft <= 1s\"]\n[slo.routes]\nchat = [\"e2e <= 400ms\"";
    let bytes = reasoning(slo);
    assert_eq!(share(&bytes), 0.0);
    let r = analyze_bytes("declared.pj", &bytes, Spec::V0_5);
    let w = window(&r, "measurement");
    assert_eq!(w.goodput.value, Some(1.0), "the pinned SLO's goodput");
    let d = w.declared_goodput.as_ref().unwrap();
    assert_eq!(d.slo, "ttft<=1s; route chat: e2e<=400ms");
    // Every request met the pinned SLO: Wilson at n of n, from n / (n + z^2) to 1.
    let i = w.goodput_interval.as_ref().unwrap();
    let n = MEASURED as f64;
    let (lo, hi) = i.interval.unwrap();
    assert!(
        (lo - n / (n + 1.96 * 1.96)).abs() < 1e-12 && hi == 1.0,
        "{i:?}"
    );
}

#[test]
fn half_met_alternating_reads_wilsons_interval_at_n() {
    let d = declared(&alternating("\"e2e <= 600ms\""), Spec::V0_5).unwrap();
    assert_eq!(d.goodput.value, Some(0.5));
    assert_eq!(d.interval.n_per_effective, Some(1.0));
    let (lo, hi) = d.interval.interval.unwrap();
    assert!((lo - 0.460_119_135_8).abs() < 5e-10, "{lo}");
    assert!((hi - 0.539_880_864_2).abs() < 5e-10, "{hi}");
    assert!(d.unjudged.is_empty(), "{:?}", d.unjudged);
}

#[test]
fn a_metric_the_journal_cannot_give_is_not_guessed_and_is_counted() {
    // No usage: TPOT cannot be read, so no request meets an SLO that bounds it.
    let d = declared(&alternating("\"tpot <= 1s\", \"e2e <= 600ms\""), Spec::V0_5).unwrap();
    assert_eq!(d.goodput.value, Some(0.0));
    // Only the requests every readable objective let through are unjudged: the half that met
    // e2e; the other half missed on e2e, whatever their TPOT.
    assert_eq!(
        d.unjudged.get("tpot"),
        Some(&(MEASURED / 2)),
        "{:?}",
        d.unjudged
    );
    // The longest gap of a request without a stream record is read from its content events.
    assert_eq!(
        declared(&alternating("\"itl <= 2ms\""), Spec::V0_5)
            .unwrap()
            .goodput
            .value,
        Some(1.0)
    );
}

#[test]
fn before_v0_5_no_declared_slo_is_read() {
    let bytes = alternating("\"e2e <= 600ms\"");
    for spec in [Spec::V0_1, Spec::V0_4] {
        let r = analyze_bytes("declared.pj", &bytes, spec);
        let w = window(&r, "measurement");
        assert!(w.declared_goodput.is_none() && w.goodput_interval.is_none());
        assert_eq!(w.goodput.value, Some(1.0), "{spec:?}: the pinned SLO's");
    }
}
