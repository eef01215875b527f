//! The binary's argument value types (clap `ValueEnum`s) and their mapping to the libraries'.

use std::path::PathBuf;

use clap::{Args, ValueEnum};
use percentes_analyzer::query;
use percentes_formats::config::thresholds::Threshold;
use percentes_formats::config::Profile;
use percentes_formats::spec::Spec;

/// How `record` shows its progress.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum ProgressArg {
    /// A line of counts, skew and stall each second.
    Human,
    /// One JSON object a second.
    Json,
}

/// `percentes query`'s arguments.
#[derive(Debug, Args)]
pub struct QueryArgs {
    /// The journal file (.pj), or a merged run's manifest.
    pub journal: PathBuf,
    /// The statement: one SELECT (or WITH ... SELECT).
    pub sql: String,
    /// How to print the answer: table (aligned columns, the NOT PUBLISHABLE reasons above them),
    /// csv (RFC 4180 with a header row; the reasons on standard error) or json (one object:
    /// columns with their types, rows as arrays, the reasons).
    #[arg(long, default_value = "table")]
    pub format: query::Format,
    /// The spec version whose windows and gates apply (as analyze's --spec).
    #[arg(long, default_value = Spec::CURRENT.name(), value_parser = crate::spec_version)]
    pub spec: Spec,
    #[command(flatten)]
    pub table: TableArgs,
}

/// User-set pass/fail thresholds (SPEC §9 "Thresholds"), beside the configuration's
/// `[thresholds] fail_on`.
#[derive(Debug, Args)]
pub struct FailOnArgs {
    /// Fail (exit 3) unless this holds: `METRIC[@WINDOW] OP VALUE`, e.g. `ttft_p99 < 500ms`,
    /// `error_rate < 1%`, `goodput@fault >= 90%`, `output_tokens_per_s > 100`. Metrics:
    /// ttft, tpot, itl, e2e and completion with _p50, _p90, _p95 or _p99; error_rate,
    /// censored_rate, goodput, requests_per_s, output_tokens_per_s. Without @WINDOW, the
    /// measurement window (baseline in a fault run). A refused figure fails with its reason;
    /// a gate-invalid run fails every threshold and exits 2. Repeat for more.
    #[arg(long, value_name = "THRESHOLD", value_parser = threshold)]
    pub fail_on: Vec<Threshold>,
}

fn threshold(text: &str) -> Result<Threshold, String> {
    Threshold::parse(text)
}

/// How a journal's requests are loaded: the flags of every command that reads them
/// (`analyze`, `campaign`, `export`, `query`; SPEC §9 "Table memory", §2 "Sharded capture").
#[derive(Debug, Args)]
pub struct TableArgs {
    /// The most memory the request table may take on the heap, 151 bytes a scheduled
    /// request (bytes, or KiB, MiB, GiB, TiB). A larger table keeps its columns in spill
    /// files that the kernel pages, so a run of a whole day fits a small machine; what the
    /// command writes is byte for byte the same either way. 0 spills every table.
    #[arg(long, value_name = "SIZE", default_value = "2GiB", value_parser = percentes_analyzer::load::parse_size)]
    pub table_memory: u64,
    /// The folder spill files are made in (default: the system's temporary folder). They
    /// are unlinked at once where the system allows, so nothing is left behind; put them on
    /// a disk with room for the table, not on a tmpfs, which is memory.
    #[arg(long, value_name = "DIR")]
    pub spill_dir: Option<PathBuf>,
    /// Read one shard of a sharded run by itself. Without it a shard journal is refused, with
    /// the merge to run; with it every output is marked not publishable and says "shard k of
    /// N", since the shard holds every N-th request of a load N recorders offered together.
    #[arg(long)]
    pub shard_alone: bool,
    /// A chain head the auditor trusts (64 hex digits; a merged run's manifest binding): the
    /// journal must end at it, and the report says it did (as `verify --expect-head`).
    #[arg(long, value_name = "HEX")]
    pub expect_head: Option<String>,
    /// The operator's public key file: the journal or manifest must be signed by it, and the
    /// report says it was (as `verify --pubkey`).
    #[arg(long, value_name = "FILE")]
    pub pubkey: Option<PathBuf>,
}

impl TableArgs {
    /// The loader's options these flags state.
    pub fn options(&self) -> anyhow::Result<percentes_analyzer::load::Options> {
        percentes_analyzer::load::Options {
            table_memory: self.table_memory,
            spill_dir: self.spill_dir.clone().unwrap_or_else(std::env::temp_dir),
            shard_alone: self.shard_alone,
            ..Default::default()
        }
        .trusting(self.expect_head.as_deref(), self.pubkey.as_deref())
        .map_err(anyhow::Error::msg)
    }
}

/// The profile `init` writes an example for.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum ProfileArg {
    /// Every pin in force: the only profile whose results can be published.
    Experiment,
    /// Time-compressed by the dev time factor, for demos and tests; never publishable.
    Dev,
    /// A third-party endpoint: client-side pins apply, server-side ones are "not verifiable" (§6).
    Hosted,
}

impl From<ProfileArg> for Profile {
    fn from(p: ProfileArg) -> Profile {
        match p {
            ProfileArg::Experiment => Profile::Experiment,
            ProfileArg::Dev => Profile::Dev,
            ProfileArg::Hosted => Profile::Hosted,
        }
    }
}

/// A run stated by flags instead of a configuration file (`record --url`, `init --from-flags`).
#[derive(Debug, Args)]
pub struct QuickArgs {
    /// A quick run without a configuration file: the endpoint, a base URL or a request URL
    /// ending in its route (http://host:8000/v1/chat/completions). The run's configuration is
    /// printed and journaled; dev profile, or hosted with --hosted; never publishable as dev.
    #[arg(long, value_name = "URL")]
    pub url: Option<String>,
    /// With --url: the model to ask for (target.model); without it, `record` asks the server
    /// (GET /v1/models) and takes the one model it serves.
    #[arg(long, requires = "url")]
    pub model: Option<String>,
    /// With --url: each request's max_tokens: `128`, `64..256` (uniform), `normal:MEAN,SD,MAX`
    /// or `dataset` (each prompt's own); default the pinned 256.
    #[arg(long, value_name = "TOKENS", requires = "url")]
    pub max_tokens: Option<String>,
    /// With --url: each generated prompt's length: `512`, `128..1024` or `normal:MEAN,SD,MAX`,
    /// in the --tokenizer's tokens (else words).
    #[arg(
        long,
        value_name = "TOKENS",
        requires = "url",
        conflicts_with = "dataset"
    )]
    pub input_tokens: Option<String>,
    /// With --url: a dataset of prompts, request i using prompt i mod n (a line of text, a
    /// JSONL `{"prompt"}` or `{"messages"}` line, or ShareGPT JSON).
    #[arg(long, value_name = "FILE", requires = "url")]
    pub dataset: Option<String>,
    /// With --dataset: `text`, `jsonl` or `sharegpt` (default by its extension).
    #[arg(long, value_name = "FORMAT", requires = "dataset")]
    pub dataset_format: Option<String>,
    /// With --url: the model's tokenizer.json, so prompt lengths are counted in its tokens.
    #[arg(long, value_name = "FILE", requires = "url")]
    pub tokenizer: Option<String>,
    /// With --url: the offered rate in requests/s (schedule.rate_rps), open loop (a sweep
    /// takes its rates from --rates).
    // A negative rate is read as a value (and refused for what it is), not as a flag.
    #[arg(
        long,
        value_name = "RPS",
        requires = "url",
        allow_negative_numbers = true
    )]
    pub rate: Option<f64>,
    /// With --url: how long to measure (30s, 2m, 500ms), after a warm-up of a tenth of it.
    #[arg(long, value_name = "TIME", requires = "url", value_parser = duration)]
    pub duration: Option<f64>,
    /// With --url: the warm-up (discarded) instead of a tenth of --duration.
    #[arg(long, value_name = "TIME", requires = "url", value_parser = duration)]
    pub warmup: Option<f64>,
    /// With --url: stream the responses (SSE), for time to first token and inter-token times.
    #[arg(long, requires = "url")]
    pub stream: bool,
    /// With --url: a header sent on every request, `Name: value` (repeat it for more).
    #[arg(long, value_name = "NAME: VALUE", requires = "url")]
    pub header: Vec<String>,
    /// With --url: a header whose value is a secret, read from an environment variable at the
    /// start and never journaled: `Name=VARIABLE` (repeat it for more).
    #[arg(long, value_name = "NAME=VARIABLE", requires = "url")]
    pub secret_header: Vec<String>,
    /// With --url: the environment variable holding the API key (a bearer token; never
    /// journaled).
    #[arg(long, value_name = "VAR", requires = "url")]
    pub api_key_env: Option<String>,
    /// With --url: a third-party endpoint, so the hosted profile and its pinned timeline (no
    /// --duration; no ignore_eos sent).
    #[arg(long, requires = "url")]
    pub hosted: bool,
    /// With --url: the schedule's seed.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// With --url: the arrivals, poisson or deterministic.
    #[arg(long, default_value = "poisson")]
    pub arrival: String,
}

fn duration(text: &str) -> Result<f64, String> {
    percentes_formats::config::parse_duration_s(text)
}

impl QuickArgs {
    /// The run the flags state, if --url was given.
    pub fn quick(&self) -> Option<percentes_formats::config::Quick> {
        Some(percentes_formats::config::Quick {
            url: self.url.clone()?,
            model: self.model.clone().unwrap_or_default(),
            // Absent is not zero: the configuration says which flag is missing.
            rate_rps: self.rate.unwrap_or(f64::NAN),
            duration_s: self.duration,
            warmup_s: self.warmup,
            stream: self.stream,
            headers: self.header.clone(),
            secret_headers: self.secret_header.clone(),
            api_key_env: self.api_key_env.clone(),
            hosted: self.hosted,
            seed: self.seed,
            arrival: self.arrival.clone(),
            max_tokens: self.max_tokens.clone(),
            input_tokens: self.input_tokens.clone(),
            dataset: self.dataset.clone(),
            dataset_format: self.dataset_format.clone(),
            tokenizer: self.tokenizer.clone(),
        })
    }
}

/// `percentes record`'s arguments.
#[derive(Debug, Args)]
pub struct RecordArgs {
    /// The configuration file (TOML; `percentes init` writes a commented one), or --url and
    /// its flags for a quick run.
    #[arg(required_unless_present = "url", conflicts_with = "url")]
    pub config: Option<PathBuf>,
    /// A quick run's flags.
    #[command(flatten)]
    pub quick: QuickArgs,
    /// The journal to write.
    #[arg(short, long)]
    pub output: PathBuf,
    /// Overwrite an existing journal.
    #[arg(long)]
    pub force: bool,
    /// The operator's ed25519 secret key (64 hex digits, as `keygen` writes): signs every
    /// checkpoint and the seal.
    #[arg(long, value_name = "FILE")]
    pub sign_key: Option<PathBuf>,
    /// Worker threads, each an io_uring runtime pacing its share of the schedule.
    #[arg(long, default_value_t = 1)]
    pub workers: usize,
    /// Leave out the loopback canary, the receive-path check (SPEC §2) that streams one
    /// event each 10 ms to every worker and journals how late the worker saw it.
    #[arg(long)]
    pub no_canary: bool,
    /// No progress (a CPU warning still shows).
    #[arg(long)]
    pub quiet: bool,
    /// How progress is shown each second on stderr: `human` (phase, fault state, counts, the
    /// last second's TTFT, skew, stall and CPU; redrawn in place on a terminal; the default) or
    /// `json` (one JSON object a line). Either warns at once when the CPU G2.3 reads passes
    /// its limit.
    #[arg(long, value_enum)]
    pub progress: Option<ProgressArg>,
    /// Send one share of the schedule, as shard K of N recorders (SPEC §2 "Sharded capture"):
    /// the indices i with i mod N = K. Needs --start-at; only shard 0 runs the fault plan and
    /// the replica probes. Merge the N journals with `percentes merge`.
    #[arg(long, value_name = "K/N", conflicts_with = "shards")]
    pub shard: Option<String>,
    /// As --shard K/N, with K from the environment variable JOB_COMPLETION_INDEX (set by a
    /// Kubernetes Indexed Job for each of its pods).
    #[arg(long, value_name = "N")]
    pub shards: Option<u32>,
    /// The agreed epoch every shard counts from: Unix seconds or RFC 3339
    /// (2026-12-01T21:40:00Z). The recorder waits for it; one that reaches it more than
    /// shards.start_late_max_ms late refuses to record.
    #[arg(long, value_name = "TIME")]
    pub start_at: Option<String>,
    /// Write each chain head (header, every checkpoint, seal) as a JSON line to FILE as it is
    /// written, kept outside the journal (--progress json prints them too).
    #[arg(long, value_name = "FILE")]
    pub heads: Option<PathBuf>,
    #[command(flatten)]
    pub host: HostArgs,
    /// Skip the half-second look at the host before the run (`percentes doctor`'s checks).
    #[arg(long)]
    pub no_host_check: bool,
    /// Listen on this Unix socket (owner only) for timeline events from an orchestrator
    /// outside the recorder (`percentes event`; one JSON object a line, SPEC §5); removed at
    /// the end of the run.
    #[arg(long, value_name = "PATH")]
    pub events_socket: Option<PathBuf>,
    /// Print the end-of-run summary as JSON on standard output (the schema of `analyze`'s
    /// summary.json) instead of in words.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub fail_on: FailOnArgs,
}

/// `percentes event`: one timeline event to a running recorder.
#[derive(Debug, Args)]
pub struct EventArgs {
    /// The recorder's `--events-socket`.
    pub socket: PathBuf,
    /// The timeline subject: detected, reschedule, container-start, weight-load,
    /// graph-capture, node-monitor-grace, restart-failed or orchestrator.
    pub subject: String,
    /// What happened, in words (journaled with the event).
    #[arg(long, default_value = "")]
    pub detail: String,
    /// The number the subject defines (node-monitor-grace: seconds).
    #[arg(long)]
    pub value: Option<i64>,
    /// When it happened, on this host's CLOCK_MONOTONIC (ns); default: when the recorder reads it.
    #[arg(long, value_name = "NS", conflicts_with = "at_realtime_ns")]
    pub at_monotonic_ns: Option<i64>,
    /// When it happened on the wall clock (ns since the Unix epoch), as a cluster reports it.
    #[arg(long, value_name = "NS")]
    pub at_realtime_ns: Option<i64>,
}

/// Where the recorder's workers run: `record` and `doctor`.
#[derive(Debug, Args)]
pub struct HostArgs {
    /// Pin the workers to these CPUs (`0,2-3`; worker w on the w-th, wrapping around). By
    /// default nothing is pinned and the kernel places the workers (SPEC §2 "Placement").
    #[arg(long, value_name = "LIST")]
    pub cpus: Option<String>,
}

/// `percentes mock`'s arguments.
#[derive(Debug, Args)]
pub struct MockArgs {
    /// Address to listen on (port 0 picks a free one and prints it).
    #[arg(long, default_value = "127.0.0.1:8000")]
    pub listen: String,
    /// Mock configuration (TOML); see --example-config. Defaults apply without one.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Replica name, overriding the config's (reported in X-Percentes-Replica).
    #[arg(long)]
    pub name: Option<String>,
    /// Print a commented example configuration and exit.
    #[arg(long)]
    pub example_config: bool,
    /// Answer 503 (health included) for this long after start: a replica reloading weights.
    #[arg(long, value_name = "MS")]
    pub slow_reload_ms: Option<u64>,
    /// Worker threads (default: one per core).
    #[arg(long)]
    pub threads: Option<usize>,
}

/// `percentes testbed`'s arguments.
#[derive(Debug, Args)]
pub struct TestbedArgs {
    /// How many mock replicas to start behind the router.
    #[arg(long, default_value_t = 2)]
    pub replicas: usize,
    /// Mock configuration for every replica.
    #[arg(long, value_name = "FILE")]
    pub mock_config: Option<PathBuf>,
    /// Run each replica in a network namespace of its own (so it can be black-holed).
    /// Needs root, iproute2 and iptables.
    #[arg(long)]
    pub isolated: bool,
    /// Write service.addr and, per replica, NAME.addr and NAME.pid here (for injectors that
    /// kill by pid file or call the router's /admin/endpoints).
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
}

/// `percentes compare`.
#[derive(Debug, Args)]
pub struct CompareArgs {
    /// Side A's journals; with no --vs, exactly two journals, A then B.
    #[arg(required = true, value_name = "JOURNAL")]
    pub runs: Vec<PathBuf>,
    /// Side B's journals (after which the positional journals are all side A's).
    #[arg(long, num_args = 1.., value_name = "JOURNAL")]
    pub vs: Vec<PathBuf>,
    /// The spec version both sides are analyzed under.
    #[arg(long, default_value = Spec::CURRENT.name(), value_parser = spec_version)]
    pub spec: Spec,
    /// The latency difference that matters, as a percentage of A's value.
    #[arg(long, default_value = "5%", value_parser = percent)]
    pub margin: f64,
    /// The share difference that matters (error, censored, goodput), in percentage points.
    #[arg(long, default_value = "1%", value_parser = percent)]
    pub share_margin: f64,
    /// Print the comparison as JSON (schema percentes-compare/1).
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub table: TableArgs,
}

fn percent(text: &str) -> Result<f64, String> {
    match text
        .trim()
        .strip_suffix('%')
        .map(|v| v.trim().parse::<f64>())
    {
        Some(Ok(v)) if v.is_finite() && v > 0.0 && v < 100.0 => Ok(v / 100.0),
        _ => Err(format!(
            "`{text}` is not a percentage above 0 and below 100 (write `5%`)"
        )),
    }
}

fn spec_version(value: &str) -> Result<Spec, String> {
    crate::spec_version(value)
}
