//! The testbed with real child processes: round robin through the router, a clean delete that
//! resets in-flight streams, a restart with a slow reload.

use percentes_formats::journal::records::EventKind;
use percentes_formats::pins;
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::time::Duration;

use percentes_scenarios::testbed::{http_call, Testbed};

fn stream_request(addr: SocketAddr, max_tokens: u32) -> TcpStream {
    let body = format!(
        r#"{{"messages":[{{"role":"user","content":"x"}}],"max_tokens":{max_tokens},"stream":true,"ignore_eos":true}}"#
    );
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(format!("POST /v1/chat/completions HTTP/1.1\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}", body.len()).as_bytes()).unwrap();
    s
}

fn upstream_of(head: &str) -> String {
    head.split("x-percentes-upstream: ")
        .nth(1)
        .map(|r| r.split("\r\n").next().unwrap().to_owned())
        .unwrap_or_default()
}

#[test]
fn clean_delete_resets_in_flight_and_restart_brings_the_replica_back() {
    let _machine = crate::recording();
    let binary = Path::new(env!("CARGO_BIN_EXE_percentes"));
    let mut bed = Testbed::start(binary, 2, None).unwrap();
    let service = bed.service();

    // Round robin across both replicas.
    let (status, _) = http_call(
        service,
        "POST",
        "/v1/completions",
        r#"{"prompt":"a","max_tokens":2}"#,
        Duration::from_secs(5),
    )
    .unwrap();
    assert_eq!(status, 200);
    let mut seen = Vec::new();
    for _ in 0..4 {
        let mut s = stream_request(service, 1);
        let mut text = String::new();
        s.read_to_string(&mut text).unwrap();
        seen.push(upstream_of(&text));
    }
    assert!(
        seen.contains(&"replica-0".to_owned()) && seen.contains(&"replica-1".to_owned()),
        "{seen:?}"
    );

    // A long stream on replica-1, then a clean delete: the client sees a reset.
    let victim_stream = loop {
        let mut s = stream_request(service, 2000);
        let mut head = vec![0u8; 4096];
        let n = s.read(&mut head).unwrap();
        if upstream_of(&String::from_utf8_lossy(&head[..n])) == "replica-1" {
            break s;
        }
    };
    bed.clean_delete("replica-1").unwrap();
    let mut victim_stream = victim_stream;
    let mut rest = Vec::new();
    let error = victim_stream.read_to_end(&mut rest).unwrap_err();
    assert_eq!(
        error.kind(),
        ErrorKind::ConnectionReset,
        "in-flight stream must be reset"
    );
    let events: Vec<_> = bed.records().iter().map(|r| r.event).collect();
    assert_eq!(events, ["armed", "fired", "confirmed"]);

    // Only the survivor serves now.
    for _ in 0..4 {
        let mut s = stream_request(service, 1);
        let mut text = String::new();
        s.read_to_string(&mut text).unwrap();
        assert!(text.starts_with("HTTP/1.1 200"), "{text}");
        assert_eq!(upstream_of(&text), "replica-0");
    }

    // Restart after 100 ms with a 400 ms reload: 503 directly while reloading, then ready again.
    let victim = bed.replica("replica-1").unwrap();
    let watcher = std::thread::spawn(move || {
        let mut statuses = Vec::new();
        for _ in 0..40 {
            if let Ok((status, _)) =
                http_call(victim, "GET", "/health", "", Duration::from_millis(200))
            {
                statuses.push(status);
            }
            std::thread::sleep(Duration::from_millis(25));
        }
        statuses
    });
    bed.restart(
        "replica-1",
        Duration::from_millis(100),
        Duration::from_millis(400),
        Duration::from_secs(10),
    )
    .unwrap();
    let statuses = watcher.join().unwrap();
    let first_ok = statuses
        .iter()
        .position(|&s| s == 200)
        .expect("healthy at last");
    assert!(
        statuses[..first_ok].contains(&503),
        "503 while reloading, then 200: {statuses:?}"
    );
    let mut seen = Vec::new();
    for _ in 0..4 {
        let mut s = stream_request(service, 1);
        let mut text = String::new();
        s.read_to_string(&mut text).unwrap();
        seen.push(upstream_of(&text));
    }
    assert!(
        seen.contains(&"replica-1".to_owned()),
        "traffic restored: {seen:?}"
    );
    let restart: Vec<_> = bed
        .records()
        .iter()
        .filter(|r| r.injector == "restart")
        .map(|r| r.event)
        .collect();
    assert_eq!(restart, ["armed", "fired", "ready"]);
}

/// A replica's namespace whose link-local /30 another bed already holds (about one draw in 254
/// between two beds, of one process or two) moves to the next free one, instead of failing or
/// sharing the addresses. The other bed is an interface with the name and the address a
/// bed's pair would have on the drawn /30 (a veth pair: kernels without the dummy module have
/// it); with the third octet drawn from the process id alone, as it was, the new pair took that
/// /30 beside it.
#[test]
fn a_namespace_whose_addresses_another_bed_holds_moves_to_the_next_ones() {
    let _machine = crate::beside();
    if let Some(why) = percentes_scenarios::testbed::isolation_unavailable() {
        crate::prerequisite_missing("the link-local allocation", &why);
        return;
    }
    use percentes_scenarios::netns::{drawn_octet, host_end, Netns};
    let ip = |args: &[&str]| {
        let out = std::process::Command::new("ip")
            .args(args)
            .output()
            .unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )
    };
    let drawn = drawn_octet('t');
    let other = host_end(drawn, 0);
    let peer = format!("{other}x");
    assert!(
        ip(&["link", "add", &other, "type", "veth", "peer", "name", &peer]).0,
        "{other}"
    );
    let held = format!("169.254.{drawn}.1/30");
    assert!(ip(&["addr", "add", &held, "dev", &other]).0);
    let netns = Netns::create('t', 0);
    ip(&["link", "del", &other]);
    let netns = netns.unwrap();
    let [a, b, octet, inside] = netns.address().octets();
    assert_eq!((a, b, inside), (169, 254, 2), "{}", netns.address());
    assert_ne!(octet, drawn, "the pair took the /30 another bed holds");
    let (found, addresses) = ip(&["-o", "addr", "show", "dev", &host_end(octet, 0)]);
    assert!(found);
    assert!(
        addresses.contains(&format!("169.254.{octet}.1/30")),
        "{addresses}"
    );
    drop(netns);
    assert!(
        !ip(&["link", "show", "dev", &host_end(octet, 0)]).0,
        "the pair outlived its namespace"
    );
}

/// Black-hole needs root, iproute2 and iptables (.ci/run installs them); elsewhere it says why
/// it did not run.
#[test]
fn black_hole_silences_the_victim_until_its_armed_expiry() {
    let _machine = crate::testbed();
    if let Some(why) = percentes_scenarios::testbed::isolation_unavailable() {
        crate::prerequisite_missing("the black-hole testbed test", &why);
        return;
    }
    let binary = Path::new(env!("CARGO_BIN_EXE_percentes"));
    let mut bed = Testbed::start_isolated(binary, 2, None).unwrap();
    let service = bed.service();
    let victim = bed.replica("replica-1").unwrap();
    assert!(
        victim.ip().to_string().starts_with("169.254."),
        "link-local only: {victim}"
    );

    // A long stream on the victim, through the service.
    let mut in_flight = loop {
        let mut s = stream_request(service, 4000);
        let mut head = vec![0u8; 4096];
        let n = s.read(&mut head).unwrap();
        if upstream_of(&String::from_utf8_lossy(&head[..n])) == "replica-1" {
            break s;
        }
    };
    let expiry = bed
        .black_hole("replica-1", Duration::from_millis(1500))
        .unwrap();
    let events: Vec<_> = bed.records().iter().map(|r| r.event).collect();
    assert_eq!(
        events,
        ["armed", "fired", "confirmed"],
        "{:?}",
        bed.records()
    );

    // In flight: after what was already buffered drains, nothing arrives, and nothing closes.
    in_flight
        .set_read_timeout(Some(Duration::from_millis(700)))
        .unwrap();
    let mut silent = false;
    let mut buf = vec![0u8; 65536];
    for _ in 0..50 {
        match in_flight.read(&mut buf) {
            Ok(0) => panic!("FIN during a black-hole"),
            Ok(_) => continue,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                silent = true;
                break;
            }
            Err(e) => panic!("{e} during a black-hole: must be silence, not a reset"),
        }
    }
    assert!(silent, "the in-flight stream must go silent");
    // Direct health checks get no answer while partitioned.
    assert!(http_call(victim, "GET", "/health", "", Duration::from_millis(300)).is_err());

    bed.await_expiry("replica-1", expiry).unwrap();
    assert_eq!(bed.records().last().unwrap().event, "expired");
    let (status, _) = http_call(victim, "GET", "/health", "", Duration::from_secs(2)).unwrap();
    assert_eq!(status, 200, "the partition heals on its armed expiry");
}

/// Issue #7's black-hole study, from its scenario file, through the real recorder and analyzer
/// on the isolated testbed (root, iproute2, iptables; `.ci/run` installs them and sets
/// `PERCENTES_CI`, under which a missing prerequisite fails instead of skipping). Time factor 50:
/// about 20 s of load (25 took 45 s); the seed's schedule puts three requests in flight on the
/// victim at the fire, in three runs out of three.
///
/// Breaks this catches: a partition that resets instead of silencing (the victim's in-flight
/// requests would error and G3 fail); a recorder deadline off the pinned timeout (censored
/// before or well after 30 s / 50); a fault that never heals (no partition-heal boundary, the
/// remove command's confirmation fails fault fidelity).
#[test]
fn black_hole_study_censors_the_victims_in_flight_requests_at_exactly_the_timeout() {
    let _machine = crate::testbed();
    if let Some(why) = percentes_scenarios::testbed::isolation_unavailable() {
        crate::prerequisite_missing("the black-hole study", &why);
        return;
    }
    let out = percentes_testkit::Scratch::new("black-hole");
    let (_, stdout) = crate::repo::golden::scenario_run("replica-loss-black-hole", 50, &out);
    assert!(stdout.contains("verify: sealed-intact"), "{stdout}");
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("report/report.json")).unwrap()).unwrap();

    // The label: partition heal, node-loss-representative because G3 and G4 held.
    let recovery = &report["recovery"];
    assert!(
        recovery["label"]
            .as_str()
            .unwrap()
            .starts_with("partition heal"),
        "{recovery}"
    );
    assert_eq!(
        recovery["node_loss_label"].as_str().unwrap(),
        "node-loss-representative (G3 and G4 passed)"
    );
    let gate = |name: &str| {
        report["validity"]["gates"]
            .as_array()
            .unwrap()
            .iter()
            .find(|g| g["gate"].as_str().unwrap().starts_with(name))
            .unwrap_or_else(|| panic!("no gate {name}"))
            .clone()
    };
    for name in ["G3", "G4", "fault fidelity"] {
        assert_eq!(gate(name)["status"], "pass", "{}", gate(name));
    }

    // The victim's in-flight requests at the fire: none errored, every one censored at exactly
    // the client timeout (the recorder's deadline, late only by its own wake-up).
    let file = percentes_analyzer::JournalFile::open(&out.join("run.pj")).unwrap();
    let run = percentes_analyzer::load::load(&file).unwrap();
    let timeout = run.config.duration_ns(&pins::CLIENT_TIMEOUT_S);
    let fired = run.events.first(EventKind::FaultFired).unwrap().at_ns;
    let r = &run.requests;
    let on_victim: Vec<usize> = (0..r.len())
        .filter(|&i| r.dispatched_ns[i] <= fired && r.terminal_ns[i] >= fired)
        .filter(|&i| r.replica_name(i) == Some("replica-1"))
        .collect();
    assert!(
        on_victim.len() >= 2,
        "only {} requests in flight on the victim at the fire",
        on_victim.len()
    );
    for &i in &on_victim {
        assert_eq!(
            r.outcome(i),
            Some(percentes_formats::journal::records::Outcome::Censored),
            "request {i} in flight on the victim was not censored"
        );
        let waited = r.terminal_ns[i] - r.intended_ns[i];
        assert!(
            (timeout..timeout + 20_000_000).contains(&waited),
            "request {i} censored after {waited} ns, the timeout is {timeout} ns"
        );
    }
    let in_flight = &report["in_flight_at_fire"]["on_victim"];
    assert_eq!(in_flight["errored"], 0, "{in_flight}");
    assert_eq!(in_flight["censored"], on_victim.len() as u64, "{in_flight}");
    // The declaration came along.
    let declaration = std::fs::read_to_string(out.join("scenario.md")).unwrap();
    assert!(declaration.contains("## Declaration (in the journal before injection)"));
    assert!(declaration.contains("cleanup confirmed"), "{declaration}");
    let _ = std::fs::remove_dir_all(&out);
}

/// Issue 36's real-parts testbed, end to end with parts it does not own: HAProxy from Debian in
/// front of two replica processes started from a command (here the mock, so CI needs no model),
/// each leading a process group of its own, placed on CPU 1 while the recorder runs on CPU 0
/// with a quota, the victim's group killed by `kill-process-group`, and the supervisor's
/// timeline; the replicas addressed by SRV names that Debian's dnsmasq serves, and the
/// replacement started on a new port. Needs root (control groups), haproxy, dnsmasq and two
/// CPUs; `.ci/run` installs haproxy and dnsmasq-base.
///
/// Breaks this catches: a replica's extra processes surviving the kill (the shell's `sleep`
/// child below); a supervisor whose boundaries are missing or out of order; HAProxy not naming
/// the upstream (G1 unobserved); the placement not journaled, or its control groups left behind;
/// a testbed whose processes outlive the run; a replacement on a new port that the recorder's
/// probes (asking `target.nameserver`) never find.
#[test]
fn real_parts_testbed_kills_a_group_restarts_it_and_journals_the_supervisor() {
    let _machine = crate::recording();
    let root = runs_as_root();
    let installed = |program: &str| {
        ["/usr/sbin", "/usr/bin"]
            .iter()
            .any(|dir| Path::new(dir).join(program).is_file())
    };
    let (haproxy, dnsmasq) = (installed("haproxy"), installed("dnsmasq"));
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    if !root || !haproxy || !dnsmasq || cpus < 2 {
        crate::prerequisite_missing(
            "the real-parts testbed",
            &format!("needs root ({root}), haproxy ({haproxy}), dnsmasq ({dnsmasq}) and two CPUs ({cpus})"),
        );
        return;
    }
    let out = percentes_testkit::Scratch::new("realbed");
    let scenario = out.join("real-parts.toml");
    // The replica is a shell that leads its group, keeps a child of its own (as vLLM's API
    // server keeps its engine core) and runs the mock, which answers 503 for 1 s after a start
    // (a reload), long enough for HAProxy's two failed checks to take the restarted victim out.
    std::fs::write(&scenario, REAL_PARTS_SCENARIO).unwrap();
    let mock = out.join("mock.toml");
    std::fs::write(&mock, REAL_PARTS_MOCK).unwrap();
    let (code, stdout, stderr) = {
        let output = std::process::Command::new(env!("CARGO_BIN_EXE_percentes"))
            .args(["scenario", "run", scenario.to_str().unwrap()])
            .args(["--time-factor", "100", "--force", "--diagnose", "-o"])
            .arg(&out)
            .env("PERCENTES_BIN", env!("CARGO_BIN_EXE_percentes"))
            .env("PERCENTES_MOCK_CONFIG", &mock)
            .output()
            .unwrap();
        (
            output.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&output.stdout).into_owned(),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        )
    };
    assert!(code == 0 || code == 2, "exit {code}: {stdout}{stderr}");
    assert!(stdout.contains("verify: sealed-intact"), "{stdout}{stderr}");
    let file = percentes_analyzer::JournalFile::open(&out.join("run.pj")).unwrap();
    let run = percentes_analyzer::load::load(&file).unwrap();
    let placement = run
        .header
        .fact(percentes_formats::journal::header::HostFact::TargetPlacement)
        .unwrap_or_else(|| panic!("no target-placement fact: {stdout}"));
    assert!(
        placement.contains("on CPUs 1") && placement.contains("on CPUs 0"),
        "{placement}"
    );
    let fired = run.events.first(EventKind::FaultFired).unwrap();
    assert!(fired.detail.contains("process group"), "{}", fired.detail);
    let at = |subject: &str| {
        run.events
            .all(EventKind::Timeline)
            .find(|e| e.subject == subject)
            .unwrap_or_else(|| panic!("no `{subject}` timeline event: {stdout}"))
            .at_ns
    };
    let (reschedule, start, weights, detected) = (
        at("reschedule"),
        at("container-start"),
        at("weight-load"),
        at("detected"),
    );
    assert!(fired.at_ns < reschedule && reschedule <= start && start <= weights);
    assert!(fired.at_ns < detected, "HAProxy's detection after the kill");
    // The replacement came back on a new port, and the probes found it there by its name.
    let log = std::fs::read_to_string(out.join("replica-1.log")).unwrap();
    let ports: Vec<&str> = log
        .lines()
        .filter_map(|l| l.strip_prefix("== percentes study runner: starting replica-1 on port "))
        .map(|rest| rest.split(':').next().unwrap_or_default())
        .collect();
    assert!(
        ports.len() == 2 && ports[0] != ports[1],
        "the replacement's port: {ports:?}"
    );
    let probed_back = run
        .events
        .all(EventKind::Probe)
        .filter(|e| e.subject == "replica-1" && e.at_ns > start)
        .any(|e| e.detail.starts_with("ok"));
    assert!(
        probed_back,
        "no probe found the replacement by its name: {stdout}"
    );
    // G1 read HAProxy's x-upstream: both replicas served.
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("report/report.json")).unwrap()).unwrap();
    let g1 = report["validity"]["gates"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["gate"].as_str().unwrap().starts_with("G1"))
        .unwrap()
        .clone();
    assert_eq!(g1["status"], "pass", "{g1}");
    // Nothing of the testbed is left: no process of either replica's groups (the victim's
    // `sleep` child included), no control group.
    for name in ["replica-0", "replica-1"] {
        let pid: i32 = std::fs::read_to_string(out.join(format!("{name}.pid")))
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        assert!(
            group_members(pid).is_empty(),
            "{name}'s group {pid} outlived the run"
        );
    }
    let groups: Vec<String> = std::fs::read_dir("/sys/fs/cgroup/cpuset")
        .into_iter()
        .chain(std::fs::read_dir("/sys/fs/cgroup"))
        .flatten()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.starts_with("percentes-study-"))
        .collect();
    assert!(groups.is_empty(), "control groups left behind: {groups:?}");
    let _ = std::fs::remove_dir_all(&out);
}

/// The real-parts scenario the test above runs: the mock as the replica command.
const REAL_PARTS_SCENARIO: &str = r#"
[scenario]
name = "real-parts"
question = "Does the real-parts testbed kill, restart and journal?"
expectation = "The victim's group dies whole; the supervisor restarts it."

[testbed]
replicas = 2
capacity_rps = 20.0
orchestrator = { kind = "supervise" }
proxy = { kind = "haproxy" }

[testbed.names]
kind = "dnsmasq"

[testbed.replica]
command = ["sh", "-c", "sleep 600 & exec \"$0\" mock --config \"$1\" --listen 127.0.0.1:{port} --name {name} --slow-reload-ms 1000", "{env:PERCENTES_BIN}", "{env:PERCENTES_MOCK_CONFIG}"]
ready_path = "/health"
start_timeout_s = 30.0
weights_loaded_line = "listening on"

[testbed.placement]
target_cpus = [1]
recorder_cpus = [0]
replica_quota_cpus = 0.5

[run]
config = '''
[target]
kind = "mock"
base_url = "http://{service}"
model = "mock"
replicas = ["replica-0", "replica-1"]
replica_addresses = { "replica-0" = "{replica:replica-0}", "replica-1" = "{replica:replica-1}" }
nameserver = "{nameserver}"
replica_header = "x-upstream"

[schedule]
seed = 1
arrival = "poisson"

[fault]
variant = "clean-delete"
victim = "replica-1"
injector = "kill-process-group"
pid_file = "{pid-file:replica-1}"
confirm_address = "{replica:replica-1}"

[declaration]
experiment_id = "real-parts"
release = "the percentes mock of this build"
dataset = "generated prompts"
target = "replica-1"
boundary = "replica-1's process group"
protected = ["replica-0"]
shed = ["requests in flight on replica-1"]
authoritative = ["HAProxy's server list"]
protections = ["HAProxy's health check"]
cleanup = "the supervisor restarts replica-1"

[[routes]]
label = "chat"
path = "/v1/chat/completions"
prompt_tokens = 16
'''
"#;

/// A mock fast enough for time factor 50's 0.6 s timeout: 256 tokens in about 70 ms.
const REAL_PARTS_MOCK: &str = r#"
[timing]
ttft = { kind = "constant", ms = 5.0 }
token_gap = { kind = "constant", ms = 0.25 }
[capacity]
max_num_seqs = 200
slowdown_per_running = 0.0
"#;

/// Whether this test runs as root (control groups need it).
fn runs_as_root() -> bool {
    std::fs::read_to_string("/proc/self/status").is_ok_and(|s| {
        s.lines()
            .find(|l| l.starts_with("Uid:"))
            .is_some_and(|l| l.split_whitespace().nth(2) == Some("0"))
    })
}

/// The live (not zombie) processes of process group `pgid`.
fn group_members(pgid: i32) -> Vec<i32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|p| {
            std::fs::read_to_string(format!("/proc/{p}/stat")).is_ok_and(|stat| {
                stat.rsplit_once(") ").is_some_and(|(_, rest)| {
                    let fields: Vec<&str> = rest.split(' ').collect();
                    fields.first() != Some(&"Z")
                        && fields.get(2).and_then(|g| g.parse::<i32>().ok()) == Some(pgid)
                })
            })
        })
        .collect()
}

/// Issue 56 item 1: the rollout controller on real parts, against the percentes mock as two
/// releases' replica commands behind Debian's HAProxy (no placement, so no root): the
/// "stable" mock answers its first token in 5 ms, the "candidate" in 40 ms. At time factor 100
/// the controller replaces both replicas one at a time from 0.6 s into the measurement: each
/// step journals the candidate's start, its readiness, HAProxy putting it in service, the old
/// replica's drain, and its stop, in that order, and the run ends with every replica the
/// candidate's. No request errors because of the change; every request is attributed to a
/// replica and by `target.replica_releases` to its release, the report cuts every window by
/// release, the candidate's first tokens are the slower ones, no request reaches an old replica
/// after HAProxy took it out of service, and the testbed is taken down, confirmed.
///
/// Then the same scenario with a candidate that exits as it starts: the rollout stops at its
/// first step (`restart-failed`), both stable replicas keep serving every request, and the
/// declaration says so.
///
/// Breaks this catches: a candidate put in service before it answers (HAProxy would count it
/// DOWN and the step would wait, or requests would error); an old replica stopped before its
/// drain (errored requests); the release map not read (the segments would read `(no release)`);
/// steps journaled out of order; a failed candidate that takes the prior release down with it.
#[test]
fn a_rollout_replaces_each_replica_drained_and_attributes_every_request_to_its_release() {
    let _machine = crate::recording();
    let haproxy = ["/usr/sbin", "/usr/bin"]
        .iter()
        .any(|dir| Path::new(dir).join("haproxy").is_file());
    if !haproxy {
        crate::prerequisite_missing("the rollout controller", "haproxy is not installed");
        return;
    }
    let dir = percentes_testkit::Scratch::new("rollout");
    let stable = dir.join("stable.toml");
    std::fs::write(&stable, REAL_PARTS_MOCK).unwrap();
    let candidate = dir.join("candidate.toml");
    std::fs::write(&candidate, REAL_PARTS_MOCK.replace("ms = 5.0", "ms = 40.0")).unwrap();
    let run = |name: &str, candidate_command: &str| {
        let scenario = dir.join(format!("{name}.toml"));
        std::fs::write(
            &scenario,
            ROLLOUT_SCENARIO.replace("CANDIDATE_COMMAND", candidate_command),
        )
        .unwrap();
        let out = dir.join(name);
        let output = std::process::Command::new(env!("CARGO_BIN_EXE_percentes"))
            .args(["scenario", "run", scenario.to_str().unwrap()])
            .args(["--time-factor", "100", "--force", "--diagnose", "-o"])
            .arg(&out)
            .env("PERCENTES_BIN", env!("CARGO_BIN_EXE_percentes"))
            .env("PERCENTES_MOCK_STABLE", &stable)
            .env("PERCENTES_MOCK_CANDIDATE", &candidate)
            .output()
            .unwrap();
        let code = output.status.code().unwrap_or(-1);
        let said = format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        assert!(code == 0 || code == 2, "exit {code}: {said}");
        assert!(said.contains("verify: sealed-intact"), "{said}");
        let file = percentes_analyzer::JournalFile::open(&out.join("run.pj")).unwrap();
        let run = percentes_analyzer::load::load(&file).unwrap();
        let declaration = std::fs::read_to_string(out.join("scenario.md")).unwrap();
        (run, declaration, out, said)
    };

    // The rollout.
    let (journal, declaration, out, said) = run(
        "rollout",
        r#"["{env:PERCENTES_BIN}", "mock", "--config", "{env:PERCENTES_MOCK_CANDIDATE}", "--listen", "127.0.0.1:{port}", "--name", "{name}"]"#,
    );
    let steps = Steps::of(&journal, &said);
    let when = |fragment: &str| steps.at(fragment);
    let mut last = 0;
    for (step, new, old) in [(1, "replica-2", "replica-0"), (2, "replica-3", "replica-1")] {
        let of = format!("rollout step {step} of 2: ");
        let order = [
            format!("{of}{new} (candidate) started"),
            format!("{of}{new} (candidate) answers /health"),
            format!("{of}HAProxy put {new} (candidate) in service"),
            format!("{of}HAProxy drains {old} (stable)"),
            format!("{of}{old} drained in"),
            format!("{of}{old} (stable) out of service and stopped"),
        ];
        for fragment in &order {
            let at = when(fragment);
            assert!(at >= last, "{fragment:?} out of order: {steps:#?}");
            last = at;
        }
    }
    assert!(
        when("rollout complete: 2 of 2 replicas replaced") >= last,
        "{steps:#?}"
    );
    assert!(
        steps
            .events
            .iter()
            .any(|(_, subject, _)| subject == "container-start"),
        "{steps:#?}"
    );
    // Every request accounted for and none errored; each attributed to a replica and a release.
    let requests = &journal.requests;
    let taken_out = |old: &str| when(&format!("{old} drained in"));
    let mut ttft: std::collections::BTreeMap<&str, Vec<u64>> = Default::default();
    for row in 0..requests.len() {
        assert_ne!(
            requests.outcome(row),
            Some(percentes_formats::journal::records::Outcome::Errored),
            "request {} errored during the rollout",
            requests.index[row]
        );
        let Some(replica) = requests.replica_name(row) else {
            continue;
        };
        let release = journal.config.target.replica_releases[replica].as_str();
        let written = requests.request_written_ns[row];
        if matches!(replica, "replica-0" | "replica-1") {
            assert!(
                written < taken_out(replica),
                "request {} reached {replica} after HAProxy took it out",
                requests.index[row]
            );
        }
        let first = requests.first_content_ns[row];
        if first != percentes_analyzer::frame::NONE {
            ttft.entry(release).or_default().push(first - written);
        }
    }
    let median = |release: &str| {
        let mut v = ttft.get(release).cloned().unwrap_or_default();
        assert!(v.len() >= 5, "{release}: {} first tokens", v.len());
        v.sort_unstable();
        v[v.len() / 2] as f64 / 1e6
    };
    let (stable_ms, candidate_ms) = (median("stable"), median("candidate"));
    assert!(
        candidate_ms > stable_ms + 20.0,
        "the candidate answers its first token 35 ms later: stable {stable_ms:.1} ms, candidate {candidate_ms:.1} ms"
    );
    // The report cuts every window by release.
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("report/report.json")).unwrap()).unwrap();
    let releases: std::collections::BTreeSet<String> = report["segments"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["key"][0][0] == "release")
        .map(|s| s["key"][0][1].as_str().unwrap().to_owned())
        .collect();
    assert!(
        releases.contains("stable") && releases.contains("candidate"),
        "{releases:?}"
    );
    // The analyzer reads the controller's steps back (v0.5, §10 "Reading a testbed change"):
    // the words the runner journals and the ones formats reads are the same.
    let change = &report["change"];
    assert_eq!(change["change"], "rollout", "{change:#}");
    assert_eq!(change["ended"], "complete", "{change:#}");
    for step in ["1 of 2", "2 of 2"] {
        let named: Vec<&str> = change["steps"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|s| s["number"] == step)
            .map(|s| s["step"].as_str().unwrap())
            .collect();
        assert_eq!(
            named,
            [
                "process started",
                "ready",
                "in service",
                "draining",
                "drained",
                "stopped"
            ],
            "{change:#}"
        );
    }
    let firsts: Vec<&str> = change["firsts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["what"].as_str().unwrap())
        .collect();
    assert_eq!(
        firsts,
        ["first served by replica-2", "first served by replica-3"],
        "{change:#}"
    );
    assert!(
        declaration.contains(
            "- outcome: rollout complete: 2 of 2 replicas replaced, \"stable\" by \"candidate\""
        ) && declaration.contains("replica-2 UP (running)")
            && declaration.contains("replica-0 MAINT (stopped)")
            && declaration.contains("- teardown: confirmed: the process groups of"),
        "{declaration}"
    );
    // The one route's expectation is checked on the windows' own classes; statuses, which a
    // run of one route does not report by route, are said to be unchecked, never passed.
    assert!(
        declaration.contains("): as expected (statuses not reported by route; classes correct-success ")
            && declaration.contains("- chat in measurement: NOT CHECKED: a run of one route reports no statuses by route"),
        "{declaration}"
    );

    // A candidate that cannot start: the prior release keeps serving.
    let (journal, declaration, failed_out, said) = run(
        "failed",
        r#"["sh", "-c", "echo this release does not start; exit 3", "{port}"]"#,
    );
    let failed = journal
        .events
        .all(EventKind::Timeline)
        .find(|e| e.subject == "restart-failed")
        .unwrap_or_else(|| panic!("no restart-failed event: {said}"));
    assert!(
        failed.detail.contains("replica-2 exited while starting"),
        "{}",
        failed.detail
    );
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(failed_out.join("report/report.json")).unwrap())
            .unwrap();
    let ended = report["change"]["ended"].as_str().unwrap_or_default();
    assert!(
        ended.starts_with("failed: rollout step 1 of 2: replica-2"),
        "{:#}",
        report["change"]
    );
    let requests = &journal.requests;
    for row in 0..requests.len() {
        assert_ne!(
            requests.outcome(row),
            Some(percentes_formats::journal::records::Outcome::Errored),
            "request {} errored",
            requests.index[row]
        );
        if let Some(replica) = requests.replica_name(row) {
            assert!(
                matches!(replica, "replica-0" | "replica-1"),
                "request {} reached {replica}",
                requests.index[row]
            );
        }
    }
    assert!(
        declaration.contains("- outcome: rollout stopped after 0 of 2 replicas")
            && declaration.contains("the rest still serve \"stable\"")
            && declaration.contains("replica-2 MAINT (stopped)")
            && declaration.contains("replica-0 UP (running)"),
        "{declaration}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// The rollout scenario the test above runs: two releases of the mock behind HAProxy.
const ROLLOUT_SCENARIO: &str = r#"
[scenario]
name = "rollout"
question = "Does the rollout controller replace each replica drained, and journal each step?"
expectation = "Each candidate in service before its predecessor drains; no request errors."

[testbed]
replicas = 2
capacity_rps = 20.0
orchestrator = { kind = "none" }
proxy = { kind = "haproxy" }

[testbed.replica]
command = ["{env:PERCENTES_BIN}", "mock", "--config", "{env:PERCENTES_MOCK_STABLE}", "--listen", "127.0.0.1:{port}", "--name", "{name}"]
ready_path = "/health"
start_timeout_s = 30.0

[testbed.rollout]
kind = "rollout"
from = "stable"
to = "candidate"
command = CANDIDATE_COMMAND
start_s = 60.0

[run]
config = '''
[target]
kind = "mock"
base_url = "http://{service}"
model = "mock"
replicas = ["replica-0", "replica-1", "replica-2", "replica-3"]
replica_releases = { "replica-0" = "stable", "replica-1" = "stable", "replica-2" = "candidate", "replica-3" = "candidate" }
replica_header = "x-upstream"

[schedule]
seed = 1
arrival = "poisson"
rate_rps = {serving_rate_rps}

[fault]
variant = "none"

[declaration]
experiment_id = "rollout"
release = "the percentes mock of this build, two timings"
dataset = "generated prompts"
target = "replica-0"
boundary = "the serving release"
protected = ["the traffic"]
shed = []
authoritative = ["HAProxy's server list"]
protections = ["HAProxy's drain"]
cleanup = "the testbed is taken down, confirmed"

[declaration.abort]
cleanup_failure = false

[[routes]]
label = "chat"
path = "/v1/chat/completions"
prompt_tokens = 16
'''

[[expect]]
route = "chat"
windows = ["measurement"]
classes = ["correct-success"]

[[expect]]
route = "chat"
windows = ["measurement"]
statuses = [200]
"#;

/// Issue 56 item 4's testbed: the real-parts bed isolated, each replica (here the mock, so CI
/// needs no model) a process in a network namespace of its own listening on its namespace's
/// address (the command's `{host}`), behind Debian's HAProxy on the host, and the black-hole
/// fired inside the victim's namespace with its loopback spared, as the vLLM scenario fires it.
/// At time factor 50 (a 0.6 s client timeout, a 2.4 s partition): the replicas are reached
/// through their namespaces (the journal's replica addresses are link-local), every request in
/// flight on the victim at the fire and not answered in the moment the rules took to go in is
/// censored at the timeout, none errored (G3), the fire is confirmed and its removal too,
/// HAProxy's health check takes the victim out during the partition and puts it back after,
/// each journaled as seen (`detected`, then a note) and written into scenario.md with the
/// teardown, which confirms the namespaces deleted; none is left under /run/netns.
///
/// Breaks this catches: a replica bound to loopback inside its namespace (HAProxy never counts
/// it up and the bed does not start); `{netns:NAME}` not given for real beds (the fire command
/// cannot be filled in); a rule that drops the namespace's loopback (no effect on the mock, but
/// the scenario's words); the namespaces outliving the run.
#[test]
fn a_partition_on_the_isolated_real_parts_bed_censors_the_victims_in_flight_requests() {
    let _machine = crate::testbed();
    let why = percentes_scenarios::testbed::isolation_unavailable()
        .or_else(|| (!haproxy_installed()).then(|| "haproxy is not installed".to_owned()));
    if let Some(why) = why {
        crate::prerequisite_missing("the partition on real parts", &why);
        return;
    }
    let catalogue =
        std::fs::read_to_string("scenarios/catalogue/replica-loss-black-hole-vllm.toml").unwrap();
    let command = |key: &str| {
        catalogue
            .lines()
            .find(|l| l.starts_with(key))
            .unwrap()
            .to_owned()
    };
    let scenario = PARTITION_SCENARIO
        .replace("FIRE_COMMAND", &command("fire_command = "))
        .replace("REMOVE_COMMAND", &command("remove_command = "));
    // A 0.39 s answer: about five requests in flight on each replica at 26 rps.
    let mock = REAL_PARTS_MOCK.replace("ms = 0.25", "ms = 1.5");
    let done = run_on_real_parts("partition", &scenario, &mock, 50);
    let (said, run) = (&done.said, &done.run);
    assert!(
        said.contains("real processes in network namespaces"),
        "{said}"
    );
    for (name, address) in &run.config.target.replica_addresses {
        assert!(address.starts_with("169.254."), "{name} at {address}");
    }
    for kind in [EventKind::FaultFired, EventKind::FaultRemoved] {
        assert!(run.events.first(kind).is_some(), "no {kind:?}: {said}");
    }
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(done.dir.join("run/report/report.json")).unwrap())
            .unwrap();
    let gate = |name: &str| {
        report["validity"]["gates"]
            .as_array()
            .unwrap()
            .iter()
            .find(|g| g["gate"].as_str().unwrap().starts_with(name))
            .unwrap_or_else(|| panic!("no gate {name}"))
            .clone()
    };
    for name in ["G3", "fault fidelity"] {
        assert_eq!(gate(name)["status"], "pass", "{}", gate(name));
    }
    let timeout = run.config.duration_ns(&pins::CLIENT_TIMEOUT_S);
    let fired = run.events.first(EventKind::FaultFired).unwrap().at_ns;
    let r = &run.requests;
    let on_victim: Vec<usize> = (0..r.len())
        .filter(|&i| r.dispatched_ns[i] <= fired && r.terminal_ns[i] >= fired)
        .filter(|&i| r.replica_name(i) == Some("replica-1"))
        .collect();
    // One answered in the few ms between the recorded fire (the command's start) and its
    // rules taking hold completes; G3 asks that none errors and that each other is censored
    // at the timeout.
    use percentes_formats::journal::records::Outcome;
    let censored: Vec<usize> = on_victim
        .iter()
        .copied()
        .filter(|&i| r.outcome(i) != Some(Outcome::Completed))
        .collect();
    assert!(!censored.is_empty(), "nothing left in flight on the victim");
    for &i in &censored {
        assert_eq!(
            r.outcome(i),
            Some(Outcome::Censored),
            "request {i} in flight on the victim was not censored"
        );
        let waited = r.terminal_ns[i] - r.intended_ns[i];
        assert!(
            (timeout..timeout + 50_000_000).contains(&waited),
            "request {i} censored after {waited} ns, the timeout is {timeout} ns"
        );
    }
    // HAProxy's check connects within its 250 ms interval: two dropped SYNs take the victim
    // out well inside the partition, and the first check after the heal puts it back.
    let removed = run.events.first(EventKind::FaultRemoved).unwrap().at_ns;
    let timeline: Vec<(u64, &str, &str)> = run
        .events
        .all(EventKind::Timeline)
        .map(|e| (e.at_ns, e.subject.as_str(), e.detail.as_str()))
        .collect();
    let detected = timeline
        .iter()
        .find(|(_, subject, _)| *subject == "detected")
        .unwrap_or_else(|| panic!("no detection: {timeline:?}"));
    assert!(
        detected.0 > fired && detected.0 < removed,
        "{timeline:?}, fired {fired}"
    );
    assert!(detected.2.contains("replica-1 DOWN"), "{timeline:?}");
    assert!(
        timeline
            .iter()
            .any(|(at, _, detail)| *at > detected.0 && detail.contains("replica-1 UP")),
        "{timeline:?}"
    );
    let declaration = &done.declaration;
    for said in [
        "## The testbed's timeline (journaled as seen)",
        "Teardown: confirmed: the process groups of replica-0, replica-1, HAProxy gone",
        "deleted",
    ] {
        assert!(declaration.contains(said), "{said}: {declaration}");
    }
    // Named after the process that made them (scenarios::netns): the `scenario run` child, as
    // the teardown's words say.
    let tag = format!("pcv{}r", done.pid % 100_000);
    assert!(
        declaration.contains(&format!("the namespaces {tag}0")),
        "{tag}: {declaration}"
    );
    let left: Vec<String> = std::fs::read_dir("/run/netns")
        .map(|d| {
            d.filter_map(|e| e.ok()?.file_name().into_string().ok())
                .filter(|n| n.starts_with(&tag))
                .collect()
        })
        .unwrap_or_default();
    assert!(left.is_empty(), "namespaces left: {left:?}");
}

const PARTITION_SCENARIO: &str = r#"
[scenario]
name = "partition"
question = "Does the isolated real-parts bed partition one replica alone?"
expectation = "The victim's in-flight requests are censored at the timeout."

[testbed]
replicas = 2
isolated = true
capacity_rps = 20.0
orchestrator = { kind = "none" }
proxy = { kind = "haproxy" }

[testbed.replica]
command = ["{env:PERCENTES_BIN}", "mock", "--config", "{env:PERCENTES_MOCK}", "--listen", "{host}:{port}", "--name", "{name}"]
ready_path = "/health"
start_timeout_s = 30.0

[run]
config = '''
[target]
kind = "mock"
base_url = "http://{service}"
model = "mock"
replicas = ["replica-0", "replica-1"]
replica_addresses = { "replica-0" = "{replica:replica-0}", "replica-1" = "{replica:replica-1}" }
replica_header = "x-upstream"

[schedule]
seed = 3
arrival = "poisson"

[fault]
variant = "black-hole"
victim = "replica-1"
injector = "exec"
FIRE_COMMAND
REMOVE_COMMAND
confirm_address = "{replica:replica-1}"

[declaration]
experiment_id = "partition"
release = "the percentes mock of this build"
dataset = "generated prompts"
target = "replica-1"
boundary = "replica-1's namespace, its loopback spared"
protected = ["replica-0"]
shed = ["requests in flight on replica-1: censored"]
authoritative = ["HAProxy's server list"]
protections = ["the client timeout"]
cleanup = "the armed expiry; the namespaces go with the testbed"

[[routes]]
label = "chat"
path = "/v1/chat/completions"
prompt_tokens = 16
'''
"#;

/// Issue 56 item 3's controller: the HAProxy in front of two replica processes (the mock, so CI
/// needs no model) SIGKILLed 1.2 s into the measurement at time factor 50 and started again
/// 0.5 s later, on the same port from the same configuration. The kill, the new process and
/// the new proxy counting both replicas up are journaled in that order; every request in flight
/// through the proxy at the kill errors at once (its connection closed under it: no censoring
/// at the timeout, nothing completed after it); every request sent while the port is closed
/// errors as `refused`; the first request sent after the restart is served; and the
/// declaration says how the failover ended, with the teardown confirmed.
///
/// Breaks this catches: the kill not reaching HAProxy's group (nothing errors); the restart on
/// another port or without the configuration (no request served after it); the proxy's new
/// process left out of the teardown (its port still open at the end).
#[test]
fn a_proxy_killed_under_load_errors_its_in_flight_requests_and_its_replacement_serves() {
    let _machine = crate::recording();
    if !haproxy_installed() {
        crate::prerequisite_missing("the proxy failover", "haproxy is not installed");
        return;
    }
    // A 0.39 s answer: about ten requests in flight through the proxy at 26 rps.
    let mock = REAL_PARTS_MOCK.replace("ms = 0.25", "ms = 1.5");
    let done = run_on_real_parts("failover", FAILOVER_SCENARIO, &mock, 50);
    let (said, run) = (&done.said, &done.run);
    let steps = Steps::of(run, said);
    let when = |fragment: &str| steps.at(fragment);
    let killed = when("killed with SIGKILL");
    let restarted = when("HAProxy started again");
    let up = when("counts 2 of 2 replicas UP");
    assert!(killed < restarted && restarted <= up, "{steps:#?}");
    // Half a second down, as planned (25 experiment seconds at factor 50), give or take the
    // controller's 10 ms looks.
    let down = restarted - killed;
    assert!((500_000_000..700_000_000).contains(&down), "down {down} ns");
    use percentes_formats::journal::records::Outcome;
    let r = &run.requests;
    let class = |i: usize| percentes_formats::journal::records::class_name(r.class[i]);
    let through_it: Vec<usize> = (0..r.len())
        .filter(|&i| r.request_written_ns[i] < killed && r.terminal_ns[i] > killed)
        .collect();
    assert!(!through_it.is_empty(), "nothing in flight at the kill");
    for &i in &through_it {
        assert_eq!(
            r.outcome(i),
            Some(Outcome::Errored),
            "request {i}: {:?}",
            class(i)
        );
        assert!(
            r.terminal_ns[i] < killed + 100_000_000,
            "request {i} ended {} ns after the kill",
            r.terminal_ns[i] - killed
        );
    }
    // Sent while the port was closed (begun after the kill's event, ended before the restart).
    let while_down: Vec<usize> = (0..r.len())
        .filter(|&i| r.dispatched_ns[i] > killed && r.terminal_ns[i] < restarted)
        .collect();
    assert!(
        !while_down.is_empty(),
        "nothing sent while the proxy was down"
    );
    for &i in &while_down {
        assert_eq!(class(i), Some("refused"), "request {i}");
    }
    let first_served = (0..r.len())
        .filter(|&i| r.dispatched_ns[i] > up && r.outcome(i) == Some(Outcome::Completed))
        .map(|i| r.dispatched_ns[i])
        .min();
    assert!(first_served.is_some(), "nothing served after the restart");
    // The analyzer reads the same steps and the same requests (v0.5, §10 "Reading a testbed
    // change").
    let change = &done.report["change"];
    assert_eq!(change["change"], "proxy failover", "{change:#}");
    assert_eq!(change["ended"], "complete", "{change:#}");
    assert_eq!(
        steps_read(change),
        ["proxy killed", "proxy started", "every replica up"],
        "{change:#}"
    );
    let group = |name: &str| {
        change["requests"]
            .as_array()
            .unwrap()
            .iter()
            .find(|g| g["group"] == name)
            .unwrap_or_else(|| panic!("no group {name}: {change:#}"))
            .clone()
    };
    assert_eq!(
        group("in flight through the proxy at the kill")["n"],
        through_it.len(),
        "{change:#}"
    );
    let down_read = group("sent while it was down")["n"].as_u64().unwrap();
    assert!(down_read >= while_down.len() as u64, "{change:#}");
    assert!(
        change["firsts"][0]["sent_s"].as_f64().unwrap() > killed as f64 / 1e9,
        "{change:#}"
    );
    let declaration = &done.declaration;
    for said in [
        "## The proxy failover",
        "- ended: complete: down 0.5",
        "Teardown: confirmed",
    ] {
        assert!(declaration.contains(said), "{said}: {declaration}");
    }
}

const FAILOVER_SCENARIO: &str = r#"
[scenario]
name = "failover"
question = "Does the proxy failover kill and restart HAProxy under load, each step journaled?"
expectation = "In-flight requests error at the kill; the new proxy serves."

[testbed]
replicas = 2
capacity_rps = 20.0
orchestrator = { kind = "none" }
proxy = { kind = "haproxy" }

[testbed.replica]
command = ["{env:PERCENTES_BIN}", "mock", "--config", "{env:PERCENTES_MOCK}", "--listen", "127.0.0.1:{port}", "--name", "{name}"]
ready_path = "/health"
start_timeout_s = 30.0

[testbed.proxy_failover]
start_s = 60.0
restart_delay_s = 25.0

[run]
config = '''
[target]
kind = "mock"
base_url = "http://{service}"
model = "mock"
replicas = ["replica-0", "replica-1"]
replica_header = "x-upstream"

[schedule]
seed = 1
arrival = "poisson"
rate_rps = {serving_rate_rps}

[fault]
variant = "none"

[declaration]
experiment_id = "failover"
release = "the percentes mock of this build"
dataset = "generated prompts"
target = "replica-0"
boundary = "the proxy"
protected = ["the replicas"]
shed = ["requests through the proxy at the kill"]
authoritative = ["the new HAProxy's server list"]
protections = ["none"]
cleanup = "the testbed is taken down, confirmed"

[declaration.abort]
cleanup_failure = false

[[routes]]
label = "chat"
path = "/v1/chat/completions"
prompt_tokens = 16
'''
"#;

/// Issue 56 item 2's controller: one replica process (the mock) behind Debian's HAProxy and a
/// second started 1.2 s into the measurement at time factor 50, declared to HAProxy out of
/// service until then. The decision, the new process, its first ready answer and HAProxy
/// putting it in service are journaled in that order; no request reaches the new replica
/// before HAProxy put it in service, and it serves some after; the declaration says it ended
/// in service, with the teardown confirmed (both replicas' groups).
///
/// Breaks this catches: the new replica in service before its check passed (requests reach
/// it before the event); a standby never declared (HAProxy has no server to enable: the
/// scale-out fails); the new replica left out of the teardown.
#[test]
fn a_scale_out_starts_a_replica_and_puts_it_in_service_only_once_checked() {
    let _machine = crate::recording();
    if !haproxy_installed() {
        crate::prerequisite_missing("the scale-out", "haproxy is not installed");
        return;
    }
    let scenario = FAILOVER_SCENARIO
        .replace("replicas = 2\n", "replicas = 1\n")
        .replace(
            "[testbed.proxy_failover]\nstart_s = 60.0\nrestart_delay_s = 25.0",
            "[testbed.scale_out]\nstart_s = 60.0",
        );
    let done = run_on_real_parts("scale-out", &scenario, REAL_PARTS_MOCK, 50);
    let (said, run) = (&done.said, &done.run);
    let steps = Steps::of(run, said);
    let when = |fragment: &str| steps.at(fragment);
    let mut last = 0;
    for fragment in [
        "scale-out: decided to start replica-1",
        "scale-out: replica-1 started",
        "scale-out: replica-1 answers /health",
        "scale-out: HAProxy put replica-1 (the same release) in service",
        "scale-out complete: replica-1 in service",
    ] {
        let at = when(fragment);
        assert!(at >= last, "{fragment:?} out of order: {steps:#?}");
        last = at;
    }
    let in_service = when("in service: UP");
    let r = &run.requests;
    let on_new: Vec<usize> = (0..r.len())
        .filter(|&i| r.replica_name(i) == Some("replica-1"))
        .collect();
    assert!(!on_new.is_empty(), "the new replica served nothing");
    for &i in &on_new {
        assert!(
            r.request_written_ns[i] >= in_service - 50_000_000,
            "request {i} reached replica-1 before HAProxy put it in service"
        );
    }
    let change = &done.report["change"];
    let named = steps_read(change);
    assert_eq!(
        named,
        [
            "decided",
            "process started",
            "ready",
            "in service",
            "complete"
        ],
        "{change:#}"
    );
    let decision_to_service = change["spans"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["span"] == "decision to in service")
        .unwrap_or_else(|| panic!("{change:#}"))["seconds"]
        .as_f64()
        .unwrap();
    let decided = when("scale-out: decided to start replica-1");
    assert!(
        (decision_to_service - (in_service - decided) as f64 / 1e9).abs() < 1e-6,
        "{change:#}"
    );
    assert_eq!(change["firsts"][0]["what"], "first served by replica-1");
    let declaration = &done.declaration;
    for said in [
        "## The scale-out",
        "- ended: in service",
        "Teardown: confirmed: the process groups of replica-0, replica-1, HAProxy gone",
    ] {
        assert!(declaration.contains(said), "{said}: {declaration}");
    }
}
/// A scenario run on the real-parts testbed with the mock as every replica's command: what it
/// said, its journal loaded, its `scenario.md`, and its folder (removed on drop).
struct RealPartsRun {
    said: String,
    run: percentes_analyzer::load::Run,
    /// Its report.json (v0.5, `--diagnose`).
    report: serde_json::Value,
    declaration: String,
    /// Its folder, removed when the test passes.
    dir: percentes_testkit::Scratch,
    /// The `scenario run` process's id: its isolated bed's namespaces are named after it.
    pid: u32,
}

/// A run's `timeline` events (instant, subject, detail), found by what their detail says.
#[derive(Debug)]
struct Steps<'a> {
    events: Vec<(u64, String, String)>,
    said: &'a str,
}

impl<'a> Steps<'a> {
    fn of(run: &percentes_analyzer::load::Run, said: &'a str) -> Steps<'a> {
        let events = run
            .events
            .all(EventKind::Timeline)
            .map(|e| (e.at_ns, e.subject.clone(), e.detail.clone()))
            .collect();
        Steps { events, said }
    }

    /// The instant of the first event whose detail holds `fragment`.
    fn at(&self, fragment: &str) -> u64 {
        self.events
            .iter()
            .find(|(_, _, detail)| detail.contains(fragment))
            .unwrap_or_else(|| {
                panic!(
                    "no timeline event saying {fragment:?}: {:#?}\n{}",
                    self.events, self.said
                )
            })
            .0
    }
}

/// The steps a report.json's testbed change lists, by name, in order.
fn steps_read(change: &serde_json::Value) -> Vec<&str> {
    change["steps"]
        .as_array()
        .unwrap_or_else(|| panic!("no steps: {change:#}"))
        .iter()
        .map(|s| s["step"].as_str().unwrap_or_default())
        .collect()
}

/// Whether Debian's HAProxy is installed.
fn haproxy_installed() -> bool {
    ["/usr/sbin", "/usr/bin"]
        .iter()
        .any(|dir| Path::new(dir).join("haproxy").is_file())
}

/// Runs `scenario` (a scenario file's text whose replica command is the mock with
/// `{env:PERCENTES_MOCK}`, the mock's configuration `mock`) at time factor `factor` in a
/// fresh folder named after `name`; asserts it exited 0 or 2 and verified sealed-intact.
fn run_on_real_parts(name: &str, scenario: &str, mock: &str, factor: u32) -> RealPartsRun {
    let dir = percentes_testkit::Scratch::new(name);
    let mock_path = dir.join("mock.toml");
    std::fs::write(&mock_path, mock).unwrap();
    let scenario_path = dir.join(format!("{name}.toml"));
    std::fs::write(&scenario_path, scenario).unwrap();
    let out = dir.join("run");
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_percentes"))
        .args(["scenario", "run", scenario_path.to_str().unwrap()])
        .args([
            "--time-factor",
            &factor.to_string(),
            "--force",
            "--diagnose",
            "-o",
        ])
        .arg(&out)
        .env("PERCENTES_BIN", env!("CARGO_BIN_EXE_percentes"))
        .env("PERCENTES_MOCK", &mock_path)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let output = child.wait_with_output().unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    let code = output.status.code().unwrap_or(-1);
    assert!(code == 0 || code == 2, "exit {code}: {said}");
    assert!(said.contains("verify: sealed-intact"), "{said}");
    let file = percentes_analyzer::JournalFile::open(&out.join("run.pj")).unwrap();
    let run = percentes_analyzer::load::load(&file).unwrap();
    let declaration = std::fs::read_to_string(out.join("scenario.md")).unwrap();
    let report = serde_json::from_slice(&std::fs::read(out.join("report/report.json")).unwrap())
        .unwrap_or_else(|e| panic!("report.json: {e}: {said}"));
    RealPartsRun {
        said,
        run,
        report,
        declaration,
        dir,
        pid,
    }
}
