//! `percentes`: the command line. Thin by design: parsing, then a call into the libraries.
//!
//! Exit codes (SPEC §10): 0 valid; 2 gate-invalid (nothing published); 3 a user's threshold
//! failed (SPEC §9 "Thresholds"); 1 error, including any `verify` verdict other than
//! `sealed-intact`. The flags and their help are `args.rs`'s; this file dispatches them.

use std::path::Path;

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
use clap::Parser;

mod args;
mod inspect;
mod reading;
mod shards;

use args::{Cli, Command, ConfigCommand, ProgressArg, ScenarioCommand};
use percentes_analyzer::JournalFile;
use percentes_formats::config::{self, Config, Profile};
use percentes_formats::journal::{self, verify, VerifyOptions};
use percentes_formats::pins;
#[cfg(target_os = "linux")]
use percentes_study::{calibrate, demo, scenario as study};

pub const TOOL_VERSION: &str = env!("CARGO_PKG_VERSION");
pub const TOOL_COMMIT: &str = env!("PERCENTES_COMMIT");

/// A study's error, with the chain it carries, as this binary reports errors.
#[cfg(target_os = "linux")]
fn studied<T>(result: percentes_study::Result<T>) -> Result<T> {
    result.map_err(|e| anyhow::anyhow!("{e:#}"))
}

/// This build, as the studies cite it.
#[cfg(target_os = "linux")]
fn tool() -> percentes_study::Tool {
    percentes_study::Tool::of(TOOL_VERSION, TOOL_COMMIT)
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
        // A reader that went (`| head`) is a normal end: nothing failed.
        Err(error) if percentes_study::show::closed_pipe(&*error) => ExitCode::SUCCESS,
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
            let (mut command, mut script) = (<Cli as clap::CommandFactory>::command(), Vec::new());
            clap_complete::generate(shell, &mut command, "percentes", &mut script); // panics on EPIPE
            std::io::Write::write_all(&mut std::io::stdout(), &script)
                .context("cannot write the completion script")?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Man { command } => {
            let mut page = <Cli as clap::CommandFactory>::command();
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
            let answer = events::send(&a.socket, &event, wait)?;
            println!("{answer}");
            Ok(ExitCode::SUCCESS)
        }
        #[cfg(not(target_os = "linux"))]
        Command::Event(_) | Command::Watch(_) => {
            bail!("`percentes event` and `watch` talk to a recorder, which runs on Linux only")
        }
        #[cfg(target_os = "linux")]
        Command::Watch(a) => {
            percentes_recorder::watch::run(&percentes_recorder::watch::Options {
                socket: a.socket,
                namespace: a.namespace,
                selector: a.selector,
                victim: a.victim,
                kubectl: a.kubectl,
                nodes: a.nodes,
                wait: std::time::Duration::from_secs(a.wait),
            })?;
            Ok(ExitCode::SUCCESS)
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
    let parsed = MockConfig::for_flags(a.config.as_deref(), a.name, a.slow_reload_ms)?;
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
        .map(|spec| Endpoint::parse_flag(spec).map_err(anyhow::Error::from))
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
    )?;
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
    use percentes_study::show::Init;
    match studied(percentes_study::show::init(profile, quick, output, force))? {
        Init::Print(text) => print!("{text}"),
        Init::Wrote(profile, path) => warn!(
            "wrote a {} configuration to {}; check it with `percentes config check {}`",
            profile.name(),
            path.display(),
            path.display()
        ),
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
    let trust = VerifyOptions::from_flags(expect_head, pubkey)?;
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
            let config = Config::parse(text.as_bytes())?;
            let line = percentes_study::host::quick_line(&config, &args.output);
            warn!("{line}"); // stdout is the run's summary (its JSON alone under --json)
            config
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
        // Nothing placed the target or put a proxy before it: the defaults say so.
        ..Options::new(args.output)
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
