//! The threads beside a simulated worker (issue 51 item 3): the telemetry thread's once-a-second
//! looks, the production fault plan (`fault::fault_thread`), each replica's probe
//! (`probes::probe_thread`) and each metrics source's scrape (`scrapes::scrape_thread`), each
//! run at the instants it is due on the simulation's clock.
//!
//! The fault plan, the probes and the scrapes are blocking code written for threads of their own, so the
//! simulation gives each one and runs it in lockstep ([`SideThread`]): the simulation waits
//! while such a thread runs, and the thread waits (in [`SimGround::sleep_until`]) while the
//! simulation runs, each handing the other the clock. Only one of them runs at a time, so a run
//! is the same every time. What they reach in the world (the injector, the victim's answers, a
//! replica's health and gauge) is scripted: a [`Victim`], whose fault the simulated target
//! serves from the fire to the removal, and each [`Probed`] replica.

use std::cell::Cell;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender as Channel};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use percentes_formats::config::{Config, Fault, Injector};
use std::time::Duration;

use super::super::fault::{fault_thread, FaultGround};
use super::super::ground::SideGround;
use super::super::plan::RunPlan;
use super::super::probes::{probe_thread, probe_timing, ProbeGround};
use super::super::scrapes::{scrape_thread, sources, ScrapeGround};
use super::super::state::{Sender, Shared};
use super::exec::Beside;
use super::{MS, S};
use crate::error::RecordError;
use crate::probe::Probe;

/// What a simulated fault does, and how the victim looks to the fault plan's confirmation.
#[derive(Clone, Debug)]
pub struct Victim {
    /// How long the injector's call takes; its effect begins when the call does.
    pub fire_ns: u64,
    /// Why the injector's call fails, where it does (the fault then never takes effect).
    pub fire_fails: Option<&'static str>,
    /// While the fault is in effect, every request written is answered with this status and a
    /// short JSON body (the mock's `error` mode: 500); `None`: the target serves as before.
    pub status: Option<u16>,
    /// While the fault is in effect the victim refuses connections (a deleted replica): the
    /// confirmation sees it stop answering, a request that must connect is refused, and one
    /// written on a connection opened before is reset.
    pub gone: bool,
    /// What the confirmation's `confirm_path` answers while the fault is in effect (200
    /// before and after).
    pub health: u16,
}

impl Default for Victim {
    fn default() -> Victim {
        Victim {
            fire_ns: 2 * MS,
            fire_fails: None,
            status: None,
            gone: false,
            health: 200,
        }
    }
}

/// A replica the recorder probes directly (`target.replica_addresses`), as it answers.
#[derive(Clone, Debug)]
pub struct Probed {
    /// Its name among the target's replicas.
    pub name: String,
    /// The address its probes go to.
    pub address: String,
    /// Its waiting-queue gauge, where a probe reads it (`None`: the simulated target's own
    /// queue at that instant, the requests waiting for one of its [`Target::slots`](super::Target::slots)).
    pub waiting: Option<f64>,
    /// It answers until this time (ns from the epoch), then refuses (`None`: to the end).
    pub until: Option<u64>,
}

/// The requests the simulated target holds waiting for a slot: when each arrived and when it
/// started. Written by the target (the worker's thread), read by the probes.
#[derive(Debug, Default)]
pub(super) struct Waiting(Mutex<Vec<(u64, u64)>>);

impl Waiting {
    /// A request that arrived at `arrived` and starts at `started`.
    pub(super) fn add(&self, arrived: u64, started: u64) {
        if started > arrived {
            self.0
                .lock()
                .expect("waiting lock")
                .push((arrived, started));
        }
    }

    /// How many wait at `t` (ns from the epoch). The probes look at times that never go back,
    /// so those started by `t` are forgotten.
    fn at(&self, t: u64) -> usize {
        let mut waiting = self.0.lock().expect("waiting lock");
        waiting.retain(|&(_, started)| started > t);
        waiting.iter().filter(|&&(arrived, _)| arrived <= t).count()
    }
}

/// One request the simulated target answered whole, its times ns from the epoch: when it
/// arrived (was written), its first token, its end; and its tokens.
#[derive(Clone, Copy, Debug)]
pub struct Answered {
    /// When the request arrived.
    pub arrived_ns: u64,
    /// When its first token was sent.
    pub first_ns: u64,
    /// When its answer ended.
    pub end_ns: u64,
    /// The tokens it answered with.
    pub tokens: u32,
}

impl Answered {
    /// A request that arrived at `arrived_ns`, answered with its head, tokens and end at those
    /// times (its first token is its head's time where it has none).
    pub(super) fn of(arrived_ns: u64, (head, tokens, end_ns): (u64, &[u64], u64)) -> Answered {
        Answered {
            arrived_ns,
            first_ns: tokens.first().copied().unwrap_or(head),
            end_ns,
            tokens: tokens.len() as u32,
        }
    }
}

/// The simulated target's `/metrics` at a time (ns from the epoch), from every request it has
/// answered or will answer (each with its times: what has happened by then is the caller's to
/// choose). The repository's tests render vLLM's series with the mock's own exposition.
type MetricsOf = dyn Fn(u64, &[Answered]) -> String + Send + Sync;

/// What a scrape of the simulated target reads.
#[derive(Clone)]
pub struct Metrics(Arc<MetricsOf>);

impl Metrics {
    /// Metrics rendered by `of`.
    pub fn new(of: impl Fn(u64, &[Answered]) -> String + Send + Sync + 'static) -> Metrics {
        Metrics(Arc::new(of))
    }
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Metrics(..)")
    }
}

/// Every request the simulated target answered, as it scheduled them (the worker's thread
/// writes, a scrape reads).
#[derive(Debug, Default)]
pub(super) struct AnsweredLog(Mutex<Vec<Answered>>);

impl AnsweredLog {
    pub(super) fn add(&self, answered: Answered) {
        self.0.lock().expect("answered lock").push(answered);
    }
}

/// When the simulated fault is in effect: from its fire to its removal (ns after the epoch;
/// `u64::MAX`: not yet). Written by the fault plan's thread, read by the target's.
#[derive(Debug)]
pub(super) struct InEffect {
    fired: AtomicU64,
    removed: AtomicU64,
}

impl Default for InEffect {
    fn default() -> InEffect {
        InEffect {
            fired: AtomicU64::new(u64::MAX),
            removed: AtomicU64::new(u64::MAX),
        }
    }
}

impl InEffect {
    /// Whether the fault is in effect at `t`.
    pub(super) fn at(&self, t: u64) -> bool {
        (self.fired.load(Ordering::SeqCst)..self.removed.load(Ordering::SeqCst)).contains(&t)
    }
}

/// The simulation is gone while the fault plan slept: its thread unwinds without a word.
struct SimulationGone;

/// The fault plan's ground in the simulation: its own clock, handed back and forth with the
/// simulation's, and the scripted victim.
pub(super) struct SimGround {
    now: Cell<u64>,
    /// When it resumes, ns after the epoch (from the simulation).
    wake: Receiver<u64>,
    /// When it next wakes, or `None` once the plan has ended (to the simulation).
    slept: Channel<Option<u64>>,
    /// The world's scripted parts.
    world: SideWorld,
    /// How late every wake is (the simulation's timer floor).
    floor_ns: u64,
}

/// What the threads beside the worker reach in a simulated world.
#[derive(Clone, Debug)]
pub(super) struct SideWorld {
    pub(super) victim: Victim,
    pub(super) effect: Arc<InEffect>,
    pub(super) probed: Vec<Probed>,
    pub(super) waiting: Arc<Waiting>,
    pub(super) answered: Arc<AnsweredLog>,
    pub(super) metrics: Option<Metrics>,
}

impl SimGround {
    /// Time passing on the fault plan's thread (a call, a round trip) while the others run.
    fn spend(&self, ns: u64) {
        self.sleep_until(self.now.get() + ns);
    }

    fn in_effect(&self) -> bool {
        self.world.effect.at(self.now.get())
    }
}

impl SideGround for SimGround {
    fn now_ns(&self) -> u64 {
        self.now.get()
    }

    fn sleep_until(&self, ns: u64) {
        if ns <= self.now.get() {
            return;
        }
        let resumed = self
            .slept
            .send(Some(ns + self.floor_ns))
            .ok()
            .and_then(|()| self.wake.recv().ok());
        match resumed {
            Some(at) => self.now.set(at),
            None => std::panic::resume_unwind(Box::new(SimulationGone)),
        }
    }

    fn resolve(&self, address: &str, _: Option<SocketAddr>) -> Result<SocketAddr, RecordError> {
        address.parse().map_err(|_| {
            RecordError::lookup(format!(
                "cannot resolve {address}: the simulation has no names, only addresses"
            ))
        })
    }
}

impl FaultGround for SimGround {
    fn fire(
        &self,
        injector: Injector,
        _: &Fault,
        partition_ns: Option<u64>,
    ) -> Result<String, RecordError> {
        let started = self.now.get();
        if let Some(why) = self.world.victim.fire_fails {
            self.spend(self.world.victim.fire_ns);
            return Err(RecordError::fault(format!(
                "simulated {}: {why}",
                injector.name()
            )));
        }
        self.world.effect.fired.store(started, Ordering::SeqCst);
        self.spend(self.world.victim.fire_ns);
        let what = match (self.world.victim.gone, self.world.victim.status) {
            (true, _) => "the victim refuses connections".to_string(),
            (false, Some(status)) => format!("the victim answers {status}"),
            (false, None) => "the victim serves as before".to_string(),
        };
        let until = partition_ns.map_or(String::new(), |p| format!(" for {} ms", p / MS));
        Ok(format!("simulated {}: {what}{until}", injector.name()))
    }

    fn remove(&self, _: &Fault) -> Result<String, RecordError> {
        self.world
            .effect
            .removed
            .store(self.now.get(), Ordering::SeqCst);
        self.spend(MS);
        Ok("simulated removal: the victim serves again".into())
    }

    fn answer_of(
        &self,
        address: SocketAddr,
        method: &str,
        path: &str,
    ) -> Result<(u16, String), RecordError> {
        self.spend(MS);
        match (self.in_effect(), self.world.victim.gone) {
            (true, true) => Err(RecordError::answer(format!(
                "{address}: connection refused ({method} {path})"
            ))),
            (true, false) => Ok((self.world.victim.health, String::new())),
            (false, _) => Ok((200, String::new())),
        }
    }

    fn accepts(&self, _: SocketAddr) -> bool {
        self.spend(MS / 10);
        !(self.in_effect() && self.world.victim.gone)
    }
}

impl ScrapeGround for SimGround {
    /// A round trip of a millisecond; the world's metrics at the time, or a refusal where the
    /// world has none.
    fn scrape(
        &self,
        address: SocketAddr,
        path: &str,
        _: Duration,
        _: usize,
    ) -> Result<String, RecordError> {
        self.spend(MS);
        let Some(metrics) = &self.world.metrics else {
            return Err(RecordError::answer(format!(
                "{address}: connection refused (GET {path}; the simulated target has no metrics)"
            )));
        };
        let answered = self.world.answered.0.lock().expect("answered lock").clone();
        Ok((metrics.0)(self.now.get(), &answered))
    }

    /// The simulation reads no thread's CPU: every scrape is spaced by its period.
    fn thread_cpu_ns(&self) -> u64 {
        0
    }
}

impl ProbeGround for SimGround {
    /// A round trip of a millisecond (two when it reads the gauge too) to a replica that
    /// answers, a refusal at once from one that no longer does, or from an address no replica
    /// has.
    fn probe(&self, address: SocketAddr, _: Duration, gauge: bool) -> Probe {
        let now = self.now.get();
        let replica =
            self.world.probed.iter().find(|p| {
                p.address.parse() == Ok(address) && p.until.is_none_or(|until| now < until)
            });
        let Some(replica) = replica else {
            return Probe::Down("connect: Connection refused (simulated)".into());
        };
        self.spend(if gauge { 2 * MS } else { MS });
        let queue = || self.world.waiting.at(self.now.get()) as f64;
        Probe::Up {
            waiting: gauge.then(|| replica.waiting.unwrap_or_else(queue)),
        }
    }
}

/// A thread beside the worker (the fault plan, a probe), run in lockstep with the simulation.
pub(super) struct SideThread {
    /// When it next wakes, ns after the epoch; `None` once it has ended.
    due: Option<u64>,
    wake: Channel<u64>,
    slept: Receiver<Option<u64>>,
    thread: Option<JoinHandle<()>>,
}

impl SideThread {
    /// Starts `body` on a thread named `name` standing on `world`, its first steps run at once
    /// (at the epoch: a recording's threads read 0 before it too).
    pub(super) fn start(
        name: String,
        world: SideWorld,
        floor_ns: u64,
        body: impl FnOnce(&SimGround) + Send + 'static,
    ) -> SideThread {
        let (wake, woken) = channel();
        let (sleeps, slept) = channel();
        let thread = std::thread::Builder::new()
            .name(name)
            .spawn(move || {
                let Ok(start) = woken.recv() else { return };
                let ground = SimGround {
                    now: Cell::new(start),
                    wake: woken,
                    slept: sleeps,
                    world,
                    floor_ns,
                };
                body(&ground);
                let _ = ground.slept.send(None);
            })
            .expect("a simulated thread beside the worker");
        let mut side = SideThread {
            due: Some(0),
            wake,
            slept,
            thread: Some(thread),
        };
        side.resume(0);
        side
    }

    /// Whether the thread is still going.
    pub(super) fn alive(&self) -> bool {
        self.due.is_some()
    }

    /// Lets the thread run from `at` (ns after the epoch) until it sleeps or ends.
    fn resume(&mut self, at: u64) {
        self.due = match self.wake.send(at) {
            Ok(()) => self.slept.recv().ok().flatten(),
            Err(_) => None,
        };
        if self.due.is_none() {
            if let Some(thread) = self.thread.take() {
                if let Err(panic) = thread.join() {
                    std::panic::resume_unwind(panic);
                }
            }
        }
    }
}

/// The threads a recording starts beside its workers, where `config` asks for them: the fault
/// plan (with an injector to fire), a probe of each replica with an address and a scrape of each
/// metrics source, in the order `record` starts them.
pub(super) fn start_sides(
    (config, plan): (&Config, &Arc<RunPlan>),
    (sender, shared, stop): (&Sender, &Arc<Shared>, &Arc<AtomicBool>),
    world: &SideWorld,
    floor_ns: u64,
) -> Vec<SideThread> {
    let mut sides = Vec::new();
    if plan.inject_at_ns.is_some() && config.fault.injector.is_some() {
        let (plan, fault) = (Arc::clone(plan), config.fault.clone());
        let (sender, shared, stop) = (sender.clone(), Arc::clone(shared), Arc::clone(stop));
        let name = "sim-fault-plan".to_string();
        sides.push(SideThread::start(name, world.clone(), floor_ns, move |g| {
            fault_thread((&plan, &fault), g, (&sender, &shared), &stop)
        }));
    }
    let period = Duration::from_millis(config.scrape_period_ms());
    let probes = config.target.replica_addresses.iter();
    for (name, address) in probes {
        let (name, address, timing) = (name.clone(), address.clone(), probe_timing(plan));
        let (sender, shared, stop) = (sender.clone(), Arc::clone(shared), Arc::clone(stop));
        let thread = format!("sim-probe-{name}");
        sides.push(SideThread::start(
            thread,
            world.clone(),
            floor_ns,
            move |g| probe_thread((&name, &address), timing, g, (&sender, &shared), &stop),
        ));
    }
    for source in sources(config) {
        let select = config.server_metrics.clone();
        let (sender, shared, stop) = (sender.clone(), Arc::clone(shared), Arc::clone(stop));
        let thread = format!("sim-scrape-{}", source.name);
        sides.push(SideThread::start(
            thread,
            world.clone(),
            floor_ns,
            move |g| scrape_thread((&source, period, &select), g, (&sender, &shared, &stop)),
        ));
    }
    sides
}

/// The telemetry thread's looks (`telemetry`, at each second of the epoch's scale) and the
/// other threads beside the worker (`sides`), with `taken` called after each of their steps
/// (the writer takes what they sent).
pub(super) struct Looks<T, A> {
    /// The telemetry thread's next look, monotonic ns.
    pub(super) tick: u64,
    pub(super) telemetry: T,
    pub(super) sides: Vec<SideThread>,
    pub(super) taken: A,
}

impl<T: FnMut(u64), A: FnMut()> Looks<T, A> {
    /// The side thread due first (the first started at a tie), and when, monotonic ns.
    fn side_due(&self, epoch: u64) -> Option<(usize, u64)> {
        self.sides
            .iter()
            .enumerate()
            .filter_map(|(i, side)| Some((i, epoch.saturating_add(side.due?))))
            .min_by_key(|&(i, due)| (due, i))
    }

    /// Whether a thread beside the worker (but the telemetry thread) is still going.
    pub(super) fn sides_alive(&self) -> bool {
        self.sides.iter().any(SideThread::alive)
    }
}

impl<T: FnMut(u64), A: FnMut()> Beside for Looks<T, A> {
    fn due(&self, epoch: u64) -> u64 {
        self.side_due(epoch)
            .map_or(self.tick, |(_, due)| due.min(self.tick))
    }

    /// The earliest of them; the telemetry thread first at a tie.
    fn look(&mut self, at: u64, epoch: u64) {
        match self.side_due(epoch) {
            Some((i, due)) if due < self.tick => {
                self.sides[i].resume(at - epoch);
                (self.taken)();
            }
            _ => {
                (self.telemetry)(at - epoch);
                self.tick += S;
            }
        }
    }
}
