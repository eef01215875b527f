//! The recording run (Linux): pacer and client on compio (io_uring), the journal writer thread,
//! self-check telemetry, progress, drain and seal.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::sync_channel;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ed25519_dalek::SigningKey;
use percentes_formats::config::Config;
use percentes_formats::journal::header::HostFact;
use percentes_formats::journal::manifest::Shard;
use percentes_formats::journal::records::{EventKind, TimelineSubject};
use percentes_formats::journal::records::{EventRecord, Record};
use percentes_formats::journal::{JournalWriter, WriteError};

use crate::canary::CanaryServer;
use crate::request::{ExtraHeaders, Target};

mod accelerator;
mod baseline;
mod behind;
mod cgroup;
mod child;
mod client;
mod connect;
mod context;
mod dispatch;
mod dns;
pub mod doctor;
mod escape_watch;
mod events;
mod execute;
mod fault;
mod ground;
mod h2io;
mod host;
pub mod netpol;
pub(crate) use host::monotonic_now_ns;
mod http2;
mod live;
mod pacer;
mod plan;
mod preflight;
mod probes;
mod scrapes;
mod setup;
mod shard;
mod signals;
/// The production worker loop on simulated time and a scripted target, and the journal such a
/// run would write: this crate's tests, and the repository's (the `sim` feature), which read
/// that journal with the analyzer.
#[cfg(any(test, feature = "sim"))]
pub mod sim;
mod state;
mod summary;
mod telemetry;
mod tls;
mod writer;

use baseline::BaselineTally;
use connect::Dialer;
use context::WorkerContext;
use escape_watch::EscapeWatch;
use fault::fault_thread;
use ground::Host;
use host::now_ns;
use host::{allowed_cpus, host_facts, ignore_file_size_signal, placement_fact, ready_descriptors};
use pacer::{deferred_task_work_available, io_uring_usable, worker};
use preflight::preflight;
use probes::observers;
use setup::{
    create_outputs, host_check, journal_header, seal_of, setup_facts, spawn_telemetry, templates,
};
use telemetry::journal_after_run;
use tls::tls_connector;
use writer::{writer_thread, HeadLog, Journal};

use crate::error::io;
pub use crate::error::{ErrorKind, RecordError};
pub use dispatch::STALL_TICK;
pub use plan::BaselineRule;
pub use plan::EPOCH_LEAD;
pub use setup::HOST_CHECK;
use state::{Sender, Shared, ToWriter};
pub use telemetry::TELEMETRY_INTERVAL;
pub use writer::{CHECKPOINT_INTERVAL, COMMIT_INTERVAL, WRITER_QUEUE_RECORDS_MAX};

pub use dispatch::STOP_POLL;

pub use pacer::{BATCH_INTERVAL, BATCH_RECORDS_MAX};
pub use plan::{workers_flag, RunPlan, WORKERS_MAX};
pub use preflight::served_models;

pub use shard::START_AT_AHEAD_MAX;
pub use signals::{counts_line, say, stop_on_signals};
pub use summary::{FailureClass, Summary};

/// How the live progress is shown.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Progress {
    /// Nothing but errors.
    Quiet,
    /// One status line a second for a person.
    Human,
    /// One JSON object a second, for a program.
    Json,
}

/// What `record` needs beyond the configuration.
#[derive(Debug)]
pub struct Options {
    /// Where the journal goes.
    pub output: PathBuf,
    /// Overwrite an existing output file.
    pub force: bool,
    /// Signs checkpoints and the seal when set.
    pub signing_key: Option<SigningKey>,
    /// The version the header cites.
    pub tool_version: String,
    /// The commit the header cites.
    pub tool_commit: String,
    /// Worker threads (pacer + client runtimes).
    pub workers: usize,
    /// Run the loopback canary (SPEC §2 receive-path check; [`crate::canary`]).
    pub canary: bool,
    /// What the run prints while it runs.
    pub progress: Progress,
    /// Set from a signal handler: stop dispatching, drain, seal as aborted.
    pub stop: Arc<AtomicBool>,
    /// Timeline boundaries reported by the environment while the run goes on (a controller in the
    /// same process, as the demo's): journaled as `timeline` events at the instant reported.
    pub timeline: Option<TimelineInbox>,
    /// Where an orchestrator outside this process hands timeline events to the running
    /// recorder ([`crate::events`]; `record --events-socket PATH`).
    pub events_socket: Option<PathBuf>,
    /// Which share of the schedule this recorder sends ([`Shard::WHOLE`] for a single recorder;
    /// SPEC §2 "Sharded capture"). Only shard 0 runs the fault plan and the replica probes.
    pub shard: Shard,
    /// The agreed epoch, ns since the Unix epoch (`--start-at`); required with more than one shard.
    pub start_at_ns: Option<i64>,
    /// A file that receives every chain head as it is written (`--heads`; SPEC §J.8).
    pub heads: Option<PathBuf>,
    /// The CPUs to pin the workers to (`--cpus`), worker w on the w-th, wrapping around; `None`
    /// (the default) pins nothing and lets the kernel place them (SPEC §2 "Placement").
    pub cpus: Option<Vec<usize>>,
    /// Look at the host for [`HOST_CHECK`] before the journal exists ([`doctor::examine`]):
    /// say what stands in the way of the client gate, and journal what was seen (`host-check`).
    pub host_check: bool,
    /// Where the target's processes were placed beside this recorder, when whoever started them
    /// placed them (the study runner's `[testbed.placement]`): journaled as the
    /// `target-placement` host fact (SPEC §2 "Placement").
    pub target_placement: Option<String>,
    /// The proxy in front of the target and its timing-relevant settings, when whoever started
    /// it said so (the study runner's `[testbed.proxy]`): journaled as the `proxy` host fact.
    pub proxy: Option<String>,
}

impl Options {
    /// A recording into `output` as a library caller most often wants it: a new file (no
    /// overwrite), unsigned, one worker, the canary on, no progress, a stop flag of its own, the
    /// whole schedule from an epoch of its own, no heads file.
    pub fn new(output: PathBuf) -> Options {
        Options {
            output,
            force: false,
            signing_key: None,
            tool_version: env!("CARGO_PKG_VERSION").into(),
            tool_commit: "unknown".into(),
            workers: 1,
            canary: true,
            progress: Progress::Quiet,
            stop: Arc::new(AtomicBool::new(false)),
            timeline: None,
            events_socket: None,
            shard: Shard::WHOLE,
            start_at_ns: None,
            heads: None,
            cpus: None,
            host_check: false,
            target_placement: None,
            proxy: None,
        }
    }
}

/// Where a controller reports timeline boundaries (reschedule, container start, weight load,
/// detection...) for the journal; see formats/JOURNAL.md for the subjects the analyzer reads.
/// It also tells the controller the run's epoch once the recorder has fixed it, so a controller
/// that acts on the schedule's clock (a rollout at a stated second) acts on the same one.
#[derive(Clone, Debug, Default)]
pub struct TimelineInbox {
    reported: Arc<std::sync::Mutex<Vec<Reported>>>,
    epoch: Arc<std::sync::OnceLock<Instant>>,
}

/// One reported boundary: when, subject, detail, value.
type Reported = (Instant, String, String, Option<i64>);

impl TimelineInbox {
    /// Reports that `subject` happened now.
    pub fn report(&self, subject: TimelineSubject, detail: &str, value: Option<i64>) {
        self.report_at(Instant::now(), subject, detail, value);
    }

    /// Reports that `subject` happened at `at` (on the monotonic clock, as the recorder's epoch).
    pub fn report_at(
        &self,
        at: Instant,
        subject: TimelineSubject,
        detail: &str,
        value: Option<i64>,
    ) {
        if let Ok(mut inbox) = self.reported.lock() {
            inbox.push((at, subject.name().to_owned(), detail.to_owned(), value));
        }
    }

    /// The run's epoch (the schedule's time zero) on the monotonic clock, once the recorder
    /// has fixed it; `None` before.
    pub fn epoch(&self) -> Option<Instant> {
        self.epoch.get().copied()
    }

    fn fix_epoch(&self, epoch: Instant) {
        // A second recording with the same inbox keeps the first epoch: one inbox, one run.
        let _ = self.epoch.set(epoch);
    }

    fn drain(&self) -> Vec<Reported> {
        self.reported
            .lock()
            .map(|mut inbox| std::mem::take(&mut *inbox))
            .unwrap_or_default()
    }
}

/// Journals what the inbox holds as `timeline` events.
fn journal_timeline(inbox: &TimelineInbox, epoch: Instant, sender: &Sender) {
    for (at, subject, detail, value) in inbox.drain() {
        sender.send(Record::Event(EventRecord {
            at_ns: at.saturating_duration_since(epoch).as_nanos() as u64,
            kind: EventKind::Timeline.code(),
            subject,
            detail,
            value,
        }));
    }
}

/// Tells `inbox` the run's epoch, then journals what it holds every 50 ms until the run is
/// done, and once more after.
fn spawn_timeline(
    inbox: TimelineInbox,
    epoch: Instant,
    sender: Sender,
    shared: Arc<Shared>,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    inbox.fix_epoch(epoch);
    std::thread::Builder::new()
        .name("timeline".into())
        .spawn(move || {
            while !shared.done.load(Ordering::Relaxed) {
                journal_timeline(&inbox, epoch, &sender);
                std::thread::sleep(Duration::from_millis(50));
            }
            journal_timeline(&inbox, epoch, &sender);
        })
}

/// Records a run. Blocks until the journal is sealed.
pub fn record(config: &Config, options: &Options) -> Result<Summary, RecordError> {
    let target = Target::parse(&config.target.base_url)?;
    options
        .shard
        .check()
        .map_err(|e| RecordError::caused(ErrorKind::Config, e.to_string(), e))?;
    let plan = Arc::new(
        RunPlan::new(config, options.workers).and_then(|plan| plan.for_shard(options.shard))?,
    );
    let workers = plan.workers;
    // Before any thread of the run exists: a table grown mid-run stalls the thread that grew it.
    let descriptors = ready_descriptors(&plan)?;
    ignore_file_size_signal();
    if options.progress != Progress::Quiet {
        for warning in config.warnings() {
            say(&format!("percentes: warning: {warning}"));
        }
    }

    // Everything that can refuse the run does so before the journal exists.
    io_uring_usable()?;
    let allowed = allowed_cpus();
    if let Some(cpus) = &options.cpus {
        doctor::check_cpus(cpus, &allowed)?;
    }
    let placement = placement_fact(options.cpus.as_deref(), &allowed, workers);
    let host_check = host_check(options)?;
    let extra = ExtraHeaders::new(&config.target, |v| std::env::var(v).ok())?;
    let tls = if target.tls {
        Some(tls_connector(config)?)
    } else {
        None
    };
    let dialer = Dialer::of(config, &target, &plan, tls.clone());
    let (templates, rules, prompt_facts) = templates(config, &target, &extra, &plan)?;
    let preflight = if config.target.preflight {
        let done = preflight(
            config,
            &target,
            &dialer,
            &extra,
            &plan,
            Some((&templates[0], config.routes[0].path.as_str())),
            &options.stop,
        )?;
        if options.progress != Progress::Quiet {
            say(&format!("pre-flight: {}", done.summary));
        }
        if let Some(warning) = &done.warning {
            say(&format!("percentes: warning: {warning}"));
        }
        Some(done)
    } else {
        None
    };
    let facts = setup_facts(
        config,
        descriptors,
        &preflight,
        (placement, options),
        host_check,
        prompt_facts,
    )?;

    // The epoch: now plus the lead, or the agreed instant for every shard (a refused late start
    // leaves no journal behind).
    let start = shard::start(
        options.shard,
        options.start_at_ns,
        plan.start_late_max,
        &options.stop,
    )?;
    let (file, heads_file) = create_outputs(options)?;

    let deferred_task_work = deferred_task_work_available();
    // The recorder's own cgroup, read beside /proc/stat each second (G2.3 in a container).
    let cgroup = cgroup::Cgroup::discover(std::path::Path::new("/"));
    let cgroup_fact = match &cgroup {
        Ok(cgroup) => cgroup.fact(),
        Err(why) => format!("not read: {why} (G2.3 reads /proc/stat)"),
    };
    let cgroup = cgroup.ok();
    let canary_server = if options.canary {
        match CanaryServer::bind() {
            Ok(server) => Some(server),
            Err(e) => {
                if options.progress != Progress::Quiet {
                    say(&format!(
                        "the loopback canary cannot bind 127.0.0.1 ({e}); recording without it"
                    ));
                }
                None
            }
        }
    } else {
        None
    };
    let (epoch, monotonic_epoch_ns, realtime_epoch_ns) = (
        start.epoch,
        start.monotonic_epoch_ns,
        start.realtime_epoch_ns,
    );
    let mut host = host_facts(
        workers,
        deferred_task_work,
        canary_server.is_some(),
        config,
        &target,
    );
    host.push(HostFact::CgroupCpu.entry(cgroup_fact));
    host.extend(facts);
    host.extend(start.facts);
    let clock = (monotonic_epoch_ns, realtime_epoch_ns);
    let header = journal_header(config, options, &plan, clock, host);

    // The header is written and synced here, before any load: a journal that cannot take its
    // header refuses the run instead of recording nothing.
    let handle = file
        .try_clone()
        .map_err(io("cannot open a second handle to the journal"))?;
    let mut journal_writer = JournalWriter::create(file, &header, options.signing_key.clone())
        .map_err(RecordError::journal)?;
    journal_writer
        .get_mut()
        .sync_data()
        .map_err(|e| RecordError::journal(WriteError::Io(e)))?;
    let mut heads = HeadLog::new(heads_file, options.progress == Progress::Json);
    heads.emit(
        "header",
        ("", String::new()),
        0,
        &journal_writer.chain_head(),
    );
    let journal = Journal {
        writer: journal_writer,
        file: handle,
        heads,
    };
    let shared = Arc::new(Shared::new(workers, BaselineTally::new(&plan)));
    let (tx, rx) = sync_channel(WRITER_QUEUE_RECORDS_MAX);
    let writer = {
        let shared = Arc::clone(&shared);
        let watch = EscapeWatch::new(config, Arc::clone(&options.stop));
        let stop = Arc::clone(&options.stop);
        std::thread::Builder::new()
            .name("journal-writer".into())
            .spawn(move || writer_thread(journal, rx, &shared, epoch, watch, &stop))
            .map_err(io("cannot start the journal writer thread"))?
    };
    let sender = Sender {
        tx,
        shared: Arc::clone(&shared),
        stop: Arc::clone(&options.stop),
    };

    // The loopback canary (SPEC §2): a failure to bind loses the check, not the run.
    let (canary_address, canary_server) = match canary_server {
        Some(server) => {
            let address = server.address().ok();
            let shared = Arc::clone(&shared);
            let thread = std::thread::Builder::new()
                .name("canary".into())
                .spawn(move || server.serve(epoch, workers, &shared.done))
                .map_err(io("cannot start the canary thread"))?;
            (address, Some(thread))
        }
        None => (None, None),
    };
    let measured = plan.measured_span_ns;
    let telemetry = spawn_telemetry(config, &plan, options, (&shared, &sender), epoch, cgroup)?;

    // Shard 0 coordinates: the fault plan and the probes run once per run, not once per shard.
    let coordinator = options.shard.index == 0;
    let fault = if coordinator && plan.inject_at_ns.is_some() {
        let sender = sender.clone();
        let shared = Arc::clone(&shared);
        let (plan, fault, host) = (Arc::clone(&plan), config.fault.clone(), Host { epoch });
        let stop = Arc::clone(&options.stop);
        Some(
            std::thread::Builder::new()
                .name("fault-plan".into())
                .spawn(move || fault_thread((&plan, &fault), &host, (&sender, &shared), &stop))
                .map_err(io("cannot start the fault-plan thread"))?,
        )
    } else {
        None
    };
    // The replicas' probes (G7, replica-ready) and the server's metrics (§2), once per run.
    let probes = match coordinator {
        true => observers(config, &plan, epoch, (&sender, &shared), &options.stop)?,
        false => Vec::new(),
    };
    // Timeline events from outside the process (§5), served until the run is done.
    let external = match &options.events_socket {
        Some(path) => {
            let listener = events::bind(path)?;
            let (path, sender, shared) = (path.clone(), sender.clone(), Arc::clone(&shared));
            let clocks = (epoch, monotonic_epoch_ns, realtime_epoch_ns);
            let thread = std::thread::Builder::new()
                .name("events".into())
                .spawn(move || events::serve(listener, path, clocks, &sender, &shared));
            Some(thread.map_err(io("cannot start the events thread"))?)
        }
        None => None,
    };
    let timeline = options
        .timeline
        .clone()
        .map(|inbox| spawn_timeline(inbox, epoch, sender.clone(), Arc::clone(&shared)))
        .transpose()
        .map_err(io("cannot start the timeline thread"))?;
    let mut handles = Vec::new();
    for w in 0..workers {
        let ctx = WorkerContext {
            worker: w,
            plan: Arc::clone(&plan),
            dialer: dialer.clone(),
            epoch,
            monotonic_epoch_ns,
            canary: canary_address,
            deferred_task_work,
            rules: rules.clone(),
            templates: templates.clone(),
            sender: sender.clone(),
            shared: Arc::clone(&shared),
            stop: Arc::clone(&options.stop),
            cpus: options.cpus.clone(),
            secrets: extra.clone(),
        };
        handles.push(
            std::thread::Builder::new()
                .name(format!("worker-{w}"))
                .spawn(move || worker(ctx))
                .map_err(io("cannot start a worker thread"))?,
        );
    }
    let mut worker_error = None;
    for h in handles {
        match h.join() {
            Ok(Ok(())) => {}
            Ok(Err(e)) => worker_error = Some(e),
            Err(_) => {
                worker_error = Some(RecordError::new(
                    ErrorKind::Internal,
                    "a worker thread panicked",
                ))
            }
        }
    }
    shared.done.store(true, Ordering::Relaxed);
    if let Some(fault) = fault {
        let _ = fault.join();
    }
    let _ = telemetry.join();
    if let Some(canary) = canary_server {
        let _ = canary.join();
    }
    journal_after_run(&shared, now_ns(epoch), measured, &sender);
    for probe in probes {
        let _ = probe.join();
    }
    for thread in timeline.into_iter().chain(external) {
        let _ = thread.join();
    }
    let aborted = options.stop.load(Ordering::Relaxed);
    let escaped = shared.escaped.lock().expect("escape lock").clone();
    let writer_failed = shared.writer_failed.lock().expect("writer lock").clone();
    let (status, reason) = seal_of(worker_error.as_ref(), writer_failed, escaped, aborted);
    let _ = sender.tx.send(ToWriter::Finish(status, reason.clone()));
    drop(sender);
    let sealed = writer
        .join()
        .map_err(|_| RecordError::new(ErrorKind::Internal, "the journal writer thread panicked"))?
        .map_err(
            |seal| match shared.writer_failed.lock().expect("writer lock").clone() {
                Some(cause) => RecordError::unsealed(&options.output, &cause.to_string(), seal),
                None => RecordError::journal(seal),
            },
        )?;
    Ok(Summary::of(
        options.output.clone(),
        (status, reason, sealed),
        &shared,
        preflight.map(|p| p.summary),
    ))
}

#[cfg(test)]
mod tests {
    use super::client::blank;
    use super::dispatch::StallPool;
    use super::*;
    use percentes_formats::journal::records::class_code;
    use percentes_formats::journal::records::Outcome;
    use percentes_formats::schedule::Entry;

    const MS: u64 = 1_000_000;

    /// A dev (factor 10) two-route configuration with a declaration: `protected` on route 0.
    fn declared(abort: &str) -> Config {
        Config::parse(
            format!(
                r#"schema_version = 1
profile = "dev"
[target]
kind = "mock"
base_url = "http://127.0.0.1:9"
model = "mock"
replicas = ["replica-0", "replica-1"]
[schedule]
seed = 1
arrival = "poisson"
[calibration]
lambda_max_rps = 20.0
[fault]
variant = "clean-delete"
victim = "replica-1"
injector = "kill-pid-file"
pid_file = "/nonexistent"
[declaration]
experiment_id = "t"
release = "r"
dataset = "d"
target = "replica-1"
boundary = "b"
protected_routes = ["protected"]
shed_routes = ["shed"]
cleanup = "c"
[declaration.abort]
{abort}
[[routes]]
label = "protected"
path = "/v1/chat/completions"
[[routes]]
label = "shed"
path = "/v1/chat/completions"
"#
            )
            .as_bytes(),
        )
        .unwrap()
    }

    fn request(index: u64, route: u32, class: &str, terminal_ns: u64, replica: &str) -> Record {
        let code = class_code(class).unwrap();
        let outcome = match class {
            "correct-success" => Outcome::Completed,
            "timeout" | "run-end" => Outcome::Censored,
            // As `pacer::clients_lateness` writes it.
            "client-late" => Outcome::Undispatched,
            _ => Outcome::Errored,
        };
        let mut record = blank(&Entry {
            index,
            intended_ns: terminal_ns.saturating_sub(MS),
            route,
            phase: 0,
            session: index,
            turn: 0,
        });
        record.outcome = outcome as u8;
        record.class = code;
        record.terminal_ns = terminal_ns;
        record.replica = replica.into();
        Record::Request(record)
    }

    #[test]
    fn the_protected_budget_counts_only_protected_requests_ending_inside_its_window() {
        // 20 % over 5 s (dev factor 10: 0.5 s), at least 5 requests.
        let config = declared("protected_failure_rate = 0.2\nmin_requests = 5");
        let stop = Arc::new(AtomicBool::new(false));
        let mut watch = EscapeWatch::new(&config, Arc::clone(&stop)).unwrap();
        assert_eq!(watch.window_ns, 500 * MS);
        // Shed-route failures never count; run-end censoring and the client's own lateness
        // count on neither side of the share (a client-late request used to count as one that
        // did not fail, diluting it).
        for i in 0..20 {
            assert!(watch
                .observe(&request(i, 1, "reset", i * MS, "replica-1"))
                .is_none());
            assert!(watch
                .observe(&request(100 + i, 0, "run-end", i * MS, ""))
                .is_none());
            assert!(watch
                .observe(&request(150 + i, 0, "client-late", i * MS, "replica-0"))
                .is_none());
        }
        assert!(watch.recent.is_empty(), "{:?}", watch.recent);
        // Four protected requests, one failed: 1 of 4 is over 0.2 but under min_requests.
        let mut at = 100 * MS;
        for (i, class) in [
            "correct-success",
            "timeout",
            "correct-success",
            "correct-success",
        ]
        .iter()
        .enumerate()
        {
            assert!(watch
                .observe(&request(200 + i as u64, 0, class, at, "replica-0"))
                .is_none());
            at += 10 * MS;
        }
        // A fifth success: 1 of 5 = 0.2, not above the budget.
        assert!(watch
            .observe(&request(210, 0, "correct-success", at, "replica-0"))
            .is_none());
        // 0.6 s later the first five have left the window: a failure now is 1 of 1, too few.
        at += 600 * MS;
        assert!(watch
            .observe(&request(211, 0, "reset", at, "replica-0"))
            .is_none());
        assert!(!stop.load(Ordering::SeqCst));
        for i in 0..3 {
            assert!(watch
                .observe(&request(
                    212 + i,
                    0,
                    "correct-success",
                    at + MS,
                    "replica-0"
                ))
                .is_none());
        }
        // 2 of 5 = 0.4 > 0.2 with 5 >= 5: the watch fires, once, and raises the stop flag.
        let event = watch
            .observe(&request(215, 0, "refused", at + 2 * MS, "replica-0"))
            .unwrap();
        assert_eq!(event.subject, "protected-budget");
        assert_eq!(event.at_ns, at + 2 * MS);
        assert!(
            event.detail.contains("2 of the 5 protected requests"),
            "{}",
            event.detail
        );
        assert!(stop.load(Ordering::SeqCst));
        assert!(watch
            .observe(&request(216, 0, "refused", at + 3 * MS, "replica-0"))
            .is_none());
    }

    #[test]
    fn errors_outside_the_declared_target_and_failed_cleanup_are_triggers() {
        let config = declared("undeclared_replica_errors = true");
        let stop = Arc::new(AtomicBool::new(false));
        let mut watch = EscapeWatch::new(&config, Arc::clone(&stop)).unwrap();
        // Errors on the target, and an unattributed error, are inside the blast radius.
        assert!(watch
            .observe(&request(1, 0, "reset", MS, "replica-1"))
            .is_none());
        assert!(watch.observe(&request(2, 0, "reset", MS, "")).is_none());
        let event = watch
            .observe(&request(3, 1, "http-status", 2 * MS, "replica-0"))
            .unwrap();
        assert_eq!(event.subject, "undeclared-replica");
        assert!(event.detail.contains("replica-0"), "{}", event.detail);

        let mut watch = EscapeWatch::new(&declared(""), Arc::new(AtomicBool::new(false))).unwrap();
        // Off by default: an error elsewhere is not a trigger.
        assert!(watch
            .observe(&request(3, 1, "http-status", 2 * MS, "replica-0"))
            .is_none());
        let failed = |detail: &str| {
            Record::Event(EventRecord {
                at_ns: 9 * MS,
                kind: EventKind::FaultFailed.code(),
                subject: "replica-1".into(),
                detail: detail.into(),
                value: None,
            })
        };
        // A failed fire is fault fidelity's business; a failed removal is an escape.
        assert!(watch.observe(&failed("kill(1, SIGKILL) failed")).is_none());
        let event = watch
            .observe(&failed("removal failed: iptables exited 1"))
            .unwrap();
        assert_eq!(
            (event.subject.as_str(), event.at_ns),
            ("cleanup-failed", 9 * MS)
        );

        let mut off = EscapeWatch::new(
            &declared("cleanup_failure = false"),
            Arc::new(AtomicBool::new(false)),
        )
        .unwrap();
        assert!(off.observe(&failed("removal failed: x")).is_none());
        // No declaration, no watch.
        let text = String::from_utf8(config.raw_bytes().to_vec()).unwrap();
        let (head, tail) = text.split_once("[declaration]").unwrap();
        let routes = &tail[tail.find("[[routes]]").unwrap()..];
        let plain = Config::parse(format!("{head}{routes}").as_bytes()).unwrap();
        assert!(EscapeWatch::new(&plain, Arc::new(AtomicBool::new(false))).is_none());
    }

    #[test]
    fn the_stall_pool_reads_the_nearest_rank_p99_at_its_bucket_edge() {
        let mut pool = StallPool::default();
        assert_eq!(pool.p99_upper_ns(), None);
        // 990 ticks at 40 us, 10 at 3 ms: rank 990 is the last 40 us sample.
        for _ in 0..990 {
            pool.add(40_000);
        }
        for _ in 0..10 {
            pool.add(3_000_000);
        }
        assert_eq!(
            pool.p99_upper_ns(),
            Some(50_000),
            "the 40-50 us bucket's upper edge"
        );
        // One more slow tick moves rank 991 into the slow ones: the bucket edge, capped at the
        // largest sample seen.
        pool.add(3_000_000);
        assert_eq!(pool.p99_upper_ns(), Some(3_000_000));
        // Past 100 ms the coarse tier reads to the millisecond, not the maximum (issue 32: a p99
        // beyond 100 ms printed the maximum under the name p99).
        let mut far = StallPool::default();
        for _ in 0..97 {
            far.add(20_000);
        }
        for late_ms in [250u64, 800, 3_000] {
            far.add(late_ms * 1_000_000 + 400_000);
        }
        assert_eq!(
            far.p99_upper_ns(),
            Some(801_000_000),
            "rank 99 of 100 is the 800 ms tick, not the 3 s maximum"
        );
        for _ in 0..100 {
            far.add(20_000);
        }
        assert_eq!(
            far.p99_upper_ns(),
            Some(251_000_000),
            "rank 198 of 200: the 250 ms tick"
        );
        // Beyond the last bucket (60 s) the maximum is read.
        let mut beyond = StallPool::default();
        beyond.add(61_000_000_000);
        assert_eq!(beyond.p99_upper_ns(), Some(61_000_000_000));
    }

    /// Issue 15's case: eight SIGSTOPs of 0.4 s in a run gave a stall p99 of 1.99 ms while the
    /// send skew reached 419 ms, because a wake 400 ms late was one sample. Counting the ticks
    /// the stall swallowed makes the gate see it. (Mutation-checked: with `tick_lateness`
    /// yielding only `late_ns`, the p99 below is the 50 us bucket's edge and this test fails.)
    #[test]
    fn a_wake_late_by_k_periods_counts_its_k_missed_ticks() {
        let period = STALL_TICK.as_nanos() as u64;
        // One second at 40 us with a wake 400.3 ms late in it: 600 healthy ticks and the 401
        // the stall accounts for.
        let mut pool = StallPool::default();
        for _ in 0..600 {
            pool.add(40_000);
        }
        for late in dispatch::tick_lateness(400_300_000, period) {
            pool.add(late);
        }
        // Rank ceil(0.99 x 1001) = 991 falls among the stall's samples (the 391st in ascending
        // order, 390.3 ms), past the pool's 100 ms of buckets, so it reads the maximum: the gate
        // fails, as it must.
        let p99 = pool.p99_upper_ns().unwrap();
        let limit_ns = percentes_formats::pins::value::GATES_RUNTIME_STALL_P99_US as u64 * 1000;
        assert!(
            p99 > limit_ns,
            "p99 {p99} ns should fail the {limit_ns} ns gate"
        );
        // A wake 400.3 ms late at a 1 ms period: the tick it was due for and the 400 behind it,
        // late by 400.3, 399.3, ..., 0.3 ms.
        let ticks: Vec<u64> = dispatch::tick_lateness(400_300_000, period).collect();
        assert_eq!(ticks.len(), 401);
        assert_eq!(ticks[0], 400_300_000);
        assert_eq!(ticks[400], 300_000);
        assert!(ticks.windows(2).all(|w| w[0] - w[1] == period));
        // A wake under a period late is one sample, as before.
        assert_eq!(
            dispatch::tick_lateness(40_000, period).collect::<Vec<_>>(),
            [40_000]
        );
    }
}
