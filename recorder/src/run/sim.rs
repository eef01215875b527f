//! The recorder's production worker loop on simulated time and a simulated target (issue 51
//! item 2; tests only). [`World::run`] runs `pacer::run_worker` itself (the dispatcher and its
//! judges, the session tasks, `client::execute`'s deadline and record assembly, the stall
//! ticker, the batch flusher, the spare keeper, the counters) on a virtual
//! [`Clock`](super::ground::Clock) (`exec.rs`), with the telemetry thread's own seconds
//! (`telemetry::Seconds`: the judgement of a starved worker, the record, the live view) at each
//! of its once-a-second looks. Only the
//! ring, the kernel's timers and the network are stood in for: [`Net`] (`net.rs`) keeps a pool
//! of idle connections with their idle limit and answers each request from a scripted
//! [`Target`] with the bytes a server would send, through the production HTTP/1.1 parser and
//! [`Exchange`], so every class is the one a recording would give.
//!
//! A plan drawn from a seed (`tests.rs`) mixes the faults (a starved or stopped worker,
//! a CPU the client cannot keep up on, a target with few slots, one that starts late, drops SYNs,
//! resets, holds its heads, goes silent); a failing seed prints itself and reruns identically
//! under `PERCENTES_SIM_SEED`.
//!
//! A simulated run is also a journal ([`Run::journal`]): what the writer thread would have
//! appended, in the order it would have, under the header and seal `record` makes, with the
//! telemetry thread's once-a-second record built by the production code (`Seconds::second`)
//! from the simulated worker's own stall ticks and send skews, and its live view's text
//! ([`Run::progress`]). The repository's
//! tests read it with the analyzer (the `sim` feature exposes this module to them): a figure
//! whose point is the recorder's logic is checked there exactly, with no host noise to retry
//! past. The writer's escape watch looks at every record as the writer thread's would
//! (`EscapeWatch::escape_after`), so a `[declaration]`'s abort triggers stop the run and seal it
//! `escaped` here too. What the simulation cannot journal it leaves out and says so in a host
//! fact: the host's CPU is the world's stated reading, the recorder's own CPU is not read, the
//! telemetry thread looks only at each second (not every 50 ms between them, so its live view's
//! `behind` reads the second's end), and no canary or cgroup thread runs. The production fault
//! plan, the replicas' probes and the metrics scrapes do run, each on its own thread in lockstep
//! with the simulation's clock, against a scripted [`Victim`], [`Probed`] replicas and the
//! world's [`Metrics`] (`sim/beside.rs`), with the writer's baseline tally for the judgement at
//! T_inject.

use std::cell::{Cell, RefCell};
use std::path::Path;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{sync_channel, Receiver};
use std::sync::Arc;
use std::time::{Duration, Instant};

use percentes_formats::config::Config;
use percentes_formats::journal::header::{Header, HostFact};
#[cfg(test)]
use percentes_formats::journal::records::{class_name, Outcome};
use percentes_formats::journal::records::{
    EventKind, Record, RequestRecord, SealStatus, CLIENT_BEHIND, RECORDER_CPU_NOT_READ,
};
use percentes_formats::journal::writer::Sealed;
use percentes_formats::journal::JournalWriter;
use percentes_formats::pins::CLIENT_TIMEOUT_S;
use percentes_formats::schedule::Entry;

use super::baseline::BaselineTally;
use super::connect::Dialer;
use super::context::WorkerContext;
use super::dispatch::StallPool;
use super::escape_watch::EscapeWatch;
use super::pacer::run_worker;
use super::plan::RunPlan;
use super::plan::EPOCH_LEAD;
use super::setup::{journal_header, seal_of, seconds_of, templates};
use super::state::{Sender, Shared, ToWriter};
use super::summary::Summary;
use super::telemetry::{journal_after_run, Seconds};
use super::Options;
use crate::request::{ExtraHeaders, Target as Url};
use percentes_response::exchange::Rule;

mod beside;
mod exec;
#[cfg(test)]
mod keeper_tests;
mod net;

use beside::{start_sides, Looks, SideWorld};
pub use beside::{Answered, Metrics, Probed, Victim};
use exec::{Core, SimClock};
pub use exec::{Freezes, Stalls};
use net::Net;

/// A millisecond, in the simulation's nanoseconds.
pub const MS: u64 = 1_000_000;
/// A second, in the simulation's nanoseconds.
pub const S: u64 = 1_000 * MS;

/// How the simulated target behaves. Times are ns from the epoch.
#[derive(Clone, Debug)]
pub struct Target {
    /// Requests it serves at once; more wait for a slot in arrival order (`None`: no limit).
    pub slots: Option<usize>,
    /// From the start of service to the response head.
    pub head_ns: u64,
    /// From the start of service to the first token.
    pub ttft_ns: u64,
    /// Each request's time to its first token is drawn uniformly from `[ttft_ns, ttft_ns +
    /// ttft_spread_ns)` by a hash of its index and [`Target::seed`] (0: every request takes
    /// `ttft_ns`).
    pub ttft_spread_ns: u64,
    /// Which draws the spread gives: two targets that differ only here answer from the same law
    /// with different samples (an A/A pair); the same seed gives the same draws on every run.
    pub seed: u64,
    /// Between tokens.
    pub tpot_ns: u64,
    /// Between a reasoning token and the one before it, where [`Target::answers`] marks it
    /// reasoning (`None`: `tpot_ns`).
    pub reasoning_gap_ns: Option<u64>,
    /// The events of each answer, where not the simulation's own plain chat chunks: a
    /// reasoning model's, a tool call's, another API's (the repository's tests give the mock's,
    /// `percentes_scenarios::mock::streamed`). Their count replaces `tokens`.
    pub answers: Option<Answers>,
    /// Tokens an answer has.
    pub tokens: u32,
    /// A TCP connect's time.
    pub connect_ns: u64,
    /// Connects are refused before this time (a target that starts late).
    pub up_ns: u64,
    /// SYNs sent in `[start, end)` are dropped; the connect completes after the window, at
    /// the first retransmission past it.
    pub syn_drop: Option<(u64, u64)>,
    /// It accepts and reads requests written in `[start, end)` and never answers them.
    pub silent: Option<(u64, u64)>,
    /// It sends nothing in `[start, end)`: a head, token or end due inside is sent at `end`, and
    /// the rest of that answer follows as late (a stream resumes where it stopped).
    pub stall: Option<(u64, u64)>,
    /// Every n-th request (by index) is reset after its head.
    pub reset_every: Option<u64>,
    /// A finished answer leaves its connection open for the next request (else each request
    /// connects: `Connection: close`).
    pub keep_alive: bool,
}

impl Default for Target {
    fn default() -> Target {
        Target {
            slots: None,
            head_ns: 2 * MS,
            ttft_ns: 20 * MS,
            ttft_spread_ns: 0,
            seed: 0,
            tpot_ns: 10 * MS,
            reasoning_gap_ns: None,
            answers: None,
            tokens: 4,
            connect_ns: 100_000,
            up_ns: 0,
            syn_drop: None,
            silent: None,
            stall: None,
            reset_every: None,
            keep_alive: true,
        }
    }
}

/// A streamed answer's events, each one HTTP chunk's payload.
#[derive(Clone, Debug, Default)]
pub struct Events {
    /// Sent with the head (none for Chat Completions).
    pub prologue: Vec<u8>,
    /// One per token, and whether the token is reasoning.
    pub tokens: Vec<(Vec<u8>, bool)>,
    /// Sent at the end, before the last chunk.
    pub epilogue: Vec<u8>,
}

/// A request's answer from its index, its path and its body as the client wrote them.
type AnswerOf = dyn Fn(u64, &str, &[u8]) -> Events + Send + Sync;

/// What a scripted target answers each request with.
#[derive(Clone)]
pub struct Answers(Arc<AnswerOf>);

impl Answers {
    /// Answers from `of`.
    pub fn new(of: impl Fn(u64, &str, &[u8]) -> Events + Send + Sync + 'static) -> Answers {
        Answers(Arc::new(of))
    }
}

impl std::fmt::Debug for Answers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Answers(..)")
    }
}

/// The world a simulated run happens in.
#[derive(Clone, Debug)]
pub struct World {
    /// The schedule's rate, requests a second.
    pub rate_rps: f64,
    /// The configuration's `[dev]` keys: `time_factor = 10` by default (a 42 s schedule: 6 s
    /// warm-up, 30 s measured, 6 s cooldown, a 3 s timeout), or stated durations such as
    /// `"warmup_s = 5\nmeasure_s = 30\ncooldown_s = 0"` (the timeout then the pinned 30 s).
    pub dev: &'static str,
    /// The schedule's arrivals: `"deterministic"` (the default) or `"poisson"`.
    pub arrival: &'static str,
    /// The client timeout.
    pub timeout: Duration,
    /// What keeps the worker from running, its intervals in ns from the epoch.
    pub stalls: Stalls,
    /// The target.
    pub target: Target,
    /// A closed loop of this many users, each sending its next request when its last one ends
    /// (no think time), instead of the open schedule at `rate_rps`.
    pub closed_users: Option<u32>,
    /// More tables for the configuration, placed before its `[fault]`: `[workload]` subtables
    /// (`[workload.abandon]` ...), a declared `[slo]`, a `[declaration]` with its abort
    /// triggers.
    pub tables_toml: &'static str,
    /// The one route's keys (its `[[routes]]` table's body, subtables last): a chat route
    /// labelled `chat` by default.
    pub route_toml: &'static str,
    /// The host's CPU busy share each telemetry record states, ppm: the simulation has no host
    /// to read, so this is the world's, not a measurement.
    pub host_cpu_busy_ppm: u32,
    /// The `[fault]` table's body: `variant = "none"` by default; a fault with an injector runs
    /// the production fault plan on the simulation's clock against [`World::victim`].
    pub fault_toml: &'static str,
    /// What the fault does when the plan fires it, and how the victim looks to its
    /// confirmation.
    pub victim: Victim,
    /// The target's declared replicas (`["a"]`; a replica-loss fault needs two).
    pub replicas: &'static [&'static str],
    /// More `[target]` keys, one a line (`idle_limit_ms = 100\n`).
    pub target_toml: &'static str,
    /// What a scrape of the target's metrics reads (`None`: it has none; a `[server_metrics]`
    /// table in `tables_toml` starts the scrape threads).
    pub metrics: Option<Metrics>,
    /// What the live view writes each second ([`Run::progress`]; `Quiet` by default).
    pub progress: super::Progress,
    /// A whole configuration to run instead of the one the fields above make ([`World::of`]: a
    /// study's step as `calibrate` or `sweep` writes it); the target, the stalls, the victim,
    /// the probed replicas and the host's CPU still stand in for the host and the server.
    pub config_text: Option<String>,
    /// The replicas the recorder probes directly (`target.replica_addresses`), each as it
    /// answers.
    pub probed: Vec<Probed>,
    /// The calibrated per-replica capacity, where a replica-loss fault's schedule is drawn from
    /// it: its rate is then replicas x 0.65 x this (SPEC §1), and `rate_rps` is not used.
    pub lambda_max_rps: Option<f64>,
}

/// What a simulated run produced: what the recorder would journal and what its gates read.
// Outside this crate's own tests only `requests` and `journal` are read.
#[cfg_attr(not(test), allow(dead_code))]
#[derive(Default)]
pub struct Run {
    /// Every request record, by index.
    pub(super) records: Vec<RequestRecord>,
    /// The schedule's requests, in intended order.
    pub(super) entries: Vec<Entry>,
    /// Send skew of every request sent (reached minus intended).
    pub(super) skew_ns: Vec<u64>,
    /// The stall ticker's lateness samples over the whole run, pooled as the recorder pools them.
    pub(super) stall: StallPool,
    /// The fall-behind escape: when, by whom (`"worker"` or `"telemetry"`), and its detail.
    pub(super) escape: Option<(u64, &'static str, String)>,
    /// When the last request ended: the end of the run.
    pub(super) end_ns: u64,
    /// The run's plan (the timeout, the fall-behind policy's lag and span).
    pub(super) plan: Option<Arc<RunPlan>>,
    /// Each follow-up's (index, session, turn), from its kind-6 extension.
    pub(super) turns: Vec<(u64, u64, u64)>,
    /// Every record the writer thread would have appended, in the order it would have.
    journaled: Vec<Record>,
    /// The writer's escape watch, where the configuration declares an experiment.
    watch: Option<EscapeWatch>,
    /// What the live view wrote.
    progress: Vec<u8>,
    /// The counters the run left (what `record`'s summary reads).
    shared: Option<Arc<Shared>>,
    /// The header `record` would have written, and the seal it would have ended with.
    header: Option<Header>,
    seal: Option<(u64, SealStatus, String)>,
}

impl std::fmt::Debug for Run {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Run")
            .field("requests", &self.records.len())
            .field("journaled", &self.journaled.len())
            .field("end_ns", &self.end_ns)
            .field("seal", &self.seal)
            .finish_non_exhaustive()
    }
}

const CONFIG: &str = "schema_version = 1\nprofile = \"dev\"\n[dev]\nDEV\n[target]\nkind = \"mock\"\nbase_url = \"http://127.0.0.1:1\"\nmodel = \"mock\"\nreplicas = REPLICAS\nTARGET\
                      [schedule]\nseed = 1\narrival = \"ARRIVAL\"\nrate_rps = RATE\n[fault]\nFAULT[[routes]]\nROUTE";

/// The wall-clock instant a simulated run's epoch is anchored to (2026-11-30 UTC): fixed, so
/// that a world's journal is the same bytes on every run.
const REALTIME_EPOCH_NS: i64 = 1_796_000_000_000_000_000;

/// The host facts a simulated run's header carries: where its readings came from.
fn simulated_facts() -> Vec<(String, String)> {
    vec![
        HostFact::Placement.entry(
            "simulated: one worker on a virtual clock; the stall readings are its own ticker's",
        ),
        (
            "simulation".into(),
            "recorder/src/run/sim.rs: the production worker loop on a scripted target; host CPU \
             stated by the world, recorder CPU not read; no canary or cgroup thread"
                .into(),
        ),
    ]
}

impl World {
    /// A quiet host and a quick target at `rate_rps`, with `timeout`.
    pub fn new(rate_rps: f64, timeout: Duration) -> World {
        World {
            rate_rps,
            dev: "time_factor = 10",
            arrival: "deterministic",
            timeout,
            stalls: Stalls {
                wake_floor_ns: 50_000,
                ..Stalls::default()
            },
            target: Target::default(),
            closed_users: None,
            tables_toml: "",
            route_toml: "label = \"chat\"\npath = \"/v1/chat/completions\"\n",
            host_cpu_busy_ppm: 100_000,
            fault_toml: "variant = \"none\"\n",
            victim: Victim::default(),
            replicas: &["a"],
            lambda_max_rps: None,
            probed: Vec::new(),
            target_toml: "",
            config_text: None,
            progress: super::Progress::Quiet,
            metrics: None,
        }
    }

    /// `config` run against `target` on a quiet host, each replica it addresses directly
    /// probed with the target's own waiting queue as its gauge: what a study's step
    /// (`percentes_study`'s calibration, sweep) records, simulated.
    pub fn of(config: &Config, target: Target) -> World {
        let text = String::from_utf8_lossy(config.raw_bytes()).into_owned();
        let probed = config
            .target
            .replica_addresses
            .iter()
            .map(|(name, address)| Probed {
                name: name.clone(),
                address: address.clone(),
                waiting: None,
                until: None,
            })
            .collect();
        World {
            target,
            probed,
            config_text: Some(text),
            ..World::new(1.0, Duration::ZERO)
        }
        .configured()
    }

    /// This world with the timeout its configuration states (the pinned client timeout, divided
    /// by the dev factor where there is one): a world whose [`Run::journal`] the analyzer reads
    /// as the recorder's own. Call it after setting `dev`.
    pub fn configured(mut self) -> World {
        self.timeout = Duration::from_nanos(self.config().duration_ns(&CLIENT_TIMEOUT_S));
        self
    }

    /// The configuration the run is planned from, and journaled with.
    fn config(&self) -> Config {
        if let Some(text) = &self.config_text {
            return Config::parse(text.as_bytes())
                .unwrap_or_else(|e| panic!("the world's own configuration: {e}"));
        }
        let text = match self.closed_users {
            // A closed loop's rate is what its users achieve: the schedule names none.
            Some(users) => CONFIG.replace("rate_rps = RATE\n", "").replace(
                "[fault]",
                &format!("[workload]\nmodel = \"closed\"\nusers = {users}\n[fault]"),
            ),
            // A replica-loss fault's rate is its calibration's share (SPEC §1).
            None => match self.lambda_max_rps {
                Some(lambda) => CONFIG.replace("rate_rps = RATE\n", "").replace(
                    "[fault]",
                    &format!("[calibration]\nlambda_max_rps = {lambda:?}\n[fault]"),
                ),
                None => CONFIG.replace("RATE", &self.rate_rps.to_string()),
            },
        }
        .replace("ARRIVAL", self.arrival)
        .replace("DEV", self.dev)
        .replace("ROUTE", self.route_toml)
        .replace("[fault]", &format!("{}[fault]", self.tables_toml))
        .replace("FAULT", self.fault_toml)
        .replace("REPLICAS", &self.replicas_toml())
        .replace("TARGET", self.target_toml);
        Config::parse(text.as_bytes())
            .unwrap_or_else(|e| panic!("the simulation's configuration: {e}"))
    }

    /// The `[target]` table's `replicas` value, and the probed ones' addresses after it.
    fn replicas_toml(&self) -> String {
        let addresses: Vec<String> = self
            .probed
            .iter()
            .map(|p| format!("{:?} = {:?}", p.name, p.address))
            .collect();
        match addresses.is_empty() {
            true => format!("{:?}", self.replicas),
            false => format!(
                "{:?}\nreplica_addresses = {{ {} }}",
                self.replicas,
                addresses.join(", ")
            ),
        }
    }

    /// The worker's context for this world (one worker, its plan from `config` with this
    /// world's timeout), its route rules, and what the writer would receive.
    fn context(
        &self,
        config: &Config,
        epoch_ns: u64,
    ) -> (Rc<WorkerContext>, Vec<Rule>, Receiver<ToWriter>) {
        let mut plan = RunPlan::new(config, 1).expect("a plan");
        plan.timeout = self.timeout;
        let plan = Arc::new(plan);
        let url = Url::parse(&config.target.base_url).expect("a URL");
        let extra = ExtraHeaders::new(&config.target, |_| None).expect("no secrets");
        let (templates, rules, _) = templates(config, &url, &extra, &plan).expect("templates");
        let shared = Arc::new(Shared::new(1, BaselineTally::new(&plan)));
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
    pub fn run(&self) -> Run {
        let epoch_ns = EPOCH_LEAD.as_nanos() as u64;
        let config = self.config();
        let (ctx, rules, rx) = self.context(&config, epoch_ns);
        let stalls = Stalls {
            worker: self.stalls.worker.shifted(epoch_ns),
            process: self.stalls.process.shifted(epoch_ns),
            ..self.stalls.clone()
        };
        let core = Core::new(epoch_ns, stalls);
        let clock = SimClock(Rc::clone(&core));
        let target = (clock.clone(), self.target.clone(), ctx.plan.idle_limit);
        let net = Rc::new(Net::new(target, rules, self.victim.clone()));
        let plan = Arc::clone(&ctx.plan);
        let seconds = RefCell::new(seconds_of(&config, &plan, self.progress, false));
        let run = RefCell::new(Run {
            entries: plan.params.iter().collect(),
            plan: Some(Arc::clone(&plan)),
            watch: EscapeWatch::new(&config, Arc::clone(&ctx.stop)),
            ..Run::default()
        });
        let (shared, sender, stop) = (
            Arc::clone(&ctx.shared),
            ctx.sender.clone(),
            Arc::clone(&ctx.stop),
        );
        let cpu = (self.host_cpu_busy_ppm, RECORDER_CPU_NOT_READ);
        let by_telemetry = Cell::new(false);
        let world = SideWorld {
            victim: self.victim.clone(),
            effect: net.effect(),
            probed: self.probed.clone(),
            waiting: net.waiting(),
            answered: net.answered(),
            metrics: self.metrics.clone(),
        };
        let on = (&sender, &shared, &stop);
        let sides = start_sides((&config, &plan), on, &world, self.stalls.wake_floor_ns);
        let mut looks = Looks {
            tick: epoch_ns + S,
            telemetry: |at_ns| {
                let before = shared.escaped.lock().expect("escape lock").is_some();
                seconds.borrow_mut().judge((&shared, &sender, &stop), at_ns);
                let after = shared.escaped.lock().expect("escape lock").is_some();
                by_telemetry.set(by_telemetry.get() || (!before && after));
                let mut run = run.borrow_mut();
                run.second(&mut seconds.borrow_mut(), (&shared, &sender), at_ns, cpu);
                take_records(&rx, &mut run, &shared);
            },
            sides,
            taken: || take_records(&rx, &mut run.borrow_mut(), &shared),
        };
        take_records(&rx, &mut run.borrow_mut(), &shared);
        core.run(run_worker(ctx, Rc::new(clock), net), &mut looks, || {
            take_records(&rx, &mut run.borrow_mut(), &shared)
        });
        // `record` waits for the fault plan (its expiry, its removal) and the probes (they see
        // the run done) once the workers are.
        shared.done.store(true, Ordering::Relaxed);
        core.run_beside(&mut looks, Looks::sides_alive);
        drop(looks);
        let mut run = run.into_inner();
        let end_at = core.now().saturating_sub(epoch_ns);
        let seconds = &mut seconds.borrow_mut();
        run.end((&rx, seconds), (&shared, &sender, &stop), end_at, cpu);
        if let Some(escape) = run.escape.as_mut() {
            escape.1 = if by_telemetry.get() {
                "telemetry"
            } else {
                "worker"
            };
        }
        run.shared = Some(Arc::clone(&shared));
        let options = Options::new("simulated".into());
        run.header = Some(journal_header(
            &config,
            &options,
            &plan,
            (epoch_ns, REALTIME_EPOCH_NS),
            simulated_facts(),
        ));
        run
    }
}

impl Run {
    /// As `record` ends, at `end_at`: the telemetry thread's last record once the workers are
    /// done, then the records written after the run, then the seal.
    fn end(
        &mut self,
        (rx, seconds): (&Receiver<ToWriter>, &mut Seconds),
        (shared, sender, stop): (&Shared, &Sender, &AtomicBool),
        end_at: u64,
        cpu: (u32, u64),
    ) {
        let measured = self.plan.as_ref().expect("a plan").measured_span_ns;
        take_records(rx, self, shared);
        // The telemetry thread's last second, the workers done: no judgement, then its record.
        seconds.judge((shared, sender, stop), end_at);
        self.second(seconds, (shared, sender), end_at, cpu);
        take_records(rx, self, shared);
        journal_after_run(shared, end_at, measured, sender);
        take_records(rx, self, shared);
        let escaped = shared.escaped.lock().expect("escape lock").clone();
        let stopped = sender.stop.load(Ordering::Relaxed);
        let (status, reason) = seal_of(None, None, escaped, stopped);
        self.seal = Some((end_at, status, reason));
        self.records.sort_by_key(|r| r.index);
        self.end_ns = self
            .records
            .iter()
            .map(|r| r.terminal_ns)
            .max()
            .unwrap_or(0);
    }

    /// The rest of the telemetry thread's second ending at `at_ns` (`Seconds::second`: the
    /// production code, its record sent to the writer, its progress text kept), with the
    /// world's CPU; the stall ticks and skews it takes are first kept whole for the simulation's
    /// own assertions.
    fn second(
        &mut self,
        seconds: &mut Seconds,
        on: (&Shared, &Sender),
        at_ns: u64,
        cpu: (u32, u64),
    ) {
        let shared = on.0;
        for &late in shared.samples.stall_ns.lock().expect("stall lock").iter() {
            self.stall.add(late);
        }
        self.skew_ns
            .extend(shared.samples.skew_ns.lock().expect("skew lock").iter());
        seconds.second(on, at_ns, (cpu, None), &mut self.progress);
    }

    /// What the live view wrote, second by second (the world's `progress` says how).
    pub fn progress(&self) -> &[u8] {
        &self.progress
    }

    /// Every request record, by index.
    pub fn requests(&self) -> &[RequestRecord] {
        &self.records
    }

    /// The run as the recorder would have journaled it: its header, every record in the order
    /// the writer would have appended it (a checkpoint after each telemetry record, as the
    /// writer checkpoints once a second), and its seal at the end of the run. Panics when the
    /// world's timeout is not its configuration's ([`World::configured`]): the analyzer reads
    /// the configuration's.
    pub fn journal(&self) -> Vec<u8> {
        self.sealed_journal().0
    }

    /// Writes the run's journal to `output`, and says of it what `record` would have (no
    /// pre-flight ran).
    pub fn write(&self, output: &Path) -> Result<Summary, crate::error::RecordError> {
        let (bytes, sealed) = self.sealed_journal();
        let what = format!("cannot write the simulated journal {}", output.display());
        std::fs::write(output, bytes).map_err(crate::error::io(what))?;
        let (Some((_, status, reason)), Some(shared)) = (&self.seal, &self.shared) else {
            panic!("a run is written once it has ended");
        };
        let seal = (*status, reason.clone(), sealed);
        Ok(Summary::of(output.to_path_buf(), seal, shared, None))
    }

    /// The journal's bytes, and what its seal says.
    fn sealed_journal(&self) -> (Vec<u8>, Sealed) {
        let (header, plan) = (self.header.as_ref(), self.plan.as_ref());
        let (Some(header), Some(plan), Some((at, status, reason))) = (header, plan, &self.seal)
        else {
            panic!("a run's journal is made once the run has ended");
        };
        let config = Config::parse(&header.config_bytes).expect("the run's own configuration");
        assert_eq!(
            plan.timeout.as_nanos() as u64,
            config.duration_ns(&CLIENT_TIMEOUT_S),
            "the world's timeout is not its configuration's: start from World::configured"
        );
        let mut writer = JournalWriter::create(Vec::new(), header, None).expect("the header");
        for record in &self.journaled {
            writer.append(record).expect("a record the recorder made");
            if let Record::Telemetry(t) = record {
                writer.checkpoint(t.at_ns).expect("a checkpoint");
            }
        }
        writer.seal(*at, *status, reason).expect("the seal")
    }
}

/// Takes what the worker handed the writer: every record, in order, each followed by the escape
/// event the writer's watch would journal after it, and from them the request records, the
/// follow-ups' turns and the fall-behind escape.
fn take_records(rx: &Receiver<ToWriter>, run: &mut Run, shared: &Shared) {
    while let Ok(message) = rx.try_recv() {
        let records = match message {
            ToWriter::Record(record) => vec![*record],
            ToWriter::Batch(records) => records,
            ToWriter::Finish(..) => Vec::new(),
        };
        let mut baseline = shared
            .baseline
            .as_ref()
            .map(|b| b.lock().expect("baseline lock"));
        for record in records {
            if let Some(tally) = baseline.as_mut() {
                tally.observe(&record);
            }
            let escape = run
                .watch
                .as_mut()
                .and_then(|w| w.escape_after(&record, shared));
            take_record(record, run);
            if let Some(event) = escape {
                run.journaled.push(event);
            }
        }
    }
}

/// One record the writer appends, and what the simulation's own assertions keep of it.
fn take_record(record: Record, run: &mut Run) {
    match &record {
        Record::Request(r) => run.records.push(r.clone()),
        Record::RequestExtension(x) => {
            use percentes_formats::journal::records::ExtensionKey;
            if let (Some(session), Some(turn)) =
                (x.get(ExtensionKey::Session), x.get(ExtensionKey::Turn))
            {
                run.turns.push((x.index, session, turn));
            }
        }
        Record::Event(e) if e.kind == EventKind::Escape.code() && e.subject == CLIENT_BEHIND => {
            run.escape.get_or_insert((e.at_ns, "", e.detail.clone()));
        }
        _ => {}
    }
    run.journaled.push(record);
}

#[cfg(test)]
/// A record's class name.
pub(super) fn class(r: &RequestRecord) -> &'static str {
    class_name(r.class).unwrap_or("?")
}

#[cfg(test)]
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
mod fault_tests;
#[cfg(test)]
mod tests;
