//! The binary's flags: the commands and their arguments (clap definitions, help text included),
//! the argument value types and their mapping to the libraries'. main.rs dispatches them.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};
use percentes_analyzer::model::SegmentColumns;
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
    #[arg(long, default_value = Spec::CURRENT.name(), value_parser = spec_version)]
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
    /// censored_rate, goodput (yours under --slo), pinned_goodput, requests_per_s,
    /// output_tokens_per_s. Without @WINDOW, the
    /// measurement window (baseline in a fault run). A refused figure fails with its reason;
    /// a gate-invalid run fails every threshold and exits 2. Repeat for more.
    #[arg(long, value_name = "THRESHOLD", value_parser = Threshold::parse_flag)]
    pub fail_on: Vec<Threshold>,
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
        .map_err(anyhow::Error::from)
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
    /// With --url: a dataset of prompts, request i using prompt i mod n (text lines, JSONL
    /// `{"prompt"}`/`{"messages"}` lines with their own tools and images, or ShareGPT JSON).
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
        allow_negative_numbers = true,
        value_parser = percentes_formats::config::rate_flag
    )]
    pub rate: Option<f64>,
    /// With --url: how long to measure (30s, 2m, 500ms), after a warm-up of a tenth of it.
    #[arg(long, value_name = "TIME", requires = "url", value_parser = percentes_formats::config::parse_duration_s)]
    pub duration: Option<f64>,
    /// With --url: the warm-up (discarded) instead of a tenth of --duration.
    #[arg(long, value_name = "TIME", requires = "url", value_parser = percentes_formats::config::parse_duration_s)]
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
    /// With --url: the environment variable holding the API key (a bearer token; not journaled).
    #[arg(long, value_name = "VAR", requires = "url")]
    pub api_key_env: Option<String>,
    /// With --url: a third-party endpoint, so the hosted profile and its pinned timeline (no
    /// --duration; no ignore_eos sent).
    #[arg(long, requires = "url")]
    pub hosted: bool,
    /// With --url: no pre-flight (the GET of the model list and one timed sample request).
    #[arg(long, requires = "url")]
    pub no_preflight: bool,
    /// With --url: the schedule's seed.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// With --url: the arrivals, poisson or deterministic.
    #[arg(long, default_value = "poisson")]
    pub arrival: String,
    /// With --url: a closed loop of N users, each sending after its previous response (and
    /// --think-time); no --rate (the rate is an outcome).
    #[arg(long, value_name = "N", requires = "url")]
    pub concurrency: Option<u32>,
    /// With --url: semi-open, sessions of K requests each arriving at --rate sessions/s, each
    /// request after the previous response (and --think-time).
    #[arg(long, value_name = "K", requires = "url")]
    pub turns: Option<u32>,
    /// With --concurrency or --turns: the mean think time between a response and the next
    /// request (500ms, 2s).
    #[arg(long, value_name = "TIME", requires = "url", value_parser = percentes_formats::config::parse_duration_s)]
    pub think_time: Option<f64>,
    /// With --think-time: `fixed` (default) or `exponential` think times.
    #[arg(long, value_name = "LAW", requires = "url")]
    pub think: Option<String>,
    /// With --url: replay a JSONL trace, one `{"timestamp": MS, ...}` a line, at its times
    /// (and its `prompt`/`messages`, when every line has one); no --rate.
    #[arg(long, value_name = "FILE", requires = "url")]
    pub trace: Option<String>,
    /// With --turns: each turn resends its session's earlier turns (SPEC §1).
    #[arg(long, requires = "turns")]
    pub history: bool,
    /// With --url: shared prefixes (SPEC §1), e.g. 8x256 (8 texts of 256 words) or 8x256:0.5.
    #[arg(long, value_name = "POOL", requires = "url")]
    pub shared_prefixes: Option<String>,
    /// With --url: close a share of the requests after a delay (SPEC §1), e.g. 0.2:800ms.
    #[arg(long, value_name = "SHARE:TIME", requires = "url")]
    pub abandon: Option<String>,
    /// With --url: a JSON file of function tools for every request (journaled in the config).
    #[arg(long, value_name = "FILE", requires = "url")]
    pub tools: Option<String>,
    /// With --tools: `auto`, `none`, `required`, or a function's name (forces the call).
    #[arg(long, value_name = "CHOICE", requires = "tools")]
    pub tool_choice: Option<String>,
    /// With --url: `json_object`, or a JSON Schema file the answer must follow.
    #[arg(long, value_name = "json_object|FILE", requires = "url")]
    pub response_format: Option<String>,
    /// With --url: an image file (PNG, JPEG, GIF, WebP) attached to every request (repeat it).
    #[arg(long, value_name = "FILE", requires = "url")]
    pub image: Vec<String>,
    /// With --tools or --response-format: check each answer against its schema (SPEC §1).
    #[arg(long, requires = "url")]
    pub check_structured: bool,
    /// With --url: your own SLO beside the pinned one, journaled (SPEC §4 "A declared SLO"):
    /// 'ttft<=500ms,tpot<=50ms[,goodput>=95%]' over ttft, ttfat, tpot, itl (the longest gap
    /// between deliveries), e2e; the goodput a sweep's rate must keep (default 99 %).
    #[arg(long, value_name = "OBJECTIVES", requires = "url", value_parser = percentes_formats::config::slo::flag_text)]
    pub slo: Option<String>,
    /// With --url: scrape its /metrics (SPEC §2): auto (off with --hosted), vllm, sglang, tgi, off.
    #[arg(long, value_name = "PRESET", requires = "url")]
    pub server_metrics: Option<String>,
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
            no_preflight: self.no_preflight,
            seed: self.seed,
            arrival: self.arrival.clone(),
            max_tokens: self.max_tokens.clone(),
            input_tokens: self.input_tokens.clone(),
            dataset: self.dataset.clone(),
            dataset_format: self.dataset_format.clone(),
            tokenizer: self.tokenizer.clone(),
            workload: percentes_formats::config::QuickWorkload {
                users: self.concurrency,
                turns: self.turns,
                history: self.history,
                think_s: self.think_time,
                think: self.think.clone(),
                trace: self.trace.clone(),
                prefixes: self.shared_prefixes.clone(),
                abandon: self.abandon.clone(),
            },
            parts: percentes_formats::config::QuickParts {
                tools_file: self.tools.clone(),
                tool_choice: self.tool_choice.clone(),
                response_format: self.response_format.clone(),
                images: self.image.clone(),
                structured: self.check_structured,
            },
            slo: self.slo.clone(),
            server_metrics: self.server_metrics.clone(),
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
    /// Worker threads, each an io_uring runtime pacing its share of the schedule (1 to 64).
    #[arg(long, default_value_t = 1, value_parser = percentes_recorder::run::workers_flag)]
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

/// `percentes watch`: the cluster's timeline, from the API's watch (SPEC §5).
#[derive(Debug, Args)]
pub struct WatchArgs {
    /// The recorder's `--events-socket` (waited for, up to --wait seconds).
    pub socket: PathBuf,
    /// The pod the fault targets (followed by uid: a StatefulSet's replacement keeps its name).
    #[arg(long)]
    pub victim: String,
    /// The serving pods' label selector.
    #[arg(long, default_value = "app=vllm")]
    pub selector: String,
    /// The serving pods' namespace.
    #[arg(long, default_value = "default")]
    pub namespace: String,
    /// Watch every node's Ready condition too (needs list and watch on nodes).
    #[arg(long)]
    pub nodes: bool,
    /// kubectl, then each argument it always takes: `--kubectl=kubectl --kubectl=--kubeconfig=F`.
    #[arg(
        long,
        default_value = "kubectl",
        value_name = "ARG",
        allow_hyphen_values = true
    )]
    pub kubectl: Vec<String>,
    /// How long to wait for the recorder's socket to appear, seconds.
    #[arg(long, default_value_t = 900)]
    pub wait: u64,
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
    /// Print the comparison as JSON (schema percentes-compare/2).
    #[arg(long)]
    pub json: bool,
    /// Exit 3 when B is worse than A beyond the margins in any figure (a regression).
    #[arg(long)]
    pub fail_on_regression: bool,
    /// Compare invalid runs' figures too, for diagnosis (NOT PUBLISHABLE; the exit stays 2).
    #[arg(long)]
    pub diagnose: bool,
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

/// Open-loop load and failure measurement for LLM inference services.
///
/// Record a hash-chained journal of every scheduled request, verify it, analyze it under a chosen
/// spec version. See README.md and SPEC.md.
#[derive(Debug, Parser)]
#[command(name = "percentes", version = version_line(), propagate_version = true)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub(crate) command: Command,
}

#[derive(Debug, Subcommand)]
pub(crate) enum ScenarioCommand {
    /// List the scenario files in a folder: question, expectation, and whether each can run here
    /// (refused scenarios say why).
    List {
        /// A folder of scenario files (*.toml); without it, the catalogue compiled into this
        /// build (scenarios/catalogue), which works from any folder.
        dir: Option<PathBuf>,
    },
    /// Run one scenario on the local testbed: start the mocks and the router, record, play the
    /// orchestrator, verify, analyze, and write journal, config, report and scenario.md into one
    /// folder. Exit 0 valid, 2 gate-invalid, 1 error.
    Run {
        /// The scenario file, or the name of a catalogue scenario (`pod-churn`): a path that does
        /// not exist is looked up in the compiled-in catalogue.
        file: PathBuf,
        /// The folder everything goes in.
        #[arg(short, long)]
        output: PathBuf,
        /// Write into a folder that holds other files (an earlier run's folder is replaced
        /// without it).
        #[arg(long)]
        force: bool,
        /// The dev profile's time factor (NOT PUBLISHABLE): 10 runs 1 m 42 s of load, 100 runs
        /// 10 s; 2 runs 8 m 30 s, for real replicas whose start-up needs the recovery window.
        #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(2..=100), conflicts_with = "experiment")]
        time_factor: u32,
        /// Run the pinned full-length experiment profile instead (about 17 minutes).
        #[arg(long)]
        experiment: bool,
        /// Analyze an invalid run's statistics anyway, for diagnosis (as `analyze --diagnose`).
        #[arg(long)]
        diagnose: bool,
    },
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Run the replica-loss study end to end on this machine (Linux; about 2 minutes): two mock
    /// replicas behind a router, a clean delete under load in the dev profile, recorded,
    /// verified and analyzed into one folder (journal, report.json, report.md, report.html,
    /// plots). Needs no root and no installs. NOT PUBLISHABLE by construction.
    Demo {
        /// The folder everything goes in.
        #[arg(short, long, default_value = "demo-out")]
        output: PathBuf,
        /// Write into a folder that holds other files (an earlier demo's folder is replaced
        /// without it).
        #[arg(long)]
        force: bool,
        /// The dev profile's time factor: 10 (about 1 m 45 s of load) or up to 100 (about 10 s;
        /// the tests use it). The mocks are sized to it.
        #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(10..=100))]
        time_factor: u32,
        /// Analyze an invalid run's statistics anyway, for diagnosis (as `analyze --diagnose`).
        #[arg(long)]
        diagnose: bool,
    },
    /// Scenario files (seeds/004's governed experiments) run on the local testbed (Linux).
    #[command(subcommand)]
    Scenario(ScenarioCommand),
    /// Measure lambda_max of one replica addressed directly (SPEC §10, Linux): a coarse ramp
    /// from 2 rps doubling until a step fails, then steps 10 % above the last pass; each step a
    /// recorded journal (30 s settle + 120 s measured, divided by a dev time factor); run twice,
    /// a third time when the two differ by more than 10 %. Writes every step's configuration and
    /// journal, calibration.json and calibration.md. Exit 0 calibrated, 2 calibration invalid.
    Calibrate {
        /// The run configuration to calibrate for (its target, routes, profile and pins); the
        /// replica's address comes from target.replica_addresses.
        config: PathBuf,
        /// The folder the trace goes in.
        #[arg(short, long)]
        output: PathBuf,
        /// Which replica (default: the first of target.replicas).
        #[arg(long)]
        replica: Option<String>,
        /// Write into a folder that is not empty.
        #[arg(long)]
        force: bool,
        /// Judge a step whose every recording only the client gate spoiled by its diagnosis
        /// (goodput and waiting gauge): the lambda_max found is for diagnosis only, exit 2.
        #[arg(long)]
        diagnose: bool,
    },
    /// Latency against offered load (Linux): one recording of CONFIG per rate, only
    /// schedule.rate_rps changed, each analyzed as `analyze` would (a recording only the client
    /// gate failed is recorded again, as a calibration step is). Writes each rate's
    /// configuration and journal, sweep.json, sweep.md and two plots. Exit 2 when a rate's
    /// recording failed a gate.
    Sweep {
        /// The run configuration (fault.variant = "none"); or the quick run's flags (--url ...).
        #[arg(required_unless_present = "url")]
        config: Option<PathBuf>,
        #[command(flatten)]
        quick: QuickArgs,
        /// The offered rates, requests/s: a list (2,4,8,16) or a geometric ramp (2..32*2).
        #[arg(long)]
        rates: percentes_analyzer::sweep::Rates,
        /// The folder everything goes in.
        #[arg(short, long)]
        output: PathBuf,
        /// Write into a folder that is not empty.
        #[arg(long)]
        force: bool,
        /// Show an invalid rate's statistics anyway, marked NOT PUBLISHABLE (as analyze's).
        #[arg(long)]
        diagnose: bool,
    },
    /// Write a commented, valid example configuration, or (--from-flags) the one a quick run's
    /// flags state, to edit.
    Init {
        /// Which profile the example is for.
        #[arg(long, value_enum, default_value_t = ProfileArg::Dev)]
        profile: ProfileArg,
        /// Write the configuration `record --url ...` would run with these flags.
        #[arg(long, requires = "url")]
        from_flags: bool,
        /// The quick run's flags (with --from-flags).
        #[command(flatten)]
        quick: QuickArgs,
        /// Write to this file instead of standard output.
        #[arg(short, long)]
        output: Option<PathBuf>,
        /// Overwrite the output file if it exists.
        #[arg(long)]
        force: bool,
    },
    /// Record a run: send every scheduled request at its intended time and write the journal
    /// (Linux). SIGINT or SIGTERM stops dispatch, drains in-flight requests and seals the journal
    /// as aborted (exit 1); an abort trigger ([declaration.abort]) seals it escaped (exit 2), and
    /// a run that failed a validity gate exits 2, as `analyze` of its journal does.
    Record(Box<RecordArgs>),
    /// Merge the shard journals of one run (SPEC §2 "Sharded capture"): check one configuration,
    /// schedule and epoch, every shard once, sealed-intact, holding exactly its indices, starts
    /// and clocks within their pins; write the manifest binding their chain heads, which
    /// `analyze`, `export`, `campaign` and `verify` accept in place of a journal. Exit 1: refused.
    Merge {
        /// The shard journals (.pj), in any order.
        #[arg(required = true)]
        shards: Vec<PathBuf>,
        /// The manifest to write (JSON); shard paths in it are relative to its folder.
        #[arg(short, long)]
        output: PathBuf,
        /// The operator's ed25519 secret key (as `keygen` writes): signs the manifest's binding.
        #[arg(long, value_name = "FILE")]
        sign_key: Option<PathBuf>,
        /// Replace an existing manifest.
        #[arg(long)]
        force: bool,
    },
    /// Validate configurations and list the pins.
    #[command(subcommand)]
    Config(ConfigCommand),
    /// Verify a journal's hash chain, checkpoints, signatures and seal.
    ///
    /// Verdicts: sealed-intact, unsealed-prefix, tampered, not-a-journal, unsupported-version.
    /// Exit status 0 only for sealed-intact (and a matching --expect-head / --pubkey).
    Verify {
        /// The journal file (.pj) to verify.
        journal: PathBuf,
        /// A chain head kept outside the file (printed by the recorder at a checkpoint or the
        /// seal, or cited in a report): the chain must pass through it.
        #[arg(long, value_name = "HEX")]
        expect_head: Option<String>,
        /// The operator's ed25519 public key (64 hex digits in a file, as `keygen` writes it):
        /// the journal must be signed by it.
        #[arg(long, value_name = "FILE")]
        pubkey: Option<PathBuf>,
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Analyze a journal under a spec version: verify it, cut the windows, estimate, gate, and
    /// write report.json, report.md and histograms.hlog.
    ///
    /// A tampered journal is refused (exit 1). An unsealed, aborted or dev-profile one is analyzed
    /// for diagnosis, and every output says NOT PUBLISHABLE and why. A run that fails the
    /// client-validity gate (§2) publishes no statistic and exits 2; `--diagnose` shows its
    /// statistics anyway, marked NOT PUBLISHABLE, and still exits 2.
    Analyze {
        /// The journal file (.pj) to analyze.
        journal: PathBuf,
        /// The spec version whose rules to apply: v0.5 (stream figures say which tokens they
        /// are about; A4), v0.4 (a reading says what it measured, over what and of how many;
        /// A3), v0.3 (recovery read only where the data support it; A2), v0.2 (recovery as
        /// archived) or v0.1 (Kaplan-Meier, errors censored; A1). Older versions reproduce
        /// archived reports; a journal from before 2026-12-03 fails G2.4 from v0.4 on.
        #[arg(long, default_value = Spec::CURRENT.name(), value_parser = spec_version)]
        spec: Spec,
        /// The folder the report files go in (created if needed; files in it are replaced).
        #[arg(short, long, default_value = "report")]
        output: PathBuf,
        /// Print report.json to standard output instead of the summary (the summary's own JSON
        /// is summary.json in the report folder).
        #[arg(long)]
        json: bool,
        /// Compute the statistics an invalid run withholds, to see what went wrong; every output
        /// says NOT PUBLISHABLE and the exit stays 2 (§9).
        #[arg(long)]
        diagnose: bool,
        /// Cut every window by these columns too (route, replica, release, class, outcome, phase,
        /// status, protocol, output, prefix; comma-separated), each segment with its own outcomes,
        /// completion curve and latencies with their refusals, in report.md and report.json (§9).
        #[arg(long, value_name = "COLUMNS", value_parser = SegmentColumns::parse)]
        by: Option<SegmentColumns>,
        #[command(flatten)]
        table: TableArgs,
        #[command(flatten)]
        fail_on: FailOnArgs,
    },
    /// Compare two runs, or two groups of runs, window by window: `compare A.pj B.pj`, or
    /// `compare A1.pj A2.pj --vs B1.pj B2.pj`.
    ///
    /// Each latency quantile, share and throughput gets B - A with a 95 % interval, a named test
    /// and a verdict (B slower, faster, worse, better, no difference, no decision); p-values are
    /// Holm-adjusted over the whole comparison (SPEC §9 "Comparisons"), and one line sums it up
    /// (regression, improvement, no difference, not comparable). One run a side is compared
    /// request by request, several run by run. Exit 2 when a run is invalid, 3 on a regression
    /// under --fail-on-regression.
    Compare(CompareArgs),
    /// Summarize the runs of a campaign: per (variant, configuration), every run-level scalar
    /// verbatim with its median, mean, t-interval (N = 5), range and coefficient of variation;
    /// Welch comparisons between two variants with Holm's correction; the headline.
    ///
    /// Each journal is verified and analyzed as `analyze` would; invalid runs are dropped and
    /// named. Writes campaign.json and campaign.md.
    Campaign {
        /// The journals of the campaign (.pj), every run of every variant.
        #[arg(required = true)]
        journals: Vec<PathBuf>,
        /// The spec version applied to every run.
        #[arg(long, default_value = Spec::CURRENT.name(), value_parser = spec_version)]
        spec: Spec,
        /// The folder campaign.json and campaign.md go in.
        #[arg(short, long, default_value = "campaign")]
        output: PathBuf,
        #[command(flatten)]
        table: TableArgs,
    },
    /// Export one row per scheduled request as a Parquet file, for pandas, DuckDB or Spark.
    ///
    /// Times are ns from the run's epoch; absent timestamps are null. The file's key-value
    /// metadata cites the spec version at capture, the config hash and the journal's chain head.
    Export {
        /// The journal file (.pj) to export.
        journal: PathBuf,
        /// The Parquet file to write.
        #[arg(long, value_name = "FILE")]
        parquet: PathBuf,
        /// Overwrite the file if it exists.
        #[arg(long)]
        force: bool,
        #[command(flatten)]
        table: TableArgs,
    },
    /// Ask a journal a question in SQL (polars SQL) and print the answer.
    ///
    /// The tables: `requests` (one row per scheduled request: the export's columns and the
    /// `window` its intended time falls in), `events`, `telemetry` and `windows` (the report's
    /// timeline: window, start_ns, end_ns, scheduled). Times are ns from the run's epoch; an
    /// absent one is null. `SELECT * FROM requests LIMIT 1` shows a table's columns.
    ///
    /// The journal is verified and analyzed as `analyze` would: a tampered one is refused (exit
    /// 1), and the answer says NOT PUBLISHABLE and why wherever the report would; a run that
    /// fails a gate is answered as a diagnosis and exits 2. Only one query is answered, over
    /// these tables alone: a statement that reads a file, or changes anything, is refused.
    ///
    /// Example: percentes query run.pj "SELECT window, outcome, count(*) AS n FROM requests
    /// GROUP BY window, outcome ORDER BY window, outcome"
    ///
    /// Built with the `query` feature (`cargo build --release --features query`): polars' SQL
    /// engine more than doubles a clean build, so a default build has it not.
    Query(QueryArgs),
    /// Print a journal's header, and with --records its records as JSON lines.
    Inspect {
        /// The journal file (.pj) to inspect.
        journal: PathBuf,
        /// Print the records of the verified prefix as JSON lines.
        #[arg(long)]
        records: bool,
        /// Only records of these kinds (request, event, telemetry, checkpoint, seal, other).
        #[arg(long, value_delimiter = ',', requires = "records")]
        kind: Vec<crate::inspect::KindArg>,
        /// Skip records before this sequence number.
        #[arg(long, default_value_t = 0, requires = "records")]
        from: u64,
        /// Print at most this many records.
        #[arg(long, requires = "records")]
        limit: Option<u64>,
        /// Print the header as JSON.
        #[arg(long, conflicts_with = "records")]
        json: bool,
        /// Include the raw configuration text in the header output.
        #[arg(long)]
        config: bool,
    },
    /// Run the mock inference server: OpenAI-compatible, known timing model, fault modes.
    ///
    /// Serves POST /v1/chat/completions, /v1/completions, /v1/responses (SSE or not; reasoning,
    /// tool calls, JSON), GET /health, /metrics, GET/POST /admin/faults. Runs until Ctrl-C.
    Mock(MockArgs),
    /// Run the layer-7 round-robin router in front of mock replicas (no retries).
    ///
    /// Adds x-percentes-upstream to each response, logs each request by x-request-id, and takes
    /// endpoint readiness from POST /admin/endpoints {"name": ..., "ready": true|false}.
    Router {
        /// The address to listen on (HOST:PORT). Its default differs from the mock's 8000, so
        /// a router and a mock started with their defaults do not collide.
        #[arg(long, default_value = "127.0.0.1:8080")]
        listen: String,
        /// An upstream as NAME=HOST:PORT; repeat for each replica.
        #[arg(long = "upstream", value_name = "NAME=HOST:PORT", required = true)]
        upstreams: Vec<String>,
    },
    /// Start N mock replicas and the router as child processes; print their addresses and pids;
    /// stop them all on Ctrl-C.
    Testbed(TestbedArgs),
    /// Look at this host for a few seconds and say whether the client gate's pins (SPEC §2,
    /// G2) can hold here, and what to change (Linux). Exit 2 when a check predicts a failure.
    Doctor {
        /// How long to look, in seconds.
        #[arg(long, default_value_t = 3.0)]
        seconds: f64,
        #[command(flatten)]
        host: HostArgs,
    },
    /// Hand a running recorder a timeline event an orchestrator saw (`record --events-socket
    /// PATH`; SPEC §5): journaled at the time stated, beside the time the recorder read it.
    Event(EventArgs),
    /// Journal a Kubernetes cluster's timeline for the fault's target: `kubectl get --watch` over
    /// the serving pods (and nodes), each deletion, scheduling, container start and readiness
    /// handed to the recorder at `SOCKET` as `percentes event` would (SPEC §5).
    Watch(WatchArgs),
    /// Print a shell completion script: `percentes completions bash > /etc/bash_completion.d/percentes`
    /// (bash, zsh, fish, elvish, powershell).
    Completions {
        /// The shell to complete in.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print a manual page (roff): `percentes man > percentes.1; man ./percentes.1`; with a
    /// command, that command's page (`percentes man record > percentes-record.1`).
    Man {
        /// The command whose page to print (`record`, `analyze`, ...); the overview without.
        command: Option<String>,
    },
    /// Create an ed25519 key pair for signing journal checkpoints and seals.
    Keygen {
        /// Writes PREFIX.key (secret, mode 0600) and PREFIX.pub (public), as hex.
        #[arg(long, value_name = "PREFIX")]
        out: PathBuf,
        /// Replace an existing key pair of that prefix.
        #[arg(long)]
        force: bool,
    },
}

#[derive(Debug, Subcommand)]
pub(crate) enum ConfigCommand {
    /// Validate a configuration; print its profile, hash and every pin in force.
    Check {
        /// The configuration file (TOML).
        file: PathBuf,
        /// Print the result as JSON instead of text.
        #[arg(long)]
        json: bool,
        /// List every pin in force, not only those the file sets or its profile changes.
        #[arg(long)]
        pins: bool,
    },
    /// Print the pin table (SPEC.md's "Pins" section is this output).
    Pins,
}

pub(crate) fn version_line() -> &'static str {
    concat!(
        env!("CARGO_PKG_VERSION"),
        " (commit ",
        env!("PERCENTES_COMMIT"),
        "; journal format v1; spec v0.5)"
    )
}

/// Accepts only the spec versions this build can apply.
pub(crate) fn spec_version(value: &str) -> Result<Spec, String> {
    Spec::parse(value).ok_or_else(|| {
        format!(
            "this build applies spec versions {} (SPEC §11)",
            Spec::names()
        )
    })
}
