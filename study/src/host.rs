//! The recorder's host: `percentes doctor` (issue 32), the CPU list `--cpus` takes, and the end
//! of `percentes record`.

use std::process::ExitCode;
use std::time::Duration;

use percentes_analyzer::{figures, JournalFile};
use percentes_formats::config::thresholds::Threshold;
use percentes_formats::config::Config;
use percentes_recorder::run::{self, doctor, say, Options};

use crate::error::{bail, Result};
use crate::Tool;

/// Looks at this host for `seconds` (the ticker pinned to the first of `cpus`, a list such as
/// `0,2-3`, when given), prints what it saw and what to change; exit 2 when a check predicts a
/// failure of the client gate, 0 otherwise.
pub fn doctor(seconds: f64, cpus: Option<String>) -> Result<ExitCode> {
    if !(0.1..=600.0).contains(&seconds) {
        bail!("--seconds {seconds}: look for between 0.1 and 600 seconds");
    }
    let cpus = self::cpus(cpus.as_deref())?;
    let look = doctor::examine(Duration::from_secs_f64(seconds), cpus.as_deref())?;
    for line in look.lines() {
        out!("{line}");
    }
    Ok(if look.risks().is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(2)
    })
}

/// What `percentes record` shows once the journal is sealed (issue 37 items 1 and 4).
#[derive(Clone, Debug, Default)]
pub struct End {
    /// No figures in words (`--quiet`); the verdict's reasons still print.
    pub quiet: bool,
    /// The summary as JSON on standard output (`--json`).
    pub json: bool,
    /// Thresholds from the flags, checked with the configuration's own.
    pub fail_on: Vec<Threshold>,
}

/// `percentes record` once its configuration and options are settled: records, prints the
/// recorder's summary and the exit status's reason, then analyzes the sealed journal under the
/// current spec and prints its figures (unless quiet) and the thresholds' verdicts; when the
/// client failed its own gate, what it suffered in plain words. The exit status the run owes:
/// the recorder's (2 for an escaped run); else 2 for a run that failed a validity gate, as
/// `analyze` of the same journal exits (issue 54 item 2: a CI job that reads only the exit
/// code passed an invalid run), and 3 for a failed threshold.
pub fn record(config: &Config, options: &Options, tool: &Tool, end: &End) -> Result<ExitCode> {
    let summary = tool.record(config, options)?;
    for line in summary.lines() {
        if end.json {
            say(&line);
        } else {
            out!("{line}");
        }
    }
    let (code, why) = summary.exit();
    if let Some(why) = why {
        say(&format!("percentes: {why}"));
    }
    let journal = &options.output;
    let file = JournalFile::open(journal)?;
    let (_, report) = crate::scenario::analyze_journal(&file, journal, tool, false)?;
    let thresholds: Vec<Threshold> = config
        .thresholds
        .iter()
        .chain(&end.fail_on)
        .cloned()
        .collect();
    let figures = figures::of(&report, &thresholds);
    if end.json {
        print!("{}", figures::json(&figures));
    } else if !end.quiet || !thresholds.is_empty() {
        out!(
            "analysis under spec {} (`percentes analyze {}` writes the whole report):",
            report.provenance.spec_applied,
            journal.display()
        );
        let text = figures::text(&figures);
        for line in text.lines() {
            // Quiet keeps only the verdicts of the thresholds.
            if !end.quiet
                || line.starts_with("thresholds:")
                || line.starts_with("  PASS")
                || line.starts_with("  FAIL")
            {
                out!("{line}");
            }
        }
    }
    for line in percentes_analyzer::report::client_words(&report, journal) {
        say(&line);
    }
    // The exit `analyze` gives the same journal: a gate-invalid run is 2 with or without
    // thresholds (a run that cannot be judged passes none of them).
    Ok(ExitCode::from(match code {
        0 if !report.validity.valid => {
            let failed: Vec<String> = report.validity.failed().map(|g| g.id.to_string()).collect();
            say(&format!(
                "percentes: the run failed its validity gates ({}): nothing from it may be published; exit 2 (`percentes analyze {} --diagnose` shows its figures, each NOT PUBLISHABLE)",
                failed.join(", "),
                journal.display()
            ));
            2
        }
        0 if !figures.thresholds_hold() => 3,
        code => code,
    }))
}

/// A quick run's configuration text: the flags' model, or, without `--model`, the one model
/// the server lists at its pre-flight path (GET /v1/models); several or none refuse, naming
/// them and what to give.
pub fn quick_config(mut quick: percentes_formats::config::Quick) -> Result<String> {
    if quick.model.is_empty() {
        let probe = percentes_formats::config::Quick {
            model: "(asked of the server)".into(),
            ..quick.clone()
        };
        let text = probe
            .toml()
            .map_err(|e| crate::error::StudyError::refused(e.to_string()))?;
        let config = Config::parse(text.as_bytes())?;
        let models = run::served_models(&config).map_err(|why| {
            crate::error::StudyError::refused(format!(
                "--model not given, and the server could not say which it serves ({why}); give --model"
            ))
        })?;
        quick.model = match models.as_slice() {
            [one] => one.clone(),
            [] => bail!("--model not given, and the server lists no model; give --model"),
            many => bail!(
                "--model not given, and the server serves {}: choose one with --model",
                many.join(", ")
            ),
        };
        say(&format!(
            "percentes: the server serves one model, {}: measuring it",
            quick.model
        ));
    }
    let text = quick
        .toml()
        .map_err(|e| crate::error::StudyError::refused(e.to_string()))?;
    // A file a flag names is checked now, the error naming the flag (a recording's own check
    // would name the key the flag set).
    percentes_formats::config::check_quick_files(&text)
        .map_err(|e| crate::error::StudyError::refused(e.to_string()))?;
    Ok(text)
}

/// What a quick run measures, in one line for the terminal before it starts: the route, the
/// model, the offered load and the measured span, and where its configuration is (journaled;
/// `init --from-flags` writes it out). The configuration itself is not echoed: it is in the
/// journal's header for `inspect` and every later reader.
pub fn quick_line(config: &Config, journal: &std::path::Path) -> String {
    let route = config.routes.first().map_or("/", |r| r.path.as_str());
    let (start_ns, end_ns) = config.schedule_params().measured_span_ns();
    let load = match (config.workload.users, config.schedule.rate_rps) {
        (Some(users), _) => format!("{users} closed-loop users"),
        (None, Some(rate)) => format!("{rate} requests/s open loop"),
        (None, None) => "the trace's times".to_owned(),
    };
    // Issue 55 item 4: whose metrics are scraped, said before the run, not found after it.
    let scraped: Vec<String> = config
        .scrape_addresses()
        .values()
        .map(|a| format!("http://{a}{}", config.server_metrics.path()))
        .collect();
    let scraping = if scraped.is_empty() {
        String::new()
    } else {
        format!(
            " The server's own metrics are read from {} (--server-metrics off: not read).",
            scraped.join(", ")
        )
    };
    format!(
        "percentes: measuring {} at {}{route}: {load}, {:.1} s measured after {:.1} s of warm-up{}; the configuration these flags stand for is journaled (`percentes inspect {}` shows it, `percentes init --from-flags` with the same flags writes it out).{scraping}",
        config.target.model,
        config.target.base_url,
        (end_ns - start_ns) as f64 / 1e9,
        start_ns as f64 / 1e9,
        if config.target.stream { ", streamed" } else { "" },
        journal.display()
    )
}

/// A CPU list as the kernel writes one (`0,2-3`), ascending and without repeats; `None` for none.
pub fn cpus(list: Option<&str>) -> Result<Option<Vec<usize>>> {
    let Some(list) = list else {
        return Ok(None);
    };
    let mut cpus = Vec::new();
    for part in list.split(',').map(str::trim) {
        let number = |s: &str| -> Result<usize> {
            match s.trim().parse::<usize>() {
                Ok(n) if n < 4096 => Ok(n),
                _ => bail!("--cpus {list}: `{s}` is not a CPU number (a list reads `0,2-3`)"),
            }
        };
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b) = (number(a)?, number(b)?);
                if a > b {
                    bail!("--cpus {list}: the range `{part}` runs backwards");
                }
                cpus.extend(a..=b);
            }
            None => cpus.push(number(part)?),
        }
    }
    cpus.sort_unstable();
    cpus.dedup();
    Ok(Some(cpus))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cpu_list_reads_as_the_kernel_writes_it() {
        assert_eq!(cpus(None).unwrap(), None);
        assert_eq!(cpus(Some("3,0-1,1")).unwrap(), Some(vec![0, 1, 3]));
        for bad in ["", "a", "2-1", "1,,2", "-1", "99999"] {
            let e = cpus(Some(bad)).unwrap_err().to_string();
            assert!(e.contains("--cpus"), "{bad}: {e}");
        }
    }
}
