//! The plots an LLM-serving reader looks for first (issue 37 item 6), beside the completion
//! curve and the latency scatter:
//!
//! - `ttft-distribution.svg`, `itl-distribution.svg`, `e2e-distribution.svg`: per window, the
//!   share of completed requests (of pooled gaps, for inter-token latency per token) at or below
//!   each latency, on a logarithmic axis, read from the report's own histograms, so a long tail
//!   and a fast body show in one picture.
//! - `ttft-over-time.svg` and `tokens-over-time.svg`: TTFT p50 and p99 by intended send time,
//!   and output tokens per second by completion time, each per time bucket, with the windows
//!   shaded and the fault's fire anchor and recovery marked.
//!
//! A plot with nothing to draw is a short note saying why, never an empty frame.

use std::fmt::Write as _;

use percentes_formats::journal::records::Outcome;
use percentes_formats::spec::StreamReading;

use super::{colour, escape, Frame, HEIGHT, LEFT, WIDTH};
use crate::estimate::histogram::LatencyHistogram;
use crate::frame::Requests;
use crate::model::{Distribution, Report};

/// Most points one distribution curve draws (every k-th recorded bucket above it, and the last).
const CURVE_POINTS_MAX: usize = 400;
/// Most buckets an over-time plot draws.
const TIME_BUCKETS_MAX: f64 = 150.0;

/// An SVG that says why a plot is not drawn (§9: a refusal is printed, never left blank).
pub(super) fn note(title: &str, why: &str) -> String {
    let height = 90.0;
    let mut svg = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {WIDTH} {height}\" width=\"{WIDTH}\" height=\"{height}\" font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n<text x=\"{LEFT}\" y=\"22\" font-size=\"14\" font-weight=\"bold\">{}</text>\n",
        escape(title)
    );
    for (i, line) in super::scale::wrap(why, super::CAPTION_CHARS_MAX)
        .iter()
        .enumerate()
    {
        let _ = writeln!(
            svg,
            "<text x=\"{LEFT}\" y=\"{}\" fill=\"#555\">not drawn: {}</text>",
            46 + 16 * i,
            escape(line)
        );
    }
    svg.push_str("</svg>\n");
    debug_assert!(HEIGHT > height);
    svg
}

/// The (latency s, share at or below) points of one histogram, at most [`CURVE_POINTS_MAX`].
fn cdf(histogram: &LatencyHistogram) -> Vec<(f64, f64)> {
    let points: Vec<(f64, f64)> = histogram
        .inner()
        .iter_recorded()
        .map(|v| (v.value_iterated_to().max(1) as f64 / 1e6, v.quantile()))
        .collect();
    let step = points.len().div_ceil(CURVE_POINTS_MAX).max(1);
    let mut out: Vec<(f64, f64)> = points.iter().copied().step_by(step).collect();
    if let (Some(&last), Some(&drawn)) = (points.last(), out.last())
        && last != drawn
    {
        out.push(last);
    }
    // A step curve: flat to each next value, then up.
    let mut steps = Vec::with_capacity(out.len() * 2);
    let mut level = 0.0;
    for (x, y) in out {
        steps.push((x, level));
        steps.push((x, y));
        level = y;
    }
    steps
}

/// One latency's distribution per window on a log axis; `name` is `ttft`, `itl` or `e2e`.
pub(super) fn distribution(report: &Report, name: &str) -> (&'static str, String) {
    type Pick = fn(&crate::model::WindowReport) -> &Distribution;
    let (file, title, pick): (&'static str, &str, Pick) = match name {
        "ttft" => ("ttft-distribution.svg", "Time to first token", |w| &w.ttft),
        "itl" if report.rules.streams == StreamReading::EveryDelta => (
            "itl-distribution.svg",
            "Inter-token latency, per delivery (pooled gaps)",
            |w| &w.inter_chunk,
        ),
        "itl" => (
            "itl-distribution.svg",
            "Inter-token latency, per token (pooled gaps)",
            |w| w.tokens.itl_per_token.as_ref().unwrap_or(&w.inter_chunk),
        ),
        _ => ("e2e-distribution.svg", "End-to-end latency", |w| &w.e2e),
    };
    type Curve<'a> = (&'a str, u64, Vec<(f64, f64)>);
    let curves: Vec<Curve<'_>> = report
        .windows
        .iter()
        .filter(|w| w.window != "warm-up")
        .filter_map(|w| {
            let d = pick(w);
            let h = d.histogram.as_ref().filter(|h| !h.is_empty())?;
            Some((w.window, d.n, cdf(h)))
        })
        .collect();
    if curves.is_empty() {
        let why = report.windows_withheld.clone().unwrap_or_else(|| {
            format!("no completed request carries a {title} sample in a measured window")
        });
        return (file, note(title, &why));
    }
    let xs = curves.iter().flat_map(|(_, _, c)| c.iter().map(|p| p.0));
    let (low, high) = xs.fold((f64::MAX, 0.0f64), |(lo, hi), x| (lo.min(x), hi.max(x)));
    let mut frame = Frame::log_x(
        &format!("{title}, share at or below, per window"),
        "latency (log scale)",
        "share of completed requests",
        (low, high),
        (0.0, 1.0),
    );
    frame.caption(&format!(
        "conditional on completion (the completion curve counts every scheduled request); read from the report's histograms, three significant figures; the warm-up is left out{}",
        if name == "itl" {
            "; a gap at 1 µs is the floor: events the recorder read together, whose gap it cannot resolve (§3)"
        } else {
            ""
        }
    ));
    let mut legend = Vec::new();
    for (window, n, points) in &curves {
        frame.polyline(points, colour(window), false);
        legend.push((format!("{window} (n {n})"), colour(window)));
    }
    frame.legend(&legend);
    (file, frame.finish())
}

/// The bucket width an over-time plot uses: the smallest 1-2-5 multiple of 0.01 s that keeps
/// the run to at most [`TIME_BUCKETS_MAX`] buckets.
fn bucket_s(end_s: f64) -> f64 {
    let mut decade = 0.01;
    loop {
        for k in [1.0, 2.0, 5.0] {
            if end_s / (k * decade) <= TIME_BUCKETS_MAX {
                return k * decade;
            }
        }
        decade *= 10.0;
    }
}

/// Windows shaded (their key below the legend's `legend_rows` rows), the fire anchor and the
/// recovery marked.
fn timeline_marks(frame: &mut Frame, report: &Report, legend_rows: usize) {
    for w in &report.timeline.windows {
        frame.band(w.start_s, w.end_s, colour(w.window), 0.06);
    }
    let windows: Vec<&str> = report.timeline.windows.iter().map(|w| w.window).collect();
    frame.swatches(&windows, legend_rows + 1);
    let mut row = 0;
    if let Some(at) = report.timeline.fire_anchor_s {
        frame.vline(at, "#d62728", "fire anchor", row);
        row += 1;
    }
    if let Some(at) = report.timeline.recovered_s {
        frame.vline(at, "#2ca02c", "recovered", row);
    }
}

/// An over-time plot's span: the run's end (s) and its bucket width; or the sentence that says
/// why there is nothing to draw (the report's own for withheld statistics, or no window).
fn span(report: &Report) -> Result<(f64, f64), &str> {
    let end = report.timeline.windows.last().map_or(0.0, |w| w.end_s);
    if report.windows.is_empty() || end <= 0.0 {
        return Err(report
            .windows_withheld
            .as_deref()
            .unwrap_or("the run has no window"));
    }
    Ok((end, bucket_s(end)))
}

/// TTFT p50 and p99 (nearest rank) of the completed requests per bucket of intended time.
pub(super) fn ttft_over_time(report: &Report, requests: &Requests) -> String {
    let title = "Time to first token over the run";
    let (end, width) = match span(report) {
        Ok(span) => span,
        Err(why) => return note(title, why),
    };
    let buckets = (end / width).ceil() as usize;
    let mut per: Vec<Vec<u64>> = vec![Vec::new(); buckets.max(1)];
    for row in 0..requests.len() {
        if requests.outcome(row) != Some(Outcome::Completed) {
            continue;
        }
        let first = requests.first_token_ns(row, report.rules.streams);
        let t = requests.intended_ns[row] as f64 / 1e9;
        let i = ((t / width) as usize).min(per.len() - 1);
        per[i].push(first.saturating_sub(requests.intended_ns[row]));
    }
    let mut p50 = Vec::new();
    let mut p99 = Vec::new();
    for (i, v) in per.iter_mut().enumerate() {
        v.sort_unstable();
        let at =
            |q: f64| v[((q * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1] as f64 / 1e9;
        if !v.is_empty() {
            let x = (i as f64 + 0.5) * width;
            p50.push((x, at(0.5)));
            p99.push((x, at(0.99)));
        }
    }
    if p50.is_empty() {
        return note(title, "no request completed");
    }
    let top = p99.iter().map(|p| p.1).fold(0.0f64, f64::max).max(1e-3) * 1.05;
    let mut frame = Frame::new(
        title,
        "intended send time (s)",
        "TTFT from t_i (s)",
        (0.0, end),
        (0.0, top),
    );
    frame.caption(&format!("completed requests by intended send time, p50 and p99 (nearest rank) per {} s bucket; a bucket's p99 over a few requests is its slowest; windows shaded", super::scale::tick(width)));
    timeline_marks(&mut frame, report, 2);
    frame.polyline(&p50, "#1f77b4", false);
    frame.polyline(&p99, "#d62728", true);
    frame.legend_styled(&[
        ("p50".into(), "#1f77b4", false),
        ("p99".into(), "#d62728", true),
    ]);
    frame.finish()
}

/// Adds `count` to the buckets of `width` seconds that `(from, to)` covers, each its share of
/// the stretch (all of it to `to`'s bucket when the stretch is empty); the last bucket holds
/// whatever lies past the end.
fn spread(buckets: &mut [f64], width: f64, (from, to): (f64, f64), count: f64) {
    let Some(last) = buckets.len().checked_sub(1) else {
        return;
    };
    let index = |t: f64| ((t / width).max(0.0) as usize).min(last);
    let (a, b) = (index(from), index(to));
    if a == b || to <= from {
        buckets[b] += count;
        return;
    }
    for (i, bucket) in buckets.iter_mut().enumerate().take(b + 1).skip(a) {
        let (lo, hi) = (i as f64 * width, (i + 1) as f64 * width);
        let hi = if i == last { f64::INFINITY } else { hi };
        *bucket += count * (hi.min(to) - lo.max(from)).max(0.0) / (to - from);
    }
}

/// Output tokens per second over the run, from each response's usage spread over the time it
/// generated them.
pub(super) fn tokens_over_time(report: &Report, requests: &Requests) -> String {
    let title = "Output tokens per second over the run";
    let (end, width) = match span(report) {
        Ok(span) => span,
        Err(why) => return note(title, why),
    };
    // Each response's tokens spread evenly over the stretch it generated them in, its first
    // token to its end: counted all at its end, a 0.5 s bucket read 0 or 5,600 tokens/s by
    // whether a response happened to finish in it (issue 54).
    let mut tokens = vec![0f64; (end / width).ceil() as usize + 1];
    let mut with_usage = 0u64;
    for row in 0..requests.len() {
        let count = requests.usage_completion_tokens[row];
        if requests.outcome(row) != Some(Outcome::Completed) || count == u32::MAX {
            continue;
        }
        with_usage += 1;
        let to = requests.terminal_ns[row] as f64 / 1e9;
        let from = (requests.first_token_ns(row, report.rules.streams) as f64 / 1e9).min(to);
        spread(&mut tokens, width, (from, to), f64::from(count));
    }
    if with_usage == 0 {
        return note(title, "no completed response reported its token usage (target.include_usage asks a stream for it)");
    }
    let points: Vec<(f64, f64)> = tokens
        .iter()
        .enumerate()
        .map(|(i, &n)| ((i as f64 + 0.5) * width, n / width))
        .collect();
    let top = points.iter().map(|p| p.1).fold(0.0f64, f64::max).max(1.0) * 1.05;
    let right = points.last().map_or(end, |p| p.0.max(end));
    let mut frame = Frame::new(
        title,
        "time of the run (s)",
        "output tokens per second",
        (0.0, right),
        (0.0, top),
    );
    frame.caption(&format!("completion tokens of the {with_usage} completed responses with usage, each spread over its first token to its end, per {} s bucket; windows shaded by intended time", super::scale::tick(width)));
    timeline_marks(&mut frame, report, 1);
    frame.polyline(&points, "#1f77b4", false);
    frame.legend(&[("output tokens/s".into(), "#1f77b4")]);
    frame.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// By hand: 100 tokens generated from 0.25 s to 1.25 s, buckets of 0.5 s: a quarter, a
    /// half and a quarter. An empty stretch puts everything in its end's bucket; a stretch past
    /// the last bucket ends there.
    #[test]
    fn a_responses_tokens_spread_over_the_stretch_that_generated_them() {
        let mut b = vec![0.0; 4];
        spread(&mut b, 0.5, (0.25, 1.25), 100.0);
        assert_eq!(b, [25.0, 50.0, 25.0, 0.0]);
        spread(&mut b, 0.5, (1.6, 1.6), 10.0);
        assert_eq!(b[3], 10.0);
        let mut c = vec![0.0; 2];
        spread(&mut c, 0.5, (0.5, 2.0), 30.0);
        assert_eq!(c, [0.0, 30.0]);
        spread(&mut [], 0.5, (0.0, 1.0), 1.0);
    }
}
