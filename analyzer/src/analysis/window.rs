//! The metrics of one window (SPEC §3, §4, §7): outcomes and classes, rates, goodput and its
//! sweep, the completion curve and its readings, completed-only distributions with their tail
//! intervals, the modal distance, the per-route segments, the receive path; and the requests in
//! flight at the fire.

use percentes_formats::journal::records::{class_name, EventKind, Outcome};
use percentes_formats::pins;
use percentes_formats::spec::{
    CurveBudget, LostInFlight, RefusalWords, Rules, StreamReading, TailSample,
};

use super::client_gate::nearest_rank;
use super::distribution::{distribution, distribution_of, QUANTILES, TAIL_QUANTILES};
use super::rows::{count_outcomes, e2e_ns, in_intended_order, seconds, tokens_per_event, ttft_ns};
use crate::estimate::histogram::LatencyHistogram;
use crate::estimate::incidence::{CompletionCurve, Fate, Method, Observation};
use crate::estimate::quantile;
use crate::estimate::quantile::Printing;
use crate::estimate::slo::{self, Distance, Slo};
use crate::frame::{Requests, NONE};
use crate::load::Run;
use crate::model::{
    CurvePoint, CurveReport, Distribution, InFlight, ModalDistance, Reading, ReceivePath,
    RouteSegment, Share, SweepCell, WindowReport,
};
use crate::server::canary_reading;
use crate::windows::{self, Kind, Window};
use crate::JournalFile;

/// Points at which the report tabulates the completion curve, as fractions of the horizon.
pub(super) const CURVE_GRID_POINTS: u64 = 100;

pub(super) const INTER_CHUNK_FLOOR: &str = "pooled inter-chunk gaps at the 1 us floor (events read together; a shorter gap is recorded as 1 us, §3)";
pub(super) const INTER_CHUNK: &str = "conditional on completion; pooled inter-chunk gaps of the window's completed streams (a per-request p99 is not computed, §3)";

/// The pooled inter-chunk gaps of each window's completed requests, in the pinned histogram:
/// a second pass over the journal's request records, holding one histogram per window.
/// Beside each window's gaps, the same gaps per token: each divided by its request's tokens per
/// content event ([`tokens_per_event`]).
pub(super) fn inter_chunk(
    run: &Run,
    files: &[JournalFile],
    cut: &[Window],
    reading: StreamReading,
) -> Vec<(LatencyHistogram, LatencyHistogram)> {
    let mut histograms = vec![(LatencyHistogram::pinned(), LatencyHistogram::pinned()); cut.len()];
    for (file, report) in files.iter().zip(&run.parts) {
        let mut released = 0u64;
        for framed in file.framed(report) {
            if framed.byte_offset >= released + crate::RELEASE_EVERY_BYTES {
                file.release_before(framed.byte_offset);
                released = framed.byte_offset;
            }
            if framed.kind != percentes_formats::journal::records::RecordKind::Request as u8
                || framed
                    .body
                    .get(percentes_formats::journal::records::REQUEST_OUTCOME_OFFSET)
                    != Some(&(Outcome::Completed as u8))
            {
                continue;
            }
            // The gaps are read in place (JOURNAL.md's layout); the load pass already decoded and
            // checked every record in full.
            let Some((intended_ns, gaps)) =
                percentes_formats::journal::records::request_gaps(framed.body)
            else {
                continue;
            };
            if let Some(w) = windows::locate(cut, intended_ns) {
                let index = framed
                    .body
                    .get(..8)
                    .and_then(|b| b.try_into().ok())
                    .map(u64::from_le_bytes);
                let per_event = index
                    .and_then(|i| run.requests.index.binary_search(&i).ok())
                    .map(|row| tokens_per_event(&run.requests, row, reading))
                    .unwrap_or(1.0);
                let (gaps_h, per_token) = &mut histograms[w];
                for gap in gaps {
                    gaps_h.record_us(u64::from(gap));
                    per_token.record_us((f64::from(gap) / per_event).round().max(1.0) as u64);
                }
            }
        }
    }
    histograms
}

pub(super) fn window_report(
    run: &Run,
    window: &Window,
    rows: &[usize],
    baseline_rows: &[usize],
    method: Method,
    horizon_ns: u64,
    rules: &Rules,
) -> WindowReport {
    let (printing, reading) = (rules.printing, rules.streams);
    let requests = &run.requests;
    let scheduled = rows.len() as u64;
    let mut outcomes = count_outcomes(requests, rows.iter().copied());
    let planned = rules.abandoned == percentes_formats::spec::AbandonReading::Planned;
    if planned {
        super::rows::abandoned_apart(requests, rows, &mut outcomes);
    }
    let mut classes = std::collections::BTreeMap::new();
    for &row in rows {
        if requests.outcome(row).is_some() {
            let code = requests.class[row];
            let name = class_name(code).map_or_else(|| format!("class-{code}"), str::to_owned);
            *classes.entry(name).or_insert(0u64) += 1;
        }
    }
    let share = |count: u64, label| Share {
        value: (scheduled > 0).then(|| count as f64 / scheduled as f64),
        n: scheduled,
        label,
    };
    let duration_s = seconds(window.duration_ns());
    // One statistic at a time, each dropping its per-request vectors before the next allocates
    // its own: a window can hold every request of a long run, and the peak is the largest of
    // these, not their sum (BENCHMARKS.md, "Where the memory goes"). A spilled table's pages
    // are handed back between them for the same reason (`Requests::release`).
    requests.release();
    let completion = curve_report(
        requests,
        rows,
        method,
        (horizon_ns, printing, rules.curve_budget, duration_s),
    );
    requests.release();
    // A4: the tails read their samples in intended-time order (§7); nothing else needs an order.
    let ordered = match rules.tails {
        TailSample::Effective => in_intended_order(requests, rows),
        TailSample::Independent => std::borrow::Cow::Borrowed(rows),
    };
    let rows: &[usize] = &ordered;
    let ttft: Vec<u64> = rows
        .iter()
        .filter_map(|&r| ttft_ns(requests, r, reading))
        .collect();
    let e2e: Vec<u64> = rows.iter().filter_map(|&r| e2e_ns(requests, r)).collect();
    requests.release();
    // Parallel: both are the completed rows, in row order.
    let completions = slo::Completions {
        scheduled: rows.len(),
        ttft_ns: &ttft,
        e2e_ns: &e2e,
    };
    let (ttft_thresholds, e2e_thresholds) = slo::sweep_thresholds_ns();
    let sweep = slo::sweep(completions);
    let mut goodput_sweep = Vec::new();
    for (i, ttft) in ttft_thresholds.iter().enumerate() {
        for (j, e2e) in e2e_thresholds.iter().enumerate() {
            goodput_sweep.push(SweepCell {
                ttft_ms: ttft / 1_000_000,
                e2e_ms: e2e / 1_000_000,
                goodput: sweep[i][j],
                n: scheduled,
            });
        }
    }
    let met = completions.met(Slo::pinned()) as u64;
    let failed_share = (outcomes.errored + outcomes.censored) as f64 / scheduled.max(1) as f64;
    let caveat = (failed_share > pins::value::ANALYSIS_CONDITIONAL_CAVEAT_FRACTION).then(|| {
        format!(
            "{:.4} of this window's scheduled requests errored or were censored (above 0.05, §3): every completed-only percentile describes the requests that completed, not the requests that were scheduled; read it beside the completion curve",
            failed_share
        )
    });
    let modal_distance = if window.kind == Kind::Fault {
        let base_ttft: Vec<u64> = baseline_rows
            .iter()
            .filter_map(|&r| ttft_ns(requests, r, reading))
            .collect();
        let base_e2e: Vec<u64> = baseline_rows
            .iter()
            .filter_map(|&r| e2e_ns(requests, r))
            .collect();
        let slo = Slo::pinned();
        vec![
            modal("ttft", &base_ttft, &ttft, slo.ttft_ns),
            modal("e2e", &base_e2e, &e2e, slo.e2e_ns),
        ]
    } else {
        Vec::new()
    };
    let mut ttft = distribution_of(ttft, None, rules.tails);
    let mut e2e = distribution_of(e2e, None, rules.tails);
    let mut tokens =
        super::tokens::token_report(requests, rows, duration_s, (reading, rules.tails));
    if rules.refusals == RefusalWords::WhatPublishes {
        for d in [&mut ttft, &mut e2e, &mut tokens.tpot] {
            super::distribution::say_what_publishes(d, duration_s);
        }
    }
    requests.release();
    let routes = route_segments(run, rows);
    requests.release();
    WindowReport {
        window: window.kind.name(),
        start_s: seconds(window.start_ns),
        end_s: seconds(window.end_ns),
        scheduled,
        error_rate: share(outcomes.errored, "over all scheduled requests"),
        censored_rate: share(outcomes.censored, "over all scheduled requests"),
        throughput_rps: Share {
            value: (duration_s > 0.0).then(|| outcomes.completed as f64 / duration_s),
            n: outcomes.completed,
            label: "completions per second of intended time",
        },
        goodput: share(
            met,
            "SLO goodput over all scheduled requests (TTFT <= 1000 ms and e2e <= 14 s, §4)",
        ),
        goodput_sweep,
        completion,
        ttft,
        e2e,
        inter_chunk: Distribution {
            // Filled by the caller from the journal's gaps (a second pass, see `inter_chunk`).
            ..distribution(&[], None)
        },
        inter_chunk_at_floor: None,
        tokens,
        caveat,
        modal_distance,
        routes,
        receive_path: receive_path(run, window),
        outcomes,
        classes,
        // A4: what the streams carried; their deliveries come from the caller's second pass.
        streams: (reading == StreamReading::EveryDelta).then(|| {
            super::streams::figures(
                requests,
                rows,
                &super::streams::Delivered::default(),
                0.0,
                rules.tails,
            )
        }),
        // A4: the first token's path; its first deliveries come from the same second pass.
        first_token_path: None,
        // A4: the goodputs' intervals and the declared SLO's, from the caller (the longest gap
        // an objective may bound comes from the same second pass).
        goodput_interval: None,
        declared_goodput: None,
        abandonment: planned
            .then(|| super::rows::abandonment(run, rows))
            .flatten(),
        prefix_reuse: (rules.prefix_cache == percentes_formats::spec::PrefixCacheReading::HitShare)
            .then(|| crate::load::prefixes::designed(run, rows.iter().copied(), None))
            .flatten(),
    }
}

/// The share of a window's pooled inter-chunk gaps at the 1 us floor (§3).
pub(super) fn floor_share(gaps: Option<&LatencyHistogram>) -> Share {
    let n = gaps.map_or(0, LatencyHistogram::len);
    Share {
        value: gaps
            .filter(|_| n > 0)
            .map(|h| h.at_floor() as f64 / n as f64),
        n,
        label: INTER_CHUNK_FLOOR,
    }
}

/// The receive-path check over one window: the canary seconds that overlap it.
pub(super) fn receive_path(run: &Run, window: &Window) -> ReceivePath {
    let overlapping: Vec<_> = run
        .events
        .all(EventKind::Canary)
        .filter_map(|e| Some((e.at_ns, canary_reading(e)?)))
        .filter(|(at, (_, _, _, interval))| {
            *at > window.start_ns && at.saturating_sub(*interval) < window.end_ns
        })
        .map(|(_, r)| r)
        .collect();
    let samples: u64 = overlapping.iter().map(|r| r.1).sum();
    let p99 = overlapping.iter().map(|r| r.0).max();
    let max = overlapping.iter().map(|r| r.2).max();
    let us = |ns: u64| ns as f64 / 1e3;
    let text = match (p99, max) {
        (Some(p99), Some(max)) => format!(
            "loopback canary: the read loop saw events of known timing at most {} late (highest per-second p99 {}; {samples} events over {} s). First-token and inter-token times here are taken when the read loop sees them, so they may be late by as much",
            duration_text(max),
            duration_text(p99),
            overlapping.len()
        ),
        _ if !run
            .events
            .all(EventKind::Canary)
            .any(|e| canary_reading(e).is_some()) => "no loopback canary in this journal (recorded with --no-canary, or by a recorder without one): the read loop's lag is not bounded here".into(),
        _ => "no loopback canary second overlaps this window".into(),
    };
    ReceivePath {
        canary_seconds: overlapping.len() as u64,
        canary_samples: samples,
        canary_p99_max_us: p99.map(us),
        canary_max_us: max.map(us),
        text,
    }
}

/// A lag in the unit that reads best: us below 1 ms, ms otherwise.
pub(super) fn duration_text(ns: u64) -> String {
    if ns < 1_000_000 {
        format!("{:.0} us", ns as f64 / 1e3)
    } else {
        format!("{:.3} ms", ns as f64 / 1e6)
    }
}

/// The rows of a window split by route, when there is more than one route.
pub(super) fn route_segments(run: &Run, rows: &[usize]) -> Vec<RouteSegment> {
    let routes = &run.config.routes;
    if routes.len() < 2 {
        return Vec::new();
    }
    let requests = &run.requests;
    // The same grouping `analyze --by route` uses; every configured route is listed, an idle one
    // with nothing scheduled (labels are unique: the configuration refuses a repeated one).
    let mut groups = super::columns::group(run, rows, &[crate::model::SegmentColumn::Route]);
    routes
        .iter()
        .map(|route| {
            let mine = groups
                .remove(&vec![route.label.clone()])
                .unwrap_or_default();
            let outcomes = count_outcomes(requests, mine.iter().copied());
            let mut classes = std::collections::BTreeMap::new();
            let mut statuses = std::collections::BTreeMap::new();
            for &row in &mine {
                if requests.outcome(row).is_some() {
                    let code = requests.class[row];
                    let name =
                        class_name(code).map_or_else(|| format!("class-{code}"), str::to_owned);
                    *classes.entry(name).or_insert(0u64) += 1;
                }
                if requests.http_status[row] != 0 {
                    *statuses.entry(requests.http_status[row]).or_insert(0u64) += 1;
                }
            }
            let mut e2e_us: Vec<u64> = mine
                .iter()
                .filter_map(|&r| e2e_ns(requests, r))
                .map(crate::estimate::histogram::ns_to_us)
                .collect();
            e2e_us.sort_unstable();
            let scheduled = mine.len() as u64;
            RouteSegment {
                route: route.label.clone(),
                scheduled,
                error_rate: (scheduled > 0).then(|| outcomes.errored as f64 / scheduled as f64),
                e2e_p95_us: nearest_rank(&e2e_us, 0.95),
                e2e_p99_us: nearest_rank(&e2e_us, 0.99),
                outcomes,
                classes,
                statuses,
            }
        })
        .collect()
}

pub(super) fn modal(
    latency: &'static str,
    baseline: &[u64],
    fault: &[u64],
    threshold_ns: u64,
) -> ModalDistance {
    let ms = |ns: f64| (ns / 1e6 * 1000.0).round() / 1000.0;
    match slo::modal_distance(baseline, fault, threshold_ns) {
        Distance::StandardDeviations {
            mode_ns,
            sd_ns,
            distance,
        } => ModalDistance {
            latency,
            threshold_ms: threshold_ns / 1_000_000,
            mode_ms: Some(ms(mode_ns as f64)),
            baseline_sd_ms: Some(ms(sd_ns)),
            distance: if distance.is_infinite() {
                if distance > 0.0 {
                    "+inf".into()
                } else {
                    "-inf".into()
                }
            } else {
                format!("{distance:.3}")
            },
        },
        Distance::InsufficientCompletedSamples => ModalDistance {
            latency,
            threshold_ms: threshold_ns / 1_000_000,
            mode_ms: None,
            baseline_sd_ms: None,
            distance: "insufficient completed samples".into(),
        },
    }
}

pub(super) fn curve_report(
    requests: &Requests,
    rows: &[usize],
    method: Method,
    (horizon_ns, printing, budget, duration_s): (u64, Printing, CurveBudget, f64),
) -> CurveReport {
    let observations: Vec<Observation> = rows
        .iter()
        .filter_map(|&row| {
            let fate = match requests.outcome(row)? {
                Outcome::Completed => Fate::Completed,
                Outcome::Errored => Fate::Errored,
                Outcome::Censored => Fate::Censored,
                Outcome::Undispatched => return None,
            };
            Some(Observation {
                time_ns: requests.terminal_ns[row].saturating_sub(requests.intended_ns[row]),
                fate,
            })
        })
        .collect();
    let tolerance = pins::value::ANALYSIS_CROSSING_TOLERANCE;
    // Only the steps the readings, the grid and the 1 s share below consult are kept: the same
    // numbers as the whole curve, without a step per request held (the estimator's doc).
    let crossings: Vec<f64> = QUANTILES.iter().map(|&q| q - tolerance).collect();
    let mut times: Vec<u64> = (1..=CURVE_GRID_POINTS)
        .map(|k| horizon_ns / CURVE_GRID_POINTS * k)
        .collect();
    times.push(1_000_000_000);
    let curve = CompletionCurve::estimate_thinned(observations, method, &crossings, &times);
    let readings = QUANTILES
        .iter()
        .map(|&q| {
            let reading = quantile::read(&curve, q, horizon_ns, tolerance);
            let (kind, seconds_at) = match reading {
                quantile::Reading::At { time_ns } => ("at", Some(seconds(time_ns))),
                quantile::Reading::AboveHorizon { .. } => ("above-horizon", None),
                quantile::Reading::Unattainable { .. } => ("unattainable", None),
            };
            let name = quantile::name(q);
            let need = crate::estimate::tails::smallest_n(q);
            // A4: a tail reading keeps §7's sample budget, as the completed-only tails do. Only
            // a number is refused: "unattainable" and "above the horizon" publish none, and say
            // more than the budget's refusal would.
            if budget == CurveBudget::TailBudget
                && seconds_at.is_some()
                && TAIL_QUANTILES.contains(&q)
                && curve.n < need
            {
                // What would publish it: the window's scheduled rate reaching the budget.
                let per_s = curve.n as f64 / duration_s;
                let how_long = if per_s > 0.0 && per_s.is_finite() {
                    format!(
                        ", some {:.0} s of this window's {per_s:.2} scheduled a second",
                        need as f64 / per_s
                    )
                } else {
                    String::new()
                };
                return Reading {
                    text: format!(
                        "{name} refused (sample budget insufficient, §7): a {name} of the curve needs {need} scheduled requests in the window, it has {}{how_long}",
                        curve.n
                    ),
                    quantile: name,
                    kind: "refused",
                    seconds: None,
                };
            }
            Reading {
                quantile: name,
                kind,
                seconds: seconds_at,
                text: quantile::render_as(q, reading, horizon_ns, printing),
            }
        })
        .collect();
    let grid = (1..=CURVE_GRID_POINTS)
        .map(|k| {
            let t = horizon_ns / CURVE_GRID_POINTS * k;
            let at_risk = curve
                .steps
                .iter()
                .find(|s| s.time_ns > t)
                .map_or(0, |s| s.at_risk);
            CurvePoint {
                t_s: seconds(t),
                incidence: curve.at(t),
                at_risk,
            }
        })
        .collect();
    CurveReport {
        method: match (method, printing) {
            (Method::AalenJohansen, Printing::Archived) => "Aalen-Johansen (v0.2)",
            // The same estimator; under v0.3 the label names the amendment that chose it, so a
            // v0.3 report does not appear to cite v0.2.
            (Method::AalenJohansen, Printing::Honest | Printing::Resolved) => "Aalen-Johansen (A1)",
            (Method::KaplanMeierErrorsCensored, _) => "Kaplan-Meier, errors censored (v0.1)",
        },
        label: "over all scheduled requests of the window (undispatched excluded)",
        n: curve.n,
        horizon_s: seconds(horizon_ns),
        final_incidence: curve.final_incidence(),
        ceiling: curve.ceiling(),
        within_1s: curve.at(1_000_000_000),
        readings,
        grid,
    }
}

/// The requests in flight at `fired_ns` (dispatched at or before it, terminal at or after it: a
/// request reset at the fire instant was in flight when it fired).
pub(super) fn in_flight_at(run: &Run, fired_ns: u64, lost: LostInFlight) -> InFlight {
    let requests = &run.requests;
    let victim = run.config.fault.victim.clone().unwrap_or_default();
    let in_flight: Vec<usize> = (0..requests.len())
        .filter(|&row| {
            let d = requests.dispatched_ns[row];
            d != NONE && d <= fired_ns && requests.terminal_ns[row] >= fired_ns
        })
        .collect();
    let on = |pred: &dyn Fn(Option<&str>) -> bool| {
        count_outcomes(
            requests,
            in_flight
                .iter()
                .copied()
                .filter(|&row| pred(requests.replica_name(row))),
        )
    };
    InFlight {
        fired_s: seconds(fired_ns),
        on_victim: on(&|r| r == Some(victim.as_str())),
        on_survivors: on(&|r| r.is_some_and(|r| r != victim)),
        unattributed: on(&|r| r.is_none()),
        on_lost: (lost == LostInFlight::AttributedOrUnanswered)
            .then(|| on(&|r| r.is_none_or(|r| r == victim))),
        victim,
        note: "requests dispatched at or before the recorded fire and terminal at or after it; a request is attributed to the replica named by its response header".into(),
    }
}
