//! The run-validity gates other than G2 (SPEC §1, §4, §10): G1 replica share, G3 victim silence
//! and G4 staleness (black-hole, label-only), G5 accelerator fingerprints (campaign-level), G6
//! baseline goodput, G7 baseline waiting queue, and the node-monitor grace rule.
//!
//! They gate the §1 experiment, so they apply to fault runs; a run without a fault is gated by G2
//! alone. Hosted targets: only G2 and G6 are evaluable, and G6 is reported without invalidating
//! (§6). A gate that applies but was not observed counts as failed (§10).
//!
//! The waiting-queue gauge and replica readiness come from `probe` events (formats/JOURNAL.md):
//! subject the replica, detail `ok` with the gauge in thousandths as the value, or `down: why`.

use percentes_formats::config::{FaultVariant, TargetKind};
use percentes_formats::journal::records::Outcome;
use percentes_formats::pins;

use crate::analysis::Gate;
use crate::frame::NONE;
use crate::load::Run;
use crate::windows::{Kind, Window};

/// How a gate's failure acts (§10).
pub const RUN_INVALIDATING: &str = "run-invalidating";
pub const LABEL_ONLY: &str = "label-only";
pub const REPORTED: &str = "reported";

fn gate(name: &str, clause: &'static str, effect: &'static str) -> Gate {
    Gate {
        gate: name.into(),
        clause,
        effect,
        status: "not applicable",
        limit: String::new(),
        observed: String::new(),
        by: None,
        n: 0,
        note: String::new(),
    }
}

/// A waiting-queue probe sample: (at_ns, replica, gauge).
pub fn waiting_samples(run: &Run) -> Vec<(u64, &str, f64)> {
    run.events
        .all("probe")
        .filter(|e| e.detail == "ok")
        .filter_map(|e| {
            e.value
                .map(|v| (e.at_ns, e.subject.as_str(), v as f64 / 1000.0))
        })
        .collect()
}

/// Every gate of this module for `run`, given its windows and the rows in each.
pub fn evaluate(run: &Run, cut: &[Window], rows_of: &[Vec<usize>], met: &[bool]) -> Vec<Gate> {
    let config = &run.config;
    let hosted = config.target.kind == TargetKind::Hosted;
    let variant = config.fault.variant;
    let fault_run = variant != FaultVariant::None;
    let baseline = cut.iter().position(|w| w.kind == Kind::Baseline);
    let baseline_rows: &[usize] = baseline.map_or(&[], |i| rows_of[i].as_slice());
    let mut gates = Vec::new();

    // G1: replica share over the baseline's attributed requests.
    let mut g1 = gate("G1 replica share", "§1", RUN_INVALIDATING);
    let low = config
        .value("gates.replica_share_min_percent")
        .as_f64()
        .unwrap_or(45.0);
    let high = config
        .value("gates.replica_share_max_percent")
        .as_f64()
        .unwrap_or(55.0);
    g1.limit = format!(
        "each of {} replicas {low}-{high} % of the baseline's requests",
        config.target.replicas.len()
    );
    if hosted {
        g1.status = "not evaluable";
        g1.note =
            "hosted target: a server-side pin is reported not verifiable, never satisfied (§6)"
                .into();
    } else if fault_run && !variant.is_replica_loss() {
        g1.note = "a degradation scenario, not the §1 replica-loss experiment".into();
    } else if fault_run {
        let requests = &run.requests;
        let attributed: Vec<&str> = baseline_rows
            .iter()
            .filter_map(|&r| requests.replica_name(r))
            .collect();
        g1.n = attributed.len() as u64;
        if attributed.is_empty() {
            g1.status = "unobserved";
            g1.observed = "no baseline request names its replica".into();
        } else {
            let mut shares = Vec::new();
            let mut worst: Option<f64> = None;
            for name in &config.target.replicas {
                let count = attributed.iter().filter(|&&a| a == name).count();
                let share = count as f64 / attributed.len() as f64 * 100.0;
                shares.push(format!("{name} {share:.2} %"));
                let miss = if share < low {
                    low - share
                } else if share > high {
                    share - high
                } else {
                    0.0
                };
                worst = Some(worst.map_or(miss, |w: f64| w.max(miss)));
            }
            let strangers: Vec<&str> = {
                let mut s: Vec<&str> = attributed
                    .iter()
                    .copied()
                    .filter(|a| !config.target.replicas.iter().any(|r| r == a))
                    .collect();
                s.sort_unstable();
                s.dedup();
                s
            };
            let reached = config
                .target
                .replicas
                .iter()
                .filter(|r| attributed.contains(&r.as_str()))
                .count();
            g1.observed = shares.join(", ");
            if !strangers.is_empty() {
                g1.observed.push_str(&format!(
                    "; undeclared replicas served: {}",
                    strangers.join(", ")
                ));
            }
            let victim = config.fault.victim.as_deref().unwrap_or("");
            g1.note = format!(
                "killed replica {victim}; per-request (layer-7) balancing assumed, so the share gate fails the run (the configuration names no routing regime){}",
                if reached < config.target.replicas.len() { "; traffic reached fewer replicas than declared" } else { "" }
            );
            let miss = worst.unwrap_or(0.0);
            if reached < config.target.replicas.len() || miss > 0.0 {
                g1.status = "fail";
                g1.by = Some(format!("{miss:.2} percentage points outside"));
            } else {
                g1.status = "pass";
            }
        }
    } else {
        g1.note = "no fault: not a run of the §1 experiment".into();
    }
    gates.push(g1);

    // Fault fidelity (seeds/004): the fault fired, its impact was confirmed where a confirmation
    // probe was configured, and nothing in the plan failed. Otherwise the experiment is invalid,
    // which is not a product failure.
    let mut fidelity = gate("fault fidelity", "§1", RUN_INVALIDATING);
    fidelity.limit =
        "fired; impact confirmed when confirm_address is set; no fault-failed event".into();
    if fault_run {
        let fired = run.events.first("fault-fired");
        let failed: Vec<String> = run
            .events
            .all("fault-failed")
            .map(|e| e.detail.clone())
            .collect();
        let confirmed = run.events.first("fault-confirmed").is_some();
        let needs_confirmation = config.fault.confirm_address.is_some();
        fidelity.n = run
            .events
            .rows
            .iter()
            .filter(|e| {
                percentes_formats::journal::records::event_kind_name(e.kind)
                    .is_some_and(|k| k.starts_with("fault-"))
            })
            .count() as u64;
        let mut problems = Vec::new();
        if fired.is_none() {
            problems.push("the fault never fired".to_owned());
        }
        if needs_confirmation && !confirmed {
            problems.push("the impact was never independently confirmed".to_owned());
        }
        problems.extend(failed.into_iter().map(|d| format!("fault-failed: {d}")));
        fidelity.observed = if problems.is_empty() {
            format!("fired{}", if confirmed { " and confirmed" } else { "" })
        } else {
            problems.join("; ")
        };
        fidelity.status = if problems.is_empty() { "pass" } else { "fail" };
        fidelity.note =
            "an experiment whose fault did not happen as planned is invalid, not a product failure"
                .into();
    } else {
        fidelity.note = "no fault".into();
    }
    gates.push(fidelity);

    // G3 and G4: black-hole only, label-only.
    gates.extend(black_hole_gates(run, cut));

    // G5: compared across the runs of a campaign.
    let mut g5 = gate("G5 accelerator fingerprints", "§10", RUN_INVALIDATING);
    g5.limit = "clock and power fingerprints equal across the campaign's runs".into();
    g5.status = match config.target.kind {
        TargetKind::Mock => "not applicable",
        TargetKind::Hosted => "not evaluable",
        TargetKind::SelfHosted => "campaign-level",
    };
    g5.note = match config.target.kind {
        TargetKind::Mock => "the mock has no accelerator".into(),
        TargetKind::Hosted => "hosted target: server-side, not verifiable (§6)".into(),
        TargetKind::SelfHosted => {
            "evaluated by `percentes campaign` from each journal's `accelerator.*` host facts"
                .into()
        }
    };
    gates.push(g5);

    // G6: baseline goodput.
    let mut g6 = gate(
        "G6 baseline goodput",
        "§4",
        if hosted { REPORTED } else { RUN_INVALIDATING },
    );
    let min = config
        .value("gates.baseline_goodput_min")
        .as_f64()
        .unwrap_or(0.99);
    g6.limit = format!(">= {min}");
    if fault_run {
        g6.n = baseline_rows.len() as u64;
        if baseline_rows.is_empty() {
            g6.status = "unobserved";
            g6.observed = "the baseline window is empty".into();
        } else {
            let goodput = baseline_rows.iter().filter(|&&r| met[r]).count() as f64
                / baseline_rows.len() as f64;
            g6.observed = format!("{goodput:.4}");
            g6.status = if goodput >= min { "pass" } else { "fail" };
            if goodput < min {
                g6.by = Some(format!("{:.4} under", min - goodput));
            }
            if hosted {
                g6.note =
                    "hosted: completion within the timeout, reported, not run-invalidating (§6)"
                        .into();
            }
        }
    } else {
        g6.note = "no fault: no baseline window".into();
    }
    gates.push(g6);

    // G7: baseline mean waiting-queue gauge per replica, from probe events.
    let mut g7 = gate("G7 baseline waiting queue", "§10", RUN_INVALIDATING);
    let limit = config
        .value("gates.waiting_queue_max")
        .as_f64()
        .unwrap_or(1.0);
    g7.limit = format!("mean <= {limit} per replica over the baseline");
    if hosted {
        g7.status = "not evaluable";
        g7.note = "hosted target: server-side, not verifiable (§6)".into();
    } else if fault_run {
        let window = baseline.map(|i| cut[i]);
        let samples = waiting_samples(run);
        let mut readings = Vec::new();
        let mut unobserved = Vec::new();
        let mut worst = f64::NEG_INFINITY;
        for name in &config.target.replicas {
            let values: Vec<f64> = samples
                .iter()
                .filter(|(at, who, _)| *who == name && window.is_some_and(|w| w.contains(*at)))
                .map(|&(_, _, v)| v)
                .collect();
            g7.n += values.len() as u64;
            if values.is_empty() {
                unobserved.push(name.as_str());
            } else {
                let mean = values.iter().sum::<f64>() / values.len() as f64;
                worst = worst.max(mean);
                readings.push(format!("{name} {mean:.3}"));
            }
        }
        g7.observed = readings.join(", ");
        if !unobserved.is_empty() {
            g7.status = "unobserved";
            g7.note = format!(
                "no waiting-queue probe of {} in the baseline (the recorder probes replicas listed in target.replica_addresses)",
                unobserved.join(", ")
            );
        } else if worst <= limit {
            g7.status = "pass";
        } else {
            g7.status = "fail";
            g7.by = Some(format!("{:.3} over", worst - limit));
        }
    } else {
        g7.note = "no fault: not a run of the §1 experiment".into();
    }
    gates.push(g7);

    // A recorded node-monitor grace period of 120 s or more fails the run (§1).
    let mut grace = gate("node-monitor grace", "§1", RUN_INVALIDATING);
    let grace_limit = pins::int("fault.node_monitor_grace_fail_s");
    grace.limit = format!("< {grace_limit} s when recorded");
    match run
        .events
        .all("timeline")
        .find(|e| e.subject == "node-monitor-grace")
        .and_then(|e| e.value)
    {
        Some(seconds) if variant == FaultVariant::BlackHole => {
            grace.n = 1;
            grace.observed = format!("{seconds} s");
            grace.status = if seconds < grace_limit {
                "pass"
            } else {
                "fail"
            };
        }
        _ => {
            grace.note = if variant == FaultVariant::BlackHole {
                "not recorded in the journal (a `timeline` event `node-monitor-grace` carries it)"
                    .into()
            } else {
                "applies to black-hole runs".into()
            };
        }
    }
    gates.push(grace);
    gates
}

/// G3 (victim silence) and G4 (staleness) for a black-hole run; label-only.
fn black_hole_gates(run: &Run, cut: &[Window]) -> Vec<Gate> {
    let config = &run.config;
    let mut g3 = gate("G3 victim in-flight silence", "§1", LABEL_ONLY);
    let mut g4 = gate("G4 dead-endpoint staleness", "§1", LABEL_ONLY);
    g3.limit = "no errored request among those in flight on the victim at fire; every non-completion censored at the timeout".into();
    let staleness_ns = config.duration_ns("fault.staleness_min_s");
    g4.limit = format!(
        ">= {:.3} s of victim-bound traffic after fire",
        staleness_ns as f64 / 1e9
    );
    if config.fault.variant != FaultVariant::BlackHole {
        g3.note = "black-hole runs only".into();
        g4.note = "black-hole runs only".into();
        return vec![g3, g4];
    }
    let Some(fired) = run.events.first("fault-fired").map(|e| e.at_ns) else {
        for g in [&mut g3, &mut g4] {
            g.status = "unobserved";
            g.note = "the fault never fired".into();
        }
        return vec![g3, g4];
    };
    let requests = &run.requests;
    let victim = config.fault.victim.as_deref().unwrap_or("");
    let timeout = config.duration_ns("client.timeout_s");
    // In flight at fire and bound for the victim: attributed to it, or never answered (a
    // black-holed request gets no response header) and not attributed to a survivor.
    let in_flight: Vec<usize> = (0..requests.len())
        .filter(|&r| {
            let d = requests.dispatched_ns[r];
            d != NONE && d <= fired && requests.terminal_ns[r] >= fired
        })
        .filter(|&r| requests.replica_name(r).is_none_or(|n| n == victim))
        .collect();
    g3.n = in_flight.len() as u64;
    if in_flight.is_empty() {
        g3.status = "unobserved";
        g3.note = "no request was in flight on the victim at fire".into();
    } else {
        let errored = in_flight
            .iter()
            .filter(|&&r| requests.outcome(r) == Some(Outcome::Errored))
            .count();
        let off_timeout = in_flight
            .iter()
            .filter(|&&r| requests.outcome(r) == Some(Outcome::Censored))
            .filter(|&&r| requests.terminal_ns[r].saturating_sub(requests.intended_ns[r]) < timeout)
            .count();
        g3.observed = format!(
            "{errored} errored, {off_timeout} censored before the timeout, of {}",
            in_flight.len()
        );
        g3.status = if errored == 0 && off_timeout == 0 {
            "pass"
        } else {
            "fail"
        };
    }
    // G4: victim-bound traffic (requests censored at the timeout, never answered) dispatched at
    // least the pinned staleness after the fire.
    let end = cut
        .iter()
        .find(|w| w.kind == Kind::Cooldown)
        .map_or(u64::MAX, |w| w.start_ns);
    let last_victim_bound = (0..requests.len())
        .filter(|&r| {
            requests.dispatched_ns[r] != NONE
                && requests.dispatched_ns[r] >= fired
                && requests.intended_ns[r] < end
        })
        .filter(|&r| {
            requests.outcome(r) == Some(Outcome::Censored)
                && requests.replica_name(r).is_none_or(|n| n == victim)
        })
        .map(|r| requests.dispatched_ns[r])
        .max();
    match last_victim_bound {
        None => {
            g4.status = "unobserved";
            g4.note = "no victim-bound request after the fire".into();
        }
        Some(at) => {
            let stale = at - fired;
            g4.n = 1;
            g4.observed = format!(
                "victim-bound traffic until {:.3} s after fire",
                stale as f64 / 1e9
            );
            g4.status = if stale >= staleness_ns {
                "pass"
            } else {
                "fail"
            };
            if stale < staleness_ns {
                g4.by = Some(format!(
                    "{:.3} s short",
                    (staleness_ns - stale) as f64 / 1e9
                ));
            }
        }
    }
    vec![g3, g4]
}
