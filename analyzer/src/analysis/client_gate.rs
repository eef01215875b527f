//! The client-validity gate (SPEC §2): send skew, undispatched requests, host CPU and the runtime
//! stall, over the measured windows.

use percentes_formats::journal::records::TelemetryRecord;
use percentes_formats::journal::records::{EventKind, Outcome};
use percentes_formats::pins;

use crate::frame::{Requests, NONE};
use crate::load::Run;
use crate::model::*;
use crate::windows::Window;

/// The client-validity gate (§2) over the measured windows.
/// Send skew (dispatch minus intended, ns) of every dispatched request of the measured windows,
/// sorted: the gate and the audit read the same vector.
/// `with_waits` (v0.3, A2): the skew runs to the moment the request could be handed to the kernel,
/// its dispatch plus the connect and TLS handshake it waited for when it opened a connection (the
/// recorder writes the request in the same step as the connection becomes ready, with no wait
/// between: `recorder/src/run/client.rs`, `talk`). v0.1 and v0.2 read the dispatch alone.
pub(super) fn measured_skews(
    run: &Run,
    cut: &[Window],
    rows_of: &[Vec<usize>],
    with_waits: bool,
) -> Vec<u64> {
    let requests = &run.requests;
    let mut skews: Vec<u64> = cut
        .iter()
        .zip(rows_of)
        .filter(|(w, _)| w.kind.measured())
        .flat_map(|(_, rows)| rows.iter().copied())
        .filter(|&row| requests.dispatched_ns[row] != NONE)
        .map(|row| {
            let sent = if with_waits {
                send_ready_ns(requests, row)
            } else {
                requests.dispatched_ns[row]
            };
            sent.saturating_sub(requests.intended_ns[row])
        })
        .collect();
    skews.sort_unstable();
    skews
}

/// When a dispatched request could first be handed to the kernel: its dispatch, or, when it
/// opened a connection, the end of the connect and of the TLS handshake it waited for.
pub(super) fn send_ready_ns(requests: &Requests, row: usize) -> u64 {
    let dispatched = requests.dispatched_ns[row];
    [requests.connect_end_ns[row], requests.tls_done_ns[row]]
        .into_iter()
        .filter(|&t| t != NONE)
        .fold(dispatched, u64::max)
}

/// The requests of the measured windows that opened a connection before they could be sent, and
/// how long they waited for it (ready minus dispatch, ns, sorted).
pub(super) fn connection_waits(
    run: &Run,
    cut: &[Window],
    rows_of: &[Vec<usize>],
) -> (u64, Vec<u64>) {
    let requests = &run.requests;
    let mut dispatched = 0;
    let mut waits = Vec::new();
    for row in cut
        .iter()
        .zip(rows_of)
        .filter(|(w, _)| w.kind.measured())
        .flat_map(|(_, rows)| rows.iter().copied())
        .filter(|&row| requests.dispatched_ns[row] != NONE)
    {
        dispatched += 1;
        if requests.connect_start_ns[row] != NONE {
            waits.push(send_ready_ns(requests, row) - requests.dispatched_ns[row]);
        }
    }
    waits.sort_unstable();
    (dispatched, waits)
}

/// `unknown_count` (v0.3, A2): whether G2.2 also counts the requests the journal holds no record
/// of, which only an unsealed prefix has (their dispatch was never observed); it also says that
/// `skews` include each request's connection wait.
pub(super) fn evaluate(run: &Run, cut: &[Window], skews: &[u64], unknown_count: bool) -> Validity {
    let requests = &run.requests;
    let ms = |pin: &pins::Pin| run.config.number(pin);
    let mut gates = Vec::new();
    let skew_p99 = nearest_rank(skews, 0.99);
    let skew_max = skews.last().copied();
    let limit_p99 = ms(&pins::GATES_SEND_SKEW_P99_MS);
    let limit_max = ms(&pins::GATES_SEND_SKEW_MAX_MS);
    let how = if unknown_count {
        "the moment the request could be handed to the kernel (its dispatch, plus the connect and TLS handshake it waited for) minus its intended time, every dispatched request of the measured windows (A2)"
    } else {
        "actual minus intended dispatch, every dispatched request of the measured windows"
    };
    gates.push(limit_gate(
        GateId::SendSkewP99,
        skew_p99.map(|v| v as f64 / 1e6),
        limit_p99,
        false,
        "ms",
        skews.len() as u64,
        how,
    ));
    gates.push(limit_gate(
        GateId::SendSkewMax,
        skew_max.map(|v| v as f64 / 1e6),
        limit_max,
        false,
        "ms",
        skews.len() as u64,
        how,
    ));
    let undispatched_records = (0..requests.len())
        .filter(|&row| requests.outcome(row) == Some(Outcome::Undispatched))
        .count() as u64;
    let undispatched_telemetry = run
        .telemetry
        .rows
        .iter()
        .map(|t| t.undispatched_total)
        .max()
        .unwrap_or(0);
    let undispatched = undispatched_records.max(undispatched_telemetry);
    let unknown = if unknown_count {
        (0..requests.len())
            .filter(|&row| requests.outcome(row).is_none())
            .count() as u64
    } else {
        0
    };
    gates.push(limit_gate(
        GateId::Undispatched,
        Some((undispatched + unknown) as f64),
        ms(&pins::GATES_UNDISPATCHED_MAX),
        false,
        "requests",
        requests.len() as u64,
        if unknown > 0 {
            "scheduled but never sent, the whole run (records and the recorder's own count), plus the requests of an unsealed journal that have no record, whose dispatch was never observed (A2)"
        } else {
            "scheduled but never sent, the whole run (records and the recorder's own count)"
        },
    ));
    let samples = measured_telemetry(run, cut);
    let window_ns = run.config.number(&pins::GATES_HOST_CPU_WINDOW_S) * 1e9;
    let cpu = max_windowed_cpu(&samples, window_ns as u64);
    gates.push(limit_gate(
        GateId::HostCpu,
        cpu.map(|c| c * 100.0),
        ms(&pins::GATES_HOST_CPU_MAX_PERCENT),
        false,
        "%",
        samples.len() as u64,
        "busy share of all host cores (/proc/stat), mean over each run of consecutive samples spanning 5 s",
    ));
    let stall: Vec<_> = samples.iter().filter(|t| t.stall_samples > 0).collect();
    let stall_n: u64 = stall.iter().map(|t| u64::from(t.stall_samples)).sum();
    // The recorder's pooled p99 over the measured span when it wrote one (exact to 10 us, rounded
    // up); otherwise the highest per-second p99, an upper bound on the pooled one.
    let pooled = run
        .events
        .first(EventKind::StallSummary)
        .and_then(|e| e.value)
        .and_then(|v| u64::try_from(v).ok());
    let (stall_p99, how) = match pooled {
        Some(p99) => (
            Some(p99),
            "the 1 ms ticker's lateness pooled over the measured span by the recorder (nearest-rank p99, rounded up to 10 us)",
        ),
        None => (
            stall.iter().map(|t| t.stall_p99_ns).max(),
            "the highest per-second p99 of the 1 ms ticker's lateness: an upper bound on the pooled p99 (if every second's p99 is under x, at most 1 % of all samples are above x); this journal has no pooled stall-summary",
        ),
    };
    gates.push(limit_gate(
        GateId::RuntimeStall,
        stall_p99.map(|v| v as f64 / 1e3),
        ms(&pins::GATES_RUNTIME_STALL_P99_US),
        true,
        "us",
        stall_n,
        how,
    ));
    Validity {
        valid: gates.iter().all(Gate::passed),
        gates,
    }
}

/// The telemetry samples whose interval overlaps the measured span.
pub(super) fn measured_telemetry<'a>(run: &'a Run, cut: &[Window]) -> Vec<&'a TelemetryRecord> {
    let span = measured_span(cut);
    run.telemetry
        .rows
        .iter()
        .filter(|t| t.at_ns > span.0 && t.at_ns.saturating_sub(t.interval_ns) < span.1)
        .collect()
}

pub(super) fn measured_span(cut: &[Window]) -> (u64, u64) {
    let measured: Vec<&Window> = cut.iter().filter(|w| w.kind.measured()).collect();
    (
        measured.first().map_or(0, |w| w.start_ns),
        measured.last().map_or(0, |w| w.end_ns),
    )
}

/// The highest mean busy share over runs of consecutive samples spanning at least `window_ns`
/// (or over all samples, when they span less). `None` with no samples.
pub(super) fn max_windowed_cpu(
    samples: &[&percentes_formats::journal::records::TelemetryRecord],
    window_ns: u64,
) -> Option<f64> {
    let mean = |run: &[&percentes_formats::journal::records::TelemetryRecord]| {
        let busy: f64 = run
            .iter()
            .map(|t| f64::from(t.host_cpu_busy_ppm) / 1e6 * t.interval_ns as f64)
            .sum();
        let span: u64 = run.iter().map(|t| t.interval_ns).sum();
        (span > 0).then(|| busy / span as f64)
    };
    let total: u64 = samples.iter().map(|t| t.interval_ns).sum();
    if total < window_ns {
        // Shorter than one window: the whole span is the only window there is.
        return mean(samples);
    }
    let mut best: Option<f64> = None;
    for start in 0..samples.len() {
        let mut span = 0u64;
        let mut end = start;
        while end < samples.len() && span < window_ns {
            span += samples[end].interval_ns;
            end += 1;
        }
        if span < window_ns {
            break;
        }
        if let Some(m) = mean(&samples[start..end]) {
            best = Some(best.map_or(m, |b| b.max(m)));
        }
    }
    best
}

/// Nearest-rank quantile of sorted values.
pub(super) fn nearest_rank(sorted: &[u64], q: f64) -> Option<u64> {
    let n = sorted.len();
    (n > 0).then(|| sorted[((n as f64 * q).ceil() as usize).clamp(1, n) - 1])
}

pub(super) fn limit_gate(
    gate: GateId,
    observed: Option<f64>,
    limit: f64,
    strict: bool,
    unit: &str,
    n: u64,
    note: &str,
) -> Gate {
    let effect = Effect::RunInvalidating;
    let limit_text = format!("{} {limit} {unit}", if strict { "<" } else { "<=" });
    match observed {
        None => Gate {
            id: gate,
            effect,
            status: Status::Unobserved,
            limit: limit_text,
            observed: "not observed".into(),
            by: None,
            n,
            note: format!(
                "{note}; a gate that applies but was not observed counts as failed (§10)"
            ),
        },
        Some(value) => {
            let pass = if strict {
                value < limit
            } else {
                value <= limit
            };
            Gate {
                id: gate,
                effect,
                status: Status::of(pass),
                limit: limit_text,
                observed: if unit == "requests" {
                    format!("{value} {unit}")
                } else {
                    format!("{value:.3} {unit}")
                },
                by: (!pass).then(|| {
                    if unit == "requests" {
                        format!("{} {unit} over", value - limit)
                    } else {
                        format!("{:.3} {unit} over", value - limit)
                    }
                }),
                n,
                note: note.into(),
            }
        }
    }
}
