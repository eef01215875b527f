//! What a worker stands on (issue 51 item 2): a clock it sleeps on and a transport it reaches
//! the target through, the two traits the production worker loop (`pacer::run_worker`) and its
//! request tasks (`execute::execute`) are written against. In a recording they are compio's
//! runtime on the worker's io_uring and the real HTTP client (`pacer::Ring`, `pacer::Wire`);
//! in the tests, a virtual clock and a scripted target (`sim.rs`) that run the same loop, the
//! same judges and the same record assembly deterministically, in milliseconds, with nothing
//! sleeping.
//!
//! Everything here is single-threaded: one worker's tasks share one thread, so nothing needs to
//! be `Send`.

use std::cell::Cell;
use std::future::Future;
use std::rc::Rc;
use std::time::Duration;

use percentes_formats::journal::records::RequestRecord;
use percentes_formats::schedule::Entry;

use super::context::WorkerContext;
use super::http2::Carried;
use crate::exchange::{Exchange, Rule, Verdict};

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

    /// Keeps spare connections ahead of need (issue 20) until `running` falls, the run stops or
    /// the schedule ends; `outstanding` is the worker's requests in flight.
    fn keep_spares(
        &self,
        ctx: &WorkerContext,
        outstanding: &Cell<usize>,
        running: &Cell<bool>,
    ) -> impl Future<Output = ()>;

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
