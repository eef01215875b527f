//! The recording run (Linux): pacer and client on compio (io_uring), the journal writer thread,
//! self-check telemetry, progress, drain and seal.

use std::cell::{Cell, RefCell};
use std::fs::File;
use std::io::Write;
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use compio::io::{AsyncRead, AsyncWriteExt};
use compio::net::TcpStream;
use compio::tls::{TlsConnector, TlsStream};
use compio::BufResult;
use ed25519_dalek::SigningKey;
use percentes_formats::config::{Config, FaultVariant, Injector};
use percentes_formats::journal::records::EventKind;
use percentes_formats::journal::records::{
    class_code, Counts, EventRecord, Outcome, Record,
    RequestRecord, SealStatus, TelemetryRecord,
};
use percentes_formats::journal::writer::Sealed;
use percentes_formats::journal::{ClockAnchors, Header, JournalWriter, WriteError, CODEC};
use percentes_formats::pins;
use percentes_formats::spec::Spec;
use percentes_formats::schedule::{Entry, ScheduleParams};

use crate::canary::{self, CanaryServer, LagSummary};
use crate::exchange::Rule;
use crate::exchange::{Exchange, Verdict};
use crate::http1;
use crate::request::{load_prompts, rule, Target, Template};

/// Messages the writer queue holds before a sender blocks (and a queue-full event is recorded); a
/// message is one record or a worker's batch of up to [`BATCH_RECORDS_MAX`].
pub const WRITER_QUEUE_RECORDS_MAX: usize = 65_536;
/// The writer commits a block at least this often.
pub const COMMIT_INTERVAL: Duration = Duration::from_millis(100);
/// The writer checkpoints (and fdatasyncs) at least this often (SPEC §J.5, §J.6).
pub const CHECKPOINT_INTERVAL: Duration = Duration::from_secs(1);
/// Telemetry and progress period.
pub const TELEMETRY_INTERVAL: Duration = Duration::from_secs(1);
/// The stall ticker's period (SPEC §2's runtime-stall measure).
pub const STALL_TICK: Duration = Duration::from_millis(1);
/// Time between writing the header and the epoch, for the workers to start and connect.
pub const EPOCH_LEAD: Duration = Duration::from_millis(300);

/// How the live progress is shown.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Progress {
    Quiet,
    Human,
    Json,
}

/// What `record` needs beyond the configuration.
#[derive(Debug)]
pub struct Options {
    pub output: PathBuf,
    /// Overwrite an existing output file.
    pub force: bool,
    pub signing_key: Option<SigningKey>,
    pub tool_version: String,
    pub tool_commit: String,
    /// Worker threads (pacer + client runtimes).
    pub workers: usize,
    /// Run the loopback canary (SPEC §2 receive-path check; [`crate::canary`]).
    pub canary: bool,
    pub progress: Progress,
    /// Set from a signal handler: stop dispatching, drain, seal as aborted.
    pub stop: Arc<AtomicBool>,
    /// Timeline boundaries reported by the environment while the run goes on (a controller in the
    /// same process, as the demo's): journaled as `timeline` events at the instant reported.
    pub timeline: Option<TimelineInbox>,
}

/// Where a controller reports timeline boundaries (reschedule, container start, weight load,
/// detection...) for the journal; see formats/JOURNAL.md for the subjects the analyzer reads.
#[derive(Clone, Debug, Default)]
pub struct TimelineInbox(Arc<std::sync::Mutex<Vec<Reported>>>);

/// One reported boundary: when, subject, detail, value.
type Reported = (Instant, String, String, Option<i64>);

impl TimelineInbox {
    /// Reports that `subject` happened now.
    pub fn report(&self, subject: &str, detail: &str, value: Option<i64>) {
        self.report_at(Instant::now(), subject, detail, value);
    }

    /// Reports that `subject` happened at `at` (on the monotonic clock, as the recorder's epoch).
    pub fn report_at(&self, at: Instant, subject: &str, detail: &str, value: Option<i64>) {
        if let Ok(mut inbox) = self.0.lock() {
            inbox.push((at, subject.to_owned(), detail.to_owned(), value));
        }
    }

    fn drain(&self) -> Vec<Reported> {
        self.0
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

/// What a finished run reports.
#[derive(Clone, Debug)]
pub struct Summary {
    pub output: PathBuf,
    pub status: SealStatus,
    pub reason: String,
    pub sealed: Sealed,
    pub undispatched: u64,
    pub queue_full_events: u64,
}

/// Why a run could not be done. Failures of the target are outcomes, never errors.
#[derive(Debug)]
pub enum RecordError {
    Refused(String),
    Io {
        what: String,
        source: std::io::Error,
    },
    Journal(WriteError),
}

impl std::fmt::Display for RecordError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RecordError::Refused(why) => write!(f, "{why}"),
            RecordError::Io { what, source } => write!(f, "{what}: {source}"),
            RecordError::Journal(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for RecordError {}

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> RecordError {
    let what = what.into();
    move |source| RecordError::Io { what, source }
}

/// Boxed: the bounded queue preallocates every slot, and records vary from tens of bytes to kilobytes.
enum ToWriter {
    Record(Box<Record>),
    /// A worker's finished records, handed over together: one wake-up of the writer per batch
    /// rather than per request (a context switch per request dominated the recorder's CPU).
    Batch(Vec<Record>),
    Finish(SealStatus, String),
}

/// Counters shared by workers, telemetry and progress.
#[derive(Debug, Default)]
struct Shared {
    sent: AtomicU64,
    in_flight: AtomicU64,
    completed: AtomicU64,
    errored: AtomicU64,
    censored: AtomicU64,
    undispatched: AtomicU64,
    queue_depth: AtomicU64,
    queue_full: AtomicU64,
    skew_ns: Mutex<Vec<u64>>,
    stall_ns: Mutex<Vec<u64>>,
    /// The canary's lags (ns) since the last telemetry tick, from every worker.
    canary_ns: Mutex<Vec<u64>>,
    /// The stall ticker pooled over the measured span, for the gate's exact p99 (SPEC §2).
    stall_pool: Mutex<StallPool>,
    done: AtomicBool,
    /// Set once, by the writer's escape watch, when a declared abort trigger fires.
    escaped: Mutex<Option<String>>,
}

#[derive(Clone)]
struct Sender {
    tx: SyncSender<ToWriter>,
    shared: Arc<Shared>,
}

impl Sender {
    /// Hands a record to the writer. A full queue blocks (nothing is dropped) and is counted, so
    /// telemetry records a writer-queue-full event.
    fn send(&self, record: Record) {
        self.send_message(ToWriter::Record(Box::new(record)), 1);
    }

    fn send_batch(&self, records: Vec<Record>) {
        if !records.is_empty() {
            let n = records.len() as u64;
            self.send_message(ToWriter::Batch(records), n);
        }
    }

    fn send_message(&self, message: ToWriter, records: u64) {
        self.shared
            .queue_depth
            .fetch_add(records, Ordering::Relaxed);
        match self.tx.try_send(message) {
            Ok(()) => {}
            Err(TrySendError::Full(message)) => {
                self.shared.queue_full.fetch_add(1, Ordering::Relaxed);
                let _ = self.tx.send(message);
            }
            Err(TrySendError::Disconnected(_)) => {}
        }
    }
}

/// A connection: plain TCP or TLS over TCP.
enum Conn {
    Plain(TcpStream),
    Tls(Box<TlsStream<TcpStream>>),
}

impl Conn {
    async fn read(&mut self, buf: Vec<u8>) -> BufResult<usize, Vec<u8>> {
        match self {
            Conn::Plain(s) => s.read(buf).await,
            Conn::Tls(s) => s.read(buf).await,
        }
    }
    async fn write_all(&mut self, buf: Vec<u8>) -> BufResult<(), Vec<u8>> {
        match self {
            Conn::Plain(s) => s.write_all(buf).await,
            Conn::Tls(s) => {
                // TLS buffers inside the session: the request leaves only when flushed.
                let BufResult(written, buf) = s.write_all(buf).await;
                match written {
                    Ok(()) => BufResult(compio::io::AsyncWrite::flush(&mut **s).await, buf),
                    Err(e) => BufResult(Err(e), buf),
                }
            }
        }
    }
}

/// Accepts any certificate (target.tls.insecure): the handshake's signatures are still checked,
/// the certificate chain is not. Recorded in the journal's host facts.
#[derive(Debug)]
struct AcceptAnyCertificate(Arc<rustls::crypto::CryptoProvider>);

impl rustls::client::danger::ServerCertVerifier for AcceptAnyCertificate {
    fn verify_server_cert(
        &self,
        _: &rustls::pki_types::CertificateDer<'_>,
        _: &[rustls::pki_types::CertificateDer<'_>],
        _: &rustls::pki_types::ServerName<'_>,
        _: &[u8],
        _: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }
    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }
    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }
    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// The TLS client configuration for an https target: Mozilla's roots plus `target.tls.ca_file`,
/// ALPN http/1.1, verification on unless `target.tls.insecure`.
fn tls_connector(config: &Config) -> Result<TlsConnector, RecordError> {
    use rustls::pki_types::pem::PemObject;
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    if let Some(path) = &config.target.tls.ca_file {
        let certificates = rustls::pki_types::CertificateDer::pem_file_iter(path)
            .map_err(|e| RecordError::Refused(format!("target.tls.ca_file {path}: {e}")))?;
        for certificate in certificates {
            let certificate = certificate
                .map_err(|e| RecordError::Refused(format!("target.tls.ca_file {path}: {e}")))?;
            roots
                .add(certificate)
                .map_err(|e| RecordError::Refused(format!("target.tls.ca_file {path}: {e}")))?;
        }
    }
    let builder = rustls::ClientConfig::builder_with_provider(Arc::clone(&provider))
        .with_safe_default_protocol_versions()
        .map_err(|e| RecordError::Refused(format!("TLS setup: {e}")))?;
    let mut tls = if config.target.tls.insecure {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AcceptAnyCertificate(provider)))
            .with_no_client_auth()
    } else {
        builder.with_root_certificates(roots).with_no_client_auth()
    };
    tls.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(TlsConnector::from(Arc::new(tls)))
}

/// The raw CLOCK_MONOTONIC reading, ns.
fn monotonic_now_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec to the valid, exclusively borrowed `ts`.
    #[allow(unsafe_code)]
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    debug_assert_eq!(rc, 0, "CLOCK_MONOTONIC is always available on Linux");
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn clock_ticks_per_second() -> u64 {
    // SAFETY: sysconf only reads a configuration value.
    #[allow(unsafe_code)]
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if ticks > 0 {
        ticks as u64
    } else {
        100
    }
}

fn read_trimmed(path: &str) -> String {
    std::fs::read_to_string(path)
        .map(|s| s.trim().to_owned())
        .unwrap_or_else(|_| "unknown".into())
}

fn host_facts(
    workers: usize,
    deferred_task_work: bool,
    canary: bool,
    config: &Config,
    target: &Target,
) -> Vec<(String, String)> {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|m| m.trim().to_owned())
        })
        .unwrap_or_else(|| "unknown".into());
    vec![
        ("hostname".into(), read_trimmed("/proc/sys/kernel/hostname")),
        ("kernel".into(), read_trimmed("/proc/sys/kernel/osrelease")),
        ("cpu".into(), cpu),
        (
            "cores".into(),
            std::thread::available_parallelism()
                .map(|n| n.get().to_string())
                .unwrap_or_default(),
        ),
        ("recorder-workers".into(), workers.to_string()),
        (
            "canary".into(),
            if canary {
                format!(
                    "loopback, one event each {} ms to every worker",
                    canary::CANARY_INTERVAL.as_millis()
                )
            } else {
                "off".into()
            },
        ),
        (
            "io".into(),
            if deferred_task_work {
                "compio 0.19.2, io_uring (single issuer, deferred task work)".into()
            } else {
                "compio 0.19.2, io_uring (plain setup: this kernel refuses deferred task work)"
                    .into()
            },
        ),
        (
            "tls".into(),
            match (target.tls, config.target.tls.insecure) {
                (false, _) => "none (plain HTTP/1.1)".into(),
                (true, false) => "rustls 0.23 (aws-lc-rs), certificate verification on".into(),
                (true, true) => {
                    "rustls 0.23 (aws-lc-rs), CERTIFICATE VERIFICATION OFF (target.tls.insecure)"
                        .into()
                }
            },
        ),
    ]
}

/// /proc/stat's aggregate cpu line: (busy, total) jiffies.
fn host_cpu() -> Option<(u64, u64)> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let line = stat.lines().next()?;
    let fields: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|f| f.parse().ok())
        .collect();
    let total: u64 = fields.iter().take(8).sum();
    let idle = fields.get(3).copied().unwrap_or(0) + fields.get(4).copied().unwrap_or(0);
    Some((total.saturating_sub(idle), total))
}

/// This process's CPU time, ns.
fn recorder_cpu_ns(ticks: u64) -> u64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let after = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest)
        .unwrap_or_default();
    let fields: Vec<u64> = after
        .split_whitespace()
        .filter_map(|f| f.parse().ok())
        .collect();
    // After the command name: state is not numeric, so utime and stime are fields 11 and 12 here.
    let jiffies = fields.get(10).copied().unwrap_or(0) + fields.get(11).copied().unwrap_or(0);
    jiffies * 1_000_000_000 / ticks
}

fn quantile(sorted: &[u64], q: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    sorted[((sorted.len() as f64 * q).ceil() as usize).clamp(1, sorted.len()) - 1]
}

/// Records a run. Blocks until the journal is sealed.
pub fn record(config: &Config, options: &Options) -> Result<Summary, RecordError> {
    let target = Target::parse(&config.target.base_url).map_err(RecordError::Refused)?;
    let params: ScheduleParams = config.schedule_params();
    params.validate().map_err(RecordError::Refused)?;
    let workers = options.workers.clamp(1, 64);
    let requests = params.iter().count() as u64;
    let digest = params.digest();

    let mut open = std::fs::OpenOptions::new();
    open.write(true);
    if options.force {
        open.create(true).truncate(true);
    } else {
        open.create_new(true);
    }
    let file = open.open(&options.output).map_err(io(format!(
        "cannot create journal {} (use --force to overwrite)",
        options.output.display()
    )))?;

    let deferred_task_work = deferred_task_work_available();
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
    let lead_ns = EPOCH_LEAD.as_nanos() as u64;
    let epoch = Instant::now() + EPOCH_LEAD;
    let monotonic_epoch_ns = monotonic_now_ns() + lead_ns;
    let realtime_epoch_ns = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as i64)
        .unwrap_or(0)
        + lead_ns as i64;
    let header = Header {
        codec: CODEC.into(),
        spec_version: Spec::CURRENT.name().into(),
        tool_version: options.tool_version.clone(),
        tool_commit: options.tool_commit.clone(),
        profile: config.profile.name().into(),
        dev_time_factor: config.time_factor,
        config_hash: config.hash(),
        config_bytes: config.raw_bytes().to_vec(),
        schedule_requests: requests,
        schedule_digest: digest,
        schedule: params.clone(),
        clock: ClockAnchors {
            monotonic_epoch_ns,
            realtime_epoch_ns,
            source: "CLOCK_MONOTONIC".into(),
        },
        host: host_facts(
            workers,
            deferred_task_work,
            canary_server.is_some(),
            config,
            &target,
        ),
        shard_index: 0,
        shard_count: 1,
        signing_key: options
            .signing_key
            .as_ref()
            .map(|k| k.verifying_key().to_bytes()),
        extensions: Vec::new(),
    };

    let shared = Arc::new(Shared::default());
    let (tx, rx) = sync_channel(WRITER_QUEUE_RECORDS_MAX);
    let writer = {
        let shared = Arc::clone(&shared);
        let signer = options.signing_key.clone();
        let watch = EscapeWatch::new(config, Arc::clone(&options.stop));
        std::thread::Builder::new()
            .name("journal-writer".into())
            .spawn(move || writer_thread(file, &header, signer, rx, &shared, epoch, watch))
            .map_err(io("cannot start the journal writer thread"))?
    };
    let sender = Sender {
        tx,
        shared: Arc::clone(&shared),
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
    let ticker = {
        let shared = Arc::clone(&shared);
        std::thread::Builder::new()
            .name("stall-ticker".into())
            .spawn(move || stall_ticker(&shared))
            .map_err(io("cannot start the stall ticker"))?
    };
    let measured = measured_span(config);
    let telemetry = {
        let shared = Arc::clone(&shared);
        let sender = sender.clone();
        let progress = options.progress;
        let total = requests;
        std::thread::Builder::new()
            .name("telemetry".into())
            .spawn(move || telemetry_thread(&shared, &sender, epoch, progress, total, measured))
            .map_err(io("cannot start the telemetry thread"))?
    };

    let fault = if config.inject_at_ns().is_some() {
        let sender = sender.clone();
        let config = config.clone();
        let stop = Arc::clone(&options.stop);
        Some(
            std::thread::Builder::new()
                .name("fault-plan".into())
                .spawn(move || fault_thread(&config, epoch, &sender, &stop))
                .map_err(io("cannot start the fault-plan thread"))?,
        )
    } else {
        None
    };
    // One probe thread per replica with a direct address (G7, replica-ready).
    let mut probes = Vec::new();
    for (name, address) in &config.target.replica_addresses {
        let Ok(address) = address.parse::<std::net::SocketAddr>() else {
            continue; // the config loader refuses these; never reached
        };
        let sender = sender.clone();
        let shared = Arc::clone(&shared);
        let stop = Arc::clone(&options.stop);
        let name = name.clone();
        let period = Duration::from_nanos(config.duration_ns(&pins::RECOVERY_BUCKET_S))
            .clamp(PROBE_PERIOD_MIN, PROBE_PERIOD_MAX);
        probes.push(
            std::thread::Builder::new()
                .name(format!("probe-{name}"))
                .spawn(move || probe_thread(&name, address, period, epoch, &sender, &shared, &stop))
                .map_err(io("cannot start a probe thread"))?,
        );
    }
    let timeline = options.timeline.clone().map(|inbox| {
        let sender = sender.clone();
        let shared = Arc::clone(&shared);
        std::thread::Builder::new()
            .name("timeline".into())
            .spawn(move || {
                while !shared.done.load(Ordering::Relaxed) {
                    journal_timeline(&inbox, epoch, &sender);
                    std::thread::sleep(Duration::from_millis(50));
                }
                journal_timeline(&inbox, epoch, &sender);
            })
    });
    let timeline = timeline
        .transpose()
        .map_err(io("cannot start the timeline thread"))?;
    let timeout = Duration::from_nanos(config.duration_ns(&pins::CLIENT_TIMEOUT_S));
    let floor = (config
        .number(&pins::CLIENT_CONNECTIONS_FLOOR_PER_REPLICA) as usize
        * config.target.replicas.len().max(1))
    .div_ceil(workers);
    let tls = if target.tls {
        Some(tls_connector(config)?)
    } else {
        None
    };
    let rules: Vec<Rule> = config
        .routes
        .iter()
        .map(|r| rule(config, r))
        .collect::<Result<_, _>>()
        .map_err(RecordError::Refused)?;
    let templates: Vec<Template> = config
        .routes
        .iter()
        .map(|r| {
            let prompts = r.prompt_file.as_deref().map(load_prompts).transpose()?;
            Ok(Template::new(config, &target, r, prompts.as_deref()))
        })
        .collect::<Result<_, String>>()
        .map_err(RecordError::Refused)?;
    let server_name = config
        .target
        .tls
        .server_name
        .clone()
        .unwrap_or_else(|| target.host.clone());
    let mut handles = Vec::new();
    for w in 0..workers {
        let ctx = WorkerContext {
            worker: w,
            workers,
            params: params.clone(),
            config: config.clone(),
            target: target.clone(),
            epoch,
            timeout,
            floor,
            canary: canary_address,
            deferred_task_work,
            tls: tls.clone(),
            rules: rules.clone(),
            templates: templates.clone(),
            server_name: server_name.clone(),
            sender: sender.clone(),
            shared: Arc::clone(&shared),
            stop: Arc::clone(&options.stop),
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
            Err(_) => worker_error = Some(RecordError::Refused("a worker thread panicked".into())),
        }
    }
    shared.done.store(true, Ordering::Relaxed);
    if let Some(fault) = fault {
        let _ = fault.join();
    }
    let _ = ticker.join();
    let _ = telemetry.join();
    if let Some(canary) = canary_server {
        let _ = canary.join();
    }
    {
        let pool = shared.stall_pool.lock().expect("stall pool lock");
        if let Some(p99) = pool.p99_upper_ns() {
            sender.send(Record::Event(EventRecord {
                at_ns: now_ns(epoch),
                kind: EventKind::StallSummary.code(),
                subject: "runtime-stall".into(),
                detail: format!(
                    "pooled over {} ticks of the measured span {:.3}-{:.3} s; max {} ns; p99 rounded up to 10 us",
                    pool.count,
                    measured.0 as f64 / 1e9,
                    measured.1 as f64 / 1e9,
                    pool.max_ns
                ),
                value: Some(p99 as i64),
            }));
        }
    }
    for probe in probes {
        let _ = probe.join();
    }
    if let Some(timeline) = timeline {
        let _ = timeline.join();
    }
    let aborted = options.stop.load(Ordering::Relaxed);
    let escaped = shared.escaped.lock().expect("escape lock").clone();
    let (status, reason) = match (&worker_error, aborted) {
        (Some(e), _) => (SealStatus::Aborted, format!("recorder error: {e}")),
        (None, true) if escaped.is_some() => (
            SealStatus::Escaped,
            format!(
                "{}; offered load stopped, in-flight requests drained, the clock kept",
                escaped.unwrap_or_default()
            ),
        ),
        (None, true) => (
            SealStatus::Aborted,
            "stopped by signal (SIGINT or SIGTERM): dispatch stopped, in-flight requests drained"
                .into(),
        ),
        (None, false) => (SealStatus::Completed, String::new()),
    };
    let _ = sender.tx.send(ToWriter::Finish(status, reason.clone()));
    drop(sender);
    let sealed = writer
        .join()
        .map_err(|_| RecordError::Refused("the journal writer thread panicked".into()))?
        .map_err(RecordError::Journal)?;
    Ok(Summary {
        output: options.output.clone(),
        status,
        reason,
        sealed,
        undispatched: shared.undispatched.load(Ordering::Relaxed),
        queue_full_events: shared.queue_full.load(Ordering::Relaxed),
    })
}

/// The declared abort triggers (seeds/004), watched on the writer thread, which sees every
/// record in the order it journals them. When one fires the watch journals an `escape` event,
/// notes the reason for the seal and raises the stop flag: dispatch stops, in-flight requests
/// drain, the fault plan runs its cleanup, and the journal is sealed `escaped`.
struct EscapeWatch {
    stop: Arc<AtomicBool>,
    /// Route index -> protected.
    protected: Vec<bool>,
    budget: Option<f64>,
    window_ns: u64,
    min_requests: usize,
    /// Protected requests ending in the window: (terminal_ns, failed).
    recent: std::collections::VecDeque<(u64, bool)>,
    failed_in_window: usize,
    /// The declared target, when errors elsewhere are a trigger.
    undeclared: Option<String>,
    cleanup: bool,
    fired: bool,
}

impl EscapeWatch {
    fn new(config: &Config, stop: Arc<AtomicBool>) -> Option<EscapeWatch> {
        let d = config.declaration.as_ref()?;
        let a = &d.abort;
        Some(EscapeWatch {
            stop,
            protected: config
                .routes
                .iter()
                .map(|r| d.protected_routes.contains(&r.label))
                .collect(),
            budget: a.protected_failure_rate,
            window_ns: (a.window_s * 1e9 / f64::from(config.time_factor)) as u64,
            min_requests: a.min_requests.max(1) as usize,
            recent: std::collections::VecDeque::new(),
            failed_in_window: 0,
            undeclared: a.undeclared_replica_errors.then(|| d.target.clone()),
            cleanup: a.cleanup_failure,
            fired: false,
        })
    }

    /// Looks at one record about to be journaled; returns the escape event when a trigger fires.
    fn observe(&mut self, record: &Record) -> Option<EventRecord> {
        if self.fired {
            return None;
        }
        let (trigger, at_ns, detail) = match record {
            Record::Request(r) => self.observe_request(r)?,
            Record::Event(e)
                if self.cleanup
                    && e.is(EventKind::FaultFailed)
                    && e.detail.starts_with("removal failed") =>
            {
                (
                    "cleanup-failed",
                    e.at_ns,
                    format!("cleanup cannot restore state: {}", e.detail),
                )
            }
            _ => return None,
        };
        self.fired = true;
        self.stop.store(true, Ordering::SeqCst);
        Some(EventRecord {
            at_ns,
            kind: EventKind::Escape.code(),
            subject: trigger.into(),
            detail,
            value: None,
        })
    }

    fn observe_request(&mut self, r: &RequestRecord) -> Option<(&'static str, u64, String)> {
        let stopped = class_code("run-end") == Some(r.class);
        if stopped {
            return None;
        }
        let errored = r.outcome == Outcome::Errored as u8;
        if let Some(target) = &self.undeclared {
            if errored && !r.replica.is_empty() && r.replica != *target {
                return Some((
                    "undeclared-replica",
                    r.terminal_ns,
                    format!(
                        "request {} errored on {}, outside the declared target {target}: {}",
                        r.index, r.replica, r.detail
                    ),
                ));
            }
        }
        let budget = self.budget?;
        if !self
            .protected
            .get(r.route as usize)
            .copied()
            .unwrap_or(false)
        {
            return None;
        }
        let failed = errored || r.outcome == Outcome::Censored as u8;
        self.recent.push_back((r.terminal_ns, failed));
        self.failed_in_window += usize::from(failed);
        while let Some(&(at, f)) = self.recent.front() {
            if at + self.window_ns >= r.terminal_ns {
                break;
            }
            self.recent.pop_front();
            self.failed_in_window -= usize::from(f);
        }
        let n = self.recent.len();
        let share = self.failed_in_window as f64 / n as f64;
        (n >= self.min_requests && share > budget).then(|| {
            (
                "protected-budget",
                r.terminal_ns,
                format!(
                    "protected traffic over its abort budget: {} of the {n} protected requests ending in the last {:.3} s failed ({share:.4} > {budget}); the last, request {}, {}",
                    self.failed_in_window,
                    self.window_ns as f64 / 1e9,
                    r.index,
                    if r.detail.is_empty() { "no detail" } else { r.detail.as_str() }
                ),
            )
        })
    }
}

fn writer_thread(
    file: File,
    header: &Header,
    signer: Option<SigningKey>,
    rx: Receiver<ToWriter>,
    shared: &Shared,
    epoch: Instant,
    mut watch: Option<EscapeWatch>,
) -> Result<Sealed, WriteError> {
    let mut escape = |record: &Record, shared: &Shared| -> Option<Record> {
        let event = watch.as_mut()?.observe(record)?;
        *shared.escaped.lock().expect("escape lock") =
            Some(format!("escaped ({}): {}", event.subject, event.detail));
        Some(Record::Event(event))
    };
    let now_ns = || Instant::now().saturating_duration_since(epoch).as_nanos() as u64;
    let mut writer = JournalWriter::create(file, header, signer)?;
    writer.get_mut().sync_data()?;
    let mut last_commit = Instant::now();
    let mut last_checkpoint = Instant::now();
    loop {
        match rx.recv_timeout(Duration::from_millis(20)) {
            Ok(ToWriter::Record(record)) => {
                shared.queue_depth.fetch_sub(1, Ordering::Relaxed);
                writer.append(&record)?;
                if let Some(event) = escape(&record, shared) {
                    writer.append(&event)?;
                }
            }
            Ok(ToWriter::Batch(records)) => {
                shared
                    .queue_depth
                    .fetch_sub(records.len() as u64, Ordering::Relaxed);
                for record in &records {
                    writer.append(record)?;
                    if let Some(event) = escape(record, shared) {
                        writer.append(&event)?;
                    }
                }
            }
            Ok(ToWriter::Finish(status, reason)) => {
                let (file, sealed) = writer.seal(now_ns(), status, &reason)?;
                file.sync_data()?;
                return Ok(sealed);
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => {
                let (file, sealed) = writer.seal(
                    now_ns(),
                    SealStatus::Aborted,
                    "the recorder stopped without finishing",
                )?;
                file.sync_data()?;
                return Ok(sealed);
            }
        }
        if last_commit.elapsed() >= COMMIT_INTERVAL {
            writer.commit()?;
            last_commit = Instant::now();
        }
        if last_checkpoint.elapsed() >= CHECKPOINT_INTERVAL {
            writer.checkpoint(now_ns())?;
            writer.get_mut().sync_data()?;
            last_checkpoint = Instant::now();
        }
    }
}

/// SPEC §2's runtime-stall measure: a thread that sleeps to absolute 1 ms deadlines and records
/// how late each wake is. Whatever delays the workers (preemption, throttling, faults) delays it.
/// The stall ticker's lateness pooled over the measured span: 10 us buckets up to 100 ms and one
/// bucket beyond, so memory is fixed whatever the run length and the p99 is exact to 10 us.
#[derive(Debug)]
struct StallPool {
    buckets: Vec<u64>,
    beyond: u64,
    count: u64,
    max_ns: u64,
}

const STALL_POOL_BUCKET_NS: u64 = 10_000;
const STALL_POOL_BUCKETS: usize = 10_000;

impl Default for StallPool {
    fn default() -> Self {
        StallPool {
            buckets: vec![0; STALL_POOL_BUCKETS],
            beyond: 0,
            count: 0,
            max_ns: 0,
        }
    }
}

impl StallPool {
    fn add(&mut self, late_ns: u64) {
        match self
            .buckets
            .get_mut((late_ns / STALL_POOL_BUCKET_NS) as usize)
        {
            Some(bucket) => *bucket += 1,
            None => self.beyond += 1,
        }
        self.count += 1;
        self.max_ns = self.max_ns.max(late_ns);
    }

    /// The nearest-rank p99, as the upper edge of its bucket (the maximum beyond the last one).
    fn p99_upper_ns(&self) -> Option<u64> {
        if self.count == 0 {
            return None;
        }
        let rank = (self.count as f64 * 0.99).ceil() as u64;
        let mut seen = 0;
        for (i, n) in self.buckets.iter().enumerate() {
            seen += n;
            if seen >= rank {
                return Some(((i as u64 + 1) * STALL_POOL_BUCKET_NS).min(self.max_ns.max(1)));
            }
        }
        Some(self.max_ns)
    }
}

fn stall_ticker(shared: &Shared) {
    let mut deadline = Instant::now();
    while !shared.done.load(Ordering::Relaxed) {
        deadline += STALL_TICK;
        let now = Instant::now();
        if deadline > now {
            std::thread::sleep(deadline - now);
        }
        let late = Instant::now()
            .saturating_duration_since(deadline)
            .as_nanos() as u64;
        shared.stall_ns.lock().expect("stall lock").push(late);
        if late > 100 * STALL_TICK.as_nanos() as u64 {
            // A long stall: resynchronize instead of firing a burst of catch-up ticks.
            deadline = Instant::now();
        }
    }
}

fn telemetry_thread(
    shared: &Shared,
    sender: &Sender,
    epoch: Instant,
    progress: Progress,
    total: u64,
    measured: (u64, u64),
) {
    let ticks = clock_ticks_per_second();
    let mut last_cpu = host_cpu();
    let mut last_self = recorder_cpu_ns(ticks);
    let mut last_queue_full = 0;
    let mut next = Instant::now() + TELEMETRY_INTERVAL;
    loop {
        let done = shared.done.load(Ordering::Relaxed);
        let now = Instant::now();
        if now < next && !done {
            std::thread::sleep((next - now).min(Duration::from_millis(50)));
            continue;
        }
        next += TELEMETRY_INTERVAL;
        let at_ns = Instant::now().saturating_duration_since(epoch).as_nanos() as u64;
        let cpu = host_cpu();
        let busy_ppm = match (last_cpu, cpu) {
            (Some((b0, t0)), Some((b1, t1))) if t1 > t0 => {
                ((b1 - b0) as f64 / (t1 - t0) as f64 * 1e6) as u32
            }
            _ => 0,
        };
        last_cpu = cpu;
        let self_ns = recorder_cpu_ns(ticks);
        let recorder_cpu = self_ns.saturating_sub(last_self);
        last_self = self_ns;
        let mut stall = std::mem::take(&mut *shared.stall_ns.lock().expect("stall lock"));
        stall.sort_unstable();
        let interval_ns = TELEMETRY_INTERVAL.as_nanos() as u64;
        if at_ns > measured.0 && at_ns.saturating_sub(interval_ns) < measured.1 {
            let mut pool = shared.stall_pool.lock().expect("stall pool lock");
            for &late in &stall {
                pool.add(late);
            }
        }
        let mut lags = std::mem::take(&mut *shared.canary_ns.lock().expect("canary lock"));
        if let Some(summary) = LagSummary::of(&mut lags) {
            sender.send(Record::Event(EventRecord {
                at_ns,
                kind: EventKind::Canary.code(),
                subject: "loopback".into(),
                detail: summary.detail(TELEMETRY_INTERVAL),
                value: Some(summary.p99_ns as i64),
            }));
        }
        let mut skew = std::mem::take(&mut *shared.skew_ns.lock().expect("skew lock"));
        skew.sort_unstable();
        let depth = shared.queue_depth.load(Ordering::Relaxed);
        let telemetry = TelemetryRecord {
            at_ns,
            interval_ns: TELEMETRY_INTERVAL.as_nanos() as u64,
            host_cpu_busy_ppm: busy_ppm,
            recorder_cpu_ns: recorder_cpu,
            stall_p99_ns: quantile(&stall, 0.99),
            stall_max_ns: stall.last().copied().unwrap_or(0),
            stall_samples: stall.len() as u32,
            skew_count: skew.len() as u32,
            skew_p50_ns: quantile(&skew, 0.5),
            skew_p99_ns: quantile(&skew, 0.99),
            skew_max_ns: skew.last().copied().unwrap_or(0),
            undispatched_total: shared.undispatched.load(Ordering::Relaxed),
            in_flight: shared.in_flight.load(Ordering::Relaxed) as u32,
            writer_queue_depth: depth as u32,
            writer_queue_max: WRITER_QUEUE_RECORDS_MAX as u32,
        };
        let queue_full = shared.queue_full.load(Ordering::Relaxed);
        if queue_full > last_queue_full {
            sender.send(Record::Event(EventRecord {
                at_ns,
                kind: EventKind::WriterQueueFull.code(),
                subject: "journal-writer".into(),
                detail: format!(
                    "{} records waited for a full writer queue",
                    queue_full - last_queue_full
                ),
                value: Some(queue_full as i64),
            }));
            last_queue_full = queue_full;
        }
        match progress {
            Progress::Quiet => {}
            Progress::Human => eprintln!(
                "[{:>7.1} s] sent {}/{total}, in flight {}, completed {}, errored {}, censored {}, skew p99 {:.2} ms, stall p99 {:.2} ms, host CPU {:.0} %",
                at_ns as f64 / 1e9,
                shared.sent.load(Ordering::Relaxed),
                telemetry.in_flight,
                shared.completed.load(Ordering::Relaxed),
                shared.errored.load(Ordering::Relaxed),
                shared.censored.load(Ordering::Relaxed),
                telemetry.skew_p99_ns as f64 / 1e6,
                telemetry.stall_p99_ns as f64 / 1e6,
                busy_ppm as f64 / 1e4
            ),
            Progress::Json => eprintln!(
                "{}",
                serde_json::json!({
                    "at_ns": at_ns, "sent": shared.sent.load(Ordering::Relaxed), "scheduled": total,
                    "in_flight": telemetry.in_flight, "completed": shared.completed.load(Ordering::Relaxed),
                    "errored": shared.errored.load(Ordering::Relaxed), "censored": shared.censored.load(Ordering::Relaxed),
                    "skew_p99_ns": telemetry.skew_p99_ns, "stall_p99_ns": telemetry.stall_p99_ns, "host_cpu_busy_ppm": busy_ppm,
                })
            ),
        }
        sender.send(Record::Telemetry(telemetry));
        if done {
            return;
        }
    }
}

struct WorkerContext {
    worker: usize,
    workers: usize,
    params: ScheduleParams,
    config: Config,
    target: Target,
    epoch: Instant,
    timeout: Duration,
    floor: usize,
    /// The loopback canary's address, when it runs.
    canary: Option<std::net::SocketAddr>,
    /// Set the ring up for deferred task work ([`ring_setup`]); probed once per run.
    deferred_task_work: bool,
    tls: Option<TlsConnector>,
    rules: Vec<Rule>,
    templates: Vec<Template>,
    server_name: String,
    sender: Sender,
    shared: Arc<Shared>,
    stop: Arc<AtomicBool>,
}

/// A worker's own state, shared by the request tasks of its one thread.
struct Local {
    /// Idle keep-alive connections, most recently used last.
    connections: RefCell<Vec<(u64, Conn)>>,
    /// The next connection id: the worker's index in the top 16 bits, a counter below.
    next_connection: Cell<u64>,
    /// Read buffers of finished requests, reused so a request does not allocate one.
    buffers: RefCell<Vec<Vec<u8>>>,
    /// Each route's verification rule, shared by its exchanges.
    rules: Vec<Rc<Rule>>,
}

/// The size of one read buffer: one read takes whatever the socket holds, up to this.
const READ_BUFFER: usize = 64 << 10;
/// At most this many read buffers are kept between requests (4 MiB of address space a worker);
/// a burst of concurrency above it allocates and frees its own.
const SPARE_BUFFERS: usize = 64;

impl Local {
    fn new(ctx: &WorkerContext) -> Local {
        Local {
            connections: RefCell::new(Vec::new()),
            next_connection: Cell::new((ctx.worker as u64) << 48),
            buffers: RefCell::new(Vec::new()),
            rules: ctx.rules.iter().cloned().map(Rc::new).collect(),
        }
    }

    fn connection_id(&self) -> u64 {
        let id = self.next_connection.get();
        self.next_connection.set(id + 1);
        id
    }

    fn buffer(&self) -> Vec<u8> {
        self.buffers
            .borrow_mut()
            .pop()
            .unwrap_or_else(|| Vec::with_capacity(READ_BUFFER))
    }

    /// Keeps a finished request's buffer for the next one, up to [`SPARE_BUFFERS`].
    fn give_back(&self, mut buf: Vec<u8>) {
        let mut spare = self.buffers.borrow_mut();
        if spare.len() < SPARE_BUFFERS {
            buf.clear();
            spare.push(buf);
        }
    }
}

/// Opens a connection (and its TLS session for https), recording connect and TLS times.
async fn open(
    ctx: &WorkerContext,
    record: Option<&mut RequestRecord>,
) -> Result<Conn, (std::io::Error, bool)> {
    let mut record = record;
    if let Some(r) = record.as_deref_mut() {
        r.connect_start_ns = Some(now_ns(ctx.epoch));
    }
    let stream = TcpStream::connect(ctx.target.address.as_str())
        .await
        .map_err(|e| (e, false))?;
    let _ = stream.set_nodelay(true);
    if let Some(r) = record.as_deref_mut() {
        r.connect_end_ns = Some(now_ns(ctx.epoch));
    }
    match &ctx.tls {
        None => Ok(Conn::Plain(stream)),
        Some(connector) => {
            let tls = connector
                .connect(&ctx.server_name, stream)
                .await
                .map_err(|e| (e, true))?;
            if let Some(r) = record {
                r.tls_done_ns = Some(now_ns(ctx.epoch));
            }
            Ok(Conn::Tls(Box::new(tls)))
        }
    }
}

/// How a worker's io_uring is set up. Each worker's ring is submitted to and reaped by its own
/// thread alone, so with `deferred` it is declared single-issuer with deferred, cooperative task
/// work (Linux 6.1 and later): a completion is processed when the worker next asks the ring for
/// completions, instead of interrupting it wherever it is. Same timestamps (they are taken in user
/// space when the worker sees the completion either way), less CPU a request (BENCHMARKS.md).
fn ring_setup(deferred: bool) -> compio::driver::ProactorBuilder {
    let mut ring = compio::driver::ProactorBuilder::new();
    if deferred {
        ring.single_issuer(true)
            .defer_taskrun(true)
            .coop_taskrun(true)
            .taskrun_flag(true);
    }
    ring
}

/// Whether this kernel accepts [`ring_setup`]'s deferred task work; an older one refuses the
/// flags, and the workers then set their rings up plain.
fn deferred_task_work_available() -> bool {
    ring_setup(true).build().is_ok()
}

fn worker(ctx: WorkerContext) -> Result<(), RecordError> {
    // Thread per core: worker w runs on the w-th CPU this process may use (taskset and cgroup
    // limits respected), wrapping around.
    let allowed = allowed_cpus();
    let runtime = compio::runtime::Runtime::builder()
        .with_proactor(ring_setup(ctx.deferred_task_work))
        .thread_affinity(std::collections::HashSet::from([
            allowed[ctx.worker % allowed.len()]
        ]))
        .build()
        .map_err(io("cannot start the io_uring runtime"))?;
    let ctx = Rc::new(ctx);
    runtime.block_on(async move {
        let local = Rc::new(Local::new(&ctx));
        if let Some(address) = ctx.canary {
            let (shared, epoch) = (Arc::clone(&ctx.shared), ctx.epoch);
            compio::runtime::spawn(async move {
                // Ends with the stream, or when the runtime is dropped at the end of the run.
                canary::watch(address, epoch, |lag| {
                    shared.canary_ns.lock().expect("canary lock").push(lag)
                })
                .await
            })
            .detach();
        }
        for _ in 0..ctx.floor {
            if let Ok(conn) = open(&ctx, None).await {
                let id = local.connection_id();
                local.connections.borrow_mut().push((id, conn));
            }
        }
        let outstanding = Rc::new(Cell::new(0usize));
        let batch = Rc::new(Batch::default());
        let running = Rc::new(Cell::new(true));
        let flusher = {
            let (ctx, batch, running) = (Rc::clone(&ctx), Rc::clone(&batch), Rc::clone(&running));
            compio::runtime::spawn(async move {
                while running.get() {
                    compio::time::sleep(BATCH_INTERVAL).await;
                    batch.flush(&ctx);
                }
            })
        };
        let workers = ctx.workers as u64;
        for entry in ctx
            .params
            .iter()
            .filter(|e| e.index % workers == ctx.worker as u64)
        {
            let due = ctx.epoch + Duration::from_nanos(entry.intended_ns);
            if !ctx.stop.load(Ordering::Relaxed) {
                compio::time::sleep_until(due).await;
            }
            if ctx.stop.load(Ordering::Relaxed) {
                // Stopped: this request is never sent; it is censored by the end of the run.
                let mut record = blank(&entry);
                record.outcome = Outcome::Censored as u8;
                record.class = class_code("run-end").expect("defined");
                record.terminal_ns = now_ns(ctx.epoch);
                record.detail = "the run was stopped before this request's intended time".into();
                ctx.shared.censored.fetch_add(1, Ordering::Relaxed);
                batch.push(&ctx, Record::Request(record));
                continue;
            }
            let dispatched = now_ns(ctx.epoch);
            batch
                .skew_ns
                .borrow_mut()
                .push(dispatched.saturating_sub(entry.intended_ns));
            ctx.shared.sent.fetch_add(1, Ordering::Relaxed);
            ctx.shared.in_flight.fetch_add(1, Ordering::Relaxed);
            outstanding.set(outstanding.get() + 1);
            let (ctx2, local2, out2, batch2) = (
                Rc::clone(&ctx),
                Rc::clone(&local),
                Rc::clone(&outstanding),
                Rc::clone(&batch),
            );
            compio::runtime::spawn(async move {
                // Boxed: the exchange's state is several KB, and the task that owns it is moved
                // into the executor's slot; a box moves once, a large future three times.
                let record = Box::pin(execute(&ctx2, &local2, entry, dispatched)).await;
                let counter = match Outcome::from_byte(record.outcome) {
                    Some(Outcome::Completed) => &ctx2.shared.completed,
                    Some(Outcome::Errored) => &ctx2.shared.errored,
                    Some(Outcome::Censored) => &ctx2.shared.censored,
                    _ => &ctx2.shared.undispatched,
                };
                counter.fetch_add(1, Ordering::Relaxed);
                ctx2.shared.in_flight.fetch_sub(1, Ordering::Relaxed);
                batch2.push(&ctx2, Record::Request(record));
                out2.set(out2.get() - 1);
            })
            .detach();
        }
        // Drain: every request ends by its own deadline, so this ends within one timeout.
        while outstanding.get() > 0 {
            compio::time::sleep(Duration::from_millis(5)).await;
        }
        running.set(false);
        let _ = flusher.await;
        batch.flush(&ctx);
        Ok(())
    })
}

/// How often a worker hands its finished records and skew samples over.
pub const BATCH_INTERVAL: Duration = Duration::from_millis(5);
/// A worker hands its records over at once when this many are waiting.
pub const BATCH_RECORDS_MAX: usize = 256;

/// A worker's finished records and skew samples, waiting to be handed over in one piece.
#[derive(Default)]
struct Batch {
    records: RefCell<Vec<Record>>,
    skew_ns: RefCell<Vec<u64>>,
}

impl Batch {
    fn push(&self, ctx: &WorkerContext, record: Record) {
        let full = {
            let mut records = self.records.borrow_mut();
            records.push(record);
            records.len() >= BATCH_RECORDS_MAX
        };
        if full {
            self.flush(ctx);
        }
    }

    fn flush(&self, ctx: &WorkerContext) {
        let records = std::mem::take(&mut *self.records.borrow_mut());
        ctx.sender.send_batch(records);
        let skews = std::mem::take(&mut *self.skew_ns.borrow_mut());
        if !skews.is_empty() {
            ctx.shared.skew_ns.lock().expect("skew lock").extend(skews);
        }
    }
}

/// The CPUs this process may run on (`Cpus_allowed_list` in /proc/self/status), ascending.
fn allowed_cpus() -> Vec<usize> {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let list = status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .unwrap_or("")
        .trim()
        .to_owned();
    let mut cpus = Vec::new();
    for part in list.split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                if let (Ok(a), Ok(b)) = (a.trim().parse::<usize>(), b.trim().parse::<usize>()) {
                    cpus.extend(a..=b);
                }
            }
            None => cpus.extend(part.trim().parse::<usize>()),
        }
    }
    if cpus.is_empty() {
        cpus.push(0);
    }
    cpus
}

fn now_ns(epoch: Instant) -> u64 {
    Instant::now().saturating_duration_since(epoch).as_nanos() as u64
}

fn blank(entry: &Entry) -> RequestRecord {
    RequestRecord {
        index: entry.index,
        outcome: Outcome::Errored as u8,
        class: 0,
        route: entry.route,
        intended_ns: entry.intended_ns,
        dispatched_ns: None,
        connect_start_ns: None,
        connect_end_ns: None,
        tls_done_ns: None,
        request_written_ns: None,
        response_head_ns: None,
        first_content_ns: None,
        terminal_ns: 0,
        content_gaps_us: Vec::new(),
        content_events: 0,
        http_status: 0,
        bytes_sent: 0,
        bytes_received: 0,
        usage_prompt_tokens: None,
        usage_completion_tokens: None,
        replica: String::new(),
        connection_id: 0,
        connection_reused: false,
        detail: String::new(),
    }
}

/// A connect failure that never reached the target (the client ran out of something): the
/// request was not dispatched.
fn local_exhaustion(e: &std::io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM | libc::EADDRNOTAVAIL)
    )
}

fn connect_verdict(e: &std::io::Error) -> Verdict {
    use std::io::ErrorKind::*;
    match e.kind() {
        ConnectionRefused => Verdict::errored("refused", e.to_string()),
        ConnectionReset | ConnectionAborted => Verdict::errored("reset", e.to_string()),
        _ if e.to_string().contains("lookup") || e.kind() == NotFound => {
            Verdict::errored("dns", e.to_string())
        }
        _ => Verdict::errored("connect", e.to_string()),
    }
}

fn transport_verdict(e: &std::io::Error) -> Verdict {
    use std::io::ErrorKind::*;
    match e.kind() {
        ConnectionReset | ConnectionAborted | BrokenPipe => {
            Verdict::errored("reset", e.to_string())
        }
        _ => Verdict::errored("premature-close", e.to_string()),
    }
}

async fn execute(
    ctx: &WorkerContext,
    local: &Local,
    entry: Entry,
    dispatched: u64,
) -> RequestRecord {
    let mut record = blank(&entry);
    record.dispatched_ns = Some(dispatched);
    let streams = ctx
        .config
        .routes
        .get(entry.route as usize)
        .is_none_or(|r| r.streams(&ctx.config.target));
    let mut exchange = Exchange::with_rule(streams, Rc::clone(&local.rules[entry.route as usize]));
    let deadline = ctx.epoch + Duration::from_nanos(entry.intended_ns) + ctx.timeout;
    let verdict = compio::time::timeout_at(
        deadline,
        talk(ctx, local, &entry, &mut record, &mut exchange),
    )
    .await;
    let verdict = match verdict {
        Ok(v) => v,
        Err(_) => {
            record.terminal_ns = (deadline - ctx.epoch).as_nanos() as u64;
            Verdict {
                outcome: Outcome::Censored,
                class: "timeout",
                detail: format!("no terminal event by the {:?} timeout", ctx.timeout),
            }
        }
    };
    if record.terminal_ns == 0 {
        record.terminal_ns = now_ns(ctx.epoch);
    }
    if verdict.outcome == Outcome::Undispatched {
        record.dispatched_ns = None;
    }
    record.outcome = verdict.outcome as u8;
    record.class = class_code(verdict.class).expect("classes come from the table");
    record.detail = verdict.detail;
    record.http_status = exchange.status.unwrap_or(0);
    record.replica = std::mem::take(&mut exchange.replica);
    record.response_head_ns = exchange.response_head_ns;
    record.first_content_ns = exchange.first_content_ns;
    record.content_gaps_us = std::mem::take(&mut exchange.content_gaps_us);
    record.content_events = exchange.content_events;
    record.usage_prompt_tokens = exchange.usage_prompt_tokens;
    record.usage_completion_tokens = exchange.usage_completion_tokens;
    record
}

async fn talk(
    ctx: &WorkerContext,
    local: &Local,
    entry: &Entry,
    record: &mut RequestRecord,
    exchange: &mut Exchange,
) -> Verdict {
    let pooled = local.connections.borrow_mut().pop();
    let (id, mut stream) = match pooled {
        Some((id, conn)) => {
            record.connection_reused = true;
            (id, conn)
        }
        None => match open(ctx, Some(record)).await {
            Ok(conn) => (local.connection_id(), conn),
            Err((e, _)) if local_exhaustion(&e) => {
                return Verdict {
                    outcome: Outcome::Undispatched,
                    class: "undispatched",
                    detail: format!("the client could not open a connection: {e}"),
                };
            }
            Err((e, true)) => {
                record.terminal_ns = now_ns(ctx.epoch);
                return Verdict::errored(
                    "tls",
                    format!("TLS handshake with {}: {e}", ctx.server_name),
                );
            }
            Err((e, false)) => {
                record.terminal_ns = now_ns(ctx.epoch);
                return connect_verdict(&e);
            }
        },
    };
    record.connection_id = id;
    let bytes = ctx.templates[entry.route as usize].bytes(entry.index);
    record.bytes_sent = bytes.len() as u64;
    let BufResult(written, _) = stream.write_all(bytes).await;
    if let Err(e) = written {
        return exchange.finish(false, Some(transport_verdict(&e)), now_ns(ctx.epoch));
    }
    record.request_written_ns = Some(now_ns(ctx.epoch));
    let mut parser = http1::Parser::default();
    let mut events = Vec::new();
    let mut buf = local.buffer();
    let verdict = loop {
        buf.clear();
        let BufResult(read, b) = stream.read(buf).await;
        buf = b;
        let now = now_ns(ctx.epoch);
        let n = match read {
            Ok(n) => n,
            Err(e) => break exchange.finish(false, Some(transport_verdict(&e)), now),
        };
        record.bytes_received += n as u64;
        if n == 0 {
            parser.eof(&mut events);
        } else {
            parser.feed(&buf[..n], &mut events);
        }
        let mut ended = false;
        for event in events.drain(..) {
            ended |= event == http1::Event::End;
            exchange.on_http(event, now);
        }
        if exchange.decided().is_some() {
            // The fate is known (an error status, broken framing): the connection is not reused.
            break exchange.finish(false, None, now);
        }
        if ended {
            let verdict = exchange.finish(true, None, now);
            if !exchange.close_after {
                local.connections.borrow_mut().push((id, stream));
            }
            break verdict;
        }
        if n == 0 {
            break exchange.finish(false, None, now);
        }
    };
    // A read cut short by the deadline never gets here: its buffer goes with the dropped
    // operation, and the next request takes a fresh one.
    local.give_back(buf);
    verdict
}

/// Sleeps until `due`, waking early when `stop` is set (then returns false).
fn sleep_until_or_stop(due: Instant, stop: &AtomicBool) -> bool {
    loop {
        let now = Instant::now();
        if now >= due {
            return true;
        }
        if stop.load(Ordering::Relaxed) {
            return false;
        }
        std::thread::sleep((due - now).min(Duration::from_millis(20)));
    }
}

/// The measured span in ns from the epoch: every phase but warm-up and cooldown (SPEC §2 reads the
/// client gate there).
fn measured_span(config: &Config) -> (u64, u64) {
    let params = config.schedule_params();
    let mut at = 0u64;
    let (mut start, mut end) = (None, 0u64);
    for phase in &params.phases {
        let measured = phase.name != "warmup" && phase.name != "cooldown";
        if measured && start.is_none() {
            start = Some(at);
        }
        at += phase.duration_ns;
        if measured {
            end = at;
        }
    }
    (start.unwrap_or(0), end)
}

/// Fastest and slowest replica probing: once per goodput bucket, within these bounds.
const PROBE_PERIOD_MIN: Duration = Duration::from_millis(50);
const PROBE_PERIOD_MAX: Duration = Duration::from_secs(1);

/// Probes one replica's own address each `period` on absolute deadlines until the run is done,
/// journaling each result as a `probe` event (formats/JOURNAL.md).
fn probe_thread(
    name: &str,
    address: std::net::SocketAddr,
    period: Duration,
    epoch: Instant,
    sender: &Sender,
    shared: &Shared,
    stop: &AtomicBool,
) {
    let mut due = epoch;
    while !shared.done.load(Ordering::Relaxed) && !stop.load(Ordering::Relaxed) {
        let at_ns = now_ns(epoch);
        let found = crate::probe::probe(address, period.min(Duration::from_millis(500)));
        let (detail, value) = found.detail_and_value();
        sender.send(Record::Event(EventRecord {
            at_ns,
            kind: EventKind::Probe.code(),
            subject: name.to_owned(),
            detail,
            value,
        }));
        due += period;
        let now = Instant::now();
        if due < now {
            // A slow probe (a silent replica) skips the deadlines it missed instead of bursting.
            due = now;
        }
        std::thread::sleep(due.saturating_duration_since(Instant::now()).min(period));
    }
}

/// The fault plan (SPEC §1): armed at the epoch with its expiry, fired at T_inject on an absolute
/// deadline, confirmed independently, removed or expired after the pinned partition (black-hole).
fn fault_thread(config: &Config, epoch: Instant, sender: &Sender, stop: &AtomicBool) {
    let Some(inject_ns) = config.inject_at_ns() else {
        return;
    };
    let fault = &config.fault;
    let Some(injector) = fault.injector else {
        return;
    };
    let victim = fault.victim.clone().unwrap_or_default();
    // How long the fault lasts before it is removed or expires: the pinned partition of a
    // black-hole, the pinned duration of a degradation; a clean delete is not undone.
    let partition_ns = match fault.variant {
        FaultVariant::BlackHole => Some(config.duration_ns(&pins::FAULT_PARTITION_S)),
        FaultVariant::Degradation => Some(config.duration_ns(&pins::FAULT_DEGRADATION_S)),
        FaultVariant::None | FaultVariant::CleanDelete => None,
    };
    let event = |kind: EventKind, at_ns: u64, detail: String, value: Option<i64>| {
        Record::Event(EventRecord::new(at_ns, kind, victim.clone(), detail, value))
    };
    sender.send(event(
        EventKind::FaultArmed,
        now_ns(epoch),
        format!(
            "{} of {victim} by {} at T_inject {:.3} s{}",
            fault.variant.name(),
            injector.name(),
            inject_ns as f64 / 1e9,
            partition_ns
                .map(|p| format!(", expiry {:.3} s later (pinned duration)", p as f64 / 1e9))
                .unwrap_or_default()
        ),
        Some(inject_ns as i64),
    ));
    if !sleep_until_or_stop(epoch + Duration::from_nanos(inject_ns), stop) {
        return;
    }
    let fired_ns = now_ns(epoch);
    let started = Instant::now();
    let result = apply(injector, fault, partition_ns);
    let took = started.elapsed();
    match result {
        Ok(detail) => sender.send(event(
            EventKind::FaultFired,
            fired_ns,
            format!(
                "{detail} (took {:.1} ms; {:.3} ms after T_inject)",
                took.as_secs_f64() * 1e3,
                (fired_ns as f64 - inject_ns as f64) / 1e6
            ),
            Some(fired_ns as i64 - inject_ns as i64),
        )),
        Err(why) => {
            sender.send(event(EventKind::FaultFailed, fired_ns, why, None));
            return;
        }
    }
    if let Some(address) = &fault.confirm_address {
        // Independent confirmation: the victim stops answering (refused, or silent for 200 ms).
        // It runs even when the run is stopping (an escape right after the fire): the confirmed
        // target is part of what an escaped experiment must retain.
        let deadline = Instant::now() + Duration::from_secs(5);
        let mut confirmed = false;
        let expected = fault.confirm_path.as_deref().zip(fault.confirm_status);
        let method = fault.confirm_method.as_deref().unwrap_or("POST");
        let contains = fault.confirm_contains.as_deref();
        let mut last = String::new();
        while Instant::now() < deadline {
            let target = address.parse::<std::net::SocketAddr>().ok();
            let impact = match (target, expected) {
                (Some(a), Some((path, status))) => match answer_of(a, method, path) {
                    Ok((got, body)) => {
                        let found = contains.is_none_or(|c| body.contains(c));
                        last = format!(
                            "answered {got}{}",
                            if found {
                                ""
                            } else {
                                " without the expected text"
                            }
                        );
                        got == status && found
                    }
                    Err(why) => {
                        last = why;
                        false
                    }
                },
                (Some(a), None) => {
                    std::net::TcpStream::connect_timeout(&a, Duration::from_millis(200)).is_err()
                }
                (None, _) => false,
            };
            if impact {
                confirmed = true;
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let (kind, detail) = match (confirmed, expected) {
            (true, None) => (EventKind::FaultConfirmed, format!("{address} stopped answering")),
            (true, Some((path, status))) => (
                EventKind::FaultConfirmed,
                format!(
                    "{method} {path} at {address} answered {status}{}",
                    contains.map_or(String::new(), |c| format!(" with {c:?}"))
                ),
            ),
            (false, None) => (
                EventKind::FaultFailed,
                format!("{address} still answers 5 s after the fault fired: impact not confirmed"),
            ),
            (false, Some((path, status))) => (
                EventKind::FaultFailed,
                format!("{method} {path} at {address} did not answer {status}{} within 5 s ({last}): impact not confirmed", contains.map_or(String::new(), |c| format!(" with {c:?}"))),
            ),
        };
        sender.send(event(kind, now_ns(epoch), detail, None));
    }
    if let Some(partition_ns) = partition_ns {
        if !sleep_until_or_stop(epoch + Duration::from_nanos(inject_ns + partition_ns), stop) {
            // The run stops early (a signal, or an escape): no further injection, and the
            // cleanup runs now rather than at the pinned expiry, recorded either way.
            if !fault.remove_command.is_empty() {
                let at = now_ns(epoch);
                match run_command(&fault.remove_command) {
                    Ok(detail) => sender.send(event(
                        EventKind::FaultRemoved,
                        at,
                        format!("early, the run stopping: {detail}"),
                        None,
                    )),
                    Err(why) => sender.send(event(
                        EventKind::FaultFailed,
                        at,
                        format!("removal failed (early, the run stopping): {why}"),
                        None,
                    )),
                }
            }
            return;
        }
        let at = now_ns(epoch);
        if fault.remove_command.is_empty() {
            sender.send(event(
                EventKind::FaultExpired,
                at,
                "the pinned duration elapsed; the injector's own armed expiry removes it".into(),
                None,
            ));
        } else {
            match run_command(&fault.remove_command) {
                Ok(detail) => sender.send(event(EventKind::FaultRemoved, at, detail, None)),
                Err(why) => sender.send(event(
                    EventKind::FaultFailed,
                    at,
                    format!("removal failed: {why}"),
                    None,
                )),
            }
        }
    }
}

/// The status and body a `method path` request (a `POST` carries `{}`) gets from `address`,
/// for confirming a degradation's impact independently of the injector. Reads at most 64 KiB.
fn answer_of(
    address: std::net::SocketAddr,
    method: &str,
    path: &str,
) -> Result<(u16, String), String> {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect_timeout(&address, Duration::from_millis(200))
        .map_err(|e| format!("{address}: {e}"))?;
    let _ = stream.set_read_timeout(Some(Duration::from_millis(500)));
    let body = if method == "POST" { "{}" } else { "" };
    let request = format!(
        "{method} {path} HTTP/1.1\r\nhost: {address}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    stream
        .write_all(request.as_bytes())
        .map_err(|e| format!("{address}: {e}"))?;
    // Read to the end of the body its content-length announces (a server may keep the
    // connection open), to the close, or to 64 KiB, whichever comes first.
    let mut response = Vec::new();
    let mut chunk = [0u8; 4096];
    while response.len() < 64 * 1024 {
        match stream.read(&mut chunk) {
            Ok(0) | Err(_) => break,
            Ok(n) => response.extend_from_slice(&chunk[..n]),
        }
        let text = String::from_utf8_lossy(&response);
        if let Some((head, body)) = text.split_once("\r\n\r\n") {
            let length = head.lines().find_map(|l| {
                let (k, v) = l.split_once(':')?;
                k.trim()
                    .eq_ignore_ascii_case("content-length")
                    .then(|| v.trim().parse::<usize>().ok())
                    .flatten()
            });
            if length.is_some_and(|n| body.len() >= n) {
                break;
            }
        }
    }
    let text = String::from_utf8_lossy(&response).into_owned();
    let status = text
        .strip_prefix("HTTP/1.1 ")
        .and_then(|rest| rest.get(..3))
        .and_then(|code| code.parse().ok())
        .ok_or_else(|| {
            format!(
                "{address} answered {:?}, not an HTTP/1.1 status line",
                text.lines().next().unwrap_or_default()
            )
        })?;
    let body = text
        .split_once("\r\n\r\n")
        .map_or(String::new(), |(_, b)| b.to_owned());
    Ok((status, body))
}

fn run_command(argv: &[String]) -> Result<String, String> {
    let (program, args) = argv.split_first().ok_or("empty command")?;
    let status = std::process::Command::new(program)
        .args(args)
        .status()
        .map_err(|e| format!("{program}: {e}"))?;
    if status.success() {
        Ok(format!("{} exited 0", argv.join(" ")))
    } else {
        Err(format!("{} exited {status}", argv.join(" ")))
    }
}

fn apply(
    injector: Injector,
    fault: &percentes_formats::config::Fault,
    partition_ns: Option<u64>,
) -> Result<String, String> {
    match injector {
        Injector::Exec => run_command(&fault.fire_command),
        Injector::KillPidFile => {
            let path = fault.pid_file.as_deref().unwrap_or_default();
            let text = std::fs::read_to_string(path)
                .map_err(|e| format!("cannot read pid file {path}: {e}"))?;
            let pid: i32 = text
                .trim()
                .parse()
                .map_err(|_| format!("pid file {path} holds {:?}, not a pid", text.trim()))?;
            // SAFETY: kill(2) with a pid read from the operator's pid file; no memory is involved.
            #[allow(unsafe_code)]
            let rc = unsafe { libc::kill(pid, libc::SIGKILL) };
            if rc == 0 {
                Ok(format!("SIGKILL to pid {pid} from {path}"))
            } else {
                Err(format!(
                    "kill({pid}, SIGKILL) failed: {}",
                    std::io::Error::last_os_error()
                ))
            }
        }
        Injector::MockAdmin => {
            let address = fault.admin_address.as_deref().unwrap_or_default();
            let mode = fault.mock_mode.as_deref().unwrap_or_default();
            let duration_ms = partition_ns.map(|p| p / 1_000_000).unwrap_or(3_600_000);
            let body = serde_json::json!({"mode": mode, "at_ms": 0, "duration_ms": duration_ms})
                .to_string();
            let request = format!("POST /admin/faults HTTP/1.1\r\nhost: {address}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}", body.len());
            let mut stream = std::net::TcpStream::connect(address)
                .map_err(|e| format!("mock admin {address}: {e}"))?;
            let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
            std::io::Write::write_all(&mut stream, request.as_bytes())
                .map_err(|e| format!("mock admin {address}: {e}"))?;
            let mut response = String::new();
            let _ = std::io::Read::read_to_string(&mut stream, &mut response);
            if response.starts_with("HTTP/1.1 200") {
                Ok(format!("mock {address} armed {mode} for {duration_ms} ms"))
            } else {
                Err(format!(
                    "mock admin {address} answered {:?}",
                    response.lines().next().unwrap_or_default()
                ))
            }
        }
    }
}

/// The counts a sealed journal ended with (for the summary line).
pub fn counts_line(counts: &Counts) -> String {
    format!(
        "{} requests: {} completed, {} errored, {} censored, {} undispatched",
        counts.requests, counts.completed, counts.errored, counts.censored, counts.undispatched
    )
}

/// Writes `text` to stderr, ignoring a closed stderr.
pub fn say(text: &str) {
    let _ = writeln!(std::io::stderr(), "{text}");
}

static SIGNALLED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_stop_signal(_: libc::c_int) {
    // Async-signal-safe: a single atomic store.
    SIGNALLED.store(true, Ordering::SeqCst);
}

/// A flag that becomes true on SIGINT or SIGTERM (a watcher thread copies the signal handler's
/// static flag into it), for [`Options::stop`].
pub fn stop_on_signals() -> Arc<AtomicBool> {
    let handler = on_stop_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
    // SAFETY: the handler only stores to a static atomic, which is async-signal-safe.
    #[allow(unsafe_code)]
    unsafe {
        libc::signal(libc::SIGINT, handler);
        libc::signal(libc::SIGTERM, handler);
    }
    let flag = Arc::new(AtomicBool::new(false));
    let watched = Arc::clone(&flag);
    std::thread::spawn(move || loop {
        if SIGNALLED.load(Ordering::SeqCst) {
            watched.store(true, Ordering::SeqCst);
            return;
        }
        // Nobody else holds the flag any more (the run it belonged to is over): stop watching,
        // so a process that records many runs (calibrate) does not keep a poller per run.
        if Arc::strong_count(&watched) == 1 {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    });
    flag
}

#[cfg(test)]
mod tests {
    use super::*;

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
            _ => Outcome::Errored,
        };
        let mut record = blank(&Entry {
            index,
            intended_ns: terminal_ns.saturating_sub(MS),
            route,
            phase: 0,
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
        // Shed-route failures never count; run-end censoring never counts.
        for i in 0..20 {
            assert!(watch
                .observe(&request(i, 1, "reset", i * MS, "replica-1"))
                .is_none());
            assert!(watch
                .observe(&request(100 + i, 0, "run-end", i * MS, ""))
                .is_none());
        }
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
        // Beyond the last bucket the maximum is read.
        let mut far = StallPool::default();
        far.add(250_000_000);
        assert_eq!(far.p99_upper_ns(), Some(250_000_000));
    }

    #[test]
    fn the_measured_span_excludes_warmup_and_cooldown() {
        let text = "schema_version = 1\nprofile = \"dev\"\n[dev]\ntime_factor = 10\n[target]\nkind = \"mock\"\nbase_url = \"http://127.0.0.1:1\"\nmodel = \"mock\"\n\
                    [schedule]\nseed = 1\narrival = \"poisson\"\nrate_rps = 5.0\n[fault]\nvariant = \"none\"\n[[routes]]\nlabel = \"chat\"\npath = \"/v1/chat/completions\"\n";
        let config = Config::parse(text.as_bytes()).unwrap();
        assert_eq!(measured_span(&config), (6_000_000_000, 36_000_000_000));
    }
}
