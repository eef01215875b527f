//! Human and JSON renderings of a configuration and a journal header, shared by the
//! subcommands (`config check`, `inspect`); portable, as they are.

use std::path::Path;

use percentes_formats::config::{Config, FaultVariant, PinInForce};
use percentes_formats::journal::manifest::format_instant;
use percentes_formats::journal::{hex, Header};
use percentes_formats::pins::{self, Value};
use percentes_formats::schedule::{ScheduleParams, Workload};
use serde_json::{json, Value as Json};

/// What `percentes init` did: the configuration to print, or the file it wrote.
#[derive(Debug)]
pub enum Init {
    /// No output file: the configuration's text, to print.
    Print(String),
    /// Written to this file, a configuration of this profile.
    Wrote(percentes_formats::config::Profile, std::path::PathBuf),
}

/// Whether `error` is, at bottom, a write to a pipe whose reader has gone (EPIPE): for a
/// command's output (`| head`), a normal end, not a failure to report.
pub fn closed_pipe(error: &(dyn std::error::Error + 'static)) -> bool {
    std::iter::successors(Some(error), |e| e.source()).any(|cause| {
        cause
            .downcast_ref::<std::io::Error>()
            .is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

/// `percentes init`: a profile's commented example, or the configuration a quick run's flags
/// stand for (`--from-flags`), printed or written to `output` (never over a file unless
/// `force`).
pub fn init(
    profile: percentes_formats::config::Profile,
    quick: Option<percentes_formats::config::Quick>,
    output: Option<&Path>,
    force: bool,
) -> crate::Result<Init> {
    use percentes_formats::config::{example, Profile};
    if quick.as_ref().is_some_and(|q| q.model.is_empty()) {
        return Err(crate::StudyError::refused("init --from-flags needs --model (record, not init, can ask the server which it serves)"));
    }
    let (text, profile) = match quick {
        Some(quick) => (
            quick
                .toml()
                .map_err(|e| crate::StudyError::refused(e.to_string()))?,
            if quick.hosted {
                Profile::Hosted
            } else {
                Profile::Dev
            },
        ),
        None => (example(profile).to_owned(), profile),
    };
    let Some(path) = output else {
        return Ok(Init::Print(text));
    };
    if path.exists() && !force {
        return Err(crate::StudyError::refused(format!(
            "{} exists; pass --force to overwrite it",
            path.display()
        )));
    }
    std::fs::write(path, text).map_err(|e| {
        crate::StudyError::new(
            crate::ErrorKind::Io,
            format!("cannot write {}: {e}", path.display()),
        )
    })?;
    Ok(Init::Wrote(profile, path.to_owned()))
}

/// Seconds to the millisecond, rounded (half up), from ns: 14.285714 s prints 14.286 s.
pub fn seconds(ns: u64) -> String {
    percentes_formats::config::format_s(ns)
}

fn pin_value(value: Value, unit: &str) -> String {
    if unit.is_empty() {
        value.to_string()
    } else {
        format!("{value} {unit}")
    }
}

fn pin_line(p: &PinInForce) -> String {
    let key = if p.pin.configurable {
        p.pin.key.to_owned()
    } else {
        format!("({}, not configurable)", p.pin.key)
    };
    let mut line = format!(
        "  {:<4} {key} = {}  [{}: {} {}]",
        p.pin.clause,
        pin_value(p.value, p.pin.unit),
        p.pin.what,
        pins::rule_words(p.pin.rule),
        pin_value(p.pin.value, p.pin.unit),
    );
    if p.configured && p.value != p.pin.value {
        line.push_str(" (configured stricter)");
    }
    if let Some(effective) = &p.effective {
        line.push_str(&format!(" -> {effective}"));
    }
    if p.not_verifiable {
        line.push_str(" NOT VERIFIABLE (server-side pin, hosted target)");
    }
    line
}

/// A rate as people write it: at most six decimals, no trailing zeros (3.9 x 1.0 prints 3.9,
/// not 3.9000000000000004).
pub fn rps(rate: f64) -> String {
    let text = format!("{rate:.6}");
    let text = text.trim_end_matches('0').trim_end_matches('.');
    text.to_owned()
}

/// Lines describing a schedule: its workload model, its phases and routes.
pub fn schedule_lines(params: &ScheduleParams, requests: u64, digest: &[u8; 32]) -> String {
    let think = |t: &percentes_formats::schedule::Think| {
        format!("{} think time of mean {}", t.law.name(), seconds(t.mean_ns))
    };
    let (what, unit) = match &params.workload {
        Workload::Open => (
            format!("{} arrivals, {requests} requests", params.arrival.name()),
            "rps",
        ),
        Workload::Closed { users, think: t } => (
            format!(
                "closed loop, {users} users ({}), their {requests} first requests",
                think(t)
            ),
            "",
        ),
        Workload::SemiOpen { turns, think: t } => (
            format!(
                "semi-open, {} arrivals of {requests} sessions of {turns} requests ({})",
                params.arrival.name(),
                think(t)
            ),
            "sessions/s",
        ),
        Workload::Replay { .. } => (
            format!("replay of a trace, {requests} requests"),
            "rps, the trace's mean",
        ),
    };
    let mut out = format!(
        "schedule: seed {}, {what} over {}, digest {}\n",
        params.seed,
        seconds(params.total_duration_ns()),
        hex(digest)
    );
    let mut start = 0;
    for phase in &params.phases {
        // A closed run's rate is an outcome: its phases say no rate.
        let rate = if unit.is_empty() {
            String::new()
        } else {
            format!(" at {} {unit}", rps(phase.rate_rps))
        };
        out.push_str(&format!(
            "  phase {:<15} from {:>12} for {:>12}{rate}\n",
            phase.name,
            seconds(start),
            seconds(phase.duration_ns),
        ));
        start += phase.duration_ns;
    }
    let routes: Vec<String> = params
        .routes
        .iter()
        .map(|r| format!("{} (weight {})", r.label, r.weight))
        .collect();
    out.push_str(&format!("  routes: {}\n", routes.join(", ")));
    out.push_str(&workload_extension_lines(params));
    if let Some(t) = params.inject_at_ns {
        out.push_str(&format!("  T_inject: {}\n", seconds(t)));
    }
    out
}

/// The lines of the workload's header extensions: the shared-prefix pool, the abandonment, the
/// conversation history (SPEC §1).
fn workload_extension_lines(params: &ScheduleParams) -> String {
    let mut out = params.prefixes.as_ref().map_or_else(String::new, pool_line);
    if let Some(a) = &params.abandon {
        out.push_str(&abandon_line(a));
    }
    if let Some(h) = params.history {
        out.push_str(&format!(
            "  conversation history: each turn resends its session's {} (SPEC §1)\n",
            h.name()
        ));
    }
    out
}

/// The shared-prefix pool's line (SPEC §1 "Shared prefixes").
fn pool_line(pool: &percentes_formats::schedule::PrefixPool) -> String {
    let lengths: Vec<String> = pool.tokens.iter().map(u32::to_string).collect();
    format!(
        "  shared prefixes: {} entries of {} filler units, drawn by {:.2} % of the sessions (SPEC §1)\n",
        pool.entries,
        lengths.join("/"),
        f64::from(pool.share_ppm) / 1e4
    )
}

/// The abandonment's line (SPEC §1 "Abandonment").
fn abandon_line(a: &percentes_formats::schedule::Abandonment) -> String {
    format!(
        "  abandonment: {:.2} % of the requests marked, each closed {} after its intended time unless it ended first (SPEC §1)\n",
        f64::from(a.share_ppm) / 1e4,
        match a.law {
            percentes_formats::schedule::ThinkLaw::Fixed => seconds(a.mean_ns),
            percentes_formats::schedule::ThinkLaw::Exponential =>
                format!("an exponential delay of mean {}", seconds(a.mean_ns)),
        }
    )
}

/// The schedule a configuration defines; a replay's with its trace's times (`config check`
/// has read the trace: `Config::check_files`).
fn schedule_of(config: &Config) -> ScheduleParams {
    let params = config.schedule_params();
    if config.workload.model != percentes_formats::config::workload::Model::Replay {
        return params;
    }
    match config.read_trace() {
        Ok(trace) => params.replaying(trace.offsets_ns),
        Err(_) => params,
    }
}

/// What `config check` prints: what the file sets, and the pins it touches (every pin with
/// `all_pins`).
pub fn config_text(file: &Path, config: &Config, all_pins: bool) -> String {
    let params = schedule_of(config);
    let requests = params.iter().count() as u64;
    let mut out = format!("config: {} is valid (schema_version 1)\n", file.display());
    out.push_str(&format!("profile: {}", config.profile.name()));
    if config.time_factor > 1 {
        out.push_str(&format!(", time factor {}", config.time_factor));
    }
    match config.publishability() {
        Ok(()) => out.push('\n'),
        Err(why) => out.push_str(&format!(" -- {why}\n")),
    }
    out.push_str(&format!("blake3: {}\n", hex(&config.hash())));
    let t = &config.target;
    out.push_str(&format!(
        "target: {} at {}, model {:?}, replicas {:?}, {}\n",
        t.kind.name(),
        t.base_url,
        t.model,
        t.replicas,
        if t.stream {
            "streaming (SSE)"
        } else {
            "not streaming"
        }
    ));
    if t.tls.insecure {
        out.push_str(
            "tls: CERTIFICATE VERIFICATION OFF (recorded in the journal and every report)\n",
        );
    }
    if let (None, Some(lambda_max)) = (config.schedule.rate_rps, config.calibration.lambda_max_rps)
    {
        out.push_str(&format!(
            "rate: {} rps = {} replicas x {} x lambda_max {} rps (§1)\n",
            rps(config.rate_rps()),
            t.replicas.len(),
            config.value(&pins::CALIBRATION_LAMBDA_R_FRACTION),
            lambda_max
        ));
    }
    out.push_str(&schedule_lines(&params, requests, &params.digest()));
    match config.fault.variant {
        FaultVariant::None => out.push_str("fault: none\n"),
        v => out.push_str(&format!(
            "fault: {} of {} at T_inject\n",
            v.name(),
            config.fault.victim.as_deref().unwrap_or("?")
        )),
    }
    for t in &config.thresholds {
        out.push_str(&format!("threshold: {t} (exit 3 when it fails, §9)\n"));
    }
    out.push_str(&pins_text(config, all_pins));
    for warning in config.warnings() {
        out.push_str(&format!("warning: {warning}\n"));
    }
    out
}

/// The pins a file touches: set by it (to the pin or stricter), scaled by its dev time factor,
/// or unverifiable against its hosted target; every pin with `all_pins`.
fn pins_text(config: &Config, all_pins: bool) -> String {
    let mut out = String::new();
    let pins = config.pins_in_force();
    let touched =
        |p: &&PinInForce| all_pins || p.configured || p.effective.is_some() || p.not_verifiable;
    let shown: Vec<&PinInForce> = pins.iter().filter(touched).collect();
    if all_pins {
        out.push_str("pins in force (clause, key = value [what: rule pin]):\n");
    } else {
        out.push_str(&format!(
            "pins this file sets or its profile changes ({} of {}; the other {} hold at their pinned values, `--pins` lists all):\n",
            shown.len(),
            pins.len(),
            pins.len() - shown.len()
        ));
    }
    for p in shown {
        out.push_str(&pin_line(p));
        out.push('\n');
    }
    out
}

fn json_value(v: Value) -> Json {
    match v {
        Value::Int(i) => json!(i),
        Value::Float(f) => json!(f),
    }
}

/// What `config check --json` prints.
pub fn config_json(config: &Config) -> Json {
    let params = schedule_of(config);
    let workload = &params.workload;
    json!({
        "valid": true,
        "profile": config.profile.name(),
        "time_factor": config.time_factor,
        "publishable": config.publishability().is_ok(),
        "not_publishable_reason": config.publishability().err().map(|why| why.to_string()),
        "blake3": hex(&config.hash()),
        // A closed run's rate is an outcome, a replay's its trace's.
        "rate_rps": (!matches!(workload, Workload::Closed { .. } | Workload::Replay { .. }))
            .then(|| config.rate_rps()),
        "workload": {
            "model": workload.name(),
            "think": workload.think().map(|t| json!({"mean_ns": t.mean_ns, "law": t.law.name()})),
        },
        "schedule_requests": params.iter().count(),
        "schedule_digest": hex(&params.digest()),
        "warnings": config.warnings(),
        "pins": config.pins_in_force().iter().map(|p| json!({
            "clause": p.pin.clause,
            "key": p.pin.key,
            "what": p.pin.what,
            "value": json_value(p.value),
            "pinned": json_value(p.pin.value),
            "unit": p.pin.unit,
            "rule": pins::rule_words(p.pin.rule),
            "configured": p.configured,
            "effective": p.effective,
            "not_verifiable": p.not_verifiable,
        })).collect::<Vec<_>>(),
    })
}

/// What `inspect` prints about a header.
pub fn header_text(header: &Header, with_config: bool) -> String {
    let mut out = format!("format: v1, codec {:?}\n", header.codec);
    out.push_str(&format!("spec at capture: {}\n", header.spec_version));
    out.push_str(&format!(
        "tool: percentes {} (commit {})\n",
        header.tool_version, header.tool_commit
    ));
    out.push_str(&format!("profile: {}", header.profile));
    if header.profile == "dev" {
        out.push_str(&format!(
            ", time factor {} -- NOT PUBLISHABLE",
            header.dev_time_factor
        ));
    }
    out.push('\n');
    out.push_str(&format!(
        "config: {} bytes, blake3 {}\n",
        header.config_bytes.len(),
        hex(&header.config_hash)
    ));
    out.push_str(&schedule_lines(
        &header.schedule,
        header.schedule_requests,
        &header.schedule_digest,
    ));
    out.push_str(&format!(
        "clock: {}, epoch at monotonic {} ns = {} (realtime, for humans only)\n",
        header.clock.source,
        header.clock.monotonic_epoch_ns,
        format_instant(header.clock.realtime_epoch_ns)
    ));
    for (key, value) in &header.host {
        out.push_str(&format!("host: {key} = {value}\n"));
    }
    out.push_str(&format!(
        "shard: {} of {}\n",
        header.shard_index, header.shard_count
    ));
    out.push_str(&format!(
        "signing key: {}\n",
        header
            .signing_key
            .map(|k| hex(&k))
            .unwrap_or_else(|| "none (journal not signed)".into())
    ));
    for (key, value) in &header.extensions {
        out.push_str(&format!("extension: {key} ({} bytes)\n", value.len()));
    }
    if with_config {
        out.push_str("--- config ---\n");
        out.push_str(&String::from_utf8_lossy(&header.config_bytes));
        if !header.config_bytes.ends_with(b"\n") {
            out.push('\n');
        }
        out.push_str("--- end of config ---\n");
    }
    out
}

/// What `inspect --json` prints about a header.
pub fn header_json(header: &Header, with_config: bool) -> Json {
    let s = &header.schedule;
    json!({
        "format_version": 1,
        "codec": header.codec,
        "spec_version": header.spec_version,
        "tool_version": header.tool_version,
        "tool_commit": header.tool_commit,
        "profile": header.profile,
        "dev_time_factor": header.dev_time_factor,
        "config_hash": hex(&header.config_hash),
        "config_bytes": header.config_bytes.len(),
        "config": with_config.then(|| String::from_utf8_lossy(&header.config_bytes).into_owned()),
        "schedule": {
            "seed": s.seed,
            "arrival": s.arrival.name(),
            "phases": s.phases.iter().map(|p| json!({"name": p.name, "duration_ns": p.duration_ns, "rate_rps": p.rate_rps})).collect::<Vec<_>>(),
            "routes": s.routes.iter().map(|r| json!({"label": r.label, "weight": r.weight})).collect::<Vec<_>>(),
            "inject_at_ns": s.inject_at_ns,
            "requests": header.schedule_requests,
            "digest": hex(&header.schedule_digest),
        },
        "clock": {
            "monotonic_epoch_ns": header.clock.monotonic_epoch_ns,
            "realtime_epoch_ns": header.clock.realtime_epoch_ns,
            "realtime_epoch_utc": format_instant(header.clock.realtime_epoch_ns),
            "source": header.clock.source,
        },
        "host": header.host.iter().map(|(k, v)| json!({"key": k, "value": v})).collect::<Vec<_>>(),
        "shard_index": header.shard_index,
        "shard_count": header.shard_count,
        "signing_key": header.signing_key.map(|k| hex(&k)),
        "extensions": header.extensions.iter().map(|(k, v)| json!({"key": k, "bytes": v.len()})).collect::<Vec<_>>(),
    })
}

/// One record as `inspect --records` prints it: its fields by name with names beside the stable
/// codes (a request's outcome and class, an event's kind), then its sequence number and byte
/// offset; a record that does not decode as `undecodable`, with its kind byte and why.
pub fn record_line(
    kind: u8,
    (sequence, byte_offset): (u64, u64),
    decoded: std::result::Result<percentes_formats::journal::records::Record, String>,
) -> serde_json::Result<serde_json::Value> {
    use percentes_formats::journal::records::{class_name, event_kind_name, Outcome, Record};
    let mut line = match decoded {
        Ok(record) => {
            let mut value = serde_json::to_value(&record)?;
            match &record {
                Record::Request(r) => {
                    value["outcome_name"] = json!(Outcome::from_byte(r.outcome).map(Outcome::name));
                    value["class_name"] = json!(class_name(r.class));
                }
                Record::Event(e) => value["kind_name"] = json!(event_kind_name(e.kind)),
                _ => {}
            }
            value
        }
        Err(error) => json!({"record": "undecodable", "kind_byte": kind, "error": error}),
    };
    line["sequence"] = json!(sequence);
    line["byte_offset"] = json!(byte_offset);
    Ok(line)
}

#[cfg(test)]
mod tests {
    #[test]
    fn rates_print_without_float_noise() {
        assert_eq!(super::rps(3.9000000000000004), "3.9");
        assert_eq!(super::rps(20.0), "20");
        assert_eq!(super::rps(0.125), "0.125");
        assert_eq!(super::rps(62.359), "62.359");
    }
}
