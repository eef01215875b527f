//! `percentes demo`: the replica-loss study end to end on this machine, with nothing to install.
//!
//! Two mock replicas behind the router (the testbed, as child processes on loopback), a
//! clean-delete study in the dev profile (time factor 10: about 1 m 45 s of load), recorded by the
//! real recorder, verified, analyzed, and written with its plots into one folder. The demo plays
//! the orchestrator's part around the recorder's fault: when the victim dies it removes the
//! endpoint (detection), reschedules the replica after a delay, lets it load, and marks it ready,
//! reporting each boundary into the journal's timeline.

use std::path::Path;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use percentes_analyzer::{analysis, estimate::incidence::Method, report, JournalFile};
use percentes_formats::config::Config;
use percentes_recorder::run::{self, Options, Progress, TimelineInbox};
use percentes_scenarios::testbed::Testbed;

/// After the victim dies, in experiment time (divided by the time factor): how long until the
/// orchestrator notices and removes its endpoint, until the replica is rescheduled, and how long
/// the new replica loads its weights (503 until then).
const DETECTION_S: f64 = 5.0;
const RESCHEDULE_S: f64 = 80.0;
const WEIGHT_LOAD_S: f64 = 40.0;
/// The capacity the demo's mock replicas are built to, and the configuration declares.
const LAMBDA_MAX_RPS: f64 = 20.0;

fn scaled(seconds: f64, time_factor: u32) -> Duration {
    Duration::from_secs_f64(seconds / f64::from(time_factor))
}

/// A mock whose capacity is exactly `LAMBDA_MAX_RPS`: constant timings, no slowdown, and a
/// service time of 40 % of the (dev-scaled) client timeout, so a request of the baseline completes
/// well inside the horizon while an overloaded survivor's queue pushes requests past it.
fn mock_text(time_factor: u32) -> String {
    let timeout_s = 30.0 / f64::from(time_factor);
    let seqs = (LAMBDA_MAX_RPS * 0.4 * timeout_s).round().max(1.0);
    let service_ms = seqs / LAMBDA_MAX_RPS * 1000.0;
    let ttft_ms = service_ms * 0.125;
    let gap_ms = (service_ms - ttft_ms) / 255.0;
    format!(
        "# The demo's mock replicas (written by `percentes demo`): capacity {LAMBDA_MAX_RPS} requests/s each.\n\
         [timing]\nttft = {{ kind = \"constant\", ms = {ttft_ms:.3} }}\ntoken_gap = {{ kind = \"constant\", ms = {gap_ms:.4} }}\n\
         [capacity]\nmax_num_seqs = {seqs}\nslowdown_per_running = 0.0\n"
    )
}

fn config_text(
    service: &str,
    replica_0: &str,
    replica_1: &str,
    pid_file: &Path,
    time_factor: u32,
) -> String {
    format!(
        r#"# percentes demo: clean delete of replica-1 under load, dev profile (written by `percentes demo`).
schema_version = 1
profile = "dev"

[dev]
time_factor = {time_factor}

[target]
kind = "mock"
base_url = "http://{service}"
model = "mock"
replicas = ["replica-0", "replica-1"]
replica_addresses = {{ "replica-0" = "{replica_0}", "replica-1" = "{replica_1}" }}

[schedule]
seed = 1
arrival = "poisson"

[calibration]
# The demo's mocks are built to this capacity (constant timings; see mock.toml).
lambda_max_rps = {LAMBDA_MAX_RPS}

[fault]
variant = "clean-delete"
victim = "replica-1"
injector = "kill-pid-file"
pid_file = "{}"
confirm_address = "{replica_1}"

[[routes]]
label = "chat"
path = "/v1/chat/completions"
prompt_tokens = 128
"#,
        pid_file.display()
    )
}

/// Runs the demo into `output`, time-compressed by `time_factor` (10: about 1 m 45 s of load).
pub fn run(output: &Path, force: bool, time_factor: u32) -> Result<ExitCode> {
    let seconds = 1020.0 / f64::from(time_factor);
    println!("percentes demo: a clean-delete replica-loss study against two local mock replicas.");
    println!(
        "It takes about {:.0} s (dev profile, time factor {time_factor}) and needs no root; everything \
         derived from it is labelled NOT PUBLISHABLE.",
        seconds + 5.0
    );
    // An earlier demo's folder (it holds demo.toml) is replaced, so README command 1 can run
    // again; any other non-empty folder needs --force.
    let earlier_demo = output.join("demo.toml").is_file();
    if output.exists() && !force && !earlier_demo && std::fs::read_dir(output)?.next().is_some() {
        bail!(
            "{} exists, is not empty and holds no earlier demo; pass --force to write the demo there anyway",
            output.display()
        );
    }
    std::fs::create_dir_all(output)
        .with_context(|| format!("cannot create {}", output.display()))?;
    let binary =
        std::env::current_exe().context("cannot find this executable to start the mocks")?;
    let mock_path = output.join("mock.toml");
    std::fs::write(&mock_path, mock_text(time_factor))?;
    let mut bed =
        Testbed::start(&binary, 2, Some(&mock_path)).context("cannot start the testbed")?;
    let victim = bed
        .replica("replica-1")
        .context("the testbed has replica-1")?;
    let survivor = bed
        .replica("replica-0")
        .context("the testbed has replica-0")?;
    let pid = bed
        .pids()
        .into_iter()
        .find(|(n, _)| n == "replica-1")
        .map(|(_, p)| p)
        .context("replica-1 has a pid")?;
    let pid_file = output.join("replica-1.pid");
    std::fs::write(&pid_file, pid.to_string())?;
    let config_path = output.join("demo.toml");
    let text = config_text(
        &bed.service().to_string(),
        &survivor.to_string(),
        &victim.to_string(),
        &std::fs::canonicalize(&pid_file)?,
        time_factor,
    );
    std::fs::write(&config_path, &text)?;
    let config = Config::parse(text.as_bytes()).context("the demo's configuration")?;
    println!(
        "testbed: router {}, replica-0 {survivor}, replica-1 {victim}; config {}",
        bed.service(),
        config_path.display()
    );

    let journal = output.join("run.pj");
    let inbox = TimelineInbox::default();
    let stop = run::stop_on_signals();
    let options = Options {
        output: journal.clone(),
        force: true,
        signing_key: None,
        tool_version: env!("CARGO_PKG_VERSION").into(),
        tool_commit: env!("PERCENTES_COMMIT").into(),
        workers: 1,
        progress: Progress::Human,
        stop: Arc::clone(&stop),
        timeline: Some(inbox.clone()),
    };
    let finished = Arc::new(AtomicBool::new(false));
    let recorder = {
        let finished = Arc::clone(&finished);
        let config = config.clone();
        std::thread::spawn(move || {
            let result = run::record(&config, &options);
            finished.store(true, Ordering::Relaxed);
            result
        })
    };

    orchestrate(&mut bed, victim, &inbox, &finished, time_factor);
    let summary = recorder
        .join()
        .map_err(|_| anyhow::anyhow!("the recorder thread panicked"))??;
    drop(bed);
    println!(
        "\njournal: {} ({})",
        journal.display(),
        summary.status.name()
    );

    let file = JournalFile::open(&journal)?;
    let verified = file.verify(&Default::default());
    println!("verify: {}", verified.verdict.name());
    let loaded =
        percentes_analyzer::load::load(&file).context("cannot analyze the demo's journal")?;
    let result = analysis::analyze(
        &loaded,
        &file,
        Method::AalenJohansen,
        &analysis::Analyzer {
            version: env!("CARGO_PKG_VERSION").into(),
            commit: env!("PERCENTES_COMMIT").into(),
        },
    );
    let report_dir = output.join("report");
    let written = report::write(&result, &loaded.requests, &report_dir)?;
    headline(&result);
    println!(
        "\nwrote {} into {}; open {} in a browser",
        written.join(", "),
        report_dir.display(),
        report_dir.join("report.html").display()
    );
    Ok(if result.validity.valid {
        ExitCode::SUCCESS
    } else {
        println!("the run failed a validity gate on this machine (see report.md); exit 2");
        ExitCode::from(2)
    })
}

/// The orchestrator's part: notice the victim died (the recorder killed it at T_inject), remove
/// its endpoint, reschedule it, let it load, mark it ready; each boundary into the timeline.
fn orchestrate(
    bed: &mut Testbed,
    victim: std::net::SocketAddr,
    inbox: &TimelineInbox,
    finished: &AtomicBool,
    time_factor: u32,
) {
    // Wait for the kill.
    loop {
        if finished.load(Ordering::Relaxed) {
            return;
        }
        if std::net::TcpStream::connect_timeout(&victim, Duration::from_millis(100)).is_err() {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = bed.reap("replica-1", Duration::from_secs(2));
    std::thread::sleep(scaled(DETECTION_S, time_factor));
    if bed.set_ready("replica-1", false).is_ok() {
        inbox.report(
            "detected",
            "the orchestrator removed replica-1's endpoint from the service",
            None,
        );
    }
    inbox.report(
        "reschedule",
        "replica-1 rescheduled; it starts after the scheduling delay",
        None,
    );
    let started = bed.started_at();
    let records_before = bed.records().len();
    let (reschedule, load) = (
        scaled(RESCHEDULE_S, time_factor),
        scaled(WEIGHT_LOAD_S, time_factor),
    );
    match bed.restart("replica-1", reschedule, load, Duration::from_secs(30)) {
        Ok(()) => {
            for record in &bed.records()[records_before..] {
                let at = started + Duration::from_nanos(record.at_ns);
                match record.event {
                    "fired" => inbox.report_at(
                        at,
                        "container-start",
                        "replica-1 process listening (loading)",
                        None,
                    ),
                    "ready" => inbox.report_at(
                        at,
                        "weight-load",
                        "replica-1 healthy: weights loaded; endpoint ready",
                        None,
                    ),
                    _ => {}
                }
            }
        }
        Err(e) => inbox.report("restart-failed", &e.to_string(), None),
    }
}

fn headline(report: &analysis::Report) {
    println!("\n== headline numbers (dev profile: NOT PUBLISHABLE) ==");
    for g in report
        .validity
        .gates
        .iter()
        .filter(|g| !analysis::gate_holds(g))
    {
        println!("gate {}: {} ({})", g.gate, g.status, g.observed);
    }
    for w in &report.windows {
        let p50 = w
            .ttft
            .percentiles_us
            .iter()
            .find(|(q, _)| q == "p50")
            .map(|(_, v)| *v);
        println!(
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
        println!(
            "in flight on {} at fire: {} errored, {} censored, {} completed",
            f.victim, o.errored, o.censored, o.completed
        );
    }
    if let Some(r) = &report.recovery {
        println!(
            "time to the single-replica equilibrium: {}",
            r.to_equilibrium.text
        );
        println!(
            "time to the two-replica pre-fault baseline: {}",
            r.to_pre_fault.text
        );
        for b in r
            .decomposition
            .iter()
            .filter(|b| b.since_anchor_s.is_some())
        {
            println!(
                "  {}: {:.3} s after the fire",
                b.boundary,
                b.since_anchor_s.unwrap_or(0.0)
            );
        }
    }
}
