//! The mock's configuration (TOML, unknown keys refused). Every field has a default, so an empty
//! file is a valid mock.
//!
//! ```toml
//! name = "replica-0"         # reported in X-Percentes-Replica and /metrics
//! seed = 1
//! model = "mock"
//!
//! [timing]
//! ttft = { kind = "log-normal", median_ms = 120.0, sigma = 0.25 }   # prefill, at one running sequence
//! token_gap = { kind = "log-normal", median_ms = 4.0, sigma = 0.2 }  # each later token
//! min_output_tokens = 16     # ignore_eos = false: output length uniform in [this, max_tokens]
//! head = "with-first-token"  # or "on-arrival": a stream's head written as the request arrives
//!
//! [capacity]
//! max_num_seqs = 24          # sequences decoding at once; the rest wait in a FIFO queue
//! slowdown_per_running = 0.01  # every duration x (1 + this x (running - 1))
//!
//! [[faults]]                 # scheduled from the mock's start; more can be armed by POST /admin/faults
//! mode = "stall"
//! at_ms = 30000
//! duration_ms = 10000
//! ```

use serde::{Deserialize, Serialize};

use crate::error::{Error, ErrorKind};
use crate::timing::Distribution;

/// The longest mock configuration file read (1 MiB, as percentes' own configurations).
const MOCK_CONFIG_BYTES_MAX: u64 = 1 << 20;

/// A mock configuration file's text: a regular file (a device or FIFO is refused unopened, so
/// the read neither grows without bound nor waits for a writer) of at most
/// [`MOCK_CONFIG_BYTES_MAX`] bytes.
fn read_config_file(path: &std::path::Path) -> std::io::Result<String> {
    use std::io::{Error, ErrorKind, Read};
    if !std::fs::metadata(path)?.is_file() {
        return Err(Error::new(
            ErrorKind::InvalidInput,
            "it is not a regular file",
        ));
    }
    let mut text = String::new();
    std::fs::File::open(path)?
        .take(MOCK_CONFIG_BYTES_MAX + 1)
        .read_to_string(&mut text)?;
    if text.len() as u64 > MOCK_CONFIG_BYTES_MAX {
        return Err(Error::new(
            ErrorKind::InvalidData,
            format!(
                "it is over the limit of {MOCK_CONFIG_BYTES_MAX} bytes for a mock configuration"
            ),
        ));
    }
    Ok(text)
}

/// Most faults one config may schedule.
pub const FAULTS_MAX: usize = 256;

#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
/// A mock replica's configuration (`percentes mock --config`).
pub struct MockConfig {
    #[serde(default = "default_name")]
    /// The replica's name: it answers in the `x-replica` header.
    pub name: String,
    #[serde(default)]
    /// Seed of the timing model's draws.
    pub seed: u64,
    #[serde(default = "default_model")]
    /// The model name it serves.
    pub model: String,
    #[serde(default)]
    /// How long a token takes.
    pub timing: Timing,
    #[serde(default)]
    /// How many sequences run at once, and how they slow each other.
    pub capacity: Capacity,
    #[serde(default)]
    /// The document store's lookups (cached and from the store).
    pub store: Store,
    #[serde(default)]
    /// Faults armed at start, with their times.
    pub faults: Vec<FaultPlan>,
}

/// `[store]`: the document lookups (`POST /v1/store/cached`, `/v1/store/uncached`). A cached
/// lookup answers from the replica's cache; an uncached one reads the store behind it, which a
/// `store-outage` takes away (503, explicitly). seeds/004's store-outage and noisy-neighbour
/// scenarios use them as cheap, protected work beside the heavy generation routes.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Store {
    /// A cache hit's service time.
    pub cache_ms: f64,
    /// A store read's service time.
    pub store_ms: f64,
}

impl Default for Store {
    fn default() -> Store {
        Store {
            cache_ms: 2.0,
            store_ms: 40.0,
        }
    }
}

fn default_name() -> String {
    "replica-0".into()
}
fn default_model() -> String {
    "mock".into()
}

#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
/// The timing model.
pub struct Timing {
    /// Time to the first token.
    pub ttft: Distribution,
    /// Time between tokens.
    pub token_gap: Distribution,
    #[serde(default = "default_min_output")]
    /// Fewest output tokens a completion has.
    pub min_output_tokens: u32,
    /// A reasoning model: the first this many tokens of every Chat Completions or Responses API
    /// answer are reasoning (`delta.reasoning_content`, `response.reasoning_text.delta`); 0 for
    /// a model that does not reason.
    #[serde(default)]
    pub reasoning_tokens: u32,
    /// Time between reasoning tokens (default: `token_gap`).
    #[serde(default)]
    pub reasoning_gap: Option<Distribution>,
    /// The chunk field reasoning streams in: `reasoning_content` (DeepSeek, SGLang, vLLM before
    /// 0.10, the default) or `reasoning` (vLLM since).
    #[serde(default)]
    pub reasoning_field: ReasoningField,
    /// When a stream's response head is written: `with-first-token` (the default, as the mock
    /// always has) or `on-arrival` (as vLLM does: the head as it accepts the request).
    #[serde(default)]
    pub head: HeadTiming,
}

/// When the mock writes a stream's response head.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum HeadTiming {
    /// With the first token, in the same write.
    #[default]
    WithFirstToken,
    /// As the request is accepted, before its time to first token.
    OnArrival,
}

/// The Chat Completions field a reasoning delta is written in.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReasoningField {
    /// `delta.reasoning_content`.
    #[default]
    ReasoningContent,
    /// `delta.reasoning`.
    Reasoning,
}

impl ReasoningField {
    /// The field's name.
    pub fn name(self) -> &'static str {
        match self {
            ReasoningField::ReasoningContent => "reasoning_content",
            ReasoningField::Reasoning => "reasoning",
        }
    }
}

fn default_min_output() -> u32 {
    16
}

impl Default for Timing {
    fn default() -> Timing {
        Timing {
            ttft: Distribution::LogNormal {
                median_ms: 120.0,
                sigma: 0.25,
            },
            token_gap: Distribution::LogNormal {
                median_ms: 4.0,
                sigma: 0.2,
            },
            min_output_tokens: default_min_output(),
            reasoning_tokens: 0,
            reasoning_gap: None,
            reasoning_field: ReasoningField::default(),
            head: HeadTiming::default(),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
/// The capacity model.
pub struct Capacity {
    /// Sequences running at once; the rest wait in FIFO order (vLLM's `max_num_seqs`).
    pub max_num_seqs: u32,
    /// Per-token slowdown for each running sequence, as a fraction.
    pub slowdown_per_running: f64,
    /// Under a `cpu-throttle`, every duration is this many times longer.
    #[serde(default = "default_throttle_factor")]
    pub throttle_factor: f64,
}

fn default_throttle_factor() -> f64 {
    4.0
}

impl Default for Capacity {
    fn default() -> Capacity {
        Capacity {
            max_num_seqs: 24,
            slowdown_per_running: 0.01,
            throttle_factor: default_throttle_factor(),
        }
    }
}

/// The ways the mock can fail on purpose. The first five are service faults; the rest are
/// hostile transport behaviours for testing client robustness.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum FaultMode {
    /// All emission frozen; at expiry the held tokens flush, staggered over a few ms.
    Stall,
    /// New requests get 500.
    Error,
    /// In-flight connections are reset (RST) at fire; new admissions are reset after `after_tokens`.
    StreamAbort,
    /// Captured requests get no bytes, no FIN and no RST, ever.
    SilentHang,
    /// 503 for new requests and /health (a replica reloading weights).
    SlowReload,
    /// A status line that is not HTTP: `HTTP/1.1 2x0 OK`.
    MalformedStatusLine,
    /// A 1 MiB response header.
    OversizedHeaders,
    /// A chunk-size line that is not hexadecimal.
    BrokenChunked,
    /// A `data:` field that is not a JSON chunk, and no `[DONE]`.
    InvalidSse,
    /// Invalid UTF-8 inside a `data:` field.
    InvalidUtf8,
    /// FIN after `after_tokens` tokens, without the terminating chunk.
    PrematureClose,
    /// The response head trickled one byte every 100 ms.
    SlowlorisHeaders,
    /// A well-formed 200 whose content fails verification: another model's name, stale text.
    IncorrectSuccess,
    /// The document store behind the replica is gone: cached lookups still answer from the
    /// cache, uncached lookups fail with 503 (explicitly, type `dependency_unavailable`);
    /// generation is unaffected.
    StoreOutage,
    /// A noisy neighbour throttles the replica's CPU: every duration is `throttle_factor` times
    /// longer, and new generation requests are shed with 503 while any wait for a slot; lookups
    /// (cheap work) still answer.
    CpuThrottle,
}

impl FaultMode {
    /// Its name in the admin API and in configurations.
    pub fn name(self) -> &'static str {
        match self {
            FaultMode::Stall => "stall",
            FaultMode::Error => "error",
            FaultMode::StreamAbort => "stream-abort",
            FaultMode::SilentHang => "silent-hang",
            FaultMode::SlowReload => "slow-reload",
            FaultMode::MalformedStatusLine => "malformed-status-line",
            FaultMode::OversizedHeaders => "oversized-headers",
            FaultMode::BrokenChunked => "broken-chunked",
            FaultMode::InvalidSse => "invalid-sse",
            FaultMode::InvalidUtf8 => "invalid-utf8",
            FaultMode::PrematureClose => "premature-close",
            FaultMode::SlowlorisHeaders => "slowloris-headers",
            FaultMode::IncorrectSuccess => "incorrect-success",
            FaultMode::StoreOutage => "store-outage",
            FaultMode::CpuThrottle => "cpu-throttle",
        }
    }
}

/// A fault, from `at_ms` after the mock's start (or after arming) for `duration_ms`.
#[derive(Clone, Copy, Debug, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct FaultPlan {
    /// The mode.
    pub mode: FaultMode,
    #[serde(default)]
    /// When it fires, ms after start.
    pub at_ms: u64,
    /// How long it lasts, ms (0: until disarmed).
    pub duration_ms: u64,
    /// stream-abort and premature-close: tokens sent before the transport fails.
    #[serde(default = "default_after_tokens")]
    pub after_tokens: u32,
}

fn default_after_tokens() -> u32 {
    3
}

impl MockConfig {
    /// The configuration `percentes mock` runs: the file at `path` (or the default), renamed
    /// to `name` when given, with a slow reload of `slow_reload_ms` armed at start when given,
    /// validated. The error names the file.
    pub fn for_flags(
        path: Option<&std::path::Path>,
        name: Option<String>,
        slow_reload_ms: Option<u64>,
    ) -> Result<MockConfig, Error> {
        let mut config = match path {
            None => MockConfig::default(),
            Some(path) => {
                let text = read_config_file(path).map_err(|e| {
                    Error::new(
                        ErrorKind::Io,
                        format!("cannot read {}: {e}", path.display()),
                    )
                })?;
                MockConfig::parse(&text).map_err(|e| e.within(path.display()))?
            }
        };
        if let Some(name) = name {
            config.name = name;
        }
        if let Some(duration_ms) = slow_reload_ms {
            config.faults.push(FaultPlan {
                mode: FaultMode::SlowReload,
                at_ms: 0,
                duration_ms,
                after_tokens: 0,
            });
        }
        config.validate()?;
        Ok(config)
    }

    /// One line that says what this mock is (the name, its capacity, the faults armed).
    pub fn summary(&self) -> String {
        format!(
            "{} (max_num_seqs {}, {} fault{} scheduled)",
            self.name,
            self.capacity.max_num_seqs,
            self.faults.len(),
            if self.faults.len() == 1 { "" } else { "s" }
        )
    }

    /// A mock with constant timing (first token after `ttft_ms`, then one every `gap_ms`),
    /// `max_num_seqs` decode slots and no occupancy slowdown: exact timings for tests and
    /// benchmarks.
    pub fn constant(ttft_ms: f64, gap_ms: f64, max_num_seqs: u32) -> MockConfig {
        MockConfig {
            timing: Timing {
                ttft: Distribution::Constant { ms: ttft_ms },
                token_gap: Distribution::Constant { ms: gap_ms },
                min_output_tokens: 1,
                ..Timing::default()
            },
            capacity: Capacity {
                max_num_seqs,
                slowdown_per_running: 0.0,
                throttle_factor: default_throttle_factor(),
            },
            ..MockConfig::default()
        }
    }

    /// Parses and validates a mock configuration.
    pub fn parse(text: &str) -> Result<MockConfig, Error> {
        let config: MockConfig =
            toml::from_str(text).map_err(|e| Error::refused(e.to_string().trim()))?;
        config.validate()?;
        Ok(config)
    }

    /// Checks every number is in its domain.
    pub fn validate(&self) -> Result<(), Error> {
        self.timing
            .ttft
            .validate()
            .map_err(|e| e.within("timing.ttft"))?;
        self.timing
            .token_gap
            .validate()
            .map_err(|e| e.within("timing.token_gap"))?;
        if self.capacity.max_num_seqs == 0 {
            return Err(Error::refused("capacity.max_num_seqs must be at least 1"));
        }
        let s = self.capacity.slowdown_per_running;
        if !(s.is_finite() && s >= 0.0) {
            return Err(Error::refused(format!(
                "capacity.slowdown_per_running = {s} must be finite and >= 0"
            )));
        }
        let t = self.capacity.throttle_factor;
        if !(t.is_finite() && (1.0..=100.0).contains(&t)) {
            return Err(Error::refused(format!(
                "capacity.throttle_factor = {t} must lie in 1..=100"
            )));
        }
        for (key, ms) in [
            ("store.cache_ms", self.store.cache_ms),
            ("store.store_ms", self.store.store_ms),
        ] {
            if !(ms.is_finite() && (0.0..=60_000.0).contains(&ms)) {
                return Err(Error::refused(format!(
                    "{key} = {ms} must lie in 0..=60000 ms"
                )));
            }
        }
        if self.faults.len() > FAULTS_MAX {
            return Err(Error::refused(format!(
                "{} faults; at most {FAULTS_MAX}",
                self.faults.len()
            )));
        }
        if self.name.is_empty() || !self.name.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(Error::refused(format!(
                "name {:?} must be non-empty printable ASCII (it goes in a header)",
                self.name
            )));
        }
        Ok(())
    }
}

impl Default for MockConfig {
    fn default() -> MockConfig {
        MockConfig {
            name: default_name(),
            seed: 0,
            model: default_model(),
            timing: Timing::default(),
            capacity: Capacity::default(),
            store: Store::default(),
            faults: Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mock_commands_flags_rename_arm_a_slow_reload_and_name_a_missing_file() {
        let config = MockConfig::for_flags(None, Some("replica-7".into()), Some(250)).unwrap();
        assert_eq!(config.name, "replica-7");
        assert_eq!(config.faults.len(), 1);
        assert_eq!(config.faults[0].mode, FaultMode::SlowReload);
        assert_eq!(config.faults[0].duration_ms, 250);
        assert!(
            config.summary().starts_with("replica-7 (max_num_seqs "),
            "{}",
            config.summary()
        );
        assert!(
            config.summary().ends_with("1 fault scheduled)"),
            "{}",
            config.summary()
        );
        let missing = std::path::Path::new("/nonexistent/mock.toml");
        let error = MockConfig::for_flags(Some(missing), None, None).unwrap_err();
        assert_eq!(error.kind(), ErrorKind::Io);
        assert!(
            error.to_string().contains("/nonexistent/mock.toml"),
            "{error}"
        );
    }

    #[test]
    fn empty_is_valid_and_unknown_keys_are_refused() {
        assert_eq!(MockConfig::parse("").unwrap(), MockConfig::default());
        let error = MockConfig::parse("nmae = \"x\"").unwrap_err();
        assert_eq!(error.kind(), ErrorKind::Refused);
        assert!(error.to_string().contains("nmae"), "{error}");
        let error = MockConfig::parse("[capacity]\nmax_num_seqs = 0\nslowdown_per_running = 0.0")
            .unwrap_err();
        assert!(error.to_string().contains("max_num_seqs"), "{error}");
        // Durations a lookup or a throttle would sleep for must be finite and bounded.
        for (text, key) in [
            ("[store]\ncache_ms = inf\nstore_ms = 1.0", "store.cache_ms"),
            ("[store]\ncache_ms = 1.0\nstore_ms = -1.0", "store.store_ms"),
            (
                "[capacity]\nmax_num_seqs = 1\nslowdown_per_running = 0.0\nthrottle_factor = nan",
                "throttle_factor",
            ),
            (
                "[capacity]\nmax_num_seqs = 1\nslowdown_per_running = 0.0\nthrottle_factor = 0.5",
                "throttle_factor",
            ),
        ] {
            let error = MockConfig::parse(text).unwrap_err();
            assert_eq!(error.kind(), ErrorKind::Refused);
            assert!(error.to_string().contains(key), "{text}: {error}");
        }
        let store = MockConfig::parse("[store]\ncache_ms = 0.5\nstore_ms = 10.0").unwrap();
        assert_eq!((store.store.cache_ms, store.store.store_ms), (0.5, 10.0));
    }

    #[test]
    fn faults_parse() {
        let config = MockConfig::parse(
            "[[faults]]\nmode = \"stream-abort\"\nat_ms = 5\nduration_ms = 10\nafter_tokens = 2\n[[faults]]\nmode = \"slow-reload\"\nduration_ms = 1000\n",
        )
        .unwrap();
        assert_eq!(config.faults[0].mode, FaultMode::StreamAbort);
        assert_eq!(config.faults[1].at_ms, 0);
        assert!(MockConfig::parse("[[faults]]\nmode = \"meteor\"\nduration_ms = 1\n").is_err());
    }
}
