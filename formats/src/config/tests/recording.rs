//! Values that parsed and could not mean anything, each refused when a configuration is loaded
//! to record, with its key, line and column (issue 50 item 5); a journal's own configuration is
//! still read as recorded.

use super::{load, BASE};
use crate::config::Config;

/// `BASE` with `lines` added at the end of its `[target]` table.
fn in_target(lines: &str) -> String {
    BASE.replace("\n[schedule]", &format!("{lines}\n\n[schedule]"))
}

/// `BASE` with `lines` added after the route.
fn after_route(lines: &str) -> String {
    format!("{BASE}{lines}\n")
}

/// `BASE` as a run without a fault, with `[dev]` durations in seconds.
fn fault_free(dev: &str) -> String {
    BASE.replace("time_factor = 10", dev)
        .replace("arrival = \"poisson\"", "arrival = \"poisson\"\nrate_rps = 5.0")
        .replace(
            "variant = \"clean-delete\"\nvictim = \"replica-1\"\ninjector = \"kill-pid-file\"\npid_file = \"/run/replica-1.pid\"",
            "variant = \"none\"",
        )
}

fn refused(text: &str, key: &str, says: &str) {
    let err = load(text)
        .err()
        .unwrap_or_else(|| panic!("loaded, and must not: {key} in\n{text}"))
        .to_string();
    assert!(
        err.contains(&format!("config key `{key}` (line ")) && err.contains(says),
        "{key}: {err}"
    );
}

#[test]
fn out_of_domain_values_are_refused_with_key_line_and_column() {
    let long_host = format!("http://{}:80", "a".repeat(70_000));
    for url in [
        "http://[::1",
        "http://a b:80",
        long_host.as_str(),
        "http://[zz]:80",
    ] {
        let text = BASE.replace("http://127.0.0.1:8000", url);
        refused(&text, "target.base_url", "");
    }
    assert!(load(&BASE.replace("127.0.0.1:8000", "[::1]:8000")).is_ok());
    assert!(load(&BASE.replace("127.0.0.1:8000", "vllm_server.local:8000")).is_ok());
    for name in ["\"\"", "\"a b\"", "\"..\""] {
        let text = in_target(&format!("\n[target.tls]\nserver_name = {name}"));
        refused(&text, "target.tls.server_name", "neither a DNS name");
    }
    assert!(load(&in_target(
        "\n[target.tls]\nserver_name = \"api.example.com\""
    ))
    .is_ok());
    refused(
        &in_target(r#"preflight_path = "/v1/models HTTP/1.1\r\nX-Injected: yes\r\nX-Pad: ""#),
        "target.preflight_path",
        "CR, LF",
    );
    refused(
        &in_target("replica_addresses = { \"replica-0\" = \"127.0.0.1:0\" }"),
        "target.replica_addresses.replica-0",
        "port 0",
    );
    refused(
        &in_target("nameserver = \"127.0.0.1:0\""),
        "target.nameserver",
        "port 0",
    );
}

#[test]
fn a_verification_rule_out_of_its_domain_is_refused_with_key_line_and_column() {
    for (line, key, says) in [
        (
            "status = 0",
            "routes[0].verify.status",
            "not an HTTP status",
        ),
        (
            "status = 99",
            "routes[0].verify.status",
            "not an HTTP status",
        ),
        (
            "status = 600",
            "routes[0].verify.status",
            "not an HTTP status",
        ),
        ("header = \"\"", "routes[0].verify.header", "header name"),
        (
            "json_field = \"\"\njson_value = \"x\"",
            "routes[0].verify.json_field",
            "top-level",
        ),
        (
            "json_field = \"..\"\njson_value = \"x\"",
            "routes[0].verify.json_field",
            "top-level",
        ),
        (
            "json_field = \"id\"",
            "routes[0].verify.json_field",
            "json_value",
        ),
    ] {
        refused(&after_route(&format!("[routes.verify]\n{line}")), key, says);
    }
}

#[test]
fn thresholds_extra_endpoints_and_limits_out_of_their_domain_are_refused() {
    refused(
        &after_route("[thresholds]\nfail_on = [\"goodput@nowhere >= 1%\"]"),
        "thresholds.fail_on[0]",
        "not a window a report has",
    );
    refused(
        &after_route("[thresholds]\nfail_on = [\"goodput@measurement >= 1%\"]"),
        "thresholds.fail_on[0]",
        "does not have",
    );
    assert!(load(&after_route(
        "[thresholds]\nfail_on = [\"goodput@fault >= 1%\"]"
    ))
    .is_ok());
    for (table, says) in [
        (
            "{ \"\" = \"http://127.0.0.1:9100/metrics\" }",
            "cannot name",
        ),
        (
            "{ node = \"http://user:pw@127.0.0.1:9100/metrics\" }",
            "credentials",
        ),
        (
            "{ node = \"http://127.0.0.1:9100/metrics?token=abc\" }",
            "credential",
        ),
    ] {
        let text = after_route(&format!("[server_metrics]\nextra = {table}"));
        let err = load(&text).unwrap_err().to_string();
        assert!(
            err.contains("server_metrics.extra.") && err.contains("(line ") && err.contains(says),
            "{table}: {err}"
        );
    }
    refused(
        &BASE.replace(
            "[calibration]",
            "[gates]\nruntime_stall_p99_us = 0\n\n[calibration]",
        ),
        "gates.runtime_stall_p99_us",
        "limit of zero",
    );
    refused(
        &fault_free("measure_s = 1e-12"),
        "dev.measure_s",
        "under a millisecond",
    );
    assert!(load(&fault_free("measure_s = 2.0")).is_ok());
}

#[test]
fn credentials_in_any_query_are_refused_before_they_reach_the_journal() {
    for (text, key) in [
        (
            BASE.replace(
                "http://127.0.0.1:8000",
                "http://127.0.0.1:8000/?api_key=SECRET",
            ),
            "target.base_url",
        ),
        (
            BASE.replace("/v1/chat/completions", "/v1/chat/completions?sig=SECRET"),
            "routes[0].path",
        ),
        (
            BASE.replace(
                "/v1/chat/completions",
                "/v1/chat/completions?access_token=SECRET",
            ),
            "routes[0].path",
        ),
        (
            in_target("preflight_path = \"/v1/models?key=SECRET\""),
            "target.preflight_path",
        ),
    ] {
        refused(&text, key, "looks like a credential");
    }
    assert!(load(&BASE.replace("/v1/chat/completions", "/v1/chat/completions?stream=1")).is_ok());
}

#[test]
fn a_journal_keeps_the_reading_it_was_recorded_with() {
    // A value refused for recording since: the journal's configuration still loads to analyze.
    let text = after_route("[routes.verify]\nstatus = 600");
    assert!(load(&text).is_err());
    assert!(Config::parse_journaled(text.as_bytes()).is_ok());
}
