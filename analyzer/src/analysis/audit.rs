//! The coordinated-omission audit (seeds/003): the workload and clock models, the stage counts
//! and their reconciliation, send skew, requested against achieved rate per phase, the recorder's
//! own telemetry, and the decision.

use percentes_formats::journal::records::{EventKind, Outcome};
use percentes_formats::pins;
use percentes_formats::spec::{AuditContents, ReadingWords, Rules, StopReading};

use super::client_gate::{
    cpu_reading, measured_telemetry, nearest_rank, undispatched_by_recorders, worst_windowed_cpu,
};
use super::rows::{count_outcomes, seconds};
use crate::frame::NONE;
use crate::load::Run;
use crate::model::{Audit, PhaseRate, SkewSummary, TelemetrySummary, Validity};
use crate::windows::Window;

/// The coordinated-omission audit.
/// Its contents follow the version's `rules`: [`AuditContents::WithArtifact`] (v0.3, A2) adds
/// seeds/003's artifact field by field and reads the writer queue's observed depth instead of the
/// telemetry field older recorders filled with its capacity.
pub(super) fn audit(
    run: &Run,
    cut: &[Window],
    skews_ns: &[u64],
    validity: &Validity,
    rules: &Rules,
) -> Audit {
    let requests = &run.requests;
    let n = requests.len() as u64;
    // Each pass over a whole-run column hands a spilled table's pages back when done
    // (`Requests::release`): five of them at once would be most of the table.
    let count = |column: &[u64]| {
        let n = column.iter().filter(|&&v| v != NONE).count() as u64;
        requests.release();
        n
    };
    // A recorder that journals its pool (a `pool` event) marks only a connection's later
    // requests reused: a dispatched request with no connect of its own went out on a connection
    // opened ahead of need. Older journals marked every request on an open connection reused.
    let pooled = super::artifact::pool_counts(run).is_some();
    let connected = (0..requests.len())
        .filter(|&r| {
            requests.connect_end_ns[r] != NONE
                || requests.connection_reused[r]
                || (pooled
                    && requests.dispatched_ns[r] != NONE
                    && requests.connect_start_ns[r] == NONE
                    && requests.outcome(r) != Some(Outcome::Undispatched))
        })
        .count() as u64;
    requests.release();
    let mut all = count_outcomes(requests, 0..requests.len());
    // A4: the requests a stopped run never sent are a stage of their own, not censored.
    let not_sent = if rules.stopped == StopReading::NotSent {
        (0..requests.len())
            .filter(|&r| super::stopped::not_sent(requests, r))
            .count() as u64
    } else {
        0
    };
    all.censored -= not_sent;
    let mut stages = vec![
        ("scheduled".to_owned(), n),
        ("dispatched".to_owned(), count(&requests.dispatched_ns)),
        ("connected".to_owned(), connected),
        ("written".to_owned(), count(&requests.request_written_ns)),
        (
            "response head".to_owned(),
            count(&requests.response_head_ns),
        ),
        (
            "first content".to_owned(),
            count(&requests.first_content_ns),
        ),
        ("completed".to_owned(), all.completed),
        ("errored".to_owned(), all.errored),
        ("censored".to_owned(), all.censored),
        ("undispatched".to_owned(), all.undispatched),
        ("no record".to_owned(), all.no_record),
    ];
    if not_sent > 0 {
        stages.push(("not sent (run stopped)".to_owned(), not_sent));
    }
    let funnel_ok = stages[..6].windows(2).all(|w| w[1].1 <= w[0].1);
    let sum =
        all.completed + all.errored + all.censored + all.undispatched + all.no_record + not_sent;
    let dispatched_ok = stages[1].1 + all.undispatched + all.no_record + not_sent >= n;
    let reconciled = funnel_ok && sum == n && dispatched_ok;
    let reconciliation = format!(
        "completed {} + errored {} + censored {} + undispatched {} + no record {}{} = {sum} of {n} scheduled; each stage at most the one before: {}{}",
        all.completed, all.errored, all.censored, all.undispatched, all.no_record,
        if not_sent > 0 { format!(" + not sent {not_sent}") } else { String::new() },
        if funnel_ok { "yes" } else { "NO" },
        // Said when it is what failed, so the line never reads as agreeing with a failed
        // reconciliation (issue 54 item 3).
        if dispatched_ok || rules.stopped != StopReading::NotSent { String::new() } else { format!("; dispatched {} + undispatched {} + no record {} is under the {n} scheduled: NO", stages[1].1, all.undispatched, all.no_record) }
    );

    let q = |p| nearest_rank(skews_ns, p).unwrap_or(0) / 1000;
    let skew_us = SkewSummary {
        n: skews_ns.len() as u64,
        p50: q(0.5),
        p90: q(0.9),
        p99: q(0.99),
        p99_9: q(0.999),
        max: skews_ns.last().copied().unwrap_or(0) / 1000,
    };

    let params = &run.header.schedule;
    let poisson = matches!(
        params.arrival,
        percentes_formats::schedule::Arrival::Poisson
    );
    let mut phases = Vec::new();
    for (p, phase) in params.phases.iter().enumerate() {
        // One phase can be the whole run: its per-request vectors are made one at a time and
        // dropped when read, so the audit's peak is two of them, not five.
        let mut intended: Vec<u64> = (0..requests.len())
            .filter(|&r| requests.phase[r] == p as u32)
            .map(|r| requests.intended_ns[r])
            .collect();
        requests.release();
        // Index order is time order, except for a closed or semi-open run's follow-ups.
        if params.workload.follows() {
            intended.sort_unstable();
        }
        let scheduled = intended.len() as u64;
        let scheduled_gaps: Vec<f64> = intended.windows(2).map(|w| (w[1] - w[0]) as f64).collect();
        drop(intended);
        let scheduled_mean_gap_ms = mean(&scheduled_gaps).map(|m| m / 1e6);
        let scheduled_cv = cv(&scheduled_gaps);
        drop(scheduled_gaps);
        let mut dispatched: Vec<u64> = (0..requests.len())
            .filter(|&r| requests.phase[r] == p as u32)
            .map(|r| requests.dispatched_ns[r])
            .filter(|&d| d != NONE)
            .collect();
        requests.release();
        dispatched.sort_unstable();
        let dispatched_count = dispatched.len() as u64;
        let dispatched_gaps: Vec<f64> = dispatched
            .windows(2)
            .map(|w| (w[1] - w[0]) as f64)
            .collect();
        drop(dispatched);
        let duration_s = seconds(phase.duration_ns);
        // A closed run's phases have no rate fixed in advance (their rate field sizes the pool):
        // what was asked of it is what its schedule came to, and no law to test the gaps by.
        let closed = matches!(
            params.workload,
            percentes_formats::schedule::Workload::Closed { .. }
        );
        let requested_rps = if closed && duration_s > 0.0 {
            scheduled as f64 / duration_s
        } else {
            phase.rate_rps
        };
        let target_mean_ns = 1e9 / requested_rps;
        let law = !closed
            && !matches!(
                params.workload,
                percentes_formats::schedule::Workload::Replay { .. }
            );
        phases.push(PhaseRate {
            phase: phase.name.clone(),
            duration_s,
            requested_rps,
            scheduled,
            dispatched: dispatched_count,
            achieved_rps: if duration_s > 0.0 {
                dispatched_count as f64 / duration_s
            } else {
                0.0
            },
            target_mean_gap_ms: target_mean_ns / 1e6,
            target_cv: if poisson { 1.0 } else { 0.0 },
            scheduled_mean_gap_ms,
            scheduled_cv,
            dispatched_mean_gap_ms: mean(&dispatched_gaps).map(|m| m / 1e6),
            dispatched_cv: cv(&dispatched_gaps),
            dispatched_ks: law
                .then(|| ks_distance(dispatched_gaps, target_mean_ns, poisson))
                .flatten(),
        });
    }

    let telemetry = telemetry_summary(run, cut, rules);
    let failed: Vec<&str> = validity
        .gates
        .iter()
        .filter(|g| g.id.is_client_gate() && !g.passed())
        .map(|g| g.id.name())
        .collect();
    let decision = if !failed.is_empty() || !reconciled || telemetry.writer_queue_full_events > 0 {
        let mut why: Vec<String> = failed.iter().map(|g| format!("{g} did not pass")).collect();
        if !reconciled {
            why.push("the stage counts do not reconcile".into());
        }
        if telemetry.writer_queue_full_events > 0 {
            why.push(format!(
                "the journal writer's queue filled {} times",
                telemetry.writer_queue_full_events
            ));
        }
        format!("rerun required: {}", why.join("; "))
    } else if !run.not_publishable.is_empty() {
        format!(
            "descriptive only: the generator kept its schedule, but {}",
            run.not_publishable.join("; ")
        )
    } else {
        "representative: every request was sent on its schedule within the gate, every stage reconciles, and the generator's telemetry passed".into()
    };
    let mut audit = Audit {
        workload_model: super::workload::workload_model(
            run,
            seconds(run.config.duration_ns(&pins::CLIENT_TIMEOUT_S)),
        ),
        clock_model: super::artifact::merged_clock(run).unwrap_or_else(|| {
            format!(
                "CLOCK_MONOTONIC, ns from the epoch ({}); every timestamp on the recording host's one clock",
                run.header.clock.source
            )
        }),
        stages,
        reconciled,
        reconciliation,
        skew_us,
        phases,
        telemetry,
        decision,
        artifact: None,
    };
    if rules.audit == AuditContents::WithArtifact {
        // A4 (issue 52): the audit's largest per-second stall p99 beside G2.4's own reading,
        // each named, so a 6.2 ms second does not read as a gate that passed at 0.17 ms.
        let g24 = (rules.words == ReadingWords::WhatWasMeasured).then(|| {
            validity
                .gates
                .iter()
                .find(|g| g.id == crate::model::GateId::RuntimeStall)
                .map_or("not read".to_owned(), |g| {
                    format!("{} ({})", g.observed, g.status)
                })
        });
        audit.artifact = Some(super::artifact::artifact(run, &audit, g24.as_deref()));
    }
    audit
}

pub(super) fn mean(values: &[f64]) -> Option<f64> {
    (!values.is_empty()).then(|| values.iter().sum::<f64>() / values.len() as f64)
}

pub(super) fn cv(values: &[f64]) -> Option<f64> {
    let m = mean(values)?;
    if values.len() < 2 || m == 0.0 {
        return None;
    }
    let var = values.iter().map(|v| (v - m).powi(2)).sum::<f64>() / (values.len() - 1) as f64;
    Some(var.sqrt() / m)
}

/// Kolmogorov-Smirnov distance of `gaps` from the exponential law of mean `mean_ns` (Poisson), or
/// from the point mass at `mean_ns` (deterministic). The gaps are sorted in place, not copied.
pub(super) fn ks_distance(gaps: Vec<f64>, mean_ns: f64, poisson: bool) -> Option<f64> {
    if gaps.is_empty() {
        return None;
    }
    let mut sorted = gaps;
    sorted.sort_unstable_by(f64::total_cmp);
    let n = sorted.len() as f64;
    let cdf = |x: f64| {
        if poisson {
            1.0 - (-x / mean_ns).exp()
        } else if x >= mean_ns {
            1.0
        } else {
            0.0
        }
    };
    let mut d = 0.0f64;
    for (i, &x) in sorted.iter().enumerate() {
        let f = cdf(x);
        d = d.max((i as f64 + 1.0) / n - f).max(f - i as f64 / n);
    }
    Some(d)
}

/// What recorders before the fix wrote in every telemetry record's `writer_queue_max`: the
/// queue's capacity in messages (2^16), not a depth it reached. Unrelated to any pin.
const LEGACY_QUEUE_CAPACITY: u64 = 1 << 16;

/// The telemetry's summary, as the version's `rules` read it.
pub(super) fn telemetry_summary(run: &Run, cut: &[Window], rules: &Rules) -> TelemetrySummary {
    let samples = measured_telemetry(run, cut);
    // Over the seconds whose recorder CPU was read (JOURNAL.md "3 telemetry").
    let read: Vec<_> = samples
        .iter()
        .filter(|t| t.recorder_cpu().is_some())
        .collect();
    let cpu_ns: u64 = read.iter().filter_map(|t| t.recorder_cpu()).sum();
    let wall_ns: u64 = read.iter().map(|t| t.interval_ns).sum();
    let gate_window_ns = run.config.number(&pins::GATES_HOST_CPU_WINDOW_S) * 1e9;
    let cgroup = cpu_reading(run, cut, gate_window_ns as u64, rules.cpu);
    TelemetrySummary {
        cgroup_cpu_max_5s_percent: cgroup.cgroup.map(|c| c * 100.0),
        cgroup_throttled: cgroup
            .throttled
            .map(|(ns, periods)| (ns as f64 / 1e6, periods)),
        samples: samples.len() as u64,
        host_cpu_max_5s_percent: worst_windowed_cpu(
            run,
            cut,
            run.config.duration_ns(&pins::GATES_HOST_CPU_WINDOW_S),
        )
        .map(|c| c * 100.0),
        recorder_cpu_percent_of_one_core: (wall_ns > 0)
            .then(|| cpu_ns as f64 / wall_ns as f64 * 100.0),
        stall_p99_max_us: samples
            .iter()
            .filter(|t| t.stall_samples > 0)
            .map(|t| t.stall_p99_ns)
            .max()
            .map(|v| v as f64 / 1e3),
        stall_max_us: samples
            .iter()
            .filter(|t| t.stall_samples > 0)
            .map(|t| t.stall_max_ns)
            .max()
            .map(|v| v as f64 / 1e3),
        writer_queue_max: run
            .telemetry
            .rows
            .iter()
            .map(|t| u64::from(t.writer_queue_max))
            .max()
            .unwrap_or(0),
        writer_queue_observed: (rules.audit == AuditContents::WithArtifact)
            .then(|| writer_queue_observed(run)),
        writer_queue_full_events: run.events.all(EventKind::WriterQueueFull).count() as u64,
        undispatched_total: undispatched_by_recorders(run),
    }
}

/// The writer queue's largest observed depth and how it was read (v0.3).
fn writer_queue_observed(run: &Run) -> (u64, String) {
    let rows = &run.telemetry.rows;
    let sampled = rows
        .iter()
        .map(|t| u64::from(t.writer_queue_depth))
        .max()
        .unwrap_or(0);
    let peaks: Vec<u64> = rows.iter().map(|t| u64::from(t.writer_queue_max)).collect();
    let legacy = !peaks.is_empty() && peaks.iter().all(|&p| p == LEGACY_QUEUE_CAPACITY);
    match peaks.iter().max() {
        Some(&peak) if !legacy => (
            peak.max(sampled),
            "the largest depth in any telemetry interval, in records".into(),
        ),
        _ => (
            sampled,
            format!(
                "the largest depth sampled at an interval's end, in records; this recorder wrote the queue's capacity ({LEGACY_QUEUE_CAPACITY} messages) where the interval's peak belongs, so a peak between samples is not observed"
            ),
        ),
    }
}
