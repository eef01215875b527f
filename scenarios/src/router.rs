//! A per-request (layer-7) round-robin balancer in front of mock replicas: the zero-install stand-in
//! for a Kubernetes Service behind an L7 proxy.
//!
//! Each request goes to the next ready endpoint over a fresh upstream connection; there are no
//! retries. The response head gains `x-percentes-upstream: NAME`; the body is copied byte for byte
//! as it arrives, so streams stay streams. An upstream reset resets the client connection; an
//! upstream that refuses the connection yields 502. Endpoints change readiness only through
//! `POST /admin/endpoints` (the testbed plays the control plane), never by the router's own
//! probing, so a black-holed endpoint stays routable exactly as long as the control plane says.
//! Every request leaves an access-log line keyed by the client's `x-request-id`
//! (`GET /admin/access-log` returns them as JSON).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::Instant;

use crate::http::{self, ReadError, Request};

/// Response header naming the upstream that served a request.
pub const UPSTREAM_HEADER: &str = "x-percentes-upstream";
/// Request header the access log is keyed by.
pub const REQUEST_ID_HEADER: &str = "x-request-id";
/// Largest upstream response head the router parses.
pub const UPSTREAM_HEAD_BYTES_MAX: usize = 64 << 10;

/// One upstream replica.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Endpoint {
    /// The replica's name.
    pub name: String,
    /// host:port
    pub address: String,
    /// Whether the control plane lists it as ready.
    pub ready: bool,
}

impl Endpoint {
    /// A ready endpoint from a `NAME=HOST:PORT` flag.
    pub fn parse_flag(spec: &str) -> Result<Endpoint, crate::error::Error> {
        match spec.split_once('=') {
            Some((name, address)) if !name.is_empty() && !address.is_empty() => Ok(Endpoint {
                name: name.into(),
                address: address.into(),
                ready: true,
            }),
            _ => Err(crate::error::Error::refused(format!(
                "--upstream {spec:?} must be NAME=HOST:PORT"
            ))),
        }
    }
}

/// One access-log line.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct AccessRecord {
    /// ns since the router started, when the request arrived.
    pub at_ns: u64,
    /// The request's id.
    pub request_id: String,
    /// The replica it went to.
    pub upstream: String,
    /// The upstream's status code, 0 if none arrived; 502 when the router answered itself.
    pub status: u16,
    /// `completed`, `upstream-reset`, `client-gone`, `connect-failed`, `no-endpoint`.
    pub outcome: &'static str,
    /// Bytes relayed.
    pub bytes: u64,
}

/// The router's shared state.
#[derive(Debug)]
pub struct Router {
    start: Instant,
    endpoints: Mutex<Vec<Endpoint>>,
    next: AtomicUsize,
    log: Mutex<Vec<AccessRecord>>,
}

impl Router {
    /// A router over these endpoints.
    pub fn new(endpoints: Vec<Endpoint>) -> Arc<Router> {
        Arc::new(Router {
            start: Instant::now(),
            endpoints: Mutex::new(endpoints),
            next: AtomicUsize::new(0),
            log: Mutex::new(Vec::new()),
        })
    }

    /// The access log so far.
    pub fn access_log(&self) -> Vec<AccessRecord> {
        self.log.lock().expect("log lock").clone()
    }

    /// The endpoints as they stand.
    pub fn endpoints(&self) -> Vec<Endpoint> {
        self.endpoints.lock().expect("endpoints lock").clone()
    }

    /// Sets an endpoint's readiness; false if no endpoint has that name.
    pub fn set_ready(&self, name: &str, ready: bool) -> bool {
        let mut endpoints = self.endpoints.lock().expect("endpoints lock");
        match endpoints.iter_mut().find(|e| e.name == name) {
            Some(e) => {
                e.ready = ready;
                true
            }
            None => false,
        }
    }

    /// The next ready endpoint in round-robin order.
    fn pick(&self) -> Option<Endpoint> {
        let endpoints = self.endpoints.lock().expect("endpoints lock");
        let n = endpoints.len();
        for _ in 0..n {
            let i = self.next.fetch_add(1, Ordering::Relaxed) % n;
            if endpoints[i].ready {
                return Some(endpoints[i].clone());
            }
        }
        None
    }

    fn log(&self, record: AccessRecord) {
        self.log.lock().expect("log lock").push(record);
    }
}

/// Runs a router on `listen` until Ctrl-C, on a runtime of its own; `ready` gets the bound address.
pub fn run_blocking(
    endpoints: Vec<Endpoint>,
    listen: &str,
    ready: impl FnOnce(std::net::SocketAddr),
) -> std::io::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        let listener = TcpListener::bind(listen).await?;
        ready(listener.local_addr()?);
        tokio::select! {
            result = serve(listener, Router::new(endpoints)) => result,
            _ = tokio::signal::ctrl_c() => Ok(()),
        }
    })
}

/// Starts a router on an ephemeral loopback port in a background thread (see
/// [`crate::mock::spawn_background`]).
pub fn spawn_background(
    endpoints: Vec<Endpoint>,
) -> std::io::Result<(std::net::SocketAddr, Arc<Router>)> {
    crate::spawn_background("router".into(), 2, move || Router::new(endpoints), serve)
}

/// Serves clients until the listener fails.
pub async fn serve(listener: TcpListener, router: Arc<Router>) -> std::io::Result<()> {
    loop {
        let (stream, _) = crate::http::accept(&listener, "router").await?;
        let _ = stream.set_nodelay(true);
        let router = Arc::clone(&router);
        tokio::spawn(async move { client(stream, router).await });
    }
}

async fn client(mut stream: TcpStream, router: Arc<Router>) {
    let mut buf = Vec::new();
    loop {
        let request = match http::read_request(&mut stream, &mut buf).await {
            Ok(r) => r,
            Err(ReadError::Closed) | Err(ReadError::Io(_)) => return,
            Err(ReadError::Bad(status, why)) => {
                http::answer_unreadable(&mut stream, status, &why).await;
                return;
            }
        };
        let keep = !request.close;
        let ok = if request.path == "/admin/access-log" {
            let body = serde_json::to_vec(&router.access_log()).unwrap_or_default();
            http::send(
                &mut stream,
                &http::full_response(200, "application/json", &[], &body, request.close),
            )
            .await
            .is_ok()
        } else if request.path.starts_with("/admin/endpoints") {
            admin(&mut stream, &router, &request).await
        } else {
            proxy(&mut stream, &router, &request).await
        };
        if !(ok && keep) {
            return;
        }
    }
}

async fn admin(stream: &mut TcpStream, router: &Router, request: &Request) -> bool {
    let (status, body) = match request.method.as_str() {
        "GET" => (200, json!({"endpoints": router.endpoints()})),
        "POST" => match serde_json::from_slice::<serde_json::Value>(&request.body) {
            Ok(v) => match (v["name"].as_str(), v["ready"].as_bool()) {
                (Some(name), Some(ready)) if router.set_ready(name, ready) => {
                    (200, json!({"endpoints": router.endpoints()}))
                }
                (Some(name), Some(_)) => (
                    404,
                    json!({"error": {"message": format!("no endpoint {name:?}")}}),
                ),
                _ => (
                    400,
                    json!({"error": {"message": "expected {\"name\": ..., \"ready\": true|false}"}}),
                ),
            },
            Err(e) => (400, json!({"error": {"message": e.to_string()}})),
        },
        _ => (405, json!({"error": {"message": "method not allowed"}})),
    };
    http::send(
        stream,
        &http::full_response(
            status,
            "application/json",
            &[],
            body.to_string().as_bytes(),
            request.close,
        ),
    )
    .await
    .is_ok()
}

/// Forwards one request. Returns whether the client connection can carry another.
/// How an upstream response's body ends.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Framing {
    Chunked,
    Length(u64),
    UntilClose,
}

async fn proxy(client: &mut TcpStream, router: &Router, request: &Request) -> bool {
    let at_ns = router.start.elapsed().as_nanos() as u64;
    let request_id = request.header(REQUEST_ID_HEADER).unwrap_or("-").to_owned();
    let record = |upstream: &str, status, outcome, bytes| AccessRecord {
        at_ns,
        request_id: request_id.clone(),
        upstream: upstream.to_owned(),
        status,
        outcome,
        bytes,
    };
    let Some(endpoint) = router.pick() else {
        router.log(record("-", 503, "no-endpoint", 0));
        let body = json!({"error": {"message": "no ready endpoint"}}).to_string();
        return http::send(
            client,
            &http::full_response(503, "application/json", &[], body.as_bytes(), false),
        )
        .await
        .is_ok();
    };
    let mut upstream = match TcpStream::connect(&endpoint.address).await {
        Ok(s) => s,
        Err(e) => {
            router.log(record(&endpoint.name, 502, "connect-failed", 0));
            let body = json!({"error": {"message": format!("upstream {} connect error: {e}", endpoint.name)}}).to_string();
            let headers = [(UPSTREAM_HEADER, endpoint.name.as_str())];
            return http::send(
                client,
                &http::full_response(502, "application/json", &headers, body.as_bytes(), false),
            )
            .await
            .is_ok();
        }
    };
    let _ = upstream.set_nodelay(true);
    let mut out = format!("{} {} HTTP/1.1\r\n", request.method, request.path);
    for (k, v) in &request.headers {
        if !k.eq_ignore_ascii_case("connection") && !k.eq_ignore_ascii_case("keep-alive") {
            out.push_str(&format!("{k}: {v}\r\n"));
        }
    }
    out.push_str("connection: close\r\n\r\n");
    let mut bytes = out.into_bytes();
    bytes.extend_from_slice(&request.body);
    if upstream.write_all(&bytes).await.is_err() {
        router.log(record(&endpoint.name, 0, "upstream-reset", 0));
        http::reset_on_close(client);
        return false;
    }

    // The head: add the upstream header, drop the upstream's connection header.
    let mut head = Vec::new();
    let mut chunk = vec![0u8; 16 << 10];
    let (head_end, status) = loop {
        if let Some(at) = head.windows(4).position(|w| w == b"\r\n\r\n") {
            let status = std::str::from_utf8(&head[..at])
                .ok()
                .and_then(|h| h.split(' ').nth(1)?.parse().ok())
                .unwrap_or(0);
            break (at + 4, status);
        }
        match upstream.read(&mut chunk).await {
            Ok(0) | Err(_) => {
                // Closed or reset before a complete head: the client connection is reset too.
                router.log(record(
                    &endpoint.name,
                    0,
                    "upstream-reset",
                    head.len() as u64,
                ));
                http::reset_on_close(client);
                return false;
            }
            Ok(n) => head.extend_from_slice(&chunk[..n]),
        }
        if head.len() > UPSTREAM_HEAD_BYTES_MAX {
            // Oversized upstream head: passed through unparsed, as bytes.
            break (0, 0);
        }
    };
    // How the upstream frames its body, so that an upstream that closes before the framed end
    // (a replica killed mid-stream, which closes with a FIN rather than a reset) is passed on as
    // a broken response, never as a complete one on a connection kept open.
    let head_text = String::from_utf8_lossy(&head[..head_end]).to_ascii_lowercase();
    let framing = if head_end == 0 {
        Framing::UntilClose
    } else if head_text.contains("\r\ntransfer-encoding: chunked") {
        Framing::Chunked
    } else if let Some(length) = head_text
        .split("\r\ncontent-length:")
        .nth(1)
        .and_then(|r| r.split("\r\n").next()?.trim().parse::<u64>().ok())
    {
        Framing::Length(length)
    } else {
        Framing::UntilClose
    };
    let mut body = (head.len() - head_end) as u64;
    let mut tail: Vec<u8> = head[head_end..].to_vec();
    let mut forwarded = Vec::with_capacity(head.len() + 64);
    if head_end > 0 {
        let text = String::from_utf8_lossy(&head[..head_end - 4]).into_owned();
        let mut lines = text.split("\r\n");
        forwarded.extend_from_slice(lines.next().unwrap_or_default().as_bytes());
        forwarded.extend_from_slice(format!("\r\n{UPSTREAM_HEADER}: {}", endpoint.name).as_bytes());
        for line in lines.filter(|l| !l.to_ascii_lowercase().starts_with("connection:")) {
            forwarded.extend_from_slice(b"\r\n");
            forwarded.extend_from_slice(line.as_bytes());
        }
        forwarded.extend_from_slice(b"\r\n\r\n");
        forwarded.extend_from_slice(&head[head_end..]);
    } else {
        forwarded = head;
    }
    let mut total = forwarded.len() as u64;
    if client.write_all(&forwarded).await.is_err() {
        router.log(record(&endpoint.name, status, "client-gone", total));
        return false;
    }
    loop {
        match upstream.read(&mut chunk).await {
            Ok(0) => {
                let ended = match framing {
                    Framing::Chunked => tail.ends_with(b"0\r\n\r\n"),
                    Framing::Length(length) => body >= length,
                    Framing::UntilClose => false,
                };
                if ended {
                    router.log(record(&endpoint.name, status, "completed", total));
                    return true;
                }
                // The client learns of the end the way the upstream gave it: a close. Before
                // the framed end that is a premature close; close-delimited, it is the end.
                let outcome = if framing == Framing::UntilClose {
                    "completed"
                } else {
                    "upstream-closed-early"
                };
                router.log(record(&endpoint.name, status, outcome, total));
                return false;
            }
            Ok(n) => {
                total += n as u64;
                body += n as u64;
                // Only the last bytes matter (the chunked terminator): keep eight, copying at
                // most eight from a read rather than the whole read.
                let from = n.saturating_sub(8);
                tail.extend_from_slice(&chunk[from..n]);
                let excess = tail.len().saturating_sub(8);
                tail.drain(..excess);
                if client.write_all(&chunk[..n]).await.is_err() {
                    router.log(record(&endpoint.name, status, "client-gone", total));
                    return false;
                }
            }
            Err(_) => {
                router.log(record(&endpoint.name, status, "upstream-reset", total));
                http::reset_on_close(client);
                return false;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An upstream that answers `answer` to one request and then closes (FIN, not a reset).
    fn upstream(answer: &'static [u8]) -> std::net::SocketAddr {
        use std::io::{Read, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        std::thread::spawn(move || {
            for mut s in listener.incoming().flatten() {
                let mut buf = [0u8; 4096];
                let _ = s.read(&mut buf);
                let _ = s.write_all(answer);
            }
        });
        addr
    }

    /// Sends one keep-alive request through the router; returns what came back and whether the
    /// router then closed the connection (false: it held it open, as a complete response would).
    fn through_router(answer: &'static [u8]) -> (String, bool) {
        use std::io::{Read, Write};
        let endpoint = Endpoint {
            name: "up".into(),
            address: upstream(answer).to_string(),
            ready: true,
        };
        let (addr, _) = spawn_background(vec![endpoint]).unwrap();
        let mut c = std::net::TcpStream::connect(addr).unwrap();
        c.set_read_timeout(Some(std::time::Duration::from_millis(1500)))
            .unwrap();
        c.write_all(
            b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-length: 2\r\n\r\n{}",
        )
        .unwrap();
        let mut got = Vec::new();
        let mut buf = [0u8; 4096];
        let closed = loop {
            match c.read(&mut buf) {
                Ok(0) => break true,
                Ok(n) => got.extend_from_slice(&buf[..n]),
                Err(_) => break false, // timed out: the connection is still open
            }
        };
        (String::from_utf8_lossy(&got).into_owned(), closed)
    }

    #[test]
    fn an_upstream_that_closes_mid_body_closes_the_client_too() {
        // A replica killed mid-stream closes with a FIN. Before the fix the router took that as
        // the end of a complete response and kept the client's connection open, so the client
        // waited for the rest until its timeout (vLLM behind the router, BENCHMARKS.md).
        let (got, closed) =
            through_router(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\ndata:\r\n");
        assert!(got.contains("x-percentes-upstream: up"), "{got}");
        assert!(
            closed,
            "the truncated response must end with the connection"
        );
        let (_, closed) = through_router(b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nabc");
        assert!(closed);
        // Complete responses keep the client's connection.
        let (got, closed) = through_router(
            b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n",
        );
        assert!(got.ends_with("0\r\n\r\n") && !closed, "{got}");
        let (_, closed) = through_router(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok");
        assert!(!closed);
    }

    #[test]
    fn an_upstream_flag_is_name_equals_address() {
        let e = Endpoint::parse_flag("replica-0=127.0.0.1:8001").unwrap();
        assert_eq!(
            (e.name.as_str(), e.address.as_str(), e.ready),
            ("replica-0", "127.0.0.1:8001", true)
        );
        for bad in ["replica-0", "=127.0.0.1:1", "replica-0=", ""] {
            let error = Endpoint::parse_flag(bad).unwrap_err();
            assert_eq!(error.kind(), crate::error::ErrorKind::Refused);
            assert!(
                error.to_string().contains("NAME=HOST:PORT"),
                "{bad}: {error}"
            );
        }
    }
}
