//! The client under stress (issue 32): a recorder whose own CPU is taken, or that is stopped
//! mid-run, must say so, blame itself and not the target, never stamp a time past a request's
//! deadline, and end a run it can no longer keep. Real recordings against the mock, in the dev
//! profile, a few seconds each, where the point is what a real kernel does to the client: a
//! process stopped by a signal, a CPU taken by a hog, descriptors exhausted, SYNs a firewall
//! drops. The worker loop's decisions under each stress (and under a closed loop's stop, whose
//! real recording this file held until issue 51) run in the simulator, in milliseconds:
//! recorder/src/run/sim/tests.rs.

#![cfg(target_os = "linux")]

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use percentes_analyzer::model::{GateId, Status};
use percentes_analyzer::JournalFile;
use percentes_formats::config::Config;
use percentes_formats::journal::records::{
    class_name, EventKind, Outcome, Record, RequestRecord, CLIENT_BEHIND,
};
use percentes_formats::journal::Verdict;
use percentes_recorder::run::{self, Options};
use percentes_scenarios::config::MockConfig;
use percentes_scenarios::mock;

/// A file of the tests' shared folder (`percentes_testkit::shared_folder`), named by the test.
fn scratch(name: &str) -> PathBuf {
    percentes_testkit::shared_folder("stress").join(name)
}

fn start_mock() -> SocketAddr {
    mock::spawn_background(MockConfig::constant(2.0, 0.0, 4096), 1)
        .unwrap()
        .0
}

/// A dev-profile run at `factor` and `rate` against the mock at `addr`, deterministic arrivals.
fn config_text(addr: SocketAddr, factor: u32, rate: f64) -> String {
    format!(
        "schema_version = 1\nprofile = \"dev\"\n[dev]\ntime_factor = {factor}\n[target]\nkind = \"mock\"\nbase_url = \"http://{addr}\"\nmodel = \"mock\"\nreplicas = [\"replica-0\"]\n\
         [schedule]\nseed = 3\narrival = \"deterministic\"\nrate_rps = {rate}\n[fault]\nvariant = \"none\"\n[[routes]]\nlabel = \"chat\"\npath = \"/v1/chat/completions\"\n"
    )
}

/// `percentes record CONFIG -o JOURNAL` as a child process (quiet, no host check), its output
/// piped: a test stops and continues it by its pid.
fn record_child(config: &Path, journal: &Path) -> std::process::Child {
    std::process::Command::new(env!("CARGO_BIN_EXE_percentes"))
        .args(["record", config.to_str().unwrap(), "-o"])
        .arg(journal)
        .args(["--force", "--quiet"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

/// The journal's requests and events, after checking it verifies sealed.
fn read(
    path: &Path,
) -> (
    Vec<RequestRecord>,
    Vec<percentes_formats::journal::records::EventRecord>,
) {
    let file = JournalFile::open(path).unwrap();
    let report = file.verify(&Default::default());
    assert_eq!(
        report.verdict,
        Verdict::SealedIntact,
        "{}",
        percentes_formats::journal::verify::render(&report)
    );
    let (mut requests, mut events) = (Vec::new(), Vec::new());
    for (_, record) in file.records(&report) {
        match record.unwrap() {
            Record::Request(r) => requests.push(r),
            Record::Event(e) => events.push(e),
            _ => {}
        }
    }
    (requests, events)
}

/// The CPUs this process may run on, as the kernel lists them.
fn allowed_cpus() -> Vec<usize> {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let list = status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .unwrap();
    percentes_study::cpus(Some(list.trim())).unwrap().unwrap()
}

/// How many of `requests` ended in the class named `class`.
fn count_class(requests: &[RequestRecord], class: &str) -> usize {
    requests
        .iter()
        .filter(|r| class_name(r.class) == Some(class))
        .count()
}

/// The journal analyzed under the current spec.
fn analyze(path: &Path) -> percentes_analyzer::model::Report {
    let file = JournalFile::open(path).unwrap();
    let run = percentes_analyzer::load::load(&file).unwrap();
    percentes_analyzer::analysis::analyze(
        &run,
        &file,
        percentes_formats::spec::Spec::CURRENT,
        &Default::default(),
    )
}

/// What must hold of every record whatever the client suffered: no terminal time past the
/// deadline, no dispatch after its own terminal, and no lateness of the client's counted as a
/// failure of the target (the mock is healthy: nothing may be errored).
fn assert_the_client_blames_itself(requests: &[RequestRecord], timeout_ns: u64) {
    for r in requests {
        assert!(
            r.terminal_ns <= r.intended_ns + timeout_ns,
            "terminal past the deadline: {r:?}"
        );
        if let Some(d) = r.dispatched_ns {
            assert!(
                d <= r.terminal_ns,
                "dispatched after its own terminal: {r:?}"
            );
        }
        assert_ne!(
            r.outcome,
            Outcome::Errored as u8,
            "the client's lateness counted against a healthy target: {r:?}"
        );
        // When the client began it: its connect, or its send on a pooled connection.
        let out = r.connect_start_ns.max(r.dispatched_ns);
        let lag_ns = percentes_formats::pins::value::CLIENT_BEHIND_LAG_MS as u64 * 1_000_000;
        let went_out_late = out.is_some_and(|o| o.saturating_sub(r.intended_ns) >= lag_ns);
        if class_name(r.class) == Some("client-late") {
            assert_eq!(r.outcome, Outcome::Undispatched as u8);
            if r.dispatched_ns.is_none() {
                // Reached only at its deadline: never sent.
                assert_eq!(r.terminal_ns, r.intended_ns + timeout_ns, "{r:?}");
            } else {
                // Sent, but begun a second or more late, or its deadline seen pass a second or
                // more late (issue 50): the client's, whatever happened next.
                let deadline_seen_late = r
                    .detail
                    .starts_with("the recorder saw this request's deadline pass only");
                assert!(went_out_late || deadline_seen_late, "{r:?}");
            }
        } else {
            // Issue 50: no request the client began late is classed as the target's.
            assert!(
                !went_out_late,
                "begun late and classed {:?}: {r:?}",
                class_name(r.class)
            );
        }
    }
}

/// SIGSTOP for 3 s mid-run (the recorder a child process, the mock in this one): the worker's
/// ticker reports at least the stop, the requests due during it are the client's (`client-late`,
/// or censored at their deadline), the fall-behind policy ends the run at once (sealed escaped,
/// exit 2, well before the schedule's end), and the last words say what happened and what to
/// do. Deliberate breaks: sending a request reached past its deadline (it is then a `timeout`
/// dispatched after its terminal), or the ticker back on a thread of its own (the stall is then
/// still seen: SIGSTOP stops every thread), or the policy off (the run goes on to its end).
#[test]
fn a_recorder_stopped_for_three_seconds_blames_itself_and_ends_the_run() {
    let _machine = crate::recording();
    let addr = start_mock();
    // Factor 20: warm-up 3 s, baseline 15 s, cooldown 3 s (21 s), a 1.5 s timeout; 40 rps;
    // the mock's own /metrics scraped, so the report reconciles its counts with the client's.
    let text = config_text(addr, 20, 40.0) + "[server_metrics]\npreset = \"auto\"\n";
    let config_path = scratch("stopped.toml");
    std::fs::write(&config_path, &text).unwrap();
    let journal = scratch("stopped.pj");
    let started = std::time::Instant::now();
    let child = record_child(&config_path, &journal);
    let pid = child.id().to_string();
    std::thread::sleep(Duration::from_millis(5_000));
    let signal = |name: &str| {
        assert!(std::process::Command::new("kill")
            .args([name, &pid])
            .status()
            .unwrap()
            .success());
    };
    signal("-STOP");
    std::thread::sleep(Duration::from_millis(3_000));
    signal("-CONT");
    let output = child.wait_with_output().unwrap();
    let took = started.elapsed();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        took < Duration::from_secs(15),
        "the run ended early, not at its 21 s end: {took:?}"
    );
    for said in [
        "fell behind its schedule",
        "THE CLIENT FAILED ITS OWN CHECKS",
        "--diagnose",
        "percentes doctor",
    ] {
        assert!(stderr.contains(said), "{said}: {stderr}");
    }
    let config = Config::parse(text.as_bytes()).unwrap();
    let timeout_ns = config.duration_ns(&percentes_formats::pins::CLIENT_TIMEOUT_S);
    let (requests, events) = read(&journal);
    assert_the_client_blames_itself(&requests, timeout_ns);
    let behind = events
        .iter()
        .find(|e| e.is(EventKind::Escape))
        .expect("an escape event");
    assert_eq!(behind.subject, CLIENT_BEHIND);
    assert!(
        behind.value.unwrap() >= percentes_formats::pins::value::CLIENT_BEHIND_LAG_MS * 1_000_000,
        "{behind:?}"
    );
    let late = count_class(&requests, "client-late");
    assert!(
        late > 50,
        "the requests due in the stop are the client's: {late}"
    );
    // Issue 50: a request in flight across the stop whose deadline passed while the process
    // was stopped is the client's too (its deadline seen seconds late), never a `timeout` of
    // the target's: the mock answers in 2 ms.
    let timeouts = count_class(&requests, "timeout");
    assert_eq!(
        timeouts, 0,
        "a deadline missed while stopped read as the target's"
    );
    let never_sent = count_class(&requests, "run-end");
    assert!(
        never_sent > 100,
        "offered load stopped: {never_sent} never sent"
    );
    let report = analyze(&journal);
    // The requests the escape left unsent (`run-end`) never reached the server: the
    // reconciliation does not call them requests the client gave up on (it did, to 2026-12-07).
    let server = report.server.as_ref().expect("the mock's metrics scraped");
    assert!(!server.reconciliation.is_empty());
    for r in &server.reconciliation {
        assert!(!r.text.contains("gave up"), "{}", r.text);
    }
    let gate = |id| {
        report
            .validity
            .gates
            .iter()
            .find(|g| g.id == id)
            .unwrap_or_else(|| panic!("{id:?} in {:?}", report.validity.gates))
            .clone()
    };
    assert_eq!(gate(GateId::FallBehind).status, Status::Fail);
    assert_eq!(gate(GateId::Undispatched).status, Status::Fail);
    let stall = gate(GateId::RuntimeStall);
    assert_eq!(stall.status, Status::Fail, "{stall:?}");
    assert!(
        stall.note.contains("each worker's own 1 ms ticker"),
        "{}",
        stall.note
    );
    assert!(
        report.audit.telemetry.stall_max_us.unwrap() >= 2_900_000.0,
        "the ticker saw at least the stop: {:?}",
        report.audit.telemetry.stall_max_us
    );
}

/// A CI job that reads only the exit code (issue 54 item 2): `percentes record ... && publish`
/// published a run that failed its own gates, because `record` exited 0 where `analyze` of the
/// same journal exits 2. A 400 ms SIGSTOP, shorter than the fall-behind policy's lag, leaves
/// the run to go on to its end (no escape) with its client gates failed: `record` exits 2
/// naming the gates, the job's publish step never runs, and `analyze` agrees. Deliberate
/// break: the exit of 2 only with thresholds, as before (the script then publishes).
#[test]
fn a_run_that_failed_its_gates_fails_records_exit_code_as_analyze_does() {
    let _machine = crate::recording();
    let addr = start_mock();
    // Warm-up 1 s, measured 3.5 s, no cooldown, the pinned timeout; 40 rps. The stop lands
    // inside the measurement and holds back 400 of its 4,500 ticks: G2.4's p99 fails.
    let text = config_text(addr, 40, 40.0).replace(
        "time_factor = 40\n",
        "warmup_s = 1.0\nmeasure_s = 3.5\ncooldown_s = 0\n",
    );
    assert!(text.contains("measure_s = 3.5"), "{text}");
    let config_path = scratch("ci-invalid.toml");
    std::fs::write(&config_path, &text).unwrap();
    let journal = scratch("ci-invalid.pj");
    let published = scratch("ci-invalid.published");
    let script = format!(
        "{} record {} -o {} --force --quiet && touch {}",
        env!("CARGO_BIN_EXE_percentes"),
        config_path.display(),
        journal.display(),
        published.display()
    );
    let child = std::process::Command::new("sh")
        .args(["-c", &script])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The recorder is the shell's child: stop it by its command line, not the shell.
    std::thread::sleep(Duration::from_millis(2_500));
    let signal = |name: &str| {
        assert!(std::process::Command::new("pkill")
            .args([name, "-f", &format!("record {}", config_path.display())])
            .status()
            .unwrap()
            .success());
    };
    signal("-STOP");
    std::thread::sleep(Duration::from_millis(400));
    signal("-CONT");
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        !published.exists(),
        "the CI script published an invalid run"
    );
    assert!(
        stderr.contains("the run failed its validity gates (")
            && stderr.contains("G2.4")
            && stderr.contains("nothing from it may be published; exit 2"),
        "{stderr}"
    );
    assert!(
        !stderr.contains("fell behind its schedule"),
        "no escape: {stderr}"
    );
    let report = analyze(&journal);
    assert!(!report.validity.valid);
    let (code, _, _) = super::golden::percentes(&[
        "analyze",
        journal.to_str().unwrap(),
        "-o",
        scratch("ci-invalid-report").to_str().unwrap(),
    ]);
    assert_eq!(code, 2, "analyze agrees with record");
}

/// A CPU hog on the CPU the worker is pinned to (`--cpus`, `stress-ng --taskset`): the worker's
/// own ticker sees the contention, so G2 fails, and still nothing is blamed on the target and no
/// time passes a deadline; the journal says where the worker ran. Deliberate break: the ticker
/// on an unpinned thread of its own reads the free CPU and passes G2.4.
#[test]
fn a_cpu_hog_on_the_workers_cpu_fails_the_client_gate_not_the_target() {
    let _machine = crate::machine();
    if crate::lacks(
        "the CPU hog test",
        "stress-ng",
        "stress-ng is not installed (apt-get install stress-ng; .ci/run does)",
    ) {
        return;
    }
    let allowed = allowed_cpus();
    let cpu = *allowed.last().unwrap();
    // Four hogs on one CPU: the worker gets a fifth of it at most, in slices it waits for.
    let hog = crate::hogs(4, Some(cpu));
    std::thread::sleep(Duration::from_millis(300));
    let addr = start_mock();
    let text = config_text(addr, 100, 40.0);
    let config = Config::parse(text.as_bytes()).unwrap();
    let journal = scratch("hogged.pj");
    let options = Options {
        force: true,
        cpus: Some(vec![cpu]),
        ..Options::new(journal.clone())
    };
    let summary = run::record(&config, &options);
    hog.stop();
    summary.unwrap();
    let timeout_ns = config.duration_ns(&percentes_formats::pins::CLIENT_TIMEOUT_S);
    let (requests, _) = read(&journal);
    assert_the_client_blames_itself(&requests, timeout_ns);
    let header = JournalFile::open(&journal).unwrap().header().unwrap().0;
    let placement = &header
        .host
        .iter()
        .find(|(k, _)| k == "placement")
        .unwrap()
        .1;
    assert!(
        placement.contains(&format!("worker 0 on CPU {cpu}")),
        "{placement}"
    );
    let report = analyze(&journal);
    let failed: Vec<GateId> = report
        .validity
        .gates
        .iter()
        .filter(|g| g.id.is_client_gate() && !g.holds())
        .map(|g| g.id)
        .collect();
    assert!(
        failed.contains(&GateId::RuntimeStall) || failed.contains(&GateId::SendSkewP99),
        "the worker's contention shows in G2: {:?}",
        report.validity.gates
    );
    let words = percentes_analyzer::report::client_words(&report, &journal).join("\n");
    assert!(
        words.contains("nothing from this run may be published"),
        "{words}"
    );
}

/// The starved worker of issue 32, reproduced: a CPU hog at real-time priority (SCHED_FIFO 1)
/// on one CPU leaves a normal thread there only the kernel's real-time throttling remainder
/// (50 of each 1,000 ms). Four hogs at nice -20 used to stand in for it, but they starve a
/// thread that sleeps between short bursts only by share, not by wake-up: on this VM's kernel
/// (6.18) a nice-0 loop pinned beside them woke 0.55 ms late at p99, and the pinned worker was
/// never behind; beside the FIFO hog the same loop woke 425 ms late at p99, and unpinned 3.4 ms
/// (measured 2026-12-06). The recorder used to pin worker 0 to the first CPU it
/// may use, blindly, and its stall ticker ran on a thread of its own elsewhere; a worker pinned
/// to the starved CPU is held up for hundreds of ms at a time (measured: stall p99 419 ms, skew
/// 277 ms, requests reached past their deadlines), while any thread on the other CPU runs freely.
/// Now nothing is pinned unless asked, and the kernel moves the worker off the starved CPU: the
/// same schedule under the same hogs is sent on time. Asked to pin there (`--cpus`), the
/// recorder tells on itself: its own ticker fails G2.4 by far, its requests past their deadlines
/// are `client-late`, and none is a target's error; its live view (`--progress json`) says it is
/// behind schedule and its last words say why nothing may be published. Deliberate breaks:
/// pinning by default again (the unpinned half then finds the worker starved); the live view
/// looking once a second again (it saw 0 ms behind in one of two runs, 2026-12-06: the
/// kernel's real-time throttling lets the worker catch up in the same 50 ms of each second).
#[test]
fn a_starved_cpu_stalls_only_a_worker_pinned_to_it_and_that_one_says_so() {
    let _machine = crate::machine();
    let probe = std::process::Command::new("chrt")
        .args(["-f", "1", "true"])
        .output();
    let python = std::process::Command::new("python3")
        .arg("--version")
        .output();
    if !matches!(&probe, Ok(o) if o.status.success() && o.stderr.is_empty()) || python.is_err() {
        crate::prerequisite_missing(
            "the starved-CPU test",
            "it needs chrt and taskset (util-linux), python3 and root for a real-time hog",
        );
        return;
    }
    let first = allowed_cpus()[0];
    // One process that spins and ends itself after 90 s: a SIGKILL stops it at once, since it is
    // the one running. (stress-ng's parent, pinned at the same real-time priority beside its
    // spinning child, never ran again to die, so a kill waited for its own timeout.)
    let mut hog = std::process::Command::new("chrt")
        .args(["-f", "1", "taskset", "-c"])
        .arg(first.to_string())
        .args([
            "python3",
            "-c",
            "import time\nend = time.monotonic() + 90\nwhile time.monotonic() < end:\n    pass\n",
        ])
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let addr = start_mock();
    // Factor 100: a 4.2 s schedule, a 0.3 s timeout, 20 rps.
    let text = config_text(addr, 100, 20.0);
    let config = Config::parse(text.as_bytes()).unwrap();
    let timeout_ns = config.duration_ns(&percentes_formats::pins::CLIENT_TIMEOUT_S);
    let record = |name: &str, cpus: Option<Vec<usize>>| {
        let journal = scratch(name);
        let options = Options {
            force: true,
            cpus,
            ..Options::new(journal.clone())
        };
        let summary = run::record(&config, &options).unwrap();
        (summary, read(&journal))
    };
    let late = |requests: &[RequestRecord]| count_class(requests, "client-late");
    let worst_skew = |requests: &[RequestRecord]| {
        requests
            .iter()
            .filter_map(|r| r.dispatched_ns.map(|d| d - r.intended_ns))
            .max()
            .unwrap_or(u64::MAX)
    };
    // Unpinned: the worker runs elsewhere and keeps its schedule (G2.1's 50 ms). The other CPU
    // is shared with the rest of this machine: a miss fails with what this machine's own timer
    // showed right after it, so a host too busy to keep a schedule reads as such (no second
    // recording: issue 51).
    let (free, (free_requests, _)) = record("unpinned.pj", None);
    let (n_late, skew) = (late(&free_requests), worst_skew(&free_requests));
    if free.status.name() != "completed" || n_late > 0 || skew >= 50_000_000 {
        let _ = hog.kill();
        let _ = hog.wait();
        panic!(
            "the unpinned worker did not keep its schedule beside the hog: seal {}, {n_late} \
             client-late, worst skew {skew} ns; {}",
            free.status.name(),
            crate::host_timer_after("the starved-CPU test")
        );
    }
    // Pinned there, through the binary with `--progress json`, so the live view and the last
    // words are read as a program reads them.
    let config_path = scratch("pinned.toml");
    std::fs::write(&config_path, &text).unwrap();
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_percentes"))
        .args(["record", config_path.to_str().unwrap(), "-o"])
        .arg(scratch("pinned.pj"))
        .args(["--force", "--no-host-check", "--progress", "json", "--cpus"])
        .arg(first.to_string())
        .output()
        .unwrap();
    let _ = hog.kill();
    let _ = hog.wait();
    let stderr = String::from_utf8_lossy(&output.stderr);
    // Exit 2 where requests went client-late or the policy fired; 0 where every request was
    // sent, late (record exits on what the journal holds; analysis gates the rest, and record
    // says so in its last words).
    assert!(matches!(output.status.code(), Some(0 | 2)), "{stderr}");
    let seconds: Vec<serde_json::Value> = stderr
        .lines()
        .filter(|l| l.starts_with('{'))
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let behind_ms = seconds
        .iter()
        .filter_map(|v| v["behind_ns"].as_u64())
        .max()
        .unwrap_or(0) as f64
        / 1e6;
    let warned = seconds.iter().any(|v| {
        v["warning"]
            .as_str()
            .is_some_and(|w| w.contains("behind schedule") && w.contains("not the target's"))
    });
    assert!(
        behind_ms >= 50.0 || warned,
        "the live view said the run was behind: {behind_ms} ms at most, warned {warned}: {stderr}"
    );
    for said in ["THE CLIENT FAILED ITS OWN CHECKS", "G2.4", "--diagnose"] {
        assert!(stderr.contains(said), "{said}: {stderr}");
    }
    let (pinned_requests, _) = read(&scratch("pinned.pj"));
    assert_eq!(free.status.name(), "completed", "{}", free.reason);
    assert_the_client_blames_itself(&free_requests, timeout_ns);
    // Pinned to the starved CPU: the client's failure, said as such.
    assert_the_client_blames_itself(&pinned_requests, timeout_ns);
    let report = analyze(&scratch("pinned.pj"));
    let stall = report
        .validity
        .gates
        .iter()
        .find(|g| g.id == GateId::RuntimeStall)
        .unwrap();
    assert_eq!(stall.status, Status::Fail, "{stall:?}");
    let p99_ms = report.audit.telemetry.stall_p99_max_us.unwrap() / 1e3;
    assert!(
        p99_ms >= 50.0,
        "the worker's own ticker sees the starvation: per-second p99 up to {p99_ms} ms"
    );
}

/// The mock out of descriptors (`prlimit --nofile=64`, then 100 connections held open) refuses
/// what it cannot accept, says so once, and goes on serving when they close, instead of exiting
/// on EMFILE. Deliberate break: `listener.accept().await?` again (the mock exits, and the health
/// check after the flood finds nobody).
#[test]
fn the_mock_out_of_descriptors_refuses_and_goes_on() {
    use std::io::{BufRead, Read, Write};
    let _beside = crate::beside();
    if crate::lacks(
        "the mock's EMFILE test",
        "prlimit",
        "prlimit is not installed (util-linux; .ci/run installs it)",
    ) {
        return;
    }
    let mut mock = std::process::Command::new("prlimit")
        .args(["--nofile=64:64", env!("CARGO_BIN_EXE_percentes")])
        .args(["mock", "--listen", "127.0.0.1:0", "--threads", "1"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = std::io::BufReader::new(mock.stderr.take().unwrap());
    let mut line = String::new();
    stderr.read_line(&mut line).unwrap();
    let addr: SocketAddr = line
        .split("http://")
        .nth(1)
        .and_then(|rest| rest.split(';').next())
        .and_then(|a| a.trim().parse().ok())
        .unwrap_or_else(|| panic!("no address in {line:?}"));
    let held: Vec<std::net::TcpStream> = (0..100)
        .filter_map(|_| std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(1)).ok())
        .collect();
    assert!(
        held.len() > 64,
        "the flood reached the backlog: {}",
        held.len()
    );
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        mock.try_wait().unwrap().is_none(),
        "the mock exited when it ran out of descriptors"
    );
    drop(held);
    let mut health = String::new();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !health.starts_with("HTTP/1.1 200") && std::time::Instant::now() < deadline {
        health.clear();
        if let Ok(mut s) = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(1)) {
            let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
            let _ = s.write_all(b"GET /health HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n");
            let _ = s.read_to_string(&mut health);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = mock.kill();
    let _ = mock.wait();
    let mut said = String::new();
    let _ = stderr.read_to_string(&mut said);
    assert!(
        health.starts_with("HTTP/1.1 200"),
        "after the flood: {health:?}"
    );
    assert!(said.contains("cannot accept a connection now"), "{said}");
}

// After an idle gap longer than the pool's idle limit the next request still finds a spare
// (issue 32): the simulator's `after_an_idle_gap_the_next_request_finds_a_fresh_spare` and
// `at_two_a_second_under_a_short_idle_limit_no_request_connects_in_line`
// (recorder/src/run/sim/keeper_tests.rs) run the production keeper loop on the simulated pool.

/// Issue 50: SYNs to the target dropped for 2.5 s (an iptables rule on its port; the kernel
/// retransmits a SYN after 1 s, then 2 s). Every request opens a connection here (the idle limit
/// is shorter than the gap between requests), so those sent during the drop begin their connects
/// on time and wait seconds for the SYN-ACK. G2.1 fails, and the report says the wait was the
/// target's: each late request began on time and waited on its connection. Before, the output
/// said THE CLIENT FAILED ITS OWN CHECKS and that every late request waited on the client.
#[test]
fn syns_the_target_drops_are_the_targets_wait_not_the_clients() {
    const TEST: &str = "the SYN-drop test";
    let _machine = crate::recording();
    // The effective uid, from /proc/self/status's `Uid:` line (real, effective, ...).
    let root = std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|ids| ids.split_whitespace().nth(1).map(|id| id == "0"))
        .unwrap_or(false);
    if !root {
        crate::prerequisite_missing(TEST, "needs root, for an iptables rule on the mock's port");
        return;
    }
    if crate::lacks(
        TEST,
        "iptables",
        "iptables is not installed (.ci/run installs it)",
    ) {
        return;
    }
    let addr = start_mock();
    let port = addr.port().to_string();
    let text = config_text(addr, 1, 20.0)
        .replace(
            "time_factor = 1\n",
            "warmup_s = 1.0\nmeasure_s = 8.0\ncooldown_s = 0.0\n",
        )
        .replace(
            "replicas = [\"replica-0\"]\n",
            "replicas = [\"replica-0\"]\nidle_limit_ms = 20\n",
        );
    let config = Config::parse(text.as_bytes()).unwrap();
    let journal = scratch("syn-drop.pj");
    let rule = move |action: &str| {
        let status = std::process::Command::new("iptables")
            .args([
                action, "INPUT", "-p", "tcp", "--dport", &port, "--syn", "-j", "DROP",
            ])
            .status()
            .unwrap();
        assert!(status.success(), "iptables {action}");
    };
    let dropper = std::thread::spawn({
        let rule = rule.clone();
        move || {
            std::thread::sleep(Duration::from_secs(4));
            rule("-I");
            std::thread::sleep(Duration::from_millis(2_500));
            rule("-D");
        }
    });
    let options = Options {
        force: true,
        ..Options::new(journal.clone())
    };
    let summary = run::record(&config, &options);
    dropper.join().unwrap();
    summary.unwrap();
    let report = analyze(&journal);
    let skew = report
        .validity
        .gates
        .iter()
        .find(|g| g.id == GateId::SendSkewP99)
        .unwrap();
    assert_eq!(skew.status, Status::Fail, "{skew:?}");
    let split = report.validity.late_sends.expect("the late requests split");
    assert!(
        split.mostly_connection() && split.waited_on_connection >= 10,
        "{split:?}"
    );
    let md = percentes_analyzer::report::markdown(&report);
    assert!(
        md.contains("G2.1's late requests by where the time went"),
        "{md}"
    );
    let words = percentes_analyzer::report::client_words(&report, &journal).join("\n");
    assert!(
        words.contains("began on time and waited for their connection"),
        "{words}"
    );
    assert!(
        !words.contains("every late request waited on the client"),
        "{words}"
    );
    // With G2.1 the only client gate failed, the words open with the target's wait; a busy
    // host can fail another (G2.4), which is the client's own and says so first.
    let only_skew = report
        .validity
        .gates
        .iter()
        .filter(|g| g.id.is_client_gate() && !g.holds())
        .all(|g| matches!(g.id, GateId::SendSkewP99 | GateId::SendSkewMax));
    if only_skew {
        assert!(words.contains("AND THE WAIT WAS THE TARGET'S"), "{words}");
    }
}

/// Issue 50's "descriptors exhausted beside a CPU hog": the recorder under `prlimit` runs out of
/// descriptors against a slow target (400 ms, 200 rps) while four hogs hold every CPU. Before,
/// `/proc/stat` could not be opened once the descriptors were gone, the host CPU of those
/// seconds was written as 0 % and G2.3 passed on readings never taken. Now every telemetry
/// second is read (the files stay open from the start), G2.3 fails on what the hogs did to the
/// host, the requests the client could not open a connection for are `undispatched`, and no
/// request the starved client began late is classed as the target's.
#[test]
fn descriptors_exhausted_beside_a_cpu_hog_fail_on_readings_taken() {
    let _machine = crate::machine();
    for (program, why) in [
        (
            "prlimit",
            "prlimit (util-linux) is not installed; .ci/run installs it",
        ),
        (
            "stress-ng",
            "stress-ng is not installed (apt-get install stress-ng; .ci/run does)",
        ),
    ] {
        if crate::lacks("the descriptors-beside-a-hog test", program, why) {
            return;
        }
    }
    let slow = mock::spawn_background(MockConfig::constant(400.0, 0.0, 1000), 1)
        .unwrap()
        .0;
    // Factor 100: 8.4 s of schedule and a 0.3 s timeout, so about 60 connections are open at
    // once at 200 rps, past the 40 descriptors.
    let text = config_text(slow, 100, 200.0);
    let config_path = scratch("fd-hog.toml");
    std::fs::write(&config_path, &text).unwrap();
    let journal = scratch("fd-hog.pj");
    let hog = crate::hogs(4, None);
    std::thread::sleep(Duration::from_millis(300));
    let output = std::process::Command::new("prlimit")
        .args(["--nofile=40:40", env!("CARGO_BIN_EXE_percentes"), "record"])
        .arg(&config_path)
        .arg("-o")
        .arg(&journal)
        .args(["--force", "--quiet"])
        .output()
        .unwrap();
    hog.stop();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("ran out of connections"), "{stderr}");
    let config = Config::parse(text.as_bytes()).unwrap();
    let timeout_ns = config.duration_ns(&percentes_formats::pins::CLIENT_TIMEOUT_S);
    let (requests, _) = read(&journal);
    assert_the_client_blames_itself(&requests, timeout_ns);
    assert!(
        count_class(&requests, "undispatched") > 0,
        "the descriptors ran out"
    );
    let file = JournalFile::open(&journal).unwrap();
    let verified = file.verify(&Default::default());
    let unread: Vec<u64> = file
        .records(&verified)
        .filter_map(|(_, r)| match r.unwrap() {
            Record::Telemetry(t) if t.host_cpu().is_none() || t.recorder_cpu().is_none() => {
                Some(t.at_ns)
            }
            _ => None,
        })
        .collect();
    assert!(unread.is_empty(), "seconds not read: {unread:?}");
    let report = analyze(&journal);
    let host_cpu = report
        .validity
        .gates
        .iter()
        .find(|g| g.id == GateId::HostCpu)
        .expect("G2.3");
    assert_eq!(
        host_cpu.status,
        Status::Fail,
        "the hogs held every CPU: {host_cpu:?}"
    );
}

/// The simulated target's `/metrics` as the mock renders its own (`percentes_scenarios::
/// exposition`): every request it has answered whole by `at_ns`, finished with `stop`.
fn simulated_metrics() -> percentes_recorder::run::sim::Metrics {
    percentes_recorder::run::sim::Metrics::new(|at_ns, answered| {
        let mut stats = percentes_scenarios::exposition::ServiceStats::default();
        let (mut running, mut text) = (0, String::new());
        for a in answered.iter().filter(|a| a.arrived_ns <= at_ns) {
            if a.end_ns <= at_ns {
                let since = |t: u64| Duration::from_nanos(t - a.arrived_ns);
                stats.first_token(since(a.first_ns));
                stats.finished(since(a.end_ns), "stop", (8, a.tokens));
            } else {
                running += 1;
            }
        }
        stats.render(&mut text, "mock", (running, 256));
        text
    })
}

/// The one reconciliation of the journal at `path` (one scraped source), which must hold: the
/// server's finished count, the client's, and the words.
struct Reconciled {
    server_finished: Option<f64>,
    client_finished: u64,
    text: String,
}

fn reconciled(path: &Path) -> Reconciled {
    let report = analyze(path);
    let server = report.server.expect("the target's metrics scraped");
    assert_eq!(server.reconciliation.len(), 1, "{server:?}");
    let r = &server.reconciliation[0];
    assert_eq!(r.reconciled, Some(true), "{}", r.text);
    Reconciled {
        server_finished: r.server_finished,
        client_finished: r.client_finished,
        text: r.text.clone(),
    }
}

/// Server-side evidence (SPEC §2) on the simulator: the production scrape thread reads the
/// simulated target's counters, rendered as the mock renders its own, on the simulated clock. A
/// quiet run reconciles exactly (the server's finished count over the scraped span is the
/// client's). A 3 s whole-process stop ends the run on the client's account (`client-behind`),
/// the rest of the schedule `run-end`: those requests never reached the server, so the
/// reconciliation counts among the ones the client gave up on only those it sent and censored at
/// their deadline (the few in flight when it stopped), never the unsent (the defect fixed in
/// af4ae99). Deliberate break: counting every censored request but the abandoned as given up
/// (the old filter) says it gave up on hundreds here.
#[test]
fn the_server_s_count_reconciles_on_the_simulator_and_an_unsent_request_was_never_given_up() {
    use percentes_recorder::run::sim::{Freezes, World, S};
    let _beside = crate::beside();
    let world = |stop: bool| {
        let mut w = World {
            tables_toml: "[server_metrics]\npreset = \"auto\"\n",
            metrics: Some(simulated_metrics()),
            ..World::new(40.0, Duration::ZERO).configured()
        };
        if stop {
            w.stalls.process = Freezes::new(vec![(10 * S, 13 * S)]);
        }
        w
    };
    let quiet = scratch("sim-scrapes.pj");
    std::fs::write(&quiet, world(false).run().journal()).unwrap();
    let r = reconciled(&quiet);
    assert_eq!(
        r.server_finished,
        Some(r.client_finished as f64),
        "{}",
        r.text
    );
    assert!(r.client_finished > 1_000, "{}", r.text);
    let stopped = scratch("sim-scrapes-stopped.pj");
    std::fs::write(&stopped, world(true).run().journal()).unwrap();
    let (requests, _) = read(&stopped);
    assert!(count_class(&requests, "run-end") > 100);
    // The client gave up only on what it sent and then censored at its deadline (the requests
    // in flight when the process stopped), never on what it never sent.
    let gave_up = requests
        .iter()
        .filter(|r| r.dispatched_ns.is_some() && r.outcome == Outcome::Censored as u8)
        .count();
    assert!(gave_up > 0 && gave_up < 10, "{gave_up} sent and censored");
    let r = reconciled(&stopped);
    assert!(
        r.text
            .contains(&format!("the client gave up on {gave_up} request(s) to it")),
        "{}",
        r.text
    );
}
