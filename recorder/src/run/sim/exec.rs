//! A deterministic executor on virtual time: the [`Clock`] a simulated worker runs on.
//!
//! One thread's tasks, polled in the order they were woken; timers on a virtual monotonic clock
//! that only moves when nothing is ready to run (or when a poll costs CPU time). The thread can
//! be kept from running over scripted intervals ([`Freezes`]: a CPU another process keeps busy,
//! a cgroup throttle, a SIGSTOP), and every timer wake is late by a floor, as a real kernel's is.
//! Nothing sleeps: a 35 s stop takes microseconds, and a run is the same every time.

use std::cell::{Cell, RefCell};
use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use super::super::ground::Clock;

type Job = Pin<Box<dyn Future<Output = ()>>>;

/// Intervals `[start, end)` in which a thread does not run.
#[derive(Clone, Debug, Default)]
pub struct Freezes {
    /// Sorted, none overlapping another.
    spans: Vec<(u64, u64)>,
}

impl Freezes {
    /// The freezes of `spans`, in any order, overlapping or not.
    pub fn new(mut spans: Vec<(u64, u64)>) -> Freezes {
        spans.retain(|&(a, b)| b > a);
        spans.sort_unstable();
        let mut merged: Vec<(u64, u64)> = Vec::with_capacity(spans.len());
        for (a, b) in spans {
            match merged.last_mut() {
                Some(last) if a <= last.1 => last.1 = last.1.max(b),
                _ => merged.push((a, b)),
            }
        }
        Freezes { spans: merged }
    }

    /// The same intervals `by` later.
    pub(in crate::run) fn shifted(&self, by: u64) -> Freezes {
        Freezes {
            spans: self.spans.iter().map(|&(a, b)| (a + by, b + by)).collect(),
        }
    }

    /// The first instant at or after `t` outside every interval.
    pub(in crate::run) fn runs_at(&self, t: u64) -> u64 {
        let i = self.spans.partition_point(|&(_, end)| end <= t);
        match self.spans.get(i) {
            Some(&(start, end)) if start <= t => end,
            _ => t,
        }
    }
}

/// What keeps the worker's thread from running when it would.
#[derive(Clone, Debug, Default)]
pub struct Stalls {
    /// The worker's thread alone (starved of its CPU, throttled).
    pub worker: Freezes,
    /// The whole process (SIGSTOP): the telemetry thread too.
    pub process: Freezes,
    /// How late every timer wake is on a quiet CPU, ns.
    pub wake_floor_ns: u64,
    /// The CPU time one poll of a task takes, ns: the client's own cost, which at a high enough
    /// rate is more than the CPU it has.
    pub poll_cost_ns: u64,
}

impl Stalls {
    /// When the worker's thread gets to run something due at `t`.
    pub(in crate::run) fn worker_at(&self, t: u64) -> u64 {
        let mut t = t;
        loop {
            let next = self.process.runs_at(self.worker.runs_at(t));
            if next == t {
                return t;
            }
            t = next;
        }
    }
}

struct TaskState {
    done: Cell<bool>,
    cancelled: Cell<bool>,
    joiner: RefCell<Option<Waker>>,
}

struct Slot {
    job: Option<Job>,
    state: Rc<TaskState>,
}

/// Task ids woken since they were last polled, in order.
#[derive(Default)]
struct ReadyQueue(Mutex<VecDeque<usize>>);

struct TaskWaker {
    id: usize,
    ready: Arc<ReadyQueue>,
}

impl Wake for TaskWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.ready.0.lock().expect("ready lock").push_back(self.id);
    }
}

/// The executor and its virtual clock.
pub(in crate::run) struct Core {
    now: Cell<u64>,
    epoch: u64,
    stalls: Stalls,
    slots: RefCell<Vec<Option<Slot>>>,
    ready: Arc<ReadyQueue>,
    /// Pending sleeps by (deadline, sequence); a dropped sleep leaves its key behind, skipped.
    timers: RefCell<BinaryHeap<Reverse<(u64, u64)>>>,
    wakers: RefCell<BTreeMap<u64, Waker>>,
    sequence: Cell<u64>,
}

impl Core {
    /// A clock reading 0 whose epoch is at `epoch_ns`.
    pub(in crate::run) fn new(epoch_ns: u64, stalls: Stalls) -> Rc<Core> {
        Rc::new(Core {
            now: Cell::new(0),
            epoch: epoch_ns,
            stalls,
            slots: RefCell::new(Vec::new()),
            ready: Arc::new(ReadyQueue::default()),
            timers: RefCell::new(BinaryHeap::new()),
            wakers: RefCell::new(BTreeMap::new()),
            sequence: Cell::new(0),
        })
    }

    /// The virtual monotonic clock, ns.
    pub(in crate::run) fn now(&self) -> u64 {
        self.now.get()
    }

    fn arm(&self, deadline: u64, waker: Waker) -> u64 {
        let key = self.sequence.get();
        self.sequence.set(key + 1);
        self.timers.borrow_mut().push(Reverse((deadline, key)));
        self.wakers.borrow_mut().insert(key, waker);
        key
    }

    /// The earliest live timer's deadline.
    fn next_deadline(&self) -> Option<u64> {
        let mut timers = self.timers.borrow_mut();
        let wakers = self.wakers.borrow();
        while let Some(&Reverse((deadline, key))) = timers.peek() {
            if wakers.contains_key(&key) {
                return Some(deadline);
            }
            timers.pop();
        }
        None
    }

    /// Wakes every timer the thread, running at `now`, sees expired: those whose deadline plus
    /// the wake floor has passed.
    fn fire_due(&self) -> bool {
        let now = self.now();
        let floor = self.stalls.wake_floor_ns;
        let mut fired = false;
        loop {
            let due = {
                let mut timers = self.timers.borrow_mut();
                match timers.peek() {
                    Some(&Reverse((deadline, key))) if deadline + floor <= now => {
                        timers.pop();
                        Some(key)
                    }
                    _ => None,
                }
            };
            let Some(key) = due else { return fired };
            if let Some(waker) = self.wakers.borrow_mut().remove(&key) {
                waker.wake();
                fired = true;
            }
        }
    }

    fn spawn_job(&self, job: Job) -> Rc<TaskState> {
        let state = Rc::new(TaskState {
            done: Cell::new(false),
            cancelled: Cell::new(false),
            joiner: RefCell::new(None),
        });
        let mut slots = self.slots.borrow_mut();
        let id = slots.len();
        slots.push(Some(Slot {
            job: Some(job),
            state: Rc::clone(&state),
        }));
        self.ready.0.lock().expect("ready lock").push_back(id);
        state
    }

    fn poll_task(&self, id: usize) {
        let (job, state) = {
            let mut slots = self.slots.borrow_mut();
            let Some(Some(slot)) = slots.get_mut(id) else {
                return;
            };
            if slot.state.cancelled.get() {
                let slot = slots[id].take().expect("present");
                drop(slots);
                drop(slot);
                return;
            }
            let Some(job) = slot.job.take() else {
                return;
            };
            (job, Rc::clone(&slot.state))
        };
        let mut job = job;
        let waker = Waker::from(Arc::new(TaskWaker {
            id,
            ready: Arc::clone(&self.ready),
        }));
        let polled = job.as_mut().poll(&mut Context::from_waker(&waker));
        let mut slots = self.slots.borrow_mut();
        match polled {
            Poll::Ready(()) => {
                slots[id] = None;
                drop(slots);
                state.done.set(true);
                if let Some(joiner) = state.joiner.borrow_mut().take() {
                    joiner.wake();
                }
            }
            Poll::Pending if state.cancelled.get() => {
                slots[id] = None;
                drop(slots);
                drop(job);
            }
            Poll::Pending => slots[id].as_mut().expect("present").job = Some(job),
        }
    }

    /// Runs `main` to its end, with the threads `beside` it looking in at each instant they are
    /// due at which the process runs, and `after_poll` called after each poll.
    pub(in crate::run) fn run(
        &self,
        main: impl Future<Output = ()> + 'static,
        beside: &mut impl Beside,
        mut after_poll: impl FnMut(),
    ) {
        let main = self.spawn_job(Box::pin(main));
        loop {
            loop {
                let next = self.ready.0.lock().expect("ready lock").pop_front();
                let Some(id) = next else { break };
                self.now.set(self.stalls.worker_at(self.now()));
                // The looks that came while this thread ran; one at the instant it resumes
                // comes after it (it finds what the worker did first).
                loop {
                    let look = self.stalls.process.runs_at(beside.due(self.epoch));
                    if look >= self.now() {
                        break;
                    }
                    beside.look(look, self.epoch);
                }
                self.poll_task(id);
                after_poll();
                self.now.set(self.now() + self.stalls.poll_cost_ns);
                self.fire_due();
            }
            if main.done.get() {
                return;
            }
            let timer = self.next_deadline().map(|d| {
                self.stalls
                    .worker_at(d.saturating_add(self.stalls.wake_floor_ns))
                    .max(self.now())
            });
            let look = self
                .stalls
                .process
                .runs_at(beside.due(self.epoch))
                .max(self.now());
            match timer {
                Some(at) if at <= look => {
                    self.now.set(at);
                    assert!(self.fire_due(), "a due timer woke nothing at {at}");
                }
                _ if timer.is_none() && self.ready.0.lock().expect("ready lock").is_empty() => {
                    panic!(
                        "the simulated worker waits on nothing at {} ns: a task is blocked for good",
                        self.now()
                    )
                }
                _ => {
                    self.now.set(look);
                    beside.look(look, self.epoch);
                }
            }
        }
    }

    /// Runs the looks of the threads `beside` the worker while `more` says one is still going,
    /// the worker's thread being done: the clock ends at the last of them.
    pub(in crate::run) fn run_beside<B: Beside>(&self, beside: &mut B, more: impl Fn(&B) -> bool) {
        while more(beside) {
            let look = self
                .stalls
                .process
                .runs_at(beside.due(self.epoch))
                .max(self.now());
            self.now.set(look);
            beside.look(look, self.epoch);
        }
    }
}

/// The threads beside a simulated worker (the telemetry thread's once-a-second looks, the fault
/// plan): each runs at the instants it is due, when the process runs, not the worker's thread.
pub(in crate::run) trait Beside {
    /// When the next of them is due, ns on the monotonic scale whose epoch is `epoch`.
    fn due(&self, epoch: u64) -> u64;

    /// Runs every one due by `at` (monotonic ns), at `at`. Each must be due after `at` when it
    /// is done, or the simulation would not advance.
    fn look(&mut self, at: u64, epoch: u64);
}

/// A sleep on the virtual clock.
struct Sleep {
    core: Rc<Core>,
    until: u64,
    key: Option<u64>,
}

impl Future for Sleep {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.core.now() >= self.until {
            if let Some(key) = self.key.take() {
                self.core.wakers.borrow_mut().remove(&key);
            }
            return Poll::Ready(());
        }
        match self.key {
            Some(key) => {
                let mut wakers = self.core.wakers.borrow_mut();
                match wakers.get_mut(&key) {
                    Some(waker) => waker.clone_from(cx.waker()),
                    // Fired, yet not due: the floor woke it early; arm again.
                    None => {
                        drop(wakers);
                        let key = self.core.arm(self.until, cx.waker().clone());
                        self.key = Some(key);
                    }
                }
            }
            None => {
                let key = self.core.arm(self.until, cx.waker().clone());
                self.key = Some(key);
            }
        }
        Poll::Pending
    }
}

impl Drop for Sleep {
    fn drop(&mut self) {
        if let Some(key) = self.key {
            self.core.wakers.borrow_mut().remove(&key);
        }
    }
}

/// A spawned task's handle: awaiting it waits for its end, dropping it cancels it.
pub(in crate::run) struct SimTask {
    state: Rc<TaskState>,
    detached: bool,
}

impl Future for SimTask {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.state.done.get() {
            Poll::Ready(())
        } else {
            *self.state.joiner.borrow_mut() = Some(cx.waker().clone());
            Poll::Pending
        }
    }
}

impl Drop for SimTask {
    fn drop(&mut self) {
        if !self.detached && !self.state.done.get() {
            self.state.cancelled.set(true);
        }
    }
}

/// The virtual clock as a worker sees it.
#[derive(Clone)]
pub(in crate::run) struct SimClock(pub(in crate::run) Rc<Core>);

impl Clock for SimClock {
    type Task = SimTask;

    fn monotonic_epoch_ns(&self) -> u64 {
        self.0.epoch
    }

    fn monotonic_ns(&self) -> u64 {
        self.0.now()
    }

    fn sleep_until_monotonic(&self, ns: u64) -> impl Future<Output = ()> {
        Sleep {
            core: Rc::clone(&self.0),
            until: ns,
            key: None,
        }
    }

    fn sleep(&self, duration: Duration) -> impl Future<Output = ()> {
        self.sleep_until_monotonic(self.0.now() + duration.as_nanos() as u64)
    }

    async fn within<F: Future>(&self, deadline_ns: u64, work: F) -> Option<F::Output> {
        let mut work = std::pin::pin!(work);
        let mut deadline = std::pin::pin!(self.sleep_until(deadline_ns));
        std::future::poll_fn(|cx| {
            if let Poll::Ready(out) = work.as_mut().poll(cx) {
                return Poll::Ready(Some(out));
            }
            deadline.as_mut().poll(cx).map(|()| None)
        })
        .await
    }

    fn spawn<F: Future<Output = ()> + 'static>(&self, task: F) -> SimTask {
        SimTask {
            state: self.0.spawn_job(Box::pin(task)),
            detached: false,
        }
    }

    fn detach(mut task: SimTask) {
        task.detached = true;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn freezes_merge_and_a_thread_runs_at_the_end_of_the_one_it_is_in() {
        let f = Freezes::new(vec![(30, 40), (10, 20), (15, 25), (40, 41)]);
        assert_eq!(f.spans, vec![(10, 25), (30, 41)]);
        assert_eq!(f.runs_at(5), 5);
        assert_eq!(f.runs_at(10), 25);
        assert_eq!(f.runs_at(25), 25);
        assert_eq!(f.runs_at(35), 41);
        let stalls = Stalls {
            worker: Freezes::new(vec![(0, 10), (20, 30)]),
            process: Freezes::new(vec![(10, 20)]),
            ..Stalls::default()
        };
        assert_eq!(
            stalls.worker_at(0),
            30,
            "one freeze's end is inside the next"
        );
    }

    /// Sleeps wake in deadline order, each late by the floor; a cancelled task is never
    /// polled again; `within` gives up at its deadline.
    #[test]
    fn sleeps_wake_in_order_late_by_the_floor_and_within_gives_up_at_its_deadline() {
        let stalls = Stalls {
            wake_floor_ns: 7,
            ..Stalls::default()
        };
        let core = Core::new(100, stalls);
        let clock = SimClock(Rc::clone(&core));
        let seen = Rc::new(RefCell::new(Vec::new()));
        let main = {
            let (clock, seen) = (clock.clone(), Rc::clone(&seen));
            async move {
                let late = {
                    let (clock2, seen) = (clock.clone(), Rc::clone(&seen));
                    clock.spawn(async move {
                        clock2.sleep_until(500).await;
                        seen.borrow_mut().push(("late", clock2.monotonic_ns()));
                    })
                };
                let early = {
                    let (clock2, seen) = (clock.clone(), Rc::clone(&seen));
                    clock.spawn(async move {
                        clock2.sleep_until(50).await;
                        seen.borrow_mut().push(("early", clock2.monotonic_ns()));
                    })
                };
                early.await;
                drop(late);
                let never = clock.sleep_until(1_000);
                assert_eq!(clock.within(200, never).await, None);
                seen.borrow_mut().push(("gave up", clock.now_ns()));
            }
        };
        struct Nothing;
        impl Beside for Nothing {
            fn due(&self, _: u64) -> u64 {
                u64::MAX
            }
            fn look(&mut self, at: u64, _: u64) {
                panic!("nothing is beside this worker, yet a look came at {at}")
            }
        }
        core.run(main, &mut Nothing, || {});
        assert_eq!(
            *seen.borrow(),
            vec![("early", 157), ("gave up", 207)],
            "the cancelled task never ran"
        );
    }
}
