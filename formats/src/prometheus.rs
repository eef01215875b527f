//! The server's own metrics (SPEC §2 "Server-side evidence"): a reader of the Prometheus text
//! exposition format (version 0.0.4, which vLLM, SGLang and TGI serve at `/metrics`), and the
//! presets that name, per engine, the series the recorder journals and the role each plays in
//! the analysis (queue, running, KV-cache use, preemptions, token and request counters, and the
//! first-token, inter-token and end-to-end histograms).
//!
//! Why our own reader rather than a crate: the recorder reads an answer a hostile or broken
//! server wrote, so the reader must be bounded (series, labels and line lengths capped, no
//! recursion, no regex engine) and never panic; it needs only the sample lines and the `# TYPE`
//! lines, and what it keeps is journaled as found, so a quirk of a dependency's model would
//! become a quirk of the record. The maintained-looking candidate, `prometheus-parse` (0.2.5,
//! last released 2023-12), brings regex, lazy_static, chrono and itertools into the recorder,
//! folds samples into its own histogram and summary model, and bounds nothing; the crate it was
//! lifted from matches a metric name with `\w+`, which cannot read the colons of vLLM's and
//! SGLang's names. About 200 lines of our own, fuzzed (`fuzz/`, target `metrics`) and tested on
//! vLLM's own answer (`formats/tests/data/`), cost less than that dependency.
//!
//! A preset's names are facts about each engine's code as of 2026-12 (vLLM 0.32, the SGLang and
//! TGI metric references); a name never changes role once released, and names are only added.

/// What the `# TYPE` line said of a series' family, which decides how the recorder journals it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SeriesKind {
    /// A value at the moment of the scrape: journaled as it is.
    Gauge,
    /// Only goes up (until the process restarts): journaled as its increase.
    Counter,
    /// A histogram's `_bucket`, `_sum` or `_count` sample: cumulative, journaled as its increase.
    Histogram,
    /// No `# TYPE` line (or `untyped`, or a summary's quantiles): journaled as it is.
    Untyped,
}

impl SeriesKind {
    /// Its code in a scrape record's series definition (formats/JOURNAL.md "7 scrape").
    pub const fn code(self) -> u8 {
        match self {
            SeriesKind::Untyped => 0,
            SeriesKind::Gauge => 1,
            SeriesKind::Counter => 2,
            SeriesKind::Histogram => 3,
        }
    }
    /// The kind with this code.
    pub fn from_code(code: u8) -> Option<SeriesKind> {
        [
            SeriesKind::Untyped,
            SeriesKind::Gauge,
            SeriesKind::Counter,
            SeriesKind::Histogram,
        ]
        .into_iter()
        .find(|k| k.code() == code)
    }
    /// Whether the journal carries its increases rather than its values.
    pub fn cumulative(self) -> bool {
        matches!(self, SeriesKind::Counter | SeriesKind::Histogram)
    }
}

/// One sample line of an answer.
#[derive(Clone, Debug, PartialEq)]
pub struct Exposed {
    /// The sample's name as written (`vllm:e2e_request_latency_seconds_bucket`).
    pub name: String,
    /// Its family (`vllm:e2e_request_latency_seconds`): the name less a histogram's or a
    /// counter's suffix where a `# TYPE` line names the shorter family.
    pub family: String,
    /// Its labels, in the order written.
    pub labels: Vec<(String, String)>,
    /// What its family's `# TYPE` line said.
    pub kind: SeriesKind,
    /// Its value (`NaN` and the infinities as written).
    pub value: f64,
}

/// What an answer held: the samples of the selected families, and what could not be read.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Exposition {
    /// The selected samples, in the answer's order.
    pub samples: Vec<Exposed>,
    /// Sample lines of any family that were read (selected or not).
    pub lines_read: usize,
    /// Lines that are not Prometheus text, and the first of them (1-based line, why).
    pub malformed: usize,
    /// The first malformed line: its number (from 1) and what is wrong with it.
    pub first_malformed: Option<(usize, Malformed)>,
    /// Selected samples left out because the answer held more than [`SAMPLES_MAX`].
    pub over_limit: usize,
}

/// The most selected samples one answer contributes (a vLLM answer has about 400 in all).
pub const SAMPLES_MAX: usize = 4096;
/// The most bytes of names and labels the selected samples of one answer may hold (a quarter
/// of a journal record), so that a scrape's record stays well inside a record's limit whatever
/// a server exposes.
pub const KEPT_BYTES_MAX: usize = crate::journal::RECORD_BYTES_MAX as usize / 4;
/// The most labels one sample may carry (vLLM's `cache_config_info` carries 37).
pub const LABELS_MAX: usize = 64;
/// The longest name, label name or label value read.
pub const TEXT_MAX: usize = 1024;

/// Reads a Prometheus text answer's body, keeping the samples whose family (or own name)
/// `select` accepts. Never fails: a line it cannot read is counted and the first one kept.
pub fn parse(body: &str, select: impl Fn(&str) -> bool) -> Exposition {
    let mut types: Vec<(String, SeriesKind)> = Vec::new();
    let mut out = Exposition::default();
    let mut kept_bytes = 0;
    for (number, line) in body.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        if let Some(comment) = line.strip_prefix('#') {
            let mut words = comment.split_whitespace();
            if words.next() == Some("TYPE") {
                if let (Some(name), Some(kind)) = (words.next(), words.next()) {
                    let kind = match kind {
                        "gauge" => SeriesKind::Gauge,
                        "counter" => SeriesKind::Counter,
                        "histogram" => SeriesKind::Histogram,
                        _ => SeriesKind::Untyped,
                    };
                    if types.len() < SAMPLES_MAX && valid_name(name) {
                        types.push((name.to_owned(), kind));
                    }
                }
            }
            continue;
        }
        match sample(line) {
            Err(why) => {
                out.malformed += 1;
                if out.first_malformed.is_none() {
                    out.first_malformed = Some((number + 1, why));
                }
            }
            Ok((name, labels, value)) => {
                out.lines_read += 1;
                let (family, kind) = family_of(name, &types);
                if name.ends_with("_created") && kind != SeriesKind::Gauge {
                    // prometheus_client's creation time of a counter or histogram: a timestamp,
                    // not a measurement.
                    continue;
                }
                if !(select(family) || select(name)) {
                    continue;
                }
                let bytes = name.len()
                    + family.len()
                    + labels.iter().map(|(k, v)| k.len() + v.len()).sum::<usize>();
                if out.samples.len() >= SAMPLES_MAX || kept_bytes + bytes > KEPT_BYTES_MAX {
                    out.over_limit += 1;
                    continue;
                }
                kept_bytes += bytes;
                out.samples.push(Exposed {
                    name: name.to_owned(),
                    family: family.to_owned(),
                    labels,
                    kind,
                    value,
                });
            }
        }
    }
    out
}

/// A sample's family and kind: its own `# TYPE`, else the family its suffix belongs to.
fn family_of<'a>(name: &'a str, types: &'a [(String, SeriesKind)]) -> (&'a str, SeriesKind) {
    let typed = |n: &str| types.iter().find(|(t, _)| t == n).map(|(_, k)| *k);
    if let Some(kind) = typed(name) {
        // A counter's family is its name less `_total`, however its `# TYPE` line spells it
        // (prometheus_client writes the full name in 0.0.4 text, the short one in OpenMetrics).
        let family = match kind {
            SeriesKind::Counter => name.strip_suffix("_total").unwrap_or(name),
            _ => name,
        };
        return (family, kind);
    }
    for suffix in ["_bucket", "_sum", "_count", "_total", "_created"] {
        if let Some(base) = name.strip_suffix(suffix) {
            match (suffix, typed(base)) {
                ("_total", Some(SeriesKind::Counter)) => return (base, SeriesKind::Counter),
                ("_bucket" | "_sum" | "_count", Some(SeriesKind::Histogram)) => {
                    return (base, SeriesKind::Histogram)
                }
                // A summary's sum and count (typed `summary`, read as untyped) still only go up.
                ("_sum" | "_count", Some(SeriesKind::Untyped)) => {
                    return (base, SeriesKind::Counter)
                }
                ("_created", Some(kind)) => return (base, kind),
                _ => {}
            }
        }
    }
    (name, SeriesKind::Untyped)
}

/// Whether `name` is a metric name: `[a-zA-Z_:][a-zA-Z0-9_:]*`, at most [`TEXT_MAX`] bytes.
pub fn valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_' || c == ':')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
        && name.len() <= TEXT_MAX
}

/// What is wrong with a line that is not Prometheus text. A part quoted is cut to 60 bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Malformed {
    /// A name and nothing after it.
    NameAlone,
    /// The name is not a metric name.
    Name {
        /// The name.
        text: String,
    },
    /// No value after the name and its labels.
    NoValue,
    /// The value is not a number.
    Value {
        /// The value.
        text: String,
    },
    /// The timestamp is not an integer.
    Timestamp {
        /// The timestamp.
        text: String,
    },
    /// More than a value and a timestamp after the name.
    Trailing,
    /// A label with no `=`.
    LabelWithoutEquals,
    /// A label's name is not a label name.
    LabelName {
        /// The name.
        text: String,
    },
    /// A label value not in quotes.
    UnquotedValue,
    /// A label value with no closing quote.
    UnclosedValue,
    /// A label value with an escape other than `\n`, `\\` and `\"`.
    UnknownEscape,
    /// A label value over [`TEXT_MAX`] bytes.
    LongValue,
    /// More than [`LABELS_MAX`] labels.
    TooManyLabels,
    /// Labels not separated by `,`.
    NoComma,
}

impl std::fmt::Display for Malformed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Malformed::NameAlone => f.write_str("a name with no value"),
            Malformed::Name { text } => write!(f, "{text:?} is not a metric name"),
            Malformed::NoValue => f.write_str("no value"),
            Malformed::Value { text } => write!(f, "{text:?} is not a number"),
            Malformed::Timestamp { text } => write!(f, "{text:?} is not a timestamp"),
            Malformed::Trailing => f.write_str("more than a value and a timestamp after the name"),
            Malformed::LabelWithoutEquals => f.write_str("a label with no '='"),
            Malformed::LabelName { text } => write!(f, "{text:?} is not a label name"),
            Malformed::UnquotedValue => f.write_str("a label value not in quotes"),
            Malformed::UnclosedValue => f.write_str("a label value with no closing quote"),
            Malformed::UnknownEscape => f.write_str("a label value with an unknown escape"),
            Malformed::LongValue => write!(f, "a label value over {TEXT_MAX} bytes"),
            Malformed::TooManyLabels => write!(f, "more than {LABELS_MAX} labels"),
            Malformed::NoComma => f.write_str("labels not separated by ','"),
        }
    }
}

/// A sample's labels, in the order written.
type Labels = Vec<(String, String)>;

type Sample<'a> = (&'a str, Labels, f64);

/// One sample line: `name{label="value",...} value [timestamp]`.
fn sample(line: &str) -> Result<Sample<'_>, Malformed> {
    let end = line
        .find(|c: char| c == '{' || c.is_whitespace())
        .ok_or(Malformed::NameAlone)?;
    let name = &line[..end];
    if !valid_name(name) {
        return Err(Malformed::Name {
            text: cut(name).to_owned(),
        });
    }
    let mut rest = &line[end..];
    let mut labels = Vec::new();
    if let Some(inner) = rest.strip_prefix('{') {
        let (read, after) = label_set(inner)?;
        labels = read;
        rest = after;
    }
    let mut words = rest.split_whitespace();
    let value = words.next().ok_or(Malformed::NoValue)?;
    let value = match value {
        "+Inf" | "Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        "NaN" => f64::NAN,
        v => v.parse::<f64>().map_err(|_| Malformed::Value {
            text: cut(v).to_owned(),
        })?,
    };
    if let Some(stamp) = words.next() {
        stamp.parse::<i64>().map_err(|_| Malformed::Timestamp {
            text: cut(stamp).to_owned(),
        })?;
    }
    if words.next().is_some() {
        return Err(Malformed::Trailing);
    }
    Ok((name, labels, value))
}

/// The labels after `{`, and what follows the closing `}`.
fn label_set(mut text: &str) -> Result<(Labels, &str), Malformed> {
    let mut labels = Vec::new();
    loop {
        text = text.trim_start();
        if let Some(after) = text.strip_prefix('}') {
            return Ok((labels, after));
        }
        let eq = text.find('=').ok_or(Malformed::LabelWithoutEquals)?;
        let key = text[..eq].trim();
        if !valid_name(key) || key.contains(':') {
            return Err(Malformed::LabelName {
                text: cut(key).to_owned(),
            });
        }
        let after = text[eq + 1..].trim_start();
        let after = after.strip_prefix('"').ok_or(Malformed::UnquotedValue)?;
        let mut value = String::new();
        let mut chars = after.char_indices();
        let close = loop {
            match chars.next() {
                None => return Err(Malformed::UnclosedValue),
                Some((i, '"')) => break i,
                Some((_, '\\')) => match chars.next() {
                    Some((_, 'n')) => value.push('\n'),
                    Some((_, c @ ('\\' | '"'))) => value.push(c),
                    _ => return Err(Malformed::UnknownEscape),
                },
                Some((_, c)) => value.push(c),
            }
            if value.len() > TEXT_MAX {
                return Err(Malformed::LongValue);
            }
        };
        if labels.len() == LABELS_MAX {
            return Err(Malformed::TooManyLabels);
        }
        labels.push((key.to_owned(), value));
        text = after[close + 1..].trim_start();
        if let Some(after) = text.strip_prefix(',') {
            text = after;
        } else if !text.starts_with('}') {
            return Err(Malformed::NoComma);
        }
    }
}

fn cut(text: &str) -> &str {
    let mut end = text.len().min(60);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// What a series tells the analysis.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Role {
    /// Requests waiting to be scheduled (a gauge).
    Queue,
    /// Requests being served (a gauge).
    Running,
    /// KV-cache use, a fraction of the cache (a gauge).
    KvCache,
    /// Requests preempted (a counter).
    Preemptions,
    /// Requests finished, any reason (a counter).
    Requests,
    /// Prompt tokens processed (a counter).
    PromptTokens,
    /// Tokens generated (a counter).
    GenerationTokens,
    /// Time to first token, seconds (a histogram).
    FirstToken,
    /// Time between output tokens, seconds (a histogram).
    InterToken,
    /// End-to-end request latency, seconds (a histogram).
    EndToEnd,
    /// Prompt tokens looked up in the prefix cache (a counter; vLLM's `prefix_cache_queries`).
    PrefixQueries,
    /// Of those, tokens the prefix cache held (a counter; vLLM's `prefix_cache_hits`; SGLang's
    /// `cached_tokens`, over its prompt tokens, every `cache_source` summed).
    PrefixHits,
    /// HTTP requests the server's front end answered, by handler, method and status class (a
    /// counter; the FastAPI instrumentator's `http_requests_total` that vLLM serves): with the
    /// finished count, the requests it took and never finished (a client's close, an abort).
    Received,
    /// The KV cache's configuration, said in an info gauge's labels (vLLM's
    /// `cache_config_info`): its `block_size`, the whole blocks a prefix cache holds.
    CacheConfig,
}

impl Role {
    /// Its name in reports and exports.
    pub fn name(self) -> &'static str {
        match self {
            Role::Queue => "queue",
            Role::Running => "running",
            Role::KvCache => "kv-cache",
            Role::Preemptions => "preemptions",
            Role::Requests => "requests",
            Role::PromptTokens => "prompt-tokens",
            Role::GenerationTokens => "generation-tokens",
            Role::FirstToken => "first-token",
            Role::InterToken => "inter-token",
            Role::EndToEnd => "end-to-end",
            Role::PrefixQueries => "prefix-cache-queries",
            Role::PrefixHits => "prefix-cache-hits",
            Role::Received => "http-requests",
            Role::CacheConfig => "cache-config",
        }
    }
}

/// `server_metrics.preset`: whose names are journaled.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Preset {
    /// Every engine's names (they do not collide): the default.
    #[default]
    Auto,
    /// vLLM's `vllm:` series (the mock serves the same names).
    Vllm,
    /// SGLang's `sglang:` series.
    Sglang,
    /// Text Generation Inference's `tgi_` series.
    Tgi,
    /// None: only `server_metrics.metrics` is journaled.
    None,
}

/// The preset table: (engine, role, family name). A role may have several names in one engine
/// (vLLM renamed its KV-cache gauge and its inter-token histogram; each name is read).
pub const PRESET_NAMES: &[(Preset, Role, &str)] = &[
    (Preset::Vllm, Role::Queue, "vllm:num_requests_waiting"),
    (
        Preset::Vllm,
        Role::PrefixQueries,
        "vllm:prefix_cache_queries",
    ),
    (Preset::Vllm, Role::PrefixHits, "vllm:prefix_cache_hits"),
    (Preset::Vllm, Role::Received, "http_requests"),
    (Preset::Vllm, Role::CacheConfig, "vllm:cache_config_info"),
    (Preset::Vllm, Role::Running, "vllm:num_requests_running"),
    (Preset::Vllm, Role::KvCache, "vllm:kv_cache_usage_perc"),
    (Preset::Vllm, Role::KvCache, "vllm:gpu_cache_usage_perc"),
    (Preset::Vllm, Role::Preemptions, "vllm:num_preemptions"),
    (Preset::Vllm, Role::Requests, "vllm:request_success"),
    (Preset::Vllm, Role::PromptTokens, "vllm:prompt_tokens"),
    (
        Preset::Vllm,
        Role::GenerationTokens,
        "vllm:generation_tokens",
    ),
    (
        Preset::Vllm,
        Role::FirstToken,
        "vllm:time_to_first_token_seconds",
    ),
    (
        Preset::Vllm,
        Role::InterToken,
        "vllm:inter_token_latency_seconds",
    ),
    (
        Preset::Vllm,
        Role::InterToken,
        "vllm:time_per_output_token_seconds",
    ),
    (
        Preset::Vllm,
        Role::EndToEnd,
        "vllm:e2e_request_latency_seconds",
    ),
    (Preset::Sglang, Role::Queue, "sglang:num_queue_reqs"),
    (Preset::Sglang, Role::Running, "sglang:num_running_reqs"),
    (Preset::Sglang, Role::KvCache, "sglang:token_usage"),
    (Preset::Sglang, Role::Requests, "sglang:num_requests"),
    (Preset::Sglang, Role::PromptTokens, "sglang:prompt_tokens"),
    (Preset::Sglang, Role::PrefixHits, "sglang:cached_tokens"),
    (
        Preset::Sglang,
        Role::GenerationTokens,
        "sglang:generation_tokens",
    ),
    (
        Preset::Sglang,
        Role::FirstToken,
        "sglang:time_to_first_token_seconds",
    ),
    (
        Preset::Sglang,
        Role::InterToken,
        "sglang:inter_token_latency_seconds",
    ),
    (
        Preset::Sglang,
        Role::InterToken,
        "sglang:time_per_output_token_seconds",
    ),
    (
        Preset::Sglang,
        Role::EndToEnd,
        "sglang:e2e_request_latency_seconds",
    ),
    (Preset::Tgi, Role::Queue, "tgi_queue_size"),
    (Preset::Tgi, Role::Running, "tgi_batch_current_size"),
    (Preset::Tgi, Role::Requests, "tgi_request_success"),
    (
        Preset::Tgi,
        Role::InterToken,
        "tgi_request_mean_time_per_token_duration",
    ),
    (Preset::Tgi, Role::EndToEnd, "tgi_request_duration"),
];

impl Preset {
    /// Its name in a configuration file.
    pub fn name(self) -> &'static str {
        match self {
            Preset::Auto => "auto",
            Preset::Vllm => "vllm",
            Preset::Sglang => "sglang",
            Preset::Tgi => "tgi",
            Preset::None => "none",
        }
    }

    /// Whether this preset journals the family `name`.
    pub fn selects(self, name: &str) -> bool {
        match self {
            Preset::None => false,
            Preset::Auto => PRESET_NAMES.iter().any(|(_, _, n)| *n == name),
            own => PRESET_NAMES.iter().any(|(p, _, n)| *p == own && *n == name),
        }
    }
}

/// The role a journaled family plays, whichever preset named it; `None` for a family named
/// only by `server_metrics.metrics` (journaled, exported, not read by the analysis).
pub fn role_of(family: &str) -> Option<Role> {
    PRESET_NAMES
        .iter()
        .find(|(_, _, n)| *n == family)
        .map(|(_, r, _)| *r)
}

#[cfg(test)]
mod tests {
    use super::*;

    const VLLM: &str = "\
# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine=\"0\",model_name=\"tiny\"} 3.0
# TYPE vllm:request_success_total counter
vllm:request_success_total{engine=\"0\",finished_reason=\"stop\",model_name=\"tiny\"} 12.0
vllm:request_success_total{engine=\"0\",finished_reason=\"length\",model_name=\"tiny\"} 30.0
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{engine=\"0\",le=\"0.01\",model_name=\"tiny\"} 4.0
vllm:time_to_first_token_seconds_bucket{engine=\"0\",le=\"+Inf\",model_name=\"tiny\"} 42.0
vllm:time_to_first_token_seconds_count{engine=\"0\",model_name=\"tiny\"} 42.0
vllm:time_to_first_token_seconds_sum{engine=\"0\",model_name=\"tiny\"} 0.735
vllm:time_to_first_token_seconds_created{engine=\"0\",model_name=\"tiny\"} 1.7e9
# TYPE python_gc_objects_collected_total counter
python_gc_objects_collected_total{generation=\"0\"} 1234.0
";

    #[test]
    fn vllm_answer_keeps_the_preset_families_with_their_kinds() {
        let read = parse(VLLM, |n| Preset::Vllm.selects(n));
        assert_eq!(read.malformed, 0, "{:?}", read.first_malformed);
        assert_eq!(read.lines_read, 9);
        let got: Vec<(&str, &str, SeriesKind, f64)> = read
            .samples
            .iter()
            .map(|s| (s.name.as_str(), s.family.as_str(), s.kind, s.value))
            .collect();
        let ttft = "vllm:time_to_first_token_seconds";
        assert_eq!(
            got,
            [
                (
                    "vllm:num_requests_waiting",
                    "vllm:num_requests_waiting",
                    SeriesKind::Gauge,
                    3.0
                ),
                (
                    "vllm:request_success_total",
                    "vllm:request_success",
                    SeriesKind::Counter,
                    12.0
                ),
                (
                    "vllm:request_success_total",
                    "vllm:request_success",
                    SeriesKind::Counter,
                    30.0
                ),
                (
                    "vllm:time_to_first_token_seconds_bucket",
                    ttft,
                    SeriesKind::Histogram,
                    4.0
                ),
                (
                    "vllm:time_to_first_token_seconds_bucket",
                    ttft,
                    SeriesKind::Histogram,
                    42.0
                ),
                (
                    "vllm:time_to_first_token_seconds_count",
                    ttft,
                    SeriesKind::Histogram,
                    42.0
                ),
                (
                    "vllm:time_to_first_token_seconds_sum",
                    ttft,
                    SeriesKind::Histogram,
                    0.735
                ),
            ]
        );
        assert_eq!(
            read.samples[4].labels[1],
            ("le".to_owned(), "+Inf".to_owned())
        );
        assert_eq!(role_of(ttft), Some(Role::FirstToken));
        assert_eq!(role_of("python_gc_objects_collected"), None);
    }

    #[test]
    fn labels_unescape_and_bad_lines_are_counted_not_fatal() {
        let body = "a{x=\"q\\\"uo\\\\te\\n\"} 1 1700000000000\n\
                    b{x=\"unclosed} 2\n\
                    c 3 4 5\n\
                    9bad 1\n\
                    d{x=\"1\" y=\"2\"} 1\n\
                    e NotANumber\n\
                    f{} +Inf\n";
        let read = parse(body, |_| true);
        assert_eq!(read.malformed, 5, "{read:?}");
        assert_eq!(read.first_malformed, Some((2, Malformed::UnclosedValue)));
        assert_eq!(read.samples.len(), 2);
        assert_eq!(
            read.samples[0].labels,
            [("x".to_owned(), "q\"uo\\te\n".to_owned())]
        );
        assert_eq!(read.samples[1].value, f64::INFINITY);
    }

    #[test]
    fn garbage_and_hostile_answers_are_bounded() {
        let garbage: String = (0..10_000u32)
            .map(|i| char::from_u32(0x20 + (i * 7919) % 0x5f).unwrap())
            .collect();
        let read = parse(&garbage, |_| true);
        assert!(read.samples.len() <= 1, "{read:?}");
        let many: String = (0..SAMPLES_MAX + 10)
            .map(|i| format!("m{{i=\"{i}\"}} 1\n"))
            .collect();
        let read = parse(&many, |_| true);
        assert_eq!((read.samples.len(), read.over_limit), (SAMPLES_MAX, 10));
        let labels: String = (0..=LABELS_MAX).map(|i| format!("l{i}=\"v\",")).collect();
        let read = parse(&format!("m{{{labels}}} 1\n"), |_| true);
        assert_eq!(read.malformed, 1);
        assert_eq!(read.first_malformed, Some((1, Malformed::TooManyLabels)));
        let long = format!("m{{x=\"{}\"}} 1\n", "v".repeat(TEXT_MAX + 1));
        assert_eq!(
            parse(&long, |_| true).first_malformed,
            Some((1, Malformed::LongValue))
        );
        let wide: String = (0..SAMPLES_MAX)
            .map(|i| format!("m{{i=\"{i}\",v=\"{}\"}} 1\n", "v".repeat(TEXT_MAX - 8)))
            .collect();
        let read = parse(&wide, |_| true);
        let kept: usize = read.samples.iter().map(|s| s.labels[1].1.len()).sum();
        assert!(kept <= KEPT_BYTES_MAX && read.over_limit > 0, "{kept}");
    }

    /// vLLM 0.32's own answer (the CPU build and the tiny model of ../shared/real-targets, after
    /// a run; saved with `curl -s 127.0.0.1:8101/metrics`) and the mock's: every line reads,
    /// and the vLLM preset finds every role the analysis reads (its prefix cache's two counters
    /// and its front end's answered requests among them, and its cache configuration, which
    /// says the block) but preemptions' histogram.
    #[test]
    fn real_answers_read_whole_and_give_every_role() {
        for (answer, roles) in [
            (include_str!("../tests/data/vllm-0.32.metrics.txt"), 14),
            (include_str!("../tests/data/mock.metrics.txt"), 9),
        ] {
            let read = parse(answer, |n| Preset::Auto.selects(n));
            assert_eq!(read.malformed, 0, "{:?}", read.first_malformed);
            assert_eq!(read.over_limit, 0);
            let found: std::collections::BTreeSet<Role> = read
                .samples
                .iter()
                .filter_map(|s| role_of(&s.family))
                .collect();
            assert_eq!(found.len(), roles, "{found:?}");
            let ttft = read
                .samples
                .iter()
                .filter(|s| s.name == "vllm:time_to_first_token_seconds_bucket")
                .count();
            assert!(ttft > 10, "{ttft} first-token buckets");
        }
    }

    #[test]
    fn presets_select_their_own_names_and_auto_all() {
        assert!(Preset::Auto.selects("tgi_queue_size"));
        assert!(Preset::Auto.selects("vllm:kv_cache_usage_perc"));
        assert!(!Preset::Vllm.selects("sglang:num_queue_reqs"));
        assert!(!Preset::None.selects("vllm:num_requests_waiting"));
        for (_, _, name) in PRESET_NAMES {
            assert!(valid_name(name), "{name}");
        }
    }
}
