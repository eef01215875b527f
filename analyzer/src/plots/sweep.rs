//! The load sweep's plots (`sweep-latency.svg`, `sweep-goodput.svg`, `sweep-tradeoff.svg`):
//! latency and the outcome shares against offered rate, and latency against the throughput
//! achieved (the curve vLLM's and guidellm's benchmarks draw), a dot at each rate swept, invalid
//! rates marked.

use super::{round_up, Frame};

/// A load sweep's latencies against offered rate (`sweep-latency.svg`): TTFT, TPOT and
/// end-to-end p50 (solid) and p99 (dashed, only where its interval publishes it) of each rate
/// with statistics; a rate whose recording
/// failed a gate is marked (and drawn only when the sweep was asked for a diagnosis).
pub fn sweep_latency(sweep: &crate::sweep::Sweep) -> String {
    let colours = [("ttft", "#1f77b4"), ("tpot", "#2ca02c"), ("e2e", "#d62728")];
    let series = |metric: &str, p99: bool| -> Vec<(f64, f64)> {
        sweep
            .points
            .iter()
            .filter_map(|p| {
                let l = p.latency.iter().find(|l| l.metric == metric && l.n > 0)?;
                // A refused p99 (no interval, §7) is not drawn as a point, as it is not printed.
                let us = if p99 {
                    l.p99_interval_us.and(l.p99_us)
                } else {
                    l.p50_us
                }?;
                Some((p.rate_rps, us as f64 / 1e3))
            })
            .collect()
    };
    let x = sweep_rates(sweep);
    // TPOT (milliseconds) and end-to-end (seconds) a thousand times apart: a log axis, so that
    // each reads (issue 54: on one linear axis TPOT lay flat along zero).
    let ys: Vec<f64> = colours
        .iter()
        .flat_map(|(m, _)| series(m, true).into_iter().chain(series(m, false)))
        .map(|(_, y)| y)
        .filter(|y| *y > 0.0)
        .collect();
    let y_min = ys.iter().copied().fold(f64::INFINITY, f64::min);
    let y_max = ys.iter().copied().fold(0.0, f64::max);
    let mut frame = Frame::log_y(
        "Latency against offered load (completed requests, measurement window)",
        "offered rate (requests/s)",
        "latency (log scale)",
        x,
        if ys.is_empty() {
            (1.0, 10.0)
        } else {
            (y_min, y_max)
        },
    );
    let mut legend = Vec::new();
    for (metric, colour) in colours {
        for p99 in [false, true] {
            let points = series(metric, p99);
            if points.is_empty() {
                continue;
            }
            frame.polyline(&points, colour, p99);
            frame.markers(&points, colour);
            legend.push((
                format!("{metric} {}", if p99 { "p99" } else { "p50" }),
                colour,
                p99,
            ));
        }
    }
    mark_invalid(&mut frame, sweep);
    frame.legend_styled(&legend);
    frame.caption(
        "p99 dashed; a dot at each rate swept, each one recording (sweep.md gives the intervals and refusals)",
    );
    frame.finish()
}

/// A grey line at each invalid point's rate, saying what of it may be read.
fn mark_invalid(frame: &mut Frame, sweep: &crate::sweep::Sweep) {
    for (row, p) in sweep.points.iter().filter(|p| !p.valid).enumerate() {
        let label = if p.latency.is_empty() {
            "invalid: nothing published"
        } else {
            "invalid: diagnosis only"
        };
        frame.vline(p.rate_rps, "#888", label, row);
    }
}

fn sweep_rates(sweep: &crate::sweep::Sweep) -> (f64, f64) {
    let highest = sweep.points.iter().map(|p| p.rate_rps).fold(0.0, f64::max);
    (0.0, highest)
}

/// A load sweep's goodput and error rate against offered rate (`sweep-goodput.svg`).
pub fn sweep_goodput(sweep: &crate::sweep::Sweep) -> String {
    let series = |read: fn(&crate::sweep::Point) -> Option<f64>| -> Vec<(f64, f64)> {
        sweep
            .points
            .iter()
            .filter_map(|p| Some((p.rate_rps, read(p)?)))
            .collect()
    };
    let x = sweep_rates(sweep);
    let mut frame = Frame::new(
        "Goodput and failures against offered load",
        "offered rate (requests/s)",
        "share of scheduled requests",
        x,
        (0.0, 1.0),
    );
    for (share, colour, dash) in [
        (series(|p| p.goodput), "#2ca02c", false),
        (series(|p| p.error_rate), "#d62728", false),
        (series(|p| p.censored_rate), "#9467bd", true),
    ] {
        frame.polyline(&share, colour, dash);
        frame.markers(&share, colour);
    }
    mark_invalid(&mut frame, sweep);
    frame.legend_styled(&[
        ("goodput".into(), "#2ca02c", false),
        ("errored".into(), "#d62728", false),
        ("censored".into(), "#9467bd", true),
    ]);
    frame.finish()
}

/// Latency against the throughput achieved (`sweep-tradeoff.svg`): each valid rate's TTFT and
/// end-to-end p50 at its completions per second, so the knee where latency climbs while
/// throughput stops growing shows as it does in vLLM's and guidellm's plots. Only rates whose
/// statistics are published are drawn.
pub fn sweep_tradeoff(sweep: &crate::sweep::Sweep) -> String {
    let colours = [("ttft", "#1f77b4"), ("e2e", "#d62728")];
    let series = |metric: &str| -> Vec<(f64, f64)> {
        sweep
            .points
            .iter()
            .filter(|p| p.valid)
            .filter_map(|p| {
                let l = p.latency.iter().find(|l| l.metric == metric && l.n > 0)?;
                Some((p.throughput_rps?, l.p50_us? as f64 / 1e3))
            })
            .collect()
    };
    let x_max = colours
        .iter()
        .flat_map(|(m, _)| series(m))
        .map(|(x, _)| x)
        .fold(0.0, f64::max);
    let y_max = colours
        .iter()
        .flat_map(|(m, _)| series(m))
        .map(|(_, y)| y)
        .fold(0.0, f64::max);
    let mut frame = Frame::new(
        "Latency against throughput achieved (valid rates)",
        "completions per second (measurement window)",
        "p50 latency (ms)",
        (0.0, round_up(x_max * 1.05)),
        (0.0, round_up(y_max * 1.1)),
    );
    let mut legend = Vec::new();
    for (metric, colour) in colours {
        let points = series(metric);
        if points.is_empty() {
            continue;
        }
        frame.polyline(&points, colour, false);
        frame.markers(&points, colour);
        legend.push((format!("{metric} p50"), colour, false));
    }
    frame.legend_styled(&legend);
    frame.caption("a dot at each valid rate swept, in the order swept; an invalid rate publishes nothing and is left out");
    frame.finish()
}
