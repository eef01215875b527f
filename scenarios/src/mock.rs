//! The mock inference server: OpenAI-compatible completions over a capacity-limited engine with
//! a known timing model, fault modes with an audit trail, and Prometheus metrics.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Serialize;
use serde_json::{json, Value};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, Semaphore};
use tokio::time::Instant;

use crate::config::{FaultMode, FaultPlan, HeadTiming, MockConfig};
use crate::http::{self, ReadError, Request};
use crate::timing::Rng;

mod ask;
mod output;
use ask::{parse_ask, Ask, Planned};
pub use ask::{streamed, Streamed};
use output::{Api, Encoder, Kind};

/// Response header that names the replica, sent with the first token.
pub const REPLICA_HEADER: &str = "x-percentes-replica";
/// Largest max_tokens a request may ask for.
pub const MAX_TOKENS_MAX: u32 = 16_384;
/// Stalled streams resume within this many ms after the stall's expiry, spread by request.
pub const STALL_FLUSH_SPREAD_MS: u64 = 20;

/// One audit record of a fault's life, on the mock's monotonic clock.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct AuditRecord {
    /// The fault's id, in arming order.
    pub fault_id: u64,
    /// Its mode.
    pub mode: FaultMode,
    /// `armed`, `fired` or `expired`.
    pub event: &'static str,
    /// ns since the mock started.
    pub at_ns: u64,
}

#[derive(Clone, Copy, Debug)]
struct ArmedFault {
    id: u64,
    plan: FaultPlan,
    fire: Instant,
    expire: Instant,
}

/// A running mock replica's shared state.
#[derive(Debug)]
pub struct Mock {
    /// The configuration it serves.
    pub config: MockConfig,
    start: Instant,
    permits: Semaphore,
    waiting: AtomicU64,
    running: AtomicU64,
    arrivals: AtomicU64,
    outcomes: Mutex<BTreeMap<&'static str, u64>>,
    faults: Mutex<Vec<ArmedFault>>,
    audit: Mutex<Vec<AuditRecord>>,
    next_fault_id: AtomicU64,
    /// Incremented when a stream-abort fires: in-flight streams reset.
    abort_epoch: watch::Sender<u64>,
    /// Connections captured by silent-hang: held open, never written, never closed.
    captured: Mutex<Vec<TcpStream>>,
    /// Its service times and counts in vLLM's names (`GET /metrics`).
    service: Mutex<crate::exposition::ServiceStats>,
}

impl Mock {
    /// Creates the state and arms the configured faults relative to now.
    pub fn new(config: MockConfig) -> Arc<Mock> {
        let permits = Semaphore::new(config.capacity.max_num_seqs as usize);
        let plans = config.faults.clone();
        let mock = Arc::new(Mock {
            config,
            start: Instant::now(),
            permits,
            waiting: AtomicU64::new(0),
            running: AtomicU64::new(0),
            arrivals: AtomicU64::new(0),
            outcomes: Mutex::new(BTreeMap::new()),
            faults: Mutex::new(Vec::new()),
            audit: Mutex::new(Vec::new()),
            next_fault_id: AtomicU64::new(0),
            abort_epoch: watch::channel(0).0,
            captured: Mutex::new(Vec::new()),
            service: Mutex::new(Default::default()),
        });
        for plan in plans {
            mock.arm(plan);
        }
        mock
    }

    fn since_start_ns(&self, at: Instant) -> u64 {
        at.saturating_duration_since(self.start).as_nanos() as u64
    }

    fn record(&self, fault: &ArmedFault, event: &'static str, at: Instant) {
        let record = AuditRecord {
            fault_id: fault.id,
            mode: fault.plan.mode,
            event,
            at_ns: self.since_start_ns(at),
        };
        self.audit.lock().expect("audit lock").push(record);
    }

    /// Arms a fault `plan.at_ms` from now (configured faults: from the mock's start) and spawns
    /// the task that records its firing and expiry. Must run inside the runtime.
    pub fn arm(self: &Arc<Self>, plan: FaultPlan) -> u64 {
        let id = self.next_fault_id.fetch_add(1, Ordering::Relaxed);
        let now = Instant::now();
        let fire = now + Duration::from_millis(plan.at_ms);
        let fault = ArmedFault {
            id,
            plan,
            fire,
            expire: fire + Duration::from_millis(plan.duration_ms),
        };
        self.record(&fault, "armed", now);
        self.faults.lock().expect("faults lock").push(fault);
        let mock = Arc::clone(self);
        tokio::spawn(async move {
            tokio::time::sleep_until(fault.fire).await;
            mock.record(&fault, "fired", Instant::now());
            if fault.plan.mode == FaultMode::StreamAbort {
                mock.abort_epoch.send_modify(|epoch| *epoch += 1);
            }
            tokio::time::sleep_until(fault.expire).await;
            mock.record(&fault, "expired", Instant::now());
        });
        id
    }

    /// The fault of `mode` active at `at`, if any.
    fn active(&self, mode: FaultMode, at: Instant) -> Option<ArmedFault> {
        self.faults
            .lock()
            .expect("faults lock")
            .iter()
            .copied()
            .find(|f| f.plan.mode == mode && f.fire <= at && at < f.expire)
    }

    /// The first active fault among the hostile and service modes that act on a new request.
    fn active_on_arrival(&self, at: Instant) -> Option<ArmedFault> {
        self.faults
            .lock()
            .expect("faults lock")
            .iter()
            .copied()
            .filter(|f| f.fire <= at && at < f.expire && f.plan.mode != FaultMode::Stall)
            .min_by_key(|f| f.fire)
    }

    fn count(&self, outcome: &'static str) {
        *self
            .outcomes
            .lock()
            .expect("outcomes lock")
            .entry(outcome)
            .or_insert(0) += 1;
    }

    /// The audit trail so far.
    pub fn audit(&self) -> Vec<AuditRecord> {
        self.audit.lock().expect("audit lock").clone()
    }

    /// Requests waiting for a decode slot.
    pub fn waiting(&self) -> u64 {
        self.waiting.load(Ordering::Relaxed)
    }

    /// Sequences decoding now.
    pub fn running(&self) -> u64 {
        self.running.load(Ordering::Relaxed)
    }

    fn multiplier(&self) -> f64 {
        let running = self.running.load(Ordering::Relaxed).max(1);
        (1.0 + self.config.capacity.slowdown_per_running * (running - 1) as f64) * self.throttle()
    }

    /// The CPU throttle's factor now (1 without one).
    fn throttle(&self) -> f64 {
        if self
            .active(FaultMode::CpuThrottle, Instant::now())
            .is_some()
        {
            self.config.capacity.throttle_factor.max(1.0)
        } else {
            1.0
        }
    }

    /// Prometheus text exposition.
    pub fn metrics(&self) -> String {
        let name = &self.config.name;
        let mut out = String::new();
        out.push_str("# HELP percentes_mock_requests_total Requests by how the mock ended them.\n");
        out.push_str("# TYPE percentes_mock_requests_total counter\n");
        for (outcome, n) in self.outcomes.lock().expect("outcomes lock").iter() {
            out.push_str(&format!(
                "percentes_mock_requests_total{{replica=\"{name}\",outcome=\"{outcome}\"}} {n}\n"
            ));
        }
        out.push_str("# HELP percentes_mock_waiting Requests waiting for a decode slot.\n# TYPE percentes_mock_waiting gauge\n");
        out.push_str(&format!(
            "percentes_mock_waiting{{replica=\"{name}\"}} {}\n",
            self.waiting()
        ));
        out.push_str("# HELP percentes_mock_running Sequences decoding.\n# TYPE percentes_mock_running gauge\n");
        out.push_str(&format!(
            "percentes_mock_running{{replica=\"{name}\"}} {}\n",
            self.running()
        ));
        // The resources the degradation modes take away, as the resource itself reports them:
        // what a scenario confirms its impact by, independently of the injector's own answer.
        let now = Instant::now();
        out.push_str("# HELP percentes_mock_cpu_throttled Whether a cpu-throttle holds the replica's CPU.\n# TYPE percentes_mock_cpu_throttled gauge\n");
        out.push_str(&format!(
            "percentes_mock_cpu_throttled{{replica=\"{name}\"}} {}\n",
            u8::from(self.active(FaultMode::CpuThrottle, now).is_some())
        ));
        out.push_str("# HELP percentes_mock_store_available Whether the document store answers.\n# TYPE percentes_mock_store_available gauge\n");
        out.push_str(&format!(
            "percentes_mock_store_available{{replica=\"{name}\"}} {}\n",
            u8::from(self.active(FaultMode::StoreOutage, now).is_none())
        ));
        // The names vLLM exports, so probes written for vLLM read the mock unchanged.
        let model = &self.config.model;
        out.push_str("# TYPE vllm:num_requests_waiting gauge\n");
        out.push_str(&format!(
            "vllm:num_requests_waiting{{model_name=\"{model}\"}} {}\n",
            self.waiting()
        ));
        out.push_str("# TYPE vllm:num_requests_running gauge\n");
        out.push_str(&format!(
            "vllm:num_requests_running{{model_name=\"{model}\"}} {}\n",
            self.running()
        ));
        self.service.lock().expect("service lock").render(
            &mut out,
            model,
            (self.running(), self.config.capacity.max_num_seqs),
        );
        out
    }
}

/// Accepts connections until the listener fails. Every accepted socket closes with RST when the
/// mock drops it (SO_LINGER 0), as a pod deleted with grace 0 resets its connections.
pub async fn serve(listener: TcpListener, mock: Arc<Mock>) -> std::io::Result<()> {
    loop {
        let (stream, _) = crate::http::accept(&listener, "mock").await?;
        let _ = stream.set_nodelay(true);
        http::reset_on_close(&stream);
        let mock = Arc::clone(&mock);
        tokio::spawn(async move { connection(stream, mock).await });
    }
}

/// The documented example configuration (`percentes mock --example-config`).
pub const EXAMPLE_CONFIG: &str = include_str!("../mock.example.toml");

/// Runs a mock on `listen` until Ctrl-C, on a runtime of its own (`threads` workers, default one
/// per core). `ready` is called with the bound address before serving (port 0 picks a free port).
pub fn run_blocking(
    config: MockConfig,
    listen: &str,
    threads: Option<usize>,
    ready: impl FnOnce(std::net::SocketAddr),
) -> std::io::Result<()> {
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    if let Some(threads) = threads {
        builder.worker_threads(threads.max(1));
    }
    let runtime = builder.enable_all().build()?;
    runtime.block_on(async move {
        let listener = TcpListener::bind(listen).await?;
        ready(listener.local_addr()?);
        tokio::select! {
            result = serve(listener, Mock::new(config)) => result,
            _ = tokio::signal::ctrl_c() => Ok(()),
        }
    })
}

/// Starts a mock on an ephemeral loopback port, on a runtime of its own in a background thread
/// (`workers` threads), and returns its address and state. The thread serves until the process
/// exits: for tests and tools that need a mock beside them.
pub fn spawn_background(
    config: MockConfig,
    workers: usize,
) -> std::io::Result<(std::net::SocketAddr, Arc<Mock>)> {
    crate::spawn_background(
        format!("mock-{}", config.name),
        workers,
        move || Mock::new(config),
        serve,
    )
}

/// How a request left its connection.
enum Next {
    KeepAlive,
    Close,
    /// The connection was reset or captured: nothing more to do with it.
    Gone,
}

async fn connection(mut stream: TcpStream, mock: Arc<Mock>) {
    let mut buf = Vec::new();
    loop {
        let request = match http::read_request(&mut stream, &mut buf).await {
            Ok(request) => request,
            Err(ReadError::Closed) | Err(ReadError::Io(_)) => return close_orderly(stream).await,
            Err(ReadError::Bad(status, why)) => {
                http::answer_unreadable(&mut stream, status, &why).await;
                return close_orderly(stream).await;
            }
        };
        let close = request.close;
        match handle(&mut stream, &mock, request).await {
            Next::KeepAlive if !close => continue,
            // Reset (linger 0 stays set: dropping sends RST) or captured (another handle holds it).
            Next::Gone => return,
            Next::KeepAlive | Next::Close => return close_orderly(stream).await,
        }
    }
}

/// FIN, not RST: undo the linger-0 default, then shut down and drop.
async fn close_orderly(mut stream: TcpStream) {
    let _ = socket2::SockRef::from(&stream).set_linger(None);
    let _ = tokio::io::AsyncWriteExt::shutdown(&mut stream).await;
}

async fn respond(stream: &mut TcpStream, status: u16, body: &Value, close: bool) -> Next {
    let bytes = http::full_response(
        status,
        "application/json",
        &[],
        body.to_string().as_bytes(),
        close,
    );
    match http::send(stream, &bytes).await {
        Ok(()) if !close => Next::KeepAlive,
        Ok(()) => Next::Close,
        Err(_) => Next::Gone,
    }
}

async fn handle(stream: &mut TcpStream, mock: &Arc<Mock>, request: Request) -> Next {
    let now = Instant::now();
    match (request.method.as_str(), request.path.as_str()) {
        ("GET", "/health") => {
            if mock.active(FaultMode::SlowReload, now).is_some() {
                respond(stream, 503, &json!({"status": "reloading"}), false).await
            } else {
                respond(
                    stream,
                    200,
                    &json!({"status": "ok", "replica": mock.config.name}),
                    false,
                )
                .await
            }
        }
        ("GET", "/v1/models") => {
            // OpenAI's list shape: what a client's pre-flight reads to see the model is served.
            let models = json!({"object": "list", "data": [{"id": mock.config.model, "object": "model", "owned_by": "percentes-mock"}]});
            respond(stream, 200, &models, false).await
        }
        ("GET", "/metrics") => {
            let bytes = http::full_response(
                200,
                "text/plain; version=0.0.4",
                &[],
                mock.metrics().as_bytes(),
                false,
            );
            if http::send(stream, &bytes).await.is_ok() {
                Next::KeepAlive
            } else {
                Next::Gone
            }
        }
        ("GET", "/admin/faults") => {
            let armed: Vec<Value> = mock
                .faults
                .lock()
                .expect("faults lock")
                .iter()
                .map(|f| json!({"fault_id": f.id, "plan": f.plan, "fire_ns": mock.since_start_ns(f.fire), "expire_ns": mock.since_start_ns(f.expire)}))
                .collect();
            respond(
                stream,
                200,
                &json!({"faults": armed, "audit": mock.audit()}),
                false,
            )
            .await
        }
        ("POST", "/admin/faults") => match serde_json::from_slice::<FaultPlan>(&request.body) {
            Ok(plan) => {
                let id = mock.arm(plan);
                respond(
                    stream,
                    200,
                    &json!({"fault_id": id, "armed_ns": mock.since_start_ns(now)}),
                    false,
                )
                .await
            }
            Err(e) => {
                respond(
                    stream,
                    400,
                    &json!({"error": {"message": format!("bad fault plan: {e}")}}),
                    false,
                )
                .await
            }
        },
        ("POST" | "GET", "/v1/store/cached") => lookup(stream, mock, true).await,
        ("POST" | "GET", "/v1/store/uncached") => lookup(stream, mock, false).await,
        ("POST", "/v1/chat/completions") => complete(stream, mock, &request, Api::Chat).await,
        ("POST", "/v1/completions") => complete(stream, mock, &request, Api::Completions).await,
        ("POST", "/v1/responses") => complete(stream, mock, &request, Api::Responses).await,
        (
            _,
            "/health"
            | "/metrics"
            | "/admin/faults"
            | "/v1/chat/completions"
            | "/v1/completions"
            | "/v1/responses",
        ) => {
            respond(
                stream,
                405,
                &json!({"error": {"message": "method not allowed"}}),
                false,
            )
            .await
        }
        _ => {
            respond(
                stream,
                404,
                &json!({"error": {"message": format!("no route {}", request.path)}}),
                false,
            )
            .await
        }
    }
}

/// How the transport of one stream will fail, decided at arrival.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Sabotage {
    None,
    ResetAfter(u32),
    CloseAfter(u32),
    BrokenChunkedAfter(u32),
    InvalidSse,
    InvalidUtf8,
    IncorrectSuccess,
}

async fn complete(stream: &mut TcpStream, mock: &Arc<Mock>, request: &Request, api: Api) -> Next {
    let arrival = mock.arrivals.fetch_add(1, Ordering::Relaxed);
    let now = Instant::now();
    let ask = match parse_ask(&request.body, api) {
        Ok(ask) => ask,
        Err(refused) => {
            mock.count("bad-request");
            let message = refused.to_string();
            return respond(stream, 400, &json!({"error": {"message": message}}), false).await;
        }
    };
    let mut sabotage = Sabotage::None;
    if let Some(fault) = mock.active_on_arrival(now) {
        let after = fault.plan.after_tokens;
        match fault.plan.mode {
            FaultMode::SlowReload => {
                mock.count("rejected");
                return respond(
                    stream,
                    503,
                    &json!({"error": {"message": "replica reloading"}}),
                    false,
                )
                .await;
            }
            FaultMode::Error => {
                mock.count("errored");
                return respond(
                    stream,
                    500,
                    &json!({"error": {"message": "injected error"}}),
                    false,
                )
                .await;
            }
            FaultMode::SilentHang => return capture(stream, mock).await,
            FaultMode::MalformedStatusLine => {
                mock.count("hostile");
                let _ = http::send(stream, b"HTTP/1.1 2x0 OK\r\ncontent-length: 2\r\n\r\n{}").await;
                return Next::Close;
            }
            FaultMode::OversizedHeaders => {
                mock.count("hostile");
                let mut head =
                    b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nx-padding: ".to_vec();
                head.extend(std::iter::repeat_n(b'a', 1 << 20));
                head.extend_from_slice(b"\r\ncontent-length: 2\r\n\r\n{}");
                let _ = http::send(stream, &head).await;
                return Next::Close;
            }
            FaultMode::SlowlorisHeaders => {
                mock.count("hostile");
                let head = http::chunked_head(
                    200,
                    "text/event-stream",
                    &[(REPLICA_HEADER, &mock.config.name)],
                );
                for byte in head {
                    if http::send(stream, &[byte]).await.is_err() {
                        return Next::Gone;
                    }
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                return Next::Close;
            }
            FaultMode::StreamAbort => sabotage = Sabotage::ResetAfter(after),
            FaultMode::PrematureClose => sabotage = Sabotage::CloseAfter(after),
            FaultMode::BrokenChunked => sabotage = Sabotage::BrokenChunkedAfter(after),
            FaultMode::InvalidSse => sabotage = Sabotage::InvalidSse,
            FaultMode::InvalidUtf8 => sabotage = Sabotage::InvalidUtf8,
            FaultMode::IncorrectSuccess => sabotage = Sabotage::IncorrectSuccess,
            FaultMode::CpuThrottle if mock.waiting() > 0 => {
                mock.count("shed");
                return respond(
                    stream,
                    503,
                    &json!({"error": {"message": "overloaded: shedding generation under CPU contention", "type": "overloaded"}}),
                    false,
                )
                .await;
            }
            FaultMode::Stall | FaultMode::StoreOutage | FaultMode::CpuThrottle => {}
        }
    }

    // Admission: wait in FIFO order for a decode slot.
    mock.waiting.fetch_add(1, Ordering::Relaxed);
    let permit = mock
        .permits
        .acquire()
        .await
        .expect("the semaphore is never closed");
    mock.waiting.fetch_sub(1, Ordering::Relaxed);
    mock.running.fetch_add(1, Ordering::Relaxed);
    let next = generate(stream, mock, api, &ask, (arrival, now), sabotage).await;
    mock.running.fetch_sub(1, Ordering::Relaxed);
    drop(permit);
    next
}

/// A document lookup: from the replica's cache, or from the store behind it (which a
/// `store-outage` takes away: an explicit 503, never a stale or partial answer).
async fn lookup(stream: &mut TcpStream, mock: &Arc<Mock>, cached: bool) -> Next {
    let now = Instant::now();
    if !cached && mock.active(FaultMode::StoreOutage, now).is_some() {
        mock.count("store-unavailable");
        return respond_named(
            stream,
            mock,
            503,
            &json!({"error": {"message": "document store unavailable", "type": "dependency_unavailable"}}),
        )
        .await;
    }
    let store = &mock.config.store;
    let ms = if cached {
        store.cache_ms
    } else {
        store.store_ms
    };
    tokio::time::sleep(Duration::from_secs_f64(
        ms.max(0.0) / 1000.0 * mock.throttle(),
    ))
    .await;
    mock.count(if cached { "cache-hit" } else { "store-read" });
    respond_named(
        stream,
        mock,
        200,
        &json!({"object": "document", "model": mock.config.model, "cache": if cached { "hit" } else { "miss" }, "replica": mock.config.name, "content": "verified document"}),
    )
    .await
}

/// A JSON response that names the replica (the recorder attributes requests by this header).
async fn respond_named(stream: &mut TcpStream, mock: &Mock, status: u16, body: &Value) -> Next {
    let bytes = http::full_response(
        status,
        "application/json",
        &[(REPLICA_HEADER, &mock.config.name)],
        body.to_string().as_bytes(),
        false,
    );
    match http::send(stream, &bytes).await {
        Ok(()) => Next::KeepAlive,
        Err(_) => Next::Gone,
    }
}

async fn capture(stream: &mut TcpStream, mock: &Arc<Mock>) -> Next {
    mock.count("hung");
    // Keep a duplicate of the descriptor forever; the connection task's own handle is dropped
    // without linger, and the duplicate keeps the connection open: no bytes, no FIN, no RST.
    match clone_stream(stream) {
        Some(held) => {
            let _ = socket2::SockRef::from(&*stream).set_linger(None);
            mock.captured.lock().expect("captured lock").push(held);
            Next::Gone
        }
        None => Next::Gone,
    }
}

/// A second handle to the same socket, so dropping one does not close the connection.
fn clone_stream(stream: &TcpStream) -> Option<TcpStream> {
    let std_stream = socket2::SockRef::from(stream).try_clone().ok()?;
    let std_stream: std::net::TcpStream = std_stream.into();
    std_stream.set_nonblocking(true).ok()?;
    TcpStream::from_std(std_stream).ok()
}

/// Sleeps until `deadline`, then past any stall active at wake-up (to its expiry plus this
/// stream's share of the flush spread). Returns how far the stall pushed this stream.
async fn sleep_through_stalls(mock: &Mock, deadline: Instant, arrival: u64) -> Duration {
    tokio::time::sleep_until(deadline).await;
    let mut pushed = Duration::ZERO;
    while let Some(stall) = mock.active(FaultMode::Stall, Instant::now()) {
        let resume = stall.expire + Duration::from_millis(arrival % (STALL_FLUSH_SPREAD_MS + 1));
        pushed += resume.saturating_duration_since(Instant::now());
        tokio::time::sleep_until(resume).await;
    }
    pushed
}

async fn generate(
    stream: &mut TcpStream,
    mock: &Arc<Mock>,
    api: Api,
    ask: &Ask,
    (arrival, arrived): (u64, Instant),
    sabotage: Sabotage,
) -> Next {
    let config = &mock.config;
    let mut rng = Rng::new(config.seed, arrival);
    let model = if sabotage == Sabotage::IncorrectSuccess {
        "stale-model"
    } else {
        config.model.as_str()
    };
    let Planned {
        plan,
        usage,
        finish,
    } = Planned::of(
        config,
        (api, ask),
        &mut rng,
        sabotage == Sabotage::IncorrectSuccess,
    );
    let tokens = plan.len() as u32;
    let mut encoder = Encoder::new(api, arrival, model, config.timing.reasoning_field.name());
    let mut abort = mock.abort_epoch.subscribe();
    abort.mark_unchanged();
    let scaled = |ns: u64, mult: f64| Duration::from_nanos((ns as f64 * mult) as u64);

    let mut deadline =
        Instant::now() + scaled(config.timing.ttft.sample_ns(&mut rng), mock.multiplier());
    let mut head_sent = false;
    // A server that answers its head as it accepts the request (vLLM, behind FastAPI) rather
    // than with its first token: what tells a proxy holding the head apart (SPEC §2 "The first
    // token's path").
    if ask.stream && config.timing.head == HeadTiming::OnArrival {
        if http::send(stream, &stream_head(config, &mut encoder))
            .await
            .is_err()
        {
            mock.count("client-gone");
            return Next::Gone;
        }
        head_sent = true;
    }
    for (i, token) in plan.iter().enumerate() {
        let i = i as u32;
        if i > 0 {
            let gap = match (token.kind, &config.timing.reasoning_gap) {
                (Kind::Reasoning, Some(gap)) => gap,
                _ => &config.timing.token_gap,
            };
            deadline += scaled(gap.sample_ns(&mut rng), mock.multiplier());
        }
        tokio::select! {
            pushed = sleep_through_stalls(mock, deadline, arrival) => { deadline += pushed; }
            _ = abort.changed() => {
                mock.count("reset");
                http::reset_on_close(stream);
                return Next::Gone;
            }
        }
        if mock.active(FaultMode::SilentHang, Instant::now()).is_some() {
            return capture(stream, mock).await;
        }
        match sabotage {
            Sabotage::ResetAfter(n) if i == n => {
                mock.count("reset");
                http::reset_on_close(stream);
                return Next::Gone;
            }
            Sabotage::CloseAfter(n) if i == n => {
                mock.count("hostile");
                return Next::Close;
            }
            Sabotage::BrokenChunkedAfter(n) if i == n && ask.stream => {
                mock.count("hostile");
                let _ = http::send(stream, b"zz\r\nnot a chunk\r\n").await;
                return Next::Close;
            }
            _ => {}
        }
        if i == 0 {
            mock.service
                .lock()
                .expect("service lock")
                .first_token(arrived.elapsed());
        }
        if !ask.stream {
            continue;
        }
        let mut bytes = Vec::new();
        if !head_sent {
            bytes.extend(stream_head(config, &mut encoder));
            head_sent = true;
        }
        let event = match sabotage {
            Sabotage::InvalidSse => b"data: {\"choices\": [ this is not json\n\n".to_vec(),
            Sabotage::InvalidUtf8 => {
                let mut e = b"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"".to_vec();
                e.extend_from_slice(&[0xc3, 0x28, 0xff]);
                e.extend_from_slice(b"\"}}]}\n\n");
                e
            }
            _ => encoder.token(token, (i + 1 == tokens).then_some(finish)),
        };
        bytes.extend(http::chunk(&event));
        if http::send(stream, &bytes).await.is_err() {
            mock.count("client-gone");
            return Next::Gone;
        }
    }
    if !ask.stream {
        let body = encoder.body(&plan, usage, finish);
        let bytes = http::full_response(
            200,
            "application/json",
            &[(REPLICA_HEADER, &config.name)],
            body.to_string().as_bytes(),
            false,
        );
        mock.count("completed");
        return if http::send(stream, &bytes).await.is_ok() {
            mock.service.lock().expect("service lock").finished(
                arrived.elapsed(),
                finish,
                (ask.prompt_tokens, tokens),
            );
            Next::KeepAlive
        } else {
            Next::Gone
        };
    }
    let mut tail = Vec::new();
    if sabotage == Sabotage::InvalidSse {
        tail.extend_from_slice(http::LAST_CHUNK);
        mock.count("hostile");
    } else {
        tail.extend(http::chunk(&encoder.epilogue(
            usage,
            ask.include_usage,
            finish,
        )));
        tail.extend_from_slice(http::LAST_CHUNK);
        mock.count(if sabotage == Sabotage::None {
            "completed"
        } else {
            "hostile"
        });
    }
    if http::send(stream, &tail).await.is_ok() {
        if sabotage == Sabotage::None {
            mock.service.lock().expect("service lock").finished(
                arrived.elapsed(),
                finish,
                (ask.prompt_tokens, tokens),
            );
        }
        Next::KeepAlive
    } else {
        Next::Gone
    }
}

/// A stream's head and, for an API with events before the first token, its prologue.
fn stream_head(config: &MockConfig, encoder: &mut Encoder) -> Vec<u8> {
    let mut bytes = http::chunked_head(
        200,
        "text/event-stream",
        &[
            (REPLICA_HEADER, &config.name),
            ("cache-control", "no-cache"),
        ],
    );
    // An empty chunk would end the body: only an API with events before the first token
    // writes one here.
    let prologue = encoder.prologue();
    if !prologue.is_empty() {
        bytes.extend(http::chunk(&prologue));
    }
    bytes
}
