//! The production fault plan on the simulation's clock (issue 51 item 3): armed, fired at
//! T_inject, judged on its baseline, confirmed or not, removed early or at its expiry, each step
//! at an exact time against a scripted victim; and the replicas' probes beside it, whose gauge
//! the baseline judgement reads and whose disappearance ends the run. Times are ns from the
//! epoch.

use percentes_formats::journal::records::{
    event_kind_name, EventRecord, BASELINE_UNHEALTHY, IMPACT_UNCONFIRMED, TELEMETRY_MISSING,
};

use percentes_formats::pins;

use super::super::pacer::BATCH_INTERVAL;
use super::tests::{declared, Simulate};
use super::*;

/// A clean delete of replica `a` (of `a` and `b`) fired by an injector the simulation stands in for, with the
/// confirmation keys `confirm` (empty: none), in a time-factor-10 run at 26 rps (2 x 0.65 x
/// a calibrated 20).
fn clean_delete(confirm: &'static str) -> World {
    let fault = match confirm {
        "" => "variant = \"clean-delete\"\nvictim = \"a\"\ninjector = \"mock-admin\"\nadmin_address = \"127.0.0.1:1\"\nmock_mode = \"error\"\n",
        // The confirmation's keys differ per test; each string is made once per test run.
        keys => Box::leak(
            format!("variant = \"clean-delete\"\nvictim = \"a\"\ninjector = \"mock-admin\"\nadmin_address = \"127.0.0.1:1\"\nmock_mode = \"error\"\n{keys}")
                .into_boxed_str(),
        ),
    };
    World {
        fault_toml: fault,
        replicas: &["a", "b"],
        lambda_max_rps: Some(20.0),
        ..World::new(20.0, Duration::ZERO).configured()
    }
}

/// A black-hole of replica `a` for its pinned partition, removed by the recorder's own command.
fn black_hole() -> World {
    World {
        fault_toml: "variant = \"black-hole\"\nvictim = \"a\"\ninjector = \"exec\"\nfire_command = [\"true\"]\nremove_command = [\"true\"]\n",
        replicas: &["a", "b"],
        lambda_max_rps: Some(20.0),
        ..World::new(20.0, Duration::ZERO).configured()
    }
}

fn events(run: &Run) -> Vec<&EventRecord> {
    run.journaled
        .iter()
        .filter_map(|r| match r {
            Record::Event(e) => Some(e),
            _ => None,
        })
        .collect()
}

fn event<'a>(run: &'a Run, name: &str) -> Option<&'a EventRecord> {
    events(run)
        .into_iter()
        .find(|e| event_kind_name(e.kind) == Some(name))
}

fn inject_ns(run: &Run) -> u64 {
    run.plan
        .as_ref()
        .and_then(|p| p.inject_at_ns)
        .expect("a fault run")
}

/// Nothing was dispatched after `at`, but what a worker had in hand within a batch interval.
fn nothing_sent_after(run: &Run, at: u64) {
    let limit = at + 2 * BATCH_INTERVAL.as_nanos() as u64;
    let late: Vec<_> = run
        .records
        .iter()
        .filter(|r| r.dispatched_ns.is_some_and(|d| d > limit))
        .map(|r| (r.index, r.dispatched_ns))
        .collect();
    assert!(late.is_empty(), "sent after {at}: {late:?}");
}

/// AC3 on the simulation: armed at the epoch, fired at T_inject exactly (the timer floor late),
/// journaled with its lateness; every request written by the fire completes and every one
/// written after it gets the injected 500. Deliberate break: a plan that fired on a relative
/// sleep from its arming (or never) moves `fault-fired` off T_inject, and the 500s with it.
#[test]
fn the_fault_plan_fires_at_t_inject_and_the_target_answers_its_fault() {
    let mut world = clean_delete("");
    world.victim.status = Some(500);
    let run = world.simulate();
    assert_accounted(&run);
    let inject = inject_ns(&run);
    let armed = event(&run, "fault-armed").expect("armed");
    assert_eq!((armed.at_ns, armed.value), (0, Some(inject as i64)));
    let fired = event(&run, "fault-fired").expect("fired");
    let floor = world.stalls.wake_floor_ns;
    assert_eq!(fired.at_ns, inject + floor, "{}", fired.detail);
    assert_eq!(fired.value, Some(floor as i64));
    assert!(
        fired
            .detail
            .contains("took 2.0 ms; 0.050 ms after T_inject"),
        "{}",
        fired.detail
    );
    let (mut before, mut after) = (0, 0);
    for r in &run.records {
        let written = r.request_written_ns.expect("every request written");
        // A request written at the fire's own instant went first: the worker ran before the
        // plan at a tie.
        if written <= fired.at_ns {
            assert_eq!(class(r), "correct-success", "{r:?}");
            before += 1;
        } else {
            assert_eq!((class(r), r.http_status), ("http-status", 500), "{r:?}");
            after += 1;
        }
    }
    assert!(
        before > 100 && after > 100,
        "{before} before, {after} after"
    );
    // A clean delete has no pinned partition: nothing removes or expires it.
    assert!(event(&run, "fault-removed").is_none() && event(&run, "fault-expired").is_none());
    assert_eq!(run.seal.as_ref().map(|s| s.1), Some(SealStatus::Completed));
}

/// seeds/004's "abort when impact cannot be confirmed": the victim's /health never answers the
/// expected 418, so once the pinned 5 s have passed since the fire the plan journals
/// `fault-failed`, then the escape `impact-unconfirmed`; load stops, the rest of the schedule is
/// `run-end`, the seal escaped. A victim that does answer 418 is confirmed at its first look.
/// Deliberate break: a confirmation that gave up on its first look, or never, moves the escape.
#[test]
fn an_impact_not_confirmed_in_the_pinned_time_ends_the_run() {
    let keys = "confirm_address = \"127.0.0.1:2\"\nconfirm_method = \"GET\"\nconfirm_path = \"/health\"\nconfirm_status = 418\n";
    let run = clean_delete(keys).simulate();
    assert_accounted(&run);
    let fired = event(&run, "fault-fired").expect("fired");
    let failed = event(&run, "fault-failed").expect("failed");
    let within = pins::value::FAULT_CONFIRM_WITHIN_S as u64 * S;
    assert!(
        failed
            .detail
            .contains("did not answer 418 within 5s (answered 200): impact not confirmed"),
        "{}",
        failed.detail
    );
    // The last look began before the deadline; it and its pause end within 11 ms after it.
    assert!(
        (fired.at_ns + within..fired.at_ns + within + 12 * MS).contains(&failed.at_ns),
        "fired {} failed {}",
        fired.at_ns,
        failed.at_ns
    );
    let escape = event(&run, "escape").expect("escape");
    assert_eq!(
        (escape.subject.as_str(), escape.at_ns),
        (IMPACT_UNCONFIRMED, failed.at_ns)
    );
    nothing_sent_after(&run, escape.at_ns);
    assert!(run.records.iter().any(|r| class(r) == "run-end"));
    let (_, status, reason) = run.seal.as_ref().expect("sealed");
    assert_eq!(*status, SealStatus::Escaped, "{reason}");
    let mut world = clean_delete(keys);
    world.victim.health = 418;
    let run = world.simulate();
    let confirmed = event(&run, "fault-confirmed").expect("confirmed");
    assert!(
        confirmed.detail == "GET /health at 127.0.0.1:2 answered 418",
        "{}",
        confirmed.detail
    );
    let fired = event(&run, "fault-fired").expect("fired");
    assert!(
        confirmed.at_ns - fired.at_ns < 5 * MS,
        "{}",
        confirmed.at_ns
    );
    assert!(event(&run, "escape").is_none());
}

/// A victim that stops accepting connections (no `confirm_path`): confirmed at the first look
/// after the fire, and the target's own connections are refused (or, opened before, reset)
/// while it is gone.
#[test]
fn a_victim_that_stops_answering_is_confirmed_gone() {
    let mut world = clean_delete("confirm_address = \"127.0.0.1:2\"\n");
    world.victim.gone = true;
    world.target.keep_alive = false;
    let run = world.simulate();
    assert_accounted(&run);
    let fired = event(&run, "fault-fired").expect("fired");
    let confirmed = event(&run, "fault-confirmed").expect("confirmed");
    assert_eq!(confirmed.detail, "127.0.0.1:2 stopped answering");
    assert!(confirmed.at_ns > fired.at_ns && confirmed.at_ns < fired.at_ns + 5 * MS);
    // A request that connects is refused; one on a spare the keeper opened before is reset.
    let after = classes_after(&run, fired.at_ns + 10 * MS);
    let refused = after.iter().filter(|&&c| c == "refused").count();
    assert!(
        refused > after.len() / 2 && after.iter().all(|&c| c == "refused" || c == "reset"),
        "{after:?}"
    );
}

fn classes_after(run: &Run, at: u64) -> Vec<&'static str> {
    run.records
        .iter()
        .filter(|r| r.intended_ns > at)
        .map(class)
        .collect()
}

/// seeds/004's "abort when baseline is unhealthy": a target that resets every request fails G6
/// over the baseline, so at T_inject the plan journals the escape `baseline-unhealthy` naming
/// the goodput, and never fires. Deliberate break: without the writer's tally in the
/// simulation (or the judgement) the fault fires into the failing service.
#[test]
fn an_unhealthy_baseline_ends_the_run_at_t_inject_without_firing() {
    let mut world = clean_delete("");
    world.target.reset_every = Some(1);
    let run = world.simulate();
    assert_accounted(&run);
    assert!(event(&run, "fault-armed").is_some());
    assert!(event(&run, "fault-fired").is_none(), "never fired");
    let escape = event(&run, "escape").expect("escape");
    assert_eq!(escape.subject, BASELINE_UNHEALTHY);
    assert!(
        escape.detail.contains("G6: 0 of the baseline's")
            && escape.detail.contains("(goodput 0.0000 < 0.99)"),
        "{}",
        escape.detail
    );
    let inject = inject_ns(&run);
    assert!(
        (inject..inject + 10 * MS).contains(&escape.at_ns),
        "escaped at {} for T_inject {inject}",
        escape.at_ns
    );
    nothing_sent_after(&run, escape.at_ns);
    assert_eq!(run.seal.as_ref().map(|s| s.1), Some(SealStatus::Escaped));
}

/// An injector whose call fails: `fault-failed` with its words at the fire, then the escape
/// `impact-unconfirmed`; the target never serves the fault.
#[test]
fn a_fire_that_fails_ends_the_run() {
    let mut world = clean_delete("");
    world.victim.fire_fails = Some("the admin endpoint answered 503");
    world.victim.status = Some(500);
    let run = world.simulate();
    let failed = event(&run, "fault-failed").expect("failed");
    assert_eq!(
        failed.detail,
        "simulated mock-admin: the admin endpoint answered 503"
    );
    assert_eq!(failed.at_ns, inject_ns(&run) + world.stalls.wake_floor_ns);
    let escape = event(&run, "escape").expect("escape");
    assert_eq!(escape.subject, IMPACT_UNCONFIRMED);
    assert!(run.records.iter().all(|r| r.http_status != 500));
    assert_eq!(run.seal.as_ref().map(|s| s.1), Some(SealStatus::Escaped));
}

/// A black-hole's pinned partition: the recorder's own removal runs at T_inject plus the pinned
/// duration; a run stopped before that (a whole-process escape) removes it early and says so.
/// Deliberate break: a plan that slept through the stop would journal the removal at the expiry,
/// after the run had ended.
#[test]
fn a_partition_is_removed_at_its_expiry_or_early_when_the_run_stops() {
    let run = black_hole().simulate();
    let inject = inject_ns(&run);
    let partition = run
        .plan
        .as_ref()
        .and_then(|p| p.fault_duration_ns)
        .expect("a pinned partition");
    let fired = event(&run, "fault-fired").expect("fired");
    let said = format!(
        "simulated exec: the victim serves as before for {} ms",
        partition / MS
    );
    assert_eq!(fired.detail.split(" (took").next(), Some(said.as_str()));
    let removed = event(&run, "fault-removed").expect("removed");
    assert_eq!(removed.at_ns, inject + partition + 50_000);
    assert_eq!(removed.detail, "simulated removal: the victim serves again");
    // A budget that allows no failure on the protected route, and a target that resets every
    // request once the fault fires: the writer's escape watch stops the run inside the partition.
    let mut stopped = black_hole();
    stopped.tables_toml = declared("0.0", 1);
    stopped.victim.status = Some(500);
    let run = stopped.simulate();
    let escape = event(&run, "escape").expect("escaped");
    let removed = event(&run, "fault-removed").expect("removed");
    assert!(
        removed
            .detail
            .starts_with("early, the run stopping: simulated removal"),
        "{}",
        removed.detail
    );
    assert!(
        removed.at_ns > escape.at_ns && removed.at_ns < escape.at_ns + 30 * MS,
        "escaped {} removed {}",
        escape.at_ns,
        removed.at_ns
    );
    assert!(removed.at_ns < inject + partition);
}

/// The fault plan's and the probes' threads run in lockstep with the simulation: a world with a
/// fault and a probed replica gives the same journal on every run.
#[test]
fn a_fault_run_is_the_same_every_time() {
    let keys = "confirm_address = \"127.0.0.1:2\"\nconfirm_method = \"GET\"\nconfirm_path = \"/health\"\nconfirm_status = 418\n";
    let mut world = clean_delete(keys);
    world.probed = probed(0.0, None);
    let journal = world.simulate().journal();
    assert_eq!(journal, world.simulate().journal());
    assert_eq!(journal, world.simulate().journal());
}

/// Replica `a` probed at 127.0.0.1:3 with its waiting gauge at `waiting`, answering until
/// `until`.
fn probed(waiting: f64, until: Option<u64>) -> Vec<Probed> {
    vec![Probed {
        name: "a".into(),
        address: "127.0.0.1:3".into(),
        waiting: Some(waiting),
        until,
    }]
}

/// The probe events of a run: (at, value).
fn probes(run: &Run) -> Vec<(u64, Option<i64>)> {
    events(run)
        .into_iter()
        .filter(|e| e.is(EventKind::Probe))
        .map(|e| (e.at_ns, e.value))
        .collect()
}

/// seeds/004's "abort when required telemetry disappears": replica a's gauge is read for the
/// first second, then its probes are refused; once the gauge has gone unread for the pinned
/// `fault.telemetry_gap_max_s` (before T_inject) the probe thread journals the escape
/// `telemetry-missing`, the fault never fires, and load stops. A replica that keeps answering
/// never escapes, and its probes end once the run is done. Deliberate break: a probe thread
/// that never judged the gap goes on to fire the fault into a run whose G7 rests on one second.
#[test]
fn a_gauge_that_disappears_before_the_fire_ends_the_run() {
    let mut world = clean_delete("");
    world.probed = probed(0.0, Some(S));
    let run = world.simulate();
    assert_accounted(&run);
    assert!(event(&run, "fault-fired").is_none(), "never fired");
    let escape = event(&run, "escape").expect("escape");
    assert_eq!(escape.subject, TELEMETRY_MISSING);
    assert!(
        escape
            .detail
            .contains("a (127.0.0.1:3): its waiting-queue gauge, read at")
            && escape
                .detail
                .contains("(the last probe: down: connect: Connection refused (simulated))"),
        "{}",
        escape.detail
    );
    let last_read = probes(&run)
        .iter()
        .filter(|(_, value)| value.is_some())
        .map(|&(at, _)| at)
        .max()
        .expect("the gauge was read");
    assert!(last_read < S, "read at {last_read}");
    let gap = pins::value::FAULT_TELEMETRY_GAP_MAX_S as u64 * S;
    let gauge_period = run.plan.as_ref().expect("a plan").gauge_period.as_nanos() as u64;
    assert!(
        escape.at_ns >= last_read + gap && escape.at_ns <= last_read + gap + gauge_period,
        "last read {last_read}, escaped {} (gauge period {gauge_period})",
        escape.at_ns
    );
    assert!(escape.at_ns < inject_ns(&run));
    nothing_sent_after(&run, escape.at_ns);
    assert_eq!(run.seal.as_ref().map(|s| s.1), Some(SealStatus::Escaped));
    // Answering to the end: read every gauge period, no escape, the probes end with the run.
    world.probed = probed(0.0, None);
    let run = world.simulate();
    assert!(event(&run, "escape").is_none());
    let read: Vec<u64> = probes(&run)
        .iter()
        .filter(|(_, value)| value.is_some())
        .map(|&(at, _)| at)
        .collect();
    assert!(
        read.len() as u64 >= run.end_ns / gauge_period,
        "{} reads",
        read.len()
    );
    assert!(probes(&run)
        .iter()
        .all(|&(at, _)| at <= run.end_ns + 1_000 * MS));
}

/// G7 judged live from the probes: replica a's waiting queue reads 5 (over the pinned 1) all
/// through the baseline, so at T_inject the baseline judgement ends the run naming it, and the
/// fault never fires. Deliberate break: a simulated writer that did not tally the probe events
/// lets the fault fire.
#[test]
fn a_waiting_queue_over_the_pin_in_the_baseline_ends_the_run_at_t_inject() {
    let mut world = clean_delete("");
    world.probed = probed(5.0, None);
    let run = world.simulate();
    assert!(event(&run, "fault-fired").is_none(), "never fired");
    let escape = event(&run, "escape").expect("escape");
    assert_eq!(escape.subject, BASELINE_UNHEALTHY);
    assert!(
        escape
            .detail
            .contains("G7: a's waiting queue averaged 5.000 over")
            && !escape.detail.contains("G6"),
        "{}",
        escape.detail
    );
    let inject = inject_ns(&run);
    assert!(
        (inject..inject + 10 * MS).contains(&escape.at_ns),
        "{}",
        escape.at_ns
    );
}

/// Issue 18 item 5 on the simulation, the telemetry thread's own seconds (`Seconds`) rendering
/// the live view: `--progress json` gives, each second, the phase, the fault's state as the
/// journal has it and the last second's completed-only TTFT. The phases come in the schedule's
/// order, every one of its own seen; the fault reads armed before T_inject and fired after the fire;
/// before it, every request's first token comes 20.1 ms after its intended time (the
/// target's 20 ms, and the 50 us wake floor twice: the send's timer and the token's read). Deliberate break: a view that reads the phase from the measured span alone, or
/// the fault from the configuration, fails it.
#[test]
fn the_live_view_shows_phase_fault_state_and_last_second_ttft() {
    let mut world = clean_delete("");
    world.victim.status = Some(500);
    world.progress = crate::run::Progress::Json;
    let run = world.simulate();
    let text = String::from_utf8(run.progress().to_vec()).expect("UTF-8");
    let seconds: Vec<serde_json::Value> = text
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v.get("phase").is_some())
        .collect();
    // A look each second of the 42 s schedule, and the last as the workers end.
    assert!(seconds.len() >= 42, "{} seconds: {text}", seconds.len());
    let plan = run.plan.as_ref().expect("a plan");
    let order: Vec<&str> = plan
        .params
        .phases
        .iter()
        .map(|p| p.name.as_str())
        .chain(["done"])
        .collect();
    let mut seen: Vec<&str> = seconds
        .iter()
        .map(|v| v["phase"].as_str().expect("a phase"))
        .collect();
    seen.dedup();
    // Each phase of the schedule in its order; `done` only if a look came after the schedule's
    // end (the last request can end before it).
    assert!(
        seen.len() >= order.len() - 1 && order.starts_with(&seen),
        "{seen:?} against {order:?}"
    );
    let fired = event(&run, "fault-fired").expect("fired").at_ns;
    for v in &seconds {
        let at = v["at_ns"].as_u64().expect("a time");
        let fault = v["fault"].as_str().expect("a fault state");
        if at < inject_ns(&run) {
            assert_eq!(fault, "armed", "{v}");
        } else if at > fired {
            assert_eq!(fault, "fired", "{v}");
        }
    }
    let early = seconds
        .iter()
        .find(|v| v["phase"] == "baseline" && v["ttft_completed_last_s"].as_u64() > Some(0))
        .unwrap_or_else(|| panic!("no baseline second with completions: {text}"));
    let (p50, p99) = (early["ttft_p50_ns"].as_u64(), early["ttft_p99_ns"].as_u64());
    assert_eq!((p50, p99), (Some(20_100_000), Some(20_100_000)), "{early}");
}
