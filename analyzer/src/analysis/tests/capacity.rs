//! The capacity check (SPEC §10 "Capacity check", A4, issue 52 item 4) on scripted journals:
//! the FAULT configuration (lambda_max 20 rps, two replicas at 13 rps each, 26 rps in all, so
//! the survivor is offered 26 rps, 1.30 x lambda_max) made self-hosted, with a calibration
//! probe of 40 ms, and a `capacity-probe` host fact of the test's choosing.

use super::*;
use crate::summaries::{self, RunRef};
use percentes_formats::journal::header::HostFact;

/// FAULT, self-hosted, with `calibration` lines added to its calibration section.
fn self_hosted(calibration: &str) -> String {
    FAULT
        .replace("kind = \"mock\"", "kind = \"self-hosted\"")
        .replace(
            "lambda_max_rps = 20.0",
            &format!("lambda_max_rps = 20.0\n{calibration}"),
        )
}

/// The run under `spec` with `probe` as its capacity-probe fact (none when `None`).
fn probed(config_text: &str, probe: Option<&str>, spec: Spec) -> Report {
    let mut host = vec![("placement".to_owned(), "workers unpinned".to_owned())];
    host.extend(probe.map(|p| HostFact::CapacityProbe.entry(p)));
    let bytes = synthetic::scripted_with_host(
        &config(config_text),
        &|e: &Entry| {
            let mut r = completed(e, 100_000, 100 * MS, 500 * MS, vec![]);
            r.replica = format!("replica-{}", e.index % 2);
            Some(r)
        },
        Vec::new(),
        quiet_telemetry(102),
        SealStatus::Completed,
        host,
    );
    analyze_bytes("capacity.pj", &bytes, spec)
}

fn capacity_gate(report: &Report) -> Option<&Gate> {
    report
        .validity
        .gates
        .iter()
        .find(|g| g.id == GateId::Capacity)
}

#[test]
fn a_probe_within_the_tolerance_passes_and_one_beyond_it_is_named() {
    let text = self_hosted("probe_ms = 40.0\nceiling_rps = 22.0\nceiling_offered_rps = 26.0");
    // Medians 41 ms and 88 ms against 40: 1/41 = 2.4 % and 48/88 = 54.5 % of the larger.
    let near = probed(&text, Some("service_ms=43,41,40,39,42"), Spec::V0_5);
    let gate = capacity_gate(&near).expect("v0.5 checks the capacity");
    assert_eq!(gate.status, Status::Pass, "{gate:?}");
    assert_eq!(gate.effect, Effect::Reported);
    assert_eq!(gate.n, 5);
    assert_eq!(
        gate.observed,
        "median 41.0 ms over 5 sample(s), 2.4 % apart (1.02 x the calibration's)"
    );
    // The survivor: 26 rps, 1.30 x lambda_max, 26/22 = 1.18 x the ceiling the calibration's
    // replica reached when offered that load.
    assert!(
        gate.note
            .contains("each survivor is offered 26.000 rps, 1.30 x lambda_max"),
        "{}",
        gate.note
    );
    assert!(
        gate.note.contains("1.18 x its throughput ceiling"),
        "{}",
        gate.note
    );
    let far = probed(&text, Some("service_ms=88,90,86"), Spec::V0_5);
    let gate = capacity_gate(&far).unwrap();
    assert_eq!(gate.status, Status::Fail);
    assert_eq!(gate.by.as_deref(), Some("29.5 points over"));
    assert!(
        gate.note.contains("calibrate on this host"),
        "{}",
        gate.note
    );
    // Reported: the run stays valid on its own (the campaign refuses the mix).
    assert_eq!(far.validity.valid, near.validity.valid);
}

#[test]
fn a_ceiling_the_replica_kept_up_with_bounds_it_from_below() {
    let text = self_hosted("probe_ms = 40.0\nceiling_rps = 25.9\nceiling_offered_rps = 26.0");
    let report = probed(&text, Some("service_ms=40"), Spec::V0_5);
    let note = &capacity_gate(&report).unwrap().note;
    assert!(
        note.contains("completed 25.900 rps of 26.000 offered")
            && note.contains("at most 1.00 x it"),
        "{note}"
    );
}

#[test]
fn without_a_probe_or_a_reference_the_check_is_unobserved_and_says_which() {
    let with_reference = self_hosted("probe_ms = 40.0");
    let report = probed(&with_reference, None, Spec::V0_5);
    let gate = capacity_gate(&report).unwrap();
    assert_eq!(gate.status, Status::Unobserved);
    assert!(
        gate.note.contains("holds no capacity probe"),
        "{}",
        gate.note
    );
    assert!(gate.note.contains("no throughput ceiling"), "{}", gate.note);
    let unanswered = probed(&with_reference, Some("service_ms="), Spec::V0_5);
    let gate = capacity_gate(&unanswered).unwrap();
    assert_eq!(gate.status, Status::Unobserved);
    assert!(
        gate.note
            .contains("no sample request of the probe was answered"),
        "{}",
        gate.note
    );
    let damaged = probed(&with_reference, Some("service_ms=fast"), Spec::V0_5);
    assert!(capacity_gate(&damaged).unwrap().note.contains("\"fast\""));
    let without = probed(&self_hosted(""), Some("service_ms=40"), Spec::V0_5);
    let gate = capacity_gate(&without).unwrap();
    assert_eq!(gate.status, Status::Unobserved);
    assert!(
        gate.note.contains("no calibration.probe_ms"),
        "{}",
        gate.note
    );
    // The mock is built to its capacity; a run without a calibration has none to check.
    let mock = probed(FAULT, Some("service_ms=40"), Spec::V0_5);
    assert_eq!(capacity_gate(&mock).unwrap().status, Status::NotApplicable);
    let steady = probed(STEADY, Some("service_ms=40"), Spec::V0_5);
    assert_eq!(
        capacity_gate(&steady).unwrap().status,
        Status::NotApplicable
    );
}

#[test]
fn older_versions_keep_their_gate_lists() {
    let text = self_hosted("probe_ms = 40.0");
    for spec in [Spec::V0_1, Spec::V0_2, Spec::V0_3, Spec::V0_4] {
        let report = probed(&text, Some("service_ms=88"), spec);
        assert!(capacity_gate(&report).is_none(), "{spec:?}");
    }
}

/// Five runs of one design: `probes` their capacity probes' medians, each run valid.
fn group_of(probes: &[Option<f64>], spec: Spec) -> crate::model::Group {
    let mut report = probed(&self_hosted("probe_ms = 40.0"), None, spec);
    // The scripted journal has no waiting-queue probes, so G7 fails it: the campaign's
    // refusal is what is under test, so the run is taken as valid.
    report.validity.valid = true;
    let names: Vec<String> = (1..=probes.len()).map(|i| format!("run-{i}.pj")).collect();
    let refs: Vec<RunRef<'_>> = probes
        .iter()
        .zip(&names)
        .map(|(&probe_ms, name)| RunRef {
            name,
            report: &report,
            accelerator: &[],
            design: "design",
            probe_ms,
        })
        .collect();
    let mut groups = summaries::groups(&refs);
    assert_eq!(groups.len(), 1);
    groups.remove(0)
}

#[test]
fn a_campaign_across_two_capacities_is_refused() {
    // Issue 52: three runs on a host whose probe reads 40 ms, two on one 2.2x slower (88 ms):
    // 48/88 = 54.5 % apart, beyond 25 %.
    let mixed = group_of(
        &[Some(40.0), Some(41.0), Some(88.0), Some(39.5), Some(87.0)],
        Spec::V0_5,
    );
    let capacity = mixed.capacity.as_deref().unwrap();
    assert!(
        capacity.starts_with("fail: the runs' capacity probes lie 55.1 % apart"),
        "{capacity}"
    );
    assert!(capacity.contains("run-3.pj 88.0 ms"), "{capacity}");
    assert_eq!(mixed.dropped.len(), 5, "{:?}", mixed.dropped);
    assert!(mixed
        .dropped
        .iter()
        .all(|d| d.contains("refused with its group")));
    assert!(mixed.scalars.iter().all(|s| s.values.is_empty()));
    // One host: 39.5 to 44 ms, 10.2 % apart.
    let one = group_of(
        &[Some(40.0), Some(41.0), Some(44.0), Some(39.5), Some(42.0)],
        Spec::V0_5,
    );
    assert!(
        one.capacity.as_deref().unwrap().starts_with("pass"),
        "{:?}",
        one.capacity
    );
    assert!(one.dropped.is_empty(), "{:?}", one.dropped);
    // A run without a probe leaves the check undone and says so; nothing is refused for it.
    let unprobed = group_of(
        &[Some(40.0), None, Some(88.0), Some(40.0), Some(40.0)],
        Spec::V0_5,
    );
    let capacity = unprobed.capacity.as_deref().unwrap();
    assert!(capacity.starts_with("not checked: run-2.pj"), "{capacity}");
    assert!(unprobed.dropped.is_empty());
    // v0.4 has no capacity check: the campaign groups as it did.
    let old = group_of(
        &[Some(40.0), Some(88.0), Some(40.0), Some(40.0), Some(40.0)],
        Spec::V0_4,
    );
    assert_eq!(old.capacity, None);
    assert!(old.dropped.is_empty());
}
