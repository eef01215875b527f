//! Seeds/003's required audit artifact (v0.3, SPEC §9): workload, clock, stages, generator,
//! schedule, results, threats and decision, each filled from the journal with what this run
//! shows, never a bare label.

use percentes_formats::journal::header::HostFact;
use percentes_formats::journal::hex;
use percentes_formats::journal::records::{EventKind, Outcome, PoolCounts, POOL_SUBJECT};
use percentes_formats::pins;

use super::rows::seconds;
use crate::frame::NONE;
use crate::load::Run;
use crate::model::{Artifact, Audit, Threat};

/// What the recorders' connection pools did (their `pool` events summed, one a shard), or
/// `None` for a journal whose recorder wrote none.
pub(super) fn pool_counts(run: &Run) -> Option<PoolCounts> {
    run.events
        .all(EventKind::Pool)
        .filter(|e| e.subject == POOL_SUBJECT)
        .filter_map(|e| PoolCounts::parse(&e.detail))
        .reduce(|a, b| PoolCounts {
            opened_ahead: a.opened_ahead + b.opened_ahead,
            expired: a.expired + b.expired,
            found_closed: a.found_closed + b.found_closed,
        })
}

/// The largest number of requests in flight at once (dispatched, not yet terminal): an open loop
/// is free to exceed any fixed population; a closed loop of N users never has more than N.
fn peak_in_flight(run: &Run) -> u64 {
    let requests = &run.requests;
    let mut starts = Vec::new();
    let mut ends = Vec::new();
    for r in 0..requests.len() {
        let d = requests.dispatched_ns[r];
        if d == NONE || requests.outcome(r).is_none() {
            continue;
        }
        starts.push(d);
        ends.push(requests.terminal_ns[r].max(d));
    }
    requests.release();
    peak_of(starts, ends)
}

/// The most intervals open at once, from their starts and ends (each end at or after its start),
/// in any order: the running count over every start (+1) and end (-1) in time order, an end at
/// the instant of a start first, so that a request that ends as another starts is not counted
/// with it. Two sorted lists of 8 bytes an interval walked together: half the memory of one
/// sorted list of (time, step) edges, and the same count, step for step.
fn peak_of(mut starts: Vec<u64>, mut ends: Vec<u64>) -> u64 {
    starts.sort_unstable();
    ends.sort_unstable();
    let (mut level, mut peak, mut closed) = (0i64, 0i64, 0usize);
    for start in starts {
        while closed < ends.len() && ends[closed] <= start {
            closed += 1;
            level -= 1;
        }
        level += 1;
        peak = peak.max(level);
    }
    peak.max(0) as u64
}

fn host(run: &Run, fact: HostFact) -> String {
    run.header
        .fact(fact)
        .map_or_else(|| "not recorded".into(), str::to_owned)
}

/// A merged run's recorders, one line each (issue 38 item 5): its shard, host and boot id,
/// generator (workers, cores, CPU, tool), clock discipline and error bounds, and how late it was
/// ready after the agreed epoch; `None` for a run one recorder wrote.
pub(super) fn shard_generators(run: &Run) -> Option<String> {
    if run.parts.len() < 2 {
        return None;
    }
    let lines: Vec<String> = run
        .parts
        .iter()
        .filter_map(|part| part.header.as_ref())
        .map(|h| {
            let fact = |f: HostFact| h.fact(f).unwrap_or("not recorded");
            let late = match h.fact(HostFact::StartLateNs).map(str::parse::<u64>) {
                Some(Ok(0)) => "ready on time".to_owned(),
                Some(Ok(ns)) => format!("ready {:.3} ms after the agreed epoch", ns as f64 / 1e6),
                _ => "start lateness not recorded".to_owned(),
            };
            format!(
                "shard {} of {}: host {} (boot id {}), {} workers on {} cores ({}), percentes recorder {} ({}); clock {} (maxerror {} us, esterror {} us); {late}",
                h.shard_index,
                h.shard_count,
                fact(HostFact::Hostname),
                fact(HostFact::BootId),
                fact(HostFact::RecorderWorkers),
                fact(HostFact::Cores),
                fact(HostFact::Cpu),
                h.tool_version,
                h.tool_commit,
                fact(HostFact::ClockSync),
                fact(HostFact::ClockMaxerrorUs),
                fact(HostFact::ClockEsterrorUs),
            )
        })
        .collect();
    Some(lines.join("; "))
}

/// The clock model of a merged run: one clock when every shard shares a boot id, else each
/// host's own monotonic clock tied to the agreed epoch through its realtime clock, within the
/// error bounds its clock discipline reports.
pub(super) fn merged_clock(run: &Run) -> Option<String> {
    let headers: Vec<_> = run.parts.iter().filter_map(|p| p.header.as_ref()).collect();
    if headers.len() < 2 {
        return None;
    }
    let boots: std::collections::BTreeSet<&str> = headers
        .iter()
        .map(|h| h.fact(HostFact::BootId).unwrap_or("not recorded"))
        .collect();
    let unsynchronized = headers
        .iter()
        .filter(|h| {
            h.fact(HostFact::ClockSync)
                .is_none_or(|s| !s.starts_with("synchronized"))
        })
        .count();
    Some(if boots.contains("not recorded") {
        format!(
            "{} shards, not every one with its boot id recorded: whether they read one monotonic clock ({}) is not known; each is ns from the agreed epoch",
            headers.len(),
            run.header.clock.source
        )
    } else if boots.len() == 1 {
        format!(
            "{} shards on one host (one boot id): one monotonic clock ({}), ns from the agreed epoch",
            headers.len(),
            run.header.clock.source
        )
    } else {
        format!(
            "{} shards on {} hosts: each its own monotonic clock ({}), ns from the agreed epoch each reached through its realtime clock; a time compared across shards is within the sum of their clocks' error bounds (the shards' lines in the generator), and {unsynchronized} of the {} shards did not report a synchronized clock",
            headers.len(),
            boots.len(),
            run.header.clock.source,
            headers.len()
        )
    })
}

/// The artifact, from the audit already computed and the run.
/// Which HTTP version carried the load: what `target.http` asked for and what the requests
/// record (SPEC §2 "HTTP/2"; kind-6 `protocol`).
fn protocol(run: &Run) -> String {
    let requests = &run.requests;
    let asked = run.config.target.http;
    let dispatched = (0..requests.len())
        .filter(|&r| requests.dispatched_ns[r] != crate::frame::NONE)
        .count();
    let h1 = requests.protocol.iter().filter(|&&p| p == 1).count();
    let h2 = requests.protocol.iter().filter(|&&p| p == 2).count();
    if h1 + h2 == 0 {
        return format!(
            "HTTP/1.1 carried every one of the {dispatched} dispatched requests (target.http = \"{}\": no request records another version)",
            asked.name()
        );
    }
    let connections: std::collections::BTreeSet<u64> = (0..requests.len())
        .filter(|&r| requests.protocol[r] == 2)
        .map(|r| requests.connection_id[r])
        .collect();
    format!(
        "target.http = \"{}\": HTTP/2 carried {h2} and HTTP/1.1 {h1} of the {dispatched} dispatched requests ({} without a record of it); the HTTP/2 requests went over {} connections, each request one stream, none held for a stream slot (SPEC §2)",
        asked.name(),
        dispatched.saturating_sub(h1 + h2),
        connections.len()
    )
}

/// `g24`: under A4, G2.4's own reading, said beside the largest per-second stall p99.
pub(super) fn artifact(run: &Run, audit: &Audit, g24: Option<&str>) -> Artifact {
    let requests = &run.requests;
    let header = &run.header;
    let n = requests.len() as u64;
    let peak = peak_in_flight(run);
    let opened = requests
        .connect_start_ns
        .iter()
        .filter(|&&t| t != NONE)
        .count();
    let reused = requests.connection_reused.iter().filter(|&&r| r).count();
    let count = |o: Outcome| {
        (0..requests.len())
            .filter(|&r| requests.outcome(r) == Some(o))
            .count() as u64
    };
    let (completed, errored, censored) = (
        count(Outcome::Completed),
        count(Outcome::Errored),
        count(Outcome::Censored),
    );
    let share = |k: u64| {
        if n > 0 {
            k as f64 / n as f64 * 100.0
        } else {
            0.0
        }
    };
    let timeout_s = seconds(run.config.duration_ns(&pins::CLIENT_TIMEOUT_S));
    let follows = header.schedule.workload.follows();
    let skew = &audit.skew_us;
    let tm = &audit.telemetry;
    let canaries = run.events.all(EventKind::Canary).count();
    let ks: Vec<String> = audit
        .phases
        .iter()
        .map(|p| {
            format!(
                "{} target {:.3} ms (CV {:.1}), dispatched {} (CV {}), KS {}",
                p.phase,
                p.target_mean_gap_ms,
                p.target_cv,
                p.dispatched_mean_gap_ms
                    .map_or("n/a".into(), |m| format!("{m:.3} ms")),
                p.dispatched_cv.map_or("n/a".into(), |c| format!("{c:.3}")),
                p.dispatched_ks.map_or("n/a".into(), |d| format!("{d:.3}")),
            )
        })
        .collect();
    let pct = |v: Option<f64>| v.map_or("not recorded".into(), |v| format!("{v:.1} %"));
    Artifact {
        protocol: protocol(run),
        workload: format!(
            "{} Evidence: the intended times are regenerated from the schedule parameters and match the header's digest (J.4){}; each request's send is measured against its own intended time (skew p99 {:.3} ms over {} dispatches); up to {peak} requests were in flight at once{}; production evidence for this arrival law is not in the journal",
            audit.workload_model,
            if run.header.schedule.workload.follows() {
                format!(
                    ", and each of the {} follow-ups was checked against its predecessor's terminal time plus the think time the seed drew for it",
                    run.requests.len() as u64 - run.header.schedule_requests
                )
            } else {
                String::new()
            },
            skew.p99 as f64 / 1e3,
            skew.n,
            match run.header.schedule.workload {
                percentes_formats::schedule::Workload::Closed { users, .. } => {
                    format!(" (the population is {users})")
                }
                _ => ", which no fixed population smaller than that could produce".into(),
            },
        ),
        clock: format!(
            "{}; per request: intended send t_i, dispatched, connect start and end, TLS done, request written, response head, first content, each content gap, and the terminal time (completion, error, or the deadline t_i + {timeout_s:.3} s for a censored request); latency is measured from t_i, so generator lag counts as user wait",
            merged_clock(run).unwrap_or_else(|| format!(
                "one monotonic clock on the recording host ({}), ns from the epoch",
                header.clock.source
            ))
        ),
        stages: format!(
            "{}; {}",
            audit
                .stages
                .iter()
                .map(|(name, count)| format!("{name} {count}"))
                .collect::<Vec<_>>()
                .join(" -> "),
            audit.reconciliation
        ),
        generator: format!(
            "percentes recorder {} ({}), configuration BLAKE3 {}; {} workers on {} cores ({}); {}, at most {peak} requests {} busy at once; clock source {}; loopback canary: {}",
            header.tool_version,
            header.tool_commit,
            hex(&header.config_hash),
            host(run, HostFact::RecorderWorkers),
            host(run, HostFact::Cores),
            host(run, HostFact::Cpu),
            match pool_counts(run) {
                Some(pool) => format!(
                    "{} connections opened: {opened} by the requests that needed them and {} ahead of need by the pool (the warm pool and the spare keeper; {} idle ones retired at their limit, {} found closed by the server); {reused} requests on a connection that had carried one before",
                    opened as u64 + pool.opened_ahead,
                    pool.opened_ahead,
                    pool.expired,
                    pool.found_closed
                ),
                None => format!(
                    "{opened} connections opened, {reused} requests on a reused connection"
                ),
            },
            if run.requests.protocol.contains(&2) {
                "(HTTP/2 streams, several to a connection)"
            } else {
                "(so connections)"
            },
            header.clock.source,
            if canaries > 0 {
                format!("{canaries} summaries in the journal")
            } else {
                format!("none ({})", host(run, HostFact::Canary))
            },
        ) + &shard_generators(run)
            .map(|lines| format!("; the recorders, shard by shard: {lines}"))
            .unwrap_or_default(),
        schedule: format!(
            "target against dispatched inter-arrivals per phase: {}. Lag policy: no request waits for another; each is sent at its intended time or as soon after as the generator can, and its lateness is recorded (G2.1). Drop policy: none; a request that cannot be sent is recorded as undispatched and fails G2.2, never dropped silently",
            ks.join("; ")
        ),
        results: format!(
            "raw distributions only: the per-window TTFT, end-to-end and inter-chunk histograms (histograms.hlog) and the completion curve over every scheduled request; no coordinated-omission correction was applied (no recordValueWithExpectedInterval, no post-hoc fill-in), because {}",
            if follows {
                "the waiting for responses is the workload model itself (SPEC §1 \"Workload models\"): a correction would describe another workload, not recover this one's"
            } else {
                "the schedule never waited for a response"
            }
        ),
        threats: vec![
            Threat {
                threat: "response coupling",
                shows: format!(
                    "{}; skew p99 {:.3} ms, max {:.3} ms; up to {peak} in flight",
                    match &header.schedule.workload {
                        percentes_formats::schedule::Workload::Closed { .. } => "by design (closed loop): each user's next send follows its previous response, so a slower target is offered less load; the latency is not latency at a fixed rate",
                        percentes_formats::schedule::Workload::SemiOpen { .. } => "by design within a session (each turn follows the previous response); none between sessions, which arrive on the schedule",
                        _ => "none by construction (open loop): sends follow the schedule, not responses",
                    },
                    skew.p99 as f64 / 1e3,
                    skew.max as f64 / 1e3
                ),
            },
            Threat {
                threat: "saturation",
                shows: format!(
                    "generator: host CPU at most {} over any 5 s, recorder {} of one core, {}; target: {errored} errored ({:.2} %) and {censored} censored ({:.2} %) of {n} scheduled",
                    pct(tm.host_cpu_max_5s_percent),
                    pct(tm.recorder_cpu_percent_of_one_core),
                    match (g24, tm.stall_p99_max_us) {
                        (None, p99) => format!(
                            "stall p99 at most {}",
                            p99.map_or("not recorded".into(), |v| format!("{v:.1} us"))
                        ),
                        (Some(g24), Some(v)) => format!(
                            "the largest one-second stall p99 {v:.1} us (any second of the run, warm-up and cooldown included; G2.4 reads its own figure over the measured span: {g24})"
                        ),
                        (Some(g24), None) => format!(
                            "no per-second stall p99 recorded (G2.4: {g24})"
                        ),
                    },
                    share(errored),
                    share(censored)
                ),
            },
            Threat {
                threat: "censoring",
                shows: format!(
                    "{censored} requests ({:.2} %) reached the {timeout_s:.3} s horizon; they are on the completion curve as censored and in no latency histogram; completed-only percentiles carry the caveat where errored and censored exceed 5 % of a window",
                    share(censored)
                ),
            },
            Threat {
                threat: "retries",
                shows: format!(
                    "none: retries are pinned at 0 (§1); each of the {n} scheduled requests was sent at most once, and {completed} completed"
                ),
            },
            Threat {
                threat: "shared bottlenecks",
                shows: format!(
                    "the recorder ran on {} ({} cores); a target on the same host shares its CPU (host CPU at most {}); the network path and any gateway between them are not observed by the journal",
                    host(run, HostFact::Hostname),
                    host(run, HostFact::Cores),
                    pct(tm.host_cpu_max_5s_percent)
                ),
            },
        ],
        decision: audit.decision.clone(),
        connection_waits: None,
    }
}

/// The connection-wait line from the measured windows' dispatched count and sorted waits (ns).
pub(super) fn connection_waits((dispatched, waits): (u64, Vec<u64>)) -> String {
    if waits.is_empty() {
        return format!(
            "none of the {dispatched} dispatched requests of the measured windows waited for a connection: each found an idle one"
        );
    }
    let at = |q: f64| {
        let rank = ((waits.len() as f64 * q).ceil() as usize).clamp(1, waits.len());
        waits[rank - 1] as f64 / 1e6
    };
    format!(
        "{} of the {dispatched} dispatched requests of the measured windows opened a connection before they could be sent, and that wait is in their send skew (A2): p50 {:.3} ms, p99 {:.3} ms, max {:.3} ms",
        waits.len(),
        at(0.5),
        at(0.99),
        at(1.0)
    )
}

#[cfg(test)]
mod tests {
    use super::peak_of;

    /// The count as it was made before (every edge in one list sorted by time, then step), as
    /// the oracle, over random intervals with many ties and zero-length ones.
    fn edges_peak(starts: &[u64], ends: &[u64]) -> u64 {
        let mut edges: Vec<(u64, i64)> = starts.iter().map(|&s| (s, 1)).collect();
        edges.extend(ends.iter().map(|&e| (e, -1)));
        edges.sort_unstable();
        let (mut level, mut peak) = (0i64, 0i64);
        for (_, step) in edges {
            level += step;
            peak = peak.max(level);
        }
        peak.max(0) as u64
    }

    #[test]
    fn the_peak_in_flight_is_the_edge_count_with_ends_first() {
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut next = |m: u64| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state % m
        };
        for _ in 0..500 {
            let n = 1 + next(40) as usize;
            let starts: Vec<u64> = (0..n).map(|_| next(20)).collect();
            let ends: Vec<u64> = starts.iter().map(|&s| s + next(6)).collect();
            assert_eq!(
                peak_of(starts.clone(), ends.clone()),
                edges_peak(&starts, &ends),
                "{starts:?} {ends:?}"
            );
        }
        assert_eq!(peak_of(vec![], vec![]), 0);
        // Back to back: the first ends as the second starts.
        assert_eq!(peak_of(vec![0, 5], vec![5, 9]), 1);
        assert_eq!(peak_of(vec![0, 1, 2], vec![10, 10, 10]), 3);
    }
}
