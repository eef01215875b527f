//! A testbed change read from scripted journals (SPEC §10 "Reading a testbed change", A4), and
//! the detection time a fault campaign reads beside a fault's other scalars (§5):
//! every span, group and first worked out by hand from the STEADY schedule (request i intended
//! at i x 50 ms; a completed one dispatched and written 0.1 ms after it and ended 500 ms after;
//! an `ended` one dispatched 0.05 ms after it).

use super::*;
use crate::model::ChangeReport;
use percentes_formats::journal::records::RequestRecord;

/// A `timeline` event of `subject` with `detail` at `at_ns`.
fn step(at_ns: u64, subject: &str, detail: &str) -> EventRecord {
    EventRecord {
        at_ns,
        kind: EventKind::Timeline.code(),
        subject: subject.into(),
        detail: detail.into(),
        value: None,
    }
}

fn run(
    fate: impl Fn(&Entry) -> Option<RequestRecord> + 'static,
    events: Vec<EventRecord>,
    spec: Spec,
) -> Report {
    run_scraped(fate, events, Vec::new(), spec)
}

/// [`run`] with scrape records journaled too.
fn run_scraped(
    fate: impl Fn(&Entry) -> Option<RequestRecord> + 'static,
    events: Vec<EventRecord>,
    scrapes: Vec<percentes_formats::journal::scrape::ScrapeRecord>,
    spec: Spec,
) -> Report {
    let request = move |e: &Entry| {
        Some(fate(e).unwrap_or_else(|| completed(e, 100_000, 100 * MS, 500 * MS, vec![])))
    };
    // The scripted stall readings stand for the workers' own tickers, as `scripted` says.
    let placement = (
        percentes_formats::journal::header::HostFact::Placement
            .key()
            .to_owned(),
        "synthetic: the scripted stall readings are each worker's own ticker".to_owned(),
    );
    let bytes = synthetic::scripted_with_scrapes(
        &config(STEADY),
        &request,
        (events, quiet_telemetry(42), scrapes),
        SealStatus::Completed,
        vec![placement],
    );
    analyze_bytes("change.pj", &bytes, spec)
}

/// Both replicas scraped each second from 1 s to 41 s (answered at t +/- 5 ms): replica-0's
/// waiting queue 2 to 9 s, then 3 x (t - 9) to 25 s (48), then 0, replica-1's 0 throughout;
/// each one's running requests 5 to 20 s, then 0.
fn queue_scrapes() -> Vec<percentes_formats::journal::scrape::ScrapeRecord> {
    use percentes_formats::journal::scrape::Scraper;
    use percentes_formats::prometheus::{Exposed, SeriesKind};
    let gauge = |name: &str, value: f64| Exposed {
        name: name.into(),
        family: name.into(),
        labels: Vec::new(),
        kind: SeriesKind::Gauge,
        value,
    };
    let waiting = |value| gauge("vllm:num_requests_waiting", value);
    let running = |t: u64| gauge("vllm:num_requests_running", if t <= 20 { 5.0 } else { 0.0 });
    // A scraper keeps one source's state.
    let (mut zero, mut one) = (Scraper::default(), Scraper::default());
    let mut scrapes = Vec::new();
    for t in 1..=41u64 {
        let queue = match t {
            ..=9 => 2.0,
            10..=25 => 3.0 * (t - 9) as f64,
            _ => 0.0,
        };
        let at = (t * S - 5 * MS, t * S + 5 * MS);
        scrapes.push(zero.record("replica-0", at, &[waiting(queue), running(t)]));
        scrapes.push(one.record("replica-1", at, &[waiting(0.0), running(t)]));
    }
    scrapes
}

fn change(report: &Report) -> &ChangeReport {
    report
        .change
        .as_ref()
        .unwrap_or_else(|| panic!("no change read: {:?}", report.windows_withheld))
}

fn span(c: &ChangeReport, name: &str) -> f64 {
    c.spans
        .iter()
        .find(|s| s.span == name)
        .unwrap_or_else(|| panic!("no span {name}: {:?}", c.spans))
        .seconds
}

fn classes(c: &ChangeReport, group: &str) -> (u64, Vec<(String, u64)>) {
    let g = c
        .requests
        .iter()
        .find(|g| g.group == group)
        .unwrap_or_else(|| panic!("no group {group}: {:?}", c.requests));
    (
        g.n,
        g.classes.iter().map(|k| (k.class.clone(), k.n)).collect(),
    )
}

/// `g` read `[by the boundary, first after, largest after, last]`, its first after `after_s`
/// past the boundary.
fn gauge_reads(
    g: &crate::model::GaugeAround,
    [before, first, largest, last]: [f64; 4],
    after_s: f64,
) {
    assert_eq!(
        (g.before, g.largest_after, g.last),
        (Some(before), Some(largest), Some(last)),
        "{g:?}"
    );
    let (value, after) = g.first_after.expect("a reading after the boundary");
    assert_eq!(value, first, "{g:?}");
    assert!(close(after, after_s), "{g:?}");
}

/// The campaign groups of `report` read once for each of `names` (one design, no probe).
fn campaign(report: &Report, names: &[&str]) -> Vec<crate::model::Group> {
    let refs: Vec<crate::summaries::RunRef<'_>> = names
        .iter()
        .map(|name| crate::summaries::RunRef {
            name,
            report,
            accelerator: &[],
            design: "design",
            probe_ms: None,
        })
        .collect();
    crate::summaries::groups(&refs)
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-6
}

const KILL: u64 = 20 * S + 25 * MS;
const RESTART: u64 = 22 * S + 25 * MS;

fn failover_events() -> Vec<EventRecord> {
    vec![
        step(KILL, "orchestrator", "proxy failover: HAProxy (pid 10) killed with SIGKILL, requests in flight through it by replica: replica-0 5, replica-1 5"),
        step(RESTART, "container-start", "proxy failover: HAProxy started again (pid 11), the same configuration on the same port, 2.000 s after the kill"),
        step(RESTART + 200 * MS, "orchestrator", "proxy failover: the new HAProxy counts 2 of 2 replicas UP, 0.200 s after its start"),
        // A partition watcher's verdict in the same timeline is no step of the change.
        step(30 * S, "orchestrator", "HAProxy marked replica-1 UP (its health check passes) and routes to it again"),
    ]
}

/// The requests written by the kill and not yet ended (intended in (19.525 s, 20.025 s]:
/// indices 391-400) close 3 ms after it; those dispatched while the port was closed (intended
/// 20.05-22.00 s: indices 401-440) are refused in 1 ms; 441 (22.05 s) is the first served.
fn failover_fate(e: &Entry) -> Option<RequestRecord> {
    match e.index {
        391..=400 => Some(ended(e, "premature-close", KILL + 3 * MS - e.intended_ns)),
        401..=440 => Some(ended(e, "refused", MS)),
        _ => None,
    }
}

#[test]
fn a_proxy_failover_reads_its_down_time_what_was_in_flight_and_the_first_served() {
    let report = run_scraped(
        failover_fate,
        failover_events(),
        queue_scrapes(),
        Spec::V0_5,
    );
    let c = change(&report);
    assert_eq!((c.change, c.ended.as_str()), ("proxy failover", "complete"));
    assert_eq!(
        c.steps.iter().map(|s| s.step).collect::<Vec<_>>(),
        ["proxy killed", "proxy started", "every replica up"]
    );
    assert!(close(span(c, "down, the kill to its new process"), 2.0));
    assert!(close(span(c, "its new process to every replica up"), 0.2));
    assert!(close(span(c, "the kill to every replica up"), 2.2));
    assert_eq!(
        classes(c, "in flight through the proxy at the kill"),
        (10, vec![("premature-close".into(), 10)])
    );
    let through = &c.requests[0];
    assert!(close(through.last_end_after_s.unwrap(), 0.003));
    assert_eq!(
        classes(c, "sent while it was down"),
        (40, vec![("refused".into(), 40)])
    );
    let first = &c.firsts[0];
    assert_eq!(first.what, "first served after the kill");
    // 441 is dispatched at 22.0501 s: 2.0251 s after the kill, 0.0251 s after the restart.
    assert!(close(first.sent_s.unwrap(), 22.0501));
    assert!(close(first.after[0].seconds, 2.0251));
    assert!(close(first.after[1].seconds, 0.0251));
    // Each replica's running requests: 5 at its scrape at 20 s, 0 at the next (21 s, 0.975 s
    // after the kill) and after.
    assert_eq!(c.gauges.len(), 2);
    for g in &c.gauges {
        assert_eq!(g.gauge, "requests running");
        gauge_reads(g, [5.0, 0.0, 0.0, 0.0], 0.975);
    }
    assert_eq!(
        c.text,
        "testbed change (§10): proxy failover complete; down, the kill to its new process 2.000 s; its new process to every replica up 0.200 s; 10 in flight through the proxy at the kill (10 premature-close), the last ended 3.0 ms after it; 40 sent while it was down (40 refused); first served after the kill 2.025 s after the kill, 0.025 s after the restart; replica-0's requests running: 5 at its last scrape by the kill, 0 at its first after (0.975 s later), 0 at most after it, 0 at its last scrape; replica-1's requests running: 5 at its last scrape by the kill, 0 at its first after (0.975 s later), 0 at most after it, 0 at its last scrape"
    );
    // The summary and report.md say it; report.json holds it.
    let summary = crate::figures::text(&crate::figures::of(&report, &[]));
    assert!(summary.contains(&c.text), "{summary}");
    let md = report::markdown(&report);
    assert!(
        md.contains("## Testbed change (§10): proxy failover complete"),
        "{md}"
    );
    assert!(
        md.contains(
            "| in flight through the proxy at the kill | 10 | premature-close 10 | 3.0 ms |"
        ),
        "{md}"
    );
    assert!(md.contains("- first served after the kill: sent at 22.050 s, 2.025 s after the kill, 0.025 s after the restart"), "{md}");
    let json = serde_json::to_value(&report).unwrap();
    assert_eq!(json["change"]["change"], "proxy failover");
}

#[test]
fn v0_4_reads_no_change_and_an_invalid_run_withholds_it() {
    let v4 = run(failover_fate, failover_events(), Spec::V0_4);
    assert!(v4.change.is_none());
    assert!(!report::markdown(&v4).contains("Testbed change"));
    assert!(serde_json::to_value(&v4).unwrap().get("change").is_none());
    // The same timeline with every request's intended second stalled: G2.1 fails, the windows
    // and the change are withheld together (§9).
    let late = |e: &Entry| Some(completed(e, 200 * MS, 400 * MS, 500 * MS, vec![]));
    let invalid = run(late, failover_events(), Spec::V0_5);
    assert!(!invalid.validity.valid);
    assert!(invalid.change.is_none());
}

/// A scale-out decided at 10 s: replica-1 started 20 ms later, its weights at 20 s, ready at
/// 25 s, in service at 25.2 s.
fn scale_out_events() -> Vec<EventRecord> {
    let decided = 10 * S;
    vec![
        step(decided, "orchestrator", "scale-out: decided to start replica-1"),
        step(decided + 20 * MS, "container-start", "scale-out: replica-1 started, pid 7, port 9"),
        step(20 * S, "weight-load", "replica-1's log: Loading weights took 0.01 seconds"),
        step(25 * S, "orchestrator", "scale-out: replica-1 answers /health after 14.980 s"),
        step(25 * S + 200 * MS, "orchestrator", "scale-out: HAProxy put replica-1 (the same release) in service: UP, its last health check L7OK"),
        step(25 * S + 200 * MS, "orchestrator", "scale-out complete: replica-1 in service 15.200 s after the decision"),
    ]
}

/// Before replica-1 is in service one request in five is rejected; after it, odd indices go
/// to it.
fn scale_out_fate(e: &Entry) -> Option<RequestRecord> {
    let t = e.intended_ns;
    if (10 * S..25 * S + 200 * MS).contains(&t) && e.index.is_multiple_of(5) {
        return Some(ended(e, "rejection", MS));
    }
    let mut r = completed(e, 100_000, 100 * MS, 500 * MS, vec![]);
    if t >= 25 * S + 200 * MS && e.index % 2 == 1 {
        r.replica = "replica-1".into();
    }
    Some(r)
}

#[test]
fn a_scale_out_decomposes_the_decision_to_in_service_and_finds_the_new_replicas_first() {
    let report = run_scraped(
        scale_out_fate,
        scale_out_events(),
        queue_scrapes(),
        Spec::V0_5,
    );
    let c = change(&report);
    assert_eq!((c.change, c.ended.as_str()), ("scale-out", "complete"));
    assert!(close(span(c, "decision to process start"), 0.02));
    assert!(close(
        span(c, "process start to its weights-loaded line"),
        9.98
    ));
    assert!(close(
        span(c, "weights-loaded line to its first ready answer"),
        5.0
    ));
    assert!(close(
        span(c, "ready to in service (the proxy's check)"),
        0.2
    ));
    assert!(close(span(c, "decision to in service"), 15.2));
    // Dispatched in (10 s, 25.2 s): indices 200-503, 304 requests; 61 of them (200, 205, ...,
    // 500) rejected.
    assert_eq!(
        classes(c, "sent from the decision to in service"),
        (
            304,
            vec![("correct-success".into(), 243), ("rejection".into(), 61)]
        )
    );
    // Dispatched after 25.2 s: indices 504-839.
    assert_eq!(
        classes(c, "sent after it entered service"),
        (336, vec![("correct-success".into(), 336)])
    );
    // The first odd index from 504 is 505, dispatched at 25.2501 s.
    let first = &c.firsts[0];
    assert_eq!(first.what, "first served by replica-1");
    assert!(close(first.after[0].seconds, 15.2501));
    assert!(close(first.after[1].seconds, 0.0501));
    // The last failure: index 500 (25.0 s), dispatched 15.00005 s after the decision, before
    // in service (so no time after it).
    let last = c.last_failed.as_ref().expect("failures after the decision");
    assert_eq!(last.after.len(), 1);
    assert!(close(last.after[0].seconds, 15.00005));
    // The lone replica's queue, not the new one's: 3 at the decision (10 s), 6 a second
    // after, 48 at most, 0 at the end.
    assert_eq!(c.gauges.len(), 1, "{:?}", c.gauges);
    let g = &c.gauges[0];
    assert_eq!(
        (g.source.as_str(), g.gauge),
        ("replica-0", "requests waiting")
    );
    gauge_reads(g, [3.0, 6.0, 48.0, 0.0], 1.0);
    assert!(
        c.text.contains("replica-0's requests waiting: 3 at its last scrape by the decision, 6 at its first after (1.000 s later), 48 at most after it, 0 at its last scrape"),
        "{}",
        c.text
    );
}

/// A rollout of two steps, its timeline ending after step 2's new replica entered service
/// unless `finished`.
fn rollout_events(finished: bool) -> Vec<EventRecord> {
    let label = |i: u32, words: &str| format!("rollout step {i} of 2: {words}");
    let mut events = vec![
        step(10 * S, "container-start", &label(1, "replica-2 (new) started, pid 1, port 2")),
        step(12 * S, "weight-load", "replica-2's log: Loading weights took 0.02 seconds"),
        step(13 * S, "orchestrator", &label(1, "replica-2 (new) answers /health after 3.000 s")),
        step(13 * S + 500 * MS, "orchestrator", &label(1, "HAProxy put replica-2 (new) in service: UP, its last health check L7OK")),
        step(13 * S + 700 * MS, "orchestrator", &label(1, "HAProxy drains replica-0 (old): no new request goes to it; 4 in flight on it")),
        step(14 * S + 700 * MS, "orchestrator", &label(1, "replica-0 drained in 1.000 s: none in flight; HAProxy took it out of service")),
        step(15 * S, "orchestrator", &label(1, "replica-0 (old) out of service and stopped (SIGTERM to its process group, gone in 0.300 s)")),
        step(15 * S + 100 * MS, "container-start", &label(2, "replica-3 (new) started, pid 3, port 4")),
        step(17 * S + 100 * MS, "orchestrator", &label(2, "replica-3 (new) answers /health after 2.000 s")),
        step(17 * S + 200 * MS, "orchestrator", &label(2, "HAProxy put replica-3 (new) in service: UP, its last health check L7OK")),
    ];
    if finished {
        events.extend([
            step(17 * S + 400 * MS, "orchestrator", &label(2, "HAProxy drains replica-1 (old): no new request goes to it; 4 in flight on it")),
            step(18 * S + 400 * MS, "orchestrator", &label(2, "replica-1 still had 1 in flight after the drain timeout (1.000 s); HAProxy took it out of service anyway, and those requests end with it")),
            step(18 * S + 900 * MS, "orchestrator", &label(2, "replica-1 (old) out of service and stopped (SIGTERM to its process group, gone in 0.500 s)")),
            step(18 * S + 900 * MS, "orchestrator", "rollout complete: 2 of 2 replicas replaced, \"old\" by \"new\""),
        ]);
    }
    events
}

/// Index 251 resets; i % 4 == 2 goes to replica-2 once it is in service (13.5 s), i % 4 == 3
/// to replica-3 once it is (17.2 s).
fn rollout_fate(e: &Entry) -> Option<RequestRecord> {
    if e.index == 251 {
        return Some(ended(e, "reset", MS));
    }
    let t = e.intended_ns;
    let mut r = completed(e, 100_000, 100 * MS, 500 * MS, vec![]);
    if t > 13 * S + 500 * MS && e.index % 4 == 2 {
        r.replica = "replica-2".into();
    }
    if t > 17 * S + 200 * MS && e.index % 4 == 3 {
        r.replica = "replica-3".into();
    }
    Some(r)
}

#[test]
fn a_rollout_reads_each_step_and_the_whole() {
    let report = run(rollout_fate, rollout_events(true), Spec::V0_5);
    let c = change(&report);
    assert_eq!((c.change, c.ended.as_str()), ("rollout", "complete"));
    assert_eq!(c.steps[0].number.as_deref(), Some("1 of 2"));
    for (name, seconds) in [
        (
            "step 1: replica-2's process start to its weights-loaded line",
            2.0,
        ),
        (
            "step 1: replica-2's weights-loaded line to its first ready answer",
            1.0,
        ),
        ("step 1: replica-2 ready to in service", 0.5),
        ("step 1: replica-0 draining to out of service", 1.0),
        ("step 1: replica-0 out of service to stopped", 0.3),
        ("step 1 whole, replica-2 started to replica-0 stopped", 5.0),
        (
            "step 2: replica-3's process start to its first ready answer",
            2.0,
        ),
        ("step 2: replica-3 ready to in service", 0.1),
        ("step 2: replica-1 draining to out of service", 1.0),
        ("step 2: replica-1 out of service to stopped", 0.5),
        ("step 2 whole, replica-3 started to replica-1 stopped", 3.8),
        ("the whole rollout", 8.9),
    ] {
        assert!(close(span(c, name), seconds), "{name}: {}", span(c, name));
    }
    // Dispatched in (10 s, 18.9 s): indices 200-377 (378 goes 0.1 ms after the end); 251
    // reset.
    assert_eq!(
        classes(c, "sent while the rollout ran"),
        (
            178,
            vec![("correct-success".into(), 177), ("reset".into(), 1)]
        )
    );
    // replica-2 from 13.5 s: index 274 (13.7 s) is the first with i % 4 == 2 after it;
    // replica-3 from 17.2 s: index 347 (17.35 s).
    assert_eq!(c.firsts.len(), 2);
    assert!(close(c.firsts[0].after[0].seconds, 0.2001));
    assert!(close(c.firsts[1].after[0].seconds, 0.1501));
}

#[test]
fn a_rollout_the_run_outlasts_reads_unfinished_without_its_whole() {
    let report = run(rollout_fate, rollout_events(false), Spec::V0_5);
    let c = change(&report);
    assert_eq!(c.change, "rollout");
    assert!(c.ended.starts_with("unfinished"), "{}", c.ended);
    assert!(!c.spans.iter().any(|s| s.span.starts_with("the whole")));
    assert!(!c.spans.iter().any(|s| s.span.starts_with("step 2 whole")));
    // Sent from its first step to the run's end (42 s): indices 200-839.
    assert_eq!(classes(c, "sent while the rollout ran").0, 640);
}

/// A campaign of changes reads the change's scalars, not a fault's: a failover's down time and
/// first served after the restart, and the scalars of other kinds named not applicable.
#[test]
fn a_campaign_of_failovers_reads_the_changes_scalars() {
    let report = run(failover_fate, failover_events(), Spec::V0_5);
    let names = ["a.pj", "b.pj", "c.pj"];
    let groups = campaign(&report, &names);
    let scalar = |name: &str| {
        groups[0]
            .scalars
            .iter()
            .find(|s| s.name.starts_with(name))
            .unwrap_or_else(|| panic!("no scalar {name}"))
    };
    assert!(!groups[0].scalars.iter().any(|s| s.name.starts_with("TTR")));
    let length = scalar("change: its length");
    assert_eq!(length.role, "primary");
    assert!(length.values.iter().all(|(_, v)| close(*v, 2.2)));
    assert!(scalar("change: proxy down")
        .values
        .iter()
        .all(|(_, v)| close(*v, 2.0)));
    assert!(scalar("change: first served after the proxy's restart")
        .values
        .iter()
        .all(|(_, v)| close(*v, 0.0251)));
    // 40 sent while it was down, all refused.
    assert!(scalar("change: requests sent while it ran")
        .values
        .iter()
        .all(|(_, v)| close(*v, 1.0)));
    let weights = scalar("change: the first new replica's");
    assert!(weights.values.is_empty());
    assert_eq!(
        weights.dropped,
        names.map(|n| format!("{n}: not applicable to a proxy failover"))
    );
}

/// A fault campaign under v0.5 reads the service's detection time (issue 56's partition study
/// read it by hand): the `detected` event 0.8 s after the confirmed impact (36.06 s) in each
/// run; under v0.4 the scalar is not read.
#[test]
fn a_fault_campaign_under_v0_5_reads_the_detection_time() {
    use super::recovery_reports::{event, fault_events, run_under, FIRED};
    let events = || {
        let mut events = fault_events();
        events.push(event(FIRED + 810 * MS, "timeline", "detected", None));
        events
    };
    let detection = |spec: Spec| {
        let report = run_under(FAULT, |_| None, events(), spec);
        campaign(&report, &["a.pj", "b.pj"])[0]
            .scalars
            .iter()
            .find(|s| s.name.starts_with("detection"))
            .map(|s| s.values.clone())
    };
    let values = detection(Spec::V0_5).expect("v0.5 reads detection");
    assert_eq!(values.len(), 2);
    assert!(values.iter().all(|(_, v)| close(*v, 0.8)), "{values:?}");
    assert_eq!(detection(Spec::V0_4), None);
}
