//! `percentes`: the command line. Thin by design: parsing, then a call into the libraries.
//!
//! Exit codes (SPEC §10): 0 valid; 2 gate-invalid (nothing published); 1 error, including any
//! `verify` verdict other than `sealed-intact`.

use std::path::{Path, PathBuf};

/// `println!` that a closed stdout (a pipe to `head` that ended) cannot turn into a panic: the
/// line is lost, the command goes on to its exit status.
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout(), $($arg)*);
    }};
}

/// `eprintln!` that a closed stderr cannot turn into a panic.
macro_rules! warn {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use clap::{Parser, Subcommand};

mod args;
mod inspect;
mod reading;
mod shards;

use args::{ProfileArg, ProgressArg};
#[cfg(target_os = "linux")]
use percentes_study::{calibrate, demo, scenario as study};

use percentes_analyzer::model::SegmentColumns;
use percentes_analyzer::JournalFile;
use percentes_formats::config::{self, Config, Profile};
use percentes_formats::journal::{self, verify, VerifyOptions};
use percentes_formats::pins;
use percentes_formats::spec::Spec;

/// Open-loop load and failure measurement for LLM inference services.
///
/// Record a hash-chained journal of every scheduled request, verify it, analyze it under a chosen
/// spec version. See README.md and SPEC.md.
#[derive(Debug, Parser)]
#[command(name = "percentes", version = version_line(), propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum ScenarioCommand {
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
enum Command {
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
        quick: args::QuickArgs,
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
        quick: args::QuickArgs,
        /// Write to this file instead of standard output.
        #[arg(short, long)]
        output: Option<PathBuf>,
        /// Overwrite the output file if it exists.
        #[arg(long)]
        force: bool,
    },
    /// Record a run: send every scheduled request at its intended time and write the journal
    /// (Linux). SIGINT or SIGTERM stops dispatch, drains in-flight requests and seals the journal
    /// as aborted (exit 1). A declared abort trigger ([declaration.abort]) does the same and
    /// seals it as escaped (exit 2).
    Record(Box<args::RecordArgs>),
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
        /// The spec version whose rules to apply: v0.4 (a reading says what it measured, over
        /// what and of how many; amendment A3), v0.3 (recovery read only where the data support
        /// it; A2), v0.2 (its recovery rules as archived) or v0.1 (Kaplan-Meier with errors
        /// censored; A1). Older versions reproduce archived reports; a journal recorded before
        /// 2026-12-03 fails G2.4 under v0.4 (its stall ticker was off the send path).
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
        /// Also cut every window by these columns (comma-separated: route, replica, class,
        /// outcome, phase, status, protocol), each segment with its own outcomes, completion
        /// curve and latencies with their refusals, in report.md and report.json (§9).
        #[arg(long, value_name = "COLUMNS", value_parser = SegmentColumns::parse)]
        by: Option<SegmentColumns>,
        #[command(flatten)]
        table: args::TableArgs,
        #[command(flatten)]
        fail_on: args::FailOnArgs,
    },
    /// Compare two runs, or two groups of runs, window by window: `compare A.pj B.pj`, or
    /// `compare A1.pj A2.pj --vs B1.pj B2.pj`.
    ///
    /// Each latency quantile and share gets B - A with a 95 % interval, a named test and a
    /// verdict (differs, equal within the margin, no decision, refused); p-values are
    /// Holm-adjusted over the whole comparison (SPEC §9 "Comparisons"). One run a side is
    /// compared request by request, several run by run.
    Compare(args::CompareArgs),
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
        table: args::TableArgs,
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
        table: args::TableArgs,
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
    Query(args::QueryArgs),
    /// Print a journal's header, and with --records its records as JSON lines.
    Inspect {
        /// The journal file (.pj) to inspect.
        journal: PathBuf,
        /// Print the records of the verified prefix as JSON lines.
        #[arg(long)]
        records: bool,
        /// Only records of these kinds (request, event, telemetry, checkpoint, seal, other).
        #[arg(long, value_delimiter = ',', requires = "records")]
        kind: Vec<inspect::KindArg>,
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
    /// Serves POST /v1/chat/completions and /v1/completions (streaming SSE or not), GET /health,
    /// GET /metrics (Prometheus), and GET/POST /admin/faults. Runs until Ctrl-C.
    Mock(args::MockArgs),
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
    Testbed(args::TestbedArgs),
    /// Look at this host for a few seconds and say whether the client gate's pins (SPEC §2,
    /// G2) can hold here, and what to change (Linux). Exit 2 when a check predicts a failure.
    Doctor {
        /// How long to look, in seconds.
        #[arg(long, default_value_t = 3.0)]
        seconds: f64,
        #[command(flatten)]
        host: args::HostArgs,
    },
    /// Hand a running recorder a timeline event an orchestrator saw (`record --events-socket
    /// PATH`; SPEC §5): journaled at the time stated, beside the time the recorder read it.
    Event(args::EventArgs),
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
enum ConfigCommand {
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

pub const TOOL_VERSION: &str = env!("CARGO_PKG_VERSION");
pub const TOOL_COMMIT: &str = env!("PERCENTES_COMMIT");

fn version_line() -> &'static str {
    concat!(
        env!("CARGO_PKG_VERSION"),
        " (commit ",
        env!("PERCENTES_COMMIT"),
        "; journal format v1; spec v0.4)"
    )
}

/// Accepts only the spec versions this build can apply.
fn spec_version(value: &str) -> Result<Spec, String> {
    Spec::parse(value).ok_or_else(|| {
        format!(
            "this build applies spec versions {} (SPEC §11)",
            Spec::names()
        )
    })
}

/// A study's error, with the chain it carries, as this binary reports errors.
#[cfg(target_os = "linux")]
fn studied<T>(result: percentes_study::Result<T>) -> Result<T> {
    result.map_err(|e| anyhow::anyhow!("{e:#}"))
}

/// This build, as the studies cite it.
#[cfg(target_os = "linux")]
fn tool() -> percentes_study::Tool {
    percentes_study::Tool {
        version: env!("CARGO_PKG_VERSION").into(),
        commit: env!("PERCENTES_COMMIT").into(),
    }
}

#[cfg(target_os = "linux")]
fn demo(output: &Path, force: bool, time_factor: u32, diagnose: bool) -> Result<ExitCode> {
    studied(demo::run(output, force, time_factor, diagnose, &tool()))
}

#[cfg(not(target_os = "linux"))]
fn demo(_: &Path, _: bool, _: u32, _: bool) -> Result<ExitCode> {
    bail!("`percentes demo` records, and recording runs on Linux only (it drives io_uring)")
}

#[cfg(target_os = "linux")]
fn calibrate_command(
    config: &Path,
    output: &Path,
    replica: Option<&str>,
    force: bool,
    diagnose: bool,
) -> Result<ExitCode> {
    let options = calibrate::Options {
        replica,
        force,
        diagnose,
    };
    studied(calibrate::calibrate(config, output, &options, &tool()))
}

#[cfg(not(target_os = "linux"))]
fn calibrate_command(_: &Path, _: &Path, _: Option<&str>, _: bool, _: bool) -> Result<ExitCode> {
    bail!("`percentes calibrate` records, and recording runs on Linux only (it drives io_uring)")
}

#[cfg(target_os = "linux")]
fn sweep(
    config: Option<&Path>,
    quick: args::QuickArgs,
    rates: &[f64],
    output: &Path,
    (force, diag): (bool, bool),
) -> Result<ExitCode> {
    use percentes_study::sweep;
    let tool = tool();
    match (config, quick.quick()) {
        (Some(_), Some(_)) => bail!("give a configuration file or --url and its flags, not both"),
        (Some(path), None) => studied(sweep::sweep(path, rates, output, force, diag, &tool)),
        (None, Some(mut quick)) => {
            quick.rate_rps = rates[0]; // each step's rate replaces it
            let text = studied(percentes_study::host::quick_config(quick))?;
            studied(sweep::sweep_quick(&text, rates, output, force, diag, &tool))
        }
        (None, None) => bail!("give a configuration file, or --url and its flags"),
    }
}

#[cfg(not(target_os = "linux"))]
fn sweep(
    _: Option<&Path>,
    _: args::QuickArgs,
    _: &[f64],
    _: &Path,
    _: (bool, bool),
) -> Result<ExitCode> {
    bail!("`percentes sweep` records, and recording runs on Linux only (it drives io_uring)")
}

#[cfg(target_os = "linux")]
fn scenario(command: ScenarioCommand) -> Result<ExitCode> {
    match command {
        ScenarioCommand::List { dir } => studied(percentes_study::catalogue::list(dir.as_deref())),
        ScenarioCommand::Run {
            file,
            output,
            force,
            time_factor,
            experiment,
            diagnose,
        } => {
            let scenario = studied(percentes_study::catalogue::load(&file))?;
            let timing = if experiment {
                study::Timing::Experiment
            } else {
                study::Timing::Dev(time_factor)
            };
            studied(study::run(
                &scenario,
                &output,
                force,
                timing,
                &tool(),
                diagnose,
            ))
        }
    }
}

#[cfg(not(target_os = "linux"))]
fn scenario(_: ScenarioCommand) -> Result<ExitCode> {
    bail!("`percentes scenario` runs the local testbed and the recorder, which run on Linux only")
}

fn main() -> ExitCode {
    // clap's own exit status for a usage error is 2, which SPEC §10 reserves for a gate-invalid
    // run; a bad command line is an error (1). Help and version still exit 0.
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(error) => {
            let _ = error.print();
            return if error.use_stderr() {
                ExitCode::from(1)
            } else {
                ExitCode::SUCCESS
            };
        }
    };
    match run(cli) {
        Ok(code) => code,
        Err(error) => {
            warn!("percentes: error: {error:#}");
            ExitCode::from(1)
        }
    }
}

fn run(cli: Cli) -> Result<ExitCode> {
    match cli.command {
        Command::Init {
            profile,
            from_flags,
            quick,
            output,
            force,
        } => init(
            profile.into(),
            from_flags.then(|| quick.quick()).flatten(),
            output.as_deref(),
            force,
        ),
        Command::Config(ConfigCommand::Check { file, json, pins }) => {
            config_check(&file, json, pins)
        }
        Command::Config(ConfigCommand::Pins) => {
            print!("{}", pins::markdown_table());
            Ok(ExitCode::SUCCESS)
        }
        Command::Verify {
            journal,
            expect_head,
            pubkey,
            json,
        } => verify_journal(&journal, expect_head.as_deref(), pubkey.as_deref(), json),
        Command::Inspect {
            journal,
            records,
            kind,
            from,
            limit,
            json,
            config,
        } => inspect::run(
            &journal,
            inspect::Options {
                records,
                kinds: kind,
                from,
                limit,
                json,
                config,
            },
        ),
        Command::Keygen { out, force } => keygen(&out, force),
        Command::Completions { shell } => {
            use clap::CommandFactory;
            let mut command = Cli::command();
            clap_complete::generate(shell, &mut command, "percentes", &mut std::io::stdout());
            Ok(ExitCode::SUCCESS)
        }
        Command::Man { command } => {
            use clap::CommandFactory;
            let mut page = Cli::command();
            if let Some(name) = command {
                page.build();
                let Some(sub) = page.find_subcommand(&name).cloned() else {
                    let names: Vec<&str> = page.get_subcommands().map(|c| c.get_name()).collect();
                    bail!("no command `{name}`; the commands are {}", names.join(", "));
                };
                page = sub.display_name(format!("percentes-{name}"));
            }
            clap_mangen::Man::new(page)
                .render(&mut std::io::stdout())
                .context("cannot write the manual page")?;
            Ok(ExitCode::SUCCESS)
        }
        #[cfg(target_os = "linux")]
        Command::Event(a) => {
            use percentes_recorder::events;
            let wait = std::time::Duration::from_secs(5);
            let at = (a.at_monotonic_ns, a.at_realtime_ns);
            let event = events::ExternalEvent::stated(&a.subject, &a.detail, a.value, at);
            let answer = events::send(&a.socket, &event, wait).map_err(anyhow::Error::msg)?;
            println!("{answer}");
            Ok(ExitCode::SUCCESS)
        }
        #[cfg(not(target_os = "linux"))]
        Command::Event(_) => {
            bail!("`percentes event` talks to a recorder, which runs on Linux only")
        }
        Command::Demo {
            output,
            force,
            time_factor,
            diagnose,
        } => demo(&output, force, time_factor, diagnose),
        Command::Scenario(command) => scenario(command),
        Command::Calibrate {
            config,
            output,
            replica,
            force,
            diagnose,
        } => calibrate_command(&config, &output, replica.as_deref(), force, diagnose),
        Command::Sweep {
            config,
            quick,
            rates,
            output,
            force,
            diagnose,
        } => sweep(
            config.as_deref(),
            quick,
            &rates.0,
            &output,
            (force, diagnose),
        ),
        Command::Analyze {
            journal,
            spec,
            output,
            json,
            diagnose,
            by,
            table,
            fail_on,
        } => reading::analyze(
            &journal,
            reading::Asked {
                spec,
                output: &output,
                json,
                diagnose,
                by: by.map(|b| b.0).unwrap_or_default(),
                fail_on: &fail_on.fail_on,
            },
            &table.options()?,
        ),
        Command::Export {
            journal,
            parquet,
            force,
            table,
        } => reading::export(&journal, &parquet, force, &table.options()?),
        Command::Query(q) => reading::query(&q),
        Command::Campaign {
            journals,
            spec,
            output,
            table,
        } => reading::campaign(&journals, spec, &output, &table.options()?),
        Command::Compare(a) => reading::compare(&a),
        Command::Record(args) => record(*args),
        #[cfg(target_os = "linux")]
        Command::Doctor { seconds, host } => studied(percentes_study::doctor(seconds, host.cpus)),
        #[cfg(not(target_os = "linux"))]
        Command::Doctor { .. } => {
            bail!("`percentes doctor` looks at a recorder's host: Linux only")
        }
        Command::Merge {
            shards,
            output,
            sign_key,
            force,
        } => shards::merge(&shards, &output, sign_key.as_deref(), force),
        Command::Mock(a) => mock(a),
        Command::Router { listen, upstreams } => router(&listen, &upstreams),
        Command::Testbed(a) => testbed(a),
    }
}

fn mock(a: args::MockArgs) -> Result<ExitCode> {
    use percentes_scenarios::{config::MockConfig, mock};
    if a.example_config {
        print!("{}", mock::EXAMPLE_CONFIG);
        return Ok(ExitCode::SUCCESS);
    }
    let parsed = MockConfig::for_flags(a.config.as_deref(), a.name, a.slow_reload_ms)
        .map_err(anyhow::Error::msg)?;
    let summary = parsed.summary();
    let listen = a.listen;
    mock::run_blocking(parsed, &listen, a.threads, |addr| {
        warn!("percentes mock {summary} listening on http://{addr}; Ctrl-C stops it");
    })
    .with_context(|| format!("mock on {listen}"))?;
    Ok(ExitCode::SUCCESS)
}

fn router(listen: &str, upstreams: &[String]) -> Result<ExitCode> {
    use percentes_scenarios::router::{self, Endpoint};
    let endpoints: Vec<Endpoint> = upstreams
        .iter()
        .map(|spec| Endpoint::parse_flag(spec).map_err(anyhow::Error::msg))
        .collect::<Result<_>>()?;
    let names: Vec<String> = endpoints.iter().map(|e| e.name.clone()).collect();
    router::run_blocking(endpoints, listen, |addr| {
        let names = names.join(", ");
        warn!("percentes router over {names} listening on http://{addr}; Ctrl-C stops it");
    })
    .with_context(|| format!("router on {listen}"))?;
    Ok(ExitCode::SUCCESS)
}

fn testbed(a: args::TestbedArgs) -> Result<ExitCode> {
    let binary = std::env::current_exe()
        .context("cannot find the percentes executable to start replicas")?;
    percentes_scenarios::testbed::run_foreground(
        &binary,
        a.replicas,
        a.mock_config.as_deref(),
        a.isolated,
        a.state_dir.as_deref(),
        |line| out!("{line}"),
    )
    .map_err(anyhow::Error::msg)?;
    Ok(ExitCode::SUCCESS)
}

/// A configuration file, its errors prefixed with its path (a read error names it already).
fn load_config(path: &Path) -> Result<Config> {
    Config::load(path).map_err(|e| match e {
        config::ConfigError::Read { .. } => anyhow::Error::new(e),
        e => anyhow::anyhow!("{}: {e}", path.display()),
    })
}

fn init(
    profile: Profile,
    quick: Option<config::Quick>,
    output: Option<&Path>,
    force: bool,
) -> Result<ExitCode> {
    if quick.as_ref().is_some_and(|q| q.model.is_empty()) {
        bail!("init --from-flags needs --model (record, not init, can ask the server which it serves)");
    }
    let (text, profile) = match quick {
        Some(quick) => (
            quick.toml().map_err(anyhow::Error::msg)?,
            if quick.hosted {
                Profile::Hosted
            } else {
                Profile::Dev
            },
        ),
        None => (config::example(profile).to_owned(), profile),
    };
    match output {
        None => print!("{text}"),
        Some(path) => {
            if path.exists() && !force {
                bail!("{} exists; pass --force to overwrite it", path.display());
            }
            std::fs::write(path, text)
                .with_context(|| format!("cannot write {}", path.display()))?;
            warn!(
                "wrote a {} configuration to {}; check it with `percentes config check {}`",
                profile.name(),
                path.display(),
                path.display()
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn config_check(file: &Path, json: bool, all_pins: bool) -> Result<ExitCode> {
    let config = load_config(file)?;
    config.check_files()?;
    if json {
        out!(
            "{}",
            serde_json::to_string_pretty(&percentes_study::show::config_json(&config))?
        );
    } else {
        print!(
            "{}",
            percentes_study::show::config_text(file, &config, all_pins)
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn verify_journal(
    path: &Path,
    expect_head: Option<&str>,
    pubkey: Option<&Path>,
    json: bool,
) -> Result<ExitCode> {
    let trust = VerifyOptions::from_flags(expect_head, pubkey).map_err(anyhow::Error::msg)?;
    if percentes_analyzer::shards::is_manifest(path) {
        return shards::verify_manifest(path, trust.expect_head, trust.trusted_key, json);
    }
    let report = JournalFile::open(path)?.verify(&trust);
    if json {
        out!("{:#}", report.json(path));
    } else {
        out!("journal: {}", path.display());
        print!("{}", verify::render(&report));
    }
    Ok(if report.ok() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

#[cfg(target_os = "linux")]
fn record(args: args::RecordArgs) -> Result<ExitCode> {
    use percentes_recorder::run::{self, Options};
    let config = match (args.quick.quick(), &args.config) {
        (Some(quick), _) => {
            let text = studied(percentes_study::host::quick_config(quick))?;
            if args.json {
                warn!("{text}"); // stdout is the summary's JSON alone
            } else {
                out!("{text}");
            }
            Config::parse(text.as_bytes())?
        }
        (None, Some(path)) => load_config(path)?,
        (None, None) => bail!("give a configuration file, or --url and its flags"),
    };
    let (shard, start_at_ns) = shards::of_record(&args)?;
    let progress = match (args.quiet, args.progress) {
        (true, _) => run::Progress::Quiet,
        (false, Some(ProgressArg::Json)) => run::Progress::Json,
        _ => run::Progress::Human,
    };
    let signing_key = args
        .sign_key
        .as_deref()
        .map(journal::keys::read_signing_key);
    let signing_key = signing_key.transpose().map_err(anyhow::Error::msg)?;
    if let Err(why) = config.publishability() {
        warn!("percentes: {why}");
    }
    let options = Options {
        output: args.output,
        force: args.force,
        signing_key,
        tool_version: TOOL_VERSION.into(),
        tool_commit: TOOL_COMMIT.into(),
        workers: args.workers,
        canary: !args.no_canary,
        progress,
        stop: run::stop_on_signals(),
        timeline: None,
        events_socket: args.events_socket,
        shard,
        start_at_ns,
        heads: args.heads,
        cpus: percentes_study::cpus(args.host.cpus.as_deref())?,
        host_check: !args.no_host_check,
        target_placement: None,
    };
    let end = percentes_study::host::End {
        quiet: args.quiet,
        json: args.json,
        fail_on: args.fail_on.fail_on,
    };
    studied(percentes_study::host::record(
        &config,
        &options,
        &tool(),
        &end,
    ))
}

#[cfg(not(target_os = "linux"))]
fn record(_: args::RecordArgs) -> Result<ExitCode> {
    bail!("`percentes record` runs on Linux only (it drives io_uring); every other command works here")
}

fn keygen(prefix: &Path, force: bool) -> Result<ExitCode> {
    let mut seed = [0u8; 32];
    // The OS's random source, on every OS.
    getrandom::fill(&mut seed).map_err(|e| anyhow::anyhow!("the OS random source failed: {e}"))?;
    let (secret, public) =
        journal::keys::write_key_pair(prefix, &seed, force).map_err(anyhow::Error::msg)?;
    out!(
        "secret key: {} (keep it off the machines that store journals)",
        secret.display()
    );
    out!(
        "public key: {} (give it to auditors: verify --pubkey)",
        public.display()
    );
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    /// Issue 18's CLI polish: every positional and flag of every subcommand says what it is.
    #[test]
    fn every_argument_of_every_command_has_help() {
        fn walk(command: &clap::Command, path: &str, missing: &mut Vec<String>) {
            for arg in command.get_arguments() {
                let id = arg.get_id().as_str();
                if ["help", "version"].contains(&id) {
                    continue;
                }
                if arg.get_help().is_none() && arg.get_long_help().is_none() {
                    missing.push(format!("{path} {id}"));
                }
            }
            for sub in command.get_subcommands() {
                walk(sub, &format!("{path} {}", sub.get_name()), missing);
            }
        }
        let mut missing = Vec::new();
        walk(&Cli::command(), "percentes", &mut missing);
        assert!(missing.is_empty(), "arguments without help: {missing:?}");
    }

    #[test]
    fn the_router_and_the_mock_do_not_default_to_the_same_port() {
        let cli = Cli::command();
        let default = |name: &str| {
            let sub = cli.find_subcommand(name).unwrap();
            let listen = sub
                .get_arguments()
                .find(|a| a.get_id() == "listen")
                .unwrap();
            listen.get_default_values()[0]
                .to_string_lossy()
                .into_owned()
        };
        assert_ne!(default("router"), default("mock"));
    }
}
