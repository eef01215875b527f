//! The recorder's production worker loop on simulated time and a simulated target (issue 51
//! item 2; tests only). [`World::run`] runs `pacer::run_worker` itself (the dispatcher and its
//! judges, the session tasks, `client::execute`'s deadline and record assembly, the stall
//! ticker, the batch flusher, the counters) on a virtual [`Clock`](super::ground::Clock)
//! (`exec.rs`), with the telemetry thread's judgement of a starved worker
//! (`telemetry::judge_starved`) at each of its once-a-second looks. Only the ring, the kernel's
//! timers and the network are stood in for: [`Net`] answers each request from a scripted
//! [`Target`] with the bytes a server would send, through the production HTTP/1.1 parser and
//! [`Exchange`], so every class is the one a recording would give.
//!
//! A plan drawn from a seed (`tests.rs`) mixes the faults (a starved or stopped worker,
//! a CPU the client cannot keep up on, a target with few slots, one that starts late, drops SYNs,
//! resets, holds its heads, goes silent); a failing seed prints itself and reruns identically
//! under `PERCENTES_SIM_SEED`.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{sync_channel, Receiver};
use std::sync::Arc;
use std::time::{Duration, Instant};

use percentes_formats::config::Config;
use percentes_formats::journal::records::{
    class_name, EventKind, Outcome, Record, RequestRecord, CLIENT_BEHIND,
};
use percentes_formats::schedule::Entry;

use super::behind::Behind;
use super::connect::{connect_verdict, transport_verdict, Dialer};
use super::context::WorkerContext;
use super::dispatch::StallPool;
use super::ground::{Clock, Transport};
use super::http2::Carried;
use super::pacer::run_worker;
use super::plan::RunPlan;
use super::plan::EPOCH_LEAD;
use super::setup::templates;
use super::state::{Sender, Shared, ToWriter};
use super::telemetry::judge_starved;
use crate::exchange::{Exchange, Rule, Verdict};
use crate::http1;
use crate::request::{ExtraHeaders, Target as Url};

mod exec;
mod pool;

use exec::{Core, SimClock};
pub(super) use exec::{Freezes, Stalls};

pub(super) const MS: u64 = 1_000_000;
pub(super) const S: u64 = 1_000 * MS;

/// How the simulated target behaves. Times are ns from the epoch.
#[derive(Clone, Debug)]
pub(super) struct Target {
    /// Requests it serves at once; more wait for a slot in arrival order (`None`: no limit).
    pub(super) slots: Option<usize>,
    /// From the start of service to the response head.
    pub(super) head_ns: u64,
    /// From the start of service to the first token.
    pub(super) ttft_ns: u64,
    /// Between tokens.
    pub(super) tpot_ns: u64,
    /// Tokens an answer has.
    pub(super) tokens: u32,
    /// A TCP connect's time.
    pub(super) connect_ns: u64,
    /// Connects are refused before this time (a target that starts late).
    pub(super) up_ns: u64,
    /// SYNs sent in `[start, end)` are dropped; the connect completes after the window, at
    /// the first retransmission past it.
    pub(super) syn_drop: Option<(u64, u64)>,
    /// It accepts and reads requests written in `[start, end)` and never answers them.
    pub(super) silent: Option<(u64, u64)>,
    /// Every n-th request (by index) is reset after its head.
    pub(super) reset_every: Option<u64>,
    /// A finished answer leaves its connection open for the next request (else each request
    /// connects: `Connection: close`).
    pub(super) keep_alive: bool,
}

impl Default for Target {
    fn default() -> Target {
        Target {
            slots: None,
            head_ns: 2 * MS,
            ttft_ns: 20 * MS,
            tpot_ns: 10 * MS,
            tokens: 4,
            connect_ns: 100_000,
            up_ns: 0,
            syn_drop: None,
            silent: None,
            reset_every: None,
            keep_alive: true,
        }
    }
}

/// What the target does with one request written at `written_ns`.
enum Reply {
    /// Head at the first time, each token at the next ones, the end at the last.
    Answer {
        head: u64,
        tokens: Vec<u64>,
        end: u64,
    },
    /// The head, then a reset.
    Reset { head: u64 },
    /// Nothing, ever.
    Silent,
}

/// The simulated transport: connections (idle ones from the warm pool or a finished request,
/// others connected in line at the target's connect time) to the scripted [`Target`].
pub(super) struct Net {
    clock: SimClock,
    target: Target,
    model: String,
    /// When each of the target's slots is next free.
    slots: RefCell<Vec<u64>>,
    idle: Cell<usize>,
    next_id: Cell<u64>,
    rules: Vec<Rc<Rule>>,
}

impl Net {
    fn serve(&self, entry: &Entry, written: u64) -> Reply {
        let t = &self.target;
        if t.silent.is_some_and(|(a, b)| (a..b).contains(&written)) {
            return Reply::Silent;
        }
        let start = match t.slots {
            None => written,
            Some(_) => {
                let mut slots = self.slots.borrow_mut();
                let (i, &free) = slots
                    .iter()
                    .enumerate()
                    .min_by_key(|&(_, &f)| f)
                    .expect("a slot");
                let start = free.max(written);
                slots[i] = start + t.ttft_ns + t.tpot_ns * u64::from(t.tokens.saturating_sub(1));
                start
            }
        };
        let head = written.max(start + t.head_ns.min(t.ttft_ns));
        if t.reset_every
            .is_some_and(|n| n > 0 && entry.index % n == n - 1)
        {
            return Reply::Reset { head };
        }
        let tokens: Vec<u64> = (0..u64::from(t.tokens))
            .map(|k| start + t.ttft_ns + k * t.tpot_ns)
            .collect();
        let end = tokens.last().copied().unwrap_or(head);
        Reply::Answer { head, tokens, end }
    }

    /// The bytes of a streamed chat answer's head, its `k`-th token's event, and its end, as a
    /// chunked HTTP/1.1 response.
    fn head_bytes() -> Vec<u8> {
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
            .to_vec()
    }

    fn chunk(text: &str) -> Vec<u8> {
        format!("{:x}\r\n{text}\r\n", text.len()).into_bytes()
    }

    fn token_bytes(&self, index: u64, k: u32, last: bool) -> Vec<u8> {
        let role = if k == 0 { r#""role":"assistant","# } else { "" };
        let finish = if last { r#""stop""# } else { "null" };
        Net::chunk(&format!(
            "data: {{\"id\":\"cmpl-{index}\",\"object\":\"chat.completion.chunk\",\"created\":0,\"model\":\"{}\",\"choices\":[{{\"index\":0,\"delta\":{{{role}\"content\":\"t{k} \"}},\"finish_reason\":{finish}}}]}}\n\n",
            self.model
        ))
    }

    fn end_bytes(&self, index: u64, tokens: u32) -> Vec<u8> {
        let mut out = Net::chunk(&format!(
            "data: {{\"id\":\"cmpl-{index}\",\"object\":\"chat.completion.chunk\",\"created\":0,\"model\":\"{}\",\"choices\":[],\"usage\":{{\"prompt_tokens\":8,\"completion_tokens\":{tokens},\"total_tokens\":{}}}}}\n\n",
            self.model,
            8 + tokens
        ));
        out.extend(Net::chunk("data: [DONE]\n\n"));
        out.extend(b"0\r\n\r\n");
        out
    }

    /// Hands `deliveries` (each at its time) to the production parser and `exchange`, as the
    /// client's reads would: the verdict once the answer ends, breaks, or its fate is known.
    async fn deliver(
        &self,
        deliveries: Vec<(u64, Vec<u8>)>,
        record: &mut RequestRecord,
        exchange: &mut Exchange,
    ) -> Verdict {
        let mut parser = http1::Parser::default();
        let mut events = Vec::new();
        for (at, bytes) in deliveries {
            self.clock.sleep_until(at).await;
            let now = self.clock.now_ns();
            record.bytes_received += bytes.len() as u64;
            parser.read(&bytes, &mut events);
            let mut ended = false;
            for event in events.drain(..) {
                ended |= event == http1::Event::End;
                exchange.on_http(event, now);
            }
            if exchange.decided().is_some() {
                return exchange.finish(false, None, now);
            }
            if ended {
                if self.target.keep_alive {
                    self.idle.set(self.idle.get() + 1);
                }
                return exchange.finish(true, None, now);
            }
        }
        exchange.finish(false, None, self.clock.now_ns())
    }

    /// The connect of a request that found no idle connection, begun at `now`: its verdict
    /// when it fails, else when it completes.
    fn connect(&self, now: u64) -> Result<u64, Verdict> {
        let t = &self.target;
        if now < t.up_ns {
            return Err(connect_verdict(&std::io::Error::from_raw_os_error(
                libc::ECONNREFUSED,
            )));
        }
        let mut syn = now;
        if let Some((a, b)) = t.syn_drop {
            // Linux retransmits a SYN after 1 s, then 2 s, 4 s, ...
            let mut wait = S;
            while (a..b).contains(&syn) {
                syn += wait;
                wait *= 2;
            }
        }
        Ok(syn + t.connect_ns)
    }
}

impl Transport for Net {
    async fn warm(&self, ctx: &WorkerContext) {
        for _ in 0..ctx.plan.connections_per_worker {
            let now = self.clock.monotonic_ns();
            if ctx.stop.load(Ordering::Relaxed) || now >= self.clock.monotonic_epoch_ns() {
                break;
            }
            // Before the epoch the target's times (its start, a SYN-drop window) read as 0.
            let Ok(done) = self.connect(0) else {
                break;
            };
            self.clock.sleep(Duration::from_nanos(done)).await;
            self.idle.set(self.idle.get() + 1);
            ctx.shared.pool.opened_ahead.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// The simulated transport keeps no spares beyond its warm pool: a request that finds none
    /// connects in line. The keeper's decisions are simulated on their own ([`PoolWorld`]).
    async fn keep_spares(&self, _: &WorkerContext, _: &Cell<usize>, _: &Cell<bool>) {}

    fn rule(&self, route: u32) -> Rc<Rule> {
        Rc::clone(&self.rules[route as usize])
    }

    async fn talk(
        &self,
        ctx: &WorkerContext,
        entry: &Entry,
        record: &mut RequestRecord,
        exchange: &mut Exchange,
        _: &mut Carried,
    ) -> Verdict {
        let clock = &self.clock;
        let id = self.next_id.get();
        if self.idle.get() > 0 {
            self.idle.set(self.idle.get() - 1);
            record.connection_reused = id >= ctx.plan.connections_per_worker as u64;
        } else {
            let now = clock.now_ns();
            record.connect_start_ns = Some(now);
            match self.connect(now) {
                Ok(done) => clock.sleep_until(done).await,
                Err(verdict) => {
                    record.terminal_ns = clock.now_ns();
                    return verdict;
                }
            }
            record.connect_end_ns = Some(clock.now_ns());
        }
        self.next_id.set(id + 1);
        record.connection_id = id;
        let template = &ctx.templates[entry.route as usize];
        record.bytes_sent = template.bytes_of(entry, &ctx.plan.params).len() as u64;
        let written = clock.now_ns();
        record.request_written_ns = Some(written);
        let (head, tokens, end) = match self.serve(entry, written) {
            Reply::Silent => {
                // Nothing comes: the caller's deadline ends the wait.
                std::future::pending::<()>().await;
                unreachable!("a pending future never ends")
            }
            Reply::Reset { head } => {
                clock.sleep_until(head).await;
                let reset = std::io::Error::from_raw_os_error(libc::ECONNRESET);
                return exchange.finish(false, Some(transport_verdict(&reset)), clock.now_ns());
            }
            Reply::Answer { head, tokens, end } => (head, tokens, end),
        };
        let last = tokens.len().saturating_sub(1);
        let mut deliveries = vec![(head, Net::head_bytes())];
        for (k, &at) in tokens.iter().enumerate() {
            deliveries.push((at, self.token_bytes(entry.index, k as u32, k == last)));
        }
        deliveries.push((end, self.end_bytes(entry.index, tokens.len() as u32)));
        self.deliver(deliveries, record, exchange).await
    }

    fn served(&self, _: f64) {}
}

/// The world a simulated run happens in.
#[derive(Clone, Debug)]
pub(super) struct World {
    /// The schedule's rate, requests a second (deterministic arrivals, the dev profile's
    /// 42 s schedule: 6 s warm-up, 30 s measured, 6 s cooldown).
    pub(super) rate_rps: f64,
    /// The client timeout.
    pub(super) timeout: Duration,
    /// What keeps the worker from running, its intervals in ns from the epoch.
    pub(super) stalls: Stalls,
    /// The target.
    pub(super) target: Target,
    /// A closed loop of this many users, each sending its next request when its last one ends
    /// (no think time), instead of the open schedule at `rate_rps`.
    pub(super) closed_users: Option<u32>,
    /// More `[workload]` subtables for the configuration (`[workload.abandon]` ...).
    pub(super) workload_toml: &'static str,
}

/// What a simulated run produced: what the recorder would journal and what its gates read.
#[derive(Default)]
pub(super) struct Run {
    /// Every request record, by index.
    pub(super) records: Vec<RequestRecord>,
    /// The schedule's requests, in intended order.
    pub(super) entries: Vec<Entry>,
    /// Send skew of every request sent (reached minus intended).
    pub(super) skew_ns: Vec<u64>,
    /// The stall ticker's lateness samples, pooled as the recorder pools them.
    pub(super) stall: StallPool,
    /// The fall-behind escape: when, by whom (`"worker"` or `"telemetry"`), and its detail.
    pub(super) escape: Option<(u64, &'static str, String)>,
    /// When the last request ended: the end of the run.
    pub(super) end_ns: u64,
    /// The run's plan (the timeout, the fall-behind policy's lag and span).
    pub(super) plan: Option<Arc<RunPlan>>,
    /// Each follow-up's (index, session, turn), from its kind-6 extension.
    pub(super) turns: Vec<(u64, u64, u64)>,
}

const CONFIG: &str = "schema_version = 1\nprofile = \"dev\"\n[dev]\ntime_factor = 10\n[target]\nkind = \"mock\"\nbase_url = \"http://127.0.0.1:1\"\nmodel = \"mock\"\nreplicas = [\"a\"]\n\
                      [schedule]\nseed = 1\narrival = \"deterministic\"\nrate_rps = RATE\n[fault]\nvariant = \"none\"\n[[routes]]\nlabel = \"chat\"\npath = \"/v1/chat/completions\"\n";

impl World {
    /// A quiet host and a quick target at `rate_rps`, with `timeout`.
    pub(super) fn new(rate_rps: f64, timeout: Duration) -> World {
        World {
            rate_rps,
            timeout,
            stalls: Stalls {
                wake_floor_ns: 50_000,
                ..Stalls::default()
            },
            target: Target::default(),
            closed_users: None,
            workload_toml: "",
        }
    }

    /// The worker's context for this world (one worker, its plan from the simulation's
    /// configuration with this world's rate and timeout), its route rules, and what the writer
    /// would receive.
    fn context(&self, epoch_ns: u64) -> (Rc<WorkerContext>, Vec<Rule>, Receiver<ToWriter>) {
        let text = match self.closed_users {
            // A closed loop's rate is what its users achieve: the schedule names none.
            Some(users) => CONFIG.replace("rate_rps = RATE\n", "").replace(
                "[fault]",
                &format!("[workload]\nmodel = \"closed\"\nusers = {users}\n[fault]"),
            ),
            None => CONFIG.replace("RATE", &self.rate_rps.to_string()),
        }
        .replace("[fault]", &format!("{}[fault]", self.workload_toml));
        let config = Config::parse(text.as_bytes())
            .unwrap_or_else(|e| panic!("the simulation's configuration: {e}"));
        let mut plan = RunPlan::new(&config, 1).expect("a plan");
        plan.timeout = self.timeout;
        let plan = Arc::new(plan);
        let url = Url::parse(&config.target.base_url).expect("a URL");
        let extra = ExtraHeaders::new(&config.target, |_| None).expect("no secrets");
        let (templates, rules, _) = templates(&config, &url, &extra, &plan).expect("templates");
        let shared = Arc::new(Shared::new(1, None));
        let stop = Arc::new(AtomicBool::new(false));
        let (tx, rx) = sync_channel(super::writer::WRITER_QUEUE_RECORDS_MAX);
        let ctx = WorkerContext {
            worker: 0,
            dialer: Dialer {
                address: url.address.clone(),
                tls: None,
                server_name: url.host.clone(),
                budget: plan.connect_budget,
                http: plan.http,
            },
            plan,
            epoch: Instant::now(),
            monotonic_epoch_ns: epoch_ns,
            canary: None,
            deferred_task_work: false,
            rules: rules.clone(),
            templates,
            sender: Sender {
                tx,
                shared: Arc::clone(&shared),
                stop: Arc::clone(&stop),
            },
            shared,
            stop,
            cpus: None,
            secrets: extra,
        };
        (Rc::new(ctx), rules, rx)
    }

    /// Runs the schedule to its end.
    pub(super) fn run(&self) -> Run {
        let epoch_ns = EPOCH_LEAD.as_nanos() as u64;
        let (ctx, rules, rx) = self.context(epoch_ns);
        let stalls = Stalls {
            worker: self.stalls.worker.shifted(epoch_ns),
            process: self.stalls.process.shifted(epoch_ns),
            ..self.stalls.clone()
        };
        let core = Core::new(epoch_ns, stalls);
        let clock = SimClock(Rc::clone(&core));
        let net = Rc::new(Net {
            clock: clock.clone(),
            target: self.target.clone(),
            model: "mock".into(),
            slots: RefCell::new(vec![0; self.target.slots.unwrap_or(0)]),
            idle: Cell::new(0),
            next_id: Cell::new(0),
            rules: rules.into_iter().map(Rc::new).collect(),
        });
        let plan = Arc::clone(&ctx.plan);
        let behind = Behind::new(
            plan.behind_lag.as_nanos() as u64,
            plan.behind_span.as_nanos() as u64,
        );
        let mut run = Run {
            entries: plan.params.iter().collect(),
            plan: Some(Arc::clone(&plan)),
            ..Run::default()
        };
        let (shared, sender, stop) = (
            Arc::clone(&ctx.shared),
            ctx.sender.clone(),
            Arc::clone(&ctx.stop),
        );
        let mut by_telemetry = false;
        core.run(
            run_worker(ctx, Rc::new(clock), net),
            |at_ns| {
                let before = shared.escaped.lock().expect("escape lock").is_some();
                judge_starved(&shared, &sender, (&behind, &stop), at_ns);
                by_telemetry |= !before && shared.escaped.lock().expect("escape lock").is_some();
            },
            || take_records(&rx, &mut run),
        );
        take_records(&rx, &mut run);
        if let Some(escape) = run.escape.as_mut() {
            escape.1 = if by_telemetry { "telemetry" } else { "worker" };
        }
        for late in std::mem::take(&mut *shared.samples.stall_ns.lock().expect("stall lock")) {
            run.stall.add(late);
        }
        run.skew_ns = std::mem::take(&mut *shared.samples.skew_ns.lock().expect("skew lock"));
        run.records.sort_by_key(|r| r.index);
        run.end_ns = run.records.iter().map(|r| r.terminal_ns).max().unwrap_or(0);
        run
    }
}

/// Takes what the worker handed the writer: request records, and the fall-behind escape.
fn take_records(rx: &Receiver<ToWriter>, run: &mut Run) {
    while let Ok(message) = rx.try_recv() {
        let records = match message {
            ToWriter::Record(record) => vec![*record],
            ToWriter::Batch(records) => records,
            ToWriter::Finish(..) => Vec::new(),
        };
        for record in records {
            match record {
                Record::Request(r) => run.records.push(r),
                Record::RequestExtension(x) => {
                    use percentes_formats::journal::records::ExtensionKey;
                    if let (Some(session), Some(turn)) =
                        (x.get(ExtensionKey::Session), x.get(ExtensionKey::Turn))
                    {
                        run.turns.push((x.index, session, turn));
                    }
                }
                Record::Event(e)
                    if e.kind == EventKind::Escape.code() && e.subject == CLIENT_BEHIND =>
                {
                    run.escape.get_or_insert((e.at_ns, "", e.detail));
                }
                _ => {}
            }
        }
    }
}

/// A record's class name.
pub(super) fn class(r: &RequestRecord) -> &'static str {
    class_name(r.class).unwrap_or("?")
}

/// What every simulated run must hold, whatever the stress (SPEC §2, §3): each scheduled request
/// once; no terminal time past intended plus the timeout; no dispatch before the intended time
/// or after the terminal (nor at all when it was never sent); no stamp after the terminal; and
/// nothing the client's lateness caused
/// classed as the target's: a request whose connect or send began `client.behind_lag_ms` or
/// more late is `client-late`.
pub(super) fn assert_accounted(run: &Run) {
    let plan = run.plan.as_ref().expect("a plan");
    let timeout_ns = plan.timeout.as_nanos() as u64;
    let lag_ns = plan.behind_lag.as_nanos() as u64;
    let scheduled: Vec<_> = run
        .records
        .iter()
        .filter(|r| r.index < plan.requests)
        .collect();
    assert_eq!(scheduled.len(), run.entries.len(), "every request once");
    for (r, e) in scheduled.iter().zip(&run.entries) {
        assert_eq!(r.index, e.index);
        assert!(r.terminal_ns <= r.intended_ns + timeout_ns, "{r:?}");
        if let Some(d) = r.dispatched_ns {
            assert!(d >= r.intended_ns && d <= r.terminal_ns, "{r:?}");
        }
        for stamp in [
            r.connect_start_ns,
            r.connect_end_ns,
            r.request_written_ns,
            r.first_content_ns,
            r.response_head_ns,
        ]
        .into_iter()
        .flatten()
        {
            assert!(stamp <= r.terminal_ns, "{r:?}");
        }
        let began = r
            .connect_start_ns
            .max(r.dispatched_ns)
            .or(r.request_written_ns);
        if began.is_some_and(|b| b.saturating_sub(r.intended_ns) >= lag_ns) {
            assert_eq!(
                class(r),
                "client-late",
                "began late, not the target's: {r:?}"
            );
        }
        // Never sent, unless sent late: the client's lateness keeps its stamps as evidence.
        if r.outcome == Outcome::Undispatched as u8 && class(r) != "client-late" {
            assert!(r.dispatched_ns.is_none(), "{r:?}");
        }
    }
}

#[cfg(test)]
mod tests;
