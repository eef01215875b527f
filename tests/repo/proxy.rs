//! Issue 52: where the first token's time went through a proxy. Debian's HAProxy in front of the
//! mock (which writes its head as it accepts a request, as vLLM does), once as the testbed
//! configures it (`option http-no-delay`) and once without that line: the corking proxy's
//! signatures named by the v0.5 analysis, the configured one's head arriving before its first
//! token. And the archived vLLM study's golden, read under v0.5, showing what the proxy did.

use std::path::{Path, PathBuf};
use std::time::Duration;

use percentes_analyzer::model::{FirstTokenPath, Report};
use percentes_analyzer::JournalFile;
use percentes_formats::config::Config;
use percentes_formats::spec::Spec;
use percentes_recorder::run::{self, Options};
use percentes_scenarios::config::{HeadTiming, MockConfig};

/// A file of the tests' shared folder (`percentes_testkit::shared_folder`), named by the test.
fn scratch(name: &str) -> PathBuf {
    percentes_testkit::shared_folder("proxy").join(name)
}

/// A run's v0.5 report, recorded through HAProxy on `config` (the testbed's, `corking` with its
/// no-delay line taken out) in front of `mock`.
fn through_haproxy(haproxy: &Path, mock: std::net::SocketAddr, corking: bool) -> Report {
    let name = if corking { "corking" } else { "no-delay" };
    let port = super::http2::free_port();
    let socket = scratch(&format!("{name}.sock"));
    let mut text = percentes_study::realbed::haproxy_config(
        port,
        &[("replica-0".into(), mock)],
        "/health",
        &socket,
        None,
    );
    assert!(text.contains(percentes_study::realbed::HAPROXY_NO_DELAY));
    if corking {
        text = text.replace(percentes_study::realbed::HAPROXY_NO_DELAY, "");
    }
    let cfg = scratch(&format!("{name}.cfg"));
    std::fs::write(&cfg, &text).unwrap();
    let mut proxy = std::process::Command::new(haproxy)
        .args(["-db", "-f", cfg.to_str().unwrap()])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let up = (0..100).any(|_| {
        std::thread::sleep(Duration::from_millis(50));
        std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
    });
    assert!(up, "HAProxy did not listen on {port} with\n{text}");
    // Factor 100: a 4.2 s schedule at 5 rps, about 20 streamed requests, each given the
    // pinned 30 s (not divided) to finish.
    let config = format!(
        "schema_version = 1\nprofile = \"dev\"\n[dev]\ntime_factor = 100\nscale_timeout = false\n[target]\nkind = \"mock\"\nbase_url = \"http://127.0.0.1:{port}\"\nmodel = \"mock\"\nreplicas = [\"replica-0\"]\n\
         [schedule]\nseed = 5\narrival = \"deterministic\"\nrate_rps = 5.0\n[fault]\nvariant = \"none\"\n[[routes]]\nlabel = \"chat\"\npath = \"/v1/chat/completions\"\n"
    );
    let config = Config::parse(config.as_bytes()).unwrap();
    let output = scratch(&format!("{name}.pj"));
    let options = Options {
        force: true,
        canary: false,
        ..Options::new(output.clone())
    };
    let recorded = run::record(&config, &options);
    let _ = proxy.kill();
    let _ = proxy.wait();
    recorded.unwrap();
    let file = JournalFile::open(&output).unwrap();
    let run = percentes_analyzer::load::load(&file).unwrap();
    // Read as a diagnosis where the busy machine spoiled the client's own gates (the first
    // token's path is the server's and the proxy's timing, which the client's lateness does not
    // move); any other failing gate fails the test.
    let analyzer = percentes_analyzer::model::Analyzer {
        diagnose: true,
        ..Default::default()
    };
    let report = percentes_analyzer::analysis::analyze(&run, &file, Spec::V0_5, &analyzer);
    let failed: Vec<_> = report.validity.failed().collect();
    assert!(
        report.validity.only_client_gates_failed(),
        "{name}: a gate other than the client's failed: {failed:?}"
    );
    report
}

/// The window `name`'s path: the baseline of a fault run, the measurement of one without.
fn window<'a>(report: &'a Report, name: &str) -> &'a FirstTokenPath {
    report
        .windows
        .iter()
        .find(|w| w.window == name)
        .and_then(|w| w.first_token_path.as_ref())
        .expect("a v0.5 window decomposes its first token's path")
}

fn names(path: &FirstTokenPath) -> Vec<&'static str> {
    path.signatures.iter().map(|s| s.name).collect()
}

/// HAProxy without `option http-no-delay` sends with MSG_MORE: the kernel holds the mock's
/// head and its first tokens (2 ms apart) until its cork timer fires, so the head comes with
/// the first token and the first read carries many; with it, as the testbed configures it,
/// the head comes first, about the mock's 40 ms before the first token, one delta a read.
#[test]
fn a_corking_proxy_is_named_and_the_testbed_s_proxy_does_not_cork() {
    let _machine = crate::machine();
    let Some(haproxy) = ["/usr/sbin/haproxy", "/usr/bin/haproxy"]
        .into_iter()
        .map(Path::new)
        .find(|p| p.exists())
    else {
        crate::prerequisite_missing("the corking-proxy test", "haproxy is not installed");
        return;
    };
    let mut mock = MockConfig::constant(40.0, 2.0, 64);
    mock.timing.head = HeadTiming::OnArrival;
    mock.timing.min_output_tokens = 64;
    let (address, _) = percentes_scenarios::mock::spawn_background(mock, 1).unwrap();

    // Both proxies at once, each with its own recording (5 rps each; what is read is where a
    // proxy holds the head, which a neighbour's load does not move).
    let (corked, clear) = std::thread::scope(|scope| {
        let corked = scope.spawn(|| through_haproxy(haproxy, address, true));
        let clear = scope.spawn(|| through_haproxy(haproxy, address, false));
        (corked.join().unwrap(), clear.join().unwrap())
    });
    let path = window(&corked, "measurement");
    assert!(path.n >= 10, "{path:?}");
    assert_eq!(
        names(path),
        ["head-held", "batched-first-delivery"],
        "{path:?}"
    );

    let path = window(&clear, "measurement");
    assert!(path.n >= 10, "{path:?}");
    assert!(path.signatures.is_empty(), "{path:?}");
    assert_eq!(path.head_with_first, 0, "{path:?}");
    let (head, first) = (path.to_head.unwrap(), path.head_to_first.unwrap());
    assert!(
        head.p90_ms < 20.0 && first.p50_ms > 20.0,
        "the head before the first token: {path:?}"
    );
}

/// The archived study's golden (studies/replica-loss-vllm, run 1: two vLLM replicas behind the
/// testbed's HAProxy of the time, without `option http-no-delay`), read under v0.5: the three
/// signatures in its baseline, and the split at vLLM's clock that says where its 220 ms went.
#[test]
fn the_vllm_golden_shows_its_proxy_under_v0_5() {
    let _beside = crate::beside();
    let journal =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("golden/runs/replica-loss-vllm-factor5.pj");
    let file = JournalFile::open(&journal).unwrap();
    let run = percentes_analyzer::load::load(&file).unwrap();
    let report =
        percentes_analyzer::analysis::analyze(&run, &file, Spec::V0_5, &Default::default());
    let path = window(&report, "baseline");
    assert_eq!(names(path), ["head-held", "batched-first-delivery"]);
    assert_eq!(path.head_with_first, path.n);
    let server = report.server.as_ref().unwrap();
    for w in server.windows.iter().filter(|w| w.window == "baseline") {
        let split = w.path.as_ref().unwrap();
        assert!(split.inside_server_ms < 40.0, "{split:?}");
        assert!(split.after_server_at_least_ms.unwrap() > 150.0, "{split:?}");
        assert_eq!(
            split.signature.as_ref().map(|s| s.name),
            Some("held-after-the-server")
        );
    }
    let older = percentes_analyzer::analysis::analyze(&run, &file, Spec::V0_4, &Default::default());
    assert!(older.windows.iter().all(|w| w.first_token_path.is_none()));
}

/// The same study re-measured (issue 52: studies/replica-loss-vllm/no-delay, run 1): HAProxy with
/// `option http-no-delay`, as the testbed now configures it and journals it. No signature: no
/// head with its first token, one delta a first delivery, and the time after vLLM's first token
/// a minority of the client's mean (about 24 of 152 ms at the replicas' knee).
#[test]
fn the_re_measured_vllm_golden_shows_no_proxy_holding_its_responses() {
    let _beside = crate::beside();
    let journal = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("golden/runs/replica-loss-vllm-no-delay-factor5.pj");
    let file = JournalFile::open(&journal).unwrap();
    let run = percentes_analyzer::load::load(&file).unwrap();
    let proxy = run
        .header
        .fact(percentes_formats::journal::header::HostFact::Proxy)
        .expect("the proxy host fact");
    assert!(proxy.contains("option http-no-delay"), "{proxy}");
    let report =
        percentes_analyzer::analysis::analyze(&run, &file, Spec::V0_5, &Default::default());
    let path = window(&report, "baseline");
    assert!(path.signatures.is_empty(), "{path:?}");
    assert_eq!(path.head_with_first, 0);
    let server = report.server.as_ref().unwrap();
    for w in server.windows.iter().filter(|w| w.window == "baseline") {
        let split = w.path.as_ref().unwrap();
        assert!(split.signature.is_none(), "{split:?}");
        assert!(
            split.after_server_at_least_ms.unwrap() < split.client_ms / 2.0,
            "{split:?}"
        );
    }
}
