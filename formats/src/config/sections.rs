//! The typed sections of a configuration: everything but the pinned keys, deserialized with
//! unknown keys refused.

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::schedule::Arrival;

/// The three profiles.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Profile {
    /// Every pin in force; the only profile whose runs can be published.
    Experiment,
    /// The pins, with the timeline durations divided by `dev.time_factor`; never publishable.
    Dev,
    /// A third-party endpoint: client pins apply, server pins are "not verifiable".
    Hosted,
}

impl Profile {
    /// Its name in a configuration file.
    pub fn name(self) -> &'static str {
        match self {
            Profile::Experiment => "experiment",
            Profile::Dev => "dev",
            Profile::Hosted => "hosted",
        }
    }
    /// The profile with this name.
    pub fn from_name(name: &str) -> Option<Profile> {
        match name {
            "experiment" => Some(Profile::Experiment),
            "dev" => Some(Profile::Dev),
            "hosted" => Some(Profile::Hosted),
            _ => None,
        }
    }
}

/// `target.routing`: how the target spreads requests over its replicas (SPEC §1, G1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
pub enum Routing {
    /// Per request, by a layer-7 proxy.
    #[serde(rename = "layer-7")]
    Layer7,
    /// Per connection (layer 4).
    #[serde(rename = "layer-4")]
    Layer4,
}

/// What the recorder talks to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TargetKind {
    /// percentes' own mock server (scenarios crate).
    Mock,
    /// A serving stack the operator controls (vLLM and the like).
    SelfHosted,
    /// A third-party endpoint: server pins cannot be verified.
    Hosted,
}

impl TargetKind {
    /// Its name in a configuration file.
    pub fn name(self) -> &'static str {
        match self {
            TargetKind::Mock => "mock",
            TargetKind::SelfHosted => "self-hosted",
            TargetKind::Hosted => "hosted",
        }
    }
}

/// `target.http`: the HTTP version the recorder speaks to the target.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
pub enum HttpVersion {
    /// HTTP/1.1 on every connection.
    #[default]
    #[serde(rename = "1.1")]
    Http1,
    /// HTTP/2 on every connection: ALPN `h2` over TLS, prior knowledge (h2c) without.
    #[serde(rename = "2")]
    Http2,
    /// Over TLS, what ALPN settles per connection (`h2` offered first); HTTP/1.1 without TLS.
    #[serde(rename = "auto")]
    Auto,
}

impl HttpVersion {
    /// Its name in a configuration file.
    pub fn name(self) -> &'static str {
        match self {
            HttpVersion::Http1 => "1.1",
            HttpVersion::Http2 => "2",
            HttpVersion::Auto => "auto",
        }
    }

    /// The ALPN protocols a TLS connection offers, in order of preference.
    pub fn alpn(self) -> Vec<Vec<u8>> {
        match self {
            HttpVersion::Http1 => vec![b"http/1.1".to_vec()],
            HttpVersion::Http2 => vec![b"h2".to_vec()],
            HttpVersion::Auto => vec![b"h2".to_vec(), b"http/1.1".to_vec()],
        }
    }
}

/// The fault a run injects.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FaultVariant {
    /// No fault: a load run with one measurement window.
    None,
    /// Delete the victim with grace 0; never called node loss.
    CleanDelete,
    /// Pre-armed full network partition of the victim for the pinned duration.
    BlackHole,
    /// A named degradation of the victim for the pinned duration (`fault.degradation_s`), such
    /// as a store outage or a CPU throttle (seeds/004's scenario catalogue), armed through the
    /// mock's admin API or an exec'd command. A governed scenario, not the §1 experiment: the
    /// replica-loss gates (G1, G3, G4) and the headline do not apply.
    Degradation,
}

impl FaultVariant {
    /// Its name in a configuration file.
    pub fn name(self) -> &'static str {
        match self {
            FaultVariant::None => "none",
            FaultVariant::CleanDelete => "clean-delete",
            FaultVariant::BlackHole => "black-hole",
            FaultVariant::Degradation => "degradation",
        }
    }

    /// Whether this is a variant of the §1 replica-loss experiment.
    pub fn is_replica_loss(self) -> bool {
        matches!(self, FaultVariant::CleanDelete | FaultVariant::BlackHole)
    }
}

/// `[target]`.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Target {
    /// What kind of server the target is (mock, self-hosted, hosted).
    pub kind: TargetKind,
    /// Where requests go: the service (router) address, `http://` or `https://`.
    pub base_url: String,
    /// The `model` field sent in each request body.
    pub model: String,
    /// Replica names the service is declared to have (G1 fails when traffic reaches fewer).
    #[serde(default)]
    pub replicas: Vec<String>,
    /// Whether requests stream (SSE). Default true.
    #[serde(default = "yes")]
    pub stream: bool,
    /// Sent as `ignore_eos`; must be true for mock and self-hosted, false for hosted (§6).
    pub ignore_eos: Option<bool>,
    #[serde(default)]
    /// `[target.tls]`: trust anchors, server name and the insecure switch.
    pub tls: Tls,
    /// The HTTP version requests use (SPEC §2 "HTTP/2"): `"1.1"` (the default), `"2"` (over
    /// TLS by ALPN `h2`, refused where the server declines it; over `http://` with prior
    /// knowledge, h2c) or `"auto"` (ALPN offers `h2` and `http/1.1` and each connection speaks
    /// what the server chose; `http://` stays HTTP/1.1).
    #[serde(default)]
    pub http: HttpVersion,
    /// Each replica's own address (`name = "host:port"`, the host an IP or a DNS name such as a
    /// headless Service's pod name; or an SRV name, `_service._proto.name`, whose record gives
    /// the host and the port), resolved again at every probe, and probed directly by the
    /// recorder: its waiting-queue gauge from /metrics (G7) and whether it answers
    /// (replica-ready, §5). A response whose replica header names one of these addresses is
    /// attributed to that replica.
    #[serde(default)]
    pub replica_addresses: BTreeMap<String, String>,
    /// The release each replica serves (`name = "release"`: a served configuration, a model
    /// revision), for a study that changes releases under load (a rollout or a rollback, SPEC
    /// §10 "Rollouts"): a request attributed to a replica is attributed to its release, and
    /// `analyze --by release` segments by it. Every name is one of `replicas`.
    #[serde(default)]
    pub replica_releases: BTreeMap<String, String>,
    /// The DNS server (`ip:port`) that SRV names among `replica_addresses` and
    /// `fault.confirm_address` are asked of. Absent: the first `nameserver` of /etc/resolv.conf,
    /// on port 53 (a cluster's DNS, for a headless Service's SRV records). A testbed that serves
    /// its replicas' names from a DNS server of its own on another port sets it.
    pub nameserver: Option<String>,
    /// The response header that names the replica that served a request (a router's, such as
    /// nginx's `add_header x-upstream $upstream_addr`): its value is a replica's name or one of
    /// `replica_addresses`. Without it the recorder reads the testbed's `x-percentes-upstream`
    /// and `x-percentes-replica`. G1 (§1) rests on this attribution.
    pub replica_header: Option<String>,
    /// How the target spreads requests over its replicas (SPEC §1, G1): `layer-7` (a proxy
    /// balancing each request, which must name the replica: G1 fails the run outside the band)
    /// or `layer-4` (per connection, as a Kubernetes Service's kube-proxy does: G1 recorded
    /// only). Absent: layer 7 assumed, and said so.
    pub routing: Option<Routing>,
    /// A command per replica (`name = ["argv", ...]`) whose output fingerprints its accelerator:
    /// run once before the journal is created, its standard output journaled as the host fact
    /// `accelerator.NAME`, which G5 compares across a campaign's runs. For instance
    /// `["kubectl", "exec", "replica-0", "--", "nvidia-smi",
    /// "--query-gpu=name,clocks.max.sm,clocks.max.mem,power.limit", "--format=csv,noheader"]`:
    /// fixed properties, not readings that vary from run to run. A command that fails refuses
    /// the run.
    #[serde(default)]
    pub accelerator_commands: BTreeMap<String, Vec<String>>,
    /// `[target.headers]`: extra request headers (`name = "value"`), sent on every request and
    /// recorded with the configuration. Credentials do not belong here (the journal copies the
    /// configuration): name an environment variable in `api_key_env` instead.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// `[target.secret_headers]`: request headers whose values are secrets (`name = "VAR"`):
    /// each value is read from the environment variable named at the start of a recording and
    /// sent on every request; the journal records the header's and the variable's names, never
    /// the value. A header that looks like a credential by name or value must go here.
    #[serde(default)]
    pub secret_headers: BTreeMap<String, String>,
    /// The environment variable holding the API key. The key is read at the start of a
    /// recording and sent in `api_key_header`; the journal records the variable's name, never
    /// the key.
    pub api_key_env: Option<String>,
    /// The header the key goes in: `authorization` (the default) sends `Bearer KEY`; any other
    /// name (Azure's `api-key`) sends the key as it is.
    pub api_key_header: Option<String>,
    /// Streamed requests ask for a final usage chunk (`stream_options.include_usage`), which
    /// carries the token counts. Default true; a server that refuses the field sets false.
    #[serde(default = "yes")]
    pub include_usage: bool,
    /// A keep-alive connection idle this long (ms) is closed instead of reused; default 4,000,
    /// below the 5 s after which uvicorn (vLLM's server) and Node close idle connections. A
    /// `Keep-Alive: timeout=N` from the server shortens it for that connection.
    #[serde(default = "idle_limit_ms_default")]
    pub idle_limit_ms: u64,
    /// Check the target before the epoch (default true): GET `preflight_path` must answer 2xx
    /// and, when it lists models (`/v1/models`), list `model`. A failure refuses to start.
    #[serde(default = "yes")]
    pub preflight: bool,
    /// The pre-flight's path under the base URL's path (default `/v1/models`; a health path
    /// such as `/health` checks only the status).
    pub preflight_path: Option<String>,
    /// The target's inter-token gap as the user expects it, in ms: only for the warning when
    /// `max_tokens` such gaps do not fit in the client timeout (SPEC §P).
    pub token_gap_ms: Option<f64>,
    /// The model's `tokenizer.json` (Hugging Face tokenizers' format): generated prompts are
    /// built to `input_tokens` as it counts them, a ShareGPT entry's reply measured for
    /// `output_tokens = dataset`; its BLAKE3 is journaled as the `tokenizer` host fact.
    pub tokenizer: Option<String>,
}

fn yes() -> bool {
    true
}

fn idle_limit_ms_default() -> u64 {
    4_000
}

/// The pre-flight path when `target.preflight_path` is not set.
pub const PREFLIGHT_PATH_DEFAULT: &str = "/v1/models";

impl Target {
    /// The header the API key is sent in, lowercased (`authorization` unless configured).
    pub fn api_key_header(&self) -> String {
        self.api_key_header
            .as_deref()
            .unwrap_or("authorization")
            .to_ascii_lowercase()
    }

    /// The pre-flight path ([`PREFLIGHT_PATH_DEFAULT`] unless configured).
    pub fn preflight_path(&self) -> &str {
        self.preflight_path
            .as_deref()
            .unwrap_or(PREFLIGHT_PATH_DEFAULT)
    }
}

/// `[target.tls]`.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Tls {
    /// PEM file of extra trust anchors.
    pub ca_file: Option<String>,
    /// SNI and verification name, when it differs from the URL's host.
    pub server_name: Option<String>,
    /// Skip certificate verification. Recorded in the journal and printed in every report.
    #[serde(default)]
    pub insecure: bool,
}

/// `[schedule]`.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScheduleSection {
    /// The schedule's seed: with the other parameters it fixes every intended time (§J.4).
    pub seed: u64,
    /// How arrivals are spaced (Poisson for characterization, deterministic for diagnostics).
    pub arrival: Arrival,
    /// Total offered rate. Under a fault variant it must equal replicas x lambda_r (§1).
    pub rate_rps: Option<f64>,
    /// A traffic spike with a degradation: the rate times this from T_inject for the pinned
    /// degradation (phase `spike`), then the rate again (seeds/004's store-outage-under-spike).
    pub spike_factor: Option<f64>,
}

/// `[calibration]` (the non-pinned part).
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Calibration {
    /// Measured single-replica capacity (§10). Required for a fault run.
    pub lambda_max_rps: Option<f64>,
    /// The calibration's capacity probe: the median time to the last byte of the pre-flight's
    /// sample requests over its steps, ms (written by `percentes calibrate`; SPEC §10
    /// "Capacity check"). A run's own probe is compared with it under v0.5.
    pub probe_ms: Option<f64>,
    /// The replica's throughput ceiling as the calibration measured it: the rate it completed
    /// when offered the survivor's load after a loss (the configured replicas x lambda_r on
    /// the replicas that remain), rps (written by `percentes calibrate`; §10).
    pub ceiling_rps: Option<f64>,
    /// The rate offered in the step that measured `ceiling_rps`, rps.
    pub ceiling_offered_rps: Option<f64>,
    /// This run is one step of a calibration ramp (§10, written by `percentes calibrate`): one
    /// replica addressed directly, no fault, `schedule.rate_rps` is the step's rate, and the
    /// schedule is the pinned settle (phase `warmup`) then the pinned measured span (phase
    /// `measurement`).
    #[serde(default)]
    pub step: bool,
}

/// `[declaration]` (seeds/004): the experiment's identity and blast radius, recorded in the
/// journal before injection, and the abort triggers the recorder enforces live. A run whose
/// trigger fires is an escaped experiment: load stops, the clock is kept, the seal says `escaped`.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Declaration {
    /// The experiment's identifier, as the operator names it.
    pub experiment_id: String,
    /// The release and dataset under test, as the operator names them.
    pub release: String,
    /// The dataset, as the operator names it.
    pub dataset: String,
    /// The one replica the fault may affect (one of `target.replicas`; the fault's victim).
    pub target: String,
    /// The exact boundary: pod, network path, resource pool.
    pub boundary: String,
    /// Protected traffic, in words (health, control, the survivors' traffic ...).
    #[serde(default)]
    pub protected: Vec<String>,
    /// Work allowed to shed, in words, with its expected status and error classes.
    #[serde(default)]
    pub shed: Vec<String>,
    /// State that must remain authoritative (manifests, catalogs, caches, endpoint lists).
    #[serde(default)]
    pub authoritative: Vec<String>,
    /// Route labels whose traffic is protected (the abort budget applies to them).
    #[serde(default)]
    pub protected_routes: Vec<String>,
    /// Route labels allowed to shed.
    #[serde(default)]
    pub shed_routes: Vec<String>,
    /// Protections expected to act (timeouts, breakers, caches, admission, shedding).
    #[serde(default)]
    pub protections: Vec<String>,
    /// The cleanup path, which must not depend on the disrupted component.
    pub cleanup: String,
    #[serde(default)]
    /// `[declaration.abort]`: the triggers the recorder watches.
    pub abort: Abort,
}

/// `[declaration.abort]`: the triggers. Durations are in experiment seconds (the dev profile
/// divides them by its time factor).
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Abort {
    /// Escape when the share of protected requests that end errored or censored, among those
    /// ending in the last `window_s`, exceeds this (with at least `min_requests` of them).
    pub protected_failure_rate: Option<f64>,
    #[serde(default = "abort_window_default")]
    /// The trailing window the protected-failure rate is taken over, in experiment seconds.
    pub window_s: f64,
    #[serde(default = "abort_min_requests_default")]
    /// Protected requests the window must hold before its rate can trigger.
    pub min_requests: u32,
    /// Escape when a request answered by a replica other than the declared target errors.
    #[serde(default)]
    pub undeclared_replica_errors: bool,
    /// Escape when the fault's removal fails (cleanup cannot restore state).
    #[serde(default = "yes")]
    pub cleanup_failure: bool,
}

impl Default for Abort {
    fn default() -> Abort {
        Abort {
            protected_failure_rate: None,
            window_s: abort_window_default(),
            min_requests: abort_min_requests_default(),
            undeclared_replica_errors: false,
            cleanup_failure: true,
        }
    }
}

fn abort_window_default() -> f64 {
    5.0
}
fn abort_min_requests_default() -> u32 {
    10
}

/// `[fault]` (the non-pinned part).
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Fault {
    /// The fault: none, clean-delete, black-hole or degradation.
    pub variant: FaultVariant,
    /// The replica taken out; must be one of `target.replicas`.
    pub victim: Option<String>,
    /// How the recorder applies the fault at T_inject. Required for a fault run.
    pub injector: Option<Injector>,
    /// `exec`: the command (argv) run at T_inject, e.g. a `kubectl delete pod` line.
    #[serde(default)]
    pub fire_command: Vec<String>,
    /// `exec`: the command run when the fault is removed (black-hole: at the pinned partition's end).
    #[serde(default)]
    pub remove_command: Vec<String>,
    /// `kill-pid-file`: the file holding the victim's process id (SIGKILL at T_inject);
    /// `kill-process-group`: the id of the process that leads the victim's process group.
    pub pid_file: Option<String>,
    /// `mock-admin`: the victim mock's address (`host:port`), and the mock fault mode to arm there.
    pub admin_address: Option<String>,
    /// `mock-admin`: the fault mode to arm on the victim mock.
    pub mock_mode: Option<String>,
    /// Independent confirmation: `host:port` of the victim, which must stop answering.
    pub confirm_address: Option<String>,
    /// Confirmation of a degradation instead: `confirm_method confirm_path` at
    /// `confirm_address` must answer `confirm_status` (a store outage: an uncached lookup answers
    /// 503), and its body contain `confirm_contains` when set (a resource gauge in `/metrics`).
    pub confirm_path: Option<String>,
    /// The status the confirmation request must answer.
    pub confirm_status: Option<u16>,
    /// `GET` or `POST` (the default; the body is `{}`).
    pub confirm_method: Option<String>,
    /// Text the confirmation's body must contain, when set.
    pub confirm_contains: Option<String>,
    /// `network-policy`: the partition as a Kubernetes NetworkPolicy.
    pub network_policy: Option<NetworkPolicy>,
}

/// `[fault.network_policy]`: the black-hole on Kubernetes (SPEC §1 "The partition on
/// Kubernetes"): a NetworkPolicy that selects the victim pod and allows nothing in or out,
/// created at T_inject with an expiry Job that deletes it after the pinned partition even if the
/// recorder is gone, deleted by the recorder at the pinned end and its absence confirmed.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NetworkPolicy {
    /// The victim pod's namespace.
    #[serde(default = "default_namespace")]
    pub namespace: String,
    /// Labels that select the victim pod and no other (a StatefulSet's
    /// `statefulset.kubernetes.io/pod-name`).
    pub pod_labels: BTreeMap<String, String>,
    /// The image the expiry Job runs: one with kubectl (the recorder's own).
    pub expiry_image: String,
    /// The service account the expiry Job runs as: it must be allowed to delete the policy.
    #[serde(default = "default_service_account")]
    pub service_account: String,
    /// The kubectl program and the arguments it always takes.
    #[serde(default = "default_kubectl")]
    pub kubectl: Vec<String>,
    /// The operator's word that the cluster's CNI enforces NetworkPolicy, where the check
    /// before the run does not recognise it (the fire's confirmation still tests it).
    #[serde(default)]
    pub enforced: bool,
}

impl NetworkPolicy {
    /// A partition of the pods `pod_labels` selects, its expiry Job on `expiry_image`, every
    /// other key at its default.
    pub fn new(pod_labels: BTreeMap<String, String>, expiry_image: &str) -> NetworkPolicy {
        NetworkPolicy {
            namespace: default_namespace(),
            pod_labels,
            expiry_image: expiry_image.to_owned(),
            service_account: default_service_account(),
            kubectl: default_kubectl(),
            enforced: false,
        }
    }
}

fn default_namespace() -> String {
    "default".into()
}
fn default_service_account() -> String {
    "percentes-recorder".into()
}
fn default_kubectl() -> Vec<String> {
    vec!["kubectl".into()]
}

/// The recorder's fault injectors (SPEC §1; the armed, fired, confirmed and expiry events go in
/// the journal).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Injector {
    /// Runs `fault.fire_command` (and `fault.remove_command` when the fault ends).
    Exec,
    /// Sends SIGKILL to the process whose id `fault.pid_file` holds.
    KillPidFile,
    /// Sends SIGKILL to the whole process group that the process `fault.pid_file` names leads:
    /// a replica made of several processes (vLLM's API server and its engine core) dies at once,
    /// as a pod's containers do when it is deleted with grace 0.
    KillProcessGroup,
    /// Arms `fault.mock_mode` through the victim mock's admin API.
    MockAdmin,
    /// A Kubernetes NetworkPolicy that isolates the victim pod (`[fault.network_policy]`).
    NetworkPolicy,
}

impl Injector {
    /// Whether it kills a process (`kill-pid-file`, `kill-process-group`): it needs a pid file,
    /// and what it does cannot be undone.
    pub fn kills(self) -> bool {
        matches!(self, Injector::KillPidFile | Injector::KillProcessGroup)
    }

    /// Its name in a configuration file.
    pub fn name(self) -> &'static str {
        match self {
            Injector::Exec => "exec",
            Injector::KillPidFile => "kill-pid-file",
            Injector::KillProcessGroup => "kill-process-group",
            Injector::MockAdmin => "mock-admin",
            Injector::NetworkPolicy => "network-policy",
        }
    }
}

/// `[[routes]]`: one request template and its weight in the route mix.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Route {
    /// The route's label: it segments the report and names the route in the declaration.
    pub label: String,
    /// The request path (`/v1/chat/completions`).
    pub path: String,
    #[serde(default = "one")]
    /// Its weight in the route mix (at least 1).
    pub weight: u32,
    /// Fixed input length of the generated prompt, in tokens (`input_tokens` replaces it).
    #[serde(default = "prompt_tokens_default")]
    pub prompt_tokens: u32,
    /// A prompt set: request i uses prompt i mod n, after its unique prefix. Without it,
    /// prompts are generated to `prompt_tokens`.
    pub prompt_file: Option<String>,
    /// How `prompt_file` is read: `text` (a prompt a line), `jsonl` (`{"prompt": ...}` or chat
    /// `{"messages": [...]}` a line) or `sharegpt`; default `jsonl` for a `.jsonl` file, else
    /// `text`.
    pub prompt_format: Option<PromptFormat>,
    /// Each request's `max_tokens` from a distribution (`fixed`, `uniform`, `normal`), drawn
    /// from the schedule's seed and the request's index, or `dataset` (each prompt's own); a
    /// prompt's own `max_tokens` wins. Other than the pinned 256 for every request, dev profile
    /// only (§6).
    pub output_tokens: Option<super::Lengths>,
    /// The length of each generated prompt from a distribution (`fixed`, `uniform`, `normal`),
    /// in place of `prompt_tokens`: in tokens as `target.tokenizer` counts them, else in words.
    /// Not with `prompt_file` (a dataset's prompts are as long as they are). Other than fixed,
    /// dev profile only (§1: a fixed input length).
    pub input_tokens: Option<super::Lengths>,
    /// What a success must show to count as a correct success (otherwise: incorrect success).
    #[serde(default)]
    pub verify: Verify,
    /// Whether this route's responses stream (SSE); default `target.stream`. A route that
    /// answers one JSON body (a lookup beside the generation routes) sets `false`.
    pub stream: Option<bool>,
    /// The tools the model may call, sent as every request's `tools`: OpenAI's function tools
    /// (`{type = "function", function = {name, description, parameters}}`), as TOML or as one
    /// string of JSON (SPEC §2 "What a request carries"; [`super::parts`]).
    pub tools: Option<toml::Value>,
    /// `tool_choice`: `auto`, `none`, `required`, or the name of one of `tools`' functions
    /// (the call is then forced: guided decoding makes even a small model call it).
    pub tool_choice: Option<String>,
    /// `response_format`: `json_object`, or a JSON Schema (TOML or one string of JSON) the
    /// answer must follow, sent as a strict `json_schema` format.
    pub response_format: Option<toml::Value>,
    /// Image files (PNG, JPEG, GIF, WebP) attached to every request's user message as data
    /// URLs; their size and BLAKE3 are journaled (the `request-parts` host fact), never their
    /// bytes.
    #[serde(default)]
    pub images: Vec<String>,
}

impl Route {
    /// The format its `prompt_file` is read in: as configured, else `jsonl` for a `.jsonl` file,
    /// `sharegpt` for a `.json` file (one JSON document: ShareGPT is the one such format read)
    /// and `text` for any other; `None` without a prompt file.
    pub fn prompt_format_resolved(&self) -> Option<PromptFormat> {
        let path = self.prompt_file.as_deref()?;
        Some(self.prompt_format.unwrap_or(if path.ends_with(".jsonl") {
            PromptFormat::Jsonl
        } else if path.ends_with(".json") {
            PromptFormat::Sharegpt
        } else {
            PromptFormat::Text
        }))
    }

    /// Whether requests of this route ask for, and expect, a stream.
    pub fn streams(&self, target: &Target) -> bool {
        self.stream.unwrap_or(target.stream)
    }
}

/// How a route's `prompt_file` is read.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PromptFormat {
    /// One prompt per non-empty line.
    Text,
    /// One JSON object a line: `{"prompt": ...}` or `{"messages": [...]}`, `max_tokens` optional.
    Jsonl,
    /// A ShareGPT JSON array of conversations; each one's turns up to its first human turn.
    Sharegpt,
}

impl PromptFormat {
    /// Its name in a configuration file.
    pub fn name(self) -> &'static str {
        match self {
            PromptFormat::Text => "text",
            PromptFormat::Jsonl => "jsonl",
            PromptFormat::Sharegpt => "sharegpt",
        }
    }
}

/// `[routes.verify]`: the per-route verification rule. By default the `model` field of every
/// response must equal `target.model`.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Verify {
    /// The exact HTTP status required (default: any 2xx).
    pub status: Option<u16>,
    /// A response header that must be present: `name` or `name: value` (value compared exactly).
    pub header: Option<String>,
    /// A top-level JSON field every chunk (or the body) must carry, and its value
    /// (default: `model` = `target.model`).
    pub json_field: Option<String>,
    /// The value `json_field` must have (default: `target.model` for `model`).
    pub json_value: Option<String>,
    /// BLAKE3 (hex) of the whole generated text.
    pub content_blake3: Option<String>,
    /// The answer must parse as JSON and match the route's `response_format` schema, and each
    /// tool call's arguments the `parameters` of the function it names (one of `tools`').
    #[serde(default)]
    pub structured: bool,
}

fn one() -> u32 {
    1
}
/// A generated prompt's length when the route states none.
pub(super) const PROMPT_TOKENS_DEFAULT: u32 = 128;

fn prompt_tokens_default() -> u32 {
    PROMPT_TOKENS_DEFAULT
}

/// Everything after the pinned keys are removed.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Typed {
    pub(super) profile: Profile,
    #[serde(default)]
    pub(super) dev: Option<Dev>,
    pub(super) target: Target,
    pub(super) schedule: ScheduleSection,
    #[serde(default)]
    pub(super) calibration: Calibration,
    pub(super) fault: Fault,
    pub(super) routes: Vec<Route>,
    #[serde(default)]
    pub(super) declaration: Option<Declaration>,
    #[serde(default)]
    pub(super) server_metrics: ServerMetrics,
    #[serde(default)]
    pub(super) thresholds: Option<ThresholdsSection>,
    #[serde(default)]
    pub(super) workload: super::workload::WorkloadSection,
    #[serde(default)]
    pub(super) slo: Option<SloSection>,
}

/// `[slo]`'s keys that are not pins: the user's declared SLO ([`super::slo`]).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SloSection {
    /// Each `METRIC OP VALUE`, e.g. `ttft <= 500ms`.
    #[serde(default)]
    pub declared: Vec<String>,
    /// A route's own objectives, by its label.
    #[serde(default)]
    pub routes: BTreeMap<String, Vec<String>>,
}

/// `[thresholds]`: the user's pass/fail criteria ([`super::thresholds`]).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ThresholdsSection {
    /// Each `METRIC[@WINDOW] OP VALUE`, e.g. `ttft_p99 < 500ms`.
    #[serde(default)]
    pub fail_on: Vec<String>,
}

/// `[server_metrics]`: what the recorder scrapes of the server's own metrics (SPEC §2
/// "Server-side evidence"): each `target.replica_addresses` replica's Prometheus endpoint, and
/// any further endpoint named here, every `server.scrape_period_ms`.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerMetrics {
    /// Whether to scrape at all (default: yes).
    #[serde(default = "scrape_default")]
    pub scrape: bool,
    /// Whose series are journaled: `auto` (every engine's, the default), `vllm`, `sglang`,
    /// `tgi` or `none` (only `metrics`).
    #[serde(default)]
    pub preset: crate::prometheus::Preset,
    /// Further families journaled by name (a histogram's name brings its buckets, sum and
    /// count); exported, not read by the analysis.
    #[serde(default)]
    pub metrics: Vec<String>,
    /// The endpoint's path on each replica's address (default `/metrics`).
    #[serde(default)]
    pub path: Option<String>,
    /// Further endpoints, name to `http://host:port/path` (a router's, a sidecar's).
    #[serde(default)]
    pub extra: BTreeMap<String, String>,
    /// Whether the configuration writes a `[server_metrics]` section: then, with no replica
    /// address and no extra endpoint, the base URL's own host is scraped (issue 55 item 4).
    #[serde(skip)]
    pub written: bool,
}

fn scrape_default() -> bool {
    true
}

impl Default for ServerMetrics {
    fn default() -> ServerMetrics {
        ServerMetrics {
            scrape: true,
            preset: Default::default(),
            metrics: Vec::new(),
            path: None,
            extra: BTreeMap::new(),
            written: false,
        }
    }
}

/// The authority of a base URL (what lies between `://` and the path), if the URL has one.
pub(super) fn authority(base_url: &str) -> &str {
    let rest = base_url
        .split_once("://")
        .map(|(_, r)| r)
        .unwrap_or(base_url);
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    &rest[..end]
}

/// The name the base URL's own host is scraped under when no replica names it
/// ([`super::Config::scrape_addresses`]).
pub const TARGET_SOURCE: &str = "target";

/// The most families `server_metrics.metrics` may name, and the most `extra` endpoints.
pub const SERVER_METRICS_NAMED_MAX: usize = 64;

impl ServerMetrics {
    /// The path scraped on each replica's address.
    pub fn path(&self) -> &str {
        self.path.as_deref().unwrap_or("/metrics")
    }
    /// Whether the family (or a sample's own name) `name` is journaled.
    pub fn selects(&self, name: &str) -> bool {
        self.preset.selects(name) || self.metrics.iter().any(|m| m == name)
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Dev {
    pub(super) time_factor: Option<u32>,
    pub(super) scale_timeout: Option<bool>,
    pub(super) warmup_s: Option<f64>,
    pub(super) measure_s: Option<f64>,
    pub(super) cooldown_s: Option<f64>,
}
