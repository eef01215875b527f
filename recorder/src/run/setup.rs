//! What `record` does before the first request and after the last, each step a function of its
//! own: the host check, the request templates, the host facts a header keeps about the run's
//! set-up, the output files, the telemetry thread's start, and the seal's status and reason.

use std::fs::File;
use std::sync::Arc;
use std::time::{Duration, Instant};

use percentes_formats::config::Config;
use percentes_formats::journal::header::HostFact;
use percentes_formats::journal::records::SealStatus;
use percentes_formats::journal::{ClockAnchors, Header, WriteError, CODEC};
use percentes_formats::spec::Spec;

use super::behind::Behind;
use super::plan::RunPlan;
use super::preflight::Preflight;
use super::signals::say;
use super::state::{Escape, Sender, Shared};
use super::telemetry::{telemetry_thread, Seconds};
use super::{live, Options};
use crate::error::{io, RecordError};
use crate::request::rule;
use crate::request::{load_prompts, ExtraHeaders, Target, Template};
use crate::run::accelerator;
use crate::run::cgroup;
use crate::run::doctor;
use crate::tokens::ModelTokenizer;
use percentes_response::exchange::Rule;

/// Host facts, key and value, as a header keeps them.
pub(super) type Facts = Vec<(String, String)>;

/// The short look at the host before the journal exists (`--no-host-check` skips it): what
/// stands in the way of G2 is said now, and what it measured is kept as the `host-check` fact.
pub(super) fn host_check(options: &Options) -> Result<Option<String>, RecordError> {
    if !options.host_check {
        return Ok(None);
    }
    let look = doctor::examine(HOST_CHECK, options.cpus.as_deref())?;
    for risk in look.risks() {
        say(&format!(
            "percentes: warning: host check: {risk} (`percentes doctor` says more)"
        ));
    }
    let lines = look.lines();
    Ok(Some(
        lines[1..lines.len() - 1]
            .iter()
            .map(|l| l.trim())
            .collect::<Vec<_>>()
            .join("; "),
    ))
}

/// Each route's request template, with its prompt set and the tokenizer's filler where the
/// configuration asks for them; each route's verification rule, with its checks by prompt
/// where its prompt file's lines carry their own parts ([`crate::request::prompt_checks`]);
/// and the host facts that say which were loaded.
pub(super) fn templates(
    config: &Config,
    target: &Target,
    extra: &ExtraHeaders,
    plan: &RunPlan,
) -> Result<(Vec<Template>, Vec<Rule>, Facts), RecordError> {
    let tokenizer = config
        .target
        .tokenizer
        .as_deref()
        .map(ModelTokenizer::load)
        .transpose()?;
    let mut facts = Vec::new();
    if let Some(t) = &tokenizer {
        facts.push(HostFact::Tokenizer.entry(t.fact()));
    }
    // A replay whose trace carries its requests sends them, line i as request i, on every
    // route that names no prompt file of its own (SPEC §1 "Workload models").
    let from_trace = plan
        .trace
        .as_ref()
        .filter(|t| t.has_requests)
        .and(config.workload.trace.as_ref());
    if let Some(trace) = &plan.trace {
        facts.push(HostFact::Trace.entry(trace_fact(trace)));
    }
    let (templates, rules) = config
        .routes
        .iter()
        .map(|r| {
            let own;
            let r = match from_trace {
                Some(path) if r.prompt_file.is_none() => {
                    own = percentes_formats::config::Route {
                        prompt_file: Some(path.clone()),
                        prompt_format: Some(percentes_formats::config::PromptFormat::Jsonl),
                        ..r.clone()
                    };
                    &own
                }
                _ => r,
            };
            route_setup(
                config,
                (target, extra),
                plan,
                tokenizer.as_ref(),
                r,
                &mut facts,
            )
        })
        .collect::<Result<(Vec<_>, Vec<_>), RecordError>>()?;
    Ok((templates, rules, facts))
}

/// Route `r`'s template and rule ([`templates`]), and the facts of its prompt set and images.
fn route_setup(
    config: &Config,
    (target, extra): (&Target, &ExtraHeaders),
    plan: &RunPlan,
    tokenizer: Option<&ModelTokenizer>,
    r: &percentes_formats::config::Route,
    facts: &mut Facts,
) -> Result<(Template, Rule), RecordError> {
    let refused = RecordError::config;
    let prompts = r
        .prompt_file
        .as_ref()
        .map(|_| load_prompts(r, config, tokenizer, plan.max_tokens))
        .transpose()?;
    let mut rule = rule(config, r)?;
    if let Some(set) = &prompts {
        facts.push((HostFact::prompt_set(&r.label), set.fact()));
        rule.by_prompt =
            crate::request::prompt_checks(r, set).map_err(|e| refused(e.to_string()))?;
    }
    let images = images_of(r, facts).map_err(|e| refused(e.to_string()))?;
    let template = Template::with_images(
        config,
        target,
        r,
        (prompts.as_ref(), extra),
        plan.max_tokens,
        &images,
    );
    let template = match (tokenizer, r.input_tokens) {
        (Some(t), Some(lengths)) => template.counted_by(t.filler(lengths.longest())?),
        _ => template,
    };
    if config.history().is_some() && !template.resends_turns() {
        return Err(refused(format!(
            "workload.history: route {:?} sends prompts that are more than one text (a conversation, images or a line's own fields), and a history resends each earlier turn as text; give the route a plain prompt set, generated prompts or a ShareGPT file, whose sessions are its conversations (SPEC §1 \"Conversation histories\")",
            r.label
        )));
    }
    // A shared-prefix pool's lengths are then in the tokenizer's tokens too (SPEC §1).
    let template = match (tokenizer, config.prefix_pool()) {
        (Some(t), Some(pool)) => template.shared_counted_by(&*t.filler(pool.longest())?),
        _ => template,
    };
    Ok((template, rule))
}

/// Route `r`'s images (SPEC §2 "What a request carries"), read once, and their host fact.
fn images_of(
    r: &percentes_formats::config::Route,
    facts: &mut Vec<(String, String)>,
) -> Result<Vec<crate::request::Image>, percentes_formats::config::parts::PartError> {
    let images = crate::request::load_images(r, &format!("routes {:?}", r.label))?;
    if !images.is_empty() {
        facts.push((
            HostFact::images(&r.label),
            crate::request::images_fact(&images),
        ));
    }
    Ok(images)
}

/// The `trace` host fact: what a replay's trace held and what of it is sent.
fn trace_fact(trace: &percentes_formats::config::workload::Trace) -> String {
    format!(
        "{} requests within the schedule, {} past its end (not sent), {}; BLAKE3 {}",
        trace.offsets_ns.len(),
        trace.past_end,
        if trace.has_requests {
            "its own requests sent on every route without a prompt_file"
        } else {
            "times only (the routes' own prompts sent)"
        },
        percentes_formats::journal::hex(&trace.blake3)
    )
}

/// The journal's header: what was recorded, with what, on what host, from `clock` (the epoch
/// on CLOCK_MONOTONIC and CLOCK_REALTIME, ns) and with `host`'s facts.
pub(super) fn journal_header(
    config: &Config,
    options: &Options,
    plan: &RunPlan,
    clock: (u64, i64),
    host: Facts,
) -> Header {
    Header {
        codec: CODEC.into(),
        spec_version: Spec::CURRENT.name().into(),
        tool_version: options.tool_version.clone(),
        tool_commit: options.tool_commit.clone(),
        profile: config.profile.name().into(),
        dev_time_factor: config.time_factor,
        config_hash: config.hash(),
        config_bytes: config.raw_bytes().to_vec(),
        schedule_requests: plan.requests,
        schedule_digest: plan.digest,
        schedule: plan.params.clone(),
        clock: ClockAnchors {
            monotonic_epoch_ns: clock.0,
            realtime_epoch_ns: clock.1,
            source: "CLOCK_MONOTONIC".into(),
        },
        host,
        shard_index: options.shard.index,
        shard_count: options.shard.count,
        signing_key: options
            .signing_key
            .as_ref()
            .map(|k| k.verifying_key().to_bytes()),
        extensions: Vec::new(),
    }
}

/// The host facts a header keeps about how the run was set up: the key and secret headers (by
/// name and variable, never their values), the open-file limit and the descriptor table, the
/// pre-flight, the placement (the workers', and the target's where a study runner placed it),
/// the host check, the prompt sets and the accelerators' fingerprints.
pub(super) fn setup_facts(
    config: &Config,
    (open_files, table): (u64, Option<u64>),
    preflight: &Option<Preflight>,
    (placement, options): (String, &Options),
    host_check: Option<String>,
    prompt_facts: Facts,
) -> Result<Facts, RecordError> {
    let api_key = match &config.target.api_key_env {
        Some(variable) => format!(
            "from ${variable}, sent in {} (the key itself is not recorded)",
            config.target.api_key_header()
        ),
        None => "none".into(),
    };
    let secret_headers = if config.target.secret_headers.is_empty() {
        "none".into()
    } else {
        let named: Vec<String> = config
            .target
            .secret_headers
            .iter()
            .map(|(name, variable)| format!("{} from ${variable}", name.to_ascii_lowercase()))
            .collect();
        format!("{} (the values are not recorded)", named.join(", "))
    };
    let mut facts = vec![
        HostFact::ApiKey.entry(api_key),
        HostFact::SecretHeaders.entry(secret_headers),
        HostFact::OpenFiles.entry(format!(
            "limit {open_files} (soft raised to the hard limit); descriptor table {} before the \
             run, doubled off the worker whenever a connection's descriptor reaches half of it",
            table.map_or_else(|| "size not read".to_owned(), |t| format!("of {t}"))
        )),
        HostFact::Preflight.entry(preflight.as_ref().map_or_else(
            || "off (target.preflight = false)".into(),
            |p| p.summary.clone(),
        )),
        HostFact::Placement.entry(placement),
    ];
    let probe = preflight.as_ref().and_then(|p| p.probe.as_ref());
    facts.extend(probe.map(|p| HostFact::CapacityProbe.entry(p.fact_value())));
    facts.extend((options.target_placement.clone()).map(|t| HostFact::TargetPlacement.entry(t)));
    facts.extend(options.proxy.clone().map(|p| HostFact::Proxy.entry(p)));
    if let Some(look) = host_check {
        facts.push(HostFact::HostCheck.entry(look));
    }
    facts.extend(prompt_facts);
    facts.extend(accelerator::collect(config)?);
    if let (Some(np), Some(percentes_formats::config::Injector::NetworkPolicy)) =
        (&config.fault.network_policy, config.fault.injector)
    {
        let victim = config.fault.victim.as_deref().unwrap_or_default();
        let found = super::netpol::check(victim, np)
            .map_err(|why| why.at("fault.injector = \"network-policy\""))?;
        facts.push(HostFact::FaultCheck.entry(found));
    }
    Ok(facts)
}

/// Creates the journal and, when asked, the chain heads file (`--force` overwrites them); a
/// heads file that cannot be created takes the empty journal away again.
pub(super) fn create_outputs(options: &Options) -> Result<(File, Option<File>), RecordError> {
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
    let heads = match &options.heads {
        Some(path) => Some(open.open(path).map_err(|e| {
            let _ = std::fs::remove_file(&options.output); // empty: nothing was written yet
            io(format!(
                "cannot create the chain heads file {} (use --force to overwrite)",
                path.display()
            ))(e)
        })?),
        None => None,
    };
    Ok((file, heads))
}

/// The telemetry thread's seconds for `plan`: its live view (`progress`, drawn for a terminal
/// when `tty`) and its fall-behind policy.
pub(super) fn seconds_of(
    config: &Config,
    plan: &RunPlan,
    progress: super::Progress,
    tty: bool,
) -> Seconds {
    let mut end = 0;
    let phases = plan
        .params
        .phases
        .iter()
        .map(|p| {
            end += p.duration_ns;
            (p.name.clone(), end)
        })
        .collect();
    let (cpu_max, cpu_window_ns, skew_max) = plan.live_limits;
    let view = live::LiveView::new(progress, tty, phases, cpu_max, cpu_window_ns)
        .with_timeout(plan.timeout, config.time_factor)
        .with_behind_limit(skew_max);
    let behind = Behind::new(
        plan.behind_lag.as_nanos() as u64,
        plan.behind_span.as_nanos() as u64,
    );
    Seconds::new(view, behind, (plan.requests, plan.measured_span_ns))
}

/// Starts the telemetry thread with its live view (SPEC §2's telemetry, the fall-behind
/// policy's watch over starved workers).
pub(super) fn spawn_telemetry(
    config: &Config,
    plan: &RunPlan,
    options: &Options,
    (shared, sender): (&Arc<Shared>, &Sender),
    epoch: Instant,
    cgroup: Option<cgroup::Cgroup>,
) -> Result<std::thread::JoinHandle<()>, RecordError> {
    let shared = Arc::clone(shared);
    let sender = sender.clone();
    // SAFETY: isatty only reads the descriptor's type.
    #[allow(unsafe_code)]
    let tty = unsafe { libc::isatty(2) } == 1;
    let seconds = seconds_of(config, plan, options.progress, tty);
    let stop = Arc::clone(&options.stop);
    std::thread::Builder::new()
        .name("telemetry".into())
        .spawn(move || telemetry_thread((&shared, &sender), epoch, seconds, cgroup.as_ref(), &stop))
        .map_err(io("cannot start the telemetry thread"))
}

/// The seal's status and reason: a worker's error or the writer's failure aborts it; a stop
/// with an escape noted is `escaped`; a stop without one (a signal) aborts; otherwise it
/// completed.
pub(super) fn seal_of(
    worker_error: Option<&RecordError>,
    writer_failed: Option<Arc<WriteError>>,
    escaped: Option<Escape>,
    stopped: bool,
) -> (SealStatus, String) {
    match (worker_error, writer_failed, stopped) {
        (Some(e), _, _) => (SealStatus::Aborted, format!("recorder error: {e}")),
        (None, Some(failed), _) => (
            SealStatus::Aborted,
            format!(
                "the journal writer failed ({failed}): dispatch stopped at once, in-flight requests drained; the records held meanwhile are written with this seal"
            ),
        ),
        (None, None, true) => match escaped {
            Some(escaped) => (
                SealStatus::Escaped,
                format!(
                    "{}; offered load stopped, in-flight requests drained, the clock kept",
                    escaped.seal_reason()
                ),
            ),
            None => (
                SealStatus::Aborted,
                "stopped by signal (SIGINT or SIGTERM): dispatch stopped, in-flight requests drained"
                    .into(),
            ),
        },
        (None, None, false) => (SealStatus::Completed, String::new()),
    }
}

/// How long the host check before a run looks (`record` without `--no-host-check`).
pub const HOST_CHECK: Duration = Duration::from_millis(500);

#[cfg(test)]
mod tests {
    use super::*;

    /// The seal's precedence: a worker's error, then the writer's failure, then an escape or a
    /// signal when stopped; completed only when nothing stopped the run.
    #[test]
    fn the_seal_names_the_first_thing_that_ended_the_run() {
        let error = RecordError::config("boom");
        let disk = |what: &str| {
            Some(std::sync::Arc::new(WriteError::Io(std::io::Error::other(
                what.to_owned(),
            ))))
        };
        let (status, reason) = seal_of(Some(&error), disk("disk"), None, true);
        assert_eq!(
            (status, reason.as_str()),
            (SealStatus::Aborted, "recorder error: boom")
        );
        let late = Escape {
            subject: "client-behind".into(),
            detail: "late".into(),
        };
        let (status, reason) = seal_of(None, disk("disk full"), Some(late.clone()), true);
        assert_eq!(status, SealStatus::Aborted);
        assert!(
            reason.starts_with("the journal writer failed (journal write failed: disk full)"),
            "{reason}"
        );
        let (status, reason) = seal_of(None, None, Some(late), true);
        assert_eq!(status, SealStatus::Escaped);
        assert!(reason.starts_with("escaped (client-behind): late; offered load stopped"));
        let (status, reason) = seal_of(None, None, None, true);
        assert_eq!(status, SealStatus::Aborted);
        assert!(reason.starts_with("stopped by signal"));
        assert_eq!(
            seal_of(None, None, None, false),
            (SealStatus::Completed, String::new())
        );
    }
}
