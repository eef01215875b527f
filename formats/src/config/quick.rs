//! A run described by flags instead of a file (`percentes record --url URL --model M --rate R
//! --duration 30s`, and `percentes init --from-flags` to write it out for editing): the
//! configuration text those flags stand for. It is an ordinary configuration, loaded by the
//! same rules and journaled like any other, so a quick run is as verifiable as a planned one.
//!
//! Never the experiment profile: flags cannot state a calibration, a fault or the pins a
//! publishable run needs. A self-hosted target gets the dev profile with its timeline in
//! seconds (SPEC §P) and the pinned client timeout; a third-party endpoint (`--hosted`) gets the
//! hosted profile, whose timeline is the pinned one.

use std::collections::BTreeMap;

use super::{Config, ConfigError};
use crate::pins;

/// The route path a URL without one is given: OpenAI's chat completions.
pub const QUICK_PATH_DEFAULT: &str = "/v1/chat/completions";
/// The paths a `--url` may end in that are taken as the route rather than the base URL.
const ROUTE_PATHS: [&str; 3] = ["/v1/chat/completions", "/v1/completions", "/v1/responses"];

/// What the flags state.
#[derive(Clone, Debug, PartialEq)]
pub struct Quick {
    /// The endpoint: a base URL (`http://host:8000`) or a request URL that ends in a route path
    /// (`http://host:8000/v1/chat/completions`).
    pub url: String,
    /// `target.model`.
    pub model: String,
    /// `schedule.rate_rps`.
    pub rate_rps: f64,
    /// The measured span in seconds (dev only).
    pub duration_s: Option<f64>,
    /// The warm-up in seconds (dev only; default a tenth of the duration, at most the pin).
    pub warmup_s: Option<f64>,
    /// Stream the responses (SSE), for TTFT and inter-token times.
    pub stream: bool,
    /// `[target.headers]`, as `Name: value` lines.
    pub headers: Vec<String>,
    /// `[target.secret_headers]`, as `Name=VARIABLE` pairs.
    pub secret_headers: Vec<String>,
    /// `target.api_key_env`.
    pub api_key_env: Option<String>,
    /// A third-party endpoint: the hosted profile.
    pub hosted: bool,
    /// `target.preflight = false` (`--no-preflight`): no pre-flight before the run.
    pub no_preflight: bool,
    /// `schedule.seed`.
    pub seed: u64,
    /// `schedule.arrival`: `poisson` or `deterministic`.
    pub arrival: String,
    /// `routes[0].output_tokens`, as `lengths_inline` reads it: each request's `max_tokens`.
    pub max_tokens: Option<String>,
    /// `routes[0].input_tokens`: each generated prompt's length.
    pub input_tokens: Option<String>,
    /// `routes[0].prompt_file`: a dataset of prompts.
    pub dataset: Option<String>,
    /// `routes[0].prompt_format`: `text`, `jsonl` or `sharegpt`.
    pub dataset_format: Option<String>,
    /// `target.tokenizer`: the model's tokenizer.json, so lengths are in its tokens.
    pub tokenizer: Option<String>,
    /// `[workload]`: the generation model, when not open loop.
    pub workload: QuickWorkload,
    /// What the route's requests carry beyond the prompt (SPEC §2 "What a request carries").
    pub parts: QuickParts,
    /// `--slo`: the user's own SLO (`[slo] declared`, SPEC §4 "A declared SLO"), as given.
    pub slo: Option<String>,
    /// `--server-metrics`: `auto`, `vllm`, `sglang`, `tgi` or `off`; `None` is `auto` for a
    /// self-hosted target and `off` for a hosted one (a third party's host is not probed).
    pub server_metrics: Option<String>,
}

/// The values `--server-metrics` takes.
pub const SERVER_METRICS_FLAG: [&str; 5] = ["auto", "vllm", "sglang", "tgi", "off"];

/// A quick run's request parts: tools, the answer's format, images, and the structured check.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct QuickParts {
    /// `--tools FILE`: a JSON array of function tools, written into the configuration (so the
    /// journal holds it).
    pub tools_file: Option<String>,
    /// `--tool-choice`: `auto`, `none`, `required` or a function's name.
    pub tool_choice: Option<String>,
    /// `--response-format`: `json_object`, or a JSON Schema file written into the configuration.
    pub response_format: Option<String>,
    /// `--image FILE`, each attached to every request.
    pub images: Vec<String>,
    /// `--check-structured`: `verify.structured`.
    pub structured: bool,
}

/// A flag whose file cannot be written into the run: the flag, the file and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlagError {
    /// The flag (`--tools`).
    pub flag: &'static str,
    /// What is wrong, the file named.
    pub problem: String,
}

impl std::fmt::Display for FlagError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.flag, self.problem)
    }
}

impl std::error::Error for FlagError {}

impl FlagError {
    fn new(flag: &'static str, problem: impl Into<String>) -> FlagError {
        FlagError {
            flag,
            problem: problem.into(),
        }
    }
}

impl From<WorkloadFlagError> for FlagError {
    fn from(e: WorkloadFlagError) -> FlagError {
        FlagError::new(
            e.flag,
            format!("{:?}: {:?} is {}; write {}", e.spec, e.part, e.what, e.form),
        )
    }
}

/// A duration a flag takes that does not read as one ([`parse_duration_s`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DurationError {
    /// The text given.
    pub text: String,
}

impl std::fmt::Display for DurationError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{:?} is not a duration: a positive number with s, m, h or ms (30s, 2m, 500ms)",
            self.text
        )
    }
}

impl std::error::Error for DurationError {}

/// `--rate` as given: a finite number (NaN and the infinities are not rates, and a NaN would
/// read as no rate at all; a negative or zero rate is read and refused by the configuration's
/// own check, with its key).
pub fn rate_flag(text: &str) -> Result<f64, FlagError> {
    let problem = match text.trim().parse::<f64>() {
        Ok(rate) if rate.is_finite() => return Ok(rate),
        Ok(rate) => format!("{rate} is not a rate: give requests per second, as 20 or 0.5"),
        Err(e) => format!("{text:?} is not a number: {e}"),
    };
    Err(FlagError {
        flag: "--rate",
        problem,
    })
}

impl QuickParts {
    /// The route keys these flags set, as `key = value` lines; the error names the flag.
    fn lines(&self) -> Result<String, FlagError> {
        let json_file = |flag: &'static str, path: &str| -> Result<toml::Value, FlagError> {
            let problem = |why: String| FlagError {
                flag,
                problem: format!("{path:?} {why}"),
            };
            let bytes = crate::files::read_bounded(
                path.as_ref(),
                crate::files::CONFIG_FILE_BYTES_MAX,
                "a configuration",
            )
            .map_err(|e| problem(format!("cannot be read: {e}")))?;
            let value: serde_json::Value =
                serde_json::from_slice(&bytes).map_err(|e| problem(format!("is not JSON: {e}")))?;
            Ok(toml::Value::String(value.to_string()))
        };
        let mut lines = String::new();
        if let Some(path) = &self.tools_file {
            lines.push_str(&format!("tools = {}\n", json_file("--tools", path)?));
        }
        if let Some(choice) = &self.tool_choice {
            lines.push_str(&format!(
                "tool_choice = {}\n",
                toml::Value::String(choice.clone())
            ));
        }
        match self.response_format.as_deref() {
            None => {}
            Some("json_object") => lines.push_str("response_format = \"json_object\"\n"),
            Some(path) => lines.push_str(&format!(
                "response_format = {}\n",
                json_file("--response-format", path)?
            )),
        }
        if !self.images.is_empty() {
            let images = toml::Value::Array(
                self.images
                    .iter()
                    .map(|i| toml::Value::String(i.clone()))
                    .collect(),
            );
            lines.push_str(&format!("images = {images}\n"));
        }
        if self.structured {
            lines.push_str("verify = { structured = true }\n");
        }
        Ok(lines)
    }
}

/// A quick run's workload flags (SPEC §1 "Workload models").
#[derive(Clone, Debug, Default, PartialEq)]
pub struct QuickWorkload {
    /// `--concurrency N`: closed loop with N users.
    pub users: Option<u32>,
    /// `--turns K`: semi-open, sessions of K requests arriving at --rate sessions/s.
    pub turns: Option<u32>,
    /// `--history`: each turn resends its session's earlier turns (SPEC §1 "Conversation
    /// histories"); with `--turns` only.
    pub history: bool,
    /// `--think-time`: the mean think time, s.
    pub think_s: Option<f64>,
    /// `--think exponential`: exponential think times (default fixed).
    pub think: Option<String>,
    /// `--trace FILE`: replay a trace's times (and its requests, when it has them).
    pub trace: Option<String>,
    /// `--shared-prefixes ENTRIESxTOKENS[:SHARE]`: a shared-prefix pool (SPEC §1 "Shared
    /// prefixes"), under any model.
    pub prefixes: Option<String>,
    /// `--abandon SHARE:TIME[:LAW]`: requests the client closes early (SPEC §1 "Abandonment").
    pub abandon: Option<String>,
}

impl QuickWorkload {
    /// The `[workload]` table, or `None` for open loop; the error names the flags at odds.
    fn table(&self, rate_given: bool) -> Result<Option<toml::Table>, FlagError> {
        use toml::Value as V;
        let models = [
            self.users.map(|_| "--concurrency"),
            self.turns.map(|_| "--turns"),
            self.trace.as_ref().map(|_| "--trace"),
        ];
        let chosen: Vec<&str> = models.into_iter().flatten().collect();
        if let [first, rest @ ..] = chosen.as_slice() {
            if !rest.is_empty() {
                return Err(FlagError::new(
                    first,
                    format!(
                        "and {} choose different workload models: give one",
                        rest.join(" and ")
                    ),
                ));
            }
        }
        if self.history && self.turns.is_none() {
            return Err(FlagError::new(
                "--history",
                "resends a session's earlier turns: it belongs to --turns (semi-open sessions)",
            ));
        }
        let mut table = toml::Table::new();
        let think = self.think_s.is_some() || self.think.is_some();
        match (self.users, self.turns, &self.trace) {
            (Some(users), _, _) => {
                if rate_given {
                    return Err(FlagError::new("--concurrency", format!("{users} runs a closed loop, whose rate is what its users achieve: leave --rate out")));
                }
                table.insert("model".into(), V::String("closed".into()));
                table.insert("users".into(), V::Integer(i64::from(users)));
            }
            (_, Some(turns), _) => {
                table.insert("model".into(), V::String("semi-open".into()));
                table.insert("turns".into(), V::Integer(i64::from(turns)));
                if self.history {
                    table.insert("history".into(), V::Boolean(true));
                }
            }

            (_, _, Some(trace)) => {
                if rate_given || think {
                    return Err(FlagError::new(
                        "--trace",
                        "replays a trace's times: leave --rate and the think flags out",
                    ));
                }
                table.insert("model".into(), V::String("replay".into()));
                table.insert("trace".into(), V::String(trace.clone()));
                return Ok(Some(table));
            }
            _ if think => {
                return Err(FlagError::new(
                    "--think-time",
                    "and --think belong to --concurrency or --turns",
                ))
            }
            _ => return Ok(None),
        }
        if let Some(s) = self.think_s {
            table.insert("think_ms".into(), V::Float(s * 1e3));
        }
        if let Some(law) = &self.think {
            table.insert("think".into(), V::String(law.clone()));
        }
        Ok(Some(table))
    }
}

impl QuickWorkload {
    /// The `[workload]` subtables the flags state, each with its name: `--shared-prefixes`'s
    /// `prefixes`, `--abandon`'s `abandon`.
    fn subtables(&self) -> Result<Vec<(&'static str, toml::Table)>, WorkloadFlagError> {
        let mut out = Vec::new();
        if let Some(spec) = &self.prefixes {
            out.push(("prefixes", prefix_table(spec)?));
        }
        if let Some(spec) = &self.abandon {
            out.push(("abandon", abandon_table(spec)?));
        }
        Ok(out)
    }
}

/// `--shared-prefixes 8x256` (8 entries of 256 units, every session drawing one) or
/// `8x256:0.5` (half the sessions), as `[workload.prefixes]`.
fn prefix_table(spec: &str) -> Result<toml::Table, WorkloadFlagError> {
    use toml::Value as V;
    let wrong = |part: &str, what| WorkloadFlagError::of(PREFIXES_FORM, spec, part, what);
    let (pool, share) = match spec.trim().split_once(':') {
        Some((pool, share)) => (pool, Some(share)),
        None => (spec.trim(), None),
    };
    let (entries, tokens) = pool
        .split_once(['x', 'X'])
        .ok_or_else(|| wrong(pool, "without an `x` between the entries and their length"))?;
    let whole = |text: &str, what| -> Result<i64, WorkloadFlagError> {
        text.trim()
            .parse::<u32>()
            .map(i64::from)
            .map_err(|_| wrong(text, what))
    };
    let mut table = toml::Table::new();
    table.insert(
        "entries".into(),
        V::Integer(whole(entries, "not a whole number of entries")?),
    );
    table.insert(
        "tokens".into(),
        V::Integer(whole(tokens, "not a whole number of tokens")?),
    );
    if let Some(share) = share {
        let value: f64 = share
            .trim()
            .parse()
            .map_err(|_| wrong(share, "not a share"))?;
        table.insert("share".into(), V::Float(value));
    }
    Ok(table)
}

/// `--abandon 0.2:800ms` (a fifth of the requests closed 800 ms after their intended time) or
/// `0.2:800ms:exponential` (exponential delays with that mean), as `[workload.abandon]`.
fn abandon_table(spec: &str) -> Result<toml::Table, WorkloadFlagError> {
    use toml::Value as V;
    let wrong = |part: &str, what| WorkloadFlagError::of(ABANDON_FORM, spec, part, what);
    let mut parts = spec.trim().splitn(3, ':');
    let share = parts.next().unwrap_or_default();
    let after = parts
        .next()
        .ok_or_else(|| wrong(share, "without a `:` before the delay"))?;
    let share: f64 = share
        .trim()
        .parse()
        .map_err(|_| wrong(share, "not a share"))?;
    let seconds = parse_duration_s(after).map_err(|_| wrong(after, "not a time"))?;
    let mut table = toml::Table::new();
    table.insert("share".into(), V::Float(share));
    table.insert("after_ms".into(), V::Float(seconds * 1e3));
    if let Some(law) = parts.next() {
        if !matches!(law, "fixed" | "exponential") {
            return Err(wrong(law, "neither `fixed` nor `exponential`"));
        }
        table.insert("law".into(), V::String(law.into()));
    }
    Ok(table)
}

const PREFIXES_FORM: (&str, &str) = (
    "--shared-prefixes",
    "ENTRIESxTOKENS[:SHARE], e.g. 8x256 or 8x256:0.5",
);
const ABANDON_FORM: (&str, &str) = (
    "--abandon",
    "SHARE:TIME[:fixed|exponential], e.g. 0.2:800ms or 0.2:800ms:exponential",
);

/// A workload flag's value that does not read as what the flag takes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkloadFlagError {
    /// The flag.
    pub flag: &'static str,
    /// Its value.
    pub spec: String,
    /// The part of it that is wrong.
    pub part: String,
    /// What is wrong with that part.
    pub what: &'static str,
    /// The form the flag takes.
    pub form: &'static str,
}

impl WorkloadFlagError {
    fn of(
        (flag, form): (&'static str, &'static str),
        spec: &str,
        part: &str,
        what: &'static str,
    ) -> Self {
        WorkloadFlagError {
            flag,
            spec: spec.to_owned(),
            part: part.to_owned(),
            what,
            form,
        }
    }
}

impl std::fmt::Display for WorkloadFlagError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} {:?}: {:?} is {}; write {}",
            self.flag, self.spec, self.part, self.what, self.form
        )
    }
}

/// A length as a flag states it, as the inline table `[routes.output_tokens]` (or
/// `input_tokens`) takes: `128` (fixed), `64..256` (uniform), `normal:MEAN,SD,MAX`, or, for
/// output only, `dataset` (each prompt's own). The error names the flag.
pub fn lengths_inline(flag: &'static str, spec: &str, output: bool) -> Result<String, FlagError> {
    let spec = spec.trim();
    let whole = |s: &str| {
        s.trim().parse::<u32>().map_err(|_| {
            FlagError::new(
                flag,
                format!("{spec:?}: `{s}` is not a whole number of tokens"),
            )
        })
    };
    if spec == "dataset" {
        return if output {
            Ok("{ kind = \"dataset\" }".to_owned())
        } else {
            Err(FlagError::new(
                flag,
                "dataset: a prompt's length is its own; `dataset` is for --max-tokens",
            ))
        };
    }
    if let Some((low, high)) = spec.split_once("..") {
        return Ok(format!(
            "{{ kind = \"uniform\", min = {}, max = {} }}",
            whole(low)?,
            whole(high)?
        ));
    }
    if let Some(rest) = spec.strip_prefix("normal:") {
        let parts: Vec<&str> = rest.split(',').collect();
        let number = |s: &str| match s.trim().parse::<f64>() {
            Ok(v) if v.is_finite() => Ok(v),
            _ => Err(FlagError::new(
                flag,
                format!("{spec:?}: `{s}` is not a number"),
            )),
        };
        return match parts.as_slice() {
            [mean, sd, max] => Ok(format!(
                "{{ kind = \"normal\", mean = {:?}, sd = {:?}, max = {} }}",
                number(mean)?,
                number(sd)?,
                whole(max)?
            )),
            _ => Err(FlagError::new(
                flag,
                format!("{spec:?}: a normal length reads normal:MEAN,SD,MAX (normal:256,64,1024)"),
            )),
        };
    }
    Ok(format!("{{ kind = \"fixed\", tokens = {} }}", whole(spec)?))
}

/// Parses a duration as a user writes one: `30s`, `2m`, `1h`, `1.5s`, `500ms`, or bare seconds.
pub fn parse_duration_s(text: &str) -> Result<f64, DurationError> {
    let t = text.trim();
    let (number, scale) = if let Some(n) = t.strip_suffix("ms") {
        (n, 1e-3)
    } else if let Some(n) = t.strip_suffix('s') {
        (n, 1.0)
    } else if let Some(n) = t.strip_suffix('m') {
        (n, 60.0)
    } else if let Some(n) = t.strip_suffix('h') {
        (n, 3600.0)
    } else {
        (t, 1.0)
    };
    match number.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 => Ok(v * scale),
        _ => Err(DurationError {
            text: text.to_owned(),
        }),
    }
}

impl Quick {
    /// Splits `url` into the base URL and the route path: a path ending in an OpenAI route
    /// keeps what precedes it as the base (a gateway's prefix); any other path is the route
    /// itself (`http://host:8000/v2/generate`), on the origin; no path is the default route.
    fn base_and_path(&self) -> (String, String) {
        let url = self.url.trim_end_matches('/');
        for path in ROUTE_PATHS {
            if let Some(base) = url.strip_suffix(path) {
                if base.contains("://") && !base.ends_with(':') && !base.ends_with('/') {
                    return (base.to_owned(), path.to_owned());
                }
            }
        }
        if let Some((scheme, rest)) = url.split_once("://") {
            if let Some(at) = rest.find('/') {
                let (authority, path) = rest.split_at(at);
                if !authority.is_empty() && path.len() > 1 {
                    return (format!("{scheme}://{authority}"), path.to_owned());
                }
            }
        }
        (url.to_owned(), QUICK_PATH_DEFAULT.to_owned())
    }

    /// The configuration these flags stand for, as commented TOML, checked by loading it. The
    /// error names the flag where one is to blame.
    pub fn toml(&self) -> Result<String, FlagError> {
        use toml::Value as V;
        let mut workload = self.workload.table(!self.rate_rps.is_nan())?;
        let subtables = self.workload.subtables()?;
        if !subtables.is_empty() {
            workload.get_or_insert_with(toml::Table::new);
        }
        let sets_rate = !workload.as_ref().is_some_and(|t| {
            matches!(
                t.get("model").and_then(V::as_str),
                Some("closed" | "replay")
            )
        });
        if self.rate_rps.is_nan() && sets_rate {
            return Err(FlagError::new(
                "--rate",
                if self.workload.turns.is_some() {
                    "is needed: the sessions' arrival rate, sessions/s"
                } else {
                    "is needed: the offered rate in requests/s, open loop (or --concurrency N for a closed loop)"
                },
            ));
        }
        let (base_url, path) = self.base_and_path();
        let profile = if self.hosted { "hosted" } else { "dev" };
        let dev = if self.hosted {
            if self.duration_s.is_some() || self.warmup_s.is_some() {
                return Err(FlagError::new("--duration", format!(
                    "and --warmup set a dev run's timeline; a --hosted run's is the pinned one ({} s warm-up, {} s measured, {} s cooldown, SPEC §1): leave them out, or measure a self-hosted target",
                    pins::value::EXPERIMENT_WARMUP_S,
                    pins::value::EXPERIMENT_BASELINE_S,
                    pins::value::EXPERIMENT_COOLDOWN_S
                )));
            }
            None
        } else {
            let measure = self.duration_s.ok_or_else(|| {
                FlagError::new(
                    "--duration",
                    "is needed: how long to measure (30s, 2m), after a warm-up of a tenth of it",
                )
            })?;
            let warmup = self.warmup_s.unwrap_or_else(|| {
                let tenth = (measure / 10.0 * 10.0).round() / 10.0;
                tenth.min(pins::value::EXPERIMENT_WARMUP_S as f64)
            });
            let mut table = toml::Table::new();
            table.insert("time_factor".into(), V::Integer(1));
            table.insert("warmup_s".into(), V::Float(warmup));
            table.insert("measure_s".into(), V::Float(measure));
            table.insert("cooldown_s".into(), V::Float(0.0));
            Some(table)
        };
        let mut target = toml::Table::new();
        let kind = if self.hosted { "hosted" } else { "self-hosted" };
        target.insert("kind".into(), V::String(kind.into()));
        target.insert("base_url".into(), V::String(base_url));
        target.insert("model".into(), V::String(self.model.clone()));
        target.insert("stream".into(), V::Boolean(self.stream));
        if self.no_preflight {
            target.insert("preflight".into(), V::Boolean(false));
        }
        if let Some(variable) = &self.api_key_env {
            target.insert("api_key_env".into(), V::String(variable.clone()));
        }
        if let Some(tokenizer) = &self.tokenizer {
            target.insert("tokenizer".into(), V::String(tokenizer.clone()));
        }
        let mut headers = BTreeMap::new();
        for line in &self.headers {
            let Some((name, value)) = line.split_once(':') else {
                return Err(FlagError::new(
                    "--header",
                    format!("{line:?} is not `Name: value` (a colon between them)"),
                ));
            };
            let name = name.trim();
            if name.is_empty() || headers.contains_key(name) {
                return Err(FlagError::new(
                    "--header",
                    format!(
                        "{line:?}: {}",
                        if name.is_empty() {
                            "the name is empty"
                        } else {
                            "that header is given twice"
                        }
                    ),
                ));
            }
            headers.insert(name.to_owned(), V::String(value.trim().to_owned()));
        }
        let mut secret_headers = BTreeMap::new();
        for pair in &self.secret_headers {
            let Some((name, variable)) = pair.split_once('=') else {
                return Err(FlagError::new(
                    "--secret-header",
                    format!(
                        "{pair:?} is not `Name=VARIABLE` (the header, then the \
                         environment variable that holds its value)"
                    ),
                ));
            };
            let name = name.trim();
            if name.is_empty() || secret_headers.contains_key(name) {
                return Err(FlagError::new(
                    "--secret-header",
                    format!(
                        "{pair:?}: {}",
                        if name.is_empty() {
                            "the name is empty"
                        } else {
                            "that header is given twice"
                        }
                    ),
                ));
            }
            secret_headers.insert(name.to_owned(), V::String(variable.trim().to_owned()));
        }
        let mut schedule = toml::Table::new();
        schedule.insert("seed".into(), V::Integer(self.seed as i64));
        schedule.insert("arrival".into(), V::String(self.arrival.clone()));
        if sets_rate {
            schedule.insert("rate_rps".into(), V::Float(self.rate_rps));
        }
        let mut fault = toml::Table::new();
        fault.insert("variant".into(), V::String("none".into()));
        let mut route = toml::Table::new();
        route.insert("label".into(), V::String("quick".into()));
        route.insert("path".into(), V::String(path));
        if let Some(file) = &self.dataset {
            route.insert("prompt_file".into(), V::String(file.clone()));
        }
        if let Some(format) = &self.dataset_format {
            route.insert("prompt_format".into(), V::String(format.clone()));
        }
        // The lengths are inline tables, written after the route's plain keys.
        let mut lengths = String::new();
        if let Some(spec) = &self.max_tokens {
            let inline = lengths_inline("--max-tokens", spec, true)?;
            lengths.push_str(&format!("output_tokens = {inline}\n"));
        }
        if let Some(spec) = &self.input_tokens {
            let inline = lengths_inline("--input-tokens", spec, false)?;
            lengths.push_str(&format!("input_tokens = {inline}\n"));
        }
        lengths.push_str(&self.parts.lines()?);
        // Sections in the order a person writes them (a table alone would sort its keys).
        let mut sections = Vec::new();
        sections.extend(dev.map(|d| ("[dev]".to_owned(), d)));
        sections.push(("[target]".into(), target));
        if !headers.is_empty() {
            sections.push(("[target.headers]".into(), headers.into_iter().collect()));
        }
        if !secret_headers.is_empty() {
            sections.push((
                "[target.secret_headers]".into(),
                secret_headers.into_iter().collect(),
            ));
        }
        sections.push(("[schedule]".into(), schedule));
        if let Some(w) = workload {
            sections.push(("[workload]".to_owned(), w));
            // Each subtable its own section (TOML writes it under the root otherwise).
            for (name, table) in subtables {
                sections.push((format!("[workload.{name}]"), table));
            }
        }
        sections.push(("[fault]".into(), fault));
        let scrape = self.server_metrics_section()?;
        sections.extend(scrape.map(|t| ("[server_metrics]".into(), t)));
        if let Some(text) = &self.slo {
            let (objectives, target) =
                super::slo::flag(text).map_err(|e| FlagError::new("--slo", e.to_string()))?;
            let mut slo = toml::Table::new();
            let target = target.map(super::slo::target_text);
            let declared = objectives
                .iter()
                .map(ToString::to_string)
                .chain(target)
                .map(V::String);
            slo.insert("declared".into(), V::Array(declared.collect()));
            sections.push(("[slo]".into(), slo));
        }
        sections.push(("[[routes]]".into(), route));
        let mut text = "# A quick run stated by flags (`percentes record --url ...`; `percentes init --from-flags`\n# with the same flags writes it out). No fault; NOT PUBLISHABLE unless hosted.\n".to_owned();
        text.push_str(&format!(
            "schema_version = {}\nprofile = \"{profile}\"\n",
            pins::value::SCHEMA_VERSION
        ));
        for (header, table) in sections {
            let body = toml::to_string(&table).map_err(|e| {
                FlagError::new(
                    "--url",
                    format!("and the flags beside it cannot be written as a run: {e}"),
                )
            })?;
            if !header.is_empty() {
                text.push('\n');
                text.push_str(&header);
                text.push('\n');
            }
            text.push_str(&body);
        }
        text.push_str(&lengths); // the last section is [[routes]]
        Config::parse(text.as_bytes()).map_err(|e| blame(&e))?;
        Ok(text)
    }
}

impl Quick {
    /// `[server_metrics]` as `--server-metrics` asks (SPEC §2 "Server-side evidence", issue 55
    /// item 4): a preset scrapes the base URL's own host at `/metrics` (the section written with
    /// no replica address means exactly that); `off`, a hosted target left at its default, and
    /// an https target left at its default write nothing.
    fn server_metrics_section(&self) -> Result<Option<toml::Table>, FlagError> {
        let asked = self.server_metrics.as_deref();
        let refused = |problem: String| FlagError {
            flag: "--server-metrics",
            problem,
        };
        let preset = match asked {
            Some(value) if !SERVER_METRICS_FLAG.contains(&value) => {
                return Err(refused(format!(
                    "{value:?}: give one of {}",
                    SERVER_METRICS_FLAG.join(", ")
                )))
            }
            Some("off") => return Ok(None),
            None if self.hosted => return Ok(None),
            Some(value) => value,
            None => "auto",
        };
        if !self.base_and_path().0.starts_with("http://") {
            return match asked {
                None => Ok(None),
                Some(_) => Err(refused("(the target is https, and the server's metrics are scraped over plain http only): name its metrics endpoint in a configuration's [server_metrics] extra, or leave the flag out".into())),
            };
        }
        let mut table = toml::Table::new();
        table.insert("preset".into(), toml::Value::String(preset.into()));
        Ok(Some(table))
    }
}

/// Each configuration key a quick run's flag sets, with the flag: an error that names the key
/// names the flag the user typed.
const FLAGS: [(&str, &str); 32] = [
    ("target.preflight", "--no-preflight"),
    ("server_metrics.preset", "--server-metrics"),
    ("slo.declared", "--slo"),
    ("target.base_url", "--url"),
    ("target.model", "--model"),
    ("schedule.rate_rps", "--rate"),
    ("schedule.seed", "--seed"),
    ("schedule.arrival", "--arrival"),
    ("dev.measure_s", "--duration"),
    ("dev.warmup_s", "--warmup"),
    ("target.secret_headers", "--secret-header"),
    ("target.headers", "--header"),
    ("target.api_key_env", "--api-key-env"),
    ("routes[0].path", "--url"),
    ("routes[0].output_tokens", "--max-tokens"),
    ("routes[0].input_tokens", "--input-tokens"),
    ("routes[0].prompt_file", "--dataset"),
    ("routes[0].prompt_format", "--dataset-format"),
    ("target.tokenizer", "--tokenizer"),
    ("workload.users", "--concurrency"),
    ("workload.turns", "--turns"),
    ("workload.history", "--history"),
    ("workload.think_ms", "--think-time"),
    ("workload.think", "--think"),
    ("workload.trace", "--trace"),
    ("workload.prefixes", "--shared-prefixes"),
    ("workload.abandon", "--abandon"),
    ("routes[0].tools", "--tools"),
    ("routes[0].tool_choice", "--tool-choice"),
    ("routes[0].response_format", "--response-format"),
    ("routes[0].images", "--image"),
    ("routes[0].verify.structured", "--check-structured"),
];

/// The flag that set the key `error` names, and the key.
fn flag_of(error: &ConfigError) -> Option<(&'static str, &'static str)> {
    let text = error.to_string();
    // The key the error names (a message may mention other keys, as advice).
    let named = match error {
        ConfigError::Invalid { key, .. } => key.as_str(),
        _ => text.as_str(),
    };
    FLAGS
        .iter()
        .find(|(key, _)| named.contains(key))
        .map(|&(key, flag)| (key, flag))
}

/// A configuration error, with the flag that set the key it names.
fn blame(error: &ConfigError) -> FlagError {
    match flag_of(error) {
        Some((key, flag)) => FlagError::new(flag, format!("(the run's {key}): {error}")),
        None => FlagError::new(
            "--url",
            format!("and the flags beside it state a run that does not load: {error}"),
        ),
    }
}

/// The files a quick run's flags name (`--dataset`, `--tokenizer`, `--image`), checked before
/// the run as a recording checks them (each a regular file within its kind's limit), the
/// error naming the flag the user typed rather than the key it set (issue 54 item 6: a missing
/// `--dataset` said `prompt_file`). `init --from-flags` writes a configuration to edit, and
/// does not ask.
pub fn check_quick_files(text: &str) -> Result<(), FlagError> {
    Config::parse(text.as_bytes())
        .map_err(|e| blame(&e))?
        .check_files()
        .map_err(|e| blame(&e))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `--tools`, `--tool-choice`, `--response-format`, `--image` and `--check-structured`
    /// become the route's keys, the files' JSON written in so the journal holds it; a file that
    /// is not JSON names its flag.
    #[test]
    fn request_parts_flags_write_the_route_keys() {
        let dir = percentes_testkit::Scratch::new("quick-parts");
        let tools = dir.join("tools.json");
        std::fs::write(&tools, r#"[{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]"#).unwrap();
        let schema = dir.join("schema.json");
        std::fs::write(&schema, r#"{"type": "object", "required": ["a"]}"#).unwrap();
        let mut q = quick();
        q.url = "http://127.0.0.1:8000/v1/responses".into();
        q.parts = QuickParts {
            tools_file: Some(tools.to_str().unwrap().into()),
            tool_choice: Some("f".into()),
            response_format: Some(schema.to_str().unwrap().into()),
            images: Vec::new(),
            structured: true,
        };
        let text = q.toml().unwrap();
        let config = Config::parse(text.as_bytes()).unwrap();
        let route = &config.routes[0];
        assert_eq!(route.path, "/v1/responses");
        assert_eq!(route.tool_choice.as_deref(), Some("f"));
        assert!(route.verify.structured);
        assert!(route.structured_checks("r").unwrap().is_some());
        std::fs::write(&schema, "not json").unwrap();
        let error = q.toml().unwrap_err().to_string();
        assert!(
            error.starts_with("--response-format") && error.contains("is not JSON"),
            "{error}"
        );
        q.parts.response_format = Some("json_object".into());
        q.parts.tools_file = None;
        q.parts.tool_choice = Some("required".into());
        let error = q.toml().unwrap_err().to_string();
        assert!(error.starts_with("--tool-choice"), "{error}");
    }

    fn quick() -> Quick {
        Quick {
            workload: QuickWorkload::default(),
            parts: QuickParts::default(),
            slo: None,
            server_metrics: None,
            url: "http://127.0.0.1:8000/v1/chat/completions".into(),
            model: "tiny".into(),
            rate_rps: 4.0,
            duration_s: Some(30.0),
            warmup_s: None,
            stream: true,
            headers: vec!["X-Team: perf".into()],
            secret_headers: vec![],
            api_key_env: None,
            no_preflight: false,
            hosted: false,
            seed: 1,
            arrival: "poisson".into(),
            max_tokens: None,
            input_tokens: None,
            dataset: None,
            dataset_format: None,
            tokenizer: None,
        }
    }

    #[test]
    fn a_declared_slo_flag_is_written_into_the_run_and_a_bad_one_names_the_flag() {
        let q = Quick {
            slo: Some("tpot<=50ms, ttft <= 0.5s".into()),
            ..quick()
        };
        let text = q.toml().unwrap();
        assert!(
            text.contains("[slo]\ndeclared = [\"ttft<=500ms\", \"tpot<=50ms\"]"),
            "{text}"
        );
        let config = Config::parse(text.as_bytes()).unwrap();
        let slo = config.slo.expect("declared");
        assert_eq!(slo.to_string(), "ttft<=500ms, tpot<=50ms");
        let e = Quick {
            slo: Some("ttft_p99<=5ms".into()),
            ..quick()
        }
        .toml()
        .unwrap_err();
        assert_eq!(e.flag, "--slo");
        let e = e.to_string();
        assert!(e.starts_with("--slo ") && e.contains("ttft_p99"), "{e}");
        // Without --slo, no [slo] section: the pinned SLO alone.
        assert!(Config::parse(quick().toml().unwrap().as_bytes())
            .unwrap()
            .slo
            .is_none());
    }

    /// Issue 55 item 4: a quick run against a self-hosted server scrapes its own host by
    /// default; a hosted one, an https one left at its default, and `off` scrape nothing.
    #[test]
    fn a_quick_run_scrapes_its_servers_own_metrics_unless_told_not_to() {
        let scraped = |q: Quick| {
            let config = Config::parse(q.toml().unwrap().as_bytes()).unwrap();
            (config.server_metrics.preset, config.scrape_addresses())
        };
        let (preset, addresses) = scraped(quick());
        assert_eq!(preset, crate::prometheus::Preset::Auto);
        assert_eq!(addresses["target"], "127.0.0.1:8000");
        let with = |value: &str| Quick {
            server_metrics: Some(value.into()),
            ..quick()
        };
        assert_eq!(scraped(with("vllm")).0, crate::prometheus::Preset::Vllm);
        assert!(scraped(with("off")).1.is_empty());
        let hosted = Quick {
            hosted: true,
            duration_s: None,
            ..quick()
        };
        assert!(scraped(hosted.clone()).1.is_empty());
        assert!(!scraped(Quick {
            server_metrics: Some("auto".into()),
            ..hosted
        })
        .1
        .is_empty());
        let https = Quick {
            url: "https://127.0.0.1:8443/v1/chat/completions".into(),
            ..quick()
        };
        assert!(scraped(https.clone()).1.is_empty());
        let e = Quick {
            server_metrics: Some("vllm".into()),
            ..https
        }
        .toml()
        .unwrap_err();
        assert_eq!(e.flag, "--server-metrics");
        let e = e.to_string();
        assert!(
            e.starts_with("--server-metrics ") && e.contains("https"),
            "{e}"
        );
        let e = with("prometheus").toml().unwrap_err().to_string();
        assert!(
            e.contains("give one of auto, vllm, sglang, tgi, off"),
            "{e}"
        );
    }

    #[test]
    fn lengths_datasets_and_a_url_path_come_from_flags() {
        use super::super::Lengths;
        let q = Quick {
            max_tokens: Some("64..256".into()),
            input_tokens: Some("512".into()),
            ..quick()
        };
        let config = Config::parse(q.toml().unwrap().as_bytes()).unwrap();
        let route = &config.routes[0];
        assert_eq!(
            route.output_tokens,
            Some(Lengths::Uniform { min: 64, max: 256 })
        );
        assert_eq!(route.input_tokens, Some(Lengths::Fixed { tokens: 512 }));
        let q = Quick {
            max_tokens: Some("normal:256,64,1024".into()),
            ..quick()
        };
        let config = Config::parse(q.toml().unwrap().as_bytes()).unwrap();
        assert_eq!(
            config.routes[0].output_tokens,
            Some(Lengths::Normal {
                mean: 256.0,
                sd: 64.0,
                min: None,
                max: 1024
            })
        );
        // A dataset and its format are the route's prompt file; its lengths may be its own.
        let q = Quick {
            dataset: Some("prompts.jsonl".into()),
            dataset_format: Some("sharegpt".into()),
            max_tokens: Some("dataset".into()),
            tokenizer: Some("tokenizer.json".into()),
            ..quick()
        };
        let config = Config::parse(q.toml().unwrap().as_bytes()).unwrap();
        assert_eq!(
            config.routes[0].prompt_file.as_deref(),
            Some("prompts.jsonl")
        );
        assert_eq!(config.routes[0].output_tokens, Some(Lengths::Dataset));
        assert_eq!(config.target.tokenizer.as_deref(), Some("tokenizer.json"));
        // A path other than an OpenAI route is the route, on the origin (not a base URL whose
        // models list would be asked at /v2/generate/v1/models).
        let q = Quick {
            url: "http://127.0.0.1:8000/v2/generate".into(),
            ..quick()
        };
        let config = Config::parse(q.toml().unwrap().as_bytes()).unwrap();
        assert_eq!(config.target.base_url, "http://127.0.0.1:8000");
        assert_eq!(config.routes[0].path, "/v2/generate");
        for (q, flag) in [
            (
                Quick {
                    max_tokens: Some("many".into()),
                    ..quick()
                },
                "--max-tokens",
            ),
            (
                Quick {
                    input_tokens: Some("dataset".into()),
                    ..quick()
                },
                "--input-tokens",
            ),
            (
                Quick {
                    max_tokens: Some("normal:1,2".into()),
                    ..quick()
                },
                "--max-tokens",
            ),
            (
                Quick {
                    max_tokens: Some("300..100".into()),
                    ..quick()
                },
                "--max-tokens",
            ),
            (
                Quick {
                    dataset_format: Some("csv".into()),
                    dataset: Some("p.txt".into()),
                    ..quick()
                },
                "--dataset-format",
            ),
        ] {
            let error = q.toml().unwrap_err().to_string();
            assert!(error.starts_with(flag), "{flag}: {error}");
        }
    }

    #[test]
    fn durations_read_as_users_write_them() {
        for (text, s) in [
            ("30s", 30.0),
            ("2m", 120.0),
            ("1h", 3600.0),
            ("1.5s", 1.5),
            ("500ms", 0.5),
            ("45", 45.0),
        ] {
            assert_eq!(parse_duration_s(text), Ok(s), "{text}");
        }
        for bad in ["", "s", "-3s", "0s", "3 days", "nan", "infs"] {
            assert!(parse_duration_s(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_self_hosted_quick_run_is_a_dev_run_in_seconds_with_the_pinned_timeout() {
        let text = quick().toml().unwrap();
        let config = Config::parse(text.as_bytes()).unwrap();
        assert_eq!(config.profile, super::super::Profile::Dev);
        assert_eq!(config.target.base_url, "http://127.0.0.1:8000");
        assert_eq!(config.routes[0].path, "/v1/chat/completions");
        assert_eq!(config.target.headers["X-Team"], "perf");
        assert!(config.target.stream);
        // 3 s warm-up (a tenth), 30 s measured, no cooldown; the timeout is the pin.
        let phases: Vec<(String, u64)> = config
            .schedule_params()
            .phases
            .iter()
            .map(|p| (p.name.clone(), p.duration_ns))
            .collect();
        assert_eq!(
            phases,
            [
                ("warmup".to_owned(), 3_000_000_000),
                ("measurement".to_owned(), 30_000_000_000)
            ]
        );
        assert_eq!(config.duration_ns(&pins::CLIENT_TIMEOUT_S), 30_000_000_000);
        assert!(config.warnings().is_empty(), "{:?}", config.warnings());
        // A base URL alone gets the default route; a path of its own is kept as the base's.
        let base = Quick {
            url: "http://10.0.0.5:8000/".into(),
            ..quick()
        };
        let config = Config::parse(base.toml().unwrap().as_bytes()).unwrap();
        assert_eq!(config.target.base_url, "http://10.0.0.5:8000");
        assert_eq!(config.routes[0].path, QUICK_PATH_DEFAULT);
        let completions = Quick {
            url: "https://gw.example/team/v1/completions".into(),
            ..quick()
        };
        let config = Config::parse(completions.toml().unwrap().as_bytes()).unwrap();
        assert_eq!(config.target.base_url, "https://gw.example/team");
        assert_eq!(config.routes[0].path, "/v1/completions");
    }

    #[test]
    fn a_hosted_quick_run_has_the_pinned_timeline_and_refuses_a_duration() {
        let hosted = Quick {
            hosted: true,
            duration_s: None,
            api_key_env: Some("OPENAI_API_KEY".into()),
            ..quick()
        };
        let config = Config::parse(hosted.toml().unwrap().as_bytes()).unwrap();
        assert_eq!(config.profile, super::super::Profile::Hosted);
        assert!(config.publishability().is_ok());
        assert_eq!(config.target.api_key_env.as_deref(), Some("OPENAI_API_KEY"));
        let error = Quick {
            hosted: true,
            ..quick()
        }
        .toml()
        .unwrap_err();
        assert_eq!(error.flag, "--duration");
        let error = error.to_string();
        assert!(
            error.contains("--duration") && error.contains("pinned"),
            "{error}"
        );
    }

    #[test]
    fn bad_flags_are_refused_naming_the_flag() {
        let cases = [
            (
                Quick {
                    duration_s: None,
                    ..quick()
                },
                "--duration",
            ),
            (
                Quick {
                    url: "127.0.0.1:8000".into(),
                    ..quick()
                },
                "--url",
            ),
            (
                Quick {
                    rate_rps: -1.0,
                    ..quick()
                },
                "--rate",
            ),
            (
                Quick {
                    model: String::new(),
                    ..quick()
                },
                "--model",
            ),
            (
                Quick {
                    headers: vec!["X-Team perf".into()],
                    ..quick()
                },
                "--header",
            ),
            (
                Quick {
                    headers: vec!["Authorization: Bearer sk-123".into()],
                    ..quick()
                },
                "--header",
            ),
            (
                Quick {
                    headers: vec!["X-Tenant: sk-proj-0123456789abcdef".into()],
                    ..quick()
                },
                "--header",
            ),
            (
                Quick {
                    secret_headers: vec!["X-Auth-Token: TOKEN".into()],
                    ..quick()
                },
                "--secret-header",
            ),
            (
                Quick {
                    secret_headers: vec!["X-Auth-Token=sk-0123".into()],
                    ..quick()
                },
                "--secret-header",
            ),
            (
                Quick {
                    arrival: "bursty".into(),
                    ..quick()
                },
                "--arrival",
            ),
        ];
        for (q, flag) in cases {
            let error = q.toml().unwrap_err().to_string();
            assert!(error.starts_with(flag), "{flag}: {error}");
        }
    }

    /// `--concurrency` writes a closed `[workload]` and no rate; `--turns` keeps the rate as the
    /// sessions'; flags at odds are refused naming them.
    #[test]
    fn workload_flags_write_the_workload_section() {
        let closed = Quick {
            rate_rps: f64::NAN,
            workload: QuickWorkload {
                users: Some(8),
                think_s: Some(0.5),
                ..Default::default()
            },
            ..quick()
        };
        let text = closed.toml().unwrap();
        assert!(
            text.contains("[workload]") && text.contains("users = 8"),
            "{text}"
        );
        assert!(
            text.contains("think_ms = 500.0") && !text.contains("rate_rps"),
            "{text}"
        );
        let with_rate = Quick {
            workload: closed.workload.clone(),
            ..quick()
        };
        assert!(with_rate
            .toml()
            .unwrap_err()
            .to_string()
            .contains("leave --rate out"));
        let semi = Quick {
            workload: QuickWorkload {
                turns: Some(3),
                ..Default::default()
            },
            ..quick()
        };
        assert!(semi.toml().unwrap().contains("model = \"semi-open\""));
        let history = |turns: Option<u32>, users: Option<u32>| Quick {
            workload: QuickWorkload {
                turns,
                users,
                history: true,
                ..Default::default()
            },
            ..quick()
        };
        assert!(history(Some(3), None)
            .toml()
            .unwrap()
            .contains("history = true"));
        for (turns, users) in [(None, None), (None, Some(2))] {
            let error = history(turns, users).toml().unwrap_err().to_string();
            assert!(error.contains("it belongs to --turns"), "{error}");
        }
        let both = Quick {
            rate_rps: f64::NAN,
            workload: QuickWorkload {
                users: Some(2),
                trace: Some("t.jsonl".into()),
                ..Default::default()
            },
            ..quick()
        };
        let error = both.toml().unwrap_err();
        assert_eq!(error.flag, "--concurrency");
        assert!(error.to_string().contains("--concurrency and --trace"));
        let think_alone = Quick {
            workload: QuickWorkload {
                think_s: Some(1.0),
                ..Default::default()
            },
            ..quick()
        };
        assert!(think_alone
            .toml()
            .unwrap_err()
            .to_string()
            .contains("belong to --concurrency"));
    }

    /// `--abandon` writes `[workload.abandon]`: the share, the delay in ms, the law when given;
    /// a malformed value is refused naming the flag, the part and the form.
    #[test]
    fn abandon_becomes_the_workloads_abandonment() {
        let with = |spec: &str| Quick {
            workload: QuickWorkload {
                abandon: Some(spec.into()),
                ..Default::default()
            },
            ..quick()
        };
        let config =
            Config::parse(with("0.25:800ms:exponential").toml().unwrap().as_bytes()).unwrap();
        let a = config.abandonment().unwrap();
        assert_eq!(a.share_ppm, 250_000);
        assert_eq!(a.law, crate::schedule::ThinkLaw::Exponential);
        for (spec, says) in [
            ("0.25", "without a `:` before the delay"),
            ("half:1s", "\"half\" is not a share"),
            ("0.5:soon", "\"soon\" is not a time"),
            ("0.5:1s:gamma", "\"gamma\" is neither"),
        ] {
            let error = with(spec).toml().unwrap_err().to_string();
            assert!(
                error.contains(says) && error.contains("--abandon") && error.contains("SHARE:TIME"),
                "{spec}: {error}"
            );
        }
        let error = with("1.5:1s").toml().unwrap_err().to_string();
        assert!(error.contains("--abandon"), "{error}");
    }

    /// `--shared-prefixes` writes `[workload.prefixes]` under any model, open included; a
    /// malformed pool is refused naming the flag and its form; one out of range names it too.
    #[test]
    fn shared_prefixes_become_the_workloads_pool() {
        let with = |spec: &str, turns: Option<u32>| Quick {
            workload: QuickWorkload {
                prefixes: Some(spec.into()),
                turns,
                ..Default::default()
            },
            ..quick()
        };
        let load = |q: Quick| {
            Config::parse(q.toml().map_err(|e| e.to_string())?.as_bytes())
                .map_err(|e| e.to_string())
        };
        let open = with("8x256:0.5", None);
        let config = load(open).unwrap();
        let pool = config.prefix_pool().unwrap();
        assert_eq!(
            (pool.entries, pool.tokens, pool.share_ppm),
            (8, vec![256], 500_000)
        );
        assert_eq!(
            config.workload(),
            crate::schedule::Workload::Open,
            "a pool is not a model"
        );
        let semi = load(with("2x64", Some(3))).unwrap();
        assert_eq!(semi.prefix_pool().unwrap().share_ppm, 1_000_000);
        for (spec, says) in [
            ("8", "\"8\" is without an `x`"),
            ("eightx256", "\"eight\" is not a whole number of entries"),
            ("8x256:half", "\"half\" is not a share"),
        ] {
            let error = with(spec, None).toml().unwrap_err().to_string();
            assert!(
                error.contains(says) && error.contains("ENTRIESxTOKENS"),
                "{spec}: {error}"
            );
        }
        let error = with("0x256", None).toml().unwrap_err().to_string();
        assert!(
            error.contains("--shared-prefixes") && error.contains("entries 0 is outside"),
            "{error}"
        );
    }
}
