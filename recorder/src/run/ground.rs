//! What a worker stands on (issue 51 item 2): a clock it sleeps on and a transport it reaches
//! the target through, the two traits the production worker loop (`pacer::run_worker`) and its
//! request tasks (`execute::execute`) are written against. In a recording they are compio's
//! runtime on the worker's io_uring and the real HTTP client (`pacer::Ring`, `pacer::Wire`);
//! in the tests, a virtual clock and a scripted target (`sim.rs`) that run the same loop, the
//! same judges and the same record assembly deterministically, in milliseconds, with nothing
//! sleeping.
//!
//! The worker's traits are single-threaded: one worker's tasks share one thread, so nothing
//! needs to be `Send`. The threads beside the workers (the fault plan, a replica's probe) stand
//! on [`SideGround`]: a blocking clock on the run's epoch scale and name resolution, the host's
//! in a recording ([`Host`]), in the simulator a virtual clock handed back and forth with the
//! simulated worker's (`sim/beside.rs`), so the same thread's code runs there.

use std::future::Future;
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use percentes_formats::journal::records::RequestRecord;
use percentes_formats::schedule::Entry;

use super::context::WorkerContext;
use super::http2::Carried;
use super::state::Shared;
use crate::error::RecordError;
use percentes_response::exchange::{Exchange, Rule, Verdict};

/// A worker's clock and the tasks that share its thread.
pub(super) trait Clock: 'static {
    /// A spawned task: awaiting it waits for its end; dropping it cancels it.
    type Task: Future;

    /// The epoch on this clock's monotonic scale, ns.
    fn monotonic_epoch_ns(&self) -> u64;

    /// The clock's monotonic reading now, ns.
    fn monotonic_ns(&self) -> u64;

    /// Time since the epoch now, ns; 0 before the epoch.
    fn now_ns(&self) -> u64 {
        self.monotonic_ns()
            .saturating_sub(self.monotonic_epoch_ns())
    }

    /// Sleeps until the monotonic clock reads `ns` (at once if it has).
    fn sleep_until_monotonic(&self, ns: u64) -> impl Future<Output = ()>;

    /// Sleeps until `ns` after the epoch.
    fn sleep_until(&self, ns: u64) -> impl Future<Output = ()> {
        self.sleep_until_monotonic(self.monotonic_epoch_ns().saturating_add(ns))
    }

    /// Sleeps for `duration`.
    fn sleep(&self, duration: Duration) -> impl Future<Output = ()>;

    /// `work`'s output, or `None` when `deadline_ns` after the epoch comes first (`work` is
    /// then dropped where it stood).
    fn within<F: Future>(
        &self,
        deadline_ns: u64,
        work: F,
    ) -> impl Future<Output = Option<F::Output>>;

    /// Starts `task` on the worker's thread.
    fn spawn<F: Future<Output = ()> + 'static>(&self, task: F) -> Self::Task;

    /// Lets `task` run to its end on its own.
    fn detach(task: Self::Task);
}

/// How a worker's requests reach the target.
pub(super) trait Transport: 'static {
    /// Opens the warm pool (SPEC §1's floor) before the epoch: each connect within the connect
    /// budget, none past the epoch, none once the run is stopped.
    fn warm(&self, ctx: &WorkerContext) -> impl Future<Output = ()>;

    /// Retires every idle connection past its idle limit, or within `ahead` of it, counted as
    /// expired (`Local::retire_expired`).
    fn retire_expired(&self, shared: &Shared, ahead: Duration);

    /// What the spare keeper counts as idle capacity now.
    fn idle_capacity(&self) -> usize;

    /// The worker's mean time from dispatch to terminal, s (`None` before a request ends).
    fn service_s(&self) -> Option<f64>;

    /// Opens one connection ahead of need, by `deadline_ns` after the epoch, and pools it:
    /// `Ok(true)` pooled, `Ok(false)` of no use (an HTTP/2 run whose server declined it), `Err`
    /// when the connect failed.
    fn open_spare(
        &self,
        ctx: &WorkerContext,
        deadline_ns: u64,
    ) -> impl Future<Output = Result<bool, ()>>;

    /// The rule the route's answers are held to.
    fn rule(&self, route: u32) -> Rc<Rule>;

    /// One request's exchange, from taking or opening its connection to the end of its answer:
    /// its stamps in `record`, its events through `exchange`, how it was carried in `carried`.
    /// Its deadline is its caller's (`Clock::within`), which drops the future where it stood.
    fn talk(
        &self,
        ctx: &WorkerContext,
        entry: &Entry,
        record: &mut RequestRecord,
        exchange: &mut Exchange,
        carried: &mut Carried,
    ) -> impl Future<Output = Verdict>;

    /// A finished request's time from dispatch to terminal, s (the spare keeper's service time).
    fn served(&self, seconds: f64);
}

/// How often a thread beside the workers, sleeping, looks at the run's stop flag.
const STOP_LOOK: Duration = Duration::from_millis(20);

/// What a thread beside the workers stands on: its clock, and the names it resolves.
pub(super) trait SideGround {
    /// Time since the epoch now, ns; 0 before it.
    fn now_ns(&self) -> u64;

    /// Sleeps until `ns` after the epoch (returns at once if that has passed).
    fn sleep_until(&self, ns: u64);

    /// The address a name (`host:port`, an SRV name, or an address) resolves to now.
    fn resolve(
        &self,
        address: &str,
        nameserver: Option<SocketAddr>,
    ) -> Result<SocketAddr, RecordError>;

    /// Sleeps until `due_ns` after the epoch, looking at `stop` every [`STOP_LOOK`]: false when
    /// the run stopped first.
    fn sleep_until_or_stop(&self, due_ns: u64, stop: &AtomicBool) -> bool {
        let look = STOP_LOOK.as_nanos() as u64;
        loop {
            let now = self.now_ns();
            if now >= due_ns {
                return true;
            }
            if stop.load(Ordering::Relaxed) {
                return false;
            }
            self.sleep_until(due_ns.min(now + look));
        }
    }
}

/// The host's monotonic clock and its resolver: a recording's threads beside the workers.
pub(super) struct Host {
    /// The run's epoch.
    pub epoch: Instant,
}

impl SideGround for Host {
    fn now_ns(&self) -> u64 {
        super::host::now_ns(self.epoch)
    }

    fn sleep_until(&self, ns: u64) {
        let due = self.epoch + Duration::from_nanos(ns);
        let now = Instant::now();
        if due > now {
            std::thread::sleep(due - now);
        }
    }

    fn resolve(
        &self,
        address: &str,
        nameserver: Option<SocketAddr>,
    ) -> Result<SocketAddr, RecordError> {
        super::dns::resolve(address, nameserver)
    }

    /// On the host's own instants, so that a thread started before the epoch (the fault plan
    /// arms there, and its clock reads 0 until the epoch) still looks at `stop` every
    /// [`STOP_LOOK`] while it waits for it.
    fn sleep_until_or_stop(&self, due_ns: u64, stop: &AtomicBool) -> bool {
        let due = self.epoch + Duration::from_nanos(due_ns);
        loop {
            let now = Instant::now();
            if now >= due {
                return true;
            }
            if stop.load(Ordering::Relaxed) {
                return false;
            }
            std::thread::sleep((due - now).min(STOP_LOOK));
        }
    }
}
