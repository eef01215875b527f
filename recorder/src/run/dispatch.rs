//! The seam between the recorder's decisions and its clock (issue 32 item 7). Everything a
//! worker decides from the time alone lives here as plain state machines that are handed the
//! time rather than reading it: when to send the next request, whether it was reached too late
//! to send, whether the worker has fallen behind, what the stall ticker samples, whether an idle
//! connection is past its limit. The worker loop (`pacer::run_worker`) feeds them its
//! [`Clock`](super::ground::Clock)'s time and sleeps as they say: CLOCK_MONOTONIC and io_uring
//! in a recording, a virtual clock with scripted stalls and a scripted target in the simulation
//! (`sim.rs`, tests only), so every case the recorder must get right under stress runs the
//! production loop deterministically, in milliseconds, with no sleeping.

use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;

use percentes_formats::config::HttpVersion;
use percentes_formats::schedule::Entry;

use super::behind::{Behind, Fired};
use super::plan::RunPlan;

/// What a worker does next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Step {
    /// Sleep until this time (ns from the epoch), then ask again.
    Wait {
        /// The wake-up: the next request's intended time, or the next look at the stop flag.
        until_ns: u64,
    },
    /// Send this request now (reached at `reached_ns`, before its deadline).
    Send {
        /// The request.
        entry: Entry,
        /// When the worker reached it: its dispatch time.
        reached_ns: u64,
    },
    /// Reached at or past its deadline: never sent, `client-late` (SPEC §2).
    Late {
        /// The request.
        entry: Entry,
        /// When the worker reached it.
        reached_ns: u64,
    },
    /// The run is stopping: never sent, censored `run-end`.
    Stopped {
        /// The request.
        entry: Entry,
        /// When the worker reached it.
        reached_ns: u64,
    },
    /// Every request of this worker has been reached.
    Done,
}

/// The rules a worker judges every request it reaches by, at the time it reaches it: the
/// fall-behind policy, the deadline (intended time plus the client timeout) and the stop. The
/// schedule's own requests reach it through the [`Dispatcher`]; a closed or semi-open session's
/// follow-ups, which their session's task waits for, through the same judge.
pub(super) struct Judge {
    timeout_ns: u64,
    behind: Behind,
    /// The same policy over when requests went out (their connect or send began), which a
    /// starved runtime delays after the pacer reached them on time.
    went_out: Behind,
    fired: Option<Fired>,
}

impl Judge {
    /// Judges `entry`, reached at `reached_ns` with the run `stopped` or not.
    pub(super) fn reached(&mut self, entry: Entry, reached_ns: u64, stopped: bool) -> Step {
        // A stopped run judges nothing more: its stop (a signal, a trigger) names its seal.
        if !stopped {
            if let Some(fired) = self.behind.reached(entry.intended_ns, reached_ns) {
                self.fired.get_or_insert(fired);
            }
        }
        // Past its deadline a request is the client's failure even in a stopping run: its
        // terminal is the deadline, never the moment the worker came to it.
        if reached_ns >= entry.intended_ns + self.timeout_ns {
            Step::Late { entry, reached_ns }
        } else if stopped {
            Step::Stopped { entry, reached_ns }
        } else {
            Step::Send { entry, reached_ns }
        }
    }

    /// Judges a request that went out (its connect or its send began) at `out_ns`: the pacer
    /// may reach requests on time while the runtime that should send them is starved, and the
    /// policy must see the load the target received, not the load the pacer meant (SPEC §2
    /// "Falling behind"). Returns whether it went out `client.behind_lag_ms` or more late:
    /// the client's lateness, whatever happened next.
    pub(super) fn went_out(&mut self, intended_ns: u64, out_ns: u64, stopped: bool) -> bool {
        if !stopped {
            if let Some(fired) = self.went_out.reached(intended_ns, out_ns) {
                self.fired.get_or_insert(fired);
            }
        }
        out_ns.saturating_sub(intended_ns) >= self.went_out.lag_ns()
    }

    /// The fall-behind policy's first firing, once.
    pub(super) fn take_fired(&mut self) -> Option<(Fired, u64)> {
        self.fired.take().map(|f| (f, self.behind.lag_ns()))
    }
}

/// One worker's way through its share of the schedule: one request at a time, each at its own
/// absolute intended time, never early, never held (ARCHITECTURE.md, "Pacing"), with the
/// fall-behind policy judging every request it reaches.
pub(super) struct Dispatcher<I: Iterator<Item = Entry>> {
    entries: std::iter::Peekable<I>,
    poll_ns: u64,
    judge: Rc<RefCell<Judge>>,
}

impl<I: Iterator<Item = Entry>> Dispatcher<I> {
    /// A worker's dispatcher over `entries` (its share, in intended order), with the request
    /// timeout, the longest sleep before the stop flag is seen again, and the fall-behind policy.
    pub(super) fn new(entries: I, timeout_ns: u64, poll_ns: u64, behind: Behind) -> Self {
        Dispatcher {
            entries: entries.peekable(),
            poll_ns: poll_ns.max(1),
            judge: Rc::new(RefCell::new(Judge {
                timeout_ns,
                went_out: behind.clone(),
                behind,
                fired: None,
            })),
        }
    }

    /// The judge it shares with the worker's session tasks.
    pub(super) fn judge(&self) -> Rc<RefCell<Judge>> {
        Rc::clone(&self.judge)
    }

    /// The intended time of the request the worker waits to send, if any is left: what the
    /// telemetry thread judges a starved worker by, and the live view's lateness.
    pub(super) fn waiting_ns(&mut self) -> Option<u64> {
        self.entries.peek().map(|e| e.intended_ns)
    }

    /// What to do at `now_ns` (ns from the epoch, so never before it: the worker asks from the
    /// epoch on), with the run `stopped` or not.
    pub(super) fn step(&mut self, now_ns: u64, stopped: bool) -> Step {
        let Some(&entry) = self.entries.peek() else {
            return Step::Done;
        };
        if !stopped && now_ns < entry.intended_ns {
            return Step::Wait {
                until_ns: entry.intended_ns.min(now_ns + self.poll_ns),
            };
        }
        self.entries.next();
        self.judge.borrow_mut().reached(entry, now_ns, stopped)
    }

    /// The fall-behind policy's first firing, once.
    pub(super) fn take_fired(&mut self) -> Option<(Fired, u64)> {
        self.judge.borrow_mut().take_fired()
    }
}

/// The stall ticker's schedule (SPEC §2 "Runtime stall"): absolute deadlines a period apart on
/// the worker's own ring; each wake gives its lateness and that of every tick it stood in for
/// ([`tick_lateness`]), and the next deadline is the first still ahead (no burst of catch-up
/// wakes).
#[derive(Clone, Copy, Debug)]
pub(super) struct StallTicker {
    period_ns: u64,
    deadline_ns: u64,
}

impl StallTicker {
    /// A ticker started at `now_ns` (any clock: the worker uses the monotonic one).
    pub(super) fn new(now_ns: u64, period_ns: u64) -> StallTicker {
        let period_ns = period_ns.max(1);
        StallTicker {
            period_ns,
            deadline_ns: now_ns + period_ns,
        }
    }

    /// When the ticker wants to wake.
    pub(super) fn deadline_ns(&self) -> u64 {
        self.deadline_ns
    }

    /// It woke at `now_ns`: the lateness samples of this wake.
    pub(super) fn woke(&mut self, now_ns: u64) -> impl Iterator<Item = u64> {
        let late = now_ns.saturating_sub(self.deadline_ns);
        self.deadline_ns += self.period_ns * (late / self.period_ns + 1);
        tick_lateness(late, self.period_ns)
    }
}

/// Whether a connection idle for `idle_for` is past its `limit`, or within `ahead` of it (the
/// spare keeper looks two of its periods ahead, never more than half the limit): such a
/// connection is retired, not counted as a spare (issue 32: after an idle gap longer than the
/// limit, the next request must find a fresh connection, not connect in line).
pub(super) fn idle_expired(idle_for: Duration, ahead: Duration, limit: Duration) -> bool {
    idle_for + ahead.min(limit / 2) >= limit
}

/// How far ahead of its idle limit the spare keeper retires a connection: two of its periods, so
/// a connection that would expire before the keeper looks again is replaced now, not counted.
pub(super) const KEEPER_AHEAD: Duration =
    Duration::from_nanos(2 * KEEPER_INTERVAL.as_nanos() as u64);

/// The spare keeper's sizing, handed the time (issue 20, SPEC §2): how many connections it
/// should open now, from the current phase's rate over the workers ([`spare_wanted`]).
pub(super) struct Keeper {
    /// Each phase's end (ns from the epoch) and rate.
    pub(super) phases: Vec<(u64, f64)>,
    /// The run's workers (the rate is shared out over them).
    pub(super) workers: f64,
    /// The client timeout, s (the most a worker can have in flight is its rate times it).
    pub(super) timeout_s: f64,
    /// One HTTP/2 connection carries many streams: open one at a time, then count again.
    pub(super) one_at_a_time: bool,
}

impl Keeper {
    pub(super) fn new(plan: &RunPlan) -> Keeper {
        let mut end = 0u64;
        Keeper {
            phases: plan
                .params
                .phases
                .iter()
                .map(|p| {
                    end += p.duration_ns;
                    (end, p.rate_rps)
                })
                .collect(),
            workers: plan.workers.max(1) as f64,
            timeout_s: plan.timeout.as_secs_f64(),
            one_at_a_time: plan.http != HttpVersion::Http1,
        }
    }

    /// Connections to open at `now_ns`, with the worker's mean service time, what it has in
    /// flight and its idle capacity (after [`idle_expired`] connections were retired).
    pub(super) fn wanted(
        &self,
        now_ns: u64,
        service_s: Option<f64>,
        in_flight: usize,
        idle: usize,
    ) -> usize {
        let rate = self
            .phases
            .iter()
            .find(|&&(end, _)| now_ns < end)
            .map_or(0.0, |&(_, rate)| rate);
        let per_worker = rate / self.workers;
        let cap = (per_worker * self.timeout_s).ceil() as usize + 1;
        let wanted = spare_wanted(per_worker, service_s, in_flight, idle, cap);
        if self.one_at_a_time {
            wanted.min(1)
        } else {
            wanted
        }
    }
}

/// The stall ticker's period (SPEC §2's runtime-stall measure).
pub const STALL_TICK: Duration = Duration::from_millis(1);

/// The longest a worker sleeps without looking at the stop flag.
pub const STOP_POLL: Duration = Duration::from_millis(50);

/// How often the spare keeper looks at the pool.
pub(super) const KEEPER_INTERVAL: Duration = Duration::from_millis(5);

/// The pool is sized for this many times the connections Little's law says are busy.
pub(super) const KEEPER_HEADROOM: f64 = 1.5;

/// How many connections the spare keeper should open now (issue 20, SPEC §2): enough that busy
/// plus idle reach `KEEPER_HEADROOM` times the connections in use, plus one. In use is the larger
/// of Little's law (this worker's scheduled rate times its mean service time) and the requests
/// it has in flight now, which rises at once when the target slows, before any slow request has
/// finished. Never more than `cap` in all (the most a worker can have in flight: its rate times
/// the timeout).
pub(super) fn spare_wanted(
    rate_per_worker: f64,
    service_s: Option<f64>,
    in_flight: usize,
    idle: usize,
    cap: usize,
) -> usize {
    let little = service_s.map_or(0.0, |w| rate_per_worker * w).ceil();
    let busy = little.max(in_flight as f64);
    let target = ((busy * KEEPER_HEADROOM).ceil() as usize + 1).min(cap.max(1));
    target.saturating_sub(in_flight + idle)
}

/// The lateness of every tick one wake accounts for (SPEC §2): the tick it was due for, late by
/// `late_ns`, and each later tick whose deadline passed while the ticker could not run, late by
/// a period less each. A stall of k periods is k + 1 samples, so a long stall weighs in the p99
/// as the share of the interval it took, not as one sample among a thousand. (The ticker is a
/// periodic self-check whose own wakes were suppressed: filling in the ticks it missed is
/// exactly its schedule, unlike synthesizing samples for open-loop requests.)
pub(super) fn tick_lateness(late_ns: u64, period_ns: u64) -> impl Iterator<Item = u64> {
    let period_ns = period_ns.max(1);
    (0..=late_ns / period_ns).map(move |k| late_ns - k * period_ns)
}

/// SPEC §2's runtime-stall measure: each worker's 1 ms ticker on its own ring (`pacer.rs`), so
/// whatever delays a worker's turns (preemption, throttling, a stop, its own work) delays it.
/// The ticks' lateness pooled over the measured span: 10 us buckets up to 100 ms, 1 ms buckets
/// from there to 60 s, and one bucket beyond, so memory is fixed whatever the run length and the
/// p99 is exact to 10 us under 100 ms and to 1 ms under 60 s (before issue 32 a p99 past 100 ms
/// read the maximum).
#[derive(Debug)]
pub(super) struct StallPool {
    pub(super) buckets: Vec<u64>,
    pub(super) coarse: Vec<u64>,
    pub(super) beyond: u64,
    pub(super) count: u64,
    pub(super) max_ns: u64,
}

impl StallPool {
    pub(super) fn add(&mut self, late_ns: u64) {
        let bucket = if late_ns < FINE_END_NS {
            self.buckets
                .get_mut((late_ns / STALL_POOL_BUCKET_NS) as usize)
        } else {
            self.coarse
                .get_mut(((late_ns - FINE_END_NS) / STALL_POOL_COARSE_BUCKET_NS) as usize)
        };
        match bucket {
            Some(bucket) => *bucket += 1,
            None => self.beyond += 1,
        }
        self.count += 1;
        self.max_ns = self.max_ns.max(late_ns);
    }

    /// The nearest-rank p99, as the upper edge of its bucket, capped at the largest sample (the
    /// maximum itself only beyond the last bucket, 60 s).
    pub(super) fn p99_upper_ns(&self) -> Option<u64> {
        if self.count == 0 {
            return None;
        }
        let rank = (self.count as f64 * 0.99).ceil() as u64;
        let edges = (1..=STALL_POOL_BUCKETS as u64)
            .map(|i| i * STALL_POOL_BUCKET_NS)
            .chain(
                (1..=COARSE_BUCKETS as u64).map(|i| FINE_END_NS + i * STALL_POOL_COARSE_BUCKET_NS),
            );
        let mut seen = 0;
        for (n, edge) in self.buckets.iter().chain(&self.coarse).zip(edges) {
            seen += n;
            if seen >= rank {
                return Some(edge.min(self.max_ns.max(1)));
            }
        }
        Some(self.max_ns)
    }
}

pub(super) const STALL_POOL_BUCKET_NS: u64 = 10_000;

pub(super) const STALL_POOL_BUCKETS: usize = 10_000;

/// The coarse tier's bucket width and the lateness where it ends.
pub(super) const STALL_POOL_COARSE_BUCKET_NS: u64 = 1_000_000;

pub(super) const STALL_POOL_COARSE_END_NS: u64 = 60_000_000_000;

const FINE_END_NS: u64 = STALL_POOL_BUCKET_NS * STALL_POOL_BUCKETS as u64;
const COARSE_BUCKETS: usize =
    ((STALL_POOL_COARSE_END_NS - FINE_END_NS) / STALL_POOL_COARSE_BUCKET_NS) as usize;

impl Default for StallPool {
    fn default() -> Self {
        StallPool {
            buckets: vec![0; STALL_POOL_BUCKETS],
            coarse: vec![0; COARSE_BUCKETS],
            beyond: 0,
            count: 0,
            max_ns: 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn entries(intended_ms: &[u64]) -> Vec<Entry> {
        intended_ms
            .iter()
            .enumerate()
            .map(|(i, &ms)| Entry {
                index: i as u64,
                intended_ns: ms * MS,
                route: 0,
                phase: 0,
                session: i as u64,
                turn: 0,
            })
            .collect()
    }

    fn dispatcher(intended_ms: &[u64]) -> Dispatcher<std::vec::IntoIter<Entry>> {
        Dispatcher::new(
            entries(intended_ms).into_iter(),
            300 * MS,
            50 * MS,
            Behind::new(1_000 * MS, 1_000 * MS),
        )
    }

    /// Issue 50: at 2,000 rps the pacer reached every request on time while the starved
    /// runtime began their connects seconds late, and the policy, reading only the pacer, never
    /// fired. Requests reached on time that go out a second or more late, over a second of
    /// intended time, fire it; each such request is the client's lateness; one that goes out
    /// in time ends the run of late ones.
    #[test]
    fn requests_that_go_out_late_fire_the_policy_though_reached_on_time() {
        let intended: Vec<u64> = (0..40).map(|i| i * 50).collect();
        let mut d = dispatcher(&intended);
        let judge = d.judge();
        let mut late = 0;
        for (i, &ms) in intended.iter().enumerate() {
            // Reached on time.
            assert!(matches!(d.step(ms * MS, false), Step::Send { .. }));
            assert!(
                d.take_fired().is_none(),
                "the pacer alone sees nothing late"
            );
            // Went out 1.5 s late (request 3 in time, which restarts the run).
            let out = if i == 3 { ms } else { ms + 1_500 };
            if judge.borrow_mut().went_out(ms * MS, out * MS, false) {
                late += 1;
            }
            if let Some((fired, lag)) = d.take_fired() {
                assert_eq!(lag, 1_000 * MS);
                // The run began at request 4 (200 ms) and spanned 1 s by request 24.
                assert_eq!((fired.since_ns, fired.until_ns), (200 * MS, 1_200 * MS));
                assert_eq!(i, 24);
                assert_eq!(late, 24);
                return;
            }
        }
        panic!("the policy never fired");
    }

    /// Never early: before its time a request is waited for (at most a stop poll at a time);
    /// at or after it, sent; at its deadline or later, late; once stopped, every one left is
    /// stopped at once; then done.
    #[test]
    fn each_request_is_sent_at_its_own_time_and_never_early() {
        let mut d = dispatcher(&[100, 120, 1_000, 2_000]);
        assert_eq!(d.waiting_ns(), Some(100 * MS));
        assert_eq!(d.step(0, false), Step::Wait { until_ns: 50 * MS });
        assert_eq!(d.step(90 * MS, false), Step::Wait { until_ns: 100 * MS });
        assert!(
            matches!(d.step(100 * MS, false), Step::Send { reached_ns, .. } if reached_ns == 100 * MS)
        );
        // 120 ms + 300 ms timeout = 420 ms: reached at 420 ms it is late, not sent.
        assert!(matches!(d.step(420 * MS, false), Step::Late { entry, .. } if entry.index == 1));
        assert!(matches!(d.step(420 * MS, true), Step::Stopped { entry, .. } if entry.index == 2));
        // Stopped, but reached past its deadline (2 s + 300 ms): late, as the client's.
        assert!(matches!(d.step(2_300 * MS, true), Step::Late { entry, .. } if entry.index == 3));
        assert_eq!(d.step(2_301 * MS, true), Step::Done);
        assert_eq!(d.waiting_ns(), None);
        assert!(d.take_fired().is_none());
    }

    /// The ticker's deadlines stay on their grid: a wake 2.5 periods late gives 3 samples and
    /// the next deadline is the first still ahead.
    #[test]
    fn the_stall_ticker_fills_in_the_ticks_a_late_wake_stood_in_for() {
        let mut t = StallTicker::new(0, MS);
        assert_eq!(t.deadline_ns(), MS);
        assert_eq!(t.woke(MS + 10).collect::<Vec<_>>(), vec![10]);
        assert_eq!(t.deadline_ns(), 2 * MS);
        assert_eq!(
            t.woke(4 * MS + MS / 2).collect::<Vec<_>>(),
            vec![2 * MS + MS / 2, MS + MS / 2, MS / 2]
        );
        assert_eq!(t.deadline_ns(), 5 * MS);
    }

    /// Hand-computed: limit 4 s, look-ahead 0.2 s: retired from 3.8 s idle; a look-ahead longer
    /// than half the limit counts as half.
    #[test]
    fn an_idle_connection_is_retired_before_its_limit_by_the_look_ahead() {
        let s = Duration::from_millis;
        assert!(!idle_expired(s(3_799), s(200), s(4_000)));
        assert!(idle_expired(s(3_800), s(200), s(4_000)));
        assert!(idle_expired(s(4_000), Duration::ZERO, s(4_000)));
        assert!(!idle_expired(s(49), s(200), s(100)));
        assert!(idle_expired(s(50), s(200), s(100)));
    }
}
