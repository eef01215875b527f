//! The client: a worker's own state ([`Local`]) and its keep-alive pool, and one request's
//! exchange on a real connection ([`talk`]), settled against its deadline ([`settle`]). What a
//! worker is handed is `context.rs`, how a connection is opened `connect.rs`, the request's task
//! `execute.rs`, and the loop that sends them `pacer.rs`.

use std::cell::{Cell, RefCell};
use std::os::fd::RawFd;
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use compio::BufResult;
use percentes_formats::config::HttpVersion;
use percentes_formats::journal::records::{class_code, Outcome, RequestRecord};
use percentes_formats::schedule::Entry;

use super::connect::{connect_verdict, local_exhaustion, transport_verdict, Conn, OpenError};
use super::context::WorkerContext;
use super::dispatch::idle_expired;
use super::host::now_ns;
use super::http2;
use super::state::Shared;
use percentes_response::exchange::{Exchange, Rule, Verdict};
use percentes_response::http1;

/// An idle keep-alive connection in a worker's pool.
pub(super) struct Pooled {
    pub(super) id: u64,
    pub(super) conn: Conn,
    /// The socket under the connection (TLS included), for the liveness check.
    pub(super) fd: RawFd,
    /// When it went idle.
    pub(super) idle_since: Instant,
    /// How long it may stay idle: the configured limit, or less where the server's
    /// `Keep-Alive: timeout` says so.
    pub(super) idle_limit: Duration,
    /// Whether it has carried a request (one opened ahead of need has not, until its first).
    pub(super) carried: bool,
}

/// Of a server's `Keep-Alive: timeout=N`, the part the pool gives up: a connection is retired
/// this long before the server would close it, so a request never races the server's close.
pub(super) const KEEP_ALIVE_MARGIN: Duration = Duration::from_millis(500);

/// What the liveness check found on an idle connection.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Idle {
    /// Open and silent (or, under TLS, holding only what TLS sends unasked): it can carry a
    /// request.
    Alive,
    /// The server closed it (FIN or reset) while it was idle.
    Closed,
    /// A plain connection holds bytes nobody asked for (a 408, say): not a clean connection.
    Unsolicited,
}

/// Looks at an idle socket without reading from it or waiting (`poll` with a zero timeout): a
/// peer's FIN shows as POLLRDHUP even behind unread bytes, a reset as POLLERR or POLLHUP. Unread
/// bytes on a plain connection are unsolicited; on a TLS one they are what TLS 1.3 servers send
/// after the handshake (session tickets), which the next read consumes, so only a FIN or reset
/// retires a TLS connection.
pub(super) fn idle_state(fd: RawFd, tls: bool) -> Idle {
    let mut probe = libc::pollfd {
        fd,
        events: libc::POLLIN | libc::POLLRDHUP,
        revents: 0,
    };
    // SAFETY: one pollfd for a socket the pool owns, a zero timeout.
    #[allow(unsafe_code)]
    let ready = unsafe { libc::poll(&mut probe, 1, 0) };
    if ready < 0 {
        return Idle::Closed;
    }
    let events = probe.revents;
    if events & (libc::POLLRDHUP | libc::POLLHUP | libc::POLLERR | libc::POLLNVAL) != 0 {
        Idle::Closed
    } else if events & libc::POLLIN != 0 && !tls {
        Idle::Unsolicited
    } else {
        Idle::Alive
    }
}

/// A worker's own state, shared by the request tasks of its one thread.
pub(super) struct Local {
    /// Idle keep-alive connections, most recently used last.
    pub(super) connections: RefCell<Vec<Pooled>>,
    /// The next connection id: the worker's index in the top 16 bits, a counter below.
    pub(super) next_connection: Cell<u64>,
    /// Read buffers of finished requests, reused so a request does not allocate one.
    pub(super) buffers: RefCell<Vec<Vec<u8>>>,
    /// Each route's verification rule, shared by its exchanges.
    pub(super) rules: Vec<Rc<Rule>>,
    /// The mean time from dispatch to terminal of this worker's finished requests, s (an
    /// exponentially weighted mean; `None` before the first finishes): the W of Little's law the
    /// spare keeper sizes the pool with.
    pub(super) service_s: Cell<Option<f64>>,
    /// HTTP/2 connections (`target.http` "2" or "auto"), each carrying many requests at once.
    pub(super) h2: http2::H2Pool,
}

/// The weight of each finished request in the service-time mean.
const SERVICE_WEIGHT: f64 = 0.1;

/// The service-time mean `mean` (`None`: no request has finished) with one more request's
/// dispatch-to-terminal time folded in: an exponentially weighted mean, the W of Little's law
/// the spare keeper sizes the pool with.
pub(super) fn service_mean(mean: Option<f64>, seconds: f64) -> f64 {
    match mean {
        None => seconds,
        Some(mean) => mean + SERVICE_WEIGHT * (seconds - mean),
    }
}

/// The size of one read buffer: one read takes whatever the socket holds, up to this.
pub(super) const READ_BUFFER: usize = 64 << 10;
/// At most this many read buffers are kept between requests (4 MiB of address space a worker);
/// a burst of concurrency above it allocates and frees its own.
pub(super) const SPARE_BUFFERS: usize = 64;

impl Local {
    pub(super) fn new(ctx: &WorkerContext) -> Local {
        Local {
            connections: RefCell::new(Vec::new()),
            next_connection: Cell::new((ctx.worker as u64) << 48),
            buffers: RefCell::new(Vec::new()),
            rules: ctx.rules.iter().cloned().map(Rc::new).collect(),
            service_s: Cell::new(None),
            h2: http2::H2Pool::default(),
        }
    }

    /// Idle connections in the pool now (some may have been closed by the server meanwhile;
    /// `take` finds out).
    pub(super) fn idle(&self) -> usize {
        self.connections.borrow().len()
    }

    /// Folds one finished request's dispatch-to-terminal time into the service-time mean.
    pub(super) fn served(&self, seconds: f64) {
        self.service_s
            .set(Some(service_mean(self.service_s.get(), seconds)));
    }

    /// An idle connection that can carry a request now, if the pool has one. On the way it
    /// retires every connection idle past its limit (so the pool shrinks after a burst) and any
    /// the server has closed or written to while it sat idle: a request never goes out on a
    /// connection the server has closed or is about to close.
    pub(super) fn take(&self, shared: &Shared) -> Option<Pooled> {
        self.retire_expired(shared, Duration::ZERO);
        let mut pool = self.connections.borrow_mut();
        while let Some(pooled) = pool.pop() {
            match idle_state(pooled.fd, matches!(pooled.conn, Conn::Tls(_))) {
                Idle::Alive => return Some(pooled),
                Idle::Closed | Idle::Unsolicited => {
                    shared.pool.found_closed.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
        None
    }

    /// Retires every idle connection past its idle limit, or within `ahead` of it (at most half
    /// the limit), counted as expired. The spare keeper does this, `ahead` two of its periods,
    /// before it counts the pool: a connection that expires during an idle gap is never counted
    /// as a spare, and is replaced before it expires, so the next request finds a fresh one
    /// rather than connecting in line (issue 32).
    pub(super) fn retire_expired(&self, shared: &Shared, ahead: Duration) {
        let mut pool = self.connections.borrow_mut();
        let now = Instant::now();
        let before = pool.len();
        // Never earlier than half the limit: a limit shorter than the keeper's look-ahead would
        // otherwise retire each spare as soon as it was opened.
        pool.retain(|p| {
            !idle_expired(
                now.saturating_duration_since(p.idle_since),
                ahead,
                p.idle_limit,
            )
        });
        let expired = before - pool.len();
        if expired > 0 {
            shared
                .pool
                .expired
                .fetch_add(expired as u64, Ordering::Relaxed);
        }
    }

    /// Pools a connection opened ahead of need (the warm pool, the spare keeper): HTTP/2 where
    /// it speaks it (its handshake done now), else for HTTP/1.1. `false` when it is of no use
    /// (`target.http = "2"` and the server declined HTTP/2: the request that needs a
    /// connection then opens one and says why it failed).
    pub(super) async fn pool_opened(&self, ctx: &WorkerContext, conn: Conn, fd: RawFd) -> bool {
        let id = self.connection_id();
        match http2::speaks_h2(&conn, ctx.plan.http) {
            Ok(true) => Box::pin(http2::adopt(&self.h2, id, conn, false))
                .await
                .is_ok(),
            Ok(false) => {
                self.keep(id, conn, fd, ctx.plan.idle_limit, false);
                true
            }
            Err(_) => false,
        }
    }

    /// What the spare keeper counts as idle capacity: idle HTTP/1.1 connections, and free
    /// HTTP/2 stream slots.
    pub(super) fn idle_capacity(&self) -> usize {
        self.idle() + self.h2.free_slots()
    }

    /// Puts a connection in the pool, with its idle limit: one whose response ended as framed
    /// (`carried`), or one opened ahead of need.
    pub(super) fn keep(&self, id: u64, conn: Conn, fd: RawFd, limit: Duration, carried: bool) {
        self.connections.borrow_mut().push(Pooled {
            id,
            conn,
            fd,
            idle_since: Instant::now(),
            idle_limit: limit,
            carried,
        });
    }

    pub(super) fn connection_id(&self) -> u64 {
        let id = self.next_connection.get();
        self.next_connection.set(id + 1);
        id
    }

    pub(super) fn buffer(&self) -> Vec<u8> {
        self.buffers
            .borrow_mut()
            .pop()
            .unwrap_or_else(|| Vec::with_capacity(READ_BUFFER))
    }

    /// Keeps a finished request's buffer for the next one, up to [`SPARE_BUFFERS`].
    pub(super) fn give_back(&self, mut buf: Vec<u8>) {
        let mut spare = self.buffers.borrow_mut();
        if spare.len() < SPARE_BUFFERS {
            buf.clear();
            spare.push(buf);
        }
    }
}

pub(super) fn blank(entry: &Entry) -> RequestRecord {
    RequestRecord {
        index: entry.index,
        outcome: Outcome::Errored as u8,
        class: 0,
        route: entry.route,
        intended_ns: entry.intended_ns,
        dispatched_ns: None,
        connect_start_ns: None,
        connect_end_ns: None,
        tls_done_ns: None,
        request_written_ns: None,
        response_head_ns: None,
        first_content_ns: None,
        terminal_ns: 0,
        content_gaps_us: Vec::new(),
        content_events: 0,
        http_status: 0,
        bytes_sent: 0,
        bytes_received: 0,
        usage_prompt_tokens: None,
        usage_completion_tokens: None,
        replica: String::new(),
        connection_id: 0,
        connection_reused: false,
        detail: String::new(),
    }
}

/// Writes `verdict` into `record`, holding the record to its deadline (intended time plus
/// `timeout`): an ending seen after the deadline (the worker's turn came late, or a timer fired
/// late) is censored `timeout` at the deadline, since by the deadline there was no terminal
/// event (SPEC §3); a request never sent has no dispatch time and ends by its deadline too; and
/// nothing the record holds happened after its own terminal time. So no terminal time is ever
/// past intended plus the timeout, and no dispatch after the terminal (SPEC §2).
pub(super) fn settle(
    record: &mut RequestRecord,
    verdict: Verdict,
    intended_ns: u64,
    timeout: Duration,
) {
    let deadline_ns = intended_ns + timeout.as_nanos() as u64;
    let mut verdict = verdict;
    let late_ns = record.terminal_ns.saturating_sub(deadline_ns);
    if late_ns > 0 && verdict.outcome != Outcome::Undispatched {
        verdict = Verdict {
            outcome: Outcome::Censored,
            class: "timeout",
            detail: format!(
                "no terminal event by the {timeout:?} timeout ({} {} was seen {:.3} ms after the deadline)",
                verdict.outcome.name(),
                verdict.class,
                late_ns as f64 / 1e6
            ),
        };
        record.terminal_ns = deadline_ns;
    }
    if verdict.outcome == Outcome::Undispatched {
        record.dispatched_ns = None;
        record.terminal_ns = record.terminal_ns.min(deadline_ns);
    }
    record.outcome = verdict.outcome as u8;
    record.class = class_code(verdict.class).expect("classes come from the table");
    record.detail = percentes_response::exchange::cut(
        &verdict.detail,
        percentes_response::exchange::DETAIL_BYTES_MAX,
    )
    .to_owned();
    let terminal_ns = record.terminal_ns;
    for stamp in [
        &mut record.connect_start_ns,
        &mut record.connect_end_ns,
        &mut record.tls_done_ns,
        &mut record.request_written_ns,
        &mut record.response_head_ns,
        &mut record.first_content_ns,
    ] {
        if stamp.is_some_and(|t| t > terminal_ns) {
            *stamp = None;
        }
    }
}

pub(super) async fn talk(
    ctx: &WorkerContext,
    local: &Local,
    entry: &Entry,
    record: &mut RequestRecord,
    exchange: &mut Exchange,
    carried: &mut http2::Carried,
) -> Verdict {
    let deadline = ctx.epoch + Duration::from_nanos(entry.intended_ns) + ctx.plan.timeout;
    let http = ctx.plan.http;
    if http != HttpVersion::Http1 {
        // A free stream on an HTTP/2 connection first: no connect, no wait.
        if let Some(slot) = local.h2.take(ctx.plan.idle_limit, &ctx.shared) {
            return Box::pin(http2::talk(
                ctx, slot, false, entry, record, exchange, carried,
            ))
            .await;
        }
    }
    let (id, mut stream, fd) = match local.take(&ctx.shared) {
        Some(pooled) => {
            // Reused only if it carried a request before: the first on a connection opened
            // ahead of need neither opened it nor reuses it (no connect times of its own).
            record.connection_reused = pooled.carried;
            (pooled.id, pooled.conn, pooled.fd)
        }
        // Boxed: the connect and TLS handshake future is about 5 KB and a request on a warm
        // connection never polls it, but unboxed it would size every request's future.
        None => match Box::pin(ctx.dialer.open(ctx.epoch, Some(deadline), Some(record))).await {
            Ok((conn, fd)) => {
                let id = local.connection_id();
                match http2::speaks_h2(&conn, http) {
                    Ok(false) => (id, conn, fd),
                    Ok(true) => {
                        // This request opened it: its connect and TLS times are in its record.
                        record.connection_id = id;
                        return match Box::pin(http2::adopt(&local.h2, id, conn, true)).await {
                            Ok((_, Some(slot))) => {
                                Box::pin(http2::talk(
                                    ctx, slot, true, entry, record, exchange, carried,
                                ))
                                .await
                            }
                            Ok((_, None)) => unreachable!("adopt gives the opener its slot"),
                            Err(why) => {
                                record.terminal_ns = now_ns(ctx.epoch);
                                Verdict::errored("premature-close", why.to_string())
                            }
                        };
                    }
                    Err(why) => {
                        record.connection_id = id;
                        record.terminal_ns = now_ns(ctx.epoch);
                        return Verdict::errored("tls", why.to_string());
                    }
                }
            }
            Err(OpenError {
                at_deadline: true,
                in_tls,
                ..
            }) => {
                // The request's own deadline ended the connect: a timeout, as any other wait
                // the deadline ends (the connect budget had not run out).
                record.terminal_ns = (deadline - ctx.epoch).as_nanos() as u64;
                return Verdict {
                    outcome: Outcome::Censored,
                    class: "timeout",
                    detail: format!(
                        "no terminal event by the {:?} timeout: the {} was still under way at the deadline",
                        ctx.plan.timeout,
                        if in_tls { "TLS handshake" } else { "TCP connect" }
                    ),
                };
            }
            Err(OpenError { error, .. }) if local_exhaustion(&error) => {
                ctx.shared.note_exhaustion(&error);
                return Verdict {
                    outcome: Outcome::Undispatched,
                    class: "undispatched",
                    detail: format!("the client could not open a connection: {error}"),
                };
            }
            Err(OpenError {
                error,
                in_tls: true,
                ..
            }) => {
                record.terminal_ns = now_ns(ctx.epoch);
                return Verdict::errored(
                    "tls",
                    format!(
                        "TLS handshake with {}: {}",
                        ctx.dialer.server_name,
                        http2::explain_tls(&error, http)
                    ),
                );
            }
            Err(OpenError { error, .. }) => {
                record.terminal_ns = now_ns(ctx.epoch);
                return connect_verdict(&error);
            }
        },
    };
    record.connection_id = id;
    if http != HttpVersion::Http1 {
        carried.protocol = Some(http2::Protocol::Http1);
    }
    let bytes = ctx.templates[entry.route as usize].bytes_of(entry, &ctx.plan.params);
    record.bytes_sent = bytes.len() as u64;
    let BufResult(written, _) = stream.write_all(bytes).await;
    if let Err(e) = written {
        return exchange.finish(false, Some(transport_verdict(&e)), now_ns(ctx.epoch));
    }
    record.request_written_ns = Some(now_ns(ctx.epoch));
    let mut parser = http1::Parser::default();
    let mut events = Vec::new();
    let mut buf = local.buffer();
    let verdict = loop {
        buf.clear();
        let BufResult(read, b) = stream.read(buf).await;
        buf = b;
        let now = now_ns(ctx.epoch);
        let n = match read {
            Ok(n) => n,
            Err(e) => break exchange.finish(false, Some(transport_verdict(&e)), now),
        };
        record.bytes_received += n as u64;
        parser.read(&buf[..n], &mut events);
        let mut ended = false;
        for event in events.drain(..) {
            ended |= event == http1::Event::End;
            exchange.on_http(event, now);
        }
        if exchange.decided().is_some() {
            // The fate is known (an error status, broken framing): the connection is not reused.
            break exchange.finish(false, None, now);
        }
        if ended {
            let verdict = exchange.finish(true, None, now);
            if parser.reusable() && !exchange.close_after {
                let limit = match parser.keep_alive_timeout_s() {
                    Some(s) => ctx
                        .plan
                        .idle_limit
                        .min(Duration::from_secs(s).saturating_sub(KEEP_ALIVE_MARGIN)),
                    None => ctx.plan.idle_limit,
                };
                if !limit.is_zero() {
                    local.keep(id, stream, fd, limit, true);
                }
            }
            break verdict;
        }
        if n == 0 {
            break exchange.finish(false, None, now);
        }
    };
    // A read cut short by the deadline never gets here: its buffer goes with the dropped
    // operation, and the next request takes a fresh one.
    local.give_back(buf);
    verdict
}

#[cfg(test)]
mod tests {
    use super::super::dispatch::spare_wanted;
    use super::*;
    use std::io::Write;
    use std::net::{TcpListener, TcpStream};
    use std::os::fd::AsRawFd;

    #[test]
    fn the_liveness_check_sees_a_close_behind_unread_bytes() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (mut server, _) = listener.accept().unwrap();
        let fd = client.as_raw_fd();
        assert_eq!(idle_state(fd, false), Idle::Alive);
        server
            .write_all(b"HTTP/1.1 408 Request Timeout\r\n\r\n")
            .unwrap();
        std::thread::sleep(Duration::from_millis(20));
        assert_eq!(idle_state(fd, false), Idle::Unsolicited);
        // Under TLS unread bytes alone are tickets, not a fault.
        assert_eq!(idle_state(fd, true), Idle::Alive);
        // The close behind those bytes is seen all the same, plain or TLS.
        drop(server);
        std::thread::sleep(Duration::from_millis(20));
        assert_eq!(idle_state(fd, false), Idle::Closed);
        assert_eq!(idle_state(fd, true), Idle::Closed);
    }

    #[test]
    fn the_spare_keeper_sizes_the_pool_by_littles_law_and_what_is_in_flight() {
        // 500 rps a worker at 200 ms: 100 busy by Little's law; 150 + 1 in all.
        assert_eq!(spare_wanted(500.0, Some(0.2), 100, 0, 10_000), 51);
        assert_eq!(spare_wanted(500.0, Some(0.2), 100, 51, 10_000), 0);
        // The target slows: 320 in flight before any slow request has finished, so the pool
        // follows what is in flight (481 in all), not the stale mean.
        assert_eq!(spare_wanted(500.0, Some(0.2), 320, 20, 10_000), 481 - 340);
        // Before anything finished there is no mean: size by what is in flight (the warm pool
        // covers the start).
        assert_eq!(spare_wanted(10.0, None, 0, 4, 100), 0);
        assert_eq!(spare_wanted(10.0, None, 2, 0, 100), 2);
        // Never past the most a worker can have in flight.
        assert_eq!(spare_wanted(500.0, Some(20.0), 0, 0, 301), 301);
        assert_eq!(spare_wanted(0.0, Some(1.0), 0, 0, 1), 1);
    }
}
