//! The threads beside a simulated worker (issue 51 item 3): the telemetry thread's once-a-second
//! looks and the production fault plan (`fault::fault_thread`), each run at the instants it is
//! due on the simulation's clock.
//!
//! The fault plan is blocking code written for a thread of its own, so the simulation gives it
//! one and runs it in lockstep: the simulation waits while the plan runs, and the plan waits
//! (in [`SimGround::sleep_until`]) while the simulation runs, each handing the other the clock.
//! Only one of them runs at a time, so a run is the same every time. What the plan reaches in
//! the world (the injector, the victim's name and answers) is a scripted [`Victim`], whose
//! fault the simulated target serves from the fire to the removal.

use std::cell::Cell;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender as Channel};
use std::sync::Arc;
use std::thread::JoinHandle;

use percentes_formats::config::{Fault, Injector};

use super::super::fault::{fault_thread, FaultGround};
use super::super::plan::RunPlan;
use super::super::state::{Sender, Shared};
use super::exec::Beside;
use super::{MS, S};
use crate::error::RecordError;

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
    /// confirmation sees it stop answering, and a request that must connect is refused.
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
struct SimGround {
    now: Cell<u64>,
    /// When it resumes, ns after the epoch (from the simulation).
    wake: Receiver<u64>,
    /// When it next wakes, or `None` once the plan has ended (to the simulation).
    slept: Channel<Option<u64>>,
    victim: Victim,
    effect: Arc<InEffect>,
    /// How late every wake is (the simulation's timer floor).
    floor_ns: u64,
}

impl SimGround {
    /// Time passing on the fault plan's thread (a call, a round trip) while the others run.
    fn spend(&self, ns: u64) {
        self.sleep_until(self.now.get() + ns);
    }

    fn in_effect(&self) -> bool {
        self.effect.at(self.now.get())
    }
}

impl FaultGround for SimGround {
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

    fn fire(
        &self,
        injector: Injector,
        _: &Fault,
        partition_ns: Option<u64>,
    ) -> Result<String, RecordError> {
        let started = self.now.get();
        if let Some(why) = self.victim.fire_fails {
            self.spend(self.victim.fire_ns);
            return Err(RecordError::fault(format!(
                "simulated {}: {why}",
                injector.name()
            )));
        }
        self.effect.fired.store(started, Ordering::SeqCst);
        self.spend(self.victim.fire_ns);
        let what = match (self.victim.gone, self.victim.status) {
            (true, _) => "the victim refuses connections".to_string(),
            (false, Some(status)) => format!("the victim answers {status}"),
            (false, None) => "the victim serves as before".to_string(),
        };
        let until = partition_ns.map_or(String::new(), |p| format!(" for {} ms", p / MS));
        Ok(format!("simulated {}: {what}{until}", injector.name()))
    }

    fn remove(&self, _: &Fault) -> Result<String, RecordError> {
        self.effect.removed.store(self.now.get(), Ordering::SeqCst);
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
        match (self.in_effect(), self.victim.gone) {
            (true, true) => Err(RecordError::answer(format!(
                "{address}: connection refused ({method} {path})"
            ))),
            (true, false) => Ok((self.victim.health, String::new())),
            (false, _) => Ok((200, String::new())),
        }
    }

    fn accepts(&self, _: SocketAddr) -> bool {
        self.spend(MS / 10);
        !(self.in_effect() && self.victim.gone)
    }
}

/// The production fault plan on a thread of its own, run in lockstep with the simulation.
pub(super) struct FaultThread {
    /// When it next wakes, ns after the epoch; `None` once it has ended.
    due: Option<u64>,
    wake: Channel<u64>,
    slept: Receiver<Option<u64>>,
    thread: Option<JoinHandle<()>>,
}

impl FaultThread {
    /// Starts `plan`'s fault plan against `victim`, its first steps run at once (at the epoch;
    /// a recording's plan reads 0 before it too).
    pub(super) fn start(
        (plan, fault): (Arc<RunPlan>, Fault),
        (sender, shared, stop): (Sender, Arc<Shared>, Arc<AtomicBool>),
        (victim, effect): (Victim, Arc<InEffect>),
        floor_ns: u64,
    ) -> FaultThread {
        let (wake, woken) = channel();
        let (sleeps, slept) = channel();
        let thread = std::thread::Builder::new()
            .name("sim-fault-plan".into())
            .spawn(move || {
                let Ok(start) = woken.recv() else { return };
                let ground = SimGround {
                    now: Cell::new(start),
                    wake: woken,
                    slept: sleeps,
                    victim,
                    effect,
                    floor_ns,
                };
                fault_thread((&plan, &fault), &ground, (&sender, &shared), &stop);
                let _ = ground.slept.send(None);
            })
            .expect("the simulated fault plan's thread");
        let mut fault = FaultThread {
            due: Some(0),
            wake,
            slept,
            thread: Some(thread),
        };
        fault.resume(0);
        fault
    }

    /// Whether the plan is still going.
    pub(super) fn alive(&self) -> bool {
        self.due.is_some()
    }

    /// Lets the plan run from `at` (ns after the epoch) until it sleeps or ends.
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

/// The telemetry thread's looks (`telemetry`, at each second of the epoch's scale) and the
/// fault plan's, with `taken` called after each of the plan's steps (the writer takes what it
/// sent).
pub(super) struct Looks<T, A> {
    /// The telemetry thread's next look, monotonic ns.
    pub(super) tick: u64,
    pub(super) telemetry: T,
    pub(super) fault: Option<FaultThread>,
    pub(super) taken: A,
}

impl<T: FnMut(u64), A: FnMut()> Looks<T, A> {
    /// The fault plan's next wake, monotonic ns.
    fn fault_due(&self, epoch: u64) -> u64 {
        self.fault
            .as_ref()
            .and_then(|f| f.due)
            .map_or(u64::MAX, |due| epoch.saturating_add(due))
    }

    /// Whether the fault plan is still going.
    pub(super) fn fault_alive(&self) -> bool {
        self.fault.as_ref().is_some_and(FaultThread::alive)
    }
}

impl<T: FnMut(u64), A: FnMut()> Beside for Looks<T, A> {
    fn due(&self, epoch: u64) -> u64 {
        self.tick.min(self.fault_due(epoch))
    }

    /// The earlier of the two; the telemetry thread first at a tie.
    fn look(&mut self, at: u64, epoch: u64) {
        if self.tick <= self.fault_due(epoch) {
            (self.telemetry)(at - epoch);
            self.tick += S;
        } else if let Some(fault) = self.fault.as_mut() {
            fault.resume(at - epoch);
            (self.taken)();
        }
    }
}
