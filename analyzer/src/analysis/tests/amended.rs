//! Amendment A2 (spec v0.3) end to end on scripted journals: each rule the report must obey, the
//! relapse flag, an invalid run's diagnosis, the audit artifact and the fidelity table field by
//! field, and G2.2 on requests without a record. The FAULT configuration offers 26 rps
//! (deterministic), so a 1 s window holds 26 requests, under the 150 % of 20 that A2 widens to in
//! the dev profile: R and H are widened twice, to 2 s and 6 s.

use super::recovery_reports::{event, failing_while, fault_events, rec, run_under, INJECT};
use super::*;
use crate::model::{GateId, Report};

/// The same scripted journal analyzed under v0.2 and v0.3.
fn both(
    fate: impl Fn(&Entry) -> Option<RequestRecord> + 'static,
    events: Vec<EventRecord>,
) -> (Report, Report) {
    let fate = std::rc::Rc::new(fate);
    let again = fate.clone();
    (
        run_under(FAULT, move |e| fate(e), events.clone(), Spec::V0_2),
        run_under(FAULT, move |e| again(e), events, Spec::V0_3),
    )
}

fn amended(r: &Report) -> &crate::model::Amended {
    rec(r).amended.as_ref().expect("v0.3 has its A2 section")
}

#[test]
fn the_dev_detector_is_widened_to_hold_enough_requests() {
    let (v2, v3) = both(
        failing_while(|t| (INJECT..INJECT + 20 * S).contains(&t)),
        fault_events(),
    );
    assert_eq!((rec(&v2).window_s, rec(&v2).hold_s), (1.0, 3.0));
    assert_eq!((rec(&v3).window_s, rec(&v3).hold_s), (2.0, 6.0));
    assert!(rec(&v2).amended.is_none(), "v0.2's report gains nothing");
    let a = amended(&v3);
    assert_eq!(a.window_min_requests, 20);
    assert!(a.notes[0].contains("widened 2x"), "{:?}", a.notes);
    // Deterministic arrivals: no window after the fire is thin.
    assert_eq!(a.windows[1], 0, "{:?}", a.windows);
}

#[test]
fn a_relapse_after_a_declared_recovery_is_flagged_on_the_ttr() {
    // The victim fails for 20 s after T_inject, serves again, then fails again from 66 s to 80 s
    // (the demo's survivor outage after its declared recovery).
    let broken = |t: u64| (INJECT..INJECT + 20 * S).contains(&t) || (66 * S..80 * S).contains(&t);
    let (v2, v3) = both(failing_while(broken), fault_events());
    let r = rec(&v3);
    let ttr = r.to_pre_fault.ttr_s.expect("recovered before the relapse");
    assert!(ttr < 30.0, "{ttr}");
    let flag = r
        .to_pre_fault
        .flags
        .iter()
        .find(|f| f.starts_with("relapsed"))
        .unwrap_or_else(|| panic!("relapse not flagged: {:?}", r.to_pre_fault.flags));
    // The 2 s window ending at 66.6 s holds 52 requests; the 8 victim-bound ones sent from 66 s
    // (indices 1716 to 1731, the odd ones) failed: 44 / 52 = 0.846 < 0.85. That window ends 30.6 s
    // after the 36.0 s bucket edge the anchor rounds up to.
    assert!(flag.contains("30.600 s after the fire"), "{flag}");
    assert!(r.relapse.is_some());
    assert!(report::markdown(&v3).contains("**Flag (to the pre-fault baseline):** relapsed"));
    // The headline says it beside the TTR it qualifies.
    assert!(
        v3.headline.contains("(then relapsed in 1 of 1 runs"),
        "{}",
        v3.headline
    );
    assert!(!v2.headline.contains("relapsed"), "{}", v2.headline);
    // v0.2 already names the relapse, without the flag on the TTR.
    assert!(rec(&v2).relapse.is_some());
    assert!(rec(&v2).to_pre_fault.flags.is_empty());
}

#[test]
fn no_recovery_before_the_removal_and_the_early_detection_is_said() {
    // The router sends every request to the survivor from 46 s (goodput back to 1.0), but the
    // victim's replacement answers its probe only at 60 s and serves from then on.
    let fate = |e: &Entry| {
        let t = e.intended_ns;
        if e.index % 2 == 1 && (INJECT..46 * S).contains(&t) {
            return Some(ended(e, "refused", MS));
        }
        let mut r = completed(e, 100_000, 100 * MS, 500 * MS, vec![]);
        r.replica = if (46 * S..60 * S).contains(&t) || e.index.is_multiple_of(2) {
            "replica-0".into()
        } else {
            "replica-1".into()
        };
        Some(r)
    };
    // The victim's probe fails at 37 s and answers again only at 60 s.
    let mut events: Vec<EventRecord> = fault_events()
        .into_iter()
        .filter(|e| {
            !(e.subject == "replica-1"
                && e.kind == EventKind::Probe.code()
                && (37 * S..60 * S).contains(&e.at_ns))
        })
        .collect();
    let mut down = event(37 * S, "probe", "replica-1", None);
    down.detail = "down (connection refused)".into();
    events.push(down);
    events.push(event(60 * S, "probe", "replica-1", Some(0)));
    // A boundary after the recovery it would qualify: the headline may not name it under v0.3.
    events.push(event(70 * S, "timeline", "container-start", None));
    let (v2, v3) = both(fate, events);
    assert!(v2.headline.contains("container start"), "{}", v2.headline);
    assert!(!v3.headline.contains("container start"), "{}", v3.headline);
    assert!(v3.headline.contains("replica-ready"), "{}", v3.headline);
    let early = rec(&v2).to_pre_fault.at_s.unwrap();
    assert!(
        early < 50.0,
        "v0.2 recovers before the replacement: {early}"
    );
    let r = rec(&v3);
    let a = amended(&v3);
    let removal = a.removal_s.unwrap();
    assert!((removal - 60.0).abs() < 1e-6, "replica-ready: {removal}");
    let at = r.to_pre_fault.at_s.unwrap();
    // The first window that may count starts at 60 s: it ends at 62 s (R = 2 s).
    assert!((at - 62.0).abs() < 1e-6, "{at}");
    assert!(
        r.to_pre_fault
            .flags
            .iter()
            .any(|f| f.starts_with("early detection")),
        "{:?}",
        r.to_pre_fault.flags
    );
    // The timeline: Recovering at the removal, Recovered after it, in order.
    let at_state = |name: &str| r.timeline.iter().find(|s| s.state == name).unwrap().from_s;
    assert_eq!(at_state("Recovering"), Some(60.0));
    assert_eq!(at_state("Recovered"), Some(62.0));
    let recovery = r
        .durations
        .iter()
        .find(|d| d.duration == "recovery")
        .unwrap();
    assert_eq!(recovery.seconds, Some(2.0));
    // The plateau ends at the removal: the survivor is no longer alone after it.
    assert!(r.equilibrium.to_s <= 60.0, "{:?}", r.equilibrium);
}

#[test]
fn an_equilibrium_reached_at_once_reads_r_and_says_why() {
    // Half the traffic fails from the fire for 30 s: the survivor's level is there at once.
    let (_, v3) = both(
        failing_while(|t| (INJECT..INJECT + 30 * S).contains(&t)),
        fault_events(),
    );
    let r = rec(&v3);
    assert!(r.equilibrium.estimable, "{:?}", r.equilibrium);
    assert_eq!(r.to_equilibrium.ttr_s, Some(r.window_s));
    assert!(
        r.to_equilibrium
            .flags
            .iter()
            .any(|f| f.starts_with("TTR equals R")),
        "{:?}",
        r.to_equilibrium.flags
    );
}

#[test]
fn an_invalid_run_keeps_its_timeline_and_prints_no_recovery_figure() {
    // One baseline request in ten errors: G6 fails (goodput 0.9 < 0.99), the run is invalid.
    let fate = move |e: &Entry| {
        let t = e.intended_ns;
        if (6 * S..INJECT).contains(&t) && e.index.is_multiple_of(10) {
            return Some(ended(e, "refused", MS));
        }
        failing_while(|t| (INJECT..INJECT + 20 * S).contains(&t))(e)
    };
    let (v2, v3) = both(fate, fault_events());
    assert!(!v2.validity.valid && !v3.validity.valid);
    assert!(v2.recovery.is_none(), "v0.2 unchanged: no recovery section");
    assert!(
        v2.timeline.recovered_s.is_some(),
        "v0.2 still cuts at the recovery"
    );
    let r = rec(&v3);
    assert!(amended(&v3).withheld.is_some());
    assert_eq!(r.to_pre_fault.status, "withheld");
    assert_eq!(r.to_equilibrium.status, "withheld");
    assert!(r.sweep.is_empty() && r.components.is_empty() && r.series.is_empty());
    assert!(r.deficit_goodput_s.is_none());
    assert_eq!(r.timeline.len(), 7, "the diagnosis keeps the timeline");
    assert_eq!(v3.timeline.recovered_s, None);
    assert!(v3.timeline.recovery_note.starts_with("withheld"));
    let fault = v3
        .timeline
        .windows
        .iter()
        .find(|w| w.window == "fault")
        .unwrap();
    assert_eq!(fault.end_s, 96.0, "the fault window runs to the timeout");
    assert!(v3
        .not_publishable
        .iter()
        .any(|m| m.contains("the run is invalid")));
    let md = report::markdown(&v3);
    assert!(md.contains("**Withheld:**"));
    assert!(!md.contains("held for H"), "no Recovered state with a time");
    assert!(md.contains("NOT PUBLISHABLE: the run is invalid"));
    // Every output says so: the interval log's header, each plot, and the latency plot across.
    let hlog = String::from_utf8(report::interval_log(&v3).unwrap()).unwrap();
    assert!(
        hlog.lines()
            .any(|l| l.starts_with('#') && l.contains("NOT PUBLISHABLE: the run is invalid")),
        "{hlog}"
    );
    let plots = crate::plots::all(&v3, &crate::frame::Requests::default());
    assert!(!plots.is_empty());
    for (name, svg) in &plots {
        assert!(
            svg.contains("NOT PUBLISHABLE: the run is invalid"),
            "{name}"
        );
        assert_eq!(
            svg.contains("INVALID RUN: NOT PUBLISHABLE"),
            *name == "latency.svg",
            "{name}"
        );
    }
    let html = crate::html::page(&v3, &md, &plots);
    assert!(html.contains("NOT PUBLISHABLE: the run is invalid"));
    // The summary box leads with the verdict and withholds the statistics too.
    let summary = html.find("<div class=\"summary invalid\">").unwrap();
    assert!(summary < html.find("<table>").unwrap());
    assert!(html.contains("<p class=\"verdict\">INVALID: "), "{html}");
}

#[test]
fn the_audit_artifact_fills_every_field_from_the_journal() {
    let (v2, v3) = both(|_| None, fault_events());
    assert!(v2.audit.artifact.is_none());
    let a = &v3.audit;
    let art = a.artifact.as_ref().expect("v0.3 carries the artifact");
    assert!(art.workload.starts_with("open loop"), "{}", art.workload);
    assert!(art
        .workload
        .contains("Evidence: the intended times are regenerated"));
    assert!(art.workload.contains("in flight at once"));
    for stamp in [
        "intended send t_i",
        "dispatched",
        "connect start and end",
        "TLS done",
        "request written",
        "response head",
        "first content",
        "content gap",
        "the deadline t_i + 3.000 s",
    ] {
        assert!(
            art.clock.contains(stamp),
            "clock model lacks {stamp}: {}",
            art.clock
        );
    }
    assert!(art.stages.starts_with("scheduled "), "{}", art.stages);
    assert!(art.stages.contains("undispatched 0"));
    assert!(
        art.generator.contains(&v3.provenance.config_hash),
        "{}",
        art.generator
    );
    assert!(art.generator.contains("percentes recorder synthetic"));
    assert!(art.generator.contains("connections opened"));
    assert!(art.generator.contains("loopback canary"));
    assert!(art.schedule.contains("Lag policy") && art.schedule.contains("Drop policy"));
    assert!(art.schedule.contains("KS"), "{}", art.schedule);
    assert!(art
        .results
        .contains("no coordinated-omission correction was applied"));
    let names: Vec<&str> = art.threats.iter().map(|t| t.threat).collect();
    assert_eq!(
        names,
        [
            "response coupling",
            "saturation",
            "censoring",
            "retries",
            "shared bottlenecks"
        ]
    );
    assert!(art.threats.iter().all(|t| !t.shows.is_empty()));
    assert!(art.threats[3].shows.contains("pinned at 0"));
    assert_eq!(art.decision, a.decision);
    // The observed queue depth, not the field older recorders filled with the capacity.
    let (depth, how) = a.telemetry.writer_queue_observed.clone().unwrap();
    assert_eq!(depth, 4, "{how}");
    let md = report::markdown(&v3);
    assert!(md.contains("### Audit artifact (seeds/003, field by field)"));
    assert!(md.contains("writer queue depth max 4"));
    assert!(report::markdown(&v2).contains("writer queue max 4"));
}

#[test]
fn the_fidelity_table_gives_each_of_the_seven_points() {
    let (_, v3) = both(
        failing_while(|t| (INJECT..INJECT + 20 * S).contains(&t)),
        fault_events(),
    );
    let f = &amended(&v3).fidelity;
    let points: Vec<&str> = f.iter().map(|e| e.point).collect();
    assert_eq!(
        points,
        [
            "controller",
            "dependency or resource",
            "detection",
            "clients",
            "protection",
            "removal",
            "residual state"
        ]
    );
    let status = |i: usize| f[i].status;
    assert_eq!(status(0), "evidenced");
    assert!(
        f[0].evidence.contains("clean-delete on replica-1"),
        "{}",
        f[0].evidence
    );
    assert_eq!(status(1), "evidenced", "fault-confirmed is in the journal");
    assert_eq!(status(2), "not evidenced");
    assert!(f[2].evidence.contains("would evidence it"));
    assert_eq!(status(3), "evidenced");
    assert!(f[3].evidence.contains("refused"), "{}", f[3].evidence);
    assert_eq!(status(4), "not evidenced", "nothing timed out or was shed");
    assert_eq!(status(5), "evidenced");
    assert!(
        f[5].evidence.starts_with("traffic-restored"),
        "{}",
        f[5].evidence
    );
    assert_eq!(status(6), "evidenced", "{}", f[6].evidence);
    assert!(report::markdown(&v3).contains("### Fault-fidelity evidence (seeds/004)"));
}

#[test]
fn g2_2_counts_requests_without_a_record_under_v0_3() {
    // A journal cut two thirds of the way (what a crash leaves): an unsealed prefix whose later
    // requests have no record, so their dispatch was never observed.
    let mut bytes = synthetic::scripted(
        &config(STEADY),
        &|e: &Entry| Some(completed(e, 100_000, 100 * MS, 500 * MS, vec![])),
        Vec::new(),
        quiet_telemetry(42),
        SealStatus::Completed,
    );
    bytes.truncate(bytes.len() * 2 / 3);
    let analyzed = |spec| analyze_bytes("unknown.pj", &bytes, spec);
    let gate = |r: &Report| {
        r.validity
            .gates
            .iter()
            .find(|g| g.id == GateId::Undispatched)
            .cloned()
            .unwrap()
    };
    let v2 = analyzed(Spec::V0_2);
    assert!(gate(&v2).passed(), "v0.2 keeps its archived verdict");
    let v3 = analyzed(Spec::V0_3);
    let unknown = v3
        .audit
        .stages
        .iter()
        .find(|(s, _)| s == "no record")
        .unwrap()
        .1;
    assert!(unknown > 0);
    let g = gate(&v3);
    assert!(!g.passed(), "{g:?}");
    assert_eq!(g.observed, format!("{unknown} requests"));
    assert!(g.note.contains("no record"), "{}", g.note);
}

#[test]
fn a_survivor_that_never_settles_inside_the_plateau_is_said_to_be_not_settled() {
    // From the fire the survivor alone serves everything, failing one more request in twenty
    // each second (goodput falls from 1.0 to 0 over 20 s, then stays there), until the
    // replacement serves from 60 s. No 6 s hold stays within 15 % of the plateau's mean.
    let fate = |e: &Entry| {
        let t = e.intended_ns;
        let mut r = completed(e, 100_000, 100 * MS, 500 * MS, vec![]);
        if (INJECT..60 * S).contains(&t) {
            if e.index % 20 < (t - INJECT) / S {
                return Some(ended(e, "refused", MS));
            }
            r.replica = "replica-0".into();
        } else {
            r.replica = format!("replica-{}", e.index % 2);
        }
        Some(r)
    };
    let (_, v3) = both(fate, fault_events());
    let r = rec(&v3);
    assert!(r.equilibrium.estimable, "{:?}", r.equilibrium);
    assert!(
        r.equilibrium.to_s <= 61.0,
        "ends at the removal: {:?}",
        r.equilibrium
    );
    assert_eq!(r.to_equilibrium.status, "not settled");
    assert!(
        r.to_equilibrium
            .text
            .starts_with("not settled: no counting window stayed within 15 %"),
        "{}",
        r.to_equilibrium.text
    );
    assert!(r.to_pre_fault.ttr_s.is_some(), "{:?}", r.to_pre_fault);
}

/// Issue 20: a request that opened a connection reached the wire after its connect (and TLS),
/// and under v0.3 that wait is in its send skew, in G2.1 and in the audit.
#[test]
fn a_request_that_opened_a_connection_has_that_wait_in_its_skew() {
    // 20 rps for 42 s; request 400 (20 s in, measured) dispatches 100 us late and then waits
    // 30 ms for its connect and 12 ms more for its TLS handshake. Every other one reuses a
    // connection, 100 us late.
    let fate = |e: &Entry| {
        let mut r = completed(e, 100_000, 100 * MS, 500 * MS, vec![]);
        if e.index == 400 {
            let d = r.dispatched_ns.unwrap();
            r.connection_reused = false;
            r.connect_start_ns = Some(d);
            r.connect_end_ns = Some(d + 30 * MS);
            r.tls_done_ns = Some(d + 42 * MS);
            r.request_written_ns = Some(d + 42 * MS + 20_000);
        }
        Some(r)
    };
    let bytes = synthetic::scripted(
        &config(STEADY),
        &fate,
        Vec::new(),
        quiet_telemetry(42),
        SealStatus::Completed,
    );
    let max = |r: &Report| {
        r.validity
            .gates
            .iter()
            .find(|g| g.id == GateId::SendSkewMax)
            .cloned()
            .unwrap()
    };
    let v2 = analyze_bytes("connect.pj", &bytes, Spec::V0_2);
    let v3 = analyze_bytes("connect.pj", &bytes, Spec::V0_3);
    assert_eq!(v2.audit.skew_us.max, 100, "v0.2 reads the dispatch alone");
    assert_eq!(max(&v2).observed, "0.100 ms");
    // v0.3: 100 us + 42 ms, within the 50 ms max, but now in the skew where it belongs.
    assert_eq!(v3.audit.skew_us.max, 42_100);
    assert_eq!(max(&v3).observed, "42.100 ms");
    assert!(
        max(&v3).note.contains("connect and TLS handshake"),
        "{}",
        max(&v3).note
    );
    let waits = v3
        .audit
        .artifact
        .as_ref()
        .and_then(|a| a.connection_waits.clone())
        .unwrap();
    assert!(
        waits.starts_with("1 of the ") && waits.contains("max 42.000 ms"),
        "{waits}"
    );
}
