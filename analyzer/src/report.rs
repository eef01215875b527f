//! Writing an [`model::Report`](crate::model::Report): `report.json` for machines,
//! `report.md` for people, `report.html` with the plots inline, and `histograms.hlog`, the
//! per-window latency histograms in HdrHistogram's interval-log format (SPEC §9).
//!
//! Output is deterministic: JSON keys are sorted (through `serde_json::Value`, whose map is
//! ordered), floats print in Rust's shortest round-trip form in JSON and with fixed decimals in
//! Markdown, and no output carries a timestamp of the analysis or a path.

use percentes_formats::spec::Claims;
use std::fmt::Write as _;
use std::io;
use std::path::Path;
use std::time::Duration;

use hdrhistogram::serialization::interval_log::{IntervalLogWriterBuilder, Tag};
use hdrhistogram::serialization::V2DeflateSerializer;

use crate::frame::Requests;
use crate::model::{Artifact, Audit, Distribution, Gate, PhaseRate, Report, WindowReport};
use crate::words::percent_of;

mod abandon;
mod change;
mod fire;
mod goodput;
mod path;
mod recovery;
use recovery::recovery_section;
mod server;

/// The files [`write()`] always creates in its output folder; beside them go the plots
/// ([`crate::plots`]): `completion.svg` (when statistics are published), `goodput.svg` (fault
/// runs), `latency.svg`.
pub const FILES: [&str; 4] = ["report.json", "report.md", "report.html", "histograms.hlog"];

/// `report.json`: sorted keys, two-space indent, a final newline.
pub fn json(report: &Report) -> String {
    let value = serde_json::to_value(report).expect("a report always serializes");
    let mut text = serde_json::to_string_pretty(&value).expect("a JSON value always prints");
    text.push('\n');
    text
}

/// Writes the report files and plots of `report` (analyzed from `requests`) into `dir`
/// (created if needed). Returns the names written.
pub fn write(report: &Report, requests: &Requests, dir: &Path) -> io::Result<Vec<&'static str>> {
    std::fs::create_dir_all(dir)?;
    let md = markdown(report);
    let plots = crate::plots::all(report, requests);
    std::fs::write(dir.join("report.json"), json(report))?;
    std::fs::write(
        dir.join("report.html"),
        crate::html::page(report, &md, &plots),
    )?;
    std::fs::write(dir.join("report.md"), md)?;
    std::fs::write(dir.join("histograms.hlog"), interval_log(report)?)?;
    let mut written = FILES.to_vec();
    for (name, svg) in &plots {
        std::fs::write(dir.join(name), svg)?;
        written.push(name);
    }
    Ok(written)
}

/// The per-window histograms as an HdrHistogram interval log (V2, deflate-compressed, base64).
/// One line per window and latency, tagged `<latency>.<window>` (e.g. `ttft.baseline`); the start
/// timestamp is the window's start in seconds from the run's epoch, the length its duration.
/// Values are microseconds.
pub fn interval_log(report: &Report) -> io::Result<Vec<u8>> {
    let mut out = Vec::new();
    let mut serializer = V2DeflateSerializer::new();
    let mut builder = IntervalLogWriterBuilder::new();
    builder.add_comment(&format!(
        "percentes {} histograms; values in microseconds, conditional on completion; spec {}; chain head {}",
        report.schema, report.provenance.spec_applied, report.provenance.chain_head
    ));
    builder.add_comment(
        "start timestamps are seconds from the run's epoch (CLOCK_MONOTONIC at the recorder)",
    );
    for why in &report.not_publishable {
        builder.add_comment(why);
    }
    let mut log = builder.begin_log_with(&mut out, &mut serializer)?;
    for window in &report.windows {
        // A4: the inter-token histogram holds the gaps between deliveries.
        let inter = if window.streams.is_some() {
            "inter-delivery"
        } else {
            "inter-chunk"
        };
        for (latency, dist) in [
            ("ttft", Some(&window.ttft)),
            ("e2e", Some(&window.e2e)),
            (inter, Some(&window.inter_chunk)),
            ("tpot", Some(&window.tokens.tpot)),
            ("itl-per-token", window.tokens.itl_per_token.as_ref()),
            ("ttfat", window.streams.as_ref().map(|s| &s.ttfat)),
            (
                "reasoning-span",
                window.streams.as_ref().map(|s| &s.reasoning_span),
            ),
        ] {
            let Some(histogram) = dist.and_then(|d| d.histogram.as_ref()) else {
                continue;
            };
            let tag_text = format!("{latency}.{}", window.window);
            let tag = Tag::new(&tag_text);
            let start = Duration::from_secs_f64(window.start_s);
            let length = Duration::from_secs_f64((window.end_s - window.start_s).max(0.0));
            log.write_histogram(histogram.inner(), start, length, tag)
                .map_err(|e| io::Error::other(format!("{e:?}")))?;
        }
    }
    Ok(out)
}

fn opt_share(value: Option<f64>) -> String {
    value.map_or_else(|| "n/a (nothing scheduled)".into(), |v| format!("{v:.4}"))
}

fn ms(us: u64) -> String {
    format!("{}.{:03} ms", us / 1000, us % 1000)
}

/// A tail line in the unit of the table above it: under v0.4 in ms (`p99 = 154.810 ms, 95 % CI
/// [154.189, 158.334] ms (ranks ...)`), the report.json text (in µs) before it, as published.
fn tail_words(t: &crate::model::Tail, n: u64, claims: Claims) -> String {
    match (claims, t.point_us, t.interval_us, t.ranks) {
        (Claims::Supported, Some(point), Some((lo, hi)), Some((rl, ru))) => {
            let bare = |us: u64| format!("{}.{:03}", us / 1000, us % 1000);
            format!(
                "{} = {}, 95 % CI [{}, {}] ms (ranks {rl} and {ru} of {n}{}, §7)",
                t.quantile,
                ms(point),
                bare(lo),
                bare(hi),
                t.beside()
            )
        }
        _ => t.text.clone(),
    }
}

/// `report.md`: the same report for people, in a fixed layout.
pub fn markdown(report: &Report) -> String {
    let mut md = String::new();
    let p = &report.provenance;
    let _ = writeln!(md, "# percentes report\n");
    if report.not_publishable.is_empty() {
        let _ = writeln!(md, "Publishable: every condition of §9 holds.\n");
    } else {
        for why in &report.not_publishable {
            let _ = writeln!(md, "**{why}**\n");
        }
    }
    if p.tls_insecure {
        let _ = writeln!(
            md,
            "**TLS certificate verification was OFF for this run.**\n"
        );
    }
    let _ = writeln!(md, "| | |\n|---|---|");
    for (k, v) in [
        ("spec applied", p.spec_applied.clone()),
        ("spec at capture", p.spec_at_capture.clone()),
        ("completion curve", p.curve_method.clone()),
        (
            "analyzer",
            format!("{} ({})", p.analyzer_version, p.analyzer_commit),
        ),
        (
            "recorder",
            format!("{} ({})", p.recorder_version, p.recorder_commit),
        ),
        ("config hash (BLAKE3)", p.config_hash.clone()),
        ("journal chain head", p.chain_head.clone()),
        (
            "journal",
            format!("{}; seal: {}", p.journal_verdict, p.seal),
        ),
        ("schedule digest", p.schedule_digest.clone()),
        (
            "profile",
            if p.profile == "dev" {
                format!("dev (time factor {})", p.dev_time_factor)
            } else {
                p.profile.clone()
            },
        ),
        ("target", p.target_kind.clone()),
        ("fault", p.fault_variant.clone()),
    ]
    .into_iter()
    // Only when `analyze` was given a trusted head or key: earlier reports keep their rows.
    .chain(p.vouched.clone().map(|v| ("vouched for", v)))
    {
        let _ = writeln!(md, "| {k} | `{v}` |");
    }

    if report.rules.claims == percentes_formats::spec::Claims::Supported {
        // v0.4: the figures a terminal shows lead, before the evidence they rest on (§9).
        let summary = crate::figures::text(&crate::figures::of(report, &[]));
        let _ = writeln!(md, "\n## Summary\n\n```text\n{}```", summary);
    }
    let v = &report.validity;
    let _ = writeln!(
        md,
        "\n## Validity (§2, §10): {}\n",
        if v.valid {
            "VALID"
        } else {
            "INVALID: no statistic is published, exit 2"
        }
    );
    let _ = writeln!(
        md,
        "| gate | clause | effect | status | limit | observed | by | n | how |\n|---|---|---|---|---|---|---|---|---|"
    );
    for Gate {
        id,
        effect,
        status,
        limit,
        observed,
        by,
        n,
        note,
    } in &v.gates
    {
        let _ = writeln!(
            md,
            "| {id} | {} | {effect} | {status} | {limit} | {observed} | {} | {n} | {note} |",
            id.clause(),
            by.as_deref().unwrap_or("")
        );
    }
    // Where G2.1's late requests spent their time (issue 50), only where the journal splits.
    if let Some(l) = v.late_sends {
        let _ = writeln!(
            md,
            "\nG2.1's late requests by where the time went: of the {} ready later than the p99 limit, {} began on time and waited for their connection (a SYN-ACK, a TLS handshake: the target's or the network's answer, not the client's) and {} began late (the client's).",
            l.late, l.waited_on_connection, l.began_late
        );
    }

    if let Some(e) = &report.escape {
        let _ = writeln!(
            md,
            "\n## ESCAPED EXPERIMENT (seeds/004): {} at {:.3} s\n\nOffered load stopped and the original clock kept; hand this to incident response. Retain:\n\n| item | value |\n|---|---|",
            e.trigger, e.at_s
        );
        for r in &e.retain {
            let _ = writeln!(md, "| {} | {} |", r.item, r.value.replace('|', "\\|"));
        }
    }
    if let Some(c) = &report.cleanup {
        let _ = writeln!(md, "\n## Cleanup (seeds/004)\n\n**{}**\n", c.verdict);
        let _ = writeln!(
            md,
            "- removal: {}{}\n- healthy observations of the target after it: {}",
            c.removal,
            c.removal_at_s
                .map_or(String::new(), |at| format!(" at {at:.3} s")),
            c.healthy_observations
        );
        for a in &c.attempts {
            let _ = writeln!(md, "- attempt: {a}");
        }
    }

    let t = &report.timeline;
    let _ = writeln!(md, "\n## Windows (§3, by intended send time)\n");
    if let (Some(inject), Some(anchor)) = (t.inject_s, t.fire_anchor_s) {
        let _ = writeln!(
            md,
            "T_inject {inject:.3} s; fired {}; fire anchor {anchor:.3} s. {}\n",
            t.fired_s
                .map_or("never (no fault-fired event)".into(), |f| format!(
                    "{f:.3} s"
                )),
            t.recovery_note
        );
    }
    let _ = writeln!(
        md,
        "| window | from (s) | to (s) | scheduled |\n|---|---|---|---|"
    );
    for w in &t.windows {
        let _ = writeln!(
            md,
            "| {} | {:.3} | {:.3} | {} |",
            w.window, w.start_s, w.end_s, w.scheduled
        );
    }

    if !report.headline.is_empty() {
        let _ = writeln!(
            md,
            "\n## Headline (this run; `percentes campaign` fills it over 5 runs)\n\n> {}",
            report.headline
        );
    }

    if let Some(withheld) = &report.windows_withheld {
        let _ = writeln!(md, "\n**Statistics withheld:** {withheld}\n");
    } else {
        window_tables(&mut md, &report.windows, report.rules.claims);
    }
    segment_tables(&mut md, report);
    path::section(&mut md, &report.windows);
    change::section(&mut md, report.change.as_ref());

    if let Some(f) = &report.in_flight_at_fire {
        fire::in_flight_section(&mut md, f);
    }

    if let Some(r) = &report.recovery {
        recovery_section(&mut md, r);
        if let (Some(s), Some(victim)) = (&report.server, report.in_flight_at_fire.as_ref()) {
            server::recovery_evidence(&mut md, s, &victim.victim);
        }
    }
    if let Some(s) = &report.server {
        server::section(&mut md, s);
    }

    audit_section(&mut md, &report.audit);
    md
}

/// The coordinated-omission audit (seeds/003): the decision, the clock, the stages, the skew,
/// the generator's telemetry, the phases' arrival processes and the artifact, field by field.
fn audit_section(md: &mut String, a: &Audit) {
    let _ = writeln!(md, "\n## Coordinated-omission audit\n");
    let _ = writeln!(md, "**Decision: {}**\n", a.decision);
    let _ = writeln!(md, "- Workload: {}", a.workload_model);
    let _ = writeln!(md, "- Clock: {}", a.clock_model);
    let _ = writeln!(
        md,
        "- Stages: {}",
        a.stages
            .iter()
            .map(|(s, n)| format!("{s} {n}"))
            .collect::<Vec<_>>()
            .join(" -> ")
    );
    let _ = writeln!(md, "- Reconciliation: {}", a.reconciliation);
    let s = &a.skew_us;
    let _ = writeln!(
        md,
        "- Send skew over {} dispatches of the measured windows: p50 {}, p90 {}, p99 {}, p99.9 {}, max {}",
        s.n, ms(s.p50), ms(s.p90), ms(s.p99), ms(s.p99_9), ms(s.max)
    );
    let tm = &a.telemetry;
    let queue = match &tm.writer_queue_observed {
        Some((depth, how)) => format!("writer queue depth max {depth} ({how})"),
        None => format!("writer queue max {}", tm.writer_queue_max),
    };
    let cgroup = match (tm.cgroup_cpu_max_5s_percent, tm.cgroup_throttled) {
        (None, None) => String::new(),
        (cpu, throttled) => format!(
            ", cgroup CPU max 5 s {} of its quota{}",
            cpu.map_or("n/a (no quota)".into(), |v| format!("{v:.1} %")),
            throttled.map_or(String::new(), |(ms, periods)| format!(
                " (throttled {ms:.1} ms in {periods} periods)"
            ))
        ),
    };
    let _ = writeln!(
        md,
        "- Generator telemetry ({} samples): host CPU max 5 s {}{cgroup}, recorder CPU {} of one core, stall p99 max {}, stall max {}, {queue}, queue-full events {}, undispatched {}",
        tm.samples,
        tm.host_cpu_max_5s_percent.map_or("n/a".into(), |v| format!("{v:.1} %")),
        tm.recorder_cpu_percent_of_one_core.map_or("n/a".into(), |v| format!("{v:.1} %")),
        tm.stall_p99_max_us.map_or("n/a".into(), |v| format!("{v:.1} us")),
        tm.stall_max_us.map_or("n/a".into(), |v| format!("{v:.1} us")),
        tm.writer_queue_full_events,
        tm.undispatched_total
    );
    phases_table(md, &a.phases);
    if let Some(art) = &a.artifact {
        artifact_table(md, art);
    }
}

/// The audit's phases: each one's rates and its arrival process against the target's.
fn phases_table(md: &mut String, phases: &[PhaseRate]) {
    let _ = writeln!(md, "\n| phase | s | requested rps | achieved rps | scheduled | dispatched | target gap ms (CV) | scheduled gap ms (CV) | dispatched gap ms (CV) | KS vs target |\n|---|---|---|---|---|---|---|---|---|---|");
    let f3 = |v: Option<f64>| v.map_or("n/a".into(), |v| format!("{v:.3}"));
    for r in phases {
        let _ = writeln!(
            md,
            "| {} | {:.3} | {:.3} | {:.3} | {} | {} | {:.3} ({:.1}) | {} ({}) | {} ({}) | {} |",
            r.phase,
            r.duration_s,
            r.requested_rps,
            r.achieved_rps,
            r.scheduled,
            r.dispatched,
            r.target_mean_gap_ms,
            r.target_cv,
            f3(r.scheduled_mean_gap_ms),
            f3(r.scheduled_cv),
            f3(r.dispatched_mean_gap_ms),
            f3(r.dispatched_cv),
            f3(r.dispatched_ks)
        );
    }
}

/// The audit artifact (seeds/003), field by field.
fn artifact_table(md: &mut String, art: &Artifact) {
    let _ = writeln!(md, "\n### Audit artifact (seeds/003, field by field)\n");
    let _ = writeln!(md, "| field | this run |\n|---|---|");
    for (field, text) in [
        ("target workload", &art.workload),
        ("clock model", &art.clock),
        ("stage counts", &art.stages),
        ("generator", &art.generator),
        ("protocol", &art.protocol),
        ("schedule", &art.schedule),
        ("results", &art.results),
    ] {
        let _ = writeln!(md, "| {field} | {text} |");
    }
    if let Some(waits) = &art.connection_waits {
        let _ = writeln!(md, "| connection waits | {waits} |");
    }
    for t in &art.threats {
        let _ = writeln!(md, "| threat: {} | {} |", t.threat, t.shows);
    }
    let _ = writeln!(md, "| decision | {} |", art.decision);
}

fn window_tables(md: &mut String, windows: &[WindowReport], claims: Claims) {
    let _ = writeln!(
        md,
        "\n## Outcomes (error and censored rates over all scheduled requests)\n"
    );
    let _ = writeln!(md, "| window | scheduled | completed | errored | censored | undispatched | no record | error rate | censored rate | goodput (§4) | throughput (rps) |\n|---|---|---|---|---|---|---|---|---|---|---|");
    for w in windows {
        let o = &w.outcomes;
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            w.window,
            w.scheduled,
            o.completed,
            o.errored,
            o.censored,
            o.undispatched,
            o.no_record,
            opt_share(w.error_rate.value),
            opt_share(w.censored_rate.value),
            opt_share(w.goodput.value),
            w.throughput_rps
                .value
                .map_or("n/a".into(), |v| format!("{v:.3}"))
        );
    }
    goodput::goodput_table(md, windows);
    abandon::abandon_table(md, windows);
    server::designed_lines(md, windows);
    for w in windows {
        let _ = writeln!(
            md,
            "\n### {} ({:.3} s to {:.3} s, {} scheduled)\n",
            w.window, w.start_s, w.end_s, w.scheduled
        );
        if w.scheduled == 0 && claims == Claims::Supported {
            // v0.4: an empty window is one line, not a curve of four refusals.
            let _ = writeln!(
                md,
                "No request was scheduled in this window: nothing to estimate."
            );
            continue;
        }
        if !w.classes.is_empty() {
            let _ = writeln!(
                md,
                "Classes: {}\n",
                w.classes
                    .iter()
                    .map(|(c, n)| format!("{c} {n}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
        if !w.routes.is_empty() {
            let _ = writeln!(md, "| route | scheduled | completed | errored | censored | error rate | statuses | classes | e2e p95 (completed) | e2e p99 (completed) |\n|---|---|---|---|---|---|---|---|---|---|");
            for r in &w.routes {
                let join = |m: Vec<String>| {
                    if m.is_empty() {
                        "none".to_owned()
                    } else {
                        m.join(", ")
                    }
                };
                let _ = writeln!(
                    md,
                    "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                    r.route,
                    r.scheduled,
                    r.outcomes.completed,
                    r.outcomes.errored,
                    r.outcomes.censored,
                    opt_share(r.error_rate),
                    join(
                        r.statuses
                            .iter()
                            .map(|(s, n)| format!("{s} x{n}"))
                            .collect()
                    ),
                    join(r.classes.iter().map(|(c, n)| format!("{c} {n}")).collect()),
                    r.e2e_p95_us.map_or("n/a".into(), ms),
                    r.e2e_p99_us.map_or("n/a".into(), ms),
                );
            }
            md.push('\n');
        }
        let c = &w.completion;
        let _ = writeln!(
            md,
            "Completion curve, {}, n = {}: {}; final incidence {:.4}, ceiling {:.4}, within 1 s {:.4}.\n",
            c.method,
            c.n,
            c.readings.iter().map(|r| r.text.clone()).collect::<Vec<_>>().join("; "),
            c.final_incidence,
            c.ceiling,
            c.within_1s
        );
        if let Some(caveat) = &w.caveat {
            let _ = writeln!(md, "**Caveat:** {caveat}.\n");
        }
        let _ = writeln!(
            md,
            "Receive path (§2, not a gate): {}.\n",
            w.receive_path.text
        );
        let _ = writeln!(md, "| latency ({}) | n | p50 | p90 | p95 | p99 | p99.9 (descriptive) | max (descriptive) |\n|---|---|---|---|---|---|---|---|", w.ttft.label);
        let a4 = w.streams.as_ref();
        // A4's rows where they say something: a first answer token other than the first
        // token, a reasoning span that was read.
        fn a4_row<'d>(
            d: Option<&'d Distribution>,
            ttft: &Distribution,
            first_answer: bool,
        ) -> Option<&'d Distribution> {
            d.filter(|d| d.n > 0 && (!first_answer || d.percentiles_us != ttft.percentiles_us))
        }
        for (name, d) in [
            (
                if a4.is_some() {
                    "TTFT (first delta of any kind)"
                } else {
                    "TTFT"
                },
                Some(&w.ttft),
            ),
            (
                "time to first answer token",
                a4_row(a4.map(|s| &s.ttfat), &w.ttft, true),
            ),
            ("end-to-end", Some(&w.e2e)),
            (
                if a4.is_some() {
                    "inter-token, per delivery (pooled)"
                } else {
                    "inter-chunk (pooled)"
                },
                Some(&w.inter_chunk),
            ),
            ("time per output token", Some(&w.tokens.tpot)),
            (
                "inter-token, per token (pooled)",
                w.tokens.itl_per_token.as_ref(),
            ),
            (
                "reasoning span",
                a4_row(a4.map(|s| &s.reasoning_span), &w.ttft, false),
            ),
        ] {
            if let Some(d) = d {
                distribution_row(md, name, d, claims);
            }
        }
        if let Some(streams) = a4 {
            stream_lines(md, streams, w.inter_chunk_at_floor.as_ref());
        } else if let Some((Some(share), n)) =
            w.inter_chunk_at_floor.as_ref().map(|f| (f.value, f.n))
        {
            let count = (share * n as f64).round() as u64;
            let _ = writeln!(
                md,
                "\nInter-chunk gaps at the 1 us floor: {count} of {n} ({}), events the recorder read together (a shorter gap is recorded as 1 us, §3); a pooled percentile of 0.001 ms is that floor, not a measured gap.",
                percent_of(count, n),
            );
        }
        let t = &w.tokens;
        let rates: Vec<String> = t
            .per_request_tokens_per_s
            .iter()
            .map(|(q, v)| format!("{q} {v:.1}"))
            .collect();
        let _ = writeln!(
            md,
            "\nTokens ({}): {} prompt, {} completion over {} requests; output {} tokens/s in all; per request (completion tokens / e2e) {} tokens/s; {} requests carried several tokens a chunk.\n",
            t.text,
            t.prompt_tokens,
            t.completion_tokens,
            t.with_usage,
            t.output_tokens_per_s
                .map(|v| format!("{v:.1}"))
                .unwrap_or_else(|| "n/a".into()),
            if rates.is_empty() { "n/a".into() } else { rates.join(", ") },
            t.multi_token_chunks
        );
        for (name, d) in [("TTFT", &w.ttft), ("end-to-end", &w.e2e)] {
            for t in &d.tails {
                let _ = writeln!(md, "- {name}: {}", tail_words(t, d.n, claims));
            }
        }
        if w.ttft.tails.is_empty() && w.e2e.tails.is_empty() {
            let _ = writeln!(md, "- no completed samples");
        }
        let cells: Vec<String> = w
            .goodput_sweep
            .iter()
            .map(|c| format!("{}/{} ms {}", c.ttft_ms, c.e2e_ms, opt_share(c.goodput)))
            .collect();
        let _ = writeln!(md, "\nGoodput sweep (TTFT/e2e): {}", cells.join(", "));
        for m in &w.modal_distance {
            let _ = writeln!(
                md,
                "\nModal {} latency vs the {} ms threshold (§4): mode {}, baseline SD {}, distance {}",
                m.latency,
                m.threshold_ms,
                m.mode_ms.map_or("n/a".into(), |v| format!("{v:.3} ms")),
                m.baseline_sd_ms.map_or("n/a".into(), |v| format!("{v:.3} ms")),
                m.distance
            );
        }
    }
}

/// `analyze --by`: each window's segments, one table a window; absent when none were asked.
fn segment_tables(md: &mut String, report: &Report) {
    let Some(first) = report.segments.first() else {
        if let Some(note) = &report.segments_note {
            let _ = writeln!(md, "\n## Segments\n\n**Not shown:** {note}");
        }
        return;
    };
    let columns: Vec<&str> = first.key.iter().map(|(c, _)| *c).collect();
    let _ = writeln!(
        md,
        "\n## Segments by {} (`analyze --by`)\n\nEach segment of a window analyzed as a window is: its own completion curve over its scheduled requests, its completed-only latencies (conditional on completion), and its own sample budget for the tail intervals (§7).",
        columns.join(", ")
    );
    let at = |d: &Distribution, q: &str| {
        d.percentiles_us
            .iter()
            .find(|(n, _)| n == q)
            .map_or_else(|| "n/a".to_owned(), |(_, v)| ms(*v))
    };
    let tail = |d: &Distribution| {
        d.tails
            .iter()
            .find(|t| t.quantile == "p99")
            .map_or_else(|| "no completed samples".to_owned(), |t| t.text.clone())
    };
    // A4 (v0.5): the time to first answer token beside TTFT.
    let a4 = report.segments.iter().any(|s| s.ttfat.is_some());
    let mut window = "";
    for s in &report.segments {
        if s.window != window {
            window = s.window;
            let _ = writeln!(
                md,
                "\n### {window}\n\n| {} | scheduled | completed | errored | censored | goodput | completion curve | TTFT p50 | TTFT p99 |{} TPOT p50 | e2e p50 | e2e p99 | e2e p99 interval |\n|{}---|---|---|---|---|---|---|---|---|---|---|---|{}",
                columns.join(" | "),
                if a4 { " first answer p50 |" } else { "" },
                "---|".repeat(columns.len()),
                if a4 { "---|" } else { "" },
            );
        }
        let first_answer = match &s.ttfat {
            Some(d) if d.n > 0 => format!(" {} |", at(d, "p50")),
            Some(_) => " no answer token |".to_owned(),
            None => String::new(),
        };
        let readings: Vec<&str> = s
            .completion
            .readings
            .iter()
            .map(|r| r.text.as_str())
            .collect();
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} |{first_answer} {} | {} | {} | {} |",
            s.key
                .iter()
                .map(|(_, v)| v.as_str())
                .collect::<Vec<_>>()
                .join(" | "),
            s.scheduled,
            s.outcomes.completed,
            s.outcomes.errored,
            s.outcomes.censored,
            opt_share(s.goodput.value),
            readings.join("; "),
            at(&s.ttft, "p50"),
            at(&s.ttft, "p99"),
            at(&s.tpot, "p50"),
            at(&s.e2e, "p50"),
            at(&s.e2e, "p99"),
            tail(&s.e2e),
        );
    }
    if let Some(note) = &report.segments_note {
        let _ = writeln!(md, "\n{note}");
    }
}

fn distribution_row(md: &mut String, name: &str, d: &Distribution, claims: Claims) {
    if d.n == 0 {
        // §9: a cell is never blank; A3 says why this one has no value.
        let _ = match claims {
            Claims::Supported => writeln!(
                md,
                "| {name} | 0 | none completed | none completed | none completed | none completed | none completed | none completed |"
            ),
            Claims::Unguarded => writeln!(md, "| {name} | 0 | | | | | | |"),
        };
        return;
    }
    let p = |q: &str| {
        if d.refused.iter().any(|(r, _)| r == q) {
            return "refused (1 us floor)".to_owned();
        }
        d.percentiles_us
            .iter()
            .find(|(n, _)| n == q)
            .map_or(String::new(), |(_, v)| ms(*v))
    };
    let refused = if d.refused.is_empty() {
        String::new()
    } else {
        "refused (1 us floor)".to_owned()
    };
    let _ = writeln!(
        md,
        "| {name} | {} | {} | {} | {} | {} | {} | {} |",
        d.n,
        p("p50"),
        p("p90"),
        p("p95"),
        p("p99"),
        d.p99_9_us.map_or(refused.clone(), ms),
        d.max_us.map_or(refused, ms)
    );
}

/// A4 (v0.5): what the window's streams carried and how, in report.md's words.
fn stream_lines(
    md: &mut String,
    s: &crate::model::StreamFigures,
    floor: Option<&crate::model::Share>,
) {
    let kinds: Vec<String> = s.output.iter().map(|(k, n)| format!("{k} {n}")).collect();
    let _ = writeln!(
        md,
        "
Streams (A4): completed requests by the output they carried: {}; {} with a stream record. {}.",
        kinds.join(", "),
        s.with_record,
        s.text
    );
    if let Some(reason) = s.reasoning_tokens_line() {
        let _ = writeln!(
            md,
            "
Reasoning tokens (usage): {reason}; {}.",
            s.reasoning_reconciled
        );
    }
    if let Some((Some(share), n)) = floor.map(|f| (f.value, f.n)) {
        let count = (share * n as f64).round() as u64;
        let _ = writeln!(
            md,
            "
Inter-token gaps at the 1 us floor (the read's resolution): {count} of {n} ({}); a quantile there is refused, and every one where they are the majority (A4).",
            percent_of(count, n),
        );
    }
}

/// What `analyze` prints: where the files went, the verdicts, and the headline numbers.
pub fn summary(
    report: &Report,
    figures: &crate::figures::Summary,
    journal: &Path,
    output: &Path,
    written: &[&str],
) -> String {
    let mut text = String::new();
    macro_rules! out {
        ($($arg:tt)*) => {{
            let _ = writeln!(text, $($arg)*);
        }};
    }
    // A stopped run says so first (A4): its figures are over what was scheduled before it.
    let first = usize::from(report.stopped.is_some()).min(report.not_publishable.len());
    report.not_publishable[..first]
        .iter()
        .for_each(|why| out!("{why}"));
    out!("journal: {}", journal.display());
    out!(
        "spec applied: {} (at capture: {}); chain head {}",
        report.provenance.spec_applied,
        report.provenance.spec_at_capture,
        report.provenance.chain_head
    );
    for why in &report.not_publishable[first..] {
        out!("{why}");
    }
    if !report.finished() {
        out!("exit 2: the journal is not sealed completed, so the run did not finish its schedule and nothing from it may be published");
    }
    let failed: Vec<_> = report.validity.failed().collect();
    if failed.is_empty() {
        out!("validity (§2, §10): every applicable gate passed");
    } else {
        let shown = if report.windows.is_empty() {
            "no statistic is published"
        } else {
            "the statistics below are a diagnosis, NOT PUBLISHABLE"
        };
        out!("validity (§2, §10): INVALID, {shown} (exit 2)");
        for g in failed {
            out!(
                "  {}: {} (limit {}, observed {}{})",
                g.id,
                g.status,
                g.limit,
                g.observed,
                g.by.as_deref()
                    .map(|b| format!(", {b}"))
                    .unwrap_or_default()
            );
        }
    }
    for line in client_words(report, journal) {
        out!("{line}");
    }
    out!("audit: {}", report.audit.decision);
    text.push_str(&crate::figures::text(figures));
    out!("wrote {} into {}", written.join(", "), output.display());
    text
}

/// When the client failed its own gate (SPEC §2, G2) or fell behind its schedule, what it
/// suffered in plain words, that nothing may be published, and how to see the numbers anyway
/// (issue 32): the lines `analyze`, `record`, `demo`, `scenario run`, `sweep` and `calibrate`
/// end with. Empty when the client held.
pub fn client_words(report: &Report, journal: &Path) -> Vec<String> {
    use crate::model::GateId;
    let failed: Vec<&Gate> = report
        .validity
        .gates
        .iter()
        .filter(|g| g.id.is_client_gate() && !g.holds())
        .collect();
    if failed.is_empty() {
        return Vec::new();
    }
    // Where G2.1's late requests spent their time (issue 50): begun on time and waiting for
    // their connection is the target's (or the network's) wait, not the client's.
    let connection = report.validity.late_sends.filter(|l| l.mostly_connection());
    let only_skew = failed
        .iter()
        .all(|g| matches!(g.id, GateId::SendSkewP99 | GateId::SendSkewMax));
    let mut out = vec![match connection {
        Some(_) if only_skew => "THE RUN FAILED THE CLIENT'S SEND-SKEW CHECK (SPEC §2, G2.1), AND THE WAIT WAS THE TARGET'S: the requests went out on time and waited for their connections, so nothing from this run may be published, and the target (or the network to it) is what made them late. What the check saw:".to_owned(),
        _ => "THE CLIENT FAILED ITS OWN CHECKS (SPEC §2): the recorder, not the target, could not keep the run it was asked for, so nothing from this run may be published. What it suffered:".to_owned(),
    }];
    let telemetry = &report.audit.telemetry;
    for g in failed {
        let said = match g.id {
            GateId::SendSkewP99 | GateId::SendSkewMax => match report.validity.late_sends {
                Some(l) => format!(
                    "requests were ready to send late: {} {} against a limit of {} (G2.1); of the {} ready later than the p99 limit, {} began on time and waited for their connection (a SYN-ACK, a TLS handshake: the target's or the network's answer, not the client's) and {} began late (the client's)",
                    g.id, g.observed, g.limit, l.late, l.waited_on_connection, l.began_late
                ),
                None => format!(
                    "it sent requests late: {} {} against a limit of {} (G2.1); every late request waited on the client, not on the target",
                    g.id, g.observed, g.limit
                ),
            },
            GateId::Undispatched => format!(
                "requests scheduled but never sent: {} (G2.2): the recorder reached them only after their deadline (class client-late) or could not open a connection; they are the client's failures, counted against no target",
                g.observed
            ),
            GateId::HostCpu => format!(
                "the CPU G2.3 reads was {} busy over a 5 s window, against {}: something else on this machine (the target, a build, another process) competed with the recorder for CPU{}",
                g.observed,
                g.limit,
                telemetry
                    .cgroup_throttled
                    .filter(|(ms, _)| *ms > 0.0)
                    .map(|(ms, periods)| format!(", and its cgroup was throttled for {ms:.0} ms in {periods} periods"))
                    .unwrap_or_default()
            ),
            GateId::RuntimeStall => format!(
                "its workers were held up: the 1 ms ticker on their own rings read a p99 lateness of {} against {} (G2.4), so its CPU was busy with other processes, throttled, or the process was stopped",
                g.observed, g.limit
            ),
            GateId::FallBehind => format!(
                "it fell behind its schedule and stopped the run: {}",
                g.observed
            ),
            _ => format!("{}: {} (limit {})", g.id, g.observed, g.limit),
        };
        out.push(format!("  - {said}"));
    }
    out.push(format!(
        "To see its numbers anyway, each marked NOT PUBLISHABLE: `percentes analyze {} --diagnose`. To check a host before recording: `percentes doctor`.",
        journal.display()
    ));
    out
}
