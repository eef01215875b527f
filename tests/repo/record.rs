//! The recorder against the mock: every scheduled index exactly once, every outcome class the mock
//! can provoke, a sealed journal; SIGKILL leaves a verifiable prefix; SIGINT seals as aborted.
//! Runs use the dev profile at time factor 250 (a 1.68 s schedule, a 120 ms timeout) where every
//! request fails fast, and 100 (a 4.2 s schedule, a 300 ms timeout) where they must complete: room
//! for a debug build on a busy 2-core machine. A clean delete's fault run is at 200 (5.1 s), or
//! 100 (10.2 s) where it must outlast something measured in real seconds.

#![cfg(target_os = "linux")]

use percentes_formats::journal::header::HostFact;
use percentes_formats::spec::Spec;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use percentes_analyzer::model::{GateId, Status};
use percentes_analyzer::JournalFile;
use percentes_formats::config::Config;
use percentes_formats::journal::records::EventKind;
use percentes_formats::journal::records::{class_name, Outcome, Record, RequestRecord};
use percentes_formats::journal::Verdict;
use percentes_formats::pins;
use percentes_recorder::run::{self, Options};
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

/// A file of the tests' shared folder (`percentes_testkit::shared_folder`), named by the test.
fn scratch(name: &str) -> PathBuf {
    percentes_testkit::shared_folder("record").join(name)
}

fn record(config: &Config, output: &Path) -> run::Summary {
    let options = Options {
        force: true,
        ..Options::new(output.to_owned())
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
    // Never sent early, and never after its own end (SPEC §2). (A request the run stopped
    // before its time ends when it was stopped, which may be before its intended time.)
    for r in &requests {
        if let Some(d) = r.dispatched_ns {
            assert!(d >= r.intended_ns && d <= r.terminal_ns, "{r:?}");
        }
    }
    let header = journal.header().unwrap().0;
    assert_eq!(header.schedule_digest, config.schedule_params().digest());
    // The recorder writes schedule rule 2 (one grid across phases at one rate), and names it.
    assert_eq!(
        header.schedule.grid,
        percentes_formats::schedule::Grid::Continuous
    );
    requests
}

/// The journal's one `pool` event, and the reuse flag it promises (JOURNAL.md `pool`): taken in
/// the order each connection carried them, a request is reused exactly when its connection
/// carried an earlier one, and only a connection's first request may have connected itself. The
/// warm pool was opened ahead, so the count is at least one. (The recorder before issue 32's
/// slip wrote no such event and marked the first request on a pooled connection reused.)
fn pool_reuse_is_honest(
    path: &Path,
    requests: &[RequestRecord],
) -> percentes_formats::journal::records::PoolCounts {
    let pool: Vec<_> = events(path)
        .into_iter()
        .filter(|e| e.is(EventKind::Pool))
        .collect();
    assert_eq!(pool.len(), 1, "{pool:?}");
    let counts = percentes_formats::journal::records::PoolCounts::parse(&pool[0].detail)
        .unwrap_or_else(|| panic!("{:?}", pool[0]));
    assert!(counts.opened_ahead >= 1, "{counts:?}");
    let mut in_use_order: Vec<&RequestRecord> = requests
        .iter()
        .filter(|r| r.dispatched_ns.is_some())
        .collect();
    in_use_order.sort_by_key(|r| r.dispatched_ns);
    let mut seen = std::collections::HashSet::new();
    let mut first_on_pooled = 0;
    for r in in_use_order {
        let first = seen.insert(r.connection_id);
        assert_eq!(r.connection_reused, !first, "{r:?}");
        assert!(first || r.connect_start_ns.is_none(), "{r:?}");
        if first && r.connect_start_ns.is_none() {
            first_on_pooled += 1;
        }
    }
    assert!(first_on_pooled >= 1, "no request used a warm connection");
    counts
}

#[test]
fn a_clean_run_completes_every_request_and_seals() {
    let _machine = crate::recording();
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
    let pool = pool_reuse_is_honest(&path, &requests);
    // The analyzer's loader accepts what the recorder wrote: schedule regenerated, every index once.
    let run = percentes_analyzer::load::load(&JournalFile::open(&path).unwrap()).unwrap();
    // The audit counts the connections the pool opened ahead, not only the requests' own.
    let report = percentes_analyzer::analysis::analyze(
        &run,
        &JournalFile::open(&path).unwrap(),
        Spec::CURRENT,
        &Default::default(),
    );
    let generator = report.audit.artifact.expect("v0.3 artifact").generator;
    let opened_by_requests = requests
        .iter()
        .filter(|r| r.connect_start_ns.is_some())
        .count() as u64;
    assert!(
        generator.contains(&format!(
            "{} connections opened: {opened_by_requests} by the requests that needed them and {} ahead of need by the pool",
            opened_by_requests + pool.opened_ahead,
            pool.opened_ahead
        )),
        "{generator}"
    );
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
    // The descriptor table the run started with, read from the kernel, and how it is kept.
    let open_files = header.fact(HostFact::OpenFiles).unwrap_or_default();
    let size: u64 = open_files
        .split("descriptor table of ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next()?.parse().ok())
        .unwrap_or_else(|| panic!("no table size in {open_files:?}"));
    assert!(size >= 128, "{open_files}");
    assert!(
        open_files.contains("doubled off the worker"),
        "{open_files}"
    );
}

/// One recording per class, all at once: each is its own mock and its own run (a run holds no
/// process-wide state but the signal flag, which no run here reads, and the descriptor table,
/// which only ever grows), and no assertion reads a
/// client gate, only each request's class and its times, which a busy neighbour cannot change.
/// Fourteen recordings one after another took 28 s; together they take the longest one's time.
#[test]
fn every_outcome_class_the_mock_can_provoke() {
    let _beside = crate::beside();
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
    // The pre-flight would refuse the last two runs before they start (real_servers.rs tests
    // that); here the requests themselves must be classified.
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
    // Nothing listening: refused, and the run still seals.
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let mut runs: Vec<(String, Config, &str)> = cases
        .iter()
        .map(|(fault, expected)| {
            let addr = start_mock(fast_mock(*fault));
            let name = fault.map_or("none", |f| f.name()).to_owned();
            (name, config_for(&addr.to_string(), 250, 25.0), *expected)
        })
        .collect();
    runs.push((
        "refused".into(),
        without_preflight(config_for(&closed.to_string(), 250, 25.0)),
        "refused",
    ));
    // A name that can never resolve (.invalid, RFC 6761): dns, and the run still seals.
    runs.push((
        "dns".into(),
        without_preflight(config_for("percentes-test.invalid:8000", 250, 10.0)),
        "dns",
    ));
    std::thread::scope(|scope| {
        for (name, config, _) in &runs {
            scope.spawn(move || record(config, &scratch(&format!("{name}.pj"))));
        }
    });
    for (name, config, expected) in &runs {
        let requests = requests(&scratch(&format!("{name}.pj")), config);
        assert!(!requests.is_empty(), "{name}");
        for r in &requests {
            assert_eq!(class_name(r.class), Some(*expected), "{name}: {r:?}");
            match *expected {
                "timeout" => {
                    // AC4b: censored at exactly the timeout from t_i, a lower bound, not a
                    // duration.
                    assert_eq!(r.outcome, Outcome::Censored as u8);
                    assert_eq!(
                        r.terminal_ns,
                        r.intended_ns + config.duration_ns(&pins::CLIENT_TIMEOUT_S),
                        "{name}"
                    );
                }
                _ => assert_eq!(r.outcome, Outcome::Errored as u8, "{name}"),
            }
        }
    }
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
        // The summary (a few lines, never enough to fill the pipe) for a test to read.
        .stdout(std::process::Stdio::piped())
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
    let _machine = crate::recording();
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
    let _machine = crate::recording();
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

    // Issue 54 item 3: the requests never sent are said to be that, not "censored"...
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.contains(&format!(
            "{run_end} not sent (the run stopped before their turn)"
        )),
        "{stdout}"
    );
    // ...and under v0.5 (A4) they leave every window: the figures are over the requests
    // scheduled before the stop, the windows end at it, the audit reconciles with them as a
    // stage of their own.
    let run = loaded(&journal);
    let under = |spec: Spec| {
        let analyzer = percentes_analyzer::model::Analyzer {
            diagnose: true,
            ..Default::default()
        };
        percentes_analyzer::analysis::analyze(&run, &file, spec, &analyzer)
    };
    let v05 = under(Spec::V0_5);
    let stopped = v05.stopped.as_ref().expect("a stopped run says so");
    assert_eq!(stopped.not_sent, run_end as u64);
    assert_eq!(stopped.scheduled_before, (requests.len() - run_end) as u64);
    let first_unsent = requests
        .iter()
        .filter(|r| class_name(r.class) == Some("run-end"))
        .map(|r| r.intended_ns)
        .min()
        .unwrap();
    assert_eq!(stopped.at_s, first_unsent as f64 / 1e9);
    assert!(v05
        .windows
        .iter()
        .all(|w| w.end_s <= stopped.at_s.max(w.start_s)));
    let censored: u64 = v05.windows.iter().map(|w| w.outcomes.censored).sum();
    let in_windows: u64 = v05.windows.iter().map(|w| w.scheduled).sum();
    assert_eq!(censored, 0, "nothing the fast mock held");
    assert!(
        in_windows > 0 && in_windows <= stopped.scheduled_before,
        "{in_windows} of {}",
        stopped.scheduled_before
    );
    assert!(v05.audit.reconciled, "{}", v05.audit.reconciliation);
    assert!(
        v05.audit
            .reconciliation
            .contains(&format!("+ not sent {run_end} =")),
        "{}",
        v05.audit.reconciliation
    );
    // v0.4 reads them as it always did: censored, in the windows' figures.
    let v04 = under(Spec::V0_4);
    assert!(v04.stopped.is_none());
    let censored: u64 = v04.windows.iter().map(|w| w.outcomes.censored).sum();
    assert!(censored > 0);
    // analyze says so first, and exits 2: an aborted run publishes nothing.
    let (code, said, stderr) = super::golden::percentes(&[
        "analyze",
        journal.to_str().unwrap(),
        "-o",
        scratch("interrupted-report").to_str().unwrap(),
    ]);
    assert_eq!(code, 2, "{said}{stderr}");
    assert!(
        said.starts_with("NOT PUBLISHABLE: the run stopped at ")
            && said.contains("exit 2: the journal is not sealed completed"),
        "{said}"
    );
}

/// A clean delete at time factor 200 (a 5.1 s schedule, the fire 1.8 s after the epoch, a
/// 150 ms timeout) against `base_url`. One mock answers for both declared replicas here, so the
/// config names a replica header no server sends: G1 is then unobserved (the analyzer fails it)
/// rather than measured at 100 % for one replica, which the live baseline judgement would end
/// the run for at T_inject, before the fault these tests are about fires.
fn fault_config(base_url: &str, injector_lines: &str) -> Config {
    let text = format!(
        "schema_version = 1\nprofile = \"dev\"\n[dev]\ntime_factor = 200\n[target]\nkind = \"mock\"\nbase_url = \"http://{base_url}\"\nmodel = \"mock\"\nreplicas = [\"replica-0\", \"replica-1\"]\nreplica_header = \"x-sent-by-no-one\"\n\
         [schedule]\nseed = 11\narrival = \"deterministic\"\n[calibration]\nlambda_max_rps = 20.0\n[fault]\nvariant = \"clean-delete\"\nvictim = \"replica-1\"\n{injector_lines}\n\
         [[routes]]\nlabel = \"chat\"\npath = \"/v1/chat/completions\"\n"
    );
    Config::parse(text.as_bytes()).unwrap()
}

/// `config` (a [`fault_config`]) at time factor `factor` instead of 200: 100 (a 10.2 s
/// schedule) for a run that must last past something measured in real seconds, 10 for one whose
/// pinned wait before the fire is the point.
fn at_factor(config: Config, factor: u32) -> Config {
    let text = String::from_utf8(config.raw_bytes().to_vec()).unwrap();
    assert!(text.contains("time_factor = 200\n"), "{text}");
    let text = text.replace("time_factor = 200\n", &format!("time_factor = {factor}\n"));
    Config::parse(text.as_bytes()).unwrap()
}

/// Nothing was sent after an escape at `at_ns`, but for a request already being sent then (50 ms).
fn assert_nothing_sent_after(requests: &[RequestRecord], at_ns: u64) {
    let late: Vec<_> = requests
        .iter()
        .filter(|r| r.dispatched_ns.is_some_and(|d| d > at_ns + 50_000_000))
        .collect();
    assert!(
        late.is_empty(),
        "sent after the escape at {at_ns}: {late:?}"
    );
}

pub(super) fn events(path: &Path) -> Vec<percentes_formats::journal::records::EventRecord> {
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

pub(super) fn event_named<'a>(
    events: &'a [percentes_formats::journal::records::EventRecord],
    name: &str,
) -> Option<&'a percentes_formats::journal::records::EventRecord> {
    events
        .iter()
        .find(|e| percentes_formats::journal::records::event_kind_name(e.kind) == Some(name))
}

// AC3 (the fault fires at T_inject, its arming and fire journaled, the target's answers
// changing with it) is the simulator's: `the_fault_plan_fires_at_t_inject_and_the_target_answers
// _its_fault` in recorder/src/run/sim/fault_tests.rs runs the production fault plan on the
// simulated clock, exact to the nanosecond. The real injectors fire in the live view's test
// (mock-admin), the testbed's clean delete (kill-pid-file) and the real servers' (mock-admin).

/// A clean delete of replica `a` (of `a` and `b`) on the recorder's simulator: the production
/// fault plan, its baseline judgement and its confirmation on the simulated clock, `edit`ed; its
/// journal written to `name`, then analyzed.
fn simulated_fault(
    name: &str,
    edit: impl FnOnce(&mut percentes_recorder::run::sim::World),
) -> (PathBuf, percentes_analyzer::model::Report) {
    use percentes_recorder::run::sim::World;
    let _beside = crate::beside();
    let mut world = World {
        fault_toml: "variant = \"clean-delete\"\nvictim = \"a\"\ninjector = \"mock-admin\"\nadmin_address = \"127.0.0.1:1\"\nmock_mode = \"error\"\n",
        replicas: &["a", "b"],
        lambda_max_rps: Some(20.0),
        ..World::new(20.0, Duration::ZERO)
    }
    .configured();
    edit(&mut world);
    let path = scratch(name);
    std::fs::write(&path, world.run().journal()).unwrap();
    let file = JournalFile::open(&path).unwrap();
    let run = percentes_analyzer::load::load(&file).unwrap();
    assert_eq!(run.report.verdict.name(), "sealed-intact");
    let report =
        percentes_analyzer::analysis::analyze(&run, &file, Spec::CURRENT, &Default::default());
    (path, report)
}

/// The seal's status and reason.
fn seal_of(path: &Path) -> (String, String) {
    let journal = JournalFile::open(path).unwrap();
    let seal = journal.verify(&Default::default()).seal.expect("sealed");
    (seal.status.to_owned(), seal.reason)
}

/// seeds/004's "abort when impact cannot be confirmed", judged live (issue 32 item 4): a fault
/// whose confirmation never sees its impact (the victim's /health never answers 418) ends the
/// run once the pinned time since the fire has passed: `fault-failed`, then the escape
/// `impact-unconfirmed`; the seal is escaped with the reason `record`'s exit 2 names; nothing is
/// sent after the escape; the analyzer fails fault fidelity for it, not containment. On the
/// simulator (the production fault plan on its clock). Deliberate break: the recorder before
/// this went on to the end of the schedule, every request sent.
#[test]
fn a_fault_whose_impact_is_not_confirmed_ends_the_run() {
    let (path, report) = simulated_fault("unconfirmed.pj", |w| {
        w.fault_toml = "variant = \"clean-delete\"\nvictim = \"a\"\ninjector = \"mock-admin\"\nadmin_address = \"127.0.0.1:1\"\nmock_mode = \"error\"\nconfirm_address = \"127.0.0.1:2\"\nconfirm_method = \"GET\"\nconfirm_path = \"/health\"\nconfirm_status = 418\n";
    });
    let (status, reason) = seal_of(&path);
    assert_eq!(status, "escaped", "{reason}");
    assert!(reason.contains("(impact-unconfirmed)"), "{reason}");
    let events = events(&path);
    let fired = event_named(&events, "fault-fired").expect("fired");
    let failed = event_named(&events, "fault-failed").expect("fault-failed");
    assert!(
        failed.detail.contains("impact not confirmed"),
        "{}",
        failed.detail
    );
    let escape = event_named(&events, "escape").expect("escape");
    assert_eq!(
        escape.subject,
        percentes_formats::journal::records::IMPACT_UNCONFIRMED
    );
    let within_ns = pins::value::FAULT_CONFIRM_WITHIN_S as u64 * 1_000_000_000;
    assert!(
        escape.at_ns >= failed.at_ns
            && failed.at_ns >= fired.at_ns + within_ns
            && escape.at_ns < fired.at_ns + within_ns + 50_000_000,
        "fired {} failed {} escaped {}",
        fired.at_ns,
        failed.at_ns,
        escape.at_ns
    );
    let file = JournalFile::open(&path).unwrap();
    let requests: Vec<_> = file
        .records(&file.verify(&Default::default()))
        .filter_map(|(_, r)| match r.unwrap() {
            Record::Request(r) => Some(r),
            _ => None,
        })
        .collect();
    assert_nothing_sent_after(&requests, escape.at_ns);
    assert!(requests
        .iter()
        .any(|r| class_name(r.class) == Some("run-end") && r.dispatched_ns.is_none()));
    let gate = |id: GateId| report.validity.gates.iter().find(|g| g.id == id).cloned();
    assert_eq!(gate(GateId::FaultFidelity).unwrap().status, Status::Fail);
    if let Some(containment) = gate(GateId::Containment) {
        assert_ne!(containment.status, Status::Fail, "{containment:?}");
    }
}

/// seeds/004's "abort when baseline is unhealthy", judged live (issue 32 item 4): every baseline
/// request fails (the target resets each one), so at T_inject the baseline fails G6 and the
/// recorder journals the escape `baseline-unhealthy` instead of firing; the seal is escaped with
/// the reason `record`'s exit 2 names, nothing is sent after the escape, and the analyzer
/// reaches the same G6 and fails fault fidelity naming the escape. On the simulator.
/// Deliberate break: without the judgement the fault fires into the failing service and the run
/// goes on to its end.
#[test]
fn a_baseline_that_fails_its_gates_ends_the_run_at_t_inject() {
    let (path, report) = simulated_fault("baseline-unhealthy.pj", |w| {
        w.target.reset_every = Some(1);
    });
    let (status, reason) = seal_of(&path);
    assert_eq!(status, "escaped", "{reason}");
    assert!(reason.contains("(baseline-unhealthy)"), "{reason}");
    let events = events(&path);
    assert!(event_named(&events, "fault-armed").is_some());
    assert!(event_named(&events, "fault-fired").is_none(), "never fired");
    let escape = event_named(&events, "escape").expect("escape");
    assert_eq!(
        escape.subject,
        percentes_formats::journal::records::BASELINE_UNHEALTHY
    );
    assert!(
        escape.detail.contains("G6: 0 of the baseline's")
            && escape.detail.contains("(goodput 0.0000 < 0.99)"),
        "{}",
        escape.detail
    );
    let inject_ns = u64::try_from(
        event_named(&events, "fault-armed")
            .and_then(|e| e.value)
            .unwrap(),
    )
    .unwrap();
    assert!(
        (inject_ns..inject_ns + 10_000_000).contains(&escape.at_ns),
        "escaped at {} for T_inject {inject_ns}",
        escape.at_ns
    );
    let gate = |id: GateId| {
        report
            .validity
            .gates
            .iter()
            .find(|g| g.id == id)
            .cloned()
            .unwrap()
    };
    let g6 = gate(GateId::BaselineGoodput);
    assert_eq!((g6.status, g6.observed.as_str()), (Status::Fail, "0.0000"));
    let fidelity = gate(GateId::FaultFidelity);
    assert_eq!(fidelity.status, Status::Fail);
    assert!(
        fidelity.observed.contains("the recorder ended the run before it (baseline-unhealthy: the baseline was not healthy before injection: G6"),
        "{}",
        fidelity.observed
    );
}

// seeds/004's "abort when required telemetry disappears" (a replica's gauge read, then gone
// before the fire) is the simulator's: `a_gauge_that_disappears_before_the_fire_ends_the_run`
// in recorder/src/run/sim/fault_tests.rs runs the production probe thread on the simulated clock
// beside the fault plan. Real probes run in the testbed's and the real servers' tests.

/// A clean delete on the testbed through the kill-pid-file injector: confirmed independently; the
/// victim's in-flight requests fail; the router, still routing to the dead endpoint, answers 502
/// for it (dependency failure), attributed to the victim.
#[test]
fn a_clean_delete_through_the_testbed_router() {
    let _machine = crate::recording();
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
    // The replicas' own addresses: the recorder probes them directly (G7, replica-ready). The
    // testbed's router names the replica, so the attribution is the router's header, not the
    // one no server sends.
    let text = String::from_utf8(config.raw_bytes().to_vec())
        .unwrap()
        .replace("replica_header = \"x-sent-by-no-one\"\n", "")
        .replace(
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
    let _machine = crate::recording();
    if crate::lacks(
        "the undispatched test",
        "prlimit",
        "prlimit (util-linux) is not installed",
    ) {
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
    // Issue 50: with every descriptor taken, the telemetry still reads the host's and its own
    // CPU (the files were opened at the start), and never writes a reading it did not take
    // as 0 %. Before, the host CPU of these seconds read 0 % and G2.3 passed on them.
    let file = JournalFile::open(&journal).unwrap();
    let report = file.verify(&Default::default());
    let telemetry: Vec<_> = file
        .records(&report)
        .filter_map(|(_, r)| match r.unwrap() {
            Record::Telemetry(t) => Some(t),
            _ => None,
        })
        .collect();
    assert!(!telemetry.is_empty());
    let unread: Vec<_> = telemetry
        .iter()
        .filter(|t| t.host_cpu().is_none() || t.recorder_cpu().is_none())
        .map(|t| t.at_ns)
        .collect();
    assert!(unread.is_empty(), "seconds not read: {unread:?}");
    // A second in which the recorder itself ran 200 rps is never an idle host: 0 ppm was the
    // old recorder's reading not taken. (The last record, written as the run ends, may follow
    // the one before by less than a tick of the kernel's CPU accounting: it is left out.)
    let idle: Vec<_> = telemetry[..telemetry.len() - 1]
        .iter()
        .filter(|t| t.host_cpu_busy_ppm == 0)
        .map(|t| t.at_ns)
        .collect();
    assert!(idle.is_empty(), "seconds read as an idle host: {idle:?}");
}

/// A route's prompt set (request i uses line i mod n after its unique prefix) and its
/// verification rule (here a response header): met, a correct success; missed, an incorrect one.
#[test]
fn prompt_sets_and_verification_rules() {
    let _beside = crate::beside();
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
    // Two recordings at once (no gate is read here, only classes and counts).
    let (good, bad) = std::thread::scope(|scope| {
        let good = scope.spawn(|| {
            make(
                "header = \"x-percentes-replica: replica-0\"\nstatus = 200",
                "verified.pj",
            )
        });
        let bad = scope.spawn(|| {
            make(
                "header = \"x-percentes-replica: replica-9\"",
                "unverified.pj",
            )
        });
        (good.join().unwrap(), bad.join().unwrap())
    });
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
    assert!(bad
        .iter()
        .all(|r| class_name(r.class) == Some("incorrect-success")
            && r.detail.contains("x-percentes-replica")));
}

#[test]
fn record_heads_writes_every_chain_head_as_it_goes_and_the_last_vouches_for_the_file() {
    use percentes_formats::journal::verify::{self, HeadMatch, VerifyOptions};
    let _beside = crate::beside();
    let addr = start_mock(fast_mock(None));
    let config = config_for(&addr.to_string(), 100, 20.0);
    let path = scratch("heads.pj");
    let heads = scratch("heads.jsonl");
    let options = Options {
        force: true,
        canary: false,
        heads: Some(heads.clone()),
        ..Options::new(path.clone())
    };
    let summary = run::record(&config, &options).unwrap();
    let lines: Vec<serde_json::Value> = std::fs::read_to_string(&heads)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let kinds: Vec<&str> = lines.iter().map(|l| l["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds.first(), Some(&"header"));
    assert_eq!(kinds.last(), Some(&"seal"));
    let checkpoints = kinds.iter().filter(|k| **k == "checkpoint").count();
    assert!(
        checkpoints >= 3,
        "a checkpoint a second of a 4 s run: {kinds:?}"
    );
    let bytes = std::fs::read(&path).unwrap();
    let head = |line: &serde_json::Value| {
        percentes_formats::journal::parse_hash(line["chain_head"].as_str().unwrap()).unwrap()
    };
    let last = lines.last().unwrap();
    assert_eq!(head(last), summary.sealed.chain_head);
    assert_eq!(last["status"], "completed");
    let with = |h| VerifyOptions {
        expect_head: Some(h),
        ..Default::default()
    };
    assert!(verify::verify(&bytes, &with(head(last))).ok());
    // Every earlier head lies on the chain and vouches for the prefix it was written for.
    for line in &lines[1..lines.len() - 1] {
        let report = verify::verify(&bytes, &with(head(line)));
        assert!(
            matches!(report.head_match, Some(HeadMatch::Prefix { .. })),
            "{line}: {:?}",
            report.head_match
        );
        assert!(
            !report.ok(),
            "a prefix head does not vouch for the whole file"
        );
    }
}

#[test]
fn accelerator_collectors_are_journaled_as_host_facts_and_a_failing_one_refuses_the_run() {
    let _machine = crate::recording();
    let addr = start_mock(fast_mock(None));
    let with = |argv: &str| {
        let base = config_for(&addr.to_string(), 250, 20.0);
        let text = String::from_utf8(base.raw_bytes().to_vec())
            .unwrap()
            .replace(
                "[schedule]",
                &format!("[target.accelerator_commands]\n\"replica-0\" = {argv}\n[schedule]"),
            );
        Config::parse(text.as_bytes()).unwrap()
    };
    let path = scratch("accelerator.pj");
    record(
        &with(r#"["echo", "NVIDIA H200, 1980 MHz, 2619 MHz, 700.00 W"]"#),
        &path,
    );
    let header = JournalFile::open(&path).unwrap().header().unwrap().0;
    assert_eq!(
        header.host_fact(&HostFact::accelerator("replica-0")),
        Some("NVIDIA H200, 1980 MHz, 2619 MHz, 700.00 W")
    );
    let refused = scratch("accelerator-refused.pj");
    let _ = std::fs::remove_file(&refused);
    let options = Options {
        canary: false,
        ..Options::new(refused.clone())
    };
    let error = run::record(
        &with(r#"["sh", "-c", "echo no devices were found >&2; exit 6"]"#),
        &options,
    )
    .unwrap_err()
    .to_string();
    assert!(
        error.contains("accelerator collector for replica-0")
            && error.contains("no devices were found"),
        "{error}"
    );
    assert!(!refused.exists(), "refused before the journal exists");
}

/// A control group made for one test and removed after it (root; cgroup v1 with the cpu and
/// cpuacct controllers, as on the project's machines, or v2 with cpu), with a CPU quota.
struct TestCgroup {
    dirs: Vec<PathBuf>,
}

impl TestCgroup {
    /// `quota_us` of CPU per `period_us`, or why no cgroup can be made here.
    fn create(name: &str, quota_us: u64, period_us: u64) -> Result<TestCgroup, String> {
        let mountinfo =
            std::fs::read_to_string("/proc/self/mountinfo").map_err(|e| e.to_string())?;
        let mounts: Vec<(String, String, String)> = mountinfo
            .lines()
            .filter_map(|l| {
                let (before, after) = l.split_once(" - ")?;
                let point = before.split_whitespace().nth(4)?.to_owned();
                let mut after = after.split_whitespace();
                let fstype = after.next()?.to_owned();
                let options = after.nth(1).unwrap_or("").to_owned();
                Some((fstype, point, options))
            })
            .collect();
        let name = format!("{name}-{}", std::process::id());
        let make = |dir: &Path| {
            std::fs::create_dir_all(dir)
                .map_err(|e| format!("cannot create {}: {e}", dir.display()))
        };
        let v1 = |controller: &str| {
            mounts
                .iter()
                .find(|(t, _, o)| t == "cgroup" && o.split(',').any(|c| c == controller))
                .map(|(_, p, _)| PathBuf::from(p))
        };
        if let (Some(cpu), Some(acct)) = (v1("cpu"), v1("cpuacct")) {
            let (cpu, acct) = (cpu.join(&name), acct.join(&name));
            make(&cpu)?;
            make(&acct)?;
            std::fs::write(cpu.join("cpu.cfs_period_us"), period_us.to_string())
                .map_err(|e| e.to_string())?;
            std::fs::write(cpu.join("cpu.cfs_quota_us"), quota_us.to_string())
                .map_err(|e| e.to_string())?;
            let mut dirs = vec![cpu];
            if !dirs.contains(&acct) {
                dirs.push(acct);
            }
            return Ok(TestCgroup { dirs });
        }
        let Some((_, root, _)) = mounts.iter().find(|(t, _, _)| t == "cgroup2") else {
            return Err("no cgroup v1 cpu and cpuacct mounts and no cgroup v2 mount".into());
        };
        let root = PathBuf::from(root);
        let _ = std::fs::write(root.join("cgroup.subtree_control"), "+cpu");
        let dir = root.join(&name);
        make(&dir)?;
        std::fs::write(dir.join("cpu.max"), format!("{quota_us} {period_us}"))
            .map_err(|e| format!("cannot set cpu.max (is the cpu controller enabled?): {e}"))?;
        Ok(TestCgroup { dirs: vec![dir] })
    }

    /// A shell prefix that moves the shell into the cgroup before it execs the command.
    fn join(&self) -> String {
        self.dirs
            .iter()
            .map(|d| format!("echo $$ > {}/cgroup.procs", d.display()))
            .collect::<Vec<_>>()
            .join(" && ")
    }
}

impl Drop for TestCgroup {
    fn drop(&mut self) {
        for dir in &self.dirs {
            let _ = std::fs::remove_dir(dir);
        }
    }
}

/// Issue 16 item 5, live: a recorder started in a cgroup limited to 3 % of one core journals
/// the cgroup's usage and throttling each second beside /proc/stat, names the quota in its
/// header, and G2.3 reads the cgroup (the quota is used up, so it fails) while the audit keeps
/// the host's own reading. Deliberate break: reading /proc/stat in a container, where a
/// 2-core host is mostly idle, passes a recorder its quota starves.
#[test]
fn a_recorder_in_a_cgroup_with_a_cpu_quota_is_gated_on_the_cgroup() {
    let _machine = crate::machine();
    let cgroup = match TestCgroup::create("percentes-quota", 3_000, 100_000) {
        Ok(c) => c,
        Err(why) => {
            crate::prerequisite_missing("the cgroup quota test", &why);
            return;
        }
    };
    let addr = start_mock(fast_mock(None));
    let config = scratch("cgroup.toml");
    std::fs::write(
        &config,
        config_for(&addr.to_string(), 100, 10.0).raw_bytes(),
    )
    .unwrap();
    let journal = scratch("cgroup.pj");
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("{} && exec \"$0\" \"$@\"", cgroup.join()))
        .arg(env!("CARGO_BIN_EXE_percentes"))
        .args([
            "record",
            config.to_str().unwrap(),
            "--force",
            "--quiet",
            "-o",
        ])
        .arg(&journal)
        .output()
        .unwrap();
    drop(cgroup);
    assert!(
        matches!(out.status.code(), Some(0 | 2)),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let file = JournalFile::open(&journal).unwrap();
    let run = percentes_analyzer::load::load(&file).unwrap();
    let fact = run.header.fact(HostFact::CgroupCpu).unwrap_or_default();
    assert!(
        fact.contains("quota 3000 us per 100000 us (0.03 cores; G2.3 reads the cgroup)"),
        "{fact}"
    );
    let seconds: Vec<_> = run.telemetry.cgroup.iter().collect();
    assert!(seconds.len() >= 3, "{} cgroup seconds", seconds.len());
    assert!(seconds.iter().all(|s| s.cpu.quota_us == 3000));
    assert!(
        seconds.iter().map(|s| s.cpu.throttled_periods).sum::<u64>() > 0,
        "a 3 % quota throttles a recorder"
    );
    let report =
        percentes_analyzer::analysis::analyze(&run, &file, Spec::CURRENT, &Default::default());
    let g = report
        .validity
        .gates
        .iter()
        .find(|g| g.id == GateId::HostCpu)
        .unwrap();
    assert!(g.note.contains("cgroup against its quota"), "{g:?}");
    let cgroup_max = report.audit.telemetry.cgroup_cpu_max_5s_percent.unwrap();
    assert_eq!(
        g.observed,
        format!("{cgroup_max:.3} %"),
        "the gate read the cgroup"
    );
    assert!(cgroup_max > 70.0, "a 3 % quota used up: {cgroup_max} %");
    assert_eq!(g.status, Status::Fail);
    assert!(report.audit.telemetry.host_cpu_max_5s_percent.is_some());
}

// Issue 18 item 5 (the live view's phase, fault state and last-second TTFT, second by second) is
// the simulator's: `the_live_view_shows_phase_fault_state_and_last_second_ttft` in
// recorder/src/run/sim/fault_tests.rs runs the telemetry thread's own seconds beside the fault
// plan. The binary's `--progress json` runs for real in cli.rs and stress.rs.

/// Issue 18 item 3 end to end against a mock: a ShareGPT file (the shape of
/// ShareGPT_V3_unfiltered_cleaned_split.json, hand-made here) as a chat route's prompt set. Each
/// conversation up to its first human turn is sent; the one without a human turn is skipped and
/// counted; the journal's host fact names the format, the count and the file's BLAKE3; every
/// request completes, and the prompt tokens the mock counted (its words) alternate between the
/// two conversations' lengths, so request i sent conversation i mod 2. Deliberate break: sending
/// only the last message (the system turn's words go missing from the counts).
#[test]
fn a_sharegpt_prompt_set_sends_each_conversation_and_is_named_in_the_journal() {
    let _beside = crate::beside();
    let addr = start_mock(fast_mock(None));
    let share = scratch("share.json");
    let text = r#"[
      {"id": "a", "conversations": [{"from": "human", "value": "one two three"}, {"from": "gpt", "value": "four"}]},
      {"id": "b", "conversations": [{"from": "gpt", "value": "no question here"}]},
      {"id": "c", "conversations": [{"from": "system", "value": "be brief please"}, {"from": "human", "value": "five six"}]}
    ]"#;
    std::fs::write(&share, text).unwrap();
    let base = config_for(&addr.to_string(), 250, 20.0);
    let config = String::from_utf8(base.raw_bytes().to_vec()).unwrap()
        + &format!(
            "prompt_file = {:?}\nprompt_format = \"sharegpt\"\n",
            share.to_str().unwrap()
        );
    let config = Config::parse(config.as_bytes()).unwrap();
    let path = scratch("sharegpt.pj");
    record(&config, &path);
    let header = JournalFile::open(&path).unwrap().header().unwrap().0;
    assert_eq!(
        header.host_fact(&HostFact::prompt_set("chat")),
        Some(
            format!(
                "sharegpt, 2 prompts (1 entries skipped: no human turn), BLAKE3 {}",
                blake3::hash(text.as_bytes()).to_hex()
            )
            .as_str()
        )
    );
    let records = requests(&path, &config);
    assert!(!records.is_empty());
    for r in &records {
        assert_eq!(r.outcome, Outcome::Completed as u8, "{r:?}");
        // "request N of percentes." is 4 words; then 3 words (a), or 3 + 2 (c: system, human).
        let expected = if r.index % 2 == 0 { 4 + 3 } else { 4 + 3 + 2 };
        assert_eq!(r.usage_prompt_tokens, Some(expected), "request {}", r.index);
    }
}

/// Issue 18 item 3's output lengths end to end against a mock that generates exactly
/// `max_tokens` (ignore_eos): `[routes.output_tokens]` uniform 4..=40 draws each request's
/// length from the seed and its index, and the completion tokens the mock reports equal the
/// draw for every request, so the journal's configuration fixes every length. Deliberate
/// break: drawing by the request's place in a worker's queue instead of its index.
#[test]
fn output_lengths_from_a_distribution_are_sent_request_by_request() {
    let _beside = crate::beside();
    let addr = start_mock(fast_mock(None));
    let base = config_for(&addr.to_string(), 250, 20.0);
    let text = String::from_utf8(base.raw_bytes().to_vec()).unwrap()
        + "[routes.output_tokens]\nkind = \"uniform\"\nmin = 4\nmax = 40\n";
    let config = Config::parse(text.as_bytes()).unwrap();
    let lengths = config.routes[0].output_tokens.unwrap();
    let path = scratch("lengths.pj");
    record(&config, &path);
    let records = requests(&path, &config);
    let mut seen = std::collections::BTreeSet::new();
    for r in &records {
        assert_eq!(r.outcome, Outcome::Completed as u8, "{r:?}");
        let drawn = lengths.max_tokens(config.schedule.seed, r.index).unwrap();
        assert_eq!(
            r.usage_completion_tokens,
            Some(drawn),
            "request {}",
            r.index
        );
        seen.insert(drawn);
    }
    assert!(seen.len() > 3, "the lengths vary: {seen:?}");
    // The journal says what each request asked for (kind 6), read back by the analyzer.
    let run = loaded(&path);
    for row in 0..run.requests.len() {
        let index = run.requests.index[row];
        assert_eq!(
            run.requests.max_tokens[row],
            lengths.max_tokens(config.schedule.seed, index).unwrap(),
            "request {index}"
        );
        assert_eq!(
            run.requests.prompt_tokens_sent[row],
            u32::MAX,
            "no tokenizer"
        );
    }
}

fn loaded(path: &Path) -> percentes_analyzer::load::Run {
    let file = JournalFile::open(path).unwrap();
    percentes_analyzer::load::load(&file).unwrap()
}

/// tests/data/tokenizer.json: a byte-level BPE made by scripts/make-test-tokenizer.py with
/// Python's tokenizers 0.23.3.
fn test_tokenizer() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/tokenizer.json")
}

/// Issue 18 item 3's token-aware lengths end to end against the mock. Route `gen` generates
/// prompts of `input_tokens` uniform 1..=200 tokens of `target.tokenizer`; route `share` sends a
/// ShareGPT file's conversations, each asking for its reply's length in tokens
/// (`output_tokens = dataset`). The mock counts a prompt's words and generates exactly
/// `max_tokens` (ignore_eos). Each filler unit is one word and one token (the recorder's unit
/// tests re-tokenize the bytes sent), so the mock's count is the unique prefix's 4 words plus
/// the draw; the completion tokens are each reply's length; the journal carries both lengths
/// per request and the tokenizer's BLAKE3 in its header. Deliberate breaks: cutting the filler
/// at the wrong unit, or measuring the human turn instead of the reply.
#[test]
fn token_aware_lengths_and_a_datasets_own_lengths_are_sent_and_journaled() {
    let _beside = crate::beside();
    let addr = start_mock(fast_mock(None));
    let dir = scratch("token-lengths");
    std::fs::create_dir_all(&dir).unwrap();
    let share = dir.join("share.json");
    std::fs::write(
        &share,
        r#"[
          {"conversations": [{"from": "human", "value": "What does the recorder do?"}, {"from": "gpt", "value": "it sends every request at its own time and never waits"}]},
          {"conversations": [{"from": "human", "value": "And the report?"}, {"from": "gpt", "value": "it says what the data support"}]},
          {"conversations": [{"from": "human", "value": "Left unanswered."}]}
        ]"#,
    )
    .unwrap();
    let tokenizer = test_tokenizer();
    let base = config_for(&addr.to_string(), 250, 20.0);
    let text = String::from_utf8(base.raw_bytes().to_vec())
        .unwrap()
        .replace(
            "replicas = [\"replica-0\"]\n",
            &format!("replicas = [\"replica-0\"]\ntokenizer = {:?}\n", tokenizer.to_str().unwrap()),
        )
        .replace("label = \"chat\"", "label = \"gen\"")
        + "[routes.input_tokens]\nkind = \"uniform\"\nmin = 1\nmax = 200\n\
           [[routes]]\nlabel = \"share\"\npath = \"/v1/chat/completions\"\n"
        + &format!(
            "prompt_file = {:?}\nprompt_format = \"sharegpt\"\n[routes.output_tokens]\nkind = \"dataset\"\n",
            share.to_str().unwrap()
        );
    let config = Config::parse(text.as_bytes()).unwrap();
    let input = config.routes[0].input_tokens.unwrap();
    let path = scratch("token-lengths.pj");
    record(&config, &path);
    let records = requests(&path, &config);
    let run = loaded(&path);
    let t = percentes_recorder::tokens::ModelTokenizer::load(tokenizer.to_str().unwrap()).unwrap();
    let count = |text: &str| t.count(text).unwrap();
    let replies = [
        count("it sends every request at its own time and never waits"),
        count("it says what the data support"),
    ];
    let (mut generated, mut dataset) = (0, 0);
    for (row, r) in records.iter().enumerate() {
        assert_eq!(r.outcome, Outcome::Completed as u8, "{r:?}");
        assert_eq!(run.requests.index[row], r.index);
        if r.route == 0 {
            generated += 1;
            let drawn = input
                .draw(
                    percentes_formats::config::TokenSide::Input,
                    config.schedule.seed,
                    r.index,
                )
                .unwrap();
            assert_eq!(
                r.usage_prompt_tokens,
                Some(4 + drawn),
                "request {}",
                r.index
            );
            assert_eq!(run.requests.prompt_tokens_sent[row], drawn);
            assert_eq!(run.requests.max_tokens[row], 256, "the pin");
        } else {
            dataset += 1;
            // Two prompts with replies (the third entry has none and is left out).
            let reply = replies[(r.index % 2) as usize];
            assert_eq!(
                r.usage_completion_tokens,
                Some(reply),
                "request {}",
                r.index
            );
            assert_eq!(run.requests.max_tokens[row], reply);
        }
    }
    assert!(generated > 5 && dataset > 5, "{generated} {dataset}");
    let facts = &run.header.host;
    let hash = blake3::hash(&std::fs::read(&tokenizer).unwrap());
    let fact = facts.iter().find(|(k, _)| k == "tokenizer").map(|(_, v)| v);
    assert!(
        fact.is_some_and(|v| v.starts_with(&format!("BLAKE3 {}", hash.to_hex()))),
        "{fact:?}"
    );
    let set = facts
        .iter()
        .find(|(k, _)| k == "prompt-set share")
        .map(|(_, v)| v);
    assert!(
        set.is_some_and(|v| v.contains("2 prompts (1 entries skipped: no reply")),
        "{set:?}"
    );
}

/// `analyze --diagnose` of `journal` into `dir/report` (exit 0, or 2 for an invalid run), and
/// its report.json.
pub(super) fn diagnosed_report(journal: &Path, dir: &Path) -> serde_json::Value {
    let report = dir.join("report");
    let (code, _, stderr) = super::golden::percentes(&[
        "analyze",
        journal.to_str().unwrap(),
        "--diagnose",
        "-o",
        report.to_str().unwrap(),
    ]);
    assert!(code == 0 || code == 2, "{stderr}");
    serde_json::from_slice(&std::fs::read(report.join("report.json")).unwrap()).unwrap()
}

/// The report's decomposition boundary named `name`.
pub(super) fn decomposed<'a>(json: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    json["recovery"]["decomposition"]
        .as_array()
        .and_then(|all| all.iter().find(|b| b["boundary"] == name))
        .unwrap_or_else(|| panic!("no {name} boundary in the decomposition"))
}

/// A fault run of the recorder against a mock (the victim's mock turned to errors at the fire,
/// about 3.6 s after the epoch at time factor 100), started in the background in a fresh
/// folder `name` and listening on `--events-socket`: the folder, the journal, the socket (not
/// there yet) and the recorder's process. Factor 100, not [`fault_config`]'s 200: the callers
/// hand it events from outside on a timetable of seconds.
pub(super) fn fault_run_with_socket(
    name: &str,
) -> (PathBuf, PathBuf, PathBuf, std::process::Child) {
    let addr = start_mock(fast_mock(None));
    let config = at_factor(
        fault_config(
            &addr.to_string(),
            &format!(
                "injector = \"mock-admin\"\nadmin_address = \"{addr}\"\nmock_mode = \"error\""
            ),
        ),
        100,
    );
    let dir = scratch(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let (toml, journal, socket) = (
        dir.join("run.toml"),
        dir.join("run.pj"),
        dir.join("events.sock"),
    );
    std::fs::write(&toml, config.raw_bytes()).unwrap();
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_percentes"))
        .args([
            "record",
            toml.to_str().unwrap(),
            "-o",
            journal.to_str().unwrap(),
            "--quiet",
        ])
        .args(["--events-socket", socket.to_str().unwrap()])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    (dir, journal, socket, child)
}

/// Issue 36 item 3: timeline events from an orchestrator outside the recorder. A recording of
/// a fault run listens on `--events-socket`; after the fire, `percentes event` hands it a
/// `container-start` stated on the wall clock 50 ms back and a `weight-load` with no time (read
/// when it arrives), and a subject no timeline has, which is refused to its sender. The journal
/// carries both accepted events as `timeline` events at the stated time with the time the
/// recorder read them in the detail (both clocks), the socket is gone after the run, and the
/// analyzer's recovery decomposition reads them as its container-start and weight-load
/// boundaries. Deliberate break: without the socket, both boundaries read "N/A".
#[test]
fn timeline_events_from_outside_are_journaled_with_both_clocks_and_read() {
    let _machine = crate::recording();
    let (dir, journal, socket, mut child) = fault_run_with_socket("events");
    let bin = env!("CARGO_BIN_EXE_percentes");
    let started = std::time::Instant::now();
    while !socket.exists() {
        assert!(started.elapsed() < Duration::from_secs(30), "no socket");
        std::thread::sleep(Duration::from_millis(20));
    }
    // Issue 50: a sender dripping a byte every 1.5 s holds only its own connection, and is
    // refused when its line has not ended 2 s after it began; a line that is not UTF-8 is
    // answered, not dropped. Both run beside the legitimate senders below.
    let drip = {
        let socket = socket.clone();
        std::thread::spawn(move || {
            use std::io::{Read, Write};
            let mut stream = std::os::unix::net::UnixStream::connect(&socket).unwrap();
            for byte in b"{\"subject\"" {
                if stream.write_all(&[*byte]).is_err() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(1500));
            }
            let mut answer = String::new();
            let _ = stream.read_to_string(&mut answer);
            answer
        })
    };
    {
        use std::io::{BufRead, Write};
        let mut stream = std::os::unix::net::UnixStream::connect(&socket).unwrap();
        stream.write_all(b"{\"subject\": \"\xff\xfe\"}\n").unwrap();
        let mut answer = String::new();
        std::io::BufReader::new(stream)
            .read_line(&mut answer)
            .unwrap();
        assert!(
            answer.starts_with("refused: the line is not UTF-8"),
            "{answer}"
        );
    }
    // The fire is T_inject (about 3.6 s at time factor 100) after the epoch, which is within a
    // second of the socket; the recovery window runs 6 s past it.
    std::thread::sleep(Duration::from_secs(5));
    let event = |args: &[&str]| {
        let out = std::process::Command::new(bin)
            .args(["event", socket.to_str().unwrap()])
            .args(args)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).to_string()
            + &String::from_utf8_lossy(&out.stderr);
        (out.status.code(), text)
    };
    let wall_ns = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as i64
        - 50_000_000;
    let (code, said) = event(&[
        "container-start",
        "--detail",
        "replacement pod started",
        "--at-realtime-ns",
        &wall_ns.to_string(),
    ]);
    assert_eq!(code, Some(0), "{said}");
    assert!(said.starts_with("ok at_ns="), "{said}");
    let (code, said) = event(&["weight-load", "--detail", "weights in memory"]);
    assert_eq!(code, Some(0), "{said}");
    let (code, said) = event(&["ready"]);
    assert_eq!(code, Some(1), "{said}");
    assert!(said.contains("not a timeline subject"), "{said}");
    let dripped = drip.join().unwrap();
    assert!(
        dripped.starts_with("refused: a line begun and not ended within 2 s"),
        "{dripped}"
    );
    assert!(child.wait().unwrap().code().is_some());
    assert!(!socket.exists(), "the socket is removed after the run");
    let events = events(&journal);
    let timeline: Vec<_> = events
        .iter()
        .filter(|e| {
            percentes_formats::journal::records::event_kind_name(e.kind) == Some("timeline")
        })
        .collect();
    let start = timeline
        .iter()
        .find(|e| e.subject == "container-start")
        .expect("container-start");
    assert!(
        start
            .detail
            .starts_with("replacement pod started (external: stated at")
            && start.detail.contains("on CLOCK_REALTIME; read at"),
        "{}",
        start.detail
    );
    let read_ns: u64 = start
        .detail
        .rsplit("read at ")
        .next()
        .unwrap()
        .split(' ')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    let lead = read_ns as i64 - start.at_ns as i64;
    assert!(
        (40_000_000..1_000_000_000).contains(&lead),
        "stated {lead} ns before it was read"
    );
    let load = timeline
        .iter()
        .find(|e| e.subject == "weight-load")
        .expect("weight-load");
    assert!(load.detail.contains("stated no time"), "{}", load.detail);
    let fired = event_named(&events, "fault-fired").expect("fired");
    assert!(start.at_ns > fired.at_ns && load.at_ns > start.at_ns);
    let json = diagnosed_report(&journal, &dir);
    for (boundary, at) in [
        ("container start", start.at_ns),
        ("weight-load log line", load.at_ns),
    ] {
        let b = decomposed(&json, boundary);
        assert_eq!(b["at_s"].as_f64(), Some(at as f64 / 1e9), "{b}");
        assert!(b["evidence"].as_str().unwrap().contains("external"), "{b}");
    }
    std::fs::remove_dir_all(dir).unwrap();
}

/// A server that answers every request with its Authorization value reflected in `x-replica`
/// and quoted in a 401's body, as a misconfigured proxy might: the recorder sends the key it
/// read from the environment, and the journal must not hold it (issue 50 item 5).
fn reflecting_server() -> SocketAddr {
    use std::io::{BufRead, BufReader, Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { continue };
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut writer = stream;
                let mut served = 0u64;
                loop {
                    let (mut authorization, mut length) = (String::new(), 0usize);
                    loop {
                        let mut line = String::new();
                        match reader.read_line(&mut line) {
                            Ok(0) | Err(_) => return,
                            Ok(_) => {}
                        }
                        let line = line.trim_end();
                        if line.is_empty() {
                            break;
                        }
                        let lower = line.to_ascii_lowercase();
                        if let Some(v) = lower.strip_prefix("authorization:") {
                            authorization = line[line.len() - v.trim_start().len()..].to_owned();
                        }
                        if let Some(v) = lower.strip_prefix("content-length:") {
                            length = v.trim().parse().unwrap_or(0);
                        }
                    }
                    let mut body = vec![0; length];
                    if reader.read_exact(&mut body).is_err() {
                        return;
                    }
                    served += 1;
                    let (status, text) = if served.is_multiple_of(2) {
                        (
                            "401 Unauthorized",
                            format!("{{\"error\": \"key {authorization} is not valid\"}}"),
                        )
                    } else {
                        ("200 OK", "{\"id\":\"x\",\"object\":\"chat.completion\",\"model\":\"mock\",\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":\"hi\"},\"finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":1,\"total_tokens\":4}}".to_owned())
                    };
                    let answer = format!(
                        "HTTP/1.1 {status}\r\ncontent-type: application/json\r\nx-replica: {authorization}\r\ncontent-length: {}\r\n\r\n{text}",
                        text.len()
                    );
                    if writer.write_all(answer.as_bytes()).is_err() {
                        return;
                    }
                }
            });
        }
    });
    address
}

#[test]
fn a_secret_a_server_reflects_never_reaches_the_journal() {
    let _beside = crate::beside();
    let address = reflecting_server();
    let secret = "reflected-secret-7f3a9c";
    std::env::set_var("PERCENTES_TEST_REFLECTED_KEY", secret);
    let text = format!(
        "schema_version = 1\nprofile = \"dev\"\n[dev]\ntime_factor = 250\n[target]\nkind = \"self-hosted\"\nbase_url = \"http://{address}\"\nmodel = \"mock\"\nreplicas = [\"replica-0\"]\npreflight = false\napi_key_env = \"PERCENTES_TEST_REFLECTED_KEY\"\nreplica_header = \"x-replica\"\nrouting = \"layer-4\"\n\
         [schedule]\nseed = 5\narrival = \"poisson\"\nrate_rps = 20.0\n[fault]\nvariant = \"none\"\n[[routes]]\nlabel = \"chat\"\npath = \"/v1/chat/completions\"\nstream = false\n"
    );
    let config = Config::parse(text.as_bytes()).unwrap();
    let path = scratch("reflected.pj");
    record(&config, &path);
    let bytes = std::fs::read(&path).unwrap();
    assert!(
        !bytes.windows(secret.len()).any(|w| w == secret.as_bytes()),
        "the secret is in the journal"
    );
    let requests = requests(&path, &config);
    assert!(
        requests
            .iter()
            .any(|r| r.replica == "Bearer [$PERCENTES_TEST_REFLECTED_KEY]"),
        "{:?}",
        requests.iter().map(|r| &r.replica).collect::<Vec<_>>()
    );
    // The 401s' bodies quote the key; a detail names the status, never the body.
    assert!(requests.iter().any(|r| r.detail == "HTTP 401"));
}
