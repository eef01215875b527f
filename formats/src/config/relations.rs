//! The rules that relate several keys of a configuration (SPEC §1, §6, §10, seeds/004).

use super::{
    Config, ConfigError, Declaration, FaultVariant, Injector, Profile, TargetKind, TARGET_SOURCE,
};

/// The longest release name `target.replica_releases` takes: a name, not a document.
const RELEASE_NAME_BYTES_MAX: usize = 128;

/// A value a key may not take, and why.
fn invalid(key: &str, message: String) -> ConfigError {
    ConfigError::Invalid {
        key: key.into(),
        message,
        at: None,
    }
}

impl Config {
    /// Issue 18 item 3's lengths against the rest of a route: a generated prompt's length from
    /// a distribution (not beside a prompt file; fixed unless dev, §1), and `dataset` output
    /// lengths only where the prompt file has them (a ShareGPT reply needs the tokenizer).
    fn lengths_fit(&self, i: usize, route: &super::Route) -> Result<(), ConfigError> {
        let inconsistent = |clause, message| Err(ConfigError::Inconsistent { clause, message });
        if let Some(lengths) = &route.input_tokens {
            if route.prompt_file.is_some() {
                return inconsistent(
                    "§P",
                    format!("routes[{i}].input_tokens sizes generated prompts, and the route sends routes[{i}].prompt_file's prompts as they are: keep one of them"),
                );
            }
            if route.prompt_tokens != super::sections::PROMPT_TOKENS_DEFAULT {
                return inconsistent(
                    "§P",
                    format!("routes[{i}].input_tokens replaces routes[{i}].prompt_tokens = {}: state one of them", route.prompt_tokens),
                );
            }
            if self.profile != Profile::Dev && !matches!(lengths, super::Lengths::Fixed { .. }) {
                return inconsistent(
                    "§1",
                    format!("routes[{i}].input_tokens draws prompt lengths from a distribution, and §1 fixes the input length: a distribution runs under the dev profile only (use kind = \"fixed\")"),
                );
            }
        }
        if route.output_tokens == Some(super::Lengths::Dataset) {
            match route.prompt_format_resolved() {
                None => {
                    return inconsistent(
                        "§P",
                        format!("routes[{i}].output_tokens = dataset takes each prompt's own length from routes[{i}].prompt_file, and the route has none"),
                    )
                }
                Some(super::PromptFormat::Text) => {
                    return inconsistent(
                        "§P",
                        format!("routes[{i}].output_tokens = dataset: a text prompt file carries no lengths (give a jsonl file with max_tokens on each line, or a sharegpt file and target.tokenizer)"),
                    )
                }
                Some(super::PromptFormat::Sharegpt) if self.target.tokenizer.is_none() => {
                    return inconsistent(
                        "§P",
                        format!("routes[{i}].output_tokens = dataset measures each ShareGPT entry's reply in tokens, and that needs target.tokenizer (the model's tokenizer.json)"),
                    )
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// The declaration's references: its target and route labels exist, the classes are
    /// disjoint, the budget is a share and the window positive.
    fn check_declaration(&self, d: &Declaration) -> Result<(), ConfigError> {
        let invalid = |key: &str, message: String| ConfigError::Invalid {
            key: format!("declaration.{key}"),
            message,
            at: None,
        };
        if !self.target.replicas.contains(&d.target) {
            return Err(invalid(
                "target",
                format!(
                    "{:?} must name one of target.replicas {:?}",
                    d.target, self.target.replicas
                ),
            ));
        }
        if let Some(victim) = &self.fault.victim {
            if self.fault.variant != FaultVariant::None && *victim != d.target {
                return Err(ConfigError::Inconsistent {
                    clause: "seeds/004",
                    message: format!(
                        "the declared target {:?} is not the fault's victim {victim:?}: one named fault, one declared blast radius",
                        d.target
                    ),
                });
            }
        }
        let labels: Vec<&str> = self.routes.iter().map(|r| r.label.as_str()).collect();
        for (key, list) in [
            ("protected_routes", &d.protected_routes),
            ("shed_routes", &d.shed_routes),
        ] {
            if let Some(unknown) = list.iter().find(|l| !labels.contains(&l.as_str())) {
                return Err(invalid(
                    key,
                    format!("{unknown:?} is not a route label (routes: {labels:?})"),
                ));
            }
        }
        if let Some(both) = d
            .protected_routes
            .iter()
            .find(|l| d.shed_routes.contains(l))
        {
            return Err(invalid(
                "shed_routes",
                format!("{both:?} is also protected; a route is one or the other"),
            ));
        }
        if let Some(rate) = d.abort.protected_failure_rate {
            if !(0.0..1.0).contains(&rate) {
                return Err(invalid(
                    "abort.protected_failure_rate",
                    format!("{rate} must be a share in [0, 1)"),
                ));
            }
            if d.protected_routes.is_empty() {
                return Err(invalid(
                    "abort.protected_failure_rate",
                    "a budget for protected traffic needs declaration.protected_routes".into(),
                ));
            }
        }
        if !(d.abort.window_s.is_finite() && d.abort.window_s > 0.0) {
            return Err(invalid(
                "abort.window_s",
                format!("{} must be a positive number of seconds", d.abort.window_s),
            ));
        }
        if d.experiment_id.trim().is_empty() {
            return Err(invalid("experiment_id", "must not be empty".into()));
        }
        Ok(())
    }

    /// Rules that relate several keys, in the order a user meets them: the target and routes,
    /// the profile, the replicas' keys, the schedule's spike, the fault run's rate, the
    /// declaration and calibration, the rates' domains, the injector, and what is left.
    pub(super) fn check_relations(&self) -> Result<(), ConfigError> {
        self.check_routes()?;
        self.check_profile()?;
        self.check_replica_keys()?;
        self.check_releases()?;
        self.check_spike()?;
        self.check_fault_rate()?;
        self.check_calibration_and_rates()?;
        self.check_workload()?;
        if self.fault.variant != FaultVariant::None {
            self.check_injector()?;
        }
        if let Some(victim) = &self.fault.victim {
            if self.fault.variant == FaultVariant::None {
                return Err(invalid(
                    "fault.victim",
                    format!("{victim:?} set, but fault.variant = \"none\""),
                ));
            }
        }
        if self.schedule_params().total_duration_ns() == 0 {
            return Err(invalid(
                "experiment",
                "the phases add up to zero seconds".into(),
            ));
        }
        Ok(())
    }

    /// Issue 52: a `[server_metrics]` section the configuration writes must have something to
    /// scrape (a replica's address or an extra endpoint); before, it did nothing, silently. The
    /// target's own URL is not guessed at: behind a proxy its `/metrics` is one replica's, or
    /// the proxy's, chosen by the proxy.
    pub(super) fn check_scrape_sources(&self, written: bool) -> Result<(), ConfigError> {
        let section = &self.server_metrics;
        if written
            && section.scrape
            && self.scrape_addresses().is_empty()
            && section.extra.is_empty()
        {
            return Err(ConfigError::Inconsistent {
                clause: "§2",
                message: "[server_metrics] is set, but nothing would be scraped: target.replica_addresses names no replica's address, server_metrics.extra no endpoint, and the base URL is https (its host is scraped only over plain http). Name each replica's host:port in target.replica_addresses, add an endpoint under server_metrics.extra, or set server_metrics.scrape = false".into(),
            });
        }
        Ok(())
    }

    /// The replicas whose own address is scraped for the server's metrics (SPEC §2
    /// "Server-side evidence"), name to `host:port`: `target.replica_addresses`; or, where it
    /// names none, the configuration writes `[server_metrics]` with no extra endpoint and the
    /// base URL is plain http, the base URL's own host, named as the one replica of
    /// `target.replicas` (else `target`): a quick run against one server scrapes that server
    /// (issue 55 item 4). Empty when `server_metrics.scrape` is off.
    pub fn scrape_addresses(&self) -> std::collections::BTreeMap<String, String> {
        let section = &self.server_metrics;
        if !section.scrape {
            return Default::default();
        }
        if !self.target.replica_addresses.is_empty()
            || !section.written
            || !section.extra.is_empty()
        {
            return self.target.replica_addresses.clone();
        }
        if !self.target.base_url.starts_with("http://") {
            return Default::default();
        }
        let host = super::sections::authority(&self.target.base_url);
        let name = match self.target.replicas.as_slice() {
            [one] => one.clone(),
            _ => TARGET_SOURCE.to_owned(),
        };
        [(name, host.to_owned())].into()
    }

    /// The base URL's scheme, and at least one route, each with a weight, a path and a label of its own.
    fn check_routes(&self) -> Result<(), ConfigError> {
        let url = &self.target.base_url;
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            return Err(invalid(
                "target.base_url",
                format!("{url:?} must start with http:// or https://"),
            ));
        }
        if self.routes.is_empty() {
            return Err(invalid(
                "routes",
                "at least one [[routes]] entry is needed".into(),
            ));
        }
        let mut labels = std::collections::BTreeSet::new();
        for (i, route) in self.routes.iter().enumerate() {
            if route.weight == 0 {
                return Err(invalid(
                    &format!("routes[{i}].weight"),
                    "must be at least 1".into(),
                ));
            }
            if !route.path.starts_with('/') {
                return Err(invalid(
                    &format!("routes[{i}].path"),
                    format!("{:?} must start with /", route.path),
                ));
            }
            if !labels.insert(route.label.as_str()) {
                return Err(invalid(
                    &format!("routes[{i}].label"),
                    format!("{:?} appears twice", route.label),
                ));
            }
        }
        Ok(())
    }

    /// §6: the hosted profile goes with a hosted target; max_tokens and ignore_eos as pinned; no fault in a hosted run.
    fn check_profile(&self) -> Result<(), ConfigError> {
        let hosted_kind = self.target.kind == TargetKind::Hosted;
        if (self.profile == Profile::Hosted) != hosted_kind {
            return Err(ConfigError::Inconsistent {
                clause: "§6",
                message: format!(
                    "profile \"{}\" with target.kind \"{}\": the hosted profile and a hosted target go together",
                    self.profile.name(),
                    self.target.kind.name()
                ),
            });
        }
        // §6: max_tokens is pinned on every request; lengths from a distribution are dev's.
        let pinned_tokens = self.number(&crate::pins::TARGET_MAX_TOKENS) as u32;
        for (i, route) in self.routes.iter().enumerate() {
            if let Some(lengths) = &route.output_tokens {
                if self.profile != Profile::Dev && !lengths.always(pinned_tokens) {
                    return Err(ConfigError::Inconsistent {
                        clause: "§6",
                        message: format!(
                            "routes[{i}].output_tokens draws max_tokens other than the pinned {pinned_tokens} (target.max_tokens, on every request): lengths from a distribution or a dataset run under the dev profile only"
                        ),
                    });
                }
            }
            self.lengths_fit(i, route)?;
        }
        // §6: the one pin whose value depends on the target.
        let required_ignore_eos = !hosted_kind;
        if let Some(ignore_eos) = self.target.ignore_eos {
            if ignore_eos != required_ignore_eos {
                return Err(ConfigError::Inconsistent {
                    clause: "§6",
                    message: format!(
                        "config key `target.ignore_eos` = {ignore_eos}: {} targets must send ignore_eos = {}",
                        if hosted_kind { "hosted" } else { "self-hosted and mock" },
                        required_ignore_eos
                    ),
                });
            }
        }
        if hosted_kind && self.fault.variant != FaultVariant::None {
            return Err(ConfigError::Inconsistent {
                clause: "§6",
                message:
                    "a hosted run is not a run of the §1 experiment: fault.variant must be \"none\""
                        .into(),
            });
        }
        Ok(())
    }

    /// Keys named by replica (addresses, accelerator commands) name declared replicas; the replica header is an HTTP header name.
    /// `target.replica_releases`: declared replicas only, each release a printable name.
    fn check_releases(&self) -> Result<(), ConfigError> {
        for (name, release) in &self.target.replica_releases {
            let key = format!("target.replica_releases.{name}");
            if !self.target.replicas.contains(name) {
                return Err(invalid(
                    &key,
                    format!(
                        "{name:?} is not one of target.replicas {:?}",
                        self.target.replicas
                    ),
                ));
            }
            let printable = !release.trim().is_empty()
                && release.len() <= RELEASE_NAME_BYTES_MAX
                && !release.chars().any(char::is_control);
            if !printable {
                return Err(invalid(
                    &key,
                    format!("{release:?} is not a release name: give 1-{RELEASE_NAME_BYTES_MAX} bytes of printable text (a served configuration, a model revision)"),
                ));
            }
        }
        Ok(())
    }

    fn check_replica_keys(&self) -> Result<(), ConfigError> {
        let declared = |key: &str, name: &str| {
            if self.target.replicas.iter().any(|r| r == name) {
                Ok(())
            } else {
                Err(invalid(
                    key,
                    format!(
                        "{name:?} is not one of target.replicas {:?}",
                        self.target.replicas
                    ),
                ))
            }
        };
        for (name, address) in &self.target.replica_addresses {
            let key = format!("target.replica_addresses.{name}");
            declared(&key, name)?;
            if let Err(why) = host_and_port(address) {
                return Err(invalid(
                    &key,
                    format!("{address:?} is not host:port: {why}"),
                ));
            }
        }
        // The fault's confirmation address, like a replica's: an IP or a DNS name (a headless
        // Service's pod, resolved again at every look), with its port, or an SRV name.
        if let Some(address) = &self.fault.confirm_address {
            if let Err(why) = host_and_port(address) {
                return Err(invalid(
                    "fault.confirm_address",
                    format!("{address:?} is not host:port: {why}"),
                ));
            }
        }
        if let Some(server) = &self.target.nameserver {
            if server.parse::<std::net::SocketAddr>().is_err() {
                return Err(invalid(
                    "target.nameserver",
                    format!("{server:?} is not ip:port (an IP literal and its port, such as 127.0.0.1:5353: the server is asked before any name resolves)"),
                ));
            }
        }
        for (name, argv) in &self.target.accelerator_commands {
            let key = format!("target.accelerator_commands.{name}");
            declared(&key, name)?;
            if argv.first().is_none_or(|program| program.is_empty()) {
                return Err(invalid(&key, "must name a program to run".into()));
            }
        }
        if self.unattributed_under_layer_7() && self.target.routing == Some(super::Routing::Layer7)
        {
            return Err(ConfigError::Inconsistent {
                clause: "§1",
                message: format!("target.routing = \"layer-7\" makes G1 fail the run unless every request names its replica, and this {} target has no target.replica_header: set it to the header your proxy adds (nginx: add_header x-upstream $upstream_addr), or declare target.routing = \"layer-4\" for per-connection routing such as a Kubernetes Service (G1 then recorded only)", self.target.kind.name()),
            });
        }
        if let Some(header) = &self.target.replica_header {
            let token = !header.is_empty()
                && header
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b));
            if !token {
                return Err(invalid(
                    "target.replica_header",
                    format!("{header:?} is not an HTTP header name"),
                ));
            }
        }
        Ok(())
    }

    /// Whether G1 applies (a replica-loss fault run over two or more replicas) and nothing names
    /// the replica that served a request: a self-hosted target without `target.replica_header`
    /// (the mock and the testbed's router name it in their own headers).
    pub fn unattributed_under_layer_7(&self) -> bool {
        matches!(
            self.fault.variant,
            FaultVariant::CleanDelete | FaultVariant::BlackHole
        ) && self.target.replicas.len() > 1
            && self.target.kind == TargetKind::SelfHosted
            && self.target.replica_header.is_none()
            && self.target.routing != Some(super::Routing::Layer4)
    }

    /// A rate spike belongs to a degradation scenario, within 1..=10; a degradation names its replica.
    fn check_spike(&self) -> Result<(), ConfigError> {
        if let Some(factor) = self.schedule.spike_factor {
            if self.fault.variant != FaultVariant::Degradation {
                return Err(ConfigError::Inconsistent {
                    clause: "§1",
                    message: format!(
                        "schedule.spike_factor changes the offered rate, which the {} experiment pins; a spike belongs to a degradation scenario",
                        self.fault.variant.name()
                    ),
                });
            }
            if !(factor.is_finite() && (1.0..=10.0).contains(&factor)) {
                return Err(invalid(
                    "schedule.spike_factor",
                    format!("{factor} must lie in 1..=10"),
                ));
            }
        }
        if self.fault.variant == FaultVariant::Degradation && self.target.replicas.is_empty() {
            return Err(invalid(
                "target.replicas",
                "a degradation needs the replica it degrades".into(),
            ));
        }
        Ok(())
    }

    /// A fault run: two replicas for a replica loss, a declared victim, and the rate derived from lambda_max (§1); otherwise a rate.
    fn check_fault_rate(&self) -> Result<(), ConfigError> {
        if self.fault.variant != FaultVariant::None {
            if self.fault.variant.is_replica_loss() && self.target.replicas.len() != 2 {
                return Err(ConfigError::Inconsistent {
                    clause: "§1",
                    message: format!(
                        "the replica-loss experiment has 2 replicas; target.replicas lists {}",
                        self.target.replicas.len()
                    ),
                });
            }
            match &self.fault.victim {
                Some(victim) if self.target.replicas.contains(victim) => {}
                other => {
                    return Err(invalid(
                        "fault.victim",
                        format!(
                            "{other:?} must name one of target.replicas {:?}",
                            self.target.replicas
                        ),
                    ))
                }
            }
            let Some(derived) = self.derived_rate_rps() else {
                return Err(ConfigError::Inconsistent {
                    clause: "§1",
                    message: "a fault run's rate is replicas x 0.65 x lambda_max: set calibration.lambda_max_rps \
                              (measured by `percentes calibrate`, §10)"
                        .into(),
                });
            };
            if let Some(rate) = self.schedule.rate_rps {
                if (rate - derived).abs() > 1e-9 * derived.max(1.0) {
                    return Err(ConfigError::Inconsistent {
                        clause: "§1",
                        message: format!(
                            "schedule.rate_rps = {rate} but replicas x lambda_r = {derived}; remove \
                             schedule.rate_rps to use the derived rate"
                        ),
                    });
                }
            }
        } else if self.schedule.rate_rps.is_none()
            && !matches!(
                self.workload.model,
                super::workload::Model::Closed | super::workload::Model::Replay
            )
        {
            return Err(invalid(
                "schedule.rate_rps",
                "required when fault.variant = \"none\"".into(),
            ));
        }
        Ok(())
    }

    /// The declaration, a calibration step's one replica and no fault, and the rates' domain.
    fn check_calibration_and_rates(&self) -> Result<(), ConfigError> {
        if let Some(d) = &self.declaration {
            self.check_declaration(d)?;
        }
        if self.calibration.step {
            if self.fault.variant != FaultVariant::None {
                return Err(ConfigError::Inconsistent {
                    clause: "§10",
                    message: "a calibration step (calibration.step = true) injects no fault; set fault.variant = \"none\"".into(),
                });
            }
            if self.target.replicas.len() != 1 {
                return Err(ConfigError::Inconsistent {
                    clause: "§10",
                    message: format!(
                        "a calibration step addresses one replica directly; target.replicas lists {}",
                        self.target.replicas.len()
                    ),
                });
            }
        }
        for key in ["schedule.rate_rps", "calibration.lambda_max_rps"] {
            let value = if key == "schedule.rate_rps" {
                self.schedule.rate_rps
            } else {
                self.calibration.lambda_max_rps
            };
            if let Some(v) = value {
                if !(v.is_finite() && v > 0.0 && v <= crate::schedule::RATE_RPS_MAX) {
                    return Err(invalid(
                        key,
                        format!(
                            "{v} must be a positive rate of at most {} rps",
                            crate::schedule::RATE_RPS_MAX
                        ),
                    ));
                }
            }
        }
        Ok(())
    }

    /// A fault run's injector and its confirmation keys, which go together.
    fn check_injector(&self) -> Result<(), ConfigError> {
        let f = &self.fault;
        let missing = |what: &str| ConfigError::Invalid {
            key: "fault.injector".into(),
            message: what.into(),
            at: None,
        };
        if f.injector == Some(Injector::NetworkPolicy) {
            self.check_network_policy()?;
        }
        match f.injector {
            None => {
                return Err(missing(
                    "a fault run needs an injector: exec, kill-pid-file, kill-process-group, mock-admin or network-policy",
                ))
            }
            Some(Injector::Exec) if f.fire_command.is_empty() => {
                return Err(missing(
                    "injector \"exec\" needs fault.fire_command (an argv list)",
                ))
            }
            Some(i) if i.kills() && f.pid_file.is_none() => {
                return Err(missing(&format!("{} needs fault.pid_file", i.name())))
            }
            Some(Injector::MockAdmin) if f.admin_address.is_none() || f.mock_mode.is_none() => {
                return Err(missing(
                    "injector \"mock-admin\" needs fault.admin_address and fault.mock_mode",
                ))
            }
            _ if f.confirm_path.is_some() != f.confirm_status.is_some()
                || (f.confirm_path.is_some() && f.confirm_address.is_none()) =>
            {
                return Err(ConfigError::Invalid {
                    key: "fault.confirm_path".into(),
                    message: "fault.confirm_path, fault.confirm_status and fault.confirm_address go together".into(),
                 at: None, })
            }
            _ if (f.confirm_method.is_some() || f.confirm_contains.is_some())
                && f.confirm_path.is_none() =>
            {
                return Err(ConfigError::Invalid {
                    key: "fault.confirm_method".into(),
                    message: "fault.confirm_method and fault.confirm_contains qualify fault.confirm_path, which is missing".into(),
                 at: None, })
            }
            _ if f
                .confirm_method
                .as_deref()
                .is_some_and(|m| m != "GET" && m != "POST") =>
            {
                return Err(ConfigError::Invalid {
                    key: "fault.confirm_method".into(),
                    message: format!("{:?}: GET or POST", f.confirm_method.as_deref().unwrap_or_default()),
                 at: None, })
            }
            _ if f.variant == FaultVariant::Degradation
                && f.confirm_address.is_some()
                && f.confirm_path.is_none() =>
            {
                return Err(ConfigError::Invalid {
                    key: "fault.confirm_path".into(),
                    message: "a degraded replica still answers: confirm a degradation with fault.confirm_path and fault.confirm_status, not by silence".into(),
                 at: None, })
            }
            Some(i) if i.kills() && f.variant == FaultVariant::Degradation => {
                return Err(missing(
                    "a degradation is removed after the pinned fault.degradation_s; a kill cannot be: use mock-admin or exec",
                ))
            }
            _ => {}
        }
        Ok(())
    }
}

impl Config {
    /// `injector = "network-policy"`: a partition, `[fault.network_policy]` present and whole.
    fn check_network_policy(&self) -> Result<(), ConfigError> {
        let invalid = |key: &str, message: String| ConfigError::Invalid {
            key: key.into(),
            message,
            at: None,
        };
        if self.fault.variant != FaultVariant::BlackHole {
            return Err(invalid(
                "fault.injector",
                "a NetworkPolicy partitions a pod: injector \"network-policy\" is for variant \"black-hole\"".into(),
            ));
        }
        let Some(policy) = &self.fault.network_policy else {
            return Err(invalid(
                "fault.network_policy",
                "injector \"network-policy\" needs [fault.network_policy] with pod_labels and expiry_image".into(),
            ));
        };
        if policy.pod_labels.is_empty() {
            return Err(invalid(
                "fault.network_policy.pod_labels",
                "must select the victim pod, e.g. { \"statefulset.kubernetes.io/pod-name\" = \"replica-1\" }".into(),
            ));
        }
        let label = |text: &str| {
            !text.is_empty()
                && text.len() <= 253
                && text
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_./".contains(c))
        };
        for (key, value) in &policy.pod_labels {
            if !label(key) || !(value.is_empty() || label(value) && value.len() <= 63) {
                return Err(invalid(
                    "fault.network_policy.pod_labels",
                    format!("{key:?} = {value:?} is not a Kubernetes label"),
                ));
            }
        }
        for (key, value) in [
            ("namespace", &policy.namespace),
            ("service_account", &policy.service_account),
        ] {
            if !dns_name(value) || value.contains('.') || value.len() > 63 {
                return Err(invalid(
                    &format!("fault.network_policy.{key}"),
                    format!("{value:?} is not a Kubernetes name (a DNS label)"),
                ));
            }
        }
        if policy.expiry_image.trim().is_empty()
            || policy.kubectl.first().is_none_or(|p| p.is_empty())
        {
            return Err(invalid(
                "fault.network_policy",
                "expiry_image and kubectl must name an image and a program".into(),
            ));
        }
        Ok(())
    }
}

/// What is wrong with an address a replica or a confirmation is written with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum AddressError {
    /// No `:port`.
    NoPort,
    /// A port outside 1-65535.
    Port { port: String },
    /// A host that is neither an IP address nor a DNS name.
    Host { host: String },
    /// A name starting `_` that is not an SRV name.
    Srv { address: String },
}

impl std::fmt::Display for AddressError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AddressError::NoPort => f.write_str("no :port (a probe needs the replica's own port; or give an SRV name, _service._proto.name, whose records carry it)"),
            AddressError::Port { port } => write!(f, "port {port:?} is not 1-65535"),
            AddressError::Host { host } => write!(
                f,
                "{host:?} is neither an IP address nor a DNS name (no scheme, path or credentials)"
            ),
            AddressError::Srv { address } => write!(
                f,
                "{address:?} is not an SRV name (_service._proto.name, such as _http._tcp.vllm.default.svc.cluster.local)"
            ),
        }
    }
}

/// Checks `host:port` (an IP, a bracketed IPv6 address or a DNS name; a port 1-65535), as a
/// replica's own address is written.
pub(super) fn host_and_port(address: &str) -> Result<(), AddressError> {
    if address.parse::<std::net::SocketAddr>().is_ok() {
        return Ok(());
    }
    if !address.contains(':') && address.starts_with('_') {
        return srv_name(address);
    }
    let (host, port) = address.rsplit_once(':').ok_or(AddressError::NoPort)?;
    match port.parse::<u16>() {
        Ok(0) | Err(_) => {
            return Err(AddressError::Port {
                port: port.to_owned(),
            })
        }
        Ok(_) => {}
    }
    if dns_name(host) {
        Ok(())
    } else {
        Err(AddressError::Host {
            host: host.to_owned(),
        })
    }
}

/// A DNS name: labels of letters, digits and inner hyphens, at most 63 bytes each, 253 in all
/// (a trailing dot, the root, allowed).
pub(super) fn dns_name(host: &str) -> bool {
    let host = host.strip_suffix('.').unwrap_or(host);
    !host.is_empty()
        && host.len() <= 253
        && host.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        })
}

/// An SRV owner name (RFC 2782): `_service._proto.` then a DNS name, such as a Kubernetes
/// headless Service's `_http._tcp.vllm.default.svc.cluster.local`. Its records give the port.
fn srv_name(address: &str) -> Result<(), AddressError> {
    let mut labels = address.splitn(3, '.');
    let (service, proto, rest) = (
        labels.next().unwrap_or(""),
        labels.next().unwrap_or(""),
        labels.next().unwrap_or(""),
    );
    let underscored = |label: &str| {
        label.len() > 1
            && label.len() <= 63
            && label.starts_with('_')
            && dns_name(&label[1..])
            && !label[1..].contains('.')
    };
    if underscored(service) && underscored(proto) && dns_name(rest) {
        Ok(())
    } else {
        Err(AddressError::Srv {
            address: address.to_owned(),
        })
    }
}
