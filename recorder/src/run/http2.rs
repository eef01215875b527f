//! HTTP/2 (issue 17; SPEC §2 "HTTP/2"): each worker's HTTP/2 connections, each carrying up to
//! the server's `SETTINGS_MAX_CONCURRENT_STREAMS` of its requests at once, and one request as one
//! stream with the timestamps, exchange and verdicts of HTTP/1.1.
//!
//! A request takes a connection with a free stream slot, or opens a connection of its own; it
//! never queues behind a full one (h2 would hold the stream until a slot freed, a wait the
//! schedule never asked for: coordinated omission). The connect and handshake a request paid
//! for are in its record, and so in its v0.3 send skew. Receive windows are the largest HTTP/2
//! allows and every DATA frame's capacity is released as it is read, so the client never
//! throttles a response; a request body waits for the server's window where it must, and a
//! request whose timeout finds it waiting says so.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::task::Poll;
use std::time::{Duration, Instant};

use bytes::Bytes;
use h2::client::SendRequest;
use h2::Reason;
use percentes_formats::config::HttpVersion;
use percentes_formats::journal::records::RequestRecord;
use percentes_formats::schedule::Entry;

use super::connect::transport_verdict;
use super::connect::Conn;
use super::context::WorkerContext;
use super::h2io::{TokioIo, Transport, FLOOD_WORDS};
use super::host::now_ns;
use super::state::Shared;
use crate::error::RecordError;
use percentes_response::exchange::{Exchange, Verdict};
use percentes_response::http1;

/// Each stream's receive window, and the connection's, in octets: HTTP/2's largest (2^31 - 1).
pub(super) const WINDOW_BYTES: u32 = (1 << 31) - 1;

/// The streams a new connection may carry before the server's SETTINGS arrive: one, the opener's
/// own, so that no request is queued against a limit the client does not know yet.
const STREAMS_BEFORE_SETTINGS: usize = 1;

/// The HTTP version a request went over (the `protocol` key of its journal extension).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Protocol {
    /// HTTP/1.1 (`1`).
    Http1 = 1,
    /// HTTP/2 (`2`).
    Http2 = 2,
}

/// How a request was carried, for its kind-6 extension: the protocol (where the run is not
/// HTTP/1.1 only) and its HTTP/2 stream id.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Carried {
    pub(super) protocol: Option<Protocol>,
    pub(super) stream_id: Option<u32>,
}

impl Carried {
    /// The extension fields this adds.
    pub(super) fn fields(&self) -> Vec<(u16, u64)> {
        use percentes_formats::journal::records::ExtensionKey;
        let mut fields = Vec::new();
        if let Some(p) = self.protocol {
            fields.push((ExtensionKey::Protocol as u16, p as u64));
        }
        if let Some(id) = self.stream_id {
            fields.push((ExtensionKey::StreamId as u16, u64::from(id)));
        }
        fields
    }
}

/// One HTTP/2 connection of a worker's pool.
pub(super) struct H2Conn {
    pub(super) id: u64,
    send: SendRequest<Bytes>,
    /// This worker's streams on it now.
    in_flight: Cell<usize>,
    /// Streams it has carried.
    carried: Cell<u64>,
    /// Why its connection task ended (the server's GOAWAY or close, an error), once it has.
    ended: Rc<RefCell<Option<String>>>,
    /// Since when it has carried nothing.
    idle_since: Cell<Instant>,
    /// Its streams waiting now for the server's flow-control window to send their bodies.
    window_waits: Cell<usize>,
    /// Whether a stream's deadline came while it waited for that window: the server is not
    /// opening it, so the connection takes no new request again and retires once idle.
    window_shut: Cell<bool>,
}

impl H2Conn {
    /// Streams the server allows at once now (its last SETTINGS; one before any arrived).
    fn limit(&self) -> usize {
        self.send.current_max_send_streams()
    }

    /// Whether it can carry a new request at once: its task runs, it has a free slot, none of
    /// its streams waits for the server's send window (a new stream's body would wait behind the
    /// same window: SPEC §2, never queued behind a full connection), and h2 would not hold a new
    /// stream (no GOAWAY seen, no pending open).
    fn ready_now(&self) -> bool {
        if self.ended.borrow().is_some()
            || self.in_flight.get() >= self.limit()
            || self.window_waits.get() > 0
            || self.window_shut.get()
        {
            return false;
        }
        let mut probe = self.send.clone();
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        matches!(probe.poll_ready(&mut cx), Poll::Ready(Ok(())))
    }
}

/// A stream slot held by one request: given back when the request ends, however it ends (a
/// timeout drops the request's future, and this with it).
pub(super) struct Slot(Rc<H2Conn>);

impl Slot {
    fn take(conn: &Rc<H2Conn>) -> Slot {
        conn.in_flight.set(conn.in_flight.get() + 1);
        Slot(Rc::clone(conn))
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let left = self.0.in_flight.get().saturating_sub(1);
        self.0.in_flight.set(left);
        if left == 0 {
            self.0.idle_since.set(Instant::now());
        }
    }
}

/// A stream waiting for its connection's send window, counted on the connection while it waits.
/// A timeout drops the request's future, and this with it, before the wait `ended`: then the
/// connection is shut for good.
struct WindowWait {
    conn: Rc<H2Conn>,
    ended: bool,
}

impl WindowWait {
    fn begin(conn: &Rc<H2Conn>) -> WindowWait {
        conn.window_waits.set(conn.window_waits.get() + 1);
        WindowWait {
            conn: Rc::clone(conn),
            ended: false,
        }
    }
}

impl Drop for WindowWait {
    fn drop(&mut self) {
        let left = self.conn.window_waits.get().saturating_sub(1);
        self.conn.window_waits.set(left);
        if !self.ended {
            self.conn.window_shut.set(true);
        }
    }
}

/// A worker's HTTP/2 connections.
#[derive(Default)]
pub(super) struct H2Pool {
    connections: RefCell<Vec<Rc<H2Conn>>>,
}

impl H2Pool {
    /// A slot on a connection that can open a stream now, if any can. On the way it retires
    /// connections whose task has ended (GOAWAY, close, error), idle ones past `idle_limit`, and
    /// idle ones the server's window shut.
    pub(super) fn take(&self, idle_limit: Duration, shared: &Shared) -> Option<Slot> {
        let mut pool = self.connections.borrow_mut();
        let now = Instant::now();
        let (mut ended, mut expired) = (0u64, 0u64);
        pool.retain(|c| {
            if c.ended.borrow().is_some() {
                ended += 1;
                false
            } else if c.window_shut.get() && c.in_flight.get() == 0 {
                // Shut by the server's window (its streams' bodies never went out): dropped
                // without a count; the request that met it says why in its detail.
                false
            } else if c.in_flight.get() == 0
                && now.saturating_duration_since(c.idle_since.get()) >= idle_limit
            {
                expired += 1;
                false
            } else {
                true
            }
        });
        shared.pool.found_closed.fetch_add(ended, Ordering::Relaxed);
        shared.pool.expired.fetch_add(expired, Ordering::Relaxed);
        // The most recently opened first: older connections drain and retire.
        pool.iter().rev().find(|c| c.ready_now()).map(Slot::take)
    }

    /// Stream slots free now across the pool (for the spare keeper): a connection whose send
    /// window holds a stream back offers none.
    pub(super) fn free_slots(&self) -> usize {
        self.connections
            .borrow()
            .iter()
            .filter(|c| {
                c.ended.borrow().is_none() && c.window_waits.get() == 0 && !c.window_shut.get()
            })
            .map(|c| c.limit().saturating_sub(c.in_flight.get()))
            .sum()
    }

    fn add(&self, conn: H2Conn) -> Rc<H2Conn> {
        let conn = Rc::new(conn);
        self.connections.borrow_mut().push(Rc::clone(&conn));
        conn
    }
}

/// Whether a freshly opened connection speaks HTTP/2 under `target.http`: TLS by what ALPN
/// settled, cleartext only with prior knowledge (`"2"`). `Err` when `"2"` was asked for and the
/// server's ALPN chose otherwise (of kind [`crate::ErrorKind::Protocol`], as every error here).
pub(super) fn speaks_h2(conn: &Conn, version: HttpVersion) -> Result<bool, RecordError> {
    match (conn, version) {
        (_, HttpVersion::Http1) => Ok(false),
        (Conn::Plain(_), HttpVersion::Http2) => Ok(true),
        (Conn::Plain(_), HttpVersion::Auto) => Ok(false),
        (Conn::Tls(s), _) => {
            let h2 = s.negotiated_alpn().as_deref() == Some(&b"h2"[..]);
            if !h2 && version == HttpVersion::Http2 {
                return Err(RecordError::protocol(format!(
                    "the server did not agree to HTTP/2 in the TLS handshake (ALPN chose {}); target.http = \"auto\" falls back to HTTP/1.1",
                    s.negotiated_alpn()
                        .map_or("nothing".into(), |p| String::from_utf8_lossy(&p).into_owned())
                )));
            }
            Ok(h2)
        }
    }
}

/// A TLS failure in words an operator can act on: a server that speaks none of the protocols
/// ALPN offered (`h2` alone, under `target.http = "2"`) ends the handshake with the
/// no_application_protocol alert, which says little by itself; a port that answers in plain
/// HTTP sends a first byte that is no TLS record type, which rustls calls a "corrupt message
/// of type InvalidContentType" (issue 54 item 6).
pub(super) fn explain_tls(error: &std::io::Error, version: HttpVersion) -> String {
    let text = error.to_string();
    if version == HttpVersion::Http2 && text.contains("NoApplicationProtocol") {
        format!("the server did not agree to HTTP/2 in the TLS handshake (ALPN offered h2 alone, and it answered with the no_application_protocol alert: {text}); target.http = \"auto\" falls back to HTTP/1.1")
    } else if text.contains("InvalidContentType") {
        format!("the port did not answer in TLS ({text}): it most likely speaks plain HTTP; give the URL as http:// instead of https://")
    } else {
        text
    }
}

/// Starts HTTP/2 on an open connection (the client preface and SETTINGS; h2 does not wait for
/// the server's) and spawns its connection task on this worker's runtime.
pub(super) async fn handshake(
    conn: Conn,
) -> Result<(SendRequest<Bytes>, Rc<RefCell<Option<String>>>), RecordError> {
    let transport = match conn {
        Conn::Plain(stream) => Transport::plain(stream),
        Conn::Tls(stream) => Transport::Tls(stream),
    };
    let (send, connection) = h2::client::Builder::new()
        .initial_window_size(WINDOW_BYTES)
        .initial_connection_window_size(WINDOW_BYTES)
        .initial_max_send_streams(STREAMS_BEFORE_SETTINGS)
        // The pinned cap on a response head (SPEC §2) bounds a header block as it bounds an
        // HTTP/1.1 head: h2 refuses a larger one (its own default is 16 MB).
        .max_header_list_size(http1::RESPONSE_HEAD_BYTES_MAX as u32)
        .enable_push(false)
        .handshake::<_, Bytes>(TokioIo::new(transport))
        .await
        .map_err(|e| RecordError::protocol(format!("HTTP/2 handshake: {e}")))?;
    let ended = Rc::new(RefCell::new(None));
    let seen = Rc::clone(&ended);
    compio::runtime::spawn(async move {
        let why = match connection.await {
            Ok(()) => "the connection closed".to_owned(),
            Err(e) => describe(&e),
        };
        *seen.borrow_mut() = Some(why);
    })
    .detach();
    Ok((send, ended))
}

/// Makes `conn` (just opened, speaking HTTP/2) a connection of the worker's `pool`; `slot` for
/// the opener's own request.
pub(super) async fn adopt(
    pool: &H2Pool,
    id: u64,
    conn: Conn,
    slot: bool,
) -> Result<(Rc<H2Conn>, Option<Slot>), RecordError> {
    let (send, ended) = handshake(conn).await?;
    let conn = pool.add(H2Conn {
        id,
        send,
        in_flight: Cell::new(0),
        carried: Cell::new(0),
        ended,
        idle_since: Cell::new(Instant::now()),
        window_waits: Cell::new(0),
        window_shut: Cell::new(false),
    });
    let slot = slot.then(|| Slot::take(&conn));
    Ok((conn, slot))
}

/// One request on a fresh HTTP/2 connection (the pre-flight's), read to its end: the status
/// and at most `body_max` bytes of the body.
pub(super) async fn once(
    conn: Conn,
    request: &[u8],
    scheme: &str,
    body_max: usize,
) -> Result<(u16, Vec<u8>), RecordError> {
    let (mut send, _ended) = handshake(conn).await?;
    let (request, mut body, _) = request_from_http1(request, scheme)?;
    let failed = |e: h2::Error| {
        RecordError::protocol(format!("the HTTP/2 exchange failed: {}", describe(&e)))
    };
    let (response, mut stream) = send
        .send_request(request, body.is_empty())
        .map_err(failed)?;
    stream.reserve_capacity(body.len());
    while !body.is_empty() {
        match std::future::poll_fn(|cx| stream.poll_capacity(cx)).await {
            Some(Ok(n)) if n > 0 => {
                let chunk = body.split_to(n.min(body.len()));
                stream.send_data(chunk, body.is_empty()).map_err(failed)?;
            }
            Some(Ok(_)) => {}
            Some(Err(e)) => return Err(failed(e)),
            None => {
                return Err(RecordError::protocol(
                    "the stream closed before the request was sent",
                ))
            }
        }
    }
    let response = response.await.map_err(failed)?;
    let status = response.status().as_u16();
    let mut received = response.into_body();
    let mut kept = Vec::new();
    while let Some(chunk) = received.data().await {
        let chunk = chunk.map_err(failed)?;
        let _ = received.flow_control().release_capacity(chunk.len());
        if kept.len() < body_max {
            kept.extend_from_slice(&chunk);
        }
    }
    Ok((status, kept))
}

/// HTTP/1.1 request bytes (a request template's, or the pre-flight's) as an HTTP/2 request and
/// its body: the request line's method and target, `host` as the authority, the headers
/// HTTP/2 forbids (connection-specific ones, RFC 9113 §8.2.2) left out.
pub(super) fn request_from_http1(
    bytes: &[u8],
    scheme: &str,
) -> Result<(http::Request<()>, Bytes, usize), RecordError> {
    let split = bytes
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| RecordError::protocol("a request head without its end"))?;
    let head = std::str::from_utf8(&bytes[..split])
        .map_err(|_| RecordError::protocol("a request head not UTF-8"))?;
    let body = Bytes::copy_from_slice(&bytes[split + 4..]);
    let mut lines = head.split("\r\n");
    let mut request_line = lines.next().unwrap_or_default().split(' ');
    let (method, target) = (
        request_line.next().unwrap_or("GET"),
        request_line.next().unwrap_or("/"),
    );
    let mut builder = http::Request::builder().method(method);
    let mut authority = String::new();
    let mut header_bytes = 0usize;
    for line in lines {
        let Some((name, value)) = line.split_once(':') else {
            continue;
        };
        let (name, value) = (name.trim().to_ascii_lowercase(), value.trim());
        match name.as_str() {
            "host" => authority = value.to_owned(),
            "connection" | "keep-alive" | "proxy-connection" | "transfer-encoding" | "upgrade" => {}
            "te" if !value.eq_ignore_ascii_case("trailers") => {}
            _ => {
                header_bytes += name.len() + value.len();
                builder = builder.header(name, value);
            }
        }
    }
    let request = builder
        .uri(format!("{scheme}://{authority}{target}"))
        .version(http::Version::HTTP_2)
        .body(())
        .map_err(|e| RecordError::protocol(format!("the request is not valid HTTP/2: {e}")))?;
    let sent = header_bytes + authority.len() + target.len() + body.len();
    Ok((request, body, sent))
}

/// An h2 error in words: the frame and its code where there is one.
fn describe(e: &h2::Error) -> String {
    let code = e
        .reason()
        .map(|r| format!("{r:?} ({})", u32::from(r)))
        .unwrap_or_default();
    if e.is_go_away() {
        format!("GOAWAY {code}")
    } else if e.is_reset() {
        format!("RST_STREAM {code}")
    } else if let Some(io) = e.get_io() {
        io.to_string()
    } else {
        format!("HTTP/2 connection error {code} ({e})")
    }
}

/// The verdict of a stream that an h2 error ended (SPEC §2 "HTTP/2" lists the mapping).
pub(super) fn verdict(e: &h2::Error) -> Verdict {
    let said = describe(e);
    if let Some(io) = e.get_io() {
        // The client ended a connection the server flooded with control frames (h2io.rs): the
        // server broke HTTP/2's bargain, as with a frame that breaks the protocol.
        if io.kind() == std::io::ErrorKind::InvalidData && io.to_string().contains(FLOOD_WORDS) {
            return Verdict::errored("malformed-framing", io.to_string());
        }
        // h2 reports a connection that ended (the server's FIN, or a write into a closed one)
        // under an open stream as a broken pipe: the stream's end never came, as an HTTP/1.1
        // body cut short by a close.
        if io.kind() == std::io::ErrorKind::BrokenPipe {
            return Verdict::errored(
                "premature-close",
                format!("the connection closed before the stream's end ({io})"),
            );
        }
        return transport_verdict(io);
    }
    if e.is_library() {
        // h2 itself reset the stream, or closed the connection, because the server's frames
        // broke HTTP/2 (a header block over the pinned cap, a bad frame): the server's fault, as
        // broken HTTP/1.1 framing is.
        return Verdict::errored(
            "malformed-framing",
            format!("the server's frames broke HTTP/2; the client sent {said} (a header block over the {} bytes of SPEC §2 is one such)", http1::RESPONSE_HEAD_BYTES_MAX),
        );
    }
    if e.is_go_away() {
        // A stream above the server's GOAWAY's last stream id: it says it did not process it.
        return Verdict::errored(
            "refused",
            format!("{said}: the server did not process this stream (above its last stream id)"),
        );
    }
    match e.reason() {
        Some(Reason::REFUSED_STREAM) if e.is_reset() => Verdict::errored(
            "refused",
            format!("{said}: the server refused the stream before processing it"),
        ),
        _ if e.is_reset() => Verdict::errored("reset", said),
        Some(
            Reason::PROTOCOL_ERROR
            | Reason::FRAME_SIZE_ERROR
            | Reason::COMPRESSION_ERROR
            | Reason::FLOW_CONTROL_ERROR,
        ) => Verdict::errored("malformed-framing", said),
        _ => Verdict::errored("premature-close", said),
    }
}

/// The verdict of a stream that an h2 error ended after its response head came: as
/// [`verdict`], except that a GOAWAY whose last stream id is below this stream cannot mean the
/// server did not process it, since it answered (issue 50: a server sending GOAWAY(0) after
/// HEADERS 200 and DATA had every such stream journaled `refused`). What was received decides:
/// an answer cut short by the connection's end, `premature-close`.
pub(super) fn answered_verdict(e: &h2::Error) -> Verdict {
    if e.is_go_away() && e.get_io().is_none() && !e.is_library() {
        return Verdict::errored(
            "premature-close",
            format!(
                "{}: the server ended the connection after it had begun answering this stream (a GOAWAY whose last stream id is below it), before the stream's end",
                describe(e)
            ),
        );
    }
    verdict(e)
}

/// One request as one stream of `slot`'s connection. `opened` is whether this request opened
/// the connection (its connect and TLS times are then in the record).
pub(super) async fn talk(
    ctx: &WorkerContext,
    slot: Slot,
    opened: bool,
    entry: &Entry,
    record: &mut RequestRecord,
    exchange: &mut Exchange,
    carried: &mut Carried,
) -> Verdict {
    let conn = Rc::clone(&slot.0);
    record.connection_id = conn.id;
    // Reused when an earlier stream went out on it: the opener has its connect times, and the
    // first stream on a connection opened ahead of need neither opened it nor reuses it.
    record.connection_reused = !opened && conn.carried.get() > 0;
    carried.protocol = Some(Protocol::Http2);
    conn.carried.set(conn.carried.get() + 1);
    let bytes = ctx.templates[entry.route as usize].bytes_of(entry, &ctx.plan.params);
    let scheme = if ctx.dialer.tls.is_some() {
        "https"
    } else {
        "http"
    };
    let (request, mut body, sent) = match request_from_http1(&bytes, scheme) {
        Ok(parts) => parts,
        Err(why) => return Verdict::errored("malformed-framing", why.to_string()),
    };
    record.bytes_sent = sent as u64;
    let mut send = conn.send.clone();
    let (response, mut stream) = match send.send_request(request, body.is_empty()) {
        Ok(pair) => pair,
        Err(e) => return exchange.finish(false, Some(verdict(&e)), now_ns(ctx.epoch)),
    };
    carried.stream_id = Some(u32::from(response.stream_id()));
    // The body, as the server's flow-control window admits it. A server may answer before it
    // has read the body and close the stream (HTTP/2 allows that, RFC 9113 §8.1): then the body
    // stops and the answer is read all the same; only an answer that never comes is a failure.
    stream.reserve_capacity(body.len());
    let mut unsent = None;
    while !body.is_empty() {
        exchange.waiting_for_window = Some((record.bytes_sent, body.len()));
        // Counted on the connection only while h2 has no capacity to give: a body the window
        // admits at once never marks it.
        let mut waiting = None;
        let capacity = std::future::poll_fn(|cx| {
            let polled = stream.poll_capacity(cx);
            if polled.is_pending() && waiting.is_none() {
                waiting = Some(WindowWait::begin(&conn));
            }
            polled
        })
        .await;
        if let Some(mut wait) = waiting {
            wait.ended = true;
        }
        match capacity {
            Some(Ok(capacity)) if capacity > 0 => {
                let chunk = body.split_to(capacity.min(body.len()));
                if let Err(e) = stream.send_data(chunk, body.is_empty()) {
                    unsent = Some(verdict(&e));
                    break;
                }
            }
            Some(Ok(_)) => {}
            Some(Err(e)) => {
                unsent = Some(verdict(&e));
                break;
            }
            None => {
                unsent = Some(Verdict::errored(
                    "reset",
                    "the stream closed before its body was sent",
                ));
                break;
            }
        }
    }
    exchange.waiting_for_window = None;
    if unsent.is_none() {
        record.request_written_ns = Some(now_ns(ctx.epoch));
    }
    let response = match response.await {
        Ok(response) => response,
        // The stream's own error says more than the unsent body's, unless it is only that.
        Err(e) => {
            let why = match (e.is_io() || e.reason().is_some(), unsent) {
                (false, Some(unsent)) => unsent,
                _ => verdict(&e),
            };
            return exchange.finish(false, Some(why), now_ns(ctx.epoch));
        }
    };
    let now = now_ns(ctx.epoch);
    let (head, mut received) = response.into_parts();
    let headers = head
        .headers
        .iter()
        .map(|(k, v)| {
            (
                k.as_str().to_owned(),
                String::from_utf8_lossy(v.as_bytes()).into_owned(),
            )
        })
        .collect();
    exchange.on_http(
        http1::Event::Head {
            status: head.status.as_u16(),
            headers,
        },
        now,
    );
    loop {
        if exchange.decided().is_some() {
            // The fate is known (an error status, a failed check): the stream is cancelled
            // when `received` is dropped; the connection carries on.
            break exchange.finish(false, None, now_ns(ctx.epoch));
        }
        match received.data().await {
            Some(Ok(chunk)) => {
                let now = now_ns(ctx.epoch);
                let _ = received.flow_control().release_capacity(chunk.len());
                record.bytes_received += chunk.len() as u64;
                exchange.on_http(http1::Event::Data(chunk.to_vec()), now);
            }
            Some(Err(e)) => {
                break exchange.finish(false, Some(answered_verdict(&e)), now_ns(ctx.epoch))
            }
            None => {
                let now = now_ns(ctx.epoch);
                exchange.on_http(http1::Event::End, now);
                break exchange.finish(true, None, now);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_http1_request_becomes_an_http2_one_without_its_connection_headers() {
        let bytes = b"POST /v1/chat/completions?x=1 HTTP/1.1\r\nhost: example.com:8443\r\ncontent-type: application/json\r\nconnection: keep-alive\r\nTransfer-Encoding: chunked\r\nte: gzip\r\nx-request-id: pct-7\r\ncontent-length: 2\r\n\r\n{}";
        let (request, body, sent) = request_from_http1(bytes, "https").unwrap();
        assert_eq!(request.method(), http::Method::POST);
        assert_eq!(
            request.uri().to_string(),
            "https://example.com:8443/v1/chat/completions?x=1"
        );
        assert_eq!(request.version(), http::Version::HTTP_2);
        let names: Vec<&str> = request.headers().keys().map(|k| k.as_str()).collect();
        assert_eq!(names, ["content-type", "x-request-id", "content-length"]);
        assert_eq!(&body[..], b"{}");
        assert!(sent > body.len());
        let cut = request_from_http1(b"GET / HTTP/1.1\r\nhost: h", "http").unwrap_err();
        assert_eq!(cut.kind(), crate::ErrorKind::Protocol, "{cut}");
    }

    #[test]
    fn carried_fields_name_the_protocol_and_the_stream() {
        let carried = Carried {
            protocol: Some(Protocol::Http2),
            stream_id: Some(7),
        };
        assert_eq!(carried.fields(), [(3, 2), (4, 7)]);
        assert!(Carried::default().fields().is_empty());
    }
}
