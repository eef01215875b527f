//! Direct probes of each replica (`target.replica_addresses`): once per goodput bucket, a plain
//! `GET /health` and `GET /metrics` to every replica's own address, journaled as a `probe` event
//! (formats/JOURNAL.md): detail `ok` with the waiting-queue gauge in thousandths as the value, or
//! `down: <why>` (not answering, or not healthy yet, as a replica still loading its weights).
//!
//! The analyzer reads G7 (baseline waiting queue, SPEC §10) and the replica-ready boundary (§5)
//! from these. The probe runs on its own thread with blocking sockets and short timeouts, far from
//! the dispatch path; each probe is one short connection, a negligible load on the replica.

use percentes_formats::journal::detail::DetailWord;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use crate::error::RecordError;

/// The waiting-queue gauges the probe reads, summed over their label sets: vLLM's name first
/// (the mock exports it too).
pub const WAITING_METRICS: [&str; 1] = ["vllm:num_requests_waiting"];

/// Most bytes of a /metrics answer the probe reads.
const ANSWER_BYTES_MAX: usize = 1 << 20;

/// What one probe found.
#[derive(Clone, Debug, PartialEq)]
pub enum Probe {
    /// Answered 200; the waiting gauge if the answer carries one.
    Up {
        /// `vllm:num_requests_waiting`, when /metrics carries it.
        waiting: Option<f64>,
    },
    /// It did not answer, or not with 200: why.
    Down(String),
}

impl Probe {
    /// The event's detail and value.
    pub fn detail_and_value(&self) -> (String, Option<i64>) {
        match self {
            Probe::Up { waiting } => (
                DetailWord::ProbeUp.with(""),
                waiting.map(|w| (w * 1000.0).round() as i64),
            ),
            Probe::Down(why) => (DetailWord::ProbeDown.with(why), None),
        }
    }
}

/// Probes `address` once, giving up after `timeout` in all: `GET /health` must answer 200 (a
/// replica that is up but still loading is not ready), then, when `gauge` asks, `GET /metrics`
/// gives the gauge (at most 1 MiB of its answer read).
pub fn probe(address: SocketAddr, timeout: Duration, gauge: bool) -> Probe {
    let deadline = Instant::now() + timeout;
    match get(address, "/health", deadline) {
        Err(why) => return Probe::Down(why.to_string()),
        Ok(answer) => {
            if let Err(why) = status_ok(&answer) {
                return Probe::Down(why.at("health").to_string());
            }
        }
    }
    if !gauge {
        return Probe::Up { waiting: None };
    }
    match get(address, "/metrics", deadline) {
        Err(why) => Probe::Down(why.at("metrics").to_string()),
        Ok(answer) => parse(&answer),
    }
}

/// One `Connection: close` GET, read to its end or the deadline, at most 1 MiB.
fn get(address: SocketAddr, path: &str, deadline: Instant) -> Result<Vec<u8>, RecordError> {
    get_bounded(address, path, deadline, ANSWER_BYTES_MAX)
}

/// One `Connection: close` GET, read to its end, the deadline, or `bytes_max` bytes (then the
/// connection is dropped and nothing more is read).
fn get_bounded(
    address: SocketAddr,
    path: &str,
    deadline: Instant,
    bytes_max: usize,
) -> Result<Vec<u8>, RecordError> {
    let left = || {
        deadline
            .saturating_duration_since(Instant::now())
            .max(Duration::from_millis(1))
    };
    let mut stream = TcpStream::connect_timeout(&address, left())
        .map_err(|e| RecordError::answer(format!("connect: {e}")))?;
    let _ = stream.set_nodelay(true);
    let request = format!("GET {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n");
    stream
        .set_write_timeout(Some(left()))
        .and_then(|_| stream.write_all(request.as_bytes()))
        .map_err(|e| RecordError::answer(format!("write: {e}")))?;
    let mut answer = Vec::new();
    let mut buffer = [0u8; 16 * 1024];
    loop {
        if Instant::now() >= deadline {
            return Err(too_late());
        }
        stream
            .set_read_timeout(Some(left()))
            .map_err(|e| RecordError::answer(format!("read: {e}")))?;
        match stream.read(&mut buffer) {
            Ok(0) => return Ok(answer),
            Ok(n) => {
                answer.extend_from_slice(&buffer[..n]);
                if answer.len() > bytes_max {
                    return Err(RecordError::answer(format!(
                        "answer over {bytes_max} bytes; stopped reading"
                    )));
                }
                // A server that keeps the connection open (it ignored `Connection: close`) has
                // answered once its framing says so.
                if let Some(end) = answer_end(&answer) {
                    answer.truncate(end);
                    return Ok(answer);
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            // A read timeout is the deadline passing, whatever the OS calls it.
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                return Err(too_late())
            }
            Err(e) => return Err(RecordError::answer(format!("read: {e}"))),
        }
    }
}

/// The deadline passed before the answer was whole.
fn too_late() -> RecordError {
    RecordError::answer("no complete answer in time")
}

/// The length of the whole answer at the front of `answer`, once it is all there: its head and
/// the body its `Content-Length` or chunked framing gives (a chunked body ends at its last chunk
/// and the empty line after any trailers). `None` while more is to come, and for an answer
/// framed by neither, whose body ends when the connection closes.
fn answer_end(answer: &[u8]) -> Option<usize> {
    let head_end = answer.windows(4).position(|w| w == b"\r\n\r\n")? + 4;
    let head = String::from_utf8_lossy(&answer[..head_end]).to_ascii_lowercase();
    let field = |name: &str| {
        head.lines()
            .find_map(|l| l.strip_prefix(name).map(|v| v.trim().to_owned()))
    };
    if field("transfer-encoding:").is_some_and(|v| v.contains("chunked")) {
        return chunked_end(&answer[head_end..]).map(|n| head_end + n);
    }
    let length: usize = field("content-length:")?.parse().ok()?;
    let end = head_end.checked_add(length)?;
    (answer.len() >= end).then_some(end)
}

/// The length of a whole chunked body at the front of `body`: its chunks, the last (size 0),
/// its trailers and the empty line that ends them; `None` while more is to come or when a size
/// line is not one (the read goes on to its bound, and the parse says what is wrong).
fn chunked_end(body: &[u8]) -> Option<usize> {
    let mut at = 0;
    loop {
        let line_end = at + body[at..].windows(2).position(|w| w == b"\r\n")?;
        let line = std::str::from_utf8(&body[at..line_end]).ok()?;
        let size = usize::from_str_radix(line.split(';').next()?.trim(), 16).ok()?;
        at = line_end + 2;
        if size == 0 {
            // Trailer lines, if any, then an empty line.
            loop {
                let end = at + body[at..].windows(2).position(|w| w == b"\r\n")?;
                if end == at {
                    return Some(at + 2);
                }
                at = end + 2;
            }
        }
        at = at.checked_add(size)?.checked_add(2)?;
        if body.len() < at {
            return None;
        }
    }
}

/// Scrapes a metrics endpoint once: `GET path` within `timeout`, at most `bytes_max` bytes of
/// answer, which must be a 200 with a body of UTF-8 text (chunked or not). The body, or why
/// there is none (of kind [`crate::ErrorKind::Answer`]).
pub fn scrape(
    address: SocketAddr,
    path: &str,
    timeout: Duration,
    bytes_max: usize,
) -> Result<String, RecordError> {
    let answer = get_bounded(address, path, Instant::now() + timeout, bytes_max)?;
    let end = answer
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| RecordError::answer("malformed answer: no end of head"))?;
    let (head, body) = (&answer[..end], &answer[end + 4..]);
    status_ok(head)?;
    let head = String::from_utf8_lossy(head).to_ascii_lowercase();
    let chunked = head
        .lines()
        .any(|l| l.starts_with("transfer-encoding:") && l.contains("chunked"));
    let body = if chunked {
        dechunk(body)?
    } else {
        body.to_vec()
    };
    String::from_utf8(body)
        .map_err(|e| RecordError::answer(format!("the body is not UTF-8 text: {e}")))
}

/// The payload of a chunked body, whole (a `Connection: close` answer read to its end).
fn dechunk(mut body: &[u8]) -> Result<Vec<u8>, RecordError> {
    let cut_short = || RecordError::answer("chunked body cut short");
    let mut out = Vec::new();
    loop {
        let line_end = body
            .windows(2)
            .position(|w| w == b"\r\n")
            .ok_or_else(cut_short)?;
        let line = std::str::from_utf8(&body[..line_end])
            .map_err(|_| RecordError::answer("chunk size not text"))?;
        let size = line.split(';').next().unwrap_or_default().trim();
        let size = usize::from_str_radix(size, 16)
            .map_err(|_| RecordError::answer(format!("chunk size {size:?} is not hexadecimal")))?;
        body = &body[line_end + 2..];
        if size == 0 {
            return Ok(out);
        }
        if body.len() < size + 2 {
            return Err(cut_short());
        }
        out.extend_from_slice(&body[..size]);
        body = &body[size + 2..];
    }
}

/// `Ok` for a 200 status line, else the line.
fn status_ok(answer: &[u8]) -> Result<(), RecordError> {
    let text = String::from_utf8_lossy(answer);
    let status = text.lines().next().unwrap_or_default();
    if status.split_whitespace().nth(1) == Some("200") {
        Ok(())
    } else {
        Err(RecordError::answer(format!("status line {status:?}")))
    }
}

/// Reads a `/metrics` answer: the status, then the gauge from the body.
pub fn parse(answer: &[u8]) -> Probe {
    let text = String::from_utf8_lossy(answer);
    let Some((head, body)) = text.split_once("\r\n\r\n") else {
        return Probe::Down("malformed answer: no end of head".into());
    };
    if let Err(why) = status_ok(head.as_bytes()) {
        return Probe::Down(why.to_string());
    }
    Probe::Up {
        waiting: waiting(body),
    }
}

/// The sum of the waiting gauges' samples in a Prometheus text body, `None` when absent.
pub fn waiting(body: &str) -> Option<f64> {
    let mut total = None;
    for line in body.lines() {
        let line = line.trim();
        if line.starts_with('#') {
            continue;
        }
        for name in WAITING_METRICS {
            let Some(rest) = line.strip_prefix(name) else {
                continue;
            };
            // The name must end here: a label set or the value follows.
            if !(rest.starts_with('{') || rest.starts_with(' ')) {
                continue;
            }
            let value = rest.rsplit_once('}').map_or(rest, |(_, v)| v);
            if let Some(v) = value
                .split_whitespace()
                .next()
                .and_then(|v| v.parse::<f64>().ok())
            {
                if v.is_finite() {
                    *total.get_or_insert(0.0) += v;
                }
            }
        }
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_gauge_is_summed_over_label_sets_and_other_metrics_ignored() {
        let body = "# TYPE vllm:num_requests_waiting gauge\n\
                    vllm:num_requests_waiting{model_name=\"a\"} 2\n\
                    vllm:num_requests_waiting{model_name=\"b\"} 1.5\n\
                    vllm:num_requests_waiting_total 99\n\
                    vllm:num_requests_running{model_name=\"a\"} 7\n";
        assert_eq!(waiting(body), Some(3.5));
        assert_eq!(waiting("vllm:num_requests_waiting 0\n"), Some(0.0));
        assert_eq!(waiting("other 1\n"), None);
        assert_eq!(waiting("vllm:num_requests_waiting{a=\"}\"} NaN\n"), None);
    }

    #[test]
    fn answers_parse_to_up_or_down() {
        let ok =
            b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nvllm:num_requests_waiting 4\n";
        assert_eq!(parse(ok), Probe::Up { waiting: Some(4.0) });
        assert_eq!(parse(ok).detail_and_value(), ("ok".into(), Some(4000)));
        let busy = b"HTTP/1.1 503 Service Unavailable\r\n\r\n";
        assert!(matches!(parse(busy), Probe::Down(why) if why.contains("503")));
        assert!(matches!(parse(b"garbage"), Probe::Down(_)));
    }

    /// A server that answers and keeps the connection open (it ignored `Connection: close`):
    /// the scrape ends with the answer its framing gives, Content-Length or chunked, not at
    /// the deadline. Before issue 50 every such scrape failed "no complete answer in time".
    #[test]
    fn an_answer_ends_where_its_framing_says_on_a_connection_kept_open() {
        let body = "vllm:num_requests_waiting 2\n";
        for answer in [
            format!(
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: keep-alive\r\n\r\n{body}",
                body.len()
            ),
            format!(
                "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n{:x}\r\n{body}\r\n0\r\nx-trailer: 1\r\n\r\n",
                body.len()
            ),
        ] {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            let address = listener.local_addr().unwrap();
            std::thread::spawn(move || {
                let (mut socket, _) = listener.accept().unwrap();
                let mut request = [0u8; 1024];
                let _ = socket.read(&mut request);
                socket.write_all(answer.as_bytes()).unwrap();
                // Held open well past the scrape's deadline.
                std::thread::sleep(Duration::from_secs(10));
            });
            let started = Instant::now();
            let got = scrape(address, "/metrics", Duration::from_secs(5), 1 << 20);
            assert_eq!(got.unwrap(), body);
            assert!(started.elapsed() < Duration::from_secs(5), "waited for the deadline");
        }
        assert_eq!(
            answer_end(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nab"),
            None
        );
        assert_eq!(answer_end(b"HTTP/1.1 200 OK\r\n\r\nab"), None);
        assert_eq!(chunked_end(b"2\r\nab\r\n0\r\n"), None);
        assert_eq!(chunked_end(b"2\r\nab\r\n0\r\n\r\nextra"), Some(12));
    }

    #[test]
    fn a_closed_port_is_down() {
        // Bind, learn the port, close: nothing listens there now.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap();
        let found = probe(port, Duration::from_millis(200), true);
        assert!(
            matches!(&found, Probe::Down(why) if why.starts_with("connect")),
            "{found:?}"
        );
    }

    /// A probe that does not ask for the gauge sends `GET /health` alone; one that does sends
    /// `GET /metrics` after it and reads the gauge.
    #[test]
    fn the_gauge_is_fetched_only_when_asked() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap();
        let server = std::thread::spawn(move || {
            let mut paths = Vec::new();
            for _ in 0..3 {
                let (mut socket, _) = listener.accept().unwrap();
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") && socket.read(&mut byte).unwrap() == 1 {
                    head.push(byte[0]);
                }
                let line = String::from_utf8_lossy(&head)
                    .lines()
                    .next()
                    .unwrap()
                    .to_owned();
                paths.push(line.split(' ').nth(1).unwrap().to_owned());
                socket
                    .write_all(b"HTTP/1.1 200 OK\r\n\r\nvllm:num_requests_waiting 2\n")
                    .unwrap();
            }
            paths
        });
        let wait = Duration::from_secs(5);
        assert_eq!(probe(address, wait, false), Probe::Up { waiting: None });
        assert_eq!(probe(address, wait, true), Probe::Up { waiting: Some(2.0) });
        assert_eq!(server.join().unwrap(), ["/health", "/health", "/metrics"]);
    }
}
