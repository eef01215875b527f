//! Scenario files and the study runner: `percentes scenario list|run`, and the demo.
//!
//! A scenario file (`scenarios/catalogue/*.toml`) declares one governed experiment the way
//! seeds/004 asks: the question and the expected behaviour, the budgets and abort conditions, the
//! local testbed it runs on, and the run configuration as a template. The configuration carries
//! the `[declaration]` (experiment id, release, dataset, target, boundary, protected and shed
//! traffic, what must stay authoritative, the cleanup path, the abort triggers the recorder
//! enforces), so the declaration is in the journal before injection. A scenario that cannot be
//! executed here says why in `refused` and is never faked.
//!
//! `run` starts the testbed, fills the template's placeholders with the testbed's addresses,
//! records through the real recorder, plays the orchestrator's part around the recorder's fault,
//! verifies and analyzes the journal, and writes everything into one folder. Runs are always
//! time-compressed (dev profile, NOT PUBLISHABLE) unless `--experiment` asks for the pinned
//! full-length profile.

use percentes_formats::spec::Spec;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crate::error::{bail, Context, ErrorKind, Result, StudyError};

use crate::Tool;
use percentes_analyzer::model;
use percentes_analyzer::{analysis, report, JournalFile};
use percentes_formats::config::Config;
use percentes_formats::pins;
use percentes_recorder::run::{self, Options, Progress, TimelineInbox};
use percentes_scenarios::testbed::isolation_unavailable;
use serde::Deserialize;

mod bed;
mod change;
mod rollout;
use bed::{start_bed, Bed};
pub use bed::{OrchestratorPlan, TestbedPlan};

/// The replica-loss clean delete, which `percentes demo` runs.
pub const DEMO_SCENARIO: &str =
    include_str!("../../scenarios/catalogue/replica-loss-clean-delete.toml");

/// One scenario file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// What the scenario asks and expects (seeds/004).
    pub scenario: Meta,
    #[serde(default)]
    /// The degradation budgets checked against the fault window.
    pub budgets: Option<Budgets>,
    #[serde(default)]
    /// The statuses and classes each route may end with.
    pub expect: Vec<Expect>,
    #[serde(default)]
    /// The testbed it runs on; absent when the scenario is refused.
    pub testbed: Option<TestbedPlan>,
    #[serde(default)]
    /// The run configuration template; absent when the scenario is refused.
    pub run: Option<RunPlan>,
}

/// `[run]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunPlan {
    /// The run configuration without `schema_version`, `profile`, `[dev]` and `[calibration]`
    /// (the runner writes those), with placeholders: `{service}`, `{replica:NAME}`,
    /// `{pid-file:NAME}`, `{netns:NAME}`, `{nameserver}` (with `[testbed.names]`),
    /// `{partition_s}` (the pinned partition after the time factor) and `{serving_rate_rps}`
    /// (lambda_r x the replicas that serve once the testbed's change is done, one more after a
    /// scale-out: the derived rate, for a run whose `target.replicas` names more replicas than
    /// serve at once, as a rollout's does).
    pub config: String,
}

/// `[scenario]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Meta {
    /// The scenario's name (the file's stem).
    pub name: String,
    /// The question the experiment answers (seeds/004's catalogue).
    pub question: String,
    /// What the service is expected to do.
    pub expectation: String,
    /// Conditions that end the experiment as invalid or escaped rather than as a finding.
    #[serde(default)]
    pub abort: Vec<String>,
    /// Why this scenario cannot run here; such a scenario is listed and refused, never faked.
    #[serde(default)]
    pub refused: Option<String>,
    /// Why this scenario runs under the dev profile only (a pin it departs from, said); `run
    /// --experiment` refuses it with this reason.
    #[serde(default)]
    pub dev_only: Option<String>,
}

/// `[budgets]`: degradation bounds during the fault window, in experiment time (the dev profile
/// divides the latency budgets by its time factor, as it divides every duration).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Budgets {
    /// The route the budgets bound (its segment of the fault window); all traffic without one.
    pub route: Option<String>,
    /// End-to-end p95 budget over the fault window.
    pub e2e_p95_ms: Option<f64>,
    /// End-to-end p99 budget over the fault window.
    pub e2e_p99_ms: Option<f64>,
    /// Error-rate budget over the fault window.
    pub error_rate: Option<f64>,
}

/// `[[expect]]`: what one route's requests may end as in one window (seeds/004's expectations,
/// made checkable): the HTTP statuses and terminal classes allowed.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Expect {
    /// The route's label.
    pub route: String,
    /// The windows whose requests are checked (default: fault and recovery, everything from
    /// T_inject to the end of the measured span, whatever the §5 detector decided).
    #[serde(default = "after_injection")]
    pub windows: Vec<String>,
    #[serde(default)]
    /// HTTP statuses its requests may end with.
    pub statuses: Vec<u16>,
    #[serde(default)]
    /// Response classes its requests may end with.
    pub classes: Vec<String>,
}

fn after_injection() -> Vec<String> {
    vec!["fault".into(), "recovery".into()]
}

impl Scenario {
    /// Parses a scenario file's text; `origin` names it in errors.
    pub fn parse(text: &str, origin: &str) -> Result<Scenario> {
        let scenario: Scenario =
            toml::from_str(text).with_context(|| format!("{origin}: not a valid scenario file"))?;
        if let Some(plan) = &scenario.testbed {
            plan.check()
                .with_context(|| format!("{origin}: [testbed]"))?;
        }
        let names = scenario.testbed.as_ref().is_some_and(|t| t.names.is_some());
        if names
            && !scenario
                .run
                .as_ref()
                .is_some_and(|r| r.config.contains("{nameserver}"))
        {
            bail!("{origin}: [testbed.names] serves the replicas' SRV names from a DNS server on a port of its own, which the recorder must ask: set target.nameserver = \"{{nameserver}}\" in [run] config");
        }
        if scenario.scenario.refused.is_none() {
            for (what, missing) in [
                ("[testbed]", scenario.testbed.is_none()),
                ("[run] config", scenario.run.is_none()),
            ] {
                if missing {
                    bail!("{origin}: a runnable scenario needs {what} (or `refused` with the reason it cannot run)");
                }
            }
        }
        Ok(scenario)
    }

    /// Reads and parses a scenario file.
    pub fn load(path: &Path) -> Result<Scenario> {
        let text = percentes_formats::files::read_text_bounded(
            path,
            percentes_formats::files::CONFIG_FILE_BYTES_MAX,
            "a scenario",
        )
        .with_context(|| format!("cannot read scenario {}", path.display()))?;
        Scenario::parse(&text, &path.display().to_string())
    }
}

/// How a run is timed.
#[derive(Clone, Copy, Debug)]
pub enum Timing {
    /// The dev profile with this time factor.
    Dev(u32),
    /// The pinned full-length experiment profile.
    Experiment,
}

impl Timing {
    fn factor(self) -> u32 {
        match self {
            Timing::Dev(f) => f,
            Timing::Experiment => 1,
        }
    }
}

/// Fills `{name}` placeholders; an unknown one is an error that names it.
fn fill(template: &str, values: &BTreeMap<String, String>) -> Result<String> {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        let close = after.find('}');
        let key = close.map(|c| &after[..c]);
        match key {
            Some(k)
                if !k.is_empty()
                    && k.chars()
                        .all(|c| c.is_ascii_alphanumeric() || "-_:.".contains(c))
                    && k.chars().next().is_some_and(|c| c.is_ascii_lowercase()) =>
            {
                let value = values.get(k).with_context(|| {
                    format!(
                        "the scenario's config names the placeholder {{{k}}}, which this testbed does not define (it defines: {})",
                        values.keys().map(|k| format!("{{{k}}}")).collect::<Vec<_>>().join(", ")
                    )
                })?;
                out.push_str(value);
                rest = &after[k.len() + 1..];
            }
            // Not a placeholder (an inline table, say): copied as it is.
            _ => {
                out.push('{');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    Ok(out)
}

/// The run configuration's text for this testbed and timing.
fn config_text(
    scenario: &Scenario,
    plan: &bed::TestbedPlan,
    timing: Timing,
    values: &BTreeMap<String, String>,
) -> Result<String> {
    let template = scenario.run.as_ref().map_or("", |r| r.config.as_str());
    let profile = match timing {
        // The testbed's mocks are sized to the compressed timeline, the censoring horizon
        // with it (the black-hole study censors at exactly the timeout): said, not defaulted.
        Timing::Dev(f) => {
            // A testbed change may state its measurement's real length (replicas slow to
            // start).
            let measure = plan
                .measure_s()
                .map_or(String::new(), |s| format!("measure_s = {s}\n"));
            format!(
                "profile = \"dev\"\n\n[dev]\ntime_factor = {f}\nscale_timeout = true\n{measure}"
            )
        }
        Timing::Experiment => "profile = \"experiment\"\n".into(),
    };
    let body = fill(template, values)?;
    Ok(format!(
        "# {}: written by the percentes study runner from its scenario file.\nschema_version = 1\n{profile}\n[calibration]\n{}{body}",
        scenario.scenario.name,
        plan.calibration_lines()
    ))
}

/// `percentes scenario run` (and the demo): returns the exit code the run earned. `diagnose`
/// analyzes an invalid run's statistics anyway, marked NOT PUBLISHABLE (`--diagnose`).
pub fn run(
    scenario: &Scenario,
    output: &Path,
    force: bool,
    timing: Timing,
    tool: &Tool,
    diagnose: bool,
) -> Result<ExitCode> {
    let meta = &scenario.scenario;
    if let Some(why) = &meta.refused {
        bail!(
            "scenario {} cannot run: {why}. It is listed so that its absence is visible; nothing was recorded",
            meta.name
        );
    }
    let plan = scenario
        .testbed
        .as_ref()
        .context("checked by Scenario::parse")?;
    if plan.isolated {
        if let Some(why) = isolation_unavailable() {
            bail!("scenario {} needs an isolated testbed (network namespaces), which cannot start here: {why}", meta.name);
        }
    }
    if let (Timing::Experiment, Some(why)) = (timing, &meta.dev_only) {
        bail!(
            "scenario {} runs under the dev profile only: {why}. Run it with --time-factor",
            meta.name
        );
    }
    let factor = timing.factor();
    // A testbed change's run has no fault of its own (checked below): warm-up, measurement,
    // cooldown.
    let scaled_s = |s: i64| s as f64 / f64::from(factor);
    let schedule_s = match plan.changes_itself() {
        true => {
            scaled_s(pins::value::EXPERIMENT_WARMUP_S + pins::value::EXPERIMENT_COOLDOWN_S)
                + plan
                    .measure_s()
                    .unwrap_or_else(|| scaled_s(pins::value::EXPERIMENT_BASELINE_S))
        }
        false => scaled_s(pins::FAULT_RUN_SCHEDULE_S),
    };
    let minutes = schedule_s / 60.0;
    out!("percentes scenario {}: {}", meta.name, meta.question);
    match timing {
        Timing::Dev(f) => out!(
            "About {:.1} min of load (dev profile, time factor {f}); everything derived from it is labelled NOT PUBLISHABLE.",
            minutes
        ),
        Timing::Experiment => out!(
            "About {minutes:.0} min of load: the pinned experiment profile, every pin in force."
        ),
    }
    prepare_folder(output, force)?;
    // A signal while a real testbed starts (minutes, for a serving engine) stops it cleanly:
    // its processes and control groups are taken down, never left behind.
    let stop = run::stop_on_signals();
    let (mut bed, mut values) = start_bed(plan, output, factor, &stop)?;
    // The partition as the recorder will time it: parse once with a stand-in to read the pin.
    let mut probe_values = values.clone();
    probe_values.insert("partition_s".into(), "0".into());
    probe_values.insert("serving_rate_rps".into(), "1.0".into());
    let probe = Config::parse(config_text(scenario, plan, timing, &probe_values)?.as_bytes())
        .with_context(|| format!("scenario {}: its configuration does not load", meta.name))?;
    // The replicas that serve once the testbed's change is done: a rollout replaces them, a
    // scale-out adds one.
    let serving = plan.replicas + usize::from(plan.scale_out.is_some());
    values.insert(
        "serving_rate_rps".into(),
        format!(
            "{:.3}",
            serving as f64 * probe.number(&pins::CALIBRATION_LAMBDA_R_FRACTION) * plan.capacity_rps
        ),
    );
    values.insert(
        "partition_s".into(),
        format!(
            "{:.3}",
            probe.duration_ns(&pins::FAULT_PARTITION_S) as f64 / 1e9
        ),
    );
    let text = config_text(scenario, plan, timing, &values)?;
    let config_path = output.join("run.toml");
    std::fs::write(&config_path, &text)?;
    let config = Config::parse(text.as_bytes())
        .with_context(|| format!("scenario {}: its configuration does not load", meta.name))?;
    if config.declaration.is_none() {
        bail!(
            "scenario {}: its configuration has no [declaration]; a governed experiment records its blast radius before injection (seeds/004)",
            meta.name
        );
    }
    let change_after =
        change::check(plan, &config, factor).with_context(|| format!("scenario {}", meta.name))?;
    out!(
        "testbed: {} {}, {} replicas{}; config {}",
        if plan.proxy.is_some() {
            "HAProxy"
        } else {
            "router"
        },
        bed.service(),
        plan.replicas,
        bed.kind(),
        config_path.display()
    );

    let journal = output.join("run.pj");
    let inbox = TimelineInbox::default();
    let mut options = recorder_options(journal.clone(), Progress::Human, Some(inbox.clone()), tool);
    options.target_placement = bed.placement();
    options.proxy = bed.proxy();
    let finished = Arc::new(AtomicBool::new(false));
    let recorder = {
        let finished = Arc::clone(&finished);
        let (config, tool) = (config.clone(), tool.clone());
        std::thread::spawn(move || {
            let result = tool.record(&config, &options);
            finished.store(true, Ordering::Relaxed);
            result
        })
    };
    bed::orchestrate(plan, &mut bed, &config, factor, (&inbox, &finished));
    let changed = change::control(plan, &mut bed, change_after, factor, (&inbox, &finished));
    let summary = recorder
        .join()
        .map_err(|_| StudyError::new(ErrorKind::Record, "the recorder thread panicked"))??;
    let teardown = match bed {
        Bed::Real(real) => Some(real.teardown()),
        other => {
            drop(other);
            None
        }
    };
    out!(
        "\njournal: {} ({})",
        journal.display(),
        summary.status.name()
    );

    let file = JournalFile::open(&journal)?;
    let verified = file.verify(&Default::default());
    out!("verify: {}", verified.verdict.name());
    // A rollout's readings are by release: every window cut by the release that served.
    let by = match plan.rollout {
        Some(_) => vec![model::SegmentColumn::Release],
        None => Vec::new(),
    };
    let (loaded, result) = analyze_journal_by(&file, &journal, tool, (diagnose, by))?;
    let report_dir = output.join("report");
    let written = report::write(&result, &loaded.requests, &report_dir)?;
    let mut declaration = declaration_text(scenario, &config, &result, factor);
    let steps: Vec<(f64, String)> = loaded
        .events
        .all(percentes_formats::journal::records::EventKind::Timeline)
        .map(|e| (e.at_ns as f64 / 1e9, format!("{}: {}", e.subject, e.detail)))
        .collect();
    declaration.push_str(&change::words(plan, &changed, &steps, teardown.as_deref()));
    std::fs::write(output.join("scenario.md"), &declaration)?;
    headline(&result);
    out_part!("\n{declaration}");
    out!(
        "\nwrote {} into {}; open {} in a browser",
        written.join(", "),
        report_dir.display(),
        report_dir.join("report.html").display()
    );
    use percentes_formats::journal::records::SealStatus;
    Ok(match summary.status {
        // Stopped by a signal or a recorder error: the report is for diagnosis only (as
        // `record` says with its exit 1).
        SealStatus::Aborted => {
            out!(
                "the run was aborted ({}); the report is for diagnosis only; exit 1",
                summary.reason
            );
            ExitCode::from(1)
        }
        _ if result.validity.valid => ExitCode::SUCCESS,
        _ => {
            for line in report::client_words(&result, &journal) {
                out!("{line}");
            }
            out!("the run failed a validity gate (see report.md); exit 2");
            ExitCode::from(2)
        }
    })
}

/// Loads an open journal and analyzes it under the current spec ([`Spec::CURRENT`]), as this
/// binary's analyses of its own recordings do; `diagnose` computes an invalid run's statistics
/// for diagnosis ([`model::Analyzer::diagnose`]).
pub fn analyze_journal(
    file: &JournalFile,
    path: &Path,
    tool: &Tool,
    diagnose: bool,
) -> Result<(percentes_analyzer::load::Run, model::Report)> {
    analyze_journal_by(file, path, tool, (diagnose, Vec::new()))
}

/// [`analyze_journal`], every window also cut by the columns `by` names (`analyze --by`).
pub fn analyze_journal_by(
    file: &JournalFile,
    path: &Path,
    tool: &Tool,
    (diagnose, by): (bool, Vec<model::SegmentColumn>),
) -> Result<(percentes_analyzer::load::Run, model::Report)> {
    let run = percentes_analyzer::load::load(file)
        .with_context(|| format!("cannot analyze {}", path.display()))?;
    let report = analysis::analyze(
        &run,
        file,
        Spec::CURRENT,
        &model::Analyzer {
            version: tool.version.clone(),
            commit: tool.commit.clone(),
            diagnose,
            by,
        },
    );
    Ok((run, report))
}

/// The recorder's options for a run this binary drives itself (a scenario, a calibration step):
/// one worker, no signing key, overwrite, stop on SIGINT or SIGTERM.
pub fn recorder_options(
    output: PathBuf,
    progress: Progress,
    timeline: Option<TimelineInbox>,
    tool: &Tool,
) -> Options {
    Options {
        output,
        force: true,
        signing_key: None,
        tool_version: tool.version.clone(),
        tool_commit: tool.commit.clone(),
        workers: 1,
        canary: true,
        progress,
        stop: run::stop_on_signals(),
        timeline,
        events_socket: None,
        shard: percentes_formats::journal::manifest::Shard::WHOLE,
        start_at_ns: None,
        heads: None,
        cpus: None,
        // A person watching (scenario run, demo) is told at once when this host cannot hold
        // the client gate; the quiet steps of a sweep or calibration are not delayed by it.
        host_check: progress == Progress::Human,
        target_placement: None,
        proxy: None,
    }
}

/// An earlier run's folder (it holds run.toml) is replaced; any other non-empty folder needs
/// `force`.
fn prepare_folder(output: &Path, force: bool) -> Result<()> {
    let earlier = output.join("run.toml").is_file() || output.join("demo.toml").is_file();
    if output.exists() && !force && !earlier && std::fs::read_dir(output)?.next().is_some() {
        bail!(
            "{} exists, is not empty and holds no earlier run; pass --force to write there anyway",
            output.display()
        );
    }
    // What a run writes here is removed first, so nothing of an earlier run (a plot that an
    // invalid run would not draw, a pid file) survives to be read as this one's. Anything else
    // in the folder is left alone, and so is a folder that holds no earlier run (`--force`).
    if earlier {
        remove_files_named(output, |name| {
            matches!(
                name,
                "run.pj"
                    | "run.toml"
                    | "demo.toml"
                    | "mock.toml"
                    | "scenario.md"
                    | "haproxy.cfg"
                    | "haproxy.log"
                    | "haproxy.sock"
            ) || name.ends_with(".pid")
                || (name.starts_with("replica-") && name.ends_with(".log"))
        })?;
        let report = output.join("report");
        if report.is_dir() {
            std::fs::remove_dir_all(&report)
                .with_context(|| format!("cannot remove the earlier {}", report.display()))?;
        }
    }
    std::fs::create_dir_all(output).with_context(|| format!("cannot create {}", output.display()))
}

/// Removes the plain files directly in `folder` whose names `ours` accepts: an earlier run's
/// outputs, before a new run writes its own there. Folders and other files stay.
pub fn remove_files_named(folder: &Path, ours: impl Fn(&str) -> bool) -> Result<()> {
    for entry in std::fs::read_dir(folder)? {
        let path = entry?.path();
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        if ours(&name) && path.is_file() {
            std::fs::remove_file(&path)
                .with_context(|| format!("cannot remove the earlier {}", path.display()))?;
        }
    }
    Ok(())
}

/// The scenario's declaration and how the run measured against its budgets, as markdown.
fn declaration_text(
    scenario: &Scenario,
    config: &Config,
    report: &model::Report,
    factor: u32,
) -> String {
    use std::fmt::Write;
    let meta = &scenario.scenario;
    let mut out = format!(
        "# Scenario {}\n\n- question: {}\n- expectation: {}\n",
        meta.name, meta.question, meta.expectation
    );
    if let Some(d) = &config.declaration {
        let _ = writeln!(
            out,
            "\n## Declaration (in the journal before injection)\n\n- experiment: {}\n- release: {}\n- dataset: {}\n- target: {}\n- boundary: {}",
            d.experiment_id, d.release, d.dataset, d.target, d.boundary
        );
        for (label, items) in [
            ("protected", &d.protected),
            ("may shed", &d.shed),
            ("must stay authoritative", &d.authoritative),
            ("protection", &d.protections),
        ] {
            for item in items {
                let _ = writeln!(out, "- {label}: {item}");
            }
        }
        let _ = writeln!(out, "- cleanup path: {}", d.cleanup);
        if let Some(rate) = d.abort.protected_failure_rate {
            let _ = writeln!(
                out,
                "- abort trigger: protected routes {:?} failing more than {rate} over {} s (at least {} requests)",
                d.protected_routes, d.abort.window_s, d.abort.min_requests
            );
        }
        if d.abort.undeclared_replica_errors {
            let _ = writeln!(
                out,
                "- abort trigger: an error on a replica other than {}",
                d.target
            );
        }
        if d.abort.cleanup_failure {
            let _ = writeln!(out, "- abort trigger: the fault's removal fails");
        }
    }
    if let Some(c) = &report.cleanup {
        let _ = writeln!(out, "\n## Cleanup\n\n{}", c.verdict);
    }
    if let Some(e) = &report.escape {
        let _ = writeln!(
            out,
            "\n## ESCAPED at {:.3} s ({}): see report.md for what to retain",
            e.at_s, e.trigger
        );
    }
    if !meta.abort.is_empty() {
        let _ = writeln!(out, "\n## Abort conditions\n");
        for a in &meta.abort {
            let _ = writeln!(out, "- {a}");
        }
    }
    if let Some(b) = &scenario.budgets {
        let _ = writeln!(
            out,
            "\n## Budgets in the fault window{}\n",
            b.route
                .as_deref()
                .map_or(String::new(), |r| format!(", route {r}"))
        );
        if factor > 1 {
            let _ = writeln!(out, "Latency budgets are divided by the time factor {factor}, as every duration of the dev profile is.\n");
        }
        let fault = report.windows.iter().find(|w| w.window == "fault");
        let segment = b
            .route
            .as_deref()
            .and_then(|r| fault.and_then(|w| w.routes.iter().find(|s| s.route == r)));
        let (p95, p99, errors) = match (&b.route, fault, segment) {
            (Some(_), _, Some(s)) => (s.e2e_p95_us, s.e2e_p99_us, s.error_rate),
            (Some(_), _, None) => (None, None, None),
            (None, Some(w), _) => {
                let q = |k: &str| {
                    w.e2e
                        .percentiles_us
                        .iter()
                        .find(|(q, _)| q == k)
                        .map(|(_, v)| *v)
                };
                (q("p95"), q("p99"), w.error_rate.value)
            }
            (None, None, _) => (None, None, None),
        };
        let verdict = |measured: Option<f64>, limit: f64, unit: &str| match measured {
            None => "not measured (withheld or no sample)".to_owned(),
            Some(m) if m <= limit => format!("{m:.3}{unit}: within"),
            Some(m) => format!("{m:.3}{unit}: OVER"),
        };
        let as_ms = |us: Option<u64>| us.map(|v| v as f64 / 1000.0);
        if let Some(ms) = b.e2e_p95_ms {
            let limit = ms / f64::from(factor);
            let _ = writeln!(
                out,
                "- e2e p95 <= {limit:.3} ms: {}",
                verdict(as_ms(p95), limit, " ms")
            );
        }
        if let Some(ms) = b.e2e_p99_ms {
            let limit = ms / f64::from(factor);
            let _ = writeln!(
                out,
                "- e2e p99 <= {limit:.3} ms: {}",
                verdict(as_ms(p99), limit, " ms")
            );
        }
        if let Some(rate) = b.error_rate {
            let _ = writeln!(out, "- error rate <= {rate}: {}", verdict(errors, rate, ""));
        }
    }
    if !scenario.expect.is_empty() {
        let _ = writeln!(out, "\n## Expectations, checked\n");
        for e in &scenario.expect {
            let one_route = matches!(&config.routes[..], [only] if only.label == e.route);
            let _ = writeln!(out, "- {}", expectation(e, report, one_route));
        }
    }
    out
}

/// One `[[expect]]` checked against its route's segments of its windows (counts add up).
fn expectation(e: &Expect, report: &model::Report, one_route: bool) -> String {
    let span = e.windows.join(" + ");
    let windows: Vec<&model::WindowReport> = report
        .windows
        .iter()
        .filter(|w| e.windows.iter().any(|name| name == w.window))
        .collect();
    if windows.is_empty() {
        return format!(
            "{} in {span}: not measured (the windows are withheld or absent)",
            e.route
        );
    }
    let Tally {
        scheduled,
        statuses,
        classes,
    } = match tally(e, &windows, one_route) {
        Ok(tally) => tally,
        Err(why) => return format!("{} in {span}: {why}", e.route),
    };
    let mut unexpected = Vec::new();
    if !e.statuses.is_empty() {
        for (status, n) in &statuses {
            if !e.statuses.contains(status) {
                unexpected.push(format!("status {status} x{n}"));
            }
        }
    }
    if !e.classes.is_empty() {
        for (class, n) in &classes {
            if !e.classes.contains(class) {
                unexpected.push(format!("class {class} x{n}"));
            }
        }
    }
    let seen = format!(
        "statuses {}; classes {}",
        if statuses.is_empty() {
            "not reported by route".to_owned()
        } else {
            statuses
                .iter()
                .map(|(s, n)| format!("{s} x{n}"))
                .collect::<Vec<_>>()
                .join(", ")
        },
        classes
            .iter()
            .map(|(c, n)| format!("{c} {n}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    if unexpected.is_empty() {
        format!(
            "{} in {span} ({scheduled} scheduled): as expected ({seen})",
            e.route
        )
    } else {
        format!(
            "{} in {span} ({scheduled} scheduled): UNEXPECTED {} (allowed statuses {:?}, classes {:?})",
            e.route,
            unexpected.join(", "),
            e.statuses,
            e.classes
        )
    }
}

/// What an expectation's route scheduled, answered and ended as over its windows.
#[derive(Default)]
struct Tally {
    scheduled: u64,
    statuses: BTreeMap<u16, u64>,
    classes: BTreeMap<String, u64>,
}

/// Why an expectation could not be tallied.
enum Untallied {
    /// The report has no segment of its route.
    NoRoute,
    /// Statuses were asked of a run of one route, which a report does not segment.
    StatusesNotByRoute,
}

impl std::fmt::Display for Untallied {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Untallied::NoRoute => "no such route in the report",
            Untallied::StatusesNotByRoute => "NOT CHECKED: a run of one route reports no statuses by route; state the expectation as classes",
        })
    }
}

/// The expectation's route over `windows`: its route segment of each, or with `one_route` (the
/// run's only route, which a report does not segment) the windows' own counts, which carry
/// classes but not statuses.
fn tally(
    e: &Expect,
    windows: &[&model::WindowReport],
    one_route: bool,
) -> std::result::Result<Tally, Untallied> {
    let mut t = Tally::default();
    for w in windows {
        let (counted, by_class) = match w.routes.iter().find(|s| s.route == e.route) {
            Some(segment) => {
                for (s, n) in &segment.statuses {
                    *t.statuses.entry(*s).or_default() += n;
                }
                (segment.scheduled, &segment.classes)
            }
            None if one_route && w.routes.is_empty() => {
                if !e.statuses.is_empty() {
                    return Err(Untallied::StatusesNotByRoute);
                }
                (w.scheduled, &w.classes)
            }
            None => return Err(Untallied::NoRoute),
        };
        t.scheduled += counted;
        for (c, n) in by_class {
            *t.classes.entry(c.clone()).or_default() += n;
        }
    }
    Ok(t)
}

/// The headline numbers on the terminal.
pub fn headline(report: &model::Report) {
    out!(
        "\n== headline numbers{} ==",
        if report.not_publishable.is_empty() {
            String::new()
        } else {
            " (NOT PUBLISHABLE: see report.md)".into()
        }
    );
    for g in report.validity.failed() {
        out!("gate {}: {} ({})", g.id, g.status, g.observed);
    }
    for w in &report.windows {
        let p50 = w
            .ttft
            .percentiles_us
            .iter()
            .find(|(q, _)| q == "p50")
            .map(|(_, v)| *v);
        out!(
            "{:<9} scheduled {:>5}  errored {:.4}  censored {:.4}  goodput {}  TTFT p50 {}  completion within 1 s {:.4}",
            w.window,
            w.scheduled,
            w.error_rate.value.unwrap_or(0.0),
            w.censored_rate.value.unwrap_or(0.0),
            w.goodput.value.map_or("n/a".into(), |g| format!("{g:.4}")),
            p50.map_or("n/a".into(), |us| format!("{:.1} ms", us as f64 / 1000.0)),
            w.completion.within_1s
        );
    }
    if let Some(f) = &report.in_flight_at_fire {
        let o = &f.on_victim;
        out!(
            "in flight on {} at fire: {} errored, {} censored, {} completed",
            f.victim,
            o.errored,
            o.censored,
            o.completed
        );
    }
    if let Some(r) = &report.recovery {
        out!("{}", r.label);
        let (equilibrium, baseline) = if r.variant == "degradation" {
            ("the degraded equilibrium", "the pre-fault baseline")
        } else {
            (
                "the single-replica equilibrium",
                "the two-replica pre-fault baseline",
            )
        };
        for (to, ttr) in [
            (equilibrium, &r.to_equilibrium),
            (baseline, &r.to_pre_fault),
        ] {
            out!("time to {to}: {}", ttr.text);
            ttr.flags.iter().for_each(|f| out!("  FLAG: {f}"));
        }
        if let Some(relapse) = &r.relapse {
            out!("RELAPSE: {relapse}");
        }
        for b in r
            .decomposition
            .iter()
            .filter(|b| b.since_anchor_s.is_some())
        {
            out!(
                "  {}: {:.3} s after the fire",
                b.boundary,
                b.since_anchor_s.unwrap_or(0.0)
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn catalogue() -> Vec<(PathBuf, Scenario)> {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenarios/catalogue");
        let mut all: Vec<(PathBuf, Scenario)> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "toml"))
            .map(|p| {
                let s = Scenario::load(&p).unwrap();
                (p, s)
            })
            .collect();
        all.sort_by(|a, b| a.0.cmp(&b.0));
        all
    }

    /// Stand-in values for every placeholder a two-replica testbed defines.
    fn values() -> BTreeMap<String, String> {
        let mut v = BTreeMap::new();
        v.insert("service".into(), "127.0.0.1:9000".into());
        v.insert("partition_s".into(), "12.000".into());
        v.insert("nameserver".into(), "127.0.0.1:5353".into());
        v.insert("serving_rate_rps".into(), "41.600".into());
        // A rollout's testbed declares the next release's replicas too.
        for (i, name) in ["replica-2", "replica-3"].iter().enumerate() {
            v.insert(format!("replica:{name}"), format!("127.0.0.1:900{}", i + 3));
        }
        for (i, name) in ["replica-0", "replica-1"].iter().enumerate() {
            v.insert(format!("replica:{name}"), format!("127.0.0.1:900{}", i + 1));
            v.insert(format!("pid-file:{name}"), format!("/tmp/{name}.pid"));
            v.insert(format!("netns:{name}"), format!("ns{i}"));
        }
        v
    }

    #[test]
    fn every_runnable_catalogue_scenario_loads_under_dev_and_experiment() {
        let all = catalogue();
        let names: Vec<&str> = all.iter().map(|(_, s)| s.scenario.name.as_str()).collect();
        for expected in [
            "replica-loss-clean-delete",
            "replica-loss-black-hole",
            "pod-churn",
            "store-outage-under-spike",
            "noisy-neighbour-cpu-throttle",
            "load-under-rollout",
            "load-under-rollback",
        ] {
            assert!(names.contains(&expected), "{expected} missing: {names:?}");
        }
        for (path, s) in &all {
            let Some(plan) = &s.testbed else {
                assert!(s.scenario.refused.is_some(), "{}", path.display());
                continue;
            };
            assert_eq!(
                path.file_stem().unwrap().to_str().unwrap(),
                s.scenario.name,
                "a scenario file is named after its scenario"
            );
            let timings: &[Timing] = match &s.scenario.dev_only {
                Some(why) => {
                    assert!(why.len() > 20, "{}: dev_only says why", path.display());
                    &[Timing::Dev(10)]
                }
                None => &[Timing::Dev(10), Timing::Experiment],
            };
            for &timing in timings {
                let text = config_text(s, plan, timing, &values()).unwrap();
                let config = Config::parse(text.as_bytes())
                    .unwrap_or_else(|e| panic!("{}: {e}\n{text}", path.display()));
                assert_eq!(config.calibration.lambda_max_rps, Some(plan.capacity_rps));
                let d = config
                    .declaration
                    .as_ref()
                    .expect("a runnable scenario declares");
                match plan.changes_itself() {
                    // A testbed change is the change under test: no fault of its own, (for a
                    // rollout) the release map, and a start the runner checks before it records.
                    true => {
                        change::check(plan, &config, timing.factor())
                            .unwrap_or_else(|e| panic!("{}: {e:#}", path.display()));
                    }
                    false => {
                        assert!(config.fault.victim.is_some(), "{}", path.display());
                        assert_eq!(Some(&d.target), config.fault.victim.as_ref());
                    }
                }
                // Every route an expectation or a budget names is a route of the run.
                let labels: Vec<&str> = config.routes.iter().map(|r| r.label.as_str()).collect();
                for route in s
                    .expect
                    .iter()
                    .map(|e| e.route.as_str())
                    .chain(s.budgets.iter().filter_map(|b| b.route.as_deref()))
                {
                    assert!(
                        labels.contains(&route),
                        "{}: {route} is not a route",
                        path.display()
                    );
                }
            }
        }
    }

    #[test]
    fn the_demo_is_the_catalogues_clean_delete() {
        let built_in = Scenario::parse(DEMO_SCENARIO, "built-in").unwrap();
        assert_eq!(built_in.scenario.name, "replica-loss-clean-delete");
    }

    #[test]
    fn placeholders_are_filled_and_an_unknown_one_is_named() {
        let v = values();
        assert_eq!(
            fill("a = \"{service}\"\nb = { c = 1 }\n", &v).unwrap(),
            "a = \"127.0.0.1:9000\"\nb = { c = 1 }\n"
        );
        let e = fill("x = \"{replica:replica-7}\"", &v)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("{replica:replica-7}") && e.contains("{service}"),
            "{e}"
        );
    }

    #[test]
    fn a_scenario_without_its_parts_or_a_reason_is_refused_at_load() {
        let e = Scenario::parse(
            "[scenario]\nname = \"x\"\nquestion = \"q\"\nexpectation = \"e\"\n",
            "x.toml",
        )
        .unwrap_err();
        assert!(format!("{e:#}").contains("needs [testbed]"), "{e:#}");
        let e = Scenario::parse(
            "[scenario]\nname = \"x\"\nquestion = \"q\"\nexpectation = \"e\"\nrefusd = \"typo\"\n",
            "x.toml",
        )
        .unwrap_err();
        assert!(format!("{e:#}").contains("refusd"), "{e:#}");
    }

    #[test]
    fn testbed_numbers_out_of_range_are_refused_at_load() {
        let base = "[scenario]\nname = \"x\"\nquestion = \"q\"\nexpectation = \"e\"\nrefused = \"not here\"\n[testbed]\n";
        for (testbed, says) in [
            ("capacity_rps = nan\norchestrator = { kind = \"none\" }", "capacity_rps"),
            ("capacity_rps = 0.0\norchestrator = { kind = \"none\" }", "capacity_rps"),
            ("replicas = 0\ncapacity_rps = 20.0\norchestrator = { kind = \"none\" }", "replicas"),
            ("capacity_rps = 20.0\nthrottle_factor = 0.1\norchestrator = { kind = \"none\" }", "throttle_factor"),
            ("capacity_rps = 20.0\norchestrator = { kind = \"replace\", detection_s = -1.0, reschedule_s = 1.0, weight_load_s = 1.0 }", "detection_s"),
        ] {
            let e = Scenario::parse(&format!("{base}{testbed}\n"), "x.toml").unwrap_err();
            assert!(format!("{e:#}").contains(says), "{testbed}: {e:#}");
        }
    }

    /// `[testbed.names]` is for real replicas under a supervisor, and the run's configuration
    /// must ask the testbed's DNS server, or its SRV names would go to the host's.
    #[test]
    fn named_replicas_need_a_supervisor_and_the_nameserver_placeholder() {
        let head = "[scenario]\nname = \"x\"\nquestion = \"q\"\nexpectation = \"e\"\n";
        let real = "[testbed]\ncapacity_rps = 2.0\norchestrator = { kind = \"supervise\" }\nproxy = { kind = \"haproxy\" }\n[testbed.names]\nkind = \"dnsmasq\"\n[testbed.replica]\ncommand = [\"serve\", \"{port}\"]\n";
        let config = |extra: &str| {
            format!("[run]\nconfig = '''\n[target]\nreplica_addresses = {{ \"replica-0\" = \"{{replica:replica-0}}\" }}\n{extra}'''\n")
        };
        let e = Scenario::parse(&format!("{head}{real}{}", config("")), "x.toml").unwrap_err();
        assert!(
            format!("{e:#}").contains("target.nameserver = \"{nameserver}\""),
            "{e:#}"
        );
        Scenario::parse(
            &format!("{head}{real}{}", config("nameserver = \"{nameserver}\"\n")),
            "x.toml",
        )
        .unwrap();
        let mocks = "[testbed]\ncapacity_rps = 2.0\norchestrator = { kind = \"none\" }\n[testbed.names]\nkind = \"dnsmasq\"\n";
        let e = Scenario::parse(
            &format!("{head}{mocks}{}", config("nameserver = \"{nameserver}\"\n")),
            "x.toml",
        )
        .unwrap_err();
        assert!(
            format!("{e:#}").contains("orchestrator \"supervise\""),
            "{e:#}"
        );
    }

    #[test]
    fn an_earlier_runs_outputs_are_removed_and_nothing_else() {
        let dir = percentes_testkit::Scratch::new("prepare");
        std::fs::create_dir_all(dir.join("report")).unwrap();
        for f in [
            "run.toml",
            "run.pj",
            "replica-1.pid",
            "notes.txt",
            "report/goodput.svg",
        ] {
            std::fs::write(dir.join(f), "x").unwrap();
        }
        prepare_folder(&dir, false).unwrap();
        let left: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(left, ["notes.txt"]);
        // A folder that holds no earlier run needs --force.
        let e = prepare_folder(&dir, false).unwrap_err().to_string();
        assert!(e.contains("--force"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_refused_scenario_runs_nothing_and_says_why() {
        let refused = Scenario::parse(
            "[scenario]\nname = \"elsewhere\"\nquestion = \"q\"\nexpectation = \"e\"\nrefused = \"needs an executable canary controller, which this testbed does not have\"\n",
            "inline",
        )
        .unwrap();
        let scratch = percentes_testkit::Scratch::new("refused");
        let out = scratch.join("out");
        let tool = Tool::of("test", "test");
        let e = run(&refused, &out, false, Timing::Dev(100), &tool, false)
            .unwrap_err()
            .to_string();
        assert!(e.contains("executable canary controller"), "{e}");
        assert!(
            !out.exists(),
            "a refused scenario must not create its folder"
        );
    }
}
