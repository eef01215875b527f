//! `percentes sweep CONFIG --rates 2,4,8,16 -o DIR` (issue 18 item 4): latency against load.
//!
//! One recording per offered rate, of the user's configuration with only `schedule.rate_rps`
//! changed (the same seed, so the rates differ in their rate alone), each verified, analyzed as
//! `analyze` would, and kept beside its configuration. As in a calibration step (§10), a
//! recording that only the client gate failed is recorded again, up to
//! `calibration.step_attempts_max` recordings, all of them listed: a busy client says nothing
//! about the target. Then sweep.json, sweep.md and two plots, written by
//! [`percentes_analyzer::sweep`] and [`percentes_analyzer::plots`] (which also parse `--rates`).

use std::path::Path;
use std::process::ExitCode;

use percentes_analyzer::sweep::{self, Point, Sweep, SWEEP_SCHEMA};
use percentes_analyzer::{plots, JournalFile};
use percentes_formats::config::{Config, FaultVariant};
use percentes_formats::pins;
use percentes_recorder::run::Progress;

use crate::error::{bail, Context, Result};
use crate::Tool;

/// The sweep's folder, made; one that holds other files needs `force`.
fn prepare(output: &Path, force: bool) -> Result<()> {
    if output.exists() && !force && std::fs::read_dir(output)?.next().is_some() {
        bail!(
            "{} exists and is not empty; pass --force to write the sweep there",
            output.display()
        );
    }
    std::fs::create_dir_all(output).with_context(|| format!("cannot create {}", output.display()))
}

/// A sweep of a quick run stated by flags: its configuration (`text`, with the first rate) is
/// written into the output folder as `quick.toml`, which the sweep then reads as any other.
pub fn sweep_quick(
    text: &str,
    rates: &[f64],
    output: &Path,
    force: bool,
    diagnose: bool,
    tool: &Tool,
) -> Result<ExitCode> {
    prepare(output, force)?;
    let path = output.join("quick.toml");
    std::fs::write(&path, text).with_context(|| format!("cannot write {}", path.display()))?;
    sweep(&path, rates, output, true, diagnose, tool)
}

/// Runs the sweep into `output` and returns 0 when every rate's recording passed its gates, 2
/// when any did not (its row says which).
pub fn sweep(
    config_path: &Path,
    rates: &[f64],
    output: &Path,
    force: bool,
    diagnose: bool,
    tool: &Tool,
) -> Result<ExitCode> {
    let config = Config::load(config_path)?;
    if config.fault.variant != FaultVariant::None {
        bail!(
            "{}: a sweep measures latency against load without a fault, and this configuration injects {}; set fault.variant = \"none\" (its rates come from schedule.rate_rps)",
            config_path.display(),
            config.fault.variant.name()
        );
    }
    if config.calibration.step {
        bail!(
            "{} is a calibration step, not a run configuration",
            config_path.display()
        );
    }
    prepare(output, force)?;
    let text = std::str::from_utf8(config.raw_bytes()).context("the configuration is UTF-8")?;
    let base: toml::Table = toml::from_str(text).context("the configuration's TOML")?;
    let attempts_max = (config.number(&pins::CALIBRATION_STEP_ATTEMPTS_MAX) as u32).max(1);
    out!(
        "percentes sweep: {} rates from {} to {} rps{}",
        rates.len(),
        rates[0],
        rates[rates.len() - 1],
        config
            .publishability()
            .err()
            .map(|why| format!(" ({why})"))
            .unwrap_or_default()
    );
    let mut points = Vec::new();
    for (k, &rate) in rates.iter().enumerate() {
        let mut spoiled = Vec::new();
        let mut recording = 1;
        let point = loop {
            let stem = format!(
                "sweep-{:02}{}-{rate}rps",
                k + 1,
                if recording > 1 {
                    format!("a{recording}")
                } else {
                    String::new()
                }
            );
            let (journal, report) =
                record(&base, rate, &stem, output, config_path, diagnose, tool)?;
            let only_client = !report.validity.valid && report.validity.only_client_gates_failed();
            let point = Point::of(rate, &journal, spoiled.clone(), &report);
            if only_client && recording < attempts_max {
                out!(
                    "  {rate:>9.3} rps: spoiled by the client gate ({}), recording it again ({} of at most {attempts_max})",
                    point.failed_gates.join(", "),
                    recording + 1
                );
                spoiled.push(journal);
                recording += 1;
                continue;
            }
            if only_client {
                for line in percentes_analyzer::report::client_words(&report, journal.as_ref()) {
                    out!("    {line}");
                }
            }
            break point;
        };
        out!("  {}", summary_line(&point));
        points.push(point);
    }
    let mut not_publishable: Vec<String> = config
        .publishability()
        .err()
        .map(|why| why.to_string())
        .into_iter()
        .collect();
    let diagnosed: Vec<String> = points
        .iter()
        .filter(|p| !p.valid && !p.latency.is_empty())
        .map(|p| p.rate_rps.to_string())
        .collect();
    if !diagnosed.is_empty() {
        not_publishable.push(format!(
            "NOT PUBLISHABLE: the recordings at {} rps failed a gate; their statistics are shown for diagnosis only (--diagnose, §9)",
            diagnosed.join(", ")
        ));
    }
    let capacity_under_your_slo = config.slo.as_ref().and_then(|slo| {
        let rated: Vec<sweep::Rated<'_>> = points.iter().map(sweep::Rated::from).collect();
        sweep::capacity_under_slo(&rated, &slo.to_string(), slo.target())
    });
    if let Some(c) = &capacity_under_your_slo {
        out!("capacity under your SLO: {}", c.text);
    }
    let result = Sweep {
        schema: SWEEP_SCHEMA,
        config: config_path.display().to_string(),
        not_publishable,
        points,
        capacity_under_your_slo,
    };
    std::fs::write(output.join("sweep.json"), sweep::json(&result))?;
    std::fs::write(output.join("sweep.md"), sweep::markdown(&result))?;
    std::fs::write(
        output.join("sweep-latency.svg"),
        plots::sweep_latency(&result),
    )?;
    std::fs::write(
        output.join("sweep-goodput.svg"),
        plots::sweep_goodput(&result),
    )?;
    std::fs::write(
        output.join("sweep-tradeoff.svg"),
        plots::sweep_tradeoff(&result),
    )?;
    out!(
        "wrote sweep.json, sweep.md, sweep-latency.svg, sweep-goodput.svg and sweep-tradeoff.svg into {}",
        output.display()
    );
    Ok(if result.points.iter().all(|p| p.valid) {
        ExitCode::SUCCESS
    } else {
        out!("a rate's recording failed a gate (see sweep.md); exit 2");
        ExitCode::from(2)
    })
}

/// One rate's line on the terminal.
fn summary_line(p: &Point) -> String {
    if !p.valid && p.latency.is_empty() {
        return format!(
            "{:>9.3} rps: INVALID ({}), nothing published",
            p.rate_rps,
            p.failed_gates.join(", ")
        );
    }
    let ms = |metric: &str, p99: bool| {
        p.latency
            .iter()
            .find(|l| l.metric == metric)
            .and_then(|l| if p99 { l.p99_us } else { l.p50_us })
            .map_or("n/a".to_owned(), |us| format!("{:.1} ms", us as f64 / 1e3))
    };
    format!(
        "{:>9.3} rps: {}goodput {}, errored {}, TTFT p50 {} p99 {}, e2e p50 {} p99 {}",
        p.rate_rps,
        if p.valid {
            String::new()
        } else {
            format!(
                "INVALID ({}), for diagnosis only: ",
                p.failed_gates.join(", ")
            )
        },
        p.goodput.map_or("n/a".to_owned(), |g| format!("{g:.4}")),
        p.error_rate.map_or("n/a".to_owned(), |e| format!("{e:.4}")),
        ms("ttft", false),
        ms("ttft", true),
        ms("e2e", false),
        ms("e2e", true),
    )
}

/// Records the configuration at `rate` as `stem`.toml and .pj, and analyzes it.
fn record(
    base: &toml::Table,
    rate: f64,
    stem: &str,
    output: &Path,
    source: &Path,
    diagnose: bool,
    tool: &Tool,
) -> Result<(String, percentes_analyzer::model::Report)> {
    let mut t = base.clone();
    let mut schedule = match t.remove("schedule") {
        Some(toml::Value::Table(table)) => table,
        None => toml::Table::new(),
        Some(_) => bail!("`schedule` is not a table"),
    };
    schedule.insert("rate_rps".into(), rate.into());
    t.insert("schedule".into(), schedule.into());
    let body = toml::to_string(&t).context("cannot write the rate's configuration")?;
    let text = format!(
        "# A load-sweep rate, {rate} rps, written by `percentes sweep` from {}.\n{body}",
        source.display()
    );
    let config_path = output.join(format!("{stem}.toml"));
    std::fs::write(&config_path, &text)?;
    let config = Config::parse(text.as_bytes()).with_context(|| {
        format!(
            "the rate's configuration {} derived from {} does not load",
            config_path.display(),
            source.display()
        )
    })?;
    let journal = output.join(format!("{stem}.pj"));
    let options = crate::scenario::recorder_options(journal.clone(), Progress::Quiet, None, tool);
    let summary = tool
        .record(&config, &options)
        .with_context(|| format!("recording {stem}"))?;
    if summary.status.name() != "completed" {
        bail!(
            "{stem} ended {} ({}): the sweep stops",
            summary.status.name(),
            summary.reason
        );
    }
    let file = JournalFile::open(&journal)?;
    let (_, report) = crate::scenario::analyze_journal(&file, &journal, tool, diagnose)?;
    Ok((format!("{stem}.pj"), report))
}
