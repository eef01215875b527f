//! Plots as plain SVG, and `report.html`: the report people would rather look at than read
//! (SPEC §9). No plotting dependency and no script: every file is a pure function of the report
//! (and, for the latency scatter, the run's rows), with fixed decimals, so it is as deterministic
//! as report.json.
//!
//! - `completion.svg`: the completion curve of every window, cumulative incidence against latency
//!   from t_i up to the horizon, with the spec version's method in the title.
//! - `goodput.svg` (fault runs): SLO-goodput per bucket over the run, the pre-fault baseline, the
//!   fire anchor, the removal, the detected recoveries and the plateau.
//! - `latency.svg`: end-to-end latency of completed requests by intended send time, errored and
//!   censored requests marked at their times, the windows shaded.

use std::fmt::Write as _;

use percentes_formats::journal::records::Outcome;

use crate::frame::Requests;
use crate::model::Report;

const WIDTH: f64 = 900.0;
const HEIGHT: f64 = 360.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 170.0;
const TOP: f64 = 40.0;
const BOTTOM: f64 = 50.0;
/// Most points the latency scatter draws per outcome; above it, every k-th request is drawn
/// (by index, so the choice is deterministic) and the caption says so.
const SCATTER_POINTS_MAX: usize = 4000;

/// Window colours, in the order windows appear.
const COLOURS: [&str; 7] = [
    "#9e9e9e", "#1f77b4", "#ff7f0e", "#d62728", "#2ca02c", "#8c564b", "#9467bd",
];

fn colour(window: &str) -> &'static str {
    match window {
        "warm-up" => COLOURS[0],
        "baseline" | "measurement" => COLOURS[1],
        "guard" => COLOURS[2],
        "fault" => COLOURS[3],
        "recovery" => COLOURS[4],
        "cooldown" => COLOURS[5],
        _ => COLOURS[6],
    }
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// A plot frame: axes, ticks and labels; maps data to pixels.
struct Frame {
    svg: String,
    x: (f64, f64),
    y: (f64, f64),
}

impl Frame {
    fn new(title: &str, x_label: &str, y_label: &str, x: (f64, f64), y: (f64, f64)) -> Frame {
        let x = if x.1 > x.0 { x } else { (x.0, x.0 + 1.0) };
        let y = if y.1 > y.0 { y } else { (y.0, y.0 + 1.0) };
        let mut svg = String::new();
        let _ = writeln!(
            svg,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {WIDTH} {HEIGHT}\" width=\"{WIDTH}\" height=\"{HEIGHT}\" font-family=\"sans-serif\" font-size=\"12\">"
        );
        let _ = writeln!(svg, "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>");
        let _ = writeln!(
            svg,
            "<text x=\"{LEFT}\" y=\"22\" font-size=\"14\" font-weight=\"bold\">{}</text>",
            escape(title)
        );
        let mut frame = Frame { svg, x, y };
        let (x0, y0, x1, y1) = (LEFT, HEIGHT - BOTTOM, WIDTH - RIGHT, TOP);
        let _ = writeln!(frame.svg, "<rect x=\"{x0}\" y=\"{y1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"none\" stroke=\"#444\"/>", x1 - x0, y0 - y1);
        for i in 0..=5 {
            let fx = x.0 + (x.1 - x.0) * f64::from(i) / 5.0;
            let fy = y.0 + (y.1 - y.0) * f64::from(i) / 5.0;
            let (px, py) = (frame.px(fx), frame.py(fy));
            let _ = writeln!(
                frame.svg,
                "<line x1=\"{px:.1}\" y1=\"{y0}\" x2=\"{px:.1}\" y2=\"{:.1}\" stroke=\"#444\"/>",
                y0 + 4.0
            );
            let _ = writeln!(
                frame.svg,
                "<text x=\"{px:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>",
                y0 + 17.0,
                tick(fx)
            );
            let _ = writeln!(
                frame.svg,
                "<line x1=\"{:.1}\" y1=\"{py:.1}\" x2=\"{x1}\" y2=\"{py:.1}\" stroke=\"#eee\"/>",
                x0
            );
            let _ = writeln!(
                frame.svg,
                "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
                x0 - 6.0,
                py + 4.0,
                tick(fy)
            );
        }
        let _ = writeln!(
            frame.svg,
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>",
            (x0 + x1) / 2.0,
            HEIGHT - 12.0,
            escape(x_label)
        );
        let _ = writeln!(
            frame.svg,
            "<text transform=\"translate(16 {:.1}) rotate(-90)\" text-anchor=\"middle\">{}</text>",
            (y0 + y1) / 2.0,
            escape(y_label)
        );
        frame
    }

    fn px(&self, x: f64) -> f64 {
        LEFT + (x - self.x.0) / (self.x.1 - self.x.0) * (WIDTH - RIGHT - LEFT)
    }

    fn py(&self, y: f64) -> f64 {
        (HEIGHT - BOTTOM) - (y - self.y.0) / (self.y.1 - self.y.0) * (HEIGHT - BOTTOM - TOP)
    }

    fn polyline(&mut self, points: &[(f64, f64)], stroke: &str, dash: bool) {
        if points.is_empty() {
            return;
        }
        let coords: Vec<String> = points
            .iter()
            .map(|&(x, y)| format!("{:.1},{:.1}", self.px(x), self.py(y)))
            .collect();
        let _ =
            writeln!(
            self.svg,
            "<polyline points=\"{}\" fill=\"none\" stroke=\"{stroke}\" stroke-width=\"1.6\"{}/>",
            coords.join(" "),
            if dash { " stroke-dasharray=\"5 4\"" } else { "" }
        );
    }

    fn vline(&mut self, x: f64, stroke: &str, label: &str, row: usize) {
        let px = self.px(x);
        let _ = writeln!(self.svg, "<line x1=\"{px:.1}\" y1=\"{TOP}\" x2=\"{px:.1}\" y2=\"{:.1}\" stroke=\"{stroke}\" stroke-dasharray=\"3 3\"/>", HEIGHT - BOTTOM);
        let _ = writeln!(
            self.svg,
            "<text x=\"{:.1}\" y=\"{:.1}\" fill=\"{stroke}\" font-size=\"11\">{}</text>",
            px + 3.0,
            TOP + 12.0 + 13.0 * row as f64,
            escape(label)
        );
    }

    fn band(&mut self, from: f64, to: f64, fill: &str, opacity: f64) {
        let (a, b) = (self.px(from.max(self.x.0)), self.px(to.min(self.x.1)));
        if b > a {
            let _ = writeln!(self.svg, "<rect x=\"{a:.1}\" y=\"{TOP}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"{fill}\" fill-opacity=\"{opacity}\"/>", b - a, HEIGHT - BOTTOM - TOP);
        }
    }

    fn legend(&mut self, entries: &[(String, &str)]) {
        for (i, (label, stroke)) in entries.iter().enumerate() {
            let y = TOP + 8.0 + 18.0 * i as f64;
            let x = WIDTH - RIGHT + 12.0;
            let _ = writeln!(self.svg, "<line x1=\"{x}\" y1=\"{y}\" x2=\"{:.1}\" y2=\"{y}\" stroke=\"{stroke}\" stroke-width=\"3\"/>", x + 18.0);
            let _ = writeln!(
                self.svg,
                "<text x=\"{:.1}\" y=\"{:.1}\">{}</text>",
                x + 24.0,
                y + 4.0,
                escape(label)
            );
        }
    }

    fn caption(&mut self, text: &str) {
        let _ = writeln!(
            self.svg,
            "<text x=\"{LEFT}\" y=\"{:.1}\" font-size=\"11\" fill=\"#555\">{}</text>",
            TOP - 6.0,
            escape(text)
        );
    }

    fn finish(mut self) -> String {
        self.svg.push_str("</svg>\n");
        self.svg
    }
}

fn tick(v: f64) -> String {
    if v.abs() >= 100.0 || v == v.round() {
        format!("{v:.0}")
    } else if v.abs() >= 1.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// The completion curves of every window.
pub fn completion(report: &Report) -> String {
    let horizon = report
        .windows
        .first()
        .map_or(1.0, |w| w.completion.horizon_s);
    let method = report.windows.first().map_or("", |w| w.completion.method);
    let mut frame = Frame::new(
        &format!("Completion curve per window: {method}"),
        "latency from intended send time (s)",
        "share of scheduled requests completed",
        (0.0, horizon),
        (0.0, 1.0),
    );
    frame.caption("each curve is over all scheduled requests of its window; a plateau below 1 is what errors and censoring cost");
    let mut legend = Vec::new();
    for w in &report.windows {
        if w.completion.n == 0 {
            continue;
        }
        let mut points = vec![(0.0, 0.0)];
        let mut last = 0.0;
        for p in &w.completion.grid {
            points.push((p.t_s, last));
            points.push((p.t_s, p.incidence));
            last = p.incidence;
        }
        frame.polyline(&points, colour(w.window), false);
        legend.push((
            format!("{} (n {})", w.window, w.completion.n),
            colour(w.window),
        ));
    }
    frame.legend(&legend);
    frame.finish()
}

/// The goodput timeline of a fault run, `None` without one.
pub fn goodput(report: &Report) -> Option<String> {
    let r = report.recovery.as_ref()?;
    let end = r.series.last().map_or(1.0, |p| p.t_s + r.bucket_s);
    let mut frame = Frame::new(
        &format!(
            "SLO goodput per {:.3} s bucket by intended time ({})",
            r.bucket_s, r.variant
        ),
        "time of the run (s)",
        "SLO goodput",
        (0.0, end),
        (0.0, 1.05),
    );
    frame.caption(&format!(
        "pre-fault baseline dashed; recovery: {}; equilibrium: {}",
        r.to_pre_fault.text, r.to_equilibrium.text
    ));
    if r.equilibrium.estimable {
        frame.band(r.equilibrium.from_s, r.equilibrium.to_s, "#2ca02c", 0.12);
    }
    let points: Vec<(f64, f64)> = r
        .series
        .iter()
        .filter_map(|p| p.goodput.map(|g| (p.t_s + r.bucket_s / 2.0, g)))
        .collect();
    frame.polyline(&points, "#1f77b4", false);
    if let Some(base) = r.pre_fault_baseline.goodput {
        frame.polyline(&[(0.0, base), (end, base)], "#555", true);
    }
    if let Some(eq) = r.equilibrium.goodput {
        frame.polyline(
            &[(r.equilibrium.from_s, eq), (r.equilibrium.to_s, eq)],
            "#2ca02c",
            true,
        );
    }
    let mut row = 0;
    frame.vline(r.fire_anchor_s, "#d62728", "fire anchor", row);
    row += 1;
    if let Some(removing) = r
        .timeline
        .iter()
        .find(|s| s.state == "Recovering" && r.variant == "black-hole")
        .and_then(|s| s.from_s)
    {
        frame.vline(removing, "#ff7f0e", "removal", row);
        row += 1;
    }
    if let Some(at) = r.to_equilibrium.at_s {
        frame.vline(at, "#2ca02c", "equilibrium reached", row);
        row += 1;
    }
    if let Some(at) = r.to_pre_fault.at_s {
        frame.vline(at, "#9467bd", "recovered to pre-fault", row);
    }
    frame.legend(&[
        ("goodput".into(), "#1f77b4"),
        ("pre-fault baseline".into(), "#555"),
        ("plateau (equilibrium)".into(), "#2ca02c"),
    ]);
    Some(frame.finish())
}

/// End-to-end latency by intended send time; errored and censored requests marked.
pub fn latency(report: &Report, requests: &Requests) -> String {
    let end = report.timeline.windows.last().map_or(1.0, |w| w.end_s);
    let mut completed = Vec::new();
    let mut errored = Vec::new();
    let mut censored = Vec::new();
    for row in 0..requests.len() {
        let t = requests.intended_ns[row] as f64 / 1e9;
        let latency =
            requests.terminal_ns[row].saturating_sub(requests.intended_ns[row]) as f64 / 1e9;
        match requests.outcome(row) {
            Some(Outcome::Completed) => completed.push((t, latency)),
            Some(Outcome::Errored) => errored.push((t, latency)),
            Some(Outcome::Censored) => censored.push((t, latency)),
            _ => {}
        }
    }
    let top = completed
        .iter()
        .chain(&errored)
        .chain(&censored)
        .map(|p| p.1)
        .fold(0.0f64, f64::max)
        .max(0.001)
        * 1.05;
    let mut frame = Frame::new(
        "Latency by intended send time",
        "intended send time (s)",
        "time to the outcome from t_i (s)",
        (0.0, end),
        (0.0, top),
    );
    for w in &report.timeline.windows {
        frame.band(w.start_s, w.end_s, colour(w.window), 0.06);
    }
    let total = completed.len().max(errored.len()).max(censored.len());
    let step = total.div_ceil(SCATTER_POINTS_MAX).max(1);
    frame.caption(&if step > 1 {
        format!("every {step}th request of each outcome drawn ({total} at most per outcome); windows shaded")
    } else {
        "every request drawn; windows shaded".to_owned()
    });
    for (points, fill) in [
        (&completed, "#1f77b4"),
        (&errored, "#d62728"),
        (&censored, "#ff7f0e"),
    ] {
        for &(x, y) in points.iter().step_by(step) {
            let _ = writeln!(frame.svg, "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"1.6\" fill=\"{fill}\" fill-opacity=\"0.6\"/>", frame.px(x), frame.py(y));
        }
    }
    frame.legend(&[
        (format!("completed ({})", completed.len()), "#1f77b4"),
        (format!("errored ({})", errored.len()), "#d62728"),
        (format!("censored ({})", censored.len()), "#ff7f0e"),
    ]);
    frame.finish()
}

/// The SVG files for `report`: (file name, contents).
pub fn all(report: &Report, requests: &Requests) -> Vec<(&'static str, String)> {
    let mut out = Vec::new();
    if !report.windows.is_empty() {
        out.push(("completion.svg", completion(report)));
    }
    if let Some(svg) = goodput(report) {
        out.push(("goodput.svg", svg));
    }
    out.push(("latency.svg", latency(report, requests)));
    for (name, svg) in &mut out {
        stamp(svg, report, *name == "latency.svg");
    }
    out
}

/// Marks a plot of a report that may not be published (§9): every reason along its top edge,
/// and across the latency plot of an invalid run, a stamp that no reader can miss.
fn stamp(svg: &mut String, report: &Report, latency: bool) {
    if report.not_publishable.is_empty() {
        return;
    }
    let Some(end) = svg.rfind("</svg>") else {
        return;
    };
    let mut marks = String::new();
    for (i, why) in report.not_publishable.iter().enumerate() {
        let _ = writeln!(
            marks,
            "<text x=\"{LEFT}\" y=\"{}\" font-size=\"11\" fill=\"#a00\">{}</text>",
            40 + 13 * i,
            escape(why)
        );
    }
    if latency && !report.validity.valid {
        let _ = writeln!(
            marks,
            "<text x=\"{:.0}\" y=\"{:.0}\" font-size=\"40\" font-weight=\"bold\" fill=\"#a00\" fill-opacity=\"0.35\" text-anchor=\"middle\" transform=\"rotate(-20 {:.0} {:.0})\">INVALID RUN: NOT PUBLISHABLE</text>",
            WIDTH / 2.0,
            HEIGHT / 2.0,
            WIDTH / 2.0,
            HEIGHT / 2.0
        );
    }
    svg.insert_str(end, &marks);
}

/// `report.html`: report.md rendered, with the plots inline; self-contained (no script, no
/// network, no external file).
pub fn html(markdown: &str, plots: &[(&'static str, String)]) -> String {
    let mut out = String::new();
    out.push_str("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>percentes report</title>\n<style>\n");
    out.push_str("body{font-family:sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}\
table{border-collapse:collapse;margin:1em 0;font-size:13px}td,th{border:1px solid #ccc;padding:3px 6px;vertical-align:top}\
th{background:#f3f3f3}code{font-size:12px}.plot{margin:1em 0}strong{color:#a00}\n");
    out.push_str("</style></head><body>\n");
    let mut plots_placed = false;
    let mut lines = markdown.lines().peekable();
    let mut in_list = false;
    while let Some(line) = lines.next() {
        if line.starts_with("| ") {
            if in_list {
                out.push_str("</ul>\n");
                in_list = false;
            }
            out.push_str("<table>\n");
            let mut header = true;
            let mut row = Some(line);
            while let Some(current) = row {
                if current.starts_with("|---") || current.starts_with("|--") {
                    header = false;
                } else {
                    let cells: Vec<&str> = current.trim().trim_matches('|').split(" | ").collect();
                    let tag = if header { "th" } else { "td" };
                    out.push_str("<tr>");
                    for cell in cells {
                        let _ = write!(out, "<{tag}>{}</{tag}>", inline(cell.trim()));
                    }
                    out.push_str("</tr>\n");
                }
                row = lines.next_if(|l| l.starts_with('|'));
            }
            out.push_str("</table>\n");
            continue;
        }
        if let Some(item) = line.strip_prefix("- ") {
            if !in_list {
                out.push_str("<ul>\n");
                in_list = true;
            }
            let _ = writeln!(out, "<li>{}</li>", inline(item));
            continue;
        }
        if in_list {
            out.push_str("</ul>\n");
            in_list = false;
        }
        if let Some(h) = line.strip_prefix("### ") {
            let _ = writeln!(out, "<h3>{}</h3>", inline(h));
        } else if let Some(h) = line.strip_prefix("## ") {
            // The plots go before the first section after the summary.
            if !plots_placed
                && (h.starts_with("Outcomes")
                    || h.starts_with("Statistics")
                    || h.starts_with("In flight")
                    || h.starts_with("Recovery")
                    || h.starts_with("Coordinated"))
            {
                place_plots(&mut out, plots);
                plots_placed = true;
            }
            let _ = writeln!(out, "<h2>{}</h2>", inline(h));
        } else if let Some(h) = line.strip_prefix("# ") {
            let _ = writeln!(out, "<h1>{}</h1>", inline(h));
        } else if !line.trim().is_empty() {
            let _ = writeln!(out, "<p>{}</p>", inline(line));
        }
    }
    if in_list {
        out.push_str("</ul>\n");
    }
    if !plots_placed {
        place_plots(&mut out, plots);
    }
    out.push_str("</body></html>\n");
    out
}

fn place_plots(out: &mut String, plots: &[(&'static str, String)]) {
    out.push_str("<h2>Plots</h2>\n");
    for (name, svg) in plots {
        let _ = writeln!(
            out,
            "<div class=\"plot\" id=\"{}\">{svg}</div>",
            name.trim_end_matches(".svg")
        );
    }
}

/// `**bold**` and `` `code` `` inside escaped text.
fn inline(text: &str) -> String {
    let escaped = escape(text);
    let mut out = String::new();
    let mut bold = false;
    let mut code = false;
    let mut chars = escaped.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '*' && chars.peek() == Some(&'*') && !code {
            chars.next();
            out.push_str(if bold { "</strong>" } else { "<strong>" });
            bold = !bold;
        } else if c == '`' {
            out.push_str(if code { "</code>" } else { "<code>" });
            code = !code;
        } else {
            out.push(c);
        }
    }
    if bold {
        out.push_str("</strong>");
    }
    if code {
        out.push_str("</code>");
    }
    out
}
