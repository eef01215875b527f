//! The recorder against the mock: every scheduled index exactly once, every outcome class the mock
//! can provoke, a sealed journal; SIGKILL leaves a verifiable prefix; SIGINT seals as aborted.
//! Runs use the dev profile at time factor 250 (a 1.68 s schedule, a 120 ms timeout) where every
//! request fails fast, and 100 (a 4.2 s schedule, a 300 ms timeout) where they must complete: room
//! for a debug build on a busy 2-core machine.

#![cfg(target_os = "linux")]

use percentes_formats::spec::Spec;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use percentes_analyzer::model::{GateId, Status};
use percentes_analyzer::JournalFile;
use percentes_formats::config::Config;
use percentes_formats::journal::records::EventKind;
use percentes_formats::journal::records::{class_name, Outcome, Record, RequestRecord};
use percentes_formats::journal::Verdict;
use percentes_formats::pins;
use percentes_recorder::run::{self, Options, Progress};
use percentes_scenarios::config::{FaultMode, FaultPlan, MockConfig};
use percentes_scenarios::mock;

fn start_mock(config: MockConfig) -> SocketAddr {
    mock::spawn_background(config, 1).unwrap().0
}

fn fast_mock(fault: Option<FaultMode>) -> MockConfig {
    MockConfig {
        faults: fault
            .map(|mode| {
                vec![FaultPlan {
                    mode,
                    at_ms: 0,
                    duration_ms: 600_000,
                    after_tokens: 3,
                }]
            })
            .unwrap_or_default(),
        ..MockConfig::constant(2.0, 0.0, 256)
    }
}

fn config_for(addr: &str, factor: u32, rate: f64) -> Config {
    let text = format!(
        "schema_version = 1\nprofile = \"dev\"\n[dev]\ntime_factor = {factor}\n[target]\nkind = \"mock\"\nbase_url = \"http://{addr}\"\nmodel = \"mock\"\nreplicas = [\"replica-0\"]\n\
         [schedule]\nseed = 5\narrival = \"poisson\"\nrate_rps = {rate}\n[fault]\nvariant = \"none\"\n[[routes]]\nlabel = \"chat\"\npath = \"/v1/chat/completions\"\n"
    );
    Config::parse(text.as_bytes()).unwrap()
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("percentes-record-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

fn record(config: &Config, output: &Path) -> run::Summary {
    let options = Options {
        output: output.to_owned(),
        force: true,
        signing_key: None,
        tool_version: "test".into(),
        tool_commit: "test".into(),
        workers: 1,
        canary: true,
        progress: Progress::Quiet,
        stop: Arc::new(AtomicBool::new(false)),
        timeline: None,
    };
    run::record(config, &options).unwrap()
}

/// Verifies the journal and returns its request records, checking every scheduled index
/// appears exactly once.
fn requests(path: &Path, config: &Config) -> Vec<RequestRecord> {
    let journal = JournalFile::open(path).unwrap();
    let report = journal.verify(&Default::default());
    assert_eq!(
        report.verdict,
        Verdict::SealedIntact,
        "{}",
        percentes_formats::journal::verify::render(&report)
    );
    let mut requests: Vec<RequestRecord> = journal
        .records(&report)
        .filter_map(|(_, r)| match r.unwrap() {
            Record::Request(r) => Some(r),
            _ => None,
        })
        .collect();
    requests.sort_by_key(|r| r.index);
    let scheduled: Vec<u64> = config.schedule_params().iter().map(|e| e.index).collect();
    let recorded: Vec<u64> = requests.iter().map(|r| r.index).collect();
    assert_eq!(recorded, scheduled, "every scheduled index exactly once");
    let header = journal.header().unwrap().0;
    assert_eq!(header.schedule_digest, config.schedule_params().digest());
    // The recorder writes schedule rule 2 (one grid across phases at one rate), and names it.
    assert_eq!(
        header.schedule.grid,
        percentes_formats::schedule::Grid::Continuous
    );
    requests
}

#[test]
fn a_clean_run_completes_every_request_and_seals() {
    let _machine = crate::machine();
    let addr = start_mock(fast_mock(None));
    let config = config_for(&addr.to_string(), 100, 40.0);
    let path = scratch("clean.pj");
    let summary = record(&config, &path);
    assert_eq!(summary.status.name(), "completed");
    let requests = requests(&path, &config);
    assert!(requests.len() > 120, "{}", requests.len());
    for r in &requests {
        assert_eq!(class_name(r.class), Some("correct-success"), "{r:?}");
        assert_eq!(
            r.content_events, 256,
            "max_tokens 256 with ignore_eos: one token per event"
        );
        assert_eq!(r.content_gaps_us.len(), 255);
        assert_eq!(r.usage_completion_tokens, Some(256));
        assert_eq!(r.replica, "replica-0");
        let d = r.dispatched_ns.unwrap();
        assert!(d >= r.intended_ns, "never early");
        assert!(r.first_content_ns.unwrap() > d && r.terminal_ns >= r.first_content_ns.unwrap());
    }
    assert!(
        requests.iter().any(|r| r.connection_reused),
        "keep-alive connections are reused"
    );
    // The analyzer's loader accepts what the recorder wrote: schedule regenerated, every index once.
    let run = percentes_analyzer::load::load(&JournalFile::open(&path).unwrap()).unwrap();
    assert_eq!(run.requests.len(), requests.len());
    assert!(run.missing.is_empty());
    assert_eq!(
        run.not_publishable.len(),
        1,
        "only the dev profile: {:?}",
        run.not_publishable
    );
    assert_eq!(run.telemetry.rows.len() as u64, run.report.counts.telemetry);
    // The loopback canary (SPEC §2): one summary a telemetry second, from the worker's read loop.
    let canaries: Vec<_> = events(&path)
        .into_iter()
        .filter(|e| e.is(EventKind::Canary))
        .collect();
    assert!(
        canaries.len() + 2 >= run.telemetry.rows.len(),
        "{} canary summaries over {} telemetry seconds",
        canaries.len(),
        run.telemetry.rows.len()
    );
    for c in &canaries {
        assert_eq!(c.subject, "loopback");
        let p99 = c.value.expect("the p99 lag") as u64;
        assert!(p99 > 0 && p99 < 1_000_000_000, "{c:?}");
        assert!(c.detail.starts_with("samples=") && c.detail.contains(" interval_ns=1000000000"));
    }
    let (header, _) = JournalFile::open(&path).unwrap().header().unwrap();
    assert!(header
        .host
        .iter()
        .any(|(k, v)| k == "canary" && v.starts_with("loopback")));
}

#[test]
fn every_outcome_class_the_mock_can_provoke() {
    let _machine = crate::machine();
    let cases: &[(Option<FaultMode>, &str)] = &[
        (Some(FaultMode::Error), "http-status"),
        (Some(FaultMode::SlowReload), "rejection"),
        (Some(FaultMode::StreamAbort), "reset"),
        (Some(FaultMode::SilentHang), "timeout"),
        (Some(FaultMode::MalformedStatusLine), "malformed-framing"),
        (Some(FaultMode::OversizedHeaders), "malformed-framing"),
        (Some(FaultMode::BrokenChunked), "malformed-framing"),
        (Some(FaultMode::InvalidSse), "malformed-sse"),
        (Some(FaultMode::InvalidUtf8), "malformed-sse"),
        (Some(FaultMode::PrematureClose), "premature-close"),
        (Some(FaultMode::SlowlorisHeaders), "timeout"),
        (Some(FaultMode::IncorrectSuccess), "incorrect-success"),
    ];
    for (fault, expected) in cases {
        let addr = start_mock(fast_mock(*fault));
        let config = config_for(&addr.to_string(), 250, 25.0);
        let path = scratch(&format!("{}.pj", fault.map(|f| f.name()).unwrap_or("none")));
        record(&config, &path);
        let requests = requests(&path, &config);
        for r in &requests {
            assert_eq!(class_name(r.class), Some(*expected), "{fault:?}: {r:?}");
            if *expected == "timeout" {
                // AC4b: censored at exactly the timeout from t_i, a lower bound, not a duration.
                assert_eq!(r.outcome, Outcome::Censored as u8);
                assert_eq!(
                    r.terminal_ns,
                    r.intended_ns + config.duration_ns(&pins::CLIENT_TIMEOUT_S),
                    "{fault:?}"
                );
            } else {
                assert_eq!(r.outcome, Outcome::Errored as u8, "{fault:?}");
            }
        }
    }
    // Nothing listening: refused, and the run still seals.
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    // The pre-flight would refuse these runs before they start (real_servers.rs tests that);
    // here the requests themselves must be classified.
    let without_preflight = |config: Config| {
        let text = String::from_utf8(config.raw_bytes().to_vec()).unwrap();
        Config::parse(
            text.replace(
                "model = \"mock\"\n",
                "model = \"mock\"\npreflight = false\n",
            )
            .as_bytes(),
        )
        .unwrap()
    };
    let config = without_preflight(config_for(&closed.to_string(), 250, 25.0));
    let path = scratch("refused.pj");
    record(&config, &path);
    assert!(requests(&path, &config)
        .iter()
        .all(|r| class_name(r.class) == Some("refused")));
    // A name that can never resolve (.invalid, RFC 6761): dns, and the run still seals.
    let config = without_preflight(config_for("percentes-test.invalid:8000", 250, 10.0));
    let path = scratch("dns.pj");
    record(&config, &path);
    let requests = requests(&path, &config);
    assert!(
        requests.iter().all(|r| class_name(r.class) == Some("dns")),
        "{:?}",
        requests.first()
    );
}

/// `percentes record` on `config_text` as a child process, quiet, its output discarded.
pub(crate) fn spawn_record(config_text: &str, name: &str) -> (std::process::Child, PathBuf) {
    let config_path = scratch(&format!("{name}.toml"));
    std::fs::write(&config_path, config_text).unwrap();
    let journal = scratch(&format!("{name}.pj"));
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_percentes"))
        .args([
            "record",
            config_path.to_str().unwrap(),
            "-o",
            journal.to_str().unwrap(),
            "--force",
            "--quiet",
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    (child, journal)
}

fn slow_config(addr: SocketAddr) -> String {
    // Factor 60: a 7 s schedule with a 0.5 s timeout.
    format!(
        "schema_version = 1\nprofile = \"dev\"\n[dev]\ntime_factor = 60\n[target]\nkind = \"mock\"\nbase_url = \"http://{addr}\"\nmodel = \"mock\"\nreplicas = [\"replica-0\"]\n\
         [schedule]\nseed = 9\narrival = \"deterministic\"\nrate_rps = 50.0\n[fault]\nvariant = \"none\"\n[[routes]]\nlabel = \"chat\"\npath = \"/v1/chat/completions\"\n"
    )
}

#[test]
fn sigkill_leaves_a_verifiable_prefix_up_to_the_last_checkpoint() {
    let _machine = crate::machine();
    let addr = start_mock(fast_mock(None));
    let (mut child, journal) = spawn_record(&slow_config(addr), "killed");
    std::thread::sleep(Duration::from_millis(2600));
    child.kill().unwrap();
    child.wait().unwrap();
    let file = JournalFile::open(&journal).unwrap();
    let report = file.verify(&Default::default());
    assert_eq!(
        report.verdict,
        Verdict::UnsealedPrefix,
        "{}",
        percentes_formats::journal::verify::render(&report)
    );
    let checkpoint = report
        .last_checkpoint
        .clone()
        .expect("a checkpoint every second");
    assert!(checkpoint.sequence >= 1, "{checkpoint:?}");
    assert!(
        report.records > checkpoint.records_before,
        "everything up to the last checkpoint verifies"
    );
}

#[test]
fn sigint_stops_dispatch_drains_and_seals_as_aborted() {
    let _machine = crate::machine();
    let addr = start_mock(fast_mock(None));
    let text = slow_config(addr);
    let (child, journal) = spawn_record(&text, "interrupted");
    std::thread::sleep(Duration::from_millis(1500));
    let status = std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let output = child.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(1), "an aborted run exits 1");
    let config = Config::parse(text.as_bytes()).unwrap();
    let requests = requests(&journal, &config);
    let file = JournalFile::open(&journal).unwrap();
    let report = file.verify(&Default::default());
    assert_eq!(report.seal.as_ref().unwrap().status, "aborted");
    let run_end = requests
        .iter()
        .filter(|r| class_name(r.class) == Some("run-end"))
        .count();
    let completed = requests
        .iter()
        .filter(|r| r.outcome == Outcome::Completed as u8)
        .count();
    assert!(
        run_end > 0 && completed > 0,
        "completed {completed}, never sent {run_end}"
    );
    assert!(requests
        .iter()
        .filter(|r| class_name(r.class) == Some("run-end"))
        .all(|r| r.dispatched_ns.is_none()));
}

fn fault_config(base_url: &str, injector_lines: &str) -> Config {
    let text = format!(
        "schema_version = 1\nprofile = \"dev\"\n[dev]\ntime_factor = 100\n[target]\nkind = \"mock\"\nbase_url = \"http://{base_url}\"\nmodel = \"mock\"\nreplicas = [\"replica-0\", \"replica-1\"]\n\
         [schedule]\nseed = 11\narrival = \"deterministic\"\n[calibration]\nlambda_max_rps = 20.0\n[fault]\nvariant = \"clean-delete\"\nvictim = \"replica-1\"\n{injector_lines}\n\
         [[routes]]\nlabel = \"chat\"\npath = \"/v1/chat/completions\"\n"
    );
    Config::parse(text.as_bytes()).unwrap()
}

fn events(path: &Path) -> Vec<percentes_formats::journal::records::EventRecord> {
    let journal = JournalFile::open(path).unwrap();
    let report = journal.verify(&Default::default());
    journal
        .records(&report)
        .filter_map(|(_, r)| match r.unwrap() {
            Record::Event(e) => Some(e),
            _ => None,
        })
        .collect()
}

fn event_named<'a>(
    events: &'a [percentes_formats::journal::records::EventRecord],
    name: &str,
) -> Option<&'a percentes_formats::journal::records::EventRecord> {
    events
        .iter()
        .find(|e| percentes_formats::journal::records::event_kind_name(e.kind) == Some(name))
}

/// AC3: the fault fires within 500 ms of T_inject; armed and fire times are recorded.
#[test]
fn the_fault_plan_fires_at_t_inject_and_is_journaled() {
    let _machine = crate::machine();
    let addr = start_mock(fast_mock(None));
    let config = fault_config(
        &addr.to_string(),
        &format!("injector = \"mock-admin\"\nadmin_address = \"{addr}\"\nmock_mode = \"error\""),
    );
    let inject_ns = config.inject_at_ns().unwrap();
    let path = scratch("fault-admin.pj");
    record(&config, &path);
    let events = events(&path);
    let armed = event_named(&events, "fault-armed").expect("armed");
    let fired = event_named(&events, "fault-fired").expect("fired");
    assert!(armed.at_ns < inject_ns);
    let lateness = fired.at_ns as i64 - inject_ns as i64;
    assert!(
        (0..500_000_000).contains(&lateness),
        "fired {lateness} ns after T_inject"
    );
    // Requests sent before the fire complete; requests sent well after it get the injected 500.
    let requests = requests(&path, &config);
    assert!(requests
        .iter()
        .filter(|r| r.dispatched_ns.unwrap() + 100_000_000 < inject_ns)
        .all(|r| r.outcome == Outcome::Completed as u8));
    let after: Vec<_> = requests
        .iter()
        .filter(|r| r.dispatched_ns.unwrap() > fired.at_ns + 50_000_000)
        .collect();
    assert!(
        !after.is_empty()
            && after
                .iter()
                .all(|r| class_name(r.class) == Some("http-status") && r.http_status == 500)
    );
}

/// A clean delete on the testbed through the kill-pid-file injector: confirmed independently; the
/// victim's in-flight requests fail; the router, still routing to the dead endpoint, answers 502
/// for it (dependency failure), attributed to the victim.
#[test]
fn a_clean_delete_through_the_testbed_router() {
    let _machine = crate::machine();
    use percentes_scenarios::testbed::Testbed;
    let mock_config = scratch("fast-mock.toml");
    std::fs::write(&mock_config, "[timing]\nttft = { kind = \"constant\", ms = 5.0 }\ntoken_gap = { kind = \"constant\", ms = 0.2 }\n[capacity]\nmax_num_seqs = 256\nslowdown_per_running = 0.0\n").unwrap();
    let bed = Testbed::start(
        Path::new(env!("CARGO_BIN_EXE_percentes")),
        2,
        Some(&mock_config),
    )
    .unwrap();
    let pid_file = scratch("replica-1.pid");
    let pid = bed
        .pids()
        .into_iter()
        .find(|(n, _)| n == "replica-1")
        .unwrap()
        .1;
    std::fs::write(&pid_file, pid.to_string()).unwrap();
    let victim = bed.replica("replica-1").unwrap();
    let survivor = bed.replica("replica-0").unwrap();
    let config = fault_config(
        &bed.service().to_string(),
        &format!(
            "injector = \"kill-pid-file\"\npid_file = \"{}\"\nconfirm_address = \"{victim}\"",
            pid_file.display()
        ),
    );
    // The replicas' own addresses: the recorder probes them directly (G7, replica-ready).
    let text = String::from_utf8(config.raw_bytes().to_vec()).unwrap().replace(
        "replicas = [\"replica-0\", \"replica-1\"]\n",
        &format!("replicas = [\"replica-0\", \"replica-1\"]\nreplica_addresses = {{ \"replica-0\" = \"{survivor}\", \"replica-1\" = \"{victim}\" }}\n"),
    );
    let config = Config::parse(text.as_bytes()).unwrap();
    let path = scratch("clean-delete.pj");
    record(&config, &path);
    let events = events(&path);
    let fired = event_named(&events, "fault-fired").expect("fired");
    assert!(
        fired.detail.contains(&format!("SIGKILL to pid {pid}")),
        "{}",
        fired.detail
    );
    assert!(
        event_named(&events, "fault-confirmed").is_some(),
        "{events:?}"
    );
    let requests = requests(&path, &config);
    let on_victim_after: Vec<_> = requests
        .iter()
        .filter(|r| r.replica == "replica-1" && r.dispatched_ns.unwrap() > fired.at_ns + 50_000_000)
        .collect();
    assert!(!on_victim_after.is_empty());
    assert!(
        on_victim_after
            .iter()
            .all(|r| class_name(r.class) == Some("dependency-failure") && r.http_status == 502),
        "{:?}",
        on_victim_after.first()
    );
    // Direct probes: both replicas answered before the fire, the victim never after it.
    let probes: Vec<_> = events.iter().filter(|e| e.is(EventKind::Probe)).collect();
    for name in ["replica-0", "replica-1"] {
        assert!(
            probes.iter().any(|p| p.subject == name
                && p.detail == "ok"
                && p.value == Some(0)
                && p.at_ns < fired.at_ns),
            "no baseline probe of {name}: {probes:?}"
        );
    }
    let victim_after: Vec<_> = probes
        .iter()
        .filter(|p| p.subject == "replica-1" && p.at_ns > fired.at_ns + 50_000_000)
        .collect();
    assert!(
        !victim_after.is_empty()
            && victim_after
                .iter()
                .all(|p| p.detail.starts_with("down: connect")),
        "{victim_after:?}"
    );
    // The analyzer reads them: G7 observed and passing, G1 and fault fidelity passing.
    let file = JournalFile::open(&path).unwrap();
    let run = percentes_analyzer::load::load(&file).unwrap();
    let report =
        percentes_analyzer::analysis::analyze(&run, &file, Spec::CURRENT, &Default::default());
    for gate in [
        GateId::ReplicaShare,
        GateId::WaitingQueue,
        GateId::FaultFidelity,
    ] {
        let g = report.validity.gates.iter().find(|g| g.id == gate).unwrap();
        assert_eq!(g.status, Status::Pass, "{g:?}");
    }
    let survivor_after = requests
        .iter()
        .filter(|r| r.replica == "replica-0" && r.dispatched_ns.unwrap() > fired.at_ns)
        .count();
    assert!(
        survivor_after > 0
            && requests
                .iter()
                .filter(|r| r.replica == "replica-0")
                .all(|r| r.outcome == Outcome::Completed as u8)
    );
}

/// AC2c: a request the client could not dispatch (here: the recorder runs out of file
/// descriptors under `prlimit`) is recorded as undispatched, still exactly once, and fails the
/// run: exit 2 with the clause named.
#[test]
fn undispatched_requests_are_recorded_and_fail_the_run() {
    let _machine = crate::machine();
    if std::process::Command::new("prlimit")
        .arg("--version")
        .output()
        .is_err()
    {
        crate::prerequisite_missing(
            "the undispatched test",
            "prlimit (util-linux) is not installed",
        );
        return;
    }
    // Requests take 400 ms, so at 200 rps connections pile up past the 40-descriptor limit.
    let slow = MockConfig::constant(400.0, 0.0, 1000);
    let addr = start_mock(slow);
    let config = config_for(&addr.to_string(), 250, 200.0);
    let config_path = scratch("fd.toml");
    std::fs::write(&config_path, config.raw_bytes()).unwrap();
    let journal = scratch("fd.pj");
    let output = std::process::Command::new("prlimit")
        .args([
            "--nofile=40:40",
            env!("CARGO_BIN_EXE_percentes"),
            "record",
            config_path.to_str().unwrap(),
            "-o",
            journal.to_str().unwrap(),
            "--force",
            "--quiet",
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("RUN INVALID (SPEC §2)") && stderr.contains("never dispatched"),
        "{stderr}"
    );
    // Loud at the moment it happens, not only in the verdict at the end.
    assert!(stderr.contains("ran out of connections"), "{stderr}");
    let requests = requests(&journal, &config);
    let undispatched: Vec<_> = requests
        .iter()
        .filter(|r| r.outcome == Outcome::Undispatched as u8)
        .collect();
    assert!(!undispatched.is_empty());
    assert!(undispatched
        .iter()
        .all(|r| r.dispatched_ns.is_none() && class_name(r.class) == Some("undispatched")));
}

/// A route's prompt set (request i uses line i mod n after its unique prefix) and its
/// verification rule (here a response header): met, a correct success; missed, an incorrect one.
#[test]
fn prompt_sets_and_verification_rules() {
    let _machine = crate::machine();
    let addr = start_mock(fast_mock(None));
    let prompts = scratch("prompts.txt");
    std::fs::write(&prompts, "one\n\ntwo words\nthree little words\n").unwrap();
    let make = |verify: &str, name: &str| {
        let text = format!(
            "schema_version = 1\nprofile = \"dev\"\n[dev]\ntime_factor = 100\n[target]\nkind = \"mock\"\nbase_url = \"http://{addr}\"\nmodel = \"mock\"\nreplicas = [\"replica-0\"]\n\
             [schedule]\nseed = 4\narrival = \"deterministic\"\nrate_rps = 10.0\n[fault]\nvariant = \"none\"\n[[routes]]\nlabel = \"chat\"\npath = \"/v1/chat/completions\"\n\
             prompt_file = \"{}\"\n[routes.verify]\n{verify}\n",
            prompts.display()
        );
        let config = Config::parse(text.as_bytes()).unwrap();
        let path = scratch(name);
        record(&config, &path);
        requests(&path, &config)
    };
    let good = make(
        "header = \"x-percentes-replica: replica-0\"\nstatus = 200",
        "verified.pj",
    );
    for r in &good {
        assert_eq!(class_name(r.class), Some("correct-success"), "{r:?}");
        // "request N of percentes." is 4 words; the mock counts words as prompt tokens.
        let line_words = [1u32, 2, 3][(r.index % 3) as usize];
        assert_eq!(
            r.usage_prompt_tokens,
            Some(4 + line_words),
            "request {}",
            r.index
        );
    }
    let bad = make(
        "header = \"x-percentes-replica: replica-9\"",
        "unverified.pj",
    );
    assert!(bad
        .iter()
        .all(|r| class_name(r.class) == Some("incorrect-success")
            && r.detail.contains("x-percentes-replica")));
}
