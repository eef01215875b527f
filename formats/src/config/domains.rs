//! The third loading stage: each value inside its domain. A value that parses but cannot mean
//! anything (an empty model, a zero-token prompt, a rate that schedules nothing, a credential
//! that the journal would copy) is refused here, with its key, before anything runs.

use super::secrets::is_variable_name;
use super::sections::authority;
use super::{Config, ConfigError, Lengths};

/// Request headers the recorder writes itself; a configuration may not set them.
const HEADERS_RECORDER_WRITES: &[&str] = &[
    "host",
    "content-length",
    "content-type",
    "transfer-encoding",
    "connection",
    "keep-alive",
    "te",
    "upgrade",
    "expect",
    "accept",
    "x-request-id",
];

/// Whether `name` is an HTTP field name (RFC 9110 §5.1: a token).
fn is_token(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// Why `name` cannot name a configured header, if it cannot: not a field name, or one the
/// recorder writes itself.
fn header_name_problem(name: &str) -> Option<&'static str> {
    if !is_token(name) {
        return Some("is not an HTTP header name (RFC 9110 §5.1)");
    }
    HEADERS_RECORDER_WRITES
        .contains(&name.to_ascii_lowercase().as_str())
        .then_some("is written by the recorder itself")
}

/// Whether `value` can go in a header line as it is (visible ASCII, space and tab; no CR, LF
/// or NUL that would split the request).
fn is_field_value(value: &str) -> bool {
    value
        .bytes()
        .all(|b| b == b'\t' || (b' '..=b'~').contains(&b))
}

fn invalid(key: impl Into<String>, message: impl Into<String>) -> ConfigError {
    ConfigError::Invalid {
        key: key.into(),
        message: message.into(),
        at: None,
    }
}

/// What is wrong with an authority's host or port, if anything: an empty host, or a port that
/// is not a number in 1..=65535.
fn port_problem(authority: &str) -> Option<String> {
    // An IPv6 literal is bracketed; its colons are not the port's.
    let after_host = match authority.strip_prefix('[') {
        Some(rest) => rest.split_once(']').map(|(_, after)| after)?,
        None => authority
            .rsplit_once(':')
            .map_or("", |(host, _)| &authority[host.len()..]),
    };
    let host_empty = authority.is_empty() || authority.starts_with(':');
    if host_empty {
        return Some(format!("{authority:?} names no host"));
    }
    let port = after_host.strip_prefix(':')?;
    match port.parse::<u16>() {
        Ok(p) if p > 0 => None,
        _ => Some(format!("port {port:?} is not a TCP port (1 to 65535)")),
    }
}

/// What is wrong with an authority's host, if anything: an IPv6 literal whose bracket never
/// closes or that is no IPv6 address, or a name that is neither an IPv4 address nor a host name
/// (labels of letters, digits, `-` and `_`, at most 63 bytes each and 253 in all).
fn host_problem(authority: &str) -> Option<String> {
    if let Some(rest) = authority.strip_prefix('[') {
        let Some((literal, _)) = rest.split_once(']') else {
            return Some(format!(
                "{authority:?} opens an IPv6 literal with [ and never closes it"
            ));
        };
        return literal
            .parse::<std::net::Ipv6Addr>()
            .is_err()
            .then(|| format!("[{literal}] is not an IPv6 address"));
    }
    let host = match authority.rsplit_once(':') {
        Some((host, _)) => host,
        None => authority,
    };
    if host.parse::<std::net::Ipv4Addr>().is_ok() {
        return None;
    }
    let name = host.strip_suffix('.').unwrap_or(host);
    let label_ok = |label: &str| {
        !label.is_empty()
            && label.len() <= 63
            && label
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    };
    if name.is_empty() || name.len() > 253 || !name.split('.').all(label_ok) {
        let shown: String = host.chars().take(80).collect();
        return Some(format!(
            "host {shown:?}{} is neither an IP address nor a host name (labels of letters, digits, - and _, at most 63 bytes each, 253 in all)",
            if host.chars().count() > 80 { "..." } else { "" }
        ));
    }
    None
}

/// Whether `path` can go in a request line as it is: it starts with `/` and holds no space,
/// tab, CR, LF, NUL or other byte a header line cannot carry.
fn is_request_path(path: &str) -> bool {
    path.starts_with('/') && is_field_value(path) && !path.contains([' ', '\t'])
}

/// A port the address names that no server listens on: `host:0`.
fn port_zero(address: &str) -> bool {
    address
        .rsplit_once(':')
        .is_some_and(|(_, port)| port == "0")
}

impl Config {
    /// The domains checked when a configuration is loaded to record (issue 50: values that
    /// parsed and could not mean anything): the URL's host, the TLS name, the pre-flight path,
    /// the extra scrape endpoints' names and credentials, ports 0, each route's verification
    /// rule, limits of zero no run meets, and the windows thresholds read. A journal's own
    /// configuration is read as recorded ([`Config::parse_journaled`]): a value refused here
    /// since it was recorded does not stop its analysis.
    pub(super) fn check_for_recording(&self) -> Result<(), ConfigError> {
        let target = &self.target;
        let url_host = authority(&target.base_url);
        if let Some(why) = host_problem(url_host) {
            return Err(invalid("target.base_url", why));
        }
        if let Some(name) = &target.tls.server_name {
            let ip = name.parse::<std::net::IpAddr>().is_ok();
            if !ip && !super::relations::dns_name(name) {
                return Err(invalid(
                    "target.tls.server_name",
                    format!("{name:?} is neither a DNS name nor an IP address: it is the name the certificate is checked against (SNI)"),
                ));
            }
        }
        if let Some(path) = &target.preflight_path {
            if !is_request_path(path) {
                return Err(invalid(
                    "target.preflight_path",
                    format!(
                        "{:?} holds a space, CR, LF or another byte a request line cannot carry",
                        path.escape_debug().to_string()
                    ),
                ));
            }
        }
        for (name, address) in &target.replica_addresses {
            if port_zero(address) {
                return Err(invalid(
                    format!("target.replica_addresses.{name}"),
                    format!("{address:?} names port 0, which no server listens on (1-65535)"),
                ));
            }
        }
        for (key, address) in [
            ("target.nameserver", &target.nameserver),
            ("fault.confirm_address", &self.fault.confirm_address),
        ] {
            if address.as_deref().is_some_and(port_zero) {
                return Err(invalid(
                    key,
                    "names port 0, which no server listens on (1-65535)",
                ));
            }
        }
        for (name, url) in &self.server_metrics.extra {
            let key = format!("server_metrics.extra.{name}");
            let name_ok = !name.is_empty()
                && name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-_.:".contains(&b));
            if !name_ok {
                return Err(invalid(
                    key,
                    format!("{name:?} cannot name an endpoint in the journal (letters, digits, -, _, . and :)"),
                ));
            }
            if authority(url).contains('@') {
                return Err(invalid(
                    key,
                    "carries credentials (user:password@); the journal copies the configuration, and a scrape sends none",
                ));
            }
            if let Some(why) = host_problem(authority(url)) {
                return Err(invalid(key, why));
            }
        }
        self.check_recording_limits()
    }

    /// [`Config::check_for_recording`]'s second half: each route's verification rule, limits
    /// of zero no run meets, dev phases that would not be there, and the windows thresholds
    /// read.
    fn check_recording_limits(&self) -> Result<(), ConfigError> {
        for (i, route) in self.routes.iter().enumerate() {
            check_verify(&route.verify, i)?;
        }
        // A dev duration under a millisecond is a phase that is not there (1e-12 s rounds to
        // 0 ns): the warm-up and the cooldown may be 0 (left out), the measured span may not.
        for (key, ns, zero_allowed) in [
            ("dev.warmup_s", self.dev.warmup_ns, true),
            ("dev.measure_s", self.dev.measure_ns, false),
            ("dev.cooldown_s", self.dev.cooldown_ns, true),
        ] {
            let Some(ns) = ns else { continue };
            if ns < 1_000_000 && !(zero_allowed && ns == 0) {
                return Err(invalid(
                    key,
                    format!(
                        "{} s is under a millisecond: the phase would not be there{}",
                        ns as f64 / 1e9,
                        if zero_allowed {
                            " (0 leaves it out)"
                        } else {
                            ""
                        }
                    ),
                ));
            }
        }
        // A limit of zero on a duration no run meets (ticker lateness, a connect, a fault's
        // confirmation, a telemetry gap are never 0).
        for (key, value) in &self.configured {
            let unit = crate::pins::find(key).map(|p| (p.unit, p.rule));
            if let Some(("us" | "s", crate::pins::Rule::AtMost)) = unit {
                if value.as_f64() <= 0.0 {
                    return Err(invalid(
                        *key,
                        format!("{value} is a limit of zero, which no run meets"),
                    ));
                }
            }
        }
        let windows =
            super::thresholds::windows_of(self.fault.variant != super::FaultVariant::None);
        for (i, t) in self.thresholds.iter().enumerate() {
            if let Some(why) = t.window_problem(windows) {
                return Err(invalid(format!("thresholds.fail_on[{i}]"), why.to_string()));
            }
        }
        Ok(())
    }

    /// `[server_metrics]`: names that are metric names, a path that is a path, endpoints that
    /// are plain-HTTP URLs with a host and a port, and no more of either than the recorder
    /// journals.
    fn check_server_metrics(&self) -> Result<(), ConfigError> {
        use super::sections::SERVER_METRICS_NAMED_MAX as MAX;
        let section = &self.server_metrics;
        if section.metrics.len() > MAX {
            return Err(invalid(
                "server_metrics.metrics",
                format!(
                    "names {} families; at most {MAX} are journaled",
                    section.metrics.len()
                ),
            ));
        }
        if let Some(bad) = section
            .metrics
            .iter()
            .find(|m| !crate::prometheus::valid_name(m))
        {
            return Err(invalid(
                "server_metrics.metrics",
                format!("{bad:?} is not a Prometheus metric name ([a-zA-Z_:][a-zA-Z0-9_:]*)"),
            ));
        }
        if let Some(path) = &section.path {
            if !path.starts_with('/') || !is_field_value(path) || path.contains(' ') {
                return Err(invalid(
                    "server_metrics.path",
                    format!("{path:?} is not a request path (it starts with '/', no spaces)"),
                ));
            }
        }
        if section.extra.len() > MAX {
            return Err(invalid(
                "server_metrics.extra",
                format!("names {} endpoints; at most {MAX}", section.extra.len()),
            ));
        }
        for (name, url) in &section.extra {
            let key = format!("server_metrics.extra.{name}");
            let Some(rest) = url.strip_prefix("http://") else {
                return Err(invalid(
                    key,
                    format!("{url:?} is not an http:// URL (scrapes are plain HTTP/1.1)"),
                ));
            };
            let host = authority(url);
            if !host.contains(':') || host.ends_with(']') {
                return Err(invalid(key, format!("{url:?} names no port")));
            }
            if let Some(why) = port_problem(host) {
                return Err(invalid(key, why));
            }
            let path = &rest[host.len()..];
            if !path.starts_with('/') || !is_field_value(path) || path.contains(' ') {
                return Err(invalid(key, format!("{url:?} names no path (as /metrics)")));
            }
            if self.target.replica_addresses.contains_key(name) {
                return Err(invalid(
                    key,
                    format!("{name:?} is a replica's name; an extra endpoint needs its own"),
                ));
            }
        }
        Ok(())
    }

    /// The files the configuration names (`target.tokenizer`, each route's `prompt_file` and
    /// `images`)
    /// exist, are regular files and are within their size limits. `config check` and the
    /// recorder ask this; the analysis does not (a journal's files may be long gone).
    pub fn check_files(&self) -> Result<(), ConfigError> {
        use crate::files::{
            open_regular, IMAGE_FILE_BYTES_MAX, PROMPT_FILE_BYTES_MAX, TOKENIZER_BYTES_MAX,
        };
        let named = self
            .target
            .tokenizer
            .iter()
            .map(|t| ("target.tokenizer".to_owned(), t, TOKENIZER_BYTES_MAX))
            .chain(self.routes.iter().enumerate().filter_map(|(i, r)| {
                let file = r.prompt_file.as_ref()?;
                Some((
                    format!("routes[{i}].prompt_file"),
                    file,
                    PROMPT_FILE_BYTES_MAX,
                ))
            }))
            .chain(self.routes.iter().enumerate().flat_map(|(i, r)| {
                r.images.iter().enumerate().map(move |(k, image)| {
                    (
                        format!("routes[{i}].images[{k}]"),
                        image,
                        IMAGE_FILE_BYTES_MAX,
                    )
                })
            }));
        for (key, path, limit) in named {
            let size = open_regular(path.as_ref())
                .and_then(|f| f.metadata())
                .map_err(|e| invalid(&key, format!("{path:?} cannot be read: {e}")))?
                .len();
            if size > limit {
                return Err(invalid(
                    key,
                    format!("{path:?} is {size} bytes, over the limit of {limit} bytes"),
                ));
            }
        }
        // A replay's trace is read whole: its every line must be a time in order.
        if self.workload.model == super::workload::Model::Replay {
            self.read_trace()?;
        }
        Ok(())
    }

    pub(super) fn check_domains(&self) -> Result<(), ConfigError> {
        self.check_server_metrics()?;
        let target = &self.target;
        if authority(&target.base_url).contains('@') {
            return Err(invalid(
                "target.base_url",
                "carries credentials (user:password@); the journal copies the configuration, so \
                 put the key in an environment variable and name it in target.api_key_env",
            ));
        }
        if let Some(why) = port_problem(authority(&target.base_url)) {
            return Err(invalid("target.base_url", why));
        }
        if target.base_url.contains('#') {
            return Err(invalid(
                "target.base_url",
                "has a #fragment, which is never sent; remove it",
            ));
        }
        if target.model.trim().is_empty() {
            return Err(invalid(
                "target.model",
                "is empty; name the model the server serves",
            ));
        }
        for (name, value) in &target.headers {
            let key = format!("target.headers.{name}");
            if let Some(why) = header_name_problem(name) {
                return Err(invalid(key, why));
            }
            if !is_field_value(value) {
                return Err(invalid(
                    key,
                    "holds a character a header line cannot carry (CR, LF, NUL or non-ASCII)",
                ));
            }
        }
        for (name, variable) in &target.secret_headers {
            let key = format!("target.secret_headers.{name}");
            let lower = name.to_ascii_lowercase();
            if let Some(why) = header_name_problem(name) {
                return Err(invalid(key, why));
            }
            let key_header = target.api_key_env.as_ref().map(|_| target.api_key_header());
            if target.headers.keys().any(|h| h.eq_ignore_ascii_case(name))
                || key_header.as_deref() == Some(lower.as_str())
            {
                return Err(invalid(
                    key,
                    "is also set in [target.headers] or by target.api_key_env; send it once",
                ));
            }
            if !is_variable_name(variable) {
                return Err(invalid(
                    key,
                    format!(
                        "{variable:?} is not an environment variable name (letters, digits, _): \
                         the value is read from the variable it names, never written here"
                    ),
                ));
            }
        }
        if let Some(variable) = &target.api_key_env {
            if !is_variable_name(variable) {
                return Err(invalid(
                    "target.api_key_env",
                    format!(
                        "{variable:?} is not an environment variable name (letters, digits, _)"
                    ),
                ));
            }
        }
        if let Some(header) = &target.api_key_header {
            if target.api_key_env.is_none() {
                return Err(invalid(
                    "target.api_key_header",
                    "names where the key goes, but target.api_key_env does not say where it comes from",
                ));
            }
            let lower = header.to_ascii_lowercase();
            if !is_token(header) || HEADERS_RECORDER_WRITES.contains(&lower.as_str()) {
                return Err(invalid(
                    "target.api_key_header",
                    format!("{header:?} cannot carry the key (not a header name, or one the recorder writes)"),
                ));
            }
            if target
                .headers
                .keys()
                .any(|h| h.eq_ignore_ascii_case(header))
            {
                return Err(invalid(
                    "target.api_key_header",
                    format!("{header:?} is also set in [target.headers]"),
                ));
            }
        }
        if target.idle_limit_ms == 0 || target.idle_limit_ms > 3_600_000 {
            return Err(invalid(
                "target.idle_limit_ms",
                format!(
                    "{} is outside 1..=3600000 ms (default 4000, below the common 5 s server idle timeout)",
                    target.idle_limit_ms
                ),
            ));
        }
        if let Some(gap) = target.token_gap_ms {
            if !(gap.is_finite() && gap > 0.0 && gap <= 60_000.0) {
                return Err(invalid(
                    "target.token_gap_ms",
                    format!("{gap} is not in (0, 60000] ms (the expected gap between tokens)"),
                ));
            }
        }
        if let Some(path) = &target.preflight_path {
            if !path.starts_with('/') {
                return Err(invalid(
                    "target.preflight_path",
                    format!("{path:?} must start with /"),
                ));
            }
        }
        if self
            .target
            .tokenizer
            .as_deref()
            .is_some_and(|t| t.trim().is_empty())
        {
            return Err(invalid("target.tokenizer", "is empty"));
        }
        for (i, route) in self.routes.iter().enumerate() {
            if route.label.trim().is_empty() {
                return Err(invalid(format!("routes[{i}].label"), "is empty"));
            }
            if route.prompt_tokens == 0 {
                return Err(invalid(
                    format!("routes[{i}].prompt_tokens"),
                    "must be at least 1 (the unique request prefix alone is about 4 tokens)",
                ));
            }
            if route
                .prompt_file
                .as_deref()
                .is_some_and(|f| f.trim().is_empty())
            {
                return Err(invalid(format!("routes[{i}].prompt_file"), "is empty"));
            }
            if let Some(problem) = route.output_tokens.as_ref().and_then(|o| o.problem()) {
                return Err(invalid(format!("routes[{i}].output_tokens"), problem));
            }
            if let Some(lengths) = &route.input_tokens {
                if let Some(problem) = lengths.problem() {
                    return Err(invalid(format!("routes[{i}].input_tokens"), problem));
                }
                if *lengths == Lengths::Dataset {
                    return Err(invalid(
                        format!("routes[{i}].input_tokens"),
                        "cannot be \"dataset\": a prompt file's prompts are sent as they are; give prompt_file and leave input_tokens out",
                    ));
                }
            }
            if route.prompt_format.is_some() && route.prompt_file.is_none() {
                return Err(invalid(
                    format!("routes[{i}].prompt_format"),
                    "says how prompt_file is read, and the route has no prompt_file",
                ));
            }
            if route.path.contains(['\r', '\n', ' ', '#']) {
                return Err(invalid(
                    format!("routes[{i}].path"),
                    "holds a space, CR, LF or #, which a request line cannot carry",
                ));
            }
            route
                .check_parts(&format!("routes[{i}]"))
                .map_err(|e| invalid(e.key, e.problem))?;
        }
        for (key, value) in [
            ("fault.pid_file", &self.fault.pid_file),
            ("fault.admin_address", &self.fault.admin_address),
            ("fault.confirm_address", &self.fault.confirm_address),
        ] {
            if value.as_deref().is_some_and(|v| v.trim().is_empty()) {
                return Err(invalid(key, "is empty"));
            }
        }
        for (key, rate) in [
            ("schedule.rate_rps", self.schedule.rate_rps),
            (
                "calibration.lambda_max_rps",
                self.calibration.lambda_max_rps,
            ),
            ("calibration.ceiling_rps", self.calibration.ceiling_rps),
            (
                "calibration.ceiling_offered_rps",
                self.calibration.ceiling_offered_rps,
            ),
        ] {
            if let Some(rate) = rate {
                if !(rate.is_finite() && rate > 0.0) {
                    return Err(invalid(key, format!("{rate} must be a positive rate")));
                }
            }
        }
        if let Some(ms) = self.calibration.probe_ms {
            if !(ms.is_finite() && ms > 0.0) {
                return Err(invalid(
                    "calibration.probe_ms",
                    format!("{ms} must be a positive time in ms (calibration.json's probe_ms)"),
                ));
            }
        }
        if self.calibration.ceiling_rps.is_some() != self.calibration.ceiling_offered_rps.is_some()
        {
            return Err(invalid(
                "calibration.ceiling_rps",
                "comes with calibration.ceiling_offered_rps, the rate its step offered: give both, as `percentes calibrate` prints them",
            ));
        }
        let params = self.schedule_params();
        if let Err(why) = params.validate() {
            return Err(invalid("schedule.rate_rps", why.to_string()));
        }
        // A replay's requests are its trace's, which the recorder reads (and refuses empty).
        let replay = matches!(params.workload, crate::schedule::Workload::Replay { .. });
        if !replay && params.iter().next().is_none() {
            return Err(invalid(
                "schedule.rate_rps",
                format!(
                    "{} rps schedules no request over the run's {:.3} s; raise the rate",
                    self.rate_rps(),
                    params.total_duration_ns() as f64 / 1e9
                ),
            ));
        }
        Ok(())
    }
}

/// `[routes.verify]`: a status a server can send, a header that is a header, a top-level JSON
/// field with the value it must have, a hash that is one.
fn check_verify(verify: &super::Verify, i: usize) -> Result<(), ConfigError> {
    let key = |leaf: &str| format!("routes[{i}].verify.{leaf}");
    if let Some(status) = verify.status {
        if !(100..=599).contains(&status) {
            return Err(invalid(
                key("status"),
                format!("{status} is not an HTTP status (100 to 599)"),
            ));
        }
    }
    if let Some(header) = &verify.header {
        let (name, value) = header.split_once(':').unwrap_or((header, ""));
        if !is_token(name.trim()) || !is_field_value(value) {
            return Err(invalid(
                key("header"),
                format!("{header:?} is not `name` or `name: value` (an HTTP header name, and a value a header line can carry)"),
            ));
        }
    }
    if let Some(field) = &verify.json_field {
        if field.trim().is_empty() || field.contains('.') || field.chars().any(char::is_control) {
            return Err(invalid(
                key("json_field"),
                format!("{field:?} is not a top-level field name (no path: `a.b` is not followed)"),
            ));
        }
        if verify.json_value.is_none() {
            return Err(invalid(
                key("json_field"),
                "needs verify.json_value, the value the field must have",
            ));
        }
    }
    if let Some(hex) = &verify.content_blake3 {
        if crate::journal::parse_hash(hex).is_none() {
            return Err(invalid(key("content_blake3"), "must be 64 hex digits"));
        }
    }
    Ok(())
}
