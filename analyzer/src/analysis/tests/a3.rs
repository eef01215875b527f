//! Amendment A3 (spec v0.4) end to end on scripted journals, each rule with its hand-computed
//! figures. The FAULT configuration (time factor 10) offers 26 rps, deterministic, from each
//! phase's start: warm-up 6 s and baseline 30 s put T_inject at 36 s with 936 requests before it
//! (so a request's index has the parity of its place after 36 s); the bucket is 0.1 s, and A2
//! widens R and H twice, to 2 s and 6 s; the recovery deadline is 36 + 60 = 96 s.

use super::recovery_reports::{event, fault_events, rec, run_under, INJECT};
use super::*;
use crate::model::{GateId, Status};

/// The victim (odd indices) refuses from T_inject to 46 s, when the router has moved everything
/// to the survivor; the victim's probe fails from 37 s and answers again at `ready_s`, its
/// replacement serving from then on.
fn replaced_at(
    ready_s: u64,
    failing_until_s: u64,
) -> (impl Fn(&Entry) -> Option<RequestRecord>, Vec<EventRecord>) {
    replaced_with(ready_s, failing_until_s, |_| false)
}

/// [`replaced_at`], the victim refusing again while `again(intended)` (a relapse).
pub(super) fn replaced_with(
    ready_s: u64,
    failing_until_s: u64,
    again: impl Fn(u64) -> bool,
) -> (impl Fn(&Entry) -> Option<RequestRecord>, Vec<EventRecord>) {
    let fate = move |e: &Entry| {
        let t = e.intended_ns;
        if e.index % 2 == 1 && ((INJECT..failing_until_s * S).contains(&t) || again(t)) {
            return Some(ended(e, "refused", MS));
        }
        let mut r = completed(e, 100_000, 100 * MS, 500 * MS, vec![]);
        r.replica = if (46 * S..ready_s * S).contains(&t) || e.index.is_multiple_of(2) {
            "replica-0".into()
        } else {
            "replica-1".into()
        };
        Some(r)
    };
    let mut events: Vec<EventRecord> = fault_events()
        .into_iter()
        .filter(|e| {
            !(e.subject == "replica-1"
                && e.kind == EventKind::Probe.code()
                && (37 * S..ready_s * S).contains(&e.at_ns))
        })
        .collect();
    let mut down = event(37 * S, "probe", "replica-1", None);
    down.detail = "down (connection refused)".into();
    events.push(down);
    events.push(event(ready_s * S, "probe", "replica-1", Some(0)));
    (fate, events)
}

/// The removal confirmed at 60 s, goodput back at 46 s: the first window that may count after
/// the removal (buckets 600 to 619, 60.0 to 62.0 s) already holds the baseline, so v0.3's TTR
/// of 62.0 - 36.0 = 26.0 s is R plus the removal: under v0.4 a bound, "by 26.000 s".
#[test]
fn a_recovery_within_r_of_the_removal_is_a_bound() {
    let (fate, events) = replaced_at(60, 46);
    let v3 = run_under(FAULT, fate, events.clone(), Spec::V0_3);
    let (fate, _) = replaced_at(60, 46);
    let v4 = run_under(FAULT, fate, events, Spec::V0_4);
    assert_eq!(rec(&v3).to_pre_fault.ttr_s, Some(26.0));
    let pre = &rec(&v4).to_pre_fault;
    assert_eq!(
        (pre.status.as_str(), pre.ttr_s, pre.bound_s),
        ("bounded", None, Some(26.0))
    );
    assert!(
        pre.text
            .starts_with("within R (2.000 s) of the removal at 60.000 s, so by 26.000 s"),
        "{}",
        pre.text
    );
    // The windows' line says so too, and the durations that end there are "at most".
    assert!(
        v4.timeline
            .recovery_note
            .contains("within R of the fault's removal at 60.000 s, by 26.000 s"),
        "{}",
        v4.timeline.recovery_note
    );
    let recovery = rec(&v4)
        .durations
        .iter()
        .find(|d| d.duration == "recovery")
        .unwrap();
    assert_eq!(recovery.seconds, None);
    assert!(
        recovery.note.starts_with("at most 2.000 s"),
        "{}",
        recovery.note
    );
    // The headline gives the bound, not a TTR.
    assert!(
        v4.headline
            .contains("returned within R of the removal (by 26.0 s after the fire)"),
        "{}",
        v4.headline
    );
    // The sweep's pinned cell (90 %, R 2 s, H 6 s) holds the same bound, and no value.
    let pinned = rec(&v4)
        .sweep
        .iter()
        .find(|c| (c.entry_percent, c.window_s, c.hold_s) == (90.0, 2.0, 6.0))
        .unwrap();
    assert_eq!(
        (pinned.to_pre_fault_s, pinned.pre_fault_bound_s),
        (None, Some(26.0))
    );
    assert!(report::markdown(&v4).contains("| 90 | 2.000 | 6.000 | by 26.000 (bound) |"));
    // v0.3 keeps its reading.
    assert_eq!(rec(&v3).to_pre_fault.status, "recovered");
}

/// The victim's replacement answers at 60 s but its requests fail until 66 s: a 2 s window
/// with f s of failing time in it reads 1 - f/4 (half the traffic fails), which enters at 90 %
/// only with f <= 0.4 s, so the first window to enter ends at 67.6 s or later, far past the
/// 62.1 s that the detector's resolution reaches: a measured TTR.
#[test]
fn a_recovery_later_than_the_first_window_is_measured() {
    let (fate, events) = replaced_at(60, 66);
    let v4 = run_under(FAULT, fate, events, Spec::V0_4);
    let pre = &rec(&v4).to_pre_fault;
    assert_eq!(pre.status, "recovered", "{}", pre.text);
    let ttr = pre.ttr_s.unwrap();
    // 67.6 s - 36.0 s = 31.6 s, give or take the grid's rounding of 5 of 52 failing requests.
    assert!((31.5..=31.8).contains(&ttr), "{ttr}");
    assert_eq!(pre.bound_s, None);
}

/// The outage [36 s, 60 s) holds 24 x 26 = 624 requests, 130 of which failed (the odd k in
/// [36 s, 46 s): 10 s x 13): goodput 494 / 624; the recovery [60 s, 62 s) holds 52, all met.
#[test]
fn the_survivor_is_read_over_the_outage_and_the_recovery_apart() {
    let (fate, events) = replaced_at(60, 46);
    let v4 = run_under(FAULT, fate, events, Spec::V0_4);
    let spans = &rec(&v4).survivor;
    let outage = spans.iter().find(|s| s.span == "outage").unwrap();
    assert_eq!((outage.from_s, outage.to_s), (36.0, Some(60.0)));
    assert_eq!((outage.scheduled, outage.completed), (624, 494));
    assert_eq!(outage.goodput, Some(494.0 / 624.0));
    let recovery = spans.iter().find(|s| s.span == "recovery").unwrap();
    assert_eq!((recovery.from_s, recovery.to_s), (60.0, Some(62.0)));
    assert_eq!((recovery.scheduled, recovery.goodput), (52, Some(1.0)));
    // Every completed request's TTFT is 100 ms.
    assert_eq!(outage.ttft_p50_ms, recovery.ttft_p50_ms);
    assert!((outage.ttft_p50_ms.unwrap() - 100.0).abs() < 0.1);
    assert!(
        v4.headline.contains("and its goodput 79.2 % of 624; over the recovery that followed, 100 ms and 100.0 % of 52"),
        "{}",
        v4.headline
    );
    // v0.3 reads none of this.
    let (fate, events) = replaced_at(60, 46);
    let v3 = run_under(FAULT, fate, events, Spec::V0_3);
    assert!(rec(&v3).survivor.is_empty());
    assert!(!report::json(&v3).contains("\"survivor\""));
}

/// In flight on the victim at the fire (36.05 s): its requests of the last 0.5 s before T_inject
/// (odd k, 13 per s: 6 or 7), fewer than 20: the share is refused with its n; the black-hole
/// slots of a clean-delete run do not apply.
#[test]
fn a_share_of_fewer_than_the_minimum_is_refused_and_a_slot_that_does_not_apply_says_so() {
    let (fate, events) = replaced_at(60, 46);
    let v4 = run_under(FAULT, fate, events, Spec::V0_4);
    let h = &v4.headline;
    assert!(
        h.starts_with("Under clean delete, [not measured: refused: "),
        "{h}"
    );
    assert!(
        h.contains("in flight, fewer than the 20 a share may rest on"),
        "{h}"
    );
    // The campaign reads the same refusal as a kind, with the n it counts.
    let share = crate::summaries::reading(&v4, "in flight on the victim at fire: failed");
    assert!(
        matches!(
            share,
            Some(Err(crate::summaries::Unmeasured::TooFewInFlight {
                n: 6 | 7,
                min: 20
            }))
        ),
        "{share:?}"
    );
    let outage = crate::summaries::reading(&v4, "outage: goodput");
    assert!(matches!(outage, Some(Ok(_))), "{outage:?}");
    assert!(
        h.contains("under black-hole, [not applicable: no black-hole run] failed"),
        "{h}"
    );
    let (fate, events) = replaced_at(60, 46);
    let v3 = run_under(FAULT, fate, events, Spec::V0_3);
    // v0.3 prints the share of the same few requests (all completed) with no n.
    assert!(
        v3.headline
            .starts_with("Under clean delete, 0.0 % of the requests"),
        "{}",
        v3.headline
    );
}

/// The replacement answers only at 97 s, after the deadline (36 + 60 = 96 s): ResidualFailure,
/// with both times, and the timeline ends in that state, held at the Recovering state's 97 s
/// (a state is never earlier than the one before it).
#[test]
fn a_removal_after_the_deadline_is_a_residual_failure() {
    let (fate, events) = replaced_at(97, 46);
    let v4 = run_under(FAULT, fate, events, Spec::V0_4);
    let r = rec(&v4);
    assert_eq!(r.to_pre_fault.status, "residual failure");
    assert!(
        r.to_pre_fault
            .text
            .contains("confirmed at 97.000 s, after the recovery deadline at 96.000 s"),
        "{}",
        r.to_pre_fault.text
    );
    let last = r.timeline.last().unwrap();
    assert_eq!((last.state, last.from_s), ("ResidualFailure", Some(97.0)));
    let (fate, events) = replaced_at(97, 46);
    let v3 = run_under(FAULT, fate, events, Spec::V0_3);
    assert_ne!(rec(&v3).to_pre_fault.status, "residual failure");
}

/// An invalid run (G2.3: five seconds at 75 % host CPU in the baseline) keeps its timeline and
/// says nothing of recovery: no windows' sentence, no sweep sentence, no survivor, no caveat.
#[test]
fn an_invalid_run_prints_no_recovery_reading_anywhere() {
    let (fate, events) = replaced_at(60, 46);
    let mut telemetry = quiet_telemetry(102);
    for t in &mut telemetry[10..15] {
        t.host_cpu_busy_ppm = 750_000;
    }
    let bytes = synthetic::scripted(
        &config(FAULT),
        &move |e: &Entry| fate(e),
        events,
        telemetry,
        SealStatus::Completed,
    );
    let v4 = analyze_bytes("a3-invalid.pj", &bytes, Spec::V0_4);
    assert!(!v4.validity.valid);
    let r = rec(&v4);
    assert!(r.survivor.is_empty() && r.caveats.is_empty() && r.sweep.is_empty());
    assert!(r.sweep_note.starts_with("withheld"), "{}", r.sweep_note);
    assert!(v4.timeline.recovery_note.starts_with("withheld"));
    let md = report::markdown(&v4);
    for said in [
        "recovered to the pre-fault",
        "same way",
        "Caveat:",
        "Recovered or",
    ] {
        assert!(!md.contains(said), "{said:?} in an invalid run's report");
    }
    assert!(r.timeline.iter().any(|s| s.state == "Recovering"));
}

/// The dev widening from the configured rate: 2 replicas x 0.65 x 20 rps = 26 rps, 2.6 per
/// 0.1 s bucket, 26 per pinned window of 10 buckets, under 30 (150 % of 20): twice. The same
/// factor as v0.3's observed count here (deterministic arrivals); under Poisson arrivals v0.3's
/// factor follows the draw, v0.4's does not.
#[test]
fn the_dev_widening_is_sized_from_the_configured_rate() {
    let poisson = FAULT.replace("arrival = \"deterministic\"", "arrival = \"poisson\"");
    let factors: Vec<(f64, f64)> = [3u64, 4, 5, 6]
        .into_iter()
        .map(|seed| {
            let text = poisson.replace("seed = 7", &format!("seed = {seed}"));
            let (fate, events) = replaced_at(60, 46);
            let r = run_under(&text, fate, events, Spec::V0_4);
            (rec(&r).window_s, rec(&r).hold_s)
        })
        .collect();
    assert!(factors.iter().all(|&f| f == (2.0, 6.0)), "{factors:?}");
}

/// G2.4 under v0.4 reads only a ticker on the send path: a journal without the `placement`
/// fact (a recorder before issue 32) leaves it unobserved; v0.3 reads it as recorded.
#[test]
fn g2_4_reads_only_a_ticker_on_the_send_path_under_v0_4() {
    let bytes = synthetic::scripted_with_host(
        &config(STEADY),
        &fine,
        Vec::new(),
        quiet_telemetry(42),
        SealStatus::Completed,
        Vec::new(),
    );
    let v3 = analyze_bytes("old-ticker.pj", &bytes, Spec::V0_3);
    let v4 = analyze_bytes("old-ticker.pj", &bytes, Spec::V0_4);
    assert_eq!(gate(&v3, GateId::RuntimeStall).status, Status::Pass);
    let g = gate(&v4, GateId::RuntimeStall);
    assert_eq!(g.status, Status::Unobserved);
    assert!(
        g.note.contains("does not bound the send path"),
        "{}",
        g.note
    );
    assert!(!v4.validity.valid);
    // The same telemetry from a recorder with the workers' own tickers passes.
    let placed = steady_with(quiet_telemetry(42), &fine);
    assert!(placed.validity.valid);
}

/// Under v0.4, a recorder before the client-late rule's "connect took longer than 0ns" errors
/// (reached at or after the deadline, nothing written, no connect) count in G2.2: here three,
/// reached 4 s after their intended time (the dev timeout is 30 s / 10 = 3 s).
#[test]
fn archived_client_late_errors_count_as_never_sent_under_v0_4() {
    let late = |e: &Entry| {
        Some(if matches!(e.index, 301..=303) {
            let mut r = ended(e, "connect", 4 * S);
            r.dispatched_ns = Some(e.intended_ns + 4 * S);
            r.connect_start_ns = None;
            r.request_written_ns = None;
            r
        } else {
            completed(e, 100_000, 100 * MS, 400 * MS, vec![])
        })
    };
    let bytes = synthetic::scripted_with_host(
        &config(STEADY),
        &late,
        Vec::new(),
        quiet_telemetry(42),
        SealStatus::Completed,
        Vec::new(),
    );
    let v3 = analyze_bytes("old-late.pj", &bytes, Spec::V0_3);
    let v4 = analyze_bytes("old-late.pj", &bytes, Spec::V0_4);
    assert_eq!(gate(&v3, GateId::Undispatched).observed, "0 requests");
    let g = gate(&v4, GateId::Undispatched);
    assert_eq!(g.observed, "3 requests");
    assert!(
        g.note.contains("plus 3 recorded as errored at connect"),
        "{}",
        g.note
    );
}

/// Two configurations of one variant are two experiments: A3's headline reads neither as the
/// variant's (v0.3 took the first group, silently).
#[test]
fn two_configurations_of_one_variant_are_not_read_as_one() {
    use crate::summaries::{self, RunRef};
    let (fate, events) = replaced_at(60, 46);
    let a = run_under(FAULT, fate, events.clone(), Spec::V0_4);
    let (fate, _) = replaced_at(60, 46);
    let b = run_under(
        &FAULT.replace("seed = 7", "seed = 8"),
        fate,
        events,
        Spec::V0_4,
    );
    let refs = [
        RunRef {
            name: "a.pj",
            report: &a,
            accelerator: &[],
            design: &a.provenance.config_hash,
            probe_ms: None,
        },
        RunRef {
            name: "b.pj",
            report: &b,
            accelerator: &[],
            design: &b.provenance.config_hash,
            probe_ms: None,
        },
    ];
    let groups = summaries::groups(&refs);
    assert_eq!(groups.len(), 2);
    let sentence = crate::headline::sentence(
        &groups,
        &summaries::clean_delete_recoveries(&refs),
        &a.rules,
    );
    assert!(
        sentence.contains("[not measured: 2 configurations of clean-delete in this campaign"),
        "{sentence}"
    );
}

/// G1's note says what the gate does, not "fails the run" beside a pass (A3); v0.3 keeps its
/// words.
#[test]
fn the_share_gates_note_claims_no_verdict_its_status_contradicts() {
    let (fate, events) = replaced_at(60, 46);
    let v4 = run_under(FAULT, fate, events.clone(), Spec::V0_4);
    let (fate, _) = replaced_at(60, 46);
    let v3 = run_under(FAULT, fate, events, Spec::V0_3);
    let g4 = gate(&v4, GateId::ReplicaShare);
    assert_eq!(g4.status, Status::Pass);
    assert!(
        g4.note
            .contains("so a share outside the band fails the run"),
        "{}",
        g4.note
    );
    assert!(gate(&v3, GateId::ReplicaShare)
        .note
        .contains("so the share gate fails the run"));
}
