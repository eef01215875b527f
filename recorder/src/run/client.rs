//! The client: a worker's context and state, the keep-alive pool, opening connections (TLS
//! included), and each request executed to one verdict (`execute`, `talk`). The pacer that
//! sends them is `pacer.rs`.

use super::*;

pub(super) struct WorkerContext {
    pub(super) worker: usize,
    /// The run's plan, shared by every worker (the schedule, the timeout, the pool floor, which
    /// routes stream); no worker holds the configuration.
    pub(super) plan: Arc<RunPlan>,
    pub(super) target: Target,
    pub(super) epoch: Instant,
    /// The loopback canary's address, when it runs.
    pub(super) canary: Option<std::net::SocketAddr>,
    /// Set the ring up for deferred task work ([`ring_setup`]); probed once per run.
    pub(super) deferred_task_work: bool,
    pub(super) tls: Option<TlsConnector>,
    pub(super) rules: Vec<Rule>,
    pub(super) templates: Vec<Template>,
    pub(super) server_name: String,
    pub(super) sender: Sender,
    pub(super) shared: Arc<Shared>,
    pub(super) stop: Arc<AtomicBool>,
}

/// A worker's own state, shared by the request tasks of its one thread.
pub(super) struct Local {
    /// Idle keep-alive connections, most recently used last.
    pub(super) connections: RefCell<Vec<(u64, Conn)>>,
    /// The next connection id: the worker's index in the top 16 bits, a counter below.
    pub(super) next_connection: Cell<u64>,
    /// Read buffers of finished requests, reused so a request does not allocate one.
    pub(super) buffers: RefCell<Vec<Vec<u8>>>,
    /// Each route's verification rule, shared by its exchanges.
    pub(super) rules: Vec<Rc<Rule>>,
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
        }
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

/// Opens a connection (and its TLS session for https), recording connect and TLS times.
pub(super) async fn open(
    ctx: &WorkerContext,
    record: Option<&mut RequestRecord>,
) -> Result<Conn, (std::io::Error, bool)> {
    let mut record = record;
    if let Some(r) = record.as_deref_mut() {
        r.connect_start_ns = Some(now_ns(ctx.epoch));
    }
    let stream = TcpStream::connect(ctx.target.address.as_str())
        .await
        .map_err(|e| (e, false))?;
    let _ = stream.set_nodelay(true);
    if let Some(r) = record.as_deref_mut() {
        r.connect_end_ns = Some(now_ns(ctx.epoch));
    }
    match &ctx.tls {
        None => Ok(Conn::Plain(stream)),
        Some(connector) => {
            let tls = connector
                .connect(&ctx.server_name, stream)
                .await
                .map_err(|e| (e, true))?;
            if let Some(r) = record {
                r.tls_done_ns = Some(now_ns(ctx.epoch));
            }
            Ok(Conn::Tls(Box::new(tls)))
        }
    }
}

pub(super) fn now_ns(epoch: Instant) -> u64 {
    Instant::now().saturating_duration_since(epoch).as_nanos() as u64
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

/// A connect failure that never reached the target (the client ran out of something): the
/// request was not dispatched.
pub(super) fn local_exhaustion(e: &std::io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM | libc::EADDRNOTAVAIL)
    )
}

pub(super) fn connect_verdict(e: &std::io::Error) -> Verdict {
    use std::io::ErrorKind::*;
    match e.kind() {
        ConnectionRefused => Verdict::errored("refused", e.to_string()),
        ConnectionReset | ConnectionAborted => Verdict::errored("reset", e.to_string()),
        _ if e.to_string().contains("lookup") || e.kind() == NotFound => {
            Verdict::errored("dns", e.to_string())
        }
        _ => Verdict::errored("connect", e.to_string()),
    }
}

pub(super) fn transport_verdict(e: &std::io::Error) -> Verdict {
    use std::io::ErrorKind::*;
    match e.kind() {
        ConnectionReset | ConnectionAborted | BrokenPipe => {
            Verdict::errored("reset", e.to_string())
        }
        _ => Verdict::errored("premature-close", e.to_string()),
    }
}

pub(super) async fn execute(
    ctx: &WorkerContext,
    local: &Local,
    entry: Entry,
    dispatched: u64,
) -> RequestRecord {
    let mut record = blank(&entry);
    record.dispatched_ns = Some(dispatched);
    let streams = ctx
        .plan
        .streams
        .get(entry.route as usize)
        .copied()
        .unwrap_or(true);
    let mut exchange = Exchange::with_rule(streams, Rc::clone(&local.rules[entry.route as usize]));
    let deadline = ctx.epoch + Duration::from_nanos(entry.intended_ns) + ctx.plan.timeout;
    let verdict = compio::time::timeout_at(
        deadline,
        talk(ctx, local, &entry, &mut record, &mut exchange),
    )
    .await;
    let verdict = match verdict {
        Ok(v) => v,
        Err(_) => {
            record.terminal_ns = (deadline - ctx.epoch).as_nanos() as u64;
            Verdict {
                outcome: Outcome::Censored,
                class: "timeout",
                detail: format!("no terminal event by the {:?} timeout", ctx.plan.timeout),
            }
        }
    };
    if record.terminal_ns == 0 {
        record.terminal_ns = now_ns(ctx.epoch);
    }
    if verdict.outcome == Outcome::Undispatched {
        record.dispatched_ns = None;
    }
    record.outcome = verdict.outcome as u8;
    record.class = class_code(verdict.class).expect("classes come from the table");
    record.detail = verdict.detail;
    record.http_status = exchange.status.unwrap_or(0);
    record.replica = std::mem::take(&mut exchange.replica);
    record.response_head_ns = exchange.response_head_ns;
    record.first_content_ns = exchange.first_content_ns;
    record.content_gaps_us = std::mem::take(&mut exchange.content_gaps_us);
    record.content_events = exchange.content_events;
    record.usage_prompt_tokens = exchange.usage_prompt_tokens;
    record.usage_completion_tokens = exchange.usage_completion_tokens;
    record
}

pub(super) async fn talk(
    ctx: &WorkerContext,
    local: &Local,
    entry: &Entry,
    record: &mut RequestRecord,
    exchange: &mut Exchange,
) -> Verdict {
    let pooled = local.connections.borrow_mut().pop();
    let (id, mut stream) = match pooled {
        Some((id, conn)) => {
            record.connection_reused = true;
            (id, conn)
        }
        None => match open(ctx, Some(record)).await {
            Ok(conn) => (local.connection_id(), conn),
            Err((e, _)) if local_exhaustion(&e) => {
                return Verdict {
                    outcome: Outcome::Undispatched,
                    class: "undispatched",
                    detail: format!("the client could not open a connection: {e}"),
                };
            }
            Err((e, true)) => {
                record.terminal_ns = now_ns(ctx.epoch);
                return Verdict::errored(
                    "tls",
                    format!("TLS handshake with {}: {e}", ctx.server_name),
                );
            }
            Err((e, false)) => {
                record.terminal_ns = now_ns(ctx.epoch);
                return connect_verdict(&e);
            }
        },
    };
    record.connection_id = id;
    let bytes = ctx.templates[entry.route as usize].bytes(entry.index);
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
        if n == 0 {
            parser.eof(&mut events);
        } else {
            parser.feed(&buf[..n], &mut events);
        }
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
            if !exchange.close_after {
                local.connections.borrow_mut().push((id, stream));
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
