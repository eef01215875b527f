//! HTTP/2 on the recorder's io_uring path (issue 17), against servers nobody here wrote: Debian's
//! nginx with `http2` over TLS (a self-signed certificate from the `openssl` command), hypercorn
//! from PyPI serving an SSE app over cleartext HTTP/2 with prior knowledge, and a server on
//! Python's `h2` library (hypercorn's own) that sends GOAWAY and REFUSED_STREAM on cue
//! (tests/data/h2_server.py), so those cases do not hang on timing.
//!
//! Each run is short (dev profile, durations in seconds). Each shares the machine with one other
//! light recording at the most (`crate::recording`), except the one whose server (Python's h2 on
//! cue) kept 42 % of a core busy, which holds it alone.

#![cfg(target_os = "linux")]

use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use percentes_analyzer::JournalFile;
use percentes_formats::config::Config;
use percentes_formats::journal::records::{class_name, ExtensionKey, Record, RequestRecord};
use percentes_formats::journal::Verdict;
use percentes_recorder::run::{self, Options, RecordError};

/// A file of the tests' shared folder (`percentes_testkit::shared_folder`), named by the test.
fn scratch(name: &str) -> PathBuf {
    percentes_testkit::shared_folder("http2").join(name)
}

/// A folder of its own under [`scratch`].
fn folder(name: &str) -> PathBuf {
    let dir = scratch(name);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

pub(super) fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn data(file: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(file)
}

/// A server process, killed when the test ends however it ends.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.0.id().to_string()])
            .status();
        let _ = self.0.wait();
    }
}

fn wait_for(port: u16, what: &str, child: &mut Child) {
    let up = (0..200).any(|_| {
        std::thread::sleep(Duration::from_millis(50));
        TcpStream::connect(("127.0.0.1", port)).is_ok()
    });
    if !up {
        let _ = child.kill();
        panic!("{what} did not start on port {port}");
    }
}

/// tests/data/h2_server.py on a free port, with its mode's arguments (`stall`, `stall-one`,
/// `flood N`) if any.
fn h2_server(mode: &[&str]) -> (Server, u16) {
    let port = free_port();
    let mut child = Command::new("python3")
        .arg(data("h2_server.py"))
        .arg(port.to_string())
        .args(mode)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_for(port, "the h2 test server", &mut child);
    (Server(child), port)
}

/// Whether `python3` can import `module`; otherwise the test says why it cannot run.
fn python_has(module: &str, test: &str) -> bool {
    let ok = Command::new("python3")
        .args(["-c", &format!("import {module}")])
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        crate::prerequisite_missing(
            test,
            &format!("python3 cannot import {module} (pip install hypercorn)"),
        );
    }
    ok
}

fn nginx_binary(test: &str) -> Option<&'static str> {
    let found = ["/usr/sbin/nginx", "/usr/bin/nginx"]
        .into_iter()
        .find(|p| Path::new(p).exists());
    if found.is_none() {
        crate::prerequisite_missing(test, "nginx is not installed");
    }
    found
}

/// A self-signed certificate for 127.0.0.1 (not a CA: webpki refuses a CA as an end entity),
/// made by the `openssl` command: (certificate, key).
fn certificate(dir: &Path, test: &str) -> Option<(PathBuf, PathBuf)> {
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    let made = Command::new("openssl")
        .args([
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
        ])
        .args(["-subj", "/CN=localhost"])
        .args(["-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"])
        .args(["-addext", "basicConstraints=critical,CA:FALSE"])
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !made {
        crate::prerequisite_missing(test, "the openssl command is missing or failed");
        return None;
    }
    Some((cert, key))
}

/// Debian's nginx on `port` with TLS, `http2` on the listener when asked, and the locations of
/// an OpenAI-style server with fixed answers: SSE chat, JSON completions, a models list, and
/// `/v1/reset`, whose `return 444` nginx sends over HTTP/2 as RST_STREAM.
fn nginx(dir: &Path, port: u16, http2: bool, extra: &str, test: &str) -> Option<(Server, PathBuf)> {
    let binary = nginx_binary(test)?;
    let (cert, key) = certificate(dir, test)?;
    std::fs::create_dir_all(dir.join("logs")).unwrap();
    let conf = format!(
        "worker_processes 1;\nerror_log {d}/logs/error.log;\npid {d}/nginx.pid;\nevents {{ worker_connections 1024; }}\n\
         http {{\n  access_log off;\n  client_body_temp_path {d}/body;\n  proxy_temp_path {d}/proxy;\n  fastcgi_temp_path {d}/fastcgi;\n  uwsgi_temp_path {d}/uwsgi;\n  scgi_temp_path {d}/scgi;\n\
         server {{\n    listen 127.0.0.1:{port} ssl{h2};\n    ssl_certificate {cert};\n    ssl_certificate_key {key};\n    {extra}\n\
         location /v1/models {{ default_type application/json; return 200 '{{\"data\":[{{\"id\":\"mock\"}}]}}'; }}\n\
         location /v1/reset {{ return 444; }}\n\
         location /v1/completions {{ default_type application/json; return 200 '{{\"model\":\"mock\",\"choices\":[{{\"index\":0,\"text\":\"x\"}}],\"usage\":{{\"prompt_tokens\":1,\"completion_tokens\":1}}}}'; }}\n\
         location /v1/chat/completions {{ default_type text/event-stream; return 200 'data: {{\"model\":\"mock\",\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"a\"}}}}]}}\\n\\ndata: {{\"model\":\"mock\",\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"b\"}}}}]}}\\n\\ndata: {{\"model\":\"mock\",\"choices\":[],\"usage\":{{\"prompt_tokens\":5,\"completion_tokens\":2}}}}\\n\\ndata: [DONE]\\n\\n'; }}\n\
         }}\n}}\n",
        d = dir.display(),
        h2 = if http2 { " http2" } else { "" },
        cert = cert.display(),
        key = key.display(),
    );
    std::fs::write(dir.join("nginx.conf"), conf).unwrap();
    let mut child = Command::new(binary)
        .arg("-p")
        .arg(dir)
        .arg("-c")
        .arg(dir.join("nginx.conf"))
        .args(["-g", "daemon off;"])
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_for(port, "nginx", &mut child);
    Some((Server(child), cert))
}

/// A dev run of `seconds` against `base_url` at `rate` rps, `target` lines added to
/// `[target]`, `routes` after the schedule.
fn config(base_url: &str, target: &str, arrival: &str, rate: f64, routes: &str) -> Config {
    let text = format!(
        "schema_version = 1\nprofile = \"dev\"\n[dev]\nwarmup_s = 0\nmeasure_s = 2\ncooldown_s = 0\n\
         [target]\nkind = \"self-hosted\"\nbase_url = \"{base_url}\"\nmodel = \"mock\"\nstream = true\n{target}\n\
         [schedule]\nseed = 5\narrival = \"{arrival}\"\nrate_rps = {rate}\n[fault]\nvariant = \"none\"\n{routes}"
    );
    Config::parse(text.as_bytes()).unwrap()
}

/// The requests of a recording, each with its kind-6 extension's (protocol, stream id).
type Recorded = Vec<(RequestRecord, Option<u64>, Option<u64>)>;

fn record(config: &Config, name: &str) -> Result<Recorded, RecordError> {
    let output = scratch(&format!("{name}.pj"));
    let options = Options {
        force: true,
        canary: false,
        ..Options::new(output.clone())
    };
    run::record(config, &options)?;
    let journal = JournalFile::open(&output).unwrap();
    let report = journal.verify(&Default::default());
    assert_eq!(report.verdict, Verdict::SealedIntact);
    let mut requests = Vec::new();
    let mut extensions = std::collections::HashMap::new();
    for (_, record) in journal.records(&report) {
        match record.unwrap() {
            Record::Request(r) => requests.push(r),
            Record::RequestExtension(x) => {
                extensions.insert(
                    x.index,
                    (x.get(ExtensionKey::Protocol), x.get(ExtensionKey::StreamId)),
                );
            }
            _ => {}
        }
    }
    requests.sort_by_key(|r| r.index);
    Ok(requests
        .into_iter()
        .map(|r| {
            let (protocol, stream) = extensions.get(&r.index).copied().unwrap_or_default();
            (r, protocol, stream)
        })
        .collect())
}

fn class(r: &RequestRecord) -> &'static str {
    class_name(r.class).unwrap_or("?")
}

/// nginx over TLS with ALPN `h2`: streamed SSE and plain JSON complete with every event; nginx's
/// RST_STREAM (its 444) is `reset` with the frame's code; `keepalive_requests 6` makes nginx send
/// GOAWAY after six streams on a connection, so the pool moves to new connections, and a stream
/// that crossed the GOAWAY is `refused`, never anything else. Every request records HTTP/2 and an
/// odd client stream id, rising on its connection; a connection carries at most six streams.
/// Deliberate breaks: reading a reset as a premature close, or reusing a connection after its
/// GOAWAY (its streams would be refused one after another).
#[test]
fn http2_over_tls_against_nginx_completes_streams_and_classifies_resets_and_goaways() {
    const TEST: &str = "the nginx HTTP/2 test";
    let _machine = crate::recording();
    let dir = folder("nginx-h2");
    let port = free_port();
    let Some((_nginx, cert)) = nginx(&dir, port, true, "keepalive_requests 6;", TEST) else {
        return;
    };
    let config = config(
        &format!("https://127.0.0.1:{port}"),
        &format!(
            "http = \"2\"\n[target.tls]\nca_file = {:?}",
            cert.to_str().unwrap()
        ),
        "poisson",
        40.0,
        "[[routes]]\nlabel = \"chat\"\npath = \"/v1/chat/completions\"\nweight = 2\n\
         [[routes]]\nlabel = \"plain\"\npath = \"/v1/completions\"\nstream = false\n\
         [[routes]]\nlabel = \"reset\"\npath = \"/v1/reset\"\n",
    );
    let requests = record(&config, "nginx-h2").unwrap();
    assert!(requests.len() > 40, "{}", requests.len());
    // Each connection's streams the server processed (all but those a GOAWAY refused).
    let mut per_connection: std::collections::BTreeMap<u64, Vec<u64>> = Default::default();
    for (r, protocol, stream) in &requests {
        assert_eq!(*protocol, Some(2), "request {} over HTTP/2", r.index);
        let stream = stream.unwrap_or_else(|| panic!("request {} has no stream id", r.index));
        assert_eq!(stream % 2, 1, "client streams are odd");
        if class(r) != "refused" {
            per_connection
                .entry(r.connection_id)
                .or_default()
                .push(stream);
        }
        match (r.route, class(r)) {
            (0, "correct-success") => {
                assert_eq!(r.content_events, 2, "{r:?}");
                assert_eq!(r.usage_completion_tokens, Some(2));
                assert!(r.first_content_ns.is_some() && r.request_written_ns.is_some());
            }
            (1, "correct-success") => assert_eq!(r.usage_completion_tokens, Some(1)),
            (2, "reset") => assert!(r.detail.starts_with("RST_STREAM"), "{}", r.detail),
            (_, "refused") => assert!(r.detail.starts_with("GOAWAY"), "{}", r.detail),
            (route, other) => panic!("route {route}: {other}: {}", r.detail),
        }
    }
    // nginx's GOAWAY after six streams: no connection had more processed, so the pool moved on
    // to new ones as each was retired (reusing one after its GOAWAY would refuse every stream).
    let processed: usize = per_connection.values().map(Vec::len).sum();
    assert!(
        per_connection.values().all(|s| s.len() <= 6),
        "{per_connection:?}"
    );
    assert!(per_connection.len() * 6 >= processed && per_connection.len() > 2);
    let refused = requests
        .iter()
        .filter(|(r, ..)| class(r) == "refused")
        .count();
    assert!(
        refused * 10 < requests.len(),
        "{refused} refused of {}",
        requests.len()
    );
    // The report's audit says which protocol carried the load, and the export has the columns.
    let file = JournalFile::open(&scratch("nginx-h2.pj")).unwrap();
    let run = percentes_analyzer::load::load(&file).unwrap();
    let analyzer = percentes_analyzer::model::Analyzer {
        diagnose: true,
        ..Default::default()
    };
    let report = percentes_analyzer::analysis::analyze(
        &run,
        &file,
        percentes_formats::spec::Spec::CURRENT,
        &analyzer,
    );
    let artifact = report
        .audit
        .artifact
        .expect("v0.3 writes the audit artifact");
    assert!(
        artifact.protocol.starts_with(&format!(
            "target.http = \"2\": HTTP/2 carried {} and HTTP/1.1 0 of the {} dispatched",
            requests.len(),
            requests.len()
        )),
        "{}",
        artifact.protocol
    );
    assert!(
        artifact.generator.contains("HTTP/2 streams"),
        "{}",
        artifact.generator
    );
    let frame =
        percentes_analyzer::export::requests_frame(&run.requests, 0..run.requests.len(), &[], &[])
            .unwrap();
    let protocol = frame.column("protocol").unwrap().str().unwrap();
    assert!((0..protocol.len()).all(|i| protocol.get(i) == Some("HTTP/2")));
    assert_eq!(frame.column("stream_id").unwrap().null_count(), 0);
}

/// hypercorn serving tests/data/sse_app.py on a free port with the configuration `toml`
/// (written to `name`.toml in `dir`): the running server and its base URL.
fn hypercorn(dir: &Path, name: &str, toml: &str) -> (Server, String) {
    let config = dir.join(format!("{name}.toml"));
    std::fs::write(&config, toml).unwrap();
    let port = free_port();
    let mut child = Command::new("python3")
        .args(["-m", "hypercorn", "sse_app:app", "--bind"])
        .arg(format!("127.0.0.1:{port}"))
        .arg("--config")
        .arg(&config)
        .current_dir(data(""))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_for(port, "hypercorn", &mut child);
    (Server(child), format!("http://127.0.0.1:{port}"))
}

/// hypercorn, limited to two concurrent streams a connection (`h2_max_concurrent_streams`),
/// streaming 12 one-token events 5 ms apart to requests that overlap: every request completes
/// with all 12 events and its usage, no connection ever carries more than two of them at once
/// (the pool opens another rather than queue a stream behind the limit), and more than one
/// connection was needed. Then an app that fails mid-stream: hypercorn closes the connection
/// under the open stream, which is a `premature-close`. Deliberate break: waiting for a slot
/// instead of opening a connection (the streams would queue in h2, and their skew and TTFT would
/// carry the wait).
#[test]
fn http2_cleartext_sse_from_hypercorn_never_waits_behind_the_stream_limit() {
    const TEST: &str = "the hypercorn HTTP/2 test";
    let _machine = crate::recording();
    if !python_has("hypercorn", TEST) {
        return;
    }
    let dir = folder("hypercorn");
    let (_server, base) = hypercorn(&dir, "streams", "h2_max_concurrent_streams = 2\n");
    let streamed = config(
        &base,
        "http = \"2\"",
        "poisson",
        30.0,
        "[[routes]]\nlabel = \"chat\"\npath = \"/v1/chat/completions\"\n[routes.output_tokens]\nkind = \"fixed\"\ntokens = 12\n",
    );
    let requests = record(&streamed, "hypercorn").unwrap();
    assert!(requests.len() > 30, "{}", requests.len());
    let mut spans: std::collections::BTreeMap<u64, Vec<(u64, i32)>> = Default::default();
    for (r, protocol, _) in &requests {
        assert_eq!(class(r), "correct-success", "{r:?}");
        assert_eq!(
            (r.content_events, r.usage_completion_tokens),
            (12, Some(12))
        );
        assert_eq!(*protocol, Some(2));
        // From the stream's start (its body handed to h2, just after it took its slot; the
        // pacer's dispatch comes earlier, before the slot is known) to its end.
        let span = spans.entry(r.connection_id).or_default();
        span.push((r.request_written_ns.unwrap(), 1));
        span.push((r.terminal_ns, -1));
    }
    let mut busiest = 0;
    for events in spans.values_mut() {
        events.sort_unstable();
        let mut open = 0;
        for (_, step) in events.iter() {
            open += step;
            busiest = busiest.max(open);
        }
    }
    assert!(
        busiest <= 2,
        "a connection carried {busiest} streams at once"
    );
    assert!(spans.len() > 1, "the load needed more than one connection");

    // hypercorn closes a connection whose app failed mid-stream when its keep-alive timer
    // (5 s by default) fires: every failing request, the pre-flight's included, waited that
    // long. A server of its own with a 0.5 s timer fails them within it (the test: 15 s -> 7 s).
    let (_failing_server, base) = hypercorn(&dir, "fail", "keep_alive_timeout = 0.5\n");
    let failing = config(
        &base,
        "http = \"2\"",
        "deterministic",
        5.0,
        "[[routes]]\nlabel = \"fail\"\npath = \"/v1/fail\"\n",
    );
    let requests = record(&failing, "hypercorn-fail").unwrap();
    for (r, _, _) in &requests {
        assert_eq!(class(r), "premature-close", "{r:?}");
        assert_eq!(r.content_events, 2, "the two events before the failure");
    }
}

/// A server on Python's h2 library that answers streams 1 and 3 of each connection and sends
/// GOAWAY (last stream id 3) when stream 5 arrives, refuses `/refuse` with RST_STREAM
/// REFUSED_STREAM, and answers `/big-header` with a 100 KB header: on each connection the first
/// two chat requests complete, the third is `refused` by the GOAWAY (the server did not process
/// it), the next request finds a new connection, every `/refuse` is `refused` by its reset, and
/// every `/big-header` is `malformed-framing` (the pinned 64 KiB head cap, which the client
/// enforces by resetting the stream). The pre-flight also went over HTTP/2 (the server answers
/// nothing else).
#[test]
fn goaway_and_refused_streams_are_requests_the_server_did_not_process() {
    const TEST: &str = "the GOAWAY and REFUSED_STREAM test";
    let _machine = crate::machine();
    if !python_has("h2", TEST) {
        return;
    }
    let (_server, port) = h2_server(&[]);
    // One request a 250 ms, never two at once, so each connection's streams are in order.
    let config = config(
        &format!("http://127.0.0.1:{port}"),
        "http = \"2\"",
        "deterministic",
        4.0,
        "[[routes]]\nlabel = \"chat\"\npath = \"/v1/chat/completions\"\nweight = 3\n\
         [[routes]]\nlabel = \"refuse\"\npath = \"/refuse\"\n\
         [[routes]]\nlabel = \"big\"\npath = \"/big-header\"\n",
    );
    let requests = record(&config, "h2-server").unwrap();
    let (mut goaway, mut completed) = (0, 0);
    for (r, protocol, stream) in &requests {
        assert_eq!(*protocol, Some(2));
        match (r.route, class(r), *stream) {
            (1, "refused", _) => assert!(r.detail.contains("REFUSED_STREAM"), "{}", r.detail),
            // A 100 KB header block: over the pinned 64 KiB, refused by the client as an
            // over-long HTTP/1.1 head is.
            (2, "malformed-framing", _) => {
                assert!(
                    r.detail.contains("the client sent RST_STREAM"),
                    "{}",
                    r.detail
                )
            }
            (0, "correct-success", Some(1 | 3)) => completed += 1,
            (0, "refused", Some(s)) if s > 3 => {
                assert!(r.detail.starts_with("GOAWAY NO_ERROR"), "{}", r.detail);
                goaway += 1;
            }
            (route, other, stream) => {
                panic!("route {route} stream {stream:?}: {other}: {}", r.detail)
            }
        }
    }
    assert!(goaway >= 1 && completed >= 2, "{goaway} {completed}");
}

/// Issue 50: a server that sends HEADERS 200 and the first event of each stream, then a GOAWAY
/// whose last stream id is 0 and closes. Each stream was answered, so none is `refused` ("the
/// server did not process this stream", as each one read before): what was received decides,
/// an answer cut short by the connection's end, `premature-close`, with its status and first
/// content kept.
#[test]
fn a_goaway_after_an_answer_is_classed_by_what_was_received() {
    const TEST: &str = "the GOAWAY-after-an-answer test";
    let _machine = crate::recording();
    if !python_has("h2", TEST) {
        return;
    }
    let (_server, port) = h2_server(&["goaway-answered"]);
    let config = config(
        &format!("http://127.0.0.1:{port}"),
        "http = \"2\"",
        "deterministic",
        4.0,
        "[[routes]]\nlabel = \"chat\"\npath = \"/v1/chat/completions\"\n",
    );
    let requests = record(&config, "h2-goaway-answered").unwrap();
    assert!(!requests.is_empty());
    for (r, protocol, _) in &requests {
        assert_eq!(*protocol, Some(2));
        assert_eq!(class(r), "premature-close", "{}", r.detail);
        assert!(
            r.detail
                .contains("after it had begun answering this stream"),
            "{}",
            r.detail
        );
        assert_eq!(r.http_status, 200);
        assert!(r.first_content_ns.is_some());
    }
}

/// `target.http = "auto"` against nginx without `http2`: ALPN settles on HTTP/1.1 for every
/// connection and every request records it; `"2"` against the same server is refused at the
/// pre-flight, naming what ALPN chose.
#[test]
fn auto_falls_back_to_http1_where_the_server_declines_http2_and_2_is_refused() {
    const TEST: &str = "the HTTP/2 fallback test";
    let _machine = crate::recording();
    let dir = folder("nginx-h1");
    let port = free_port();
    let Some((_nginx, cert)) = nginx(&dir, port, false, "", TEST) else {
        return;
    };
    let tls = format!("[target.tls]\nca_file = {:?}", cert.to_str().unwrap());
    let route = "[[routes]]\nlabel = \"chat\"\npath = \"/v1/chat/completions\"\n";
    let base = format!("https://127.0.0.1:{port}");
    let auto = config(
        &base,
        &format!("http = \"auto\"\n{tls}"),
        "poisson",
        20.0,
        route,
    );
    let requests = record(&auto, "auto").unwrap();
    assert!(!requests.is_empty());
    for (r, protocol, stream) in &requests {
        assert_eq!(class(r), "correct-success", "{r:?}");
        assert_eq!((*protocol, *stream), (Some(1), None));
    }
    let two = config(
        &base,
        &format!("http = \"2\"\n{tls}"),
        "poisson",
        20.0,
        route,
    );
    match record(&two, "two") {
        Err(why) if why.kind() == run::ErrorKind::Target => {
            assert!(why.to_string().contains("did not agree to HTTP/2"), "{why}")
        }
        other => panic!("{:?}", other.map(|r| r.len())),
    }
}

/// Ten requests a second for a second against the h2 test server on `port`, with HTTP/2 by
/// prior knowledge; the time factor divides the client timeout (0.3 s) so each stall ends
/// quickly. `target` adds lines to `[target]`.
fn h2_test_server_config(port: u16, target: &str) -> Config {
    let text = format!(
        "schema_version = 1\nprofile = \"dev\"\n[dev]\ntime_factor = 100\nscale_timeout = true\nwarmup_s = 0\nmeasure_s = 1\ncooldown_s = 0\n\
         [target]\nkind = \"self-hosted\"\nbase_url = \"http://127.0.0.1:{port}\"\nmodel = \"mock\"\nstream = true\nhttp = \"2\"\n{target}\
         [schedule]\nseed = 5\narrival = \"deterministic\"\nrate_rps = 10.0\n[fault]\nvariant = \"none\"\n\
         [[routes]]\nlabel = \"chat\"\npath = \"/v1/chat/completions\"\n"
    );
    Config::parse(text.as_bytes()).unwrap()
}

/// A server that grants each stream a 16-byte window and never more (tests/data/h2_server.py
/// `stall`): every request body stalls in the client, each request is censored at its own
/// deadline (`timeout`), and its detail says it was waiting for the server's flow-control
/// window, with how much of its body was unsent; no request claims its body was written.
#[test]
fn a_body_the_servers_window_never_admits_is_censored_and_says_why() {
    const TEST: &str = "the HTTP/2 flow-control stall test";
    let _machine = crate::recording();
    if !python_has("h2", TEST) {
        return;
    }
    let (_server, port) = h2_server(&["stall"]);
    let requests = record(&h2_test_server_config(port, ""), "h2-stall").unwrap();
    assert!(requests.len() >= 5, "{}", requests.len());
    for (r, protocol, _) in &requests {
        assert_eq!((class(r), *protocol), ("timeout", Some(2)), "{r:?}");
        assert!(
            r.detail
                .contains("waiting for the server's HTTP/2 flow-control window"),
            "{}",
            r.detail
        );
        assert_eq!(r.request_written_ns, None);
    }
}

/// A server whose first connection to carry a chat completion never opens its streams' windows,
/// while every other connection does (tests/data/h2_server.py `stall-one`; no pre-flight, so the
/// run's first request meets it): that request is censored waiting for the window, and no later
/// request goes out on its connection, so every other request completes elsewhere. Deliberate
/// break: offering the shut connection to new requests (the issue-32 finding: 135 censored
/// behind one) censors most of the run.
#[test]
fn a_connection_whose_send_window_stays_shut_takes_no_new_request() {
    const TEST: &str = "the HTTP/2 shut-window test";
    let _machine = crate::recording();
    if !python_has("h2", TEST) {
        return;
    }
    let (_server, port) = h2_server(&["stall-one"]);
    let config = h2_test_server_config(port, "preflight = false\n");
    let requests = record(&config, "h2-stall-one").unwrap();
    assert!(requests.len() >= 5, "{}", requests.len());
    let stalled: Vec<&RequestRecord> = requests
        .iter()
        .map(|(r, _, _)| r)
        .filter(|r| class(r) != "correct-success")
        .collect();
    assert_eq!(stalled.len(), 1, "{stalled:#?}");
    let shut = stalled[0];
    assert_eq!(class(shut), "timeout", "{shut:?}");
    assert!(
        shut.detail
            .contains("waiting for the server's HTTP/2 flow-control window"),
        "{}",
        shut.detail
    );
    for (r, protocol, _) in &requests {
        assert_eq!(*protocol, Some(2), "{r:?}");
        if r.index != shut.index {
            assert_ne!(r.connection_id, shut.connection_id, "{r:?}");
        }
    }
}

/// A server that sends 5,000 PINGs on a connection before each answer (tests/data/h2_server.py
/// `flood 5000`): the client ends each such connection once the server passes the pinned
/// SETTINGS-and-PING limit, and each request is `malformed-framing` with the flood named, never
/// a completion bought by acknowledging every frame. Deliberate break: without the limit, h2
/// answers all 5,000 and every request completes.
#[test]
fn a_flood_of_pings_ends_the_connection_and_names_the_flood() {
    const TEST: &str = "the HTTP/2 PING flood test";
    let _machine = crate::machine();
    if !python_has("h2", TEST) {
        return;
    }
    let (_server, port) = h2_server(&["flood", "5000"]);
    let config = h2_test_server_config(port, "preflight = false\n");
    let requests = record(&config, "h2-flood").unwrap();
    assert!(requests.len() >= 5, "{}", requests.len());
    for (r, protocol, _) in &requests {
        assert_eq!(
            (class(r), *protocol),
            ("malformed-framing", Some(2)),
            "{r:?}"
        );
        assert!(
            r.detail.contains("HTTP/2 control-frame flood")
                && r.detail.contains("PING")
                && r.detail.contains("100"),
            "{}",
            r.detail
        );
    }
}
