//! The pacer: each worker's io_uring runtime, which sleeps to every request's own absolute
//! intended time and sends it when it wakes (one wake a request, never early, never held:
//! ARCHITECTURE.md, "Pacing"), then drains; and the batches a worker hands its records over in.

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use percentes_formats::journal::records::{class_code, Outcome, Record, RequestRecord};
use percentes_formats::journal::stream::StreamRecord;
use percentes_formats::schedule::Entry;

use super::behind::Behind;
use super::client::talk;
use super::client::{blank, Local};
use super::context::WorkerContext;
use super::dispatch::KEEPER_INTERVAL;
use super::dispatch::STALL_TICK;
use super::dispatch::STOP_POLL;
use super::dispatch::{Dispatcher, Judge, Keeper, StallTicker, Step, KEEPER_AHEAD};
use super::execute::execute;
use super::ground::{Clock, Transport};
use super::state::Shared;
use crate::canary;
use crate::error::{io, RecordError};
use crate::run::http2;
use percentes_response::exchange::{Exchange, Rule, Verdict};

/// How a worker's io_uring is set up. Each worker's ring is submitted to and reaped by its own
/// thread alone, so with `deferred` it is declared single-issuer with deferred, cooperative task
/// work (Linux 6.1 and later): a completion is processed when the worker next asks the ring for
/// completions, instead of interrupting it wherever it is. Same timestamps (they are taken in user
/// space when the worker sees the completion either way), less CPU a request (BENCHMARKS.md).
pub(super) fn ring_setup(deferred: bool) -> compio::driver::ProactorBuilder {
    let mut ring = compio::driver::ProactorBuilder::new();
    if deferred {
        ring.single_issuer(true)
            .defer_taskrun(true)
            .coop_taskrun(true)
            .taskrun_flag(true);
    }
    ring
}

/// Whether this kernel accepts [`ring_setup`]'s deferred task work; an older one refuses the
/// flags, and the workers then set their rings up plain.
pub(super) fn deferred_task_work_available() -> bool {
    ring_setup(true).build().is_ok()
}

/// Refuses the run, before its journal exists, when this process may not set up an io_uring.
pub(super) fn io_uring_usable() -> Result<(), RecordError> {
    ring_setup(false)
        .build()
        .map(drop)
        .map_err(|e| RecordError::host(io_uring_refusal(&e)))
}

/// Why io_uring setup failed, in words an operator can act on.
pub(super) fn io_uring_refusal(error: &std::io::Error) -> String {
    let how = match error.raw_os_error() {
        Some(libc::EPERM) | Some(libc::EACCES) => {
            "refused: a seccomp filter (the default profiles of containerd 2.0 and Docker 25+ refuse io_uring) or kernel.io_uring_disabled forbids it here. In a container, run the recorder with deploy/seccomp-io-uring.json (Kubernetes: securityContext.seccompProfile, as deploy/recorder-job.yaml does) or Unconfined; on a host, set the sysctl kernel.io_uring_disabled to 0"
        }
        Some(libc::ENOSYS) => {
            "not available: this kernel was built without io_uring (Linux 5.10 or later with CONFIG_IO_URING), or a seccomp filter answers ENOSYS for it"
        }
        Some(libc::ENOMEM) => {
            "refused for memory: the locked-memory limit (ulimit -l) is too small for a ring on this kernel; raise it"
        }
        _ => "failed",
    };
    format!(
        "the recorder drives io_uring, and io_uring setup {how} ({error}); no journal was written"
    )
}

pub(super) fn worker(ctx: WorkerContext) -> Result<(), RecordError> {
    // Pinned only where `--cpus` asks (worker w on the w-th CPU named, wrapping around): a CPU
    // chosen blindly may be the one another process keeps busy, and a pinned worker cannot move
    // off it (issue 32). Unpinned, the kernel places it where there is room.
    let mut runtime = compio::runtime::Runtime::builder();
    runtime.with_proactor(ring_setup(ctx.deferred_task_work));
    if let Some(cpus) = ctx.cpus.as_deref().filter(|c| !c.is_empty()) {
        runtime.thread_affinity(std::collections::HashSet::from([
            cpus[ctx.worker % cpus.len()]
        ]));
    }
    let runtime = runtime
        .build()
        .map_err(io("cannot start the io_uring runtime"))?;
    let ctx = Rc::new(ctx);
    runtime.block_on(async move {
        if let Some(address) = ctx.canary {
            let (shared, epoch) = (Arc::clone(&ctx.shared), ctx.epoch);
            compio::runtime::spawn(async move {
                // Ends with the stream, or when the runtime is dropped at the end of the run.
                canary::watch(address, epoch, |lag| {
                    shared
                        .samples
                        .canary_ns
                        .lock()
                        .expect("canary lock")
                        .push(lag)
                })
                .await
            })
            .detach();
        }
        let clock = Rc::new(Ring {
            epoch: ctx.epoch,
            monotonic_epoch_ns: ctx.monotonic_epoch_ns,
        });
        let wire = Rc::new(Wire {
            local: Local::new(&ctx),
        });
        run_worker(ctx, clock, wire).await;
    });
    Ok(())
}

/// One worker's run, on any [`Clock`] and [`Transport`]: the production loop, which a recording
/// runs on io_uring ([`worker`]) and the tests on simulated time and a scripted target
/// (`sim.rs`). It opens the warm pool, waits for the epoch, then reaches each request of its
/// share at its own intended time, judges it, and sends it in a task of its own (a session's
/// task, which goes on to its follow-ups), with the stall ticker, the batch flusher and the spare
/// keeper beside it; then drains, every request ending by its own deadline.
pub(super) async fn run_worker<C: Clock, T: Transport>(
    ctx: Rc<WorkerContext>,
    clock: Rc<C>,
    net: Rc<T>,
) {
    let batch = Rc::new(Batch::default());
    let running = Rc::new(Cell::new(true));
    // The runtime-stall measure (SPEC §2): a 1 ms ticker on this worker's own ring, so
    // whatever delays the worker's turns (a busy CPU, throttling, a stop) delays it too.
    let ticker = {
        let (batch, running, clock2) = (Rc::clone(&batch), Rc::clone(&running), Rc::clone(&clock));
        clock.spawn(async move { stall_ticks(&*clock2, &batch, &running).await })
    };
    // The warm pool (the §1 floor), opened before the epoch. A connection that could not be
    // opened here is opened by the request that needs it, its connect time recorded.
    net.warm(&ctx).await;
    let outstanding = Rc::new(Cell::new(0usize));
    let flusher = {
        let (ctx, batch, running, clock2) = (
            Rc::clone(&ctx),
            Rc::clone(&batch),
            Rc::clone(&running),
            Rc::clone(&clock),
        );
        clock.spawn(async move {
            while running.get() {
                clock2.sleep(BATCH_INTERVAL).await;
                batch.flush(&ctx);
            }
        })
    };
    let keeper = {
        let (ctx, net, outstanding, running, clock2) = (
            Rc::clone(&ctx),
            Rc::clone(&net),
            Rc::clone(&outstanding),
            Rc::clone(&running),
            Rc::clone(&clock),
        );
        clock.spawn(
            async move { keep_spares(&*clock2, &ctx, &*net, (&outstanding, &running)).await },
        )
    };
    let behind = Behind::new(
        ctx.plan.behind_lag.as_nanos() as u64,
        ctx.plan.behind_span.as_nanos() as u64,
    );
    let timeout_ns = ctx.plan.timeout.as_nanos() as u64;
    let share = ctx
        .plan
        .params
        .iter()
        .filter(|e| ctx.plan.sends(ctx.worker, e.index));
    let mut dispatcher = Dispatcher::new(share, timeout_ns, STOP_POLL.as_nanos() as u64, behind);
    let waiting = Rc::new(Waiting::default());
    // The dispatcher's clock starts at the epoch (time from it saturates at 0 before it): a
    // worker ready early waits for the epoch, or nothing intended at 0 would be sent early.
    let poll_ns = STOP_POLL.as_nanos() as u64;
    while clock.monotonic_ns() < clock.monotonic_epoch_ns() && !ctx.stop.load(Ordering::Relaxed) {
        let until = clock
            .monotonic_epoch_ns()
            .min(clock.monotonic_ns() + poll_ns);
        clock.sleep_until_monotonic(until).await;
    }
    loop {
        // What the telemetry thread judges a starved worker by: the request it waits to send.
        waiting.schedule(&ctx, dispatcher.waiting_ns());
        let step = dispatcher.step(clock.now_ns(), ctx.stop.load(Ordering::Relaxed));
        if let Some((fired, lag_ns)) = dispatcher.take_fired() {
            let at_ns = clock.now_ns();
            ctx.shared
                .fell_behind(&ctx.sender, &ctx.stop, at_ns, fired, lag_ns);
        }
        let (entry, reached) = match step {
            Step::Done => break,
            // Sleep to the request's own time, waking at least every STOP_POLL to see a
            // stop: a long gap between arrivals never delays the end of a stopped run.
            Step::Wait { until_ns } => {
                clock.sleep_until(until_ns).await;
                continue;
            }
            // Reached at or past its deadline, sending it could only time out at once and
            // blame the target: the client's failure, its own class (SPEC §2). Stopped:
            // never sent, censored by the end of the run.
            Step::Late { entry, reached_ns } => {
                let record = client_late(&ctx, &entry, reached_ns, timeout_ns);
                batch.push_request(&ctx, &entry, record, Default::default());
                continue;
            }
            Step::Stopped { entry, reached_ns } => {
                let record = stopped(&ctx, &entry, reached_ns);
                batch.push_request(&ctx, &entry, record, Default::default());
                continue;
            }
            Step::Send { entry, reached_ns } => (entry, reached_ns),
        };
        sending(&ctx, &batch, &entry, reached);
        outstanding.set(outstanding.get() + 1);
        let session = Session {
            ctx: Rc::clone(&ctx),
            clock: Rc::clone(&clock),
            net: Rc::clone(&net),
            batch: Rc::clone(&batch),
            judge: dispatcher.judge(),
            waiting: Rc::clone(&waiting),
        };
        let outstanding = Rc::clone(&outstanding);
        C::detach(clock.spawn(async move {
            session.run(entry, reached).await;
            outstanding.set(outstanding.get() - 1);
        }));
    }
    waiting.schedule(&ctx, None);
    // Drain: every request ends by its own deadline, so this ends within one timeout.
    while outstanding.get() > 0 {
        clock.sleep(Duration::from_millis(5)).await;
    }
    running.set(false);
    // Dropped, not awaited: a connect it has under way is cancelled with it (the run must not
    // wait for a spare it no longer needs, least of all for a handshake that never ends).
    drop(keeper);
    let _ = flusher.await;
    let _ = ticker.await;
    batch.flush(&ctx);
}

/// One session's task: an open request's session is itself; a closed or semi-open session's
/// task sends each follow-up when its time comes (SPEC §1 "Workload models").
struct Session<C, T> {
    ctx: Rc<WorkerContext>,
    clock: Rc<C>,
    net: Rc<T>,
    batch: Rc<Batch>,
    judge: Rc<RefCell<Judge>>,
    waiting: Rc<Waiting>,
}

impl<C: Clock, T: Transport> Session<C, T> {
    async fn run(&self, entry: Entry, dispatched: u64) {
        let (ctx, clock, net) = (&*self.ctx, &*self.clock, &*self.net);
        let (mut entry, mut dispatched) = (entry, dispatched);
        loop {
            // Boxed: the exchange's state is several KB, and the task that owns it is moved
            // into the executor's slot; a box moves once, a large future three times.
            let (mut record, carried) = Box::pin(execute(ctx, clock, net, entry, dispatched)).await;
            let now = clock.now_ns();
            judge_lateness(ctx, &self.judge, &entry, &mut record, now);
            let terminal_ns = record.terminal_ns;
            if record.dispatched_ns.is_some() {
                net.served(record.terminal_ns.saturating_sub(dispatched) as f64 / 1e9);
            }
            finished(ctx, &self.batch, &entry, record, carried);
            let session = (&*self.batch, &*self.judge, &*self.waiting);
            match next_turn(ctx, clock, session, entry, terminal_ns).await {
                Some((next, reached)) => (entry, dispatched) = (next, reached),
                None => break,
            }
        }
    }
}

/// The production clock: CLOCK_MONOTONIC, with the pacer's sleeps as absolute io_uring
/// timeouts on the worker's own ring.
pub(super) struct Ring {
    pub(super) epoch: Instant,
    pub(super) monotonic_epoch_ns: u64,
}

impl Clock for Ring {
    type Task = compio::runtime::JoinHandle<()>;

    fn monotonic_epoch_ns(&self) -> u64 {
        self.monotonic_epoch_ns
    }

    fn monotonic_ns(&self) -> u64 {
        super::host::monotonic_now_ns()
    }

    fn now_ns(&self) -> u64 {
        super::host::now_ns(self.epoch)
    }

    fn sleep_until_monotonic(&self, ns: u64) -> impl Future<Output = ()> {
        sleep_until_monotonic(ns)
    }

    fn sleep(&self, duration: Duration) -> impl Future<Output = ()> {
        compio::time::sleep(duration)
    }

    async fn within<F: Future>(&self, deadline_ns: u64, work: F) -> Option<F::Output> {
        let deadline = self.epoch + Duration::from_nanos(deadline_ns);
        compio::time::timeout_at(deadline, work).await.ok()
    }

    fn spawn<F: Future<Output = ()> + 'static>(&self, task: F) -> Self::Task {
        compio::runtime::spawn(task)
    }

    fn detach(task: Self::Task) {
        task.detach();
    }
}

/// The production transport: the worker's connection pool and the HTTP/1.1 and HTTP/2 client
/// over compio's sockets.
pub(super) struct Wire {
    pub(super) local: Local,
}

impl Transport for Wire {
    async fn warm(&self, ctx: &WorkerContext) {
        use std::sync::atomic::Ordering;
        for _ in 0..ctx.plan.connections_per_worker {
            if ctx.stop.load(Ordering::Relaxed) || Instant::now() >= ctx.epoch {
                break;
            }
            if let Ok((conn, fd)) = ctx.dialer.open(ctx.epoch, Some(ctx.epoch), None).await {
                if self.local.pool_opened(ctx, conn, fd).await {
                    ctx.shared.pool.opened_ahead.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
    }

    fn retire_expired(&self, shared: &Shared, ahead: Duration) {
        self.local.retire_expired(shared, ahead);
    }

    fn idle_capacity(&self) -> usize {
        self.local.idle_capacity()
    }

    fn service_s(&self) -> Option<f64> {
        self.local.service_s.get()
    }

    async fn open_spare(&self, ctx: &WorkerContext, deadline_ns: u64) -> Result<bool, ()> {
        let deadline = ctx.epoch + Duration::from_nanos(deadline_ns);
        match ctx.dialer.open(ctx.epoch, Some(deadline), None).await {
            Ok((conn, fd)) => Ok(self.local.pool_opened(ctx, conn, fd).await),
            Err(_) => Err(()),
        }
    }

    fn rule(&self, route: u32) -> Rc<Rule> {
        Rc::clone(&self.local.rules[route as usize])
    }

    fn talk(
        &self,
        ctx: &WorkerContext,
        entry: &Entry,
        record: &mut RequestRecord,
        exchange: &mut Exchange,
        carried: &mut http2::Carried,
    ) -> impl Future<Output = Verdict> {
        talk(ctx, &self.local, entry, record, exchange, carried)
    }

    fn served(&self, seconds: f64) {
        self.local.served(seconds);
    }
}

/// The intended times a worker waits to send at: the schedule's next request's and every
/// follow-up its sessions sleep to (SPEC §1 "Workload models"). Their earliest is what the
/// telemetry thread judges a starved worker by (`Shared::waiting_ns`), so a closed run's worker
/// that cannot wake is seen as one whose schedule is done would not be.
#[derive(Default)]
pub(super) struct Waiting {
    schedule: Cell<Option<u64>>,
    follow_ups: RefCell<std::collections::BTreeMap<u64, u32>>,
}

impl Waiting {
    /// The schedule's next request is now at `at` (`None`: none left).
    pub(super) fn schedule(&self, ctx: &WorkerContext, at: Option<u64>) {
        self.schedule.set(at);
        self.publish(ctx);
    }

    /// A session starts (`waits`) or stops waiting for a follow-up at `at`.
    pub(super) fn follow_up(&self, ctx: &WorkerContext, at: u64, waits: bool) {
        self.note(at, waits);
        self.publish(ctx);
    }

    fn note(&self, at: u64, waits: bool) {
        let mut follow_ups = self.follow_ups.borrow_mut();
        if waits {
            *follow_ups.entry(at).or_insert(0) += 1;
        } else if let Some(n) = follow_ups.get_mut(&at) {
            *n -= 1;
            if *n == 0 {
                follow_ups.remove(&at);
            }
        }
    }

    /// The earliest intended time waited for, `u64::MAX` when none.
    pub(super) fn earliest(&self) -> u64 {
        let follow_up = self.follow_ups.borrow().keys().next().copied();
        match (self.schedule.get(), follow_up) {
            (Some(a), Some(b)) => a.min(b),
            (a, b) => a.or(b).unwrap_or(u64::MAX),
        }
    }

    fn publish(&self, ctx: &WorkerContext) {
        ctx.shared.waiting_ns[ctx.worker].store(self.earliest(), Ordering::Relaxed);
    }
}

/// A request is being sent: its send skew, and the counters.
fn sending(ctx: &WorkerContext, batch: &Batch, entry: &Entry, reached_ns: u64) {
    batch
        .skew_ns
        .borrow_mut()
        .push(reached_ns.saturating_sub(entry.intended_ns));
    ctx.shared.requests.sent.fetch_add(1, Ordering::Relaxed);
    ctx.shared
        .requests
        .in_flight
        .fetch_add(1, Ordering::Relaxed);
}

/// A sent request's exchange is over: its outcome in the counters, its record in the batch.
fn finished(
    ctx: &WorkerContext,
    batch: &Batch,
    entry: &Entry,
    record: RequestRecord,
    carried: (http2::Carried, Option<StreamRecord>),
) {
    let counter = match Outcome::from_byte(record.outcome) {
        Some(Outcome::Completed) => &ctx.shared.requests.completed,
        Some(Outcome::Errored) => &ctx.shared.requests.errored,
        Some(Outcome::Censored) => &ctx.shared.requests.censored,
        _ => &ctx.shared.requests.undispatched,
    };
    counter.fetch_add(1, Ordering::Relaxed);
    ctx.shared.tally(&record);
    ctx.shared
        .requests
        .in_flight
        .fetch_sub(1, Ordering::Relaxed);
    batch.push_request(ctx, entry, record, carried);
}

/// The next request of `previous`'s session under a closed or semi-open workload (SPEC §1
/// "Workload models"), once `previous` ended at `terminal_ns`: waited for until its intended
/// time (never early, the stop seen within [`STOP_POLL`]) and judged as the schedule's own
/// requests are. Returned when it is to be sent; a follow-up reached past its deadline is
/// recorded `client-late` and the session goes on from that deadline; a stopped run issues no
/// more, and records the one it had numbered as stopped. `None`: the session is over.
async fn next_turn(
    ctx: &WorkerContext,
    clock: &impl Clock,
    (batch, judge, waiting): (&Batch, &RefCell<Judge>, &Waiting),
    previous: Entry,
    terminal_ns: u64,
) -> Option<(Entry, u64)> {
    let (mut previous, mut terminal_ns) = (previous, terminal_ns);
    loop {
        if ctx.stop.load(Ordering::Relaxed) {
            return None;
        }
        let next = ctx.plan.params.follow_up(&previous, terminal_ns, || {
            ctx.plan.requests
                + ctx
                    .shared
                    .requests
                    .follow_ups
                    .fetch_add(1, Ordering::Relaxed)
        })?;
        let poll = STOP_POLL.as_nanos() as u64;
        // What the telemetry thread judges a starved worker by, as the schedule's own requests.
        waiting.follow_up(ctx, next.intended_ns, true);
        loop {
            let now = clock.now_ns();
            if now >= next.intended_ns || ctx.stop.load(Ordering::Relaxed) {
                break;
            }
            clock.sleep_until(next.intended_ns.min(now + poll)).await;
        }
        waiting.follow_up(ctx, next.intended_ns, false);
        let step =
            judge
                .borrow_mut()
                .reached(next, clock.now_ns(), ctx.stop.load(Ordering::Relaxed));
        if let Some((fired, lag_ns)) = judge.borrow_mut().take_fired() {
            let at_ns = clock.now_ns();
            ctx.shared
                .fell_behind(&ctx.sender, &ctx.stop, at_ns, fired, lag_ns);
        }
        match step {
            Step::Send { entry, reached_ns } => {
                sending(ctx, batch, &entry, reached_ns);
                return Some((entry, reached_ns));
            }
            Step::Late { entry, reached_ns } => {
                let timeout_ns = ctx.plan.timeout.as_nanos() as u64;
                let record = client_late(ctx, &entry, reached_ns, timeout_ns);
                terminal_ns = record.terminal_ns;
                batch.push_request(ctx, &entry, record, Default::default());
                previous = entry;
            }
            Step::Stopped { entry, reached_ns } => {
                let record = stopped(ctx, &entry, reached_ns);
                batch.push_request(ctx, &entry, record, Default::default());
                return None;
            }
            Step::Wait { .. } | Step::Done => return None,
        }
    }
}

/// The record of a request its worker reached only at or past its deadline (intended time plus
/// the client timeout): never sent, `undispatched` with class `client-late`, its terminal the
/// deadline, so no terminal time is ever past intended plus the timeout (SPEC §2, §3).
pub(super) fn client_late(
    ctx: &WorkerContext,
    entry: &Entry,
    reached_ns: u64,
    timeout_ns: u64,
) -> RequestRecord {
    let mut record = blank(entry);
    record.outcome = Outcome::Undispatched as u8;
    record.class = class_code("client-late").expect("defined");
    record.terminal_ns = entry.intended_ns + timeout_ns;
    record.detail = format!(
        "the recorder reached this request {:.3} s after its intended time, past its deadline ({:.3} s): never sent; the client fell behind, not the target (SPEC §2)",
        reached_ns.saturating_sub(entry.intended_ns) as f64 / 1e9,
        timeout_ns as f64 / 1e9
    );
    ctx.shared
        .requests
        .undispatched
        .fetch_add(1, Ordering::Relaxed);
    ctx.shared.tally(&record);
    record
}

/// What of a finished request's lateness is the client's (SPEC §2 "The client's lateness is the
/// client's"): a request whose connect or send began `client.behind_lag_ms` or more after its
/// intended time (the fall-behind policy hears of it too), or a `timeout` whose deadline (an
/// `abandoned` request whose instant) the recorder saw pass that long after it (its worker or
/// its whole process was not running), is the client's, whatever happened next ([`clients_lateness`]). `now_ns` is when the recorder
/// saw the request end.
fn judge_lateness(
    ctx: &WorkerContext,
    judge: &RefCell<Judge>,
    entry: &Entry,
    record: &mut RequestRecord,
    now_ns: u64,
) {
    let timeout_ns = ctx.plan.timeout.as_nanos() as u64;
    let stopped = ctx.stop.load(Ordering::Relaxed);
    if let Some(out_ns) = record.connect_start_ns.max(record.dispatched_ns) {
        if judge
            .borrow_mut()
            .went_out(entry.intended_ns, out_ns, stopped)
        {
            let began = format!(
                "the recorder began this request {:.3} s after its intended time (its connect or send; client.behind_lag_ms)",
                out_ns.saturating_sub(entry.intended_ns) as f64 / 1e9
            );
            return clients_lateness(record, timeout_ns, &began);
        }
    }
    // A timeout's deadline, or an abandonment's instant (SPEC §1 "Abandonment": its terminal),
    // that the recorder saw pass long after it: the close happened then, not at the instant.
    let (instant, what) = match percentes_formats::journal::records::class_name(record.class) {
        Some("timeout") => (entry.intended_ns.saturating_add(timeout_ns), "deadline"),
        Some("abandoned") => (record.terminal_ns, "abandonment instant"),
        _ => return,
    };
    let seen_late = now_ns.saturating_sub(instant);
    if seen_late >= ctx.plan.behind_lag.as_nanos() as u64 {
        let seen = format!(
            "the recorder saw this request's {what} pass only {:.3} s after it (its worker or its process was not running: starved, throttled or stopped; client.behind_lag_ms)",
            seen_late as f64 / 1e9
        );
        clients_lateness(record, timeout_ns, &seen);
    }
}

/// Makes `record` the client's lateness, `why` saying how late the client was: `undispatched`,
/// class `client-late`, its stamps kept as the evidence, its terminal no later than its deadline
/// (intended time plus the timeout), and, after `then: `, the class and detail it would
/// otherwise have had.
pub(super) fn clients_lateness(record: &mut RequestRecord, timeout_ns: u64, why: &str) {
    let then =
        percentes_formats::journal::records::class_name(record.class).unwrap_or("unknown class");
    let detail = format!(
        "{why}: the client's lateness, not the target's (SPEC §2); then: {then}{}",
        if record.detail.is_empty() {
            String::new()
        } else {
            format!(", {}", record.detail)
        }
    );
    record.outcome = Outcome::Undispatched as u8;
    record.class = class_code("client-late").expect("defined");
    record.terminal_ns = record
        .terminal_ns
        .min(record.intended_ns.saturating_add(timeout_ns));
    record.detail =
        percentes_response::exchange::cut(&detail, percentes_response::exchange::DETAIL_BYTES_MAX)
            .to_owned();
}

/// The record of a request the run stopped before it was sent: censored, class `run-end`, its
/// terminal the moment its worker reached it (before its deadline).
fn stopped(ctx: &WorkerContext, entry: &Entry, reached_ns: u64) -> RequestRecord {
    let mut record = blank(entry);
    record.outcome = Outcome::Censored as u8;
    record.class = class_code("run-end").expect("defined");
    record.terminal_ns = reached_ns;
    record.detail = if reached_ns > entry.intended_ns {
        format!(
            "the run was stopped {:.3} s after this request's intended time, before it was sent",
            (reached_ns - entry.intended_ns) as f64 / 1e9
        )
    } else {
        "the run was stopped before this request's intended time".into()
    };
    ctx.shared.requests.censored.fetch_add(1, Ordering::Relaxed);
    ctx.shared.requests.not_sent.fetch_add(1, Ordering::Relaxed);
    record
}

/// The worker's stall ticker (SPEC §2 "Runtime stall"): sleeps on the worker's own ring to
/// absolute deadlines [`STALL_TICK`] apart and records each wake's lateness, with the ticks a
/// late wake stood in for ([`tick_lateness`](super::dispatch::tick_lateness)), in the worker's batch.
async fn stall_ticks(clock: &impl Clock, batch: &Batch, running: &Cell<bool>) {
    let mut ticker = StallTicker::new(clock.monotonic_ns(), STALL_TICK.as_nanos() as u64);
    while running.get() {
        clock.sleep_until_monotonic(ticker.deadline_ns()).await;
        let lateness = ticker.woke(clock.monotonic_ns());
        batch.stall_ns.borrow_mut().extend(lateness);
    }
}

/// The spare keeper (issue 20, SPEC §2): from the epoch to the end of the schedule, it opens
/// connections ahead of need so that a request at a steady rate finds an idle one instead of
/// waiting for a connect, which would be in its send skew. It sizes the pool by
/// [`spare_wanted`](super::dispatch::spare_wanted) from the current phase's rate, the worker's mean service time and what it
/// has in flight; it opens one connection at a time, each within [`KEEPER_CONNECT_MAX`], and after
/// a failed connect waits a second before it tries again (the request that needs a connection
/// then opens its own, and that wait is journaled). Connections it opens count as `opened ahead`.
/// It runs on any [`Clock`] over any [`Transport`]'s pool: the worker's real one in a recording,
/// the simulated one in the tests (`sim/keeper_tests.rs`).
pub(super) async fn keep_spares<C: Clock, T: Transport>(
    clock: &C,
    ctx: &WorkerContext,
    pool: &T,
    (outstanding, running): (&Cell<usize>, &Cell<bool>),
) {
    let keeper = Keeper::new(&ctx.plan);
    let end_ns = ctx.plan.params.total_duration_ns();
    let connect_max_ns = KEEPER_CONNECT_MAX.as_nanos() as u64;
    while running.get() && !ctx.stop.load(Ordering::Relaxed) && clock.now_ns() < end_ns {
        clock.sleep(KEEPER_INTERVAL).await;
        pool.retire_expired(&ctx.shared, KEEPER_AHEAD);
        let mut wanted = keeper.wanted(
            clock.now_ns(),
            pool.service_s(),
            outstanding.get(),
            pool.idle_capacity(),
        );
        while wanted > 0 && running.get() && !ctx.stop.load(Ordering::Relaxed) {
            // A spare is never worth more than a second's connect, nor one past the schedule.
            let deadline_ns = (clock.now_ns() + connect_max_ns).min(end_ns);
            match pool.open_spare(ctx, deadline_ns).await {
                Ok(pooled) => {
                    if pooled {
                        ctx.shared.pool.opened_ahead.fetch_add(1, Ordering::Relaxed);
                    }
                    wanted -= 1;
                }
                Err(()) => {
                    clock.sleep(Duration::from_secs(1)).await;
                    break;
                }
            }
        }
    }
}

/// The longest the spare keeper waits for one connect (a request's own connect keeps the pinned
/// budget; a spare that takes longer is not worth holding the keeper for).
pub const KEEPER_CONNECT_MAX: Duration = Duration::from_secs(1);

/// How often a worker hands its finished records and skew samples over.
pub const BATCH_INTERVAL: Duration = Duration::from_millis(5);
/// A worker hands its records over at once when this many are waiting.
pub const BATCH_RECORDS_MAX: usize = 256;

/// A worker's finished records, skew and stall samples, waiting to be handed over in one piece.
#[derive(Default)]
pub(super) struct Batch {
    pub(super) records: RefCell<Vec<Record>>,
    pub(super) skew_ns: RefCell<Vec<u64>>,
    /// The worker's stall ticks' lateness, ns ([`stall_ticks`]).
    pub(super) stall_ns: RefCell<Vec<u64>>,
    /// TTFT of the completed requests among them, for the live view.
    pub(super) ttft_ns: RefCell<Vec<u64>>,
}

impl Batch {
    /// A request's record, after its kind-6 extension when it has one: the lengths it asked
    /// for (SPEC §P "Token lengths") and how it was carried (SPEC §2 "HTTP/2").
    pub(super) fn push_request(
        &self,
        ctx: &WorkerContext,
        entry: &Entry,
        mut record: RequestRecord,
        (carried, stream): (http2::Carried, Option<StreamRecord>),
    ) {
        // What the server sent back, before it is journaled: no secret the request carried.
        use percentes_response::exchange::{DETAIL_BYTES_MAX, REPLICA_BYTES_MAX};
        ctx.secrets.scrub(&mut record.replica, REPLICA_BYTES_MAX);
        ctx.secrets.scrub(&mut record.detail, DETAIL_BYTES_MAX);
        let template = &ctx.templates[record.route as usize];
        let content = ctx.plan.params.content(entry);
        let mut extension = template.extension_for(record.index, content).unwrap_or(
            percentes_formats::journal::records::RequestExtension {
                index: record.index,
                fields: Vec::new(),
            },
        );
        extension.fields.extend(carried.fields());
        // A follow-up names its session and turn (JOURNAL.md kind 6): what the analyzer checks
        // its intended time against.
        if entry.turn > 0 {
            use percentes_formats::journal::records::ExtensionKey;
            extension
                .fields
                .push((ExtensionKey::Session as u16, entry.session));
            extension
                .fields
                .push((ExtensionKey::Turn as u16, u64::from(entry.turn)));
        }
        if !extension.fields.is_empty() {
            self.push(ctx, Record::RequestExtension(extension));
        }
        // As the analyzer reads TTFT (A4): the first generated delta of any kind (the body,
        // when not streamed) minus the intended time, completed requests only.
        if record.outcome == Outcome::Completed as u8 {
            let first = stream
                .as_ref()
                .and_then(StreamRecord::first_ns)
                .or(record.first_content_ns)
                .unwrap_or(record.terminal_ns);
            self.ttft_ns
                .borrow_mut()
                .push(first.saturating_sub(record.intended_ns));
        }
        if let Some(stream) = stream {
            self.push(ctx, Record::Stream(stream));
        }
        self.push(ctx, Record::Request(record));
    }

    pub(super) fn push(&self, ctx: &WorkerContext, record: Record) {
        let full = {
            let mut records = self.records.borrow_mut();
            records.push(record);
            records.len() >= BATCH_RECORDS_MAX
        };
        if full {
            self.flush(ctx);
        }
    }

    pub(super) fn flush(&self, ctx: &WorkerContext) {
        let records = std::mem::take(&mut *self.records.borrow_mut());
        ctx.sender.send_batch(records);
        let skews = std::mem::take(&mut *self.skew_ns.borrow_mut());
        if !skews.is_empty() {
            ctx.shared
                .samples
                .skew_ns
                .lock()
                .expect("skew lock")
                .extend(skews);
        }
        let stall = std::mem::take(&mut *self.stall_ns.borrow_mut());
        if !stall.is_empty() {
            ctx.shared
                .samples
                .stall_ns
                .lock()
                .expect("stall lock")
                .extend(stall);
        }
        let ttft = std::mem::take(&mut *self.ttft_ns.borrow_mut());
        if !ttft.is_empty() {
            ctx.shared
                .samples
                .ttft_ns
                .lock()
                .expect("ttft lock")
                .extend(ttft);
        }
    }
}

/// An io_uring timeout to an absolute CLOCK_MONOTONIC deadline (`IORING_TIMEOUT_ABS`): the
/// pacer's sleep. compio's own `sleep_until` hands the runtime's nearest timer to the ring wait
/// as a relative timeout, and when that wait times out compio (0.12 driver) leaves its awake flag
/// unset, so the timer's wake-up writes the runtime's eventfd and a later turn reads it back: two
/// system calls and a completion for every request the pacer wakes for (BENCHMARKS.md). A
/// timeout operation completes like any other, with none of that.
struct AbsoluteTimeout {
    at: io_uring::types::Timespec,
}

// SAFETY: the entry points at `self.at`, which compio keeps in place (the operation is heap
// allocated and pinned by the runtime) until the kernel has completed or cancelled it.
#[allow(unsafe_code)]
unsafe impl compio::driver::OpCode for AbsoluteTimeout {
    type Control = ();

    fn create_entry(&mut self, _: &mut ()) -> compio::driver::OpEntry {
        io_uring::opcode::Timeout::new(&self.at)
            .flags(io_uring::types::TimeoutFlags::ABS)
            .build()
            .into()
    }
}

/// Sleeps until CLOCK_MONOTONIC reads `ns` (at once if it has passed). The timeout's -ETIME is
/// its normal end; any other error (an old kernel) falls back to the runtime's own timer.
pub(super) async fn sleep_until_monotonic(ns: u64) {
    let at = io_uring::types::Timespec::new()
        .sec(ns / 1_000_000_000)
        .nsec((ns % 1_000_000_000) as u32);
    let compio::BufResult(result, _) = compio::runtime::submit(AbsoluteTimeout { at }).await;
    match result {
        Ok(_) => {}
        Err(e) if e.raw_os_error() == Some(libc::ETIME) => {}
        Err(_) => {
            let now = super::host::monotonic_now_ns();
            compio::time::sleep(Duration::from_nanos(ns.saturating_sub(now))).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_io_uring_says_what_refused_it_and_what_to_do() {
        let seccomp = io_uring_refusal(&std::io::Error::from_raw_os_error(libc::EPERM));
        assert!(
            seccomp.contains("seccomp") && seccomp.contains("deploy/seccomp-io-uring.json"),
            "{seccomp}"
        );
        let missing = io_uring_refusal(&std::io::Error::from_raw_os_error(libc::ENOSYS));
        assert!(missing.contains("built without io_uring"), "{missing}");
        assert!(
            io_uring_refusal(&std::io::Error::from_raw_os_error(libc::EINVAL)).contains("failed")
        );
        // On this machine io_uring works, and the check passes.
        io_uring_usable().unwrap();
    }

    /// The pacer's kernel timeout never ends before its absolute deadline, on either ring setup,
    /// and a deadline already past returns (the pacer then sends at once). Without
    /// `TimeoutFlags::ABS` the kernel would read the deadline as a relative wait as long as the
    /// machine's uptime, and the first wait would not end.
    #[test]
    fn the_absolute_timeout_wakes_at_its_deadline_never_before() {
        for deferred in [false, deferred_task_work_available()] {
            let runtime = compio::runtime::Runtime::builder()
                .with_proactor(ring_setup(deferred))
                .build()
                .unwrap();
            runtime.block_on(async {
                for ahead_us in [0u64, 300, 2_000] {
                    let deadline = super::super::host::monotonic_now_ns() + ahead_us * 1_000;
                    sleep_until_monotonic(deadline).await;
                    let woke = super::super::host::monotonic_now_ns();
                    assert!(woke >= deadline, "woke {} ns early", deadline - woke);
                }
                let past = super::super::host::monotonic_now_ns() - 1_000_000;
                sleep_until_monotonic(past).await;
            });
        }
    }

    /// Hand-checked: the earliest of the schedule's next time and every follow-up waited for;
    /// two sessions waiting at one time count twice; nothing waited for reads as `u64::MAX`.
    #[test]
    fn a_worker_waits_for_its_earliest_request_schedule_or_follow_up() {
        let w = Waiting::default();
        assert_eq!(w.earliest(), u64::MAX);
        w.schedule.set(Some(500));
        w.note(300, true);
        w.note(300, true);
        w.note(700, true);
        assert_eq!(w.earliest(), 300);
        w.note(300, false);
        assert_eq!(w.earliest(), 300, "the other session still waits at 300");
        w.note(300, false);
        assert_eq!(w.earliest(), 500);
        w.schedule.set(None);
        assert_eq!(w.earliest(), 700);
        w.note(700, false);
        assert_eq!(w.earliest(), u64::MAX);
    }

    /// Issue 50: a request whose connect began 4.46 s late and then hit the connect budget was
    /// journaled `connect`, the target's failure. It is `client-late`, the client's, with the
    /// evidence kept and what happened next in its detail; its terminal is within its deadline.
    #[test]
    fn a_request_that_went_out_late_is_the_clients_whatever_happened_next() {
        use percentes_formats::journal::records::class_name;
        let entry = Entry {
            index: 7,
            intended_ns: 1_000_000_000,
            route: 0,
            phase: 0,
            session: 7,
            turn: 0,
        };
        let mut record = blank(&entry);
        record.class = class_code("connect").unwrap();
        record.dispatched_ns = Some(1_000_100_000);
        record.connect_start_ns = Some(5_460_000_000);
        record.terminal_ns = 15_460_000_000;
        record.detail = "the TCP connect took longer than 10s".into();
        clients_lateness(
            &mut record,
            3_000_000_000,
            "the recorder began this request 4.460 s after its intended time (its connect or send; client.behind_lag_ms)",
        );
        assert_eq!(class_name(record.class), Some("client-late"));
        assert_eq!(record.outcome, Outcome::Undispatched as u8);
        assert_eq!(
            record.terminal_ns, 4_000_000_000,
            "the deadline: intended plus timeout"
        );
        assert_eq!(
            record.connect_start_ns,
            Some(5_460_000_000),
            "the evidence stays"
        );
        assert!(
            record
                .detail
                .starts_with("the recorder began this request 4.460 s after its intended time")
                && record
                    .detail
                    .ends_with("then: connect, the TCP connect took longer than 10s"),
            "{}",
            record.detail
        );
    }
}
