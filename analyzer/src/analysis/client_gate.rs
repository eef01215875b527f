//! The client-validity gate (SPEC §2): send skew, undispatched requests, host CPU and the runtime
//! stall, over the measured windows.

use percentes_formats::journal::header::HostFact;
use percentes_formats::journal::records::TelemetryRecord;
use percentes_formats::journal::records::{EventKind, Outcome, CLIENT_BEHIND};
use percentes_formats::pins;
use percentes_formats::spec::{
    CpuSource, LatenessReading, Rules, SkewDefinition, StallReading, UndispatchedCount,
};

use crate::frame::{CgroupRow, Requests, NONE};
use crate::load::Run;
use crate::model::{Effect, Gate, GateId, LateSends, Status, Validity};
use crate::windows::Window;

/// The client-validity gate (§2) over the measured windows.
/// Send skew (dispatch minus intended, ns) of every dispatched request of the measured windows,
/// sorted: the gate and the audit read the same vector.
/// [`SkewDefinition::ReadyToSend`] (v0.3, A2): the skew runs to the moment the request could be
/// handed to the kernel, its dispatch plus the connect and TLS handshake it waited for when it
/// opened a connection (the recorder writes the request in the same step as the connection
/// becomes ready, with no wait between: `recorder/src/run/client.rs`, `talk`);
/// [`SkewDefinition::Dispatch`] (v0.1, v0.2) reads the dispatch alone.
pub(super) fn measured_skews(
    run: &Run,
    cut: &[Window],
    rows_of: &[Vec<usize>],
    skew: SkewDefinition,
) -> Vec<u64> {
    let requests = &run.requests;
    let mut skews: Vec<u64> = cut
        .iter()
        .zip(rows_of)
        .filter(|(w, _)| w.kind.measured())
        .flat_map(|(_, rows)| rows.iter().copied())
        .filter(|&row| requests.dispatched_ns[row] != NONE)
        .map(|row| {
            let sent = match skew {
                SkewDefinition::ReadyToSend => send_ready_ns(requests, row),
                SkewDefinition::Dispatch => requests.dispatched_ns[row],
            };
            sent.saturating_sub(requests.intended_ns[row])
        })
        .collect();
    skews.sort_unstable();
    skews
}

/// The measured requests ready to send more than `limit_ns` after their intended time, by where
/// the time went (issue 50): begun late (the later of dispatch and connect start past the
/// limit: the client's) or begun in time and waiting for their connect or TLS handshake (the
/// target's or the network's: a dropped SYN is waited for on time). `None` when none is late.
pub(super) fn late_sends(run: &Run, cut: &[Window], limit_ns: u64) -> Option<LateSends> {
    let requests = &run.requests;
    let mut split = LateSends {
        late: 0,
        began_late: 0,
        waited_on_connection: 0,
    };
    for row in (0..requests.len()).filter(|&row| requests.dispatched_ns[row] != NONE) {
        let intended = requests.intended_ns[row];
        let measured =
            crate::windows::locate(cut, intended).is_some_and(|w| cut[w].kind.measured());
        if !measured || send_ready_ns(requests, row).saturating_sub(intended) <= limit_ns {
            continue;
        }
        split.late += 1;
        let connect = requests.connect_start_ns[row];
        let began = match connect {
            NONE => requests.dispatched_ns[row],
            at => at.max(requests.dispatched_ns[row]),
        };
        if began.saturating_sub(intended) > limit_ns {
            split.began_late += 1;
        } else {
            split.waited_on_connection += 1;
        }
    }
    (split.late > 0).then_some(split)
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

/// The version's `rules` say what `skews` measure, whether G2.2 also counts the requests the
/// journal holds no record of (only an unsealed prefix has them: their dispatch was never
/// observed), and what G2.3 reads ([`cpu_reading`]).
pub(super) fn evaluate(run: &Run, cut: &[Window], skews: &[u64], rules: &Rules) -> Validity {
    let requests = &run.requests;
    let ms = |pin: &pins::Pin| run.config.number(pin);
    let mut gates = Vec::new();
    let skew_p99 = nearest_rank(skews, 0.99);
    let skew_max = skews.last().copied();
    let limit_p99 = ms(&pins::GATES_SEND_SKEW_P99_MS);
    let limit_max = ms(&pins::GATES_SEND_SKEW_MAX_MS);
    let how = if rules.skew == SkewDefinition::ReadyToSend {
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
    let undispatched_telemetry = undispatched_by_recorders(run);
    let undispatched = undispatched_records.max(undispatched_telemetry);
    let unknown = if rules.undispatched == UndispatchedCount::WithUnrecorded {
        (0..requests.len())
            .filter(|&row| requests.outcome(row).is_none())
            .count() as u64
    } else {
        0
    };
    let late = match rules.lateness {
        LatenessReading::ClientLate => archived_client_late(run),
        LatenessReading::AsRecorded => 0,
    };
    let mut how = if unknown > 0 {
        "scheduled but never sent, the whole run (records and the recorder's own count), plus the requests of an unsealed journal that have no record, whose dispatch was never observed (A2)"
    } else {
        "scheduled but never sent, the whole run (records and the recorder's own count)"
    }
    .to_owned();
    if late > 0 {
        how.push_str(&format!(
            ", plus {late} recorded as errored at connect by a recorder before the client-late rule, which reached them at or after their deadline and attempted no connect: the client's lateness, not the target's (§2, A3)"
        ));
    }
    gates.push(limit_gate(
        GateId::Undispatched,
        Some((undispatched + unknown + late) as f64),
        ms(&pins::GATES_UNDISPATCHED_MAX),
        false,
        "requests",
        requests.len() as u64,
        &how,
    ));
    let samples = measured_telemetry(run, cut);
    // The window is the pin's 5 s on every profile (the dev profile does not divide it).
    let window_ns = run.config.number(&pins::GATES_HOST_CPU_WINDOW_S) * 1e9;
    let mut cpu = cpu_reading(run, cut, window_ns as u64, rules.cpu);
    // Where the study runner placed the target beside the recorder (SPEC §2 "Placement"): what
    // kept the target's CPU out of this reading, said beside it.
    if let Some(target) = run.header.fact(HostFact::TargetPlacement) {
        cpu.how = format!("{}; target placement: {target}", cpu.how);
    }
    gates.push(limit_gate(
        GateId::HostCpu,
        cpu.gated.map(|c| c * 100.0),
        ms(&pins::GATES_HOST_CPU_MAX_PERCENT),
        false,
        "%",
        samples.len() as u64,
        &cpu.how,
    ));
    let stall: Vec<_> = samples.iter().filter(|t| t.stall_samples > 0).collect();
    let stall_n: u64 = stall.iter().map(|t| u64::from(t.stall_samples)).sum();
    // The recorder's pooled p99 over the measured span when it wrote one (exact to 10 us, rounded
    // up); otherwise the highest per-second p99, an upper bound on the pooled one.
    // One summary per recorder; with shards, the worst recorder's.
    let pooled = run
        .events
        .all(EventKind::StallSummary)
        .filter_map(|e| e.value)
        .filter_map(|v| u64::try_from(v).ok())
        .max();
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
    // Which ticker the journal's recorder ran (SPEC §2 "Runtime stall"): each worker's own,
    // where its `placement` fact says so; a journal without the fact is read as recorded, from
    // the ticker thread of its time, which did not share the workers' CPU.
    let placement = run
        .header
        .host
        .iter()
        .find(|(k, _)| k == HostFact::Placement.key());
    // Under A3 (v0.4) only a ticker on each worker's own loop bounds the send path: the
    // separate ticker thread of older recorders read 0.55 s while dispatch stood still for 58 s.
    let off_the_send_path = placement.is_none() && rules.stall == StallReading::SendPathOnly;
    let how = match placement {
        Some((_, placement)) => {
            format!("{how}; placement: {placement}")
        }
        None if off_the_send_path => format!(
            "{how}, but on a ticker thread of its own, not on the workers' loops: it does not bound the send path (§2 \"Runtime stall\", A3); this journal has no `placement` fact, so its recorder predates the workers' own tickers"
        ),
        None => how.to_owned(),
    };
    gates.push(limit_gate(
        GateId::RuntimeStall,
        stall_p99
            .filter(|_| !off_the_send_path)
            .map(|v| v as f64 / 1e3),
        ms(&pins::GATES_RUNTIME_STALL_P99_US),
        true,
        "us",
        stall_n,
        &how,
    ));
    if let Some(e) = run
        .events
        .all(EventKind::Escape)
        .find(|e| e.subject == CLIENT_BEHIND)
    {
        gates.push(Gate {
            id: GateId::FallBehind,
            effect: Effect::RunInvalidating,
            status: Status::Fail,
            limit: format!(
                "no {} ms of intended time in which every request is reached {} ms or more late (client.behind_span_ms, client.behind_lag_ms)",
                pins::value::CLIENT_BEHIND_SPAN_MS,
                pins::value::CLIENT_BEHIND_LAG_MS
            ),
            observed: format!("escaped at {:.3} s: {}", e.at_ns as f64 / 1e9, e.detail),
            by: None,
            n: 1,
            note: "the recorder stopped offered load when it fell behind its schedule: the client was unfit, not the target".into(),
        });
    }
    let skew_failed = gates
        .iter()
        .any(|g| matches!(g.id, GateId::SendSkewP99 | GateId::SendSkewMax) && !g.holds());
    let late_sends = if skew_failed && rules.skew == SkewDefinition::ReadyToSend {
        late_sends(run, cut, (limit_p99 * 1e6) as u64).filter(|l| l.waited_on_connection > 0)
    } else {
        None
    };
    Validity {
        valid: gates.iter().all(Gate::passed),
        gates,
        late_sends,
    }
}

/// Under A3 (v0.4), the requests a recorder from before the client-late rule (a journal with no
/// `placement` host fact) recorded as errored though it never tried them: its worker reached
/// them at or after their deadline (t_i plus the client timeout) and wrote nothing, no connect
/// started. Such a recorder stamped "the TCP connect took longer than 0ns" on them; the rule
/// that replaced it records them undispatched, `client-late` (§2). Zero for a journal recorded
/// under the rule, which holds none.
pub(super) fn archived_client_late(run: &Run) -> u64 {
    let placed = run
        .header
        .host
        .iter()
        .any(|(k, _)| k == HostFact::Placement.key());
    if placed {
        return 0;
    }
    let requests = &run.requests;
    let timeout_ns = run.config.duration_ns(&pins::CLIENT_TIMEOUT_S);
    (0..requests.len())
        .filter(|&row| {
            let deadline = requests.intended_ns[row].saturating_add(timeout_ns);
            let reached = requests.dispatched_ns[row];
            requests.outcome(row) == Some(Outcome::Errored)
                && requests.connect_start_ns[row] == NONE
                && requests.request_written_ns[row] == NONE
                && reached != NONE
                && reached >= deadline
        })
        .count() as u64
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

/// Requests the recorders gave up dispatching, by their own counts: each recorder's running
/// total at its last sample, summed over the recorders (shards).
pub(super) fn undispatched_by_recorders(run: &Run) -> u64 {
    run.telemetry
        .by_shard()
        .iter()
        .map(|rows| rows.iter().map(|t| t.undispatched_total).max().unwrap_or(0))
        .sum()
}

/// The highest windowed host CPU of any recorder over the measured span: each recorder's samples
/// are a series of their own ([`max_windowed_cpu`]), and each shard's host is gated.
pub(super) fn worst_windowed_cpu(run: &Run, cut: &[Window], window_ns: u64) -> Option<f64> {
    let span = measured_span(cut);
    run.telemetry
        .by_shard()
        .iter()
        .filter_map(|rows| {
            let samples: Vec<&TelemetryRecord> = rows
                .iter()
                .filter(|t| t.at_ns > span.0 && t.at_ns.saturating_sub(t.interval_ns) < span.1)
                .collect();
            max_windowed_cpu(&samples, window_ns)
        })
        .reduce(f64::max)
}

/// What G2.3 reads (SPEC §2): per recorder, the cgroup's share of its CPU quota when the
/// journal has that recorder's `cgroup-cpu` seconds with a quota and the spec is v0.3 or later,
/// else the host's /proc/stat busy share; the worst recorder's highest 5 s mean.
pub(super) struct CpuReading {
    /// What the gate compares with its limit (a share, 1.0 = all of it).
    pub gated: Option<f64>,
    /// The worst cgroup reading over recorders that have one, whether or not the gate read it.
    pub cgroup: Option<f64>,
    /// Time throttled and periods throttled over the measured span, summed over recorders.
    pub throttled: Option<(u64, u64)>,
    /// The gate's note: which reading it took.
    pub how: String,
}

pub(super) fn cpu_reading(
    run: &Run,
    cut: &[Window],
    window_ns: u64,
    source: CpuSource,
) -> CpuReading {
    let span = measured_span(cut);
    let inside =
        |at_ns: u64, interval_ns: u64| at_ns > span.0 && at_ns.saturating_sub(interval_ns) < span.1;
    let cgroups = run.telemetry.cgroup_by_shard();
    let (mut gated, mut cgroup_worst, mut throttled) = (None::<f64>, None::<f64>, None);
    let (mut by_cgroup, mut recorders) = (0, 0);
    // Seconds whose host CPU reading the recorder could not take (JOURNAL.md "3 telemetry"):
    // a reading over them is not observed, never a pass on what was read around them.
    let mut not_read = 0u64;
    let mut host_gated = false;
    for (shard, rows) in run.telemetry.by_shard().iter().enumerate() {
        recorders += 1;
        let measured: Vec<_> = rows
            .iter()
            .filter(|t| inside(t.at_ns, t.interval_ns))
            .collect();
        let host: Vec<(f64, u64)> = measured
            .iter()
            .filter_map(|t| Some((t.host_cpu()?, t.interval_ns)))
            .collect();
        not_read += (measured.len() - host.len()) as u64;
        let seconds: Vec<&CgroupRow> = cgroups
            .get(shard)
            .into_iter()
            .flatten()
            .copied()
            .filter(|c| inside(c.at_ns, c.cpu.interval_ns))
            .collect();
        if !seconds.is_empty() {
            let (ns, periods) = throttled.unwrap_or((0, 0));
            throttled = Some((
                ns + seconds.iter().map(|c| c.cpu.throttled_ns).sum::<u64>(),
                periods + seconds.iter().map(|c| c.cpu.throttled_periods).sum::<u64>(),
            ));
        }
        let of_quota: Vec<(f64, u64)> = seconds
            .iter()
            .filter_map(|c| Some((c.cpu.busy_of_quota()?, c.cpu.interval_ns)))
            .collect();
        let cgroup = max_windowed(&of_quota, window_ns);
        cgroup_worst = max_option(cgroup_worst, cgroup);
        let reading = if source == CpuSource::CgroupQuotaWhereJournaled && cgroup.is_some() {
            by_cgroup += 1;
            cgroup
        } else {
            host_gated = true;
            max_windowed(&host, window_ns)
        };
        gated = max_option(gated, reading);
    }
    let how = cpu_how(
        cgroup_worst.is_some(),
        (by_cgroup, recorders),
        (host_gated, not_read),
    );
    CpuReading {
        gated: gated.filter(|_| !(host_gated && not_read > 0)),
        cgroup: cgroup_worst,
        throttled,
        how,
    }
}

/// How G2.3 read the CPU: the host's share or the recorders' cgroups (`by_cgroup` of
/// `recorders`), whether the journal also holds a cgroup reading, and how many measured seconds
/// had no host reading where the host's share was gated.
fn cpu_how(
    has_cgroup: bool,
    (by_cgroup, recorders): (usize, usize),
    (host_gated, not_read): (bool, u64),
) -> String {
    const HOST: &str = "busy share of all host cores (/proc/stat), mean over each run of consecutive samples spanning 5 s";
    let how = if by_cgroup == 0 {
        if has_cgroup {
            format!("{HOST}; the journal also holds the recorder's cgroup CPU against its quota, which spec v0.3 gates on and v0.1 and v0.2 do not")
        } else {
            HOST.into()
        }
    } else {
        let which = if by_cgroup == recorders {
            "the recorder's".to_owned()
        } else {
            format!("for {by_cgroup} of {recorders} recorders their own (the others: /proc/stat's host share)")
        };
        format!("CPU of {which} cgroup against its quota (cgroup-cpu: usage over quota per period), mean over each run of consecutive seconds spanning 5 s; the host's /proc/stat share is in the audit")
    };
    if host_gated && not_read > 0 {
        format!("{how}; {not_read} measured seconds have no host CPU reading (the recorder could not read /proc/stat), so the gate is not observed")
    } else {
        how
    }
}

fn max_option(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    }
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
    let shares: Vec<(f64, u64)> = samples
        .iter()
        .filter_map(|t| Some((t.host_cpu()?, t.interval_ns)))
        .collect();
    max_windowed(&shares, window_ns)
}

/// [`max_windowed_cpu`] over (busy share, interval ns) pairs.
fn max_windowed(samples: &[(f64, u64)], window_ns: u64) -> Option<f64> {
    let mean = |run: &[(f64, u64)]| {
        let busy: f64 = run.iter().map(|(b, i)| b * *i as f64).sum();
        let span: u64 = run.iter().map(|(_, i)| i).sum();
        (span > 0).then(|| busy / span as f64)
    };
    let total: u64 = samples.iter().map(|(_, i)| i).sum();
    if total < window_ns {
        // Shorter than one window: the whole span is the only window there is.
        return mean(samples);
    }
    let mut best: Option<f64> = None;
    for start in 0..samples.len() {
        let mut span = 0u64;
        let mut end = start;
        while end < samples.len() && span < window_ns {
            span += samples[end].1;
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
