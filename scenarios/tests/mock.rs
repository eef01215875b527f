//! The mock seen from a socket: responses, gauges, and every fault mode's transport signature.
//! Timings are compressed (tens to hundreds of ms); the whole file runs in a few seconds.

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

use percentes_scenarios::config::{FaultMode, FaultPlan, MockConfig};
use percentes_scenarios::mock::{self, Mock};

/// Starts a mock on an ephemeral port in its own runtime thread.
fn start(config: MockConfig) -> (SocketAddr, Arc<Mock>) {
    mock::spawn_background(config, 2).unwrap()
}

fn fast() -> MockConfig {
    let mut config = MockConfig::constant(20.0, 5.0, 24);
    config.timing.min_output_tokens = 2;
    config
}

fn with_fault(mode: FaultMode, at_ms: u64, duration_ms: u64) -> MockConfig {
    MockConfig {
        faults: vec![FaultPlan {
            mode,
            at_ms,
            duration_ms,
            after_tokens: 3,
        }],
        ..fast()
    }
}

/// How a connection ended from the client's side.
#[derive(Debug, PartialEq, Eq)]
enum Ending {
    /// Orderly close (FIN).
    Fin,
    /// Connection reset (RST).
    Reset,
    /// Nothing more arrived before the read timeout: no FIN, no RST.
    Silent,
}

struct Exchange {
    bytes: Vec<u8>,
    /// (ms since the request was sent, bytes so far) at each read.
    reads: Vec<(f64, usize)>,
    ending: Ending,
}

impl Exchange {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.bytes).into_owned()
    }
    fn head(&self) -> String {
        let text = self.text();
        text.split("\r\n\r\n").next().unwrap_or_default().to_owned()
    }
    fn data_events(&self) -> usize {
        self.text().matches("data: ").count()
    }
}

fn body(stream: bool, max_tokens: u32, ignore_eos: bool) -> String {
    format!(
        r#"{{"model":"mock","messages":[{{"role":"user","content":"hello there"}}],"max_tokens":{max_tokens},"stream":{stream},"stream_options":{{"include_usage":{stream}}},"ignore_eos":{ignore_eos}}}"#
    )
}

/// Sends one request with `Connection: close` and reads until FIN, RST, or `quiet` of silence.
fn exchange(addr: SocketAddr, method: &str, path: &str, body: &str, quiet: Duration) -> Exchange {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(quiet)).unwrap();
    let request = format!(
        "{method} {path} HTTP/1.1\r\nhost: mock\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    let sent = Instant::now();
    stream.write_all(request.as_bytes()).unwrap();
    let mut bytes = Vec::new();
    let mut reads = Vec::new();
    let mut chunk = [0u8; 65536];
    let ending = loop {
        match stream.read(&mut chunk) {
            Ok(0) => break Ending::Fin,
            Ok(n) => {
                bytes.extend_from_slice(&chunk[..n]);
                reads.push((sent.elapsed().as_secs_f64() * 1e3, bytes.len()));
            }
            Err(e) if e.kind() == ErrorKind::ConnectionReset => break Ending::Reset,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                break Ending::Silent
            }
            Err(e) => panic!("unexpected read error {e}"),
        }
    };
    Exchange {
        bytes,
        reads,
        ending,
    }
}

fn chat(addr: SocketAddr, stream: bool, max_tokens: u32) -> Exchange {
    exchange(
        addr,
        "POST",
        "/v1/chat/completions",
        &body(stream, max_tokens, true),
        Duration::from_secs(3),
    )
}

#[test]
fn streams_one_token_per_event_with_usage_and_done() {
    let (addr, _) = start(fast());
    let ex = chat(addr, true, 8);
    assert_eq!(ex.ending, Ending::Fin);
    let head = ex.head().to_ascii_lowercase();
    assert!(head.starts_with("http/1.1 200"), "{head}");
    assert!(
        head.contains("x-percentes-replica: replica-0")
            && head.contains("transfer-encoding: chunked"),
        "{head}"
    );
    let text = ex.text();
    assert_eq!(text.matches("\"content\":\"tok").count(), 8, "{text}");
    assert!(
        text.contains("\"completion_tokens\":8") && text.contains("data: [DONE]\n\n"),
        "{text}"
    );
    assert!(text.ends_with("0\r\n\r\n"), "terminating chunk");
    assert!(text.contains("\"finish_reason\":\"length\""));
}

#[test]
fn usage_is_streamed_only_when_asked_and_models_are_listed() {
    // As OpenAI's and vLLM's servers do: no `stream_options.include_usage`, no usage chunk.
    let (addr, _) = start(fast());
    let plain = r#"{"model":"mock","messages":[{"role":"user","content":"hi"}],"max_tokens":3,"stream":true}"#;
    let ex = exchange(
        addr,
        "POST",
        "/v1/chat/completions",
        plain,
        Duration::from_secs(3),
    );
    let text = ex.text();
    assert!(
        text.contains("data: [DONE]") && !text.contains("\"usage\""),
        "{text}"
    );
    let ex = exchange(addr, "GET", "/v1/models", "", Duration::from_secs(3));
    assert!(ex.head().starts_with("HTTP/1.1 200"), "{}", ex.head());
    assert!(
        ex.text().contains(r#""data":[{"id":"mock""#),
        "{}",
        ex.text()
    );
}

#[test]
fn non_streaming_and_completions_and_eos() {
    let (addr, _) = start(fast());
    let ex = chat(addr, false, 5);
    let text = ex.text();
    assert!(
        text.contains("\"completion_tokens\":5") && text.contains("\"object\":\"chat.completion\""),
        "{text}"
    );
    let ex = exchange(
        addr,
        "POST",
        "/v1/completions",
        r#"{"prompt":"a b c","max_tokens":4,"stream":true,"stream_options":{"include_usage":true},"ignore_eos":true}"#,
        Duration::from_secs(3),
    );
    assert_eq!(
        ex.text().matches("\"text\":\"tok").count(),
        4,
        "{}",
        ex.text()
    );
    assert!(ex.text().contains("\"prompt_tokens\":3"));
    // Without ignore_eos the length is drawn between min_output_tokens (2) and max_tokens.
    for _ in 0..5 {
        let ex = exchange(
            addr,
            "POST",
            "/v1/chat/completions",
            &body(false, 6, false),
            Duration::from_secs(3),
        );
        let text = ex.text();
        let n: u32 = text
            .split("\"completion_tokens\":")
            .nth(1)
            .unwrap()
            .split(',')
            .next()
            .unwrap()
            .parse()
            .unwrap();
        assert!((2..=6).contains(&n), "{n}");
    }
}

#[test]
fn health_metrics_and_bad_requests() {
    let (addr, _) = start(fast());
    assert!(exchange(addr, "GET", "/health", "", Duration::from_secs(2))
        .text()
        .starts_with("HTTP/1.1 200"));
    let metrics = exchange(addr, "GET", "/metrics", "", Duration::from_secs(2)).text();
    assert!(
        metrics.contains("percentes_mock_waiting{replica=\"replica-0\"} 0"),
        "{metrics}"
    );
    assert!(metrics.contains("vllm:num_requests_running"), "{metrics}");
    assert!(exchange(addr, "GET", "/nope", "", Duration::from_secs(2))
        .text()
        .starts_with("HTTP/1.1 404"));
    assert!(exchange(
        addr,
        "POST",
        "/v1/chat/completions",
        "{not json",
        Duration::from_secs(2)
    )
    .text()
    .starts_with("HTTP/1.1 400"));
    assert!(exchange(
        addr,
        "POST",
        "/v1/chat/completions",
        r#"{"messages":[],"max_tokens":0}"#,
        Duration::from_secs(2)
    )
    .text()
    .starts_with("HTTP/1.1 400"));
}

#[test]
fn stall_freezes_emission_and_flushes_at_expiry() {
    // Stall from 100 ms to 500 ms; a 30-token stream started at 0 (20 ms TTFT, 5 ms gaps) is
    // frozen mid-stream for about 400 ms.
    let (addr, state) = start(with_fault(FaultMode::Stall, 100, 400));
    let ex = chat(addr, true, 30);
    assert_eq!(ex.ending, Ending::Fin);
    let gaps: Vec<f64> = ex.reads.windows(2).map(|w| w[1].0 - w[0].0).collect();
    let longest = gaps.iter().cloned().fold(0.0, f64::max);
    assert!(
        longest > 300.0 && longest < 550.0,
        "longest gap {longest} ms: {gaps:?}"
    );
    assert_eq!(ex.text().matches("\"content\":\"tok").count(), 30);
    let audit = state.audit();
    let events: Vec<_> = audit.iter().map(|r| r.event).collect();
    assert_eq!(events, ["armed", "fired", "expired"]);
    let fired_ms = audit[1].at_ns as f64 / 1e6;
    let expired_ms = audit[2].at_ns as f64 / 1e6;
    // Fired and expired at their times, give or take the timer wheel and a busy CI machine.
    assert!(
        (100.0..150.0).contains(&fired_ms) && (500.0..550.0).contains(&expired_ms),
        "{audit:?}"
    );
}

#[test]
fn error_mode_answers_500() {
    let (addr, _) = start(with_fault(FaultMode::Error, 0, 60_000));
    let ex = chat(addr, true, 4);
    assert!(ex.text().starts_with("HTTP/1.1 500"), "{}", ex.text());
}

#[test]
fn stream_abort_resets_in_flight_and_new_streams() {
    // In flight at fire (200 ms): a 100-token stream is reset with RST.
    let (addr, _) = start(with_fault(FaultMode::StreamAbort, 200, 5_000));
    let ex = chat(addr, true, 100);
    assert_eq!(ex.ending, Ending::Reset, "{}", ex.text());
    assert!(ex.data_events() > 3, "some tokens came before the reset");
    // Admitted during the fault: reset after 3 tokens.
    std::thread::sleep(Duration::from_millis(250));
    let ex = chat(addr, true, 100);
    assert_eq!(ex.ending, Ending::Reset);
    assert_eq!(ex.data_events(), 3, "{}", ex.text());
}

#[test]
fn silent_hang_sends_nothing_and_never_closes() {
    let (addr, _) = start(with_fault(FaultMode::SilentHang, 0, 60_000));
    // Watched for the dev profile's client timeout (30 s / time factor 10): no byte, no FIN and
    // no RST arrives in that time.
    let ex = exchange(
        addr,
        "POST",
        "/v1/chat/completions",
        &body(true, 4, true),
        Duration::from_secs(3),
    );
    assert_eq!(ex.ending, Ending::Silent);
    assert!(ex.bytes.is_empty());
}

#[test]
fn slow_reload_is_503_then_200() {
    let (addr, _) = start(with_fault(FaultMode::SlowReload, 0, 300));
    assert!(chat(addr, true, 2).text().starts_with("HTTP/1.1 503"));
    assert!(exchange(addr, "GET", "/health", "", Duration::from_secs(2))
        .text()
        .starts_with("HTTP/1.1 503"));
    std::thread::sleep(Duration::from_millis(350));
    assert!(chat(addr, true, 2).text().starts_with("HTTP/1.1 200"));
    assert!(exchange(addr, "GET", "/health", "", Duration::from_secs(2))
        .text()
        .starts_with("HTTP/1.1 200"));
}

#[test]
fn hostile_modes_produce_exactly_their_malformation() {
    let check = |mode: FaultMode, inspect: &dyn Fn(&Exchange)| {
        let (addr, _) = start(with_fault(mode, 0, 60_000));
        let ex = chat(addr, true, 6);
        inspect(&ex);
    };
    check(FaultMode::MalformedStatusLine, &|ex| {
        assert!(
            ex.text().starts_with("HTTP/1.1 2x0 OK\r\n"),
            "{}",
            ex.text()
        );
    });
    check(FaultMode::OversizedHeaders, &|ex| {
        assert!(
            ex.head().len() > 1 << 20,
            "head of {} bytes",
            ex.head().len()
        );
        assert!(ex.text().starts_with("HTTP/1.1 200 OK"));
    });
    check(FaultMode::BrokenChunked, &|ex| {
        assert_eq!(ex.data_events(), 3);
        assert!(
            ex.text().ends_with("zz\r\nnot a chunk\r\n"),
            "{:?}",
            ex.text()
        );
        assert_eq!(ex.ending, Ending::Fin);
    });
    check(FaultMode::InvalidSse, &|ex| {
        let text = ex.text();
        assert!(
            text.contains("data: {\"choices\": [ this is not json"),
            "{text}"
        );
        assert!(
            !text.contains("[DONE]") && text.ends_with("0\r\n\r\n"),
            "framing intact, SSE payload broken"
        );
    });
    check(FaultMode::InvalidUtf8, &|ex| {
        assert!(ex.bytes.windows(3).any(|w| w == [0xc3, 0x28, 0xff]));
        assert!(ex.text().contains("[DONE]"));
    });
    check(FaultMode::PrematureClose, &|ex| {
        assert_eq!(ex.ending, Ending::Fin);
        assert_eq!(ex.data_events(), 3);
        assert!(!ex.text().ends_with("0\r\n\r\n"), "no terminating chunk");
    });
    check(FaultMode::IncorrectSuccess, &|ex| {
        let text = ex.text();
        assert!(
            text.starts_with("HTTP/1.1 200")
                && text.contains("\"model\":\"stale-model\"")
                && text.contains("[DONE]"),
            "{text}"
        );
        assert!(!text.contains("\"content\":\"tok"));
    });
    // Slowloris: the head trickles one byte per 100 ms; read 5 bytes and time them.
    let (addr, _) = start(with_fault(FaultMode::SlowlorisHeaders, 0, 60_000));
    let mut stream = TcpStream::connect(addr).unwrap();
    let b = body(true, 2, true);
    stream
        .write_all(
            format!(
                "POST /v1/chat/completions HTTP/1.1\r\ncontent-length: {}\r\n\r\n{b}",
                b.len()
            )
            .as_bytes(),
        )
        .unwrap();
    let start = Instant::now();
    let mut got = Vec::new();
    while got.len() < 5 {
        let mut one = [0u8; 16];
        let n = stream.read(&mut one).unwrap();
        got.extend_from_slice(&one[..n]);
    }
    assert_eq!(&got[..5], b"HTTP/");
    assert!(
        start.elapsed() >= Duration::from_millis(350),
        "5 bytes in {:?}",
        start.elapsed()
    );
}

#[test]
fn admin_arms_a_fault_and_the_audit_records_it() {
    let (addr, state) = start(fast());
    let plan = r#"{"mode":"error","at_ms":50,"duration_ms":100}"#;
    let ex = exchange(addr, "POST", "/admin/faults", plan, Duration::from_secs(2));
    assert!(
        ex.text().starts_with("HTTP/1.1 200") && ex.text().contains("\"fault_id\":0"),
        "{}",
        ex.text()
    );
    assert!(chat(addr, false, 1).text().starts_with("HTTP/1.1 200"));
    std::thread::sleep(Duration::from_millis(80));
    assert!(chat(addr, false, 1).text().starts_with("HTTP/1.1 500"));
    std::thread::sleep(Duration::from_millis(100));
    assert!(chat(addr, false, 1).text().starts_with("HTTP/1.1 200"));
    let listed = exchange(addr, "GET", "/admin/faults", "", Duration::from_secs(2)).text();
    assert!(
        listed.contains("\"event\":\"fired\"") && listed.contains("\"event\":\"expired\""),
        "{listed}"
    );
    assert_eq!(state.audit().len(), 3);
    let bad = exchange(
        addr,
        "POST",
        "/admin/faults",
        r#"{"mode":"meteor"}"#,
        Duration::from_secs(2),
    );
    assert!(bad.text().starts_with("HTTP/1.1 400"));
}

/// SPEC §8 needs an engine that overloads like a real one: at 1.3 x capacity the waiting queue
/// grows and time to first token rises.
#[test]
fn overload_at_1_3_times_capacity_grows_the_queue_and_ttft() {
    // 4 slots, 20 tokens at 10 ms + 30 ms TTFT: about 0.23 s a request, capacity about 17 rps.
    let config = MockConfig::constant(30.0, 10.0, 4);
    let (addr, state) = start(config);
    let capacity_rps = 4.0 / 0.23;
    let rate = 1.3 * capacity_rps;
    let count = 40;
    let begin = Instant::now();
    let mut handles = Vec::new();
    for i in 0..count {
        let due = Duration::from_secs_f64(i as f64 / rate);
        handles.push(std::thread::spawn(move || {
            std::thread::sleep(due.saturating_sub(begin.elapsed()));
            let ex = chat(addr, true, 20);
            // TTFT: time of the first read carrying a token.
            let text = ex.text();
            let first = text
                .find("\"content\":\"tok0")
                .map(|at| ex.reads.iter().find(|(_, n)| *n > at).unwrap().0);
            (i, first.unwrap())
        }));
    }
    let mut peak_waiting = 0;
    while begin.elapsed() < Duration::from_secs_f64(count as f64 / rate) {
        peak_waiting = peak_waiting.max(state.waiting());
        std::thread::sleep(Duration::from_millis(10));
    }
    let mut ttft: Vec<(usize, f64)> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    ttft.sort_by_key(|x| x.0);
    let early: f64 = ttft[..8].iter().map(|x| x.1).sum::<f64>() / 8.0;
    let late: f64 = ttft[count - 8..].iter().map(|x| x.1).sum::<f64>() / 8.0;
    assert!(
        peak_waiting >= 3,
        "the queue should grow; peak waiting {peak_waiting}"
    );
    assert!(
        late > early + 100.0,
        "TTFT should rise under overload: early {early:.0} ms, late {late:.0} ms"
    );
}

mod router {
    use super::*;
    use percentes_scenarios::router::{self as rt, Endpoint, Router};

    fn start_router(endpoints: Vec<Endpoint>) -> (SocketAddr, Arc<Router>) {
        rt::spawn_background(endpoints).unwrap()
    }

    fn endpoint(name: &str, addr: SocketAddr) -> Endpoint {
        Endpoint {
            name: name.into(),
            address: addr.to_string(),
            ready: true,
        }
    }

    fn request_with_id(addr: SocketAddr, id: &str) -> Exchange {
        let b = body(true, 3, true);
        let mut stream = TcpStream::connect(addr).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(3)))
            .unwrap();
        let request = format!("POST /v1/chat/completions HTTP/1.1\r\nx-request-id: {id}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{b}", b.len());
        stream.write_all(request.as_bytes()).unwrap();
        let mut bytes = Vec::new();
        let ending = match stream.read_to_end(&mut bytes) {
            Ok(_) => Ending::Fin,
            Err(e) if e.kind() == ErrorKind::ConnectionReset => Ending::Reset,
            Err(e) => panic!("{e}"),
        };
        Exchange {
            bytes,
            reads: Vec::new(),
            ending,
        }
    }

    #[test]
    fn round_robin_with_upstream_header_and_access_log() {
        let (a, _) = start(MockConfig {
            name: "replica-a".into(),
            ..fast()
        });
        let (b, _) = start(MockConfig {
            name: "replica-b".into(),
            ..fast()
        });
        let (addr, router) = start_router(vec![endpoint("a", a), endpoint("b", b)]);
        let mut served = Vec::new();
        for i in 0..4 {
            let ex = request_with_id(addr, &format!("req-{i}"));
            let head = ex.head().to_ascii_lowercase();
            assert!(head.starts_with("http/1.1 200"), "{head}");
            assert!(
                !head.contains("connection: close"),
                "the upstream's connection header is not forwarded"
            );
            let upstream = head
                .split("x-percentes-upstream: ")
                .nth(1)
                .unwrap()
                .split("\r\n")
                .next()
                .unwrap()
                .to_owned();
            let replica = head
                .split("x-percentes-replica: ")
                .nth(1)
                .unwrap()
                .split("\r\n")
                .next()
                .unwrap()
                .to_owned();
            assert_eq!(replica, format!("replica-{upstream}"));
            assert!(ex.text().contains("[DONE]"));
            served.push(upstream);
        }
        assert_eq!(served, ["a", "b", "a", "b"]);
        let log = router.access_log();
        assert_eq!(log.len(), 4);
        assert_eq!(
            (
                log[1].request_id.as_str(),
                log[1].upstream.as_str(),
                log[1].status,
                log[1].outcome
            ),
            ("req-1", "b", 200, "completed")
        );
    }

    #[test]
    fn a_dead_upstream_gives_502_once_with_no_retry_and_readiness_removes_it() {
        let (a, _) = start(fast());
        let dead = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap(); // closed again at once
        let (addr, router) = start_router(vec![endpoint("a", a), endpoint("dead", dead)]);
        let first = request_with_id(addr, "x1");
        let second = request_with_id(addr, "x2");
        assert!(first.text().starts_with("HTTP/1.1 200"));
        assert!(
            second.text().starts_with("HTTP/1.1 502")
                && second.text().contains("x-percentes-upstream: dead"),
            "{}",
            second.text()
        );
        assert_eq!(router.access_log()[1].outcome, "connect-failed");
        let ex = exchange(
            addr,
            "POST",
            "/admin/endpoints",
            r#"{"name":"dead","ready":false}"#,
            Duration::from_secs(2),
        );
        assert!(ex.text().starts_with("HTTP/1.1 200"));
        for i in 0..3 {
            assert!(request_with_id(addr, &format!("y{i}"))
                .text()
                .starts_with("HTTP/1.1 200"));
        }
        let ex = exchange(
            addr,
            "POST",
            "/admin/endpoints",
            r#"{"name":"nope","ready":false}"#,
            Duration::from_secs(2),
        );
        assert!(ex.text().starts_with("HTTP/1.1 404"));
    }
}

#[test]
fn a_store_outage_fails_uncached_lookups_explicitly_and_keeps_the_cache_answering() {
    // Outage from 150 ms for 300 ms.
    let (addr, mock) = start(with_fault(FaultMode::StoreOutage, 150, 300));
    let quiet = Duration::from_millis(500);
    let lookup = |path: &str| exchange(addr, "POST", path, "{}", quiet);
    let hit = lookup("/v1/store/cached");
    assert!(hit.head().starts_with("HTTP/1.1 200"), "{}", hit.head());
    assert!(
        hit.head().contains("x-percentes-replica: replica-0"),
        "{}",
        hit.head()
    );
    assert!(hit.text().contains(r#""cache":"hit""#), "{}", hit.text());
    let miss = lookup("/v1/store/uncached");
    assert!(miss.head().starts_with("HTTP/1.1 200") && miss.text().contains(r#""cache":"miss""#));
    std::thread::sleep(Duration::from_millis(200));
    // During the outage: the cache answers, the store does not, and says so.
    let hit = lookup("/v1/store/cached");
    assert!(hit.head().starts_with("HTTP/1.1 200"), "{}", hit.head());
    let miss = lookup("/v1/store/uncached");
    assert!(miss.head().starts_with("HTTP/1.1 503"), "{}", miss.head());
    assert!(
        miss.text().contains("dependency_unavailable"),
        "{}",
        miss.text()
    );
    // Generation is not the store's business.
    assert!(chat(addr, false, 4).head().starts_with("HTTP/1.1 200"));
    std::thread::sleep(Duration::from_millis(300));
    assert!(lookup("/v1/store/uncached")
        .head()
        .starts_with("HTTP/1.1 200"));
    let metrics = mock.metrics();
    assert!(
        metrics.contains(r#"outcome="store-unavailable"} 1"#),
        "{metrics}"
    );
}

#[test]
fn a_cpu_throttle_slows_everything_and_sheds_generation_while_requests_wait() {
    // One decode slot; 20 ms to first token, 5 ms a token; throttle x4 from 0 ms for 2 s.
    let mut config = with_fault(FaultMode::CpuThrottle, 0, 2000);
    config.capacity.max_num_seqs = 1;
    let (addr, mock) = start(config);
    std::thread::sleep(Duration::from_millis(50));
    // A lookup is cheap even throttled: 2 ms x 4.
    let started = Instant::now();
    let hit = exchange(
        addr,
        "POST",
        "/v1/store/cached",
        "{}",
        Duration::from_millis(500),
    );
    assert!(hit.head().starts_with("HTTP/1.1 200"));
    assert!(
        started.elapsed() >= Duration::from_millis(8),
        "{:?}",
        started.elapsed()
    );
    // Generation takes 4 x (20 + 3 x 5) = 140 ms; a second request arriving while the first
    // holds the only slot waits, and a third arriving while one waits is shed.
    let first = std::thread::spawn(move || chat(addr, false, 4));
    std::thread::sleep(Duration::from_millis(30));
    let second = std::thread::spawn(move || chat(addr, false, 4));
    std::thread::sleep(Duration::from_millis(30));
    let third = chat(addr, false, 4);
    assert!(third.head().starts_with("HTTP/1.1 503"), "{}", third.head());
    assert!(third.text().contains("overloaded"), "{}", third.text());
    let first = first.join().unwrap();
    let second = second.join().unwrap();
    assert!(first.head().starts_with("HTTP/1.1 200") && second.head().starts_with("HTTP/1.1 200"));
    assert!(
        first.reads.last().unwrap().0 >= 130.0,
        "{:?}",
        first.reads.last()
    );
    assert!(
        mock.metrics().contains(r#"outcome="shed"} 1"#),
        "{}",
        mock.metrics()
    );
}
