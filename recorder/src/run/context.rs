//! What a worker is handed when it starts ([`WorkerContext`]): the plan, the clock's anchors,
//! how to reach the target, and what it shares with the other threads.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Instant;

use super::connect::Dialer;
use super::plan::RunPlan;
use super::state::{Sender, Shared};
use crate::request::Template;
use percentes_response::exchange::Rule;

pub(super) struct WorkerContext {
    pub(super) worker: usize,
    /// The run's plan, shared by every worker (the schedule, the timeout, the pool floor, which
    /// routes stream); no worker holds the configuration.
    pub(super) plan: Arc<RunPlan>,
    /// How connections to the target are opened.
    pub(super) dialer: Dialer,
    pub(super) epoch: Instant,
    /// `epoch` on CLOCK_MONOTONIC, in ns (the journal's clock anchor): the pacer's kernel
    /// deadlines are absolute on that clock.
    pub(super) monotonic_epoch_ns: u64,
    /// The loopback canary's address, when it runs.
    pub(super) canary: Option<std::net::SocketAddr>,
    /// Set the ring up for deferred task work ([`ring_setup`](super::pacer::ring_setup)); probed once per run.
    pub(super) deferred_task_work: bool,
    pub(super) rules: Vec<Rule>,
    pub(super) templates: Vec<Template>,
    pub(super) sender: Sender,
    pub(super) shared: Arc<Shared>,
    pub(super) stop: Arc<AtomicBool>,
    /// The CPUs the workers are pinned to (`--cpus`), worker w on the w-th, wrapping around;
    /// `None` leaves them to the kernel.
    pub(super) cpus: Option<Vec<usize>>,
    /// The secrets the requests carry, scrubbed from what a server sends back before it is
    /// journaled ([`crate::request::ExtraHeaders::scrub`]).
    pub(super) secrets: crate::request::ExtraHeaders,
}
