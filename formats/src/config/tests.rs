use super::*;

/// A small valid dev config with sections for every mixed section.
const BASE: &str = r#"schema_version = 1
profile = "dev"

[dev]
time_factor = 10

[target]
kind = "mock"
base_url = "http://127.0.0.1:8000"
model = "mock"
replicas = ["replica-0", "replica-1"]

[schedule]
seed = 1
arrival = "poisson"

[calibration]
lambda_max_rps = 20.0

[fault]
variant = "clean-delete"
victim = "replica-1"
injector = "kill-pid-file"
pid_file = "/run/replica-1.pid"

[[routes]]
label = "chat"
path = "/v1/chat/completions"
"#;

/// `BASE` with `key = value` written into its section (the section is added when absent).
fn with_key(base: &str, key: &str, value: &str) -> String {
    match key.split_once('.') {
        None => {
            let mut out = String::new();
            let mut replaced = false;
            for line in base.lines() {
                if line.starts_with(&format!("{key} =")) {
                    out.push_str(&format!("{key} = {value}\n"));
                    replaced = true;
                } else {
                    out.push_str(line);
                    out.push('\n');
                }
            }
            if !replaced {
                out = format!("{key} = {value}\n{out}");
            }
            out
        }
        Some((section, leaf)) => {
            let header = format!("[{section}]\n");
            match base.find(&header) {
                Some(at) => {
                    let insert = at + header.len();
                    format!("{}{leaf} = {value}\n{}", &base[..insert], &base[insert..])
                }
                None => format!("{base}\n[{section}]\n{leaf} = {value}\n"),
            }
        }
    }
}

fn load(text: &str) -> Result<Config, ConfigError> {
    Config::parse(text.as_bytes())
}

/// A value that weakens the pin, in TOML syntax.
fn weakened(pin: &Pin) -> String {
    match (pin.rule, pin.value) {
        (Rule::AtMost, Value::Int(v)) | (Rule::Exactly, Value::Int(v)) => (v + 1).to_string(),
        (Rule::AtLeast, Value::Int(v)) => (v - 1).to_string(),
        (Rule::AtMost, Value::Float(v)) | (Rule::Exactly, Value::Float(v)) => {
            format!("{:?}", v * 1.5)
        }
        (Rule::AtLeast, Value::Float(v)) => format!("{:?}", v * 0.99),
    }
}

/// A value that is stricter than the pin (only for ordered rules).
fn stricter(pin: &Pin) -> Option<String> {
    match (pin.rule, pin.value) {
        (Rule::AtMost, Value::Int(v)) if v > 0 => Some((v - 1).to_string()),
        (Rule::AtMost, Value::Float(v)) => Some(format!("{:?}", v * 0.5)),
        (Rule::AtLeast, Value::Int(v)) => Some((v + 1).to_string()),
        (Rule::AtLeast, Value::Float(v)) => Some(format!("{:?}", (v + 1.0) / 2.0)),
        _ => None,
    }
}

/// The pin as TOML.
fn pinned(pin: &Pin) -> String {
    match pin.value {
        Value::Float(v) => format!("{v:?}"),
        other => other.to_string(),
    }
}

/// Proves one pin: weakening is refused with an error naming key, clause, pin and value; the
/// pinned value and a stricter one load.
fn check_pin(key: &str) {
    let pin = pins::find(key).expect("a pin of the table");
    let bad = weakened(pin);
    let error =
        load(&with_key(BASE, key, &bad)).expect_err(&format!("{key} = {bad} must be refused"));
    if key == "schema_version" {
        assert!(matches!(error, ConfigError::Invalid { .. }), "{error}");
        assert!(error.to_string().contains("schema_version = 1"), "{error}");
        return;
    }
    match &error {
        ConfigError::WeakensPin { key: k, clause, .. } => {
            assert_eq!(*k, key);
            assert_eq!(*clause, pin.clause);
        }
        other => panic!("{key} = {bad}: expected WeakensPin, got {other:?}"),
    }
    let message = error.to_string();
    assert!(message.contains(key), "{message}");
    assert!(message.contains(pin.clause), "{message}");
    assert!(message.contains(&pin.value.to_string()), "{message}");
    let shown_bad = bad.trim_end_matches(".0");
    assert!(message.contains(shown_bad), "{message} should show {bad}");

    let config = load(&with_key(BASE, key, &pinned(pin)))
        .unwrap_or_else(|e| panic!("{key} at its pin: {e}"));
    assert_eq!(config.value(pin).as_f64(), pin.value.as_f64());
    if let Some(strict) = stricter(pin) {
        load(&with_key(BASE, key, &strict))
            .unwrap_or_else(|e| panic!("{key} = {strict} is stricter: {e}"));
    }
}

macro_rules! pin_tests {
    ($($name:ident => $key:literal,)*) => {
        $(#[test] fn $name() { check_pin($key); })*
        const TESTED: &[&str] = &[$($key),*];
    };
}

pin_tests! {
    weakening_warmup_is_refused => "experiment.warmup_s",
    weakening_baseline_is_refused => "experiment.baseline_s",
    weakening_recovery_timeout_is_refused => "experiment.recovery_timeout_s",
    weakening_cooldown_is_refused => "experiment.cooldown_s",
    weakening_lambda_r_fraction_is_refused => "calibration.lambda_r_fraction",
    weakening_max_tokens_is_refused => "target.max_tokens",
    weakening_partition_is_refused => "fault.partition_s",
    weakening_degradation_is_refused => "fault.degradation_s",
    weakening_share_min_is_refused => "gates.replica_share_min_percent",
    weakening_share_max_is_refused => "gates.replica_share_max_percent",
    weakening_connection_floor_is_refused => "client.connections_floor_per_replica",
    weakening_retries_is_refused => "client.retries",
    weakening_skew_p99_is_refused => "gates.send_skew_p99_ms",
    weakening_skew_max_is_refused => "gates.send_skew_max_ms",
    weakening_undispatched_is_refused => "gates.undispatched_max",
    weakening_cpu_max_is_refused => "gates.host_cpu_max_percent",
    weakening_cpu_window_is_refused => "gates.host_cpu_window_s",
    weakening_runtime_stall_is_refused => "gates.runtime_stall_p99_us",
    weakening_timeout_is_refused => "client.timeout_s",
    weakening_crossing_tolerance_is_refused => "analysis.crossing_tolerance",
    weakening_conditional_caveat_is_refused => "analysis.conditional_caveat_fraction",
    weakening_intertoken_floor_is_refused => "analysis.intertoken_floor_us",
    weakening_histogram_lowest_is_refused => "analysis.histogram_lowest_us",
    weakening_histogram_highest_is_refused => "analysis.histogram_highest_us",
    weakening_histogram_figures_is_refused => "analysis.histogram_significant_figures",
    weakening_slo_ttft_is_refused => "slo.ttft_ms",
    weakening_slo_e2e_is_refused => "slo.e2e_ms",
    weakening_baseline_goodput_is_refused => "gates.baseline_goodput_min",
    weakening_detector_window_is_refused => "recovery.window_s",
    weakening_detector_entry_is_refused => "recovery.entry_percent",
    weakening_detector_exit_is_refused => "recovery.exit_percent",
    weakening_detector_hold_is_refused => "recovery.hold_s",
    weakening_goodput_bucket_is_refused => "recovery.bucket_s",
    weakening_campaign_runs_is_refused => "campaign.runs",
    weakening_schema_version_is_refused => "schema_version",
    weakening_confidence_is_refused => "statistics.confidence_percent",
    weakening_calibration_start_is_refused => "calibration.start_rps",
    weakening_calibration_fine_step_is_refused => "calibration.fine_step_percent",
    weakening_calibration_settle_is_refused => "calibration.settle_s",
    weakening_calibration_measure_is_refused => "calibration.measure_s",
    weakening_calibration_goodput_is_refused => "calibration.step_goodput_min",
    weakening_calibration_waiting_is_refused => "calibration.step_waiting_max",
    weakening_calibration_disagreement_is_refused => "calibration.disagreement_percent",
    weakening_calibration_step_attempts_is_refused => "calibration.step_attempts_max",
    weakening_waiting_queue_is_refused => "gates.waiting_queue_max",
    weakening_shard_start_lateness_is_refused => "shards.start_late_max_ms",
    weakening_shard_clock_error_is_refused => "shards.clock_error_max_ms",
}

#[test]
fn every_configurable_pin_has_its_test() {
    for pin in PINS.iter().filter(|p| p.configurable) {
        assert!(
            TESTED.contains(&pin.key),
            "pin {} has no weakening test: add it to pin_tests!",
            pin.key
        );
    }
}

#[test]
fn a_pin_no_configuration_can_state_is_refused_as_unknown() {
    let error = load(&with_key(BASE, "slo.sweep_ttft_low_ms", "700")).unwrap_err();
    assert!(
        matches!(&error, ConfigError::UnknownKey { key, .. } if key == "slo.sweep_ttft_low_ms"),
        "{error:?}"
    );
}

#[test]
fn examples_load_under_their_profiles() {
    for profile in [Profile::Dev, Profile::Experiment, Profile::Hosted] {
        let config =
            load(example(profile)).unwrap_or_else(|e| panic!("{} example: {e}", profile.name()));
        assert_eq!(config.profile, profile);
    }
    let dev = load(example(Profile::Dev)).unwrap();
    assert!((dev.rate_rps() - 26.0).abs() < 1e-12);
    let why = dev.publishability().unwrap_err();
    assert!(
        matches!(why, super::NotPublishable::DevScaled { .. }),
        "{why}"
    );
    assert!(why.to_string().starts_with("NOT PUBLISHABLE"));
    assert!(load(example(Profile::Experiment))
        .unwrap()
        .publishability()
        .is_ok());
}

#[test]
fn dev_factor_scales_durations_and_nothing_else() {
    let dev = load(BASE).unwrap();
    assert_eq!(dev.time_factor, 10);
    assert_eq!(dev.duration_ns(&pins::CLIENT_TIMEOUT_S), 3_000_000_000);
    assert_eq!(
        dev.duration_ns(&pins::EXPERIMENT_BASELINE_S),
        30_000_000_000
    );
    assert_eq!(
        dev.duration_ns(&pins::GATES_HOST_CPU_WINDOW_S),
        5_000_000_000,
        "a gate window is not a timeline duration"
    );
    assert_eq!(dev.value(&pins::GATES_SEND_SKEW_P99_MS), Value::Int(5));
    assert_eq!(dev.inject_at_ns(), Some(36_000_000_000));
    let phases: Vec<_> = dev
        .schedule_params()
        .phases
        .iter()
        .map(|p| (p.name.clone(), p.duration_ns))
        .collect();
    assert_eq!(
        phases,
        [
            ("warmup".to_string(), 6_000_000_000),
            ("baseline".to_string(), 30_000_000_000),
            ("fault-recovery".to_string(), 60_000_000_000),
            ("cooldown".to_string(), 6_000_000_000)
        ]
    );
    let experiment = load(
        &BASE
            .replace("profile = \"dev\"", "profile = \"experiment\"")
            .replace("[dev]\ntime_factor = 10\n", ""),
    )
    .unwrap();
    assert_eq!(
        experiment.duration_ns(&pins::CLIENT_TIMEOUT_S),
        30_000_000_000
    );
}

#[test]
fn unknown_keys_are_refused_with_the_known_ones() {
    let error = load(&with_key(BASE, "gates.skew_p99", "5")).unwrap_err();
    assert!(
        matches!(&error, ConfigError::UnknownKey { key, known, .. } if key == "gates.skew_p99" && known.contains(&"gates.send_skew_p99_ms".to_string())),
        "{error:?}"
    );
    let error = load(&with_key(BASE, "target.urll", "\"x\"")).unwrap_err();
    assert!(error.to_string().contains("urll"), "{error}");
    let error = load(&format!("{BASE}\n[extra]\na = 1\n")).unwrap_err();
    assert!(error.to_string().contains("extra"), "{error}");
}

#[test]
fn wrong_types_are_refused() {
    let error = load(&with_key(BASE, "client.timeout_s", "\"30\"")).unwrap_err();
    assert!(
        error.to_string().contains("client.timeout_s")
            && error.to_string().contains("whole number"),
        "{error}"
    );
    let error = load(&with_key(BASE, "client.timeout_s", "30.0")).unwrap_err();
    assert!(error.to_string().contains("whole number"), "{error}");
}

/// The error's text, and where it says it is.
fn refusal(text: &str) -> (String, Option<Location>) {
    let error = load(text).expect_err("must be refused");
    (error.to_string(), error.location())
}

#[test]
fn a_typed_value_of_the_wrong_kind_names_its_full_key_line_and_column() {
    let text = BASE.replace("seed = 1", "seed = \"one\"");
    let (message, at) = refusal(&text);
    let line = 1 + BASE.lines().position(|l| l.starts_with("seed")).unwrap();
    // The value starts in column 8, after `seed = `.
    assert_eq!(at, Some(Location { line, column: 8 }), "{message}");
    let place = format!("config key `schedule.seed` (line {line}, column 8): ");
    assert!(message.starts_with(&place), "{message}");
    assert!(message.contains("expected a whole number"), "{message}");
    assert!(message.contains("found the text \"one\""), "{message}");
    assert!(!message.contains("u64"), "{message}");
}

#[test]
fn a_typo_inside_an_array_of_tables_names_the_element_and_the_key() {
    let text = format!("{BASE}\n[[routes]]\nlabel = \"b\"\npth = \"/v1/b\"\n");
    let (message, at) = refusal(&text);
    let line = BASE.lines().count() + 4;
    assert_eq!(at, Some(Location { line, column: 1 }), "{message}");
    assert!(message.contains("`routes[1].pth`"), "{message}");
    assert!(message.contains("unknown key `pth`"), "{message}");
    assert!(
        message.contains("path"),
        "{message} should name the keys a route takes"
    );
}

#[test]
fn a_relation_between_keys_points_at_the_key_it_names() {
    let text = BASE.replace("path = \"/v1/chat/completions\"", "path = \"v1/chat\"");
    let (message, at) = refusal(&text);
    assert!(message.contains("`routes[0].path`"), "{message}");
    assert_eq!(at.map(|a| a.line), Some(BASE.lines().count()), "{message}");
    let (message, at) = refusal(&with_key(BASE, "gates.send_skew_p99_ms", "9"));
    assert!(message.contains("weakens"), "{message}");
    assert!(at.is_some(), "a weakened pin is placed too: {message}");
}

#[test]
fn a_missing_key_is_named_in_full() {
    let text = BASE.replace("seed = 1\n", "");
    let (message, _) = refusal(&text);
    assert!(message.contains("`schedule.seed`"), "{message}");
    assert!(message.contains("missing"), "{message}");
}

#[test]
fn an_unreadable_file_is_a_read_error_with_its_path() {
    let error = Config::load(Path::new("/nonexistent/percentes.toml")).unwrap_err();
    assert!(matches!(error, ConfigError::Read { .. }), "{error:?}");
    let message = error.to_string();
    assert!(message.contains("/nonexistent/percentes.toml"), "{message}");
    assert!(!message.contains("not a valid configuration"), "{message}");
}

#[test]
fn syntax_errors_say_where() {
    let error = load("schema_version = 1\nprofile = \n").unwrap_err();
    assert!(matches!(error, ConfigError::Syntax { .. }));
    assert_eq!(error.location().map(|at| at.line), Some(2), "{error}");
    assert!(error.to_string().contains("line 2"), "{error}");
}

#[test]
fn ignore_eos_follows_the_target() {
    let error = load(&with_key(BASE, "target.ignore_eos", "false")).unwrap_err();
    assert!(
        error.to_string().contains("§6") && error.to_string().contains("ignore_eos"),
        "{error}"
    );
    let hosted = example(Profile::Hosted);
    let error = load(&hosted.replace("ignore_eos = false", "ignore_eos = true")).unwrap_err();
    assert!(error.to_string().contains("ignore_eos"), "{error}");
}

#[test]
fn hosted_runs_inject_no_fault_and_report_server_pins_unverifiable() {
    let hosted = example(Profile::Hosted);
    let error =
        load(&hosted.replace("variant = \"none\"", "variant = \"clean-delete\"")).unwrap_err();
    assert!(error.to_string().contains("§6"), "{error}");
    let config = load(hosted).unwrap();
    let server: Vec<_> = config
        .pins_in_force()
        .into_iter()
        .filter(|p| p.not_verifiable)
        .collect();
    assert!(!server.is_empty());
    assert!(server.iter().all(|p| p.pin.side == Side::Server));
    let error =
        load(&hosted.replace("profile = \"hosted\"", "profile = \"experiment\"")).unwrap_err();
    assert!(error.to_string().contains("hosted"), "{error}");
}

#[test]
fn fault_rate_is_derived_and_a_contradicting_rate_is_refused() {
    let error = load(&with_key(BASE, "schedule.rate_rps", "30.0")).unwrap_err();
    assert!(
        error.to_string().contains("§1") && error.to_string().contains("26"),
        "{error}"
    );
    load(&with_key(BASE, "schedule.rate_rps", "26.0")).unwrap();
    let error = load(&BASE.replace("lambda_max_rps = 20.0", "")).unwrap_err();
    assert!(error.to_string().contains("lambda_max"), "{error}");
    let error =
        load(&BASE.replace("victim = \"replica-1\"", "victim = \"replica-9\"")).unwrap_err();
    assert!(error.to_string().contains("fault.victim"), "{error}");
}

#[test]
fn dev_section_outside_dev_is_refused() {
    let error = load(&BASE.replace("profile = \"dev\"", "profile = \"experiment\"")).unwrap_err();
    assert!(error.to_string().contains("[dev]"), "{error}");
    let error = load(&BASE.replace("time_factor = 10", "time_factor = 0")).unwrap_err();
    assert!(error.to_string().contains("dev.time_factor"), "{error}");
}

#[test]
fn hash_is_of_the_raw_bytes() {
    let a = load(BASE).unwrap();
    let b = load(&format!("{BASE}# a comment changes the bytes\n")).unwrap();
    assert_eq!(a.hash(), *blake3::hash(BASE.as_bytes()).as_bytes());
    assert_ne!(a.hash(), b.hash());
    assert_eq!(a.raw_bytes(), BASE.as_bytes());
}

#[test]
fn non_finite_values_are_refused() {
    let error = load(&with_key(BASE, "gates.baseline_goodput_min", "nan")).unwrap_err();
    assert!(matches!(error, ConfigError::WeakensPin { .. }), "{error:?}");
    let error = load(&with_key(BASE, "gates.waiting_queue_max", "-inf")).unwrap_err();
    assert!(matches!(error, ConfigError::WeakensPin { .. }), "{error:?}");
}

#[test]
fn a_fault_run_needs_a_complete_injector() {
    let error = load(&BASE.replace(
        "injector = \"kill-pid-file\"\npid_file = \"/run/replica-1.pid\"\n",
        "",
    ))
    .unwrap_err();
    assert!(error.to_string().contains("injector"), "{error}");
    let error =
        load(&BASE.replace("injector = \"kill-pid-file\"", "injector = \"exec\"")).unwrap_err();
    assert!(error.to_string().contains("fire_command"), "{error}");
    let error = load(&BASE.replace("injector = \"kill-pid-file\"", "injector = \"mock-admin\""))
        .unwrap_err();
    assert!(error.to_string().contains("admin_address"), "{error}");
}

/// A rollout's release map (SPEC §10 "Rollouts"): declared replicas only, each a printable name.
#[test]
fn replica_releases_name_declared_replicas_and_printable_releases() {
    let ok = with_key(
        BASE,
        "target.replica_releases",
        r#"{ "replica-0" = "stable", "replica-1" = "candidate (max-num-seqs 16)" }"#,
    );
    let config = load(&ok).unwrap();
    assert_eq!(config.target.replica_releases["replica-0"], "stable");
    for (map, words) in [
        (
            r#"{ "replica-7" = "stable" }"#,
            "target.replica_releases.replica-7",
        ),
        (r#"{ "replica-0" = "" }"#, "is not a release name"),
        (r#"{ "replica-0" = "a\nb" }"#, "is not a release name"),
    ] {
        let error = load(&with_key(BASE, "target.replica_releases", map))
            .unwrap_err()
            .to_string();
        assert!(error.contains(words), "{map}: {error}");
    }
    let long = format!(r#"{{ "replica-0" = "{}" }}"#, "r".repeat(129));
    let error = load(&with_key(BASE, "target.replica_releases", &long))
        .unwrap_err()
        .to_string();
    assert!(error.contains("1-128 bytes"), "{error}");
}

#[test]
fn replica_addresses_name_declared_replicas_by_host_and_port() {
    let ok = with_key(
        BASE,
        "target.replica_addresses",
        r#"{ "replica-0" = "127.0.0.1:8001", "replica-1" = "[::1]:8002" }"#,
    );
    let config = load(&ok).unwrap();
    assert_eq!(config.target.replica_addresses["replica-1"], "[::1]:8002");
    let stranger = with_key(
        BASE,
        "target.replica_addresses",
        r#"{ "replica-9" = "127.0.0.1:8001" }"#,
    );
    let error = load(&stranger).unwrap_err().to_string();
    assert!(
        error.contains("target.replica_addresses.replica-9")
            && error.contains("not one of target.replicas"),
        "{error}"
    );
    // A DNS name (a headless Service's pod), resolved again at every probe.
    let named = with_key(
        BASE,
        "target.replica_addresses",
        r#"{ "replica-0" = "replica-0.vllm.default.svc.cluster.local:8000" }"#,
    );
    load(&named).unwrap();
    // An SRV name, whose records carry the port (and follow a replacement onto a new one).
    let srv = with_key(
        BASE,
        "target.replica_addresses",
        r#"{ "replica-0" = "_http._tcp.replica-0.vllm.default.svc.cluster.local." }"#,
    );
    load(&srv).unwrap();
    for bad in [
        "replica-0.svc",
        "_http.replica-0",
        "_http._tcp",
        "__._tcp.vllm",
        "_http._tcp.-bad-",
        "http://replica-0:8000",
        "user@replica-0:8000",
        "replica-0:0",
        "replica-0:99999",
        ":8000",
        "-bad-.svc:8000",
    ] {
        let text = with_key(
            BASE,
            "target.replica_addresses",
            &format!(r#"{{ "replica-0" = "{bad}" }}"#),
        );
        let error = load(&text).unwrap_err().to_string();
        assert!(error.contains("is not host:port"), "{bad}: {error}");
    }
}

/// `target.nameserver`: the DNS server SRV names are asked of, an IP literal with its port
/// (it is asked before any name resolves); anything else is refused with the key.
#[test]
fn a_nameserver_is_an_ip_and_a_port() {
    for ok in ["\"127.0.0.1:5353\"", "\"[::1]:53\""] {
        let config = load(&with_key(BASE, "target.nameserver", ok)).unwrap();
        assert_eq!(
            config.target.nameserver.as_deref(),
            Some(ok.trim_matches('"'))
        );
    }
    for bad in [
        "\"localhost:53\"",
        "\"127.0.0.1\"",
        "\"10.0.0.1:0x35\"",
        "53",
    ] {
        let error = load(&with_key(BASE, "target.nameserver", bad))
            .unwrap_err()
            .to_string();
        assert!(error.contains("target.nameserver"), "{bad}: {error}");
    }
}

#[test]
fn a_replica_header_is_an_http_header_name() {
    let ok = with_key(BASE, "target.replica_header", "\"x-upstream\"");
    assert_eq!(
        load(&ok).unwrap().target.replica_header.as_deref(),
        Some("x-upstream")
    );
    for bad in ["\"\"", "\"x upstream\"", "\"x-upstream:\""] {
        let text = with_key(BASE, "target.replica_header", bad);
        let error = load(&text).unwrap_err().to_string();
        assert!(error.contains("not an HTTP header name"), "{bad}: {error}");
    }
}

#[test]
fn a_calibration_step_is_one_replica_no_fault_and_the_pinned_settle_then_measure() {
    let step = BASE
        .replace(
            "replicas = [\"replica-0\", \"replica-1\"]",
            "replicas = [\"replica-0\"]",
        )
        .replace("lambda_max_rps = 20.0", "step = true")
        .replace(
            "variant = \"clean-delete\"\nvictim = \"replica-1\"\ninjector = \"kill-pid-file\"\npid_file = \"/run/replica-1.pid\"",
            "variant = \"none\"",
        );
    let step = with_key(&step, "schedule.rate_rps", "8.0");
    let config = load(&step).unwrap();
    let params = config.schedule_params();
    let phases: Vec<(&str, u64, f64)> = params
        .phases
        .iter()
        .map(|p| (p.name.as_str(), p.duration_ns, p.rate_rps))
        .collect();
    // Dev factor 10: 30 s settle and 120 s measured become 3 s and 12 s.
    assert_eq!(
        phases,
        [
            ("warmup", 3_000_000_000, 8.0),
            ("measurement", 12_000_000_000, 8.0)
        ]
    );
    assert_eq!(params.inject_at_ns, None);

    let two = step.replace("replicas = [\"replica-0\"]", "replicas = [\"a\", \"b\"]");
    let error = load(&two).unwrap_err();
    assert!(
        error.to_string().contains("§10") && error.to_string().contains("one replica"),
        "{error}"
    );
    let faulted = with_key(BASE, "calibration.step", "true");
    let error = load(&faulted).unwrap_err();
    assert!(error.to_string().contains("§10"), "{error}");
    // The step's durations are pins: a shorter settle does not load.
    let error = load(&with_key(&step, "calibration.settle_s", "10")).unwrap_err();
    assert!(
        error.to_string().contains("calibration.settle_s"),
        "{error}"
    );
}

#[test]
fn a_declaration_must_name_the_victim_real_routes_and_a_sane_budget() {
    let declared = format!(
        "{BASE}\n[declaration]\nexperiment_id = \"e1\"\nrelease = \"r\"\ndataset = \"d\"\ntarget = \"replica-1\"\nboundary = \"b\"\nprotected_routes = [\"chat\"]\ncleanup = \"c\"\n\n[declaration.abort]\nprotected_failure_rate = 0.1\n"
    );
    let config = load(&declared).unwrap();
    let d = config.declaration.unwrap();
    assert_eq!(
        (
            d.abort.window_s,
            d.abort.min_requests,
            d.abort.cleanup_failure
        ),
        (5.0, 10, true)
    );
    for (from, to, says) in [
        (
            "target = \"replica-1\"",
            "target = \"replica-0\"",
            "seeds/004",
        ),
        (
            "target = \"replica-1\"",
            "target = \"replica-7\"",
            "declaration.target",
        ),
        (
            "protected_routes = [\"chat\"]",
            "protected_routes = [\"nope\"]",
            "declaration.protected_routes",
        ),
        (
            "protected_routes = [\"chat\"]",
            "protected_routes = [\"chat\"]\nshed_routes = [\"chat\"]",
            "declaration.shed_routes",
        ),
        (
            "protected_failure_rate = 0.1",
            "protected_failure_rate = 1.5",
            "declaration.abort.protected_failure_rate",
        ),
        (
            "protected_routes = [\"chat\"]",
            "",
            "needs declaration.protected_routes",
        ),
        (
            "protected_failure_rate = 0.1",
            "protected_failure_rate = 0.1\nwindow_s = 0",
            "declaration.abort.window_s",
        ),
        (
            "experiment_id = \"e1\"",
            "experiment_id = \" \"",
            "declaration.experiment_id",
        ),
        ("boundary = \"b\"", "boundary = \"b\"\nblast = 1", "blast"),
    ] {
        assert!(declared.contains(from), "{from}");
        let error = load(&declared.replacen(from, to, 1))
            .unwrap_err()
            .to_string();
        assert!(error.contains(says), "{to}: {error}");
    }
}

#[test]
fn a_degradation_spikes_the_rate_for_the_pinned_duration_and_a_replica_loss_cannot() {
    const S: u64 = 1_000_000_000;
    let degradation = BASE
        .replace("variant = \"clean-delete\"", "variant = \"degradation\"")
        .replace(
            "injector = \"kill-pid-file\"\npid_file = \"/run/replica-1.pid\"",
            "injector = \"mock-admin\"\nadmin_address = \"127.0.0.1:8001\"\nmock_mode = \"store-outage\"",
        )
        .replace("replicas = [\"replica-0\", \"replica-1\"]", "replicas = [\"replica-1\"]");
    let plain = load(&degradation).unwrap();
    let names: Vec<String> = plain
        .schedule_params()
        .phases
        .iter()
        .map(|p| p.name.clone())
        .collect();
    assert_eq!(names, ["warmup", "baseline", "fault-recovery", "cooldown"]);
    let spiked = load(&with_key(&degradation, "schedule.spike_factor", "2.0")).unwrap();
    let phases: Vec<(String, u64, f64)> = spiked
        .schedule_params()
        .phases
        .iter()
        .map(|p| (p.name.clone(), p.duration_ns, p.rate_rps))
        .collect();
    // One replica at 0.65 x 20 rps = 13 rps; dev factor 10: the 120 s spike is 12 s at 26 rps,
    // then the rest of the 60 s recovery window at 13 rps.
    assert_eq!(
        phases,
        [
            ("warmup".into(), 6 * S, 13.0),
            ("baseline".into(), 30 * S, 13.0),
            ("spike".into(), 12 * S, 26.0),
            ("fault-recovery".into(), 48 * S, 13.0),
            ("cooldown".into(), 6 * S, 13.0),
        ]
    );
    assert_eq!(spiked.inject_at_ns(), Some(36 * S));
    let error = load(&with_key(BASE, "schedule.spike_factor", "2.0")).unwrap_err();
    assert!(error.to_string().contains("pins"), "{error}");
    let error = load(&with_key(&degradation, "schedule.spike_factor", "11")).unwrap_err();
    assert!(
        error.to_string().contains("schedule.spike_factor"),
        "{error}"
    );
    // Confirmation by a request: method and expected text qualify a path; silence is not one.
    let confirm = |extra: &str| {
        load(&degradation.replace(
            "mock_mode = \"store-outage\"",
            &format!("mock_mode = \"store-outage\"\nconfirm_address = \"127.0.0.1:8001\"\n{extra}"),
        ))
    };
    confirm("confirm_path = \"/metrics\"\nconfirm_status = 200\nconfirm_method = \"GET\"\nconfirm_contains = \"x 1\"").unwrap();
    for (extra, says) in [
        ("", "not by silence"),
        ("confirm_path = \"/metrics\"", "go together"),
        ("confirm_method = \"GET\"", "which is missing"),
        (
            "confirm_path = \"/m\"\nconfirm_status = 200\nconfirm_method = \"PUT\"",
            "GET or POST",
        ),
    ] {
        let error = confirm(extra).unwrap_err().to_string();
        assert!(error.contains(says), "{extra}: {error}");
    }
    let killed = BASE.replace("variant = \"clean-delete\"", "variant = \"degradation\"");
    let error = load(&killed).unwrap_err();
    assert!(error.to_string().contains("mock-admin or exec"), "{error}");
}

#[test]
fn the_experiment_examples_commented_declaration_loads_when_uncommented() {
    let text = example(Profile::Experiment);
    let at = text.find("# [declaration]").unwrap();
    let uncommented: String = text[at..]
        .lines()
        .map(|l| l.strip_prefix("# ").unwrap_or(l))
        .collect::<Vec<_>>()
        .join("\n");
    let config = load(&format!("{}{uncommented}\n", &text[..at])).unwrap();
    assert_eq!(
        config.thresholds.len(),
        3,
        "the commented thresholds load too"
    );
    assert_eq!(
        config.slo.as_ref().map(|s| s.target()),
        Some(0.95),
        "the commented declared SLO loads too"
    );
    let d = config.declaration.unwrap();
    assert_eq!(d.target, "replica-1");
    assert!(d.abort.undeclared_replica_errors);
}

#[test]
fn values_outside_their_domain_are_refused_with_their_key() {
    let dev_rate = BASE.to_owned();
    for (key, value, named, says) in [
        (
            "gates.send_skew_p99_ms",
            "-1",
            "gates.send_skew_p99_ms",
            "negative",
        ),
        (
            "gates.baseline_goodput_min",
            "-0.5",
            "gates.baseline_goodput_min",
            "negative",
        ),
        ("target.model", "\"  \"", "target.model", "empty"),
        (
            "target.base_url",
            "\"http://user:secret@127.0.0.1:8000\"",
            "target.base_url",
            "credentials",
        ),
        (
            "target.base_url",
            "\"http://127.0.0.1:8000/#x\"",
            "target.base_url",
            "fragment",
        ),
        (
            "target.api_key_env",
            "\"1BAD\"",
            "target.api_key_env",
            "environment variable",
        ),
        (
            "target.api_key_header",
            "\"api-key\"",
            "target.api_key_header",
            "api_key_env",
        ),
        (
            "target.idle_limit_ms",
            "0",
            "target.idle_limit_ms",
            "outside",
        ),
        (
            "target.preflight_path",
            "\"health\"",
            "target.preflight_path",
            "start with /",
        ),
        ("fault.pid_file", "\"\"", "fault.pid_file", "empty"),
        (
            "calibration.lambda_max_rps",
            "-3.0",
            "calibration.lambda_max_rps",
            "positive",
        ),
    ] {
        let text = if key == "fault.pid_file" {
            dev_rate.replace(
                "pid_file = \"/run/replica-1.pid\"",
                &format!("pid_file = {value}"),
            )
        } else if key == "calibration.lambda_max_rps" {
            dev_rate.replace(
                "lambda_max_rps = 20.0",
                &format!("lambda_max_rps = {value}"),
            )
        } else if key == "target.model" || key == "target.base_url" {
            let leaf = key.split_once('.').unwrap().1;
            let line = dev_rate
                .lines()
                .find(|l| l.starts_with(&format!("{leaf} =")))
                .unwrap()
                .to_owned();
            dev_rate.replace(&line, &format!("{leaf} = {value}"))
        } else {
            with_key(&dev_rate, key, value)
        };
        let err = load(&text).unwrap_err().to_string();
        assert!(
            err.contains(named) && err.contains(says),
            "{key} = {value}: {err}"
        );
    }
    let route = |extra: &str| {
        BASE.replace(
            "path = \"/v1/chat/completions\"\n",
            &format!("path = \"/v1/chat/completions\"\n{extra}\n"),
        )
    };
    for (extra, named) in [
        ("prompt_tokens = 0", "routes[0].prompt_tokens"),
        ("prompt_file = \" \"", "routes[0].prompt_file"),
    ] {
        let err = load(&route(extra)).unwrap_err().to_string();
        assert!(err.contains(named), "{extra}: {err}");
    }
    let err = load(&BASE.replace("label = \"chat\"", "label = \"\""))
        .unwrap_err()
        .to_string();
    assert!(err.contains("routes[0].label"), "{err}");
    // A rate that schedules nothing in the run's span.
    let none = "schema_version = 1\nprofile = \"dev\"\n[target]\nkind = \"mock\"\nbase_url = \"http://127.0.0.1:1\"\nmodel = \"m\"\n[schedule]\nseed = 1\narrival = \"poisson\"\nrate_rps = 0.000001\n[fault]\nvariant = \"none\"\n[[routes]]\nlabel = \"a\"\npath = \"/v1/chat/completions\"\n";
    let err = load(none).unwrap_err().to_string();
    assert!(
        err.contains("schedule.rate_rps") && err.contains("no request"),
        "{err}"
    );
    let zero = none.replace("0.000001", "0.0");
    let err = load(&zero).unwrap_err().to_string();
    assert!(
        err.contains("schedule.rate_rps") && err.contains("positive"),
        "{err}"
    );
}

#[test]
fn headers_may_not_carry_credentials_or_split_the_request() {
    // An inline table under [target] ([target.headers] after [[routes]] would be the route's).
    let with = |table: &str| {
        BASE.replace(
            "replicas = [\"replica-0\", \"replica-1\"]\n",
            &format!("replicas = [\"replica-0\", \"replica-1\"]\nheaders = {{ {table} }}\n"),
        )
    };
    let ok = load(&with(
        "\"x-tenant\" = \"bench\", OpenAI-Organization = \"org-1\"",
    ))
    .unwrap();
    assert_eq!(ok.target.headers.len(), 2);
    for (table, says) in [
        ("Authorization = \"Bearer sk-123\"", "credential"),
        ("api-key = \"k\"", "credential"),
        // Names the reviewer found journaled in clear before the rule read names by shape.
        ("X-Auth-Token = \"abc\"", "credential"),
        ("X-Goog-Api-Key = \"abc\"", "credential"),
        ("Ocp-Apim-Subscription-Key = \"abc\"", "credential"),
        ("X-Access-Token = \"abc\"", "credential"),
        // A key's value under any name.
        ("x-tenant = \"sk-proj-1\"", "looks like a credential"),
        ("x-route = \"Bearer abc\"", "looks like a credential"),
        ("x-id = \"0123456789abcdefABCDEF0123456789\"", "opaque run"),
        ("host = \"other\"", "recorder itself"),
        ("\"bad name\" = \"v\"", "header name"),
        ("x-a = \"one\\r\\nx-b: two\"", "CR, LF"),
    ] {
        let err = load(&with(table)).unwrap_err().to_string();
        assert!(
            err.contains("target.headers.") && err.contains(says),
            "{table}: {err}"
        );
    }
    let keyed = BASE.replace(
        "model = \"mock\"\n",
        "model = \"mock\"\napi_key_env = \"OPENAI_API_KEY\"\napi_key_header = \"api-key\"\n",
    );
    let config = load(&keyed).unwrap();
    assert_eq!(config.target.api_key_header(), "api-key");
    assert_eq!(config.target.preflight_path(), "/v1/models");
    assert!(config.target.include_usage);
}

/// The journal copies the configuration byte for byte, so a key written anywhere in it (a
/// header, the URL's query, a comment, a collector's command) is refused, and a secret header
/// names the environment variable its value comes from. A journal already written still
/// analyzes: `parse_journaled` skips this stage. Deliberate breaks: the refusal of a `sk-`
/// value under an unremarkable name, of a key in a comment, or of `?key=` were each seen to
/// fail this test when the check was taken out.
#[test]
fn no_credential_reaches_the_journal_and_secret_headers_come_from_the_environment() {
    let secret = |table: &str| {
        BASE.replace(
            "replicas = [\"replica-0\", \"replica-1\"]\n",
            &format!("replicas = [\"replica-0\", \"replica-1\"]\nsecret_headers = {{ {table} }}\n"),
        )
    };
    let ok = load(&secret(
        "X-Auth-Token = \"PCT_TOKEN\", X-Goog-Api-Key = \"GOOG\"",
    ))
    .unwrap();
    assert_eq!(ok.target.secret_headers["X-Auth-Token"], "PCT_TOKEN");
    for (table, says) in [
        ("X-Auth-Token = \"sk-0123\"", "environment variable name"),
        ("\"bad name\" = \"V\"", "header name"),
        ("content-length = \"V\"", "recorder itself"),
    ] {
        let err = load(&secret(table)).unwrap_err().to_string();
        assert!(
            err.contains("target.secret_headers.") && err.contains(says),
            "{table}: {err}"
        );
    }
    let twice = secret("authorization = \"V\"").replace(
        "model = \"mock\"\n",
        "model = \"mock\"\napi_key_env = \"OPENAI_API_KEY\"\n",
    );
    let err = load(&twice).unwrap_err().to_string();
    assert!(err.contains("send it once"), "{err}");

    let key = "sk-proj-0123456789abcdefXYZ";
    let url = |query: &str| {
        BASE.replace(
            "base_url = \"http://127.0.0.1:8000\"",
            &format!("base_url = \"http://127.0.0.1:8000/v1?{query}\""),
        )
    };
    assert!(load(&url("api-version=2024-10-21")).is_ok());
    for query in ["key=abc", "sig=x&api_key=y", &format!("k={key}")] {
        let err = load(&url(query)).unwrap_err().to_string();
        assert!(
            err.contains("target.base_url") && err.contains("query parameter"),
            "{query}: {err}"
        );
    }
    for text in [
        format!("# the old key was {key}\n{BASE}"),
        with_key(
            BASE,
            "target.accelerator_commands",
            &format!(r#"{{ "replica-0" = ["curl", "-H", "x: {key}"] }}"#),
        ),
    ] {
        let err = load(&text).unwrap_err().to_string();
        assert!(
            err.contains("issued key") && err.contains("\"sk-\""),
            "{err}"
        );
        assert!(
            !err.contains(key),
            "the refusal does not repeat the key: {err}"
        );
        // A journal that already holds such bytes still loads for analysis.
        assert!(Config::parse_journaled(text.as_bytes()).is_ok());
    }
}

#[test]
fn accelerator_commands_name_declared_replicas_and_a_program() {
    let ok = with_key(
        BASE,
        "target.accelerator_commands",
        r#"{ "replica-0" = ["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"] }"#,
    );
    assert_eq!(
        load(&ok).unwrap().target.accelerator_commands["replica-0"][0],
        "nvidia-smi"
    );
    for (bad, why) in [
        (
            r#"{ "replica-9" = ["nvidia-smi"] }"#,
            "not one of target.replicas",
        ),
        (r#"{ "replica-0" = [] }"#, "must name a program"),
        (r#"{ "replica-0" = [""] }"#, "must name a program"),
    ] {
        let text = with_key(BASE, "target.accelerator_commands", bad);
        let error = load(&text).unwrap_err().to_string();
        assert!(error.contains(why), "{bad}: {error}");
    }
}

/// BASE as a fault-free run at 4 rps.
fn fault_free() -> String {
    let free = BASE.replace(
        "variant = \"clean-delete\"\nvictim = \"replica-1\"\ninjector = \"kill-pid-file\"\npid_file = \"/run/replica-1.pid\"",
        "variant = \"none\"",
    );
    with_key(&free, "schedule.rate_rps", "4.0")
}

fn phases_of(config: &Config) -> Vec<(String, u64)> {
    config
        .schedule_params()
        .phases
        .iter()
        .map(|p| (p.name.clone(), p.duration_ns))
        .collect()
}

const S: u64 = 1_000_000_000;

#[test]
fn dev_durations_stated_in_seconds_set_a_fault_free_timeline_and_keep_the_pinned_timeout() {
    // Issue 18 item 2: 5 s of warm-up, 30 s measured, no cooldown; the time factor (10) still
    // stands, and without dev.scale_timeout the timeout stays the pin (30 s), unwarned.
    let text = with_key(&fault_free(), "dev.measure_s", "30");
    let text = with_key(&text, "dev.warmup_s", "5");
    let text = with_key(&text, "dev.cooldown_s", "0");
    let config = load(&text).unwrap();
    assert_eq!(
        phases_of(&config),
        [
            ("warmup".to_owned(), 5 * S),
            ("measurement".to_owned(), 30 * S)
        ]
    );
    assert!(!config.timeout_scaled());
    assert_eq!(config.duration_ns(&pins::CLIENT_TIMEOUT_S), 30 * S);
    assert!(config.warnings().is_empty(), "{:?}", config.warnings());
    let timeout = config
        .pins_in_force()
        .into_iter()
        .find(|p| p.pin.key == "client.timeout_s")
        .unwrap();
    assert_eq!(timeout.effective, None);
    // A duration left unstated is its dev-scaled pin: the 60 s cooldown / 10.
    let text = with_key(&fault_free(), "dev.measure_s", "2.5");
    let config = load(&text).unwrap();
    assert_eq!(
        phases_of(&config),
        [
            ("warmup".to_owned(), 6 * S),
            ("measurement".to_owned(), 2_500_000_000),
            ("cooldown".to_owned(), 6 * S)
        ]
    );
    // Asked for, the factor divides the timeout all the same.
    let config = load(&with_key(&text, "dev.scale_timeout", "true")).unwrap();
    assert_eq!(config.duration_ns(&pins::CLIENT_TIMEOUT_S), 3 * S);
}

#[test]
fn a_time_factor_alone_still_divides_the_timeout_and_says_so() {
    // Archived configurations keep their meaning: the factor divides the timeout (10: 3 s),
    // and the warning names the key that makes it explicit either way.
    let config = load(BASE).unwrap();
    assert!(config.timeout_scaled());
    assert_eq!(config.duration_ns(&pins::CLIENT_TIMEOUT_S), 3 * S);
    let warnings = config.warnings();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].contains("3.000 s") && warnings[0].contains("dev.scale_timeout"),
        "{warnings:?}"
    );
    let said = load(&with_key(BASE, "dev.scale_timeout", "true")).unwrap();
    assert!(said.timeout_scaled() && said.warnings().is_empty());
    let kept = load(&with_key(BASE, "dev.scale_timeout", "false")).unwrap();
    assert_eq!(kept.duration_ns(&pins::CLIENT_TIMEOUT_S), 30 * S);
    assert!(kept.warnings().is_empty(), "{:?}", kept.warnings());
    // The other timeline pins are divided whatever scale_timeout says.
    assert_eq!(kept.duration_ns(&pins::EXPERIMENT_BASELINE_S), 30 * S);
}

#[test]
fn a_timeout_too_short_for_max_tokens_at_the_stated_gap_is_warned_about() {
    // 256 tokens x 20 ms = 5.12 s: past the 3 s a factor of 10 leaves, inside the pinned 30 s.
    let text = with_key(BASE, "dev.scale_timeout", "true");
    let config = load(&with_key(&text, "target.token_gap_ms", "20")).unwrap();
    let warnings = config.warnings();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].contains("5.120 s") && warnings[0].contains("3.000 s"),
        "{warnings:?}"
    );
    let text = with_key(BASE, "dev.scale_timeout", "false");
    let config = load(&with_key(&text, "target.token_gap_ms", "20")).unwrap();
    assert!(config.warnings().is_empty(), "{:?}", config.warnings());
    for bad in ["0", "-1", "1e9"] {
        let error = load(&with_key(BASE, "target.token_gap_ms", bad)).unwrap_err();
        assert!(error.to_string().contains("target.token_gap_ms"), "{error}");
    }
}

#[test]
fn dev_durations_in_seconds_are_refused_where_they_mean_nothing_or_are_out_of_range() {
    // A fault run's timeline is §1's phases: stated seconds there are refused, by clause.
    let error = load(&with_key(BASE, "dev.measure_s", "30")).unwrap_err();
    let text = error.to_string();
    assert!(
        text.contains("§P") && text.contains("fault.variant"),
        "{text}"
    );
    for (key, value) in [
        ("dev.measure_s", "0"),
        ("dev.measure_s", "-3"),
        ("dev.warmup_s", "-1"),
        ("dev.cooldown_s", "1e12"),
        ("dev.measure_s", "nan"),
    ] {
        let error = load(&with_key(&fault_free(), key, value)).unwrap_err();
        assert!(error.to_string().contains(key), "{key} = {value}: {error}");
    }
    // Zero warm-up and cooldown are allowed: the phases are left out.
    let text = with_key(&fault_free(), "dev.warmup_s", "0");
    let text = with_key(&text, "dev.cooldown_s", "0");
    let config = load(&text).unwrap();
    assert_eq!(
        phases_of(&config),
        [("measurement".to_owned(), 30 * S)],
        "the 300 s baseline / 10"
    );
}

#[test]
fn a_prompt_format_needs_a_prompt_file_and_a_known_name() {
    let error = load(&format!("{BASE}prompt_format = \"sharegpt\"\n")).unwrap_err();
    assert!(
        error.to_string().contains("routes[0].prompt_format"),
        "{error}"
    );
    let error = load(&format!(
        "{BASE}prompt_file = \"p.json\"\nprompt_format = \"csv\"\n"
    ))
    .unwrap_err();
    assert!(error.to_string().contains("prompt_format"), "{error}");
    let config = load(&format!(
        "{BASE}prompt_file = \"p.json\"\nprompt_format = \"sharegpt\"\n"
    ))
    .unwrap();
    assert_eq!(config.routes[0].prompt_format, Some(PromptFormat::Sharegpt));
}

#[test]
fn output_lengths_from_a_distribution_are_dev_only_and_checked() {
    let uniform = format!("{BASE}[routes.output_tokens]\nkind = \"uniform\"\nmin = 8\nmax = 64\n");
    let config = load(&uniform).unwrap();
    assert_eq!(
        config.routes[0].output_tokens,
        Some(Lengths::Uniform { min: 8, max: 64 })
    );
    // Outside dev, only a distribution that always gives the pinned 256 loads (§6).
    let hosted = |table: &str| {
        let text = BASE
            .replace("profile = \"dev\"\n\n[dev]\ntime_factor = 10\n", "profile = \"hosted\"\n")
            .replace("kind = \"mock\"", "kind = \"hosted\"")
            .replace("replicas = [\"replica-0\", \"replica-1\"]\n", "")
            .replace(
                "variant = \"clean-delete\"\nvictim = \"replica-1\"\ninjector = \"kill-pid-file\"\npid_file = \"/run/replica-1.pid\"",
                "variant = \"none\"",
            )
            .replace("[calibration]\nlambda_max_rps = 20.0\n", "");
        load(&with_key(
            &format!("{text}{table}"),
            "schedule.rate_rps",
            "2.0",
        ))
    };
    let error =
        hosted("[routes.output_tokens]\nkind = \"uniform\"\nmin = 8\nmax = 64\n").unwrap_err();
    assert!(error.to_string().contains("§6"), "{error}");
    hosted("[routes.output_tokens]\nkind = \"fixed\"\ntokens = 256\n").unwrap();
    for table in [
        "kind = \"uniform\"\nmin = 64\nmax = 8\n",
        "kind = \"fixed\"\ntokens = 0\n",
        "kind = \"normal\"\nmean = -1.0\nsd = 3.0\nmax = 10\n",
        "kind = \"normal\"\nmean = 100.0\nsd = 3.0\nmin = 50\nmax = 10\n",
    ] {
        let error = load(&format!("{BASE}[routes.output_tokens]\n{table}")).unwrap_err();
        assert!(
            error.to_string().contains("routes[0].output_tokens"),
            "{table}: {error}"
        );
    }
    let error = load(&format!("{BASE}[routes.output_tokens]\nkind = \"zipf\"\n")).unwrap_err();
    assert!(error.to_string().contains("output_tokens"), "{error}");
}

#[test]
fn input_lengths_and_dataset_lengths_go_only_where_they_can_be_kept() {
    let input = "[routes.input_tokens]\nkind = \"uniform\"\nmin = 16\nmax = 512\n";
    let config = load(&format!("{BASE}{input}")).unwrap();
    assert_eq!(
        config.routes[0].input_tokens,
        Some(Lengths::Uniform { min: 16, max: 512 })
    );
    for (extra, says) in [
        // A prompt file's prompts are sent as they are.
        ("prompt_file = \"p.jsonl\"\n", "keep one of them"),
        // input_tokens replaces prompt_tokens: both stated is a contradiction.
        ("prompt_tokens = 64\n", "state one of them"),
    ] {
        let error = load(&format!("{BASE}{extra}{input}")).unwrap_err();
        assert!(error.to_string().contains(says), "{extra}: {error}");
    }
    let error = load(&format!(
        "{BASE}[routes.input_tokens]\nkind = \"dataset\"\n"
    ))
    .unwrap_err();
    assert!(
        error.to_string().contains("routes[0].input_tokens"),
        "{error}"
    );
    // §1 fixes the input length outside dev: a fixed length loads, a distribution does not.
    let experiment = |table: &str| {
        load(&format!(
            "{}{table}",
            BASE.replace(
                "profile = \"dev\"\n\n[dev]\ntime_factor = 10\n",
                "profile = \"experiment\"\n"
            )
        ))
    };
    let error = experiment(input).unwrap_err();
    assert!(error.to_string().contains("§1"), "{error}");
    experiment("[routes.input_tokens]\nkind = \"fixed\"\ntokens = 128\n").unwrap();

    // Dataset output lengths need a prompt file that carries them.
    let dataset = "[routes.output_tokens]\nkind = \"dataset\"\n";
    for (extra, says) in [
        ("", "has none"),
        (
            "prompt_file = \"p.txt\"\n",
            "a text prompt file carries no lengths",
        ),
        (
            "prompt_file = \"s.json\"\nprompt_format = \"sharegpt\"\n",
            "needs target.tokenizer",
        ),
    ] {
        let error = load(&format!("{BASE}{extra}{dataset}")).unwrap_err();
        assert!(error.to_string().contains(says), "{extra}: {error}");
    }
    load(&format!("{BASE}prompt_file = \"p.jsonl\"\n{dataset}")).unwrap();
    let with_tokenizer = BASE.replace(
        "model = \"mock\"\n",
        "model = \"mock\"\ntokenizer = \"tokenizer.json\"\n",
    );
    let config = load(&format!(
        "{with_tokenizer}prompt_file = \"s.json\"\nprompt_format = \"sharegpt\"\n{dataset}"
    ))
    .unwrap();
    assert_eq!(config.target.tokenizer.as_deref(), Some("tokenizer.json"));
    // Outside dev a dataset's lengths are not the pin on every request (§6).
    let error = experiment(&format!("prompt_file = \"p.jsonl\"\n{dataset}")).unwrap_err();
    assert!(error.to_string().contains("§6"), "{error}");
    let error = load(&BASE.replace(
        "model = \"mock\"\n",
        "model = \"mock\"\ntokenizer = \" \"\n",
    ))
    .unwrap_err();
    assert!(error.to_string().contains("target.tokenizer"), "{error}");
}

#[test]
fn a_route_label_is_its_own() {
    let error = load(&format!(
        "{BASE}[[routes]]\nlabel = \"chat\"\npath = \"/v1/completions\"\n"
    ))
    .unwrap_err();
    assert!(error.to_string().contains("routes[1].label"), "{error}");
    assert!(error.to_string().contains("appears twice"), "{error}");
}

/// The reviewer's out-of-domain mutants: each loaded before, though no run could meet (or
/// mean) it. Each is refused naming its key. Deliberate break: without `outside_domain` and
/// `limits_relate` every one of them loads.
#[test]
fn values_outside_their_domain_are_refused_though_stricter_than_the_pin() {
    for (key, value, says) in [
        ("gates.baseline_goodput_min", "1e5", "share above 1"),
        ("calibration.step_goodput_min", "1e5", "share above 1"),
        ("calibration.step_attempts_max", "0", "limit of zero"),
        ("gates.replica_share_max_percent", "0", "limit of zero"),
        (
            "gates.replica_share_max_percent",
            "1",
            "no value a run could meet",
        ),
        ("gates.send_skew_max_ms", "0", "limit of zero"),
        ("gates.send_skew_max_ms", "1", "no value a run could meet"),
        ("gates.host_cpu_max_percent", "0", "limit of zero"),
        ("gates.replica_share_min_percent", "101", "over 100 %"),
    ] {
        let err = load(&with_key(BASE, key, value)).unwrap_err().to_string();
        assert!(
            err.contains(key) && err.contains(says),
            "{key} = {value}: {err}"
        );
    }
    // Stricter values that a run can meet still load.
    for (key, value) in [
        ("gates.send_skew_max_ms", "5"),
        ("gates.replica_share_max_percent", "50"),
        ("gates.baseline_goodput_min", "1.0"),
    ] {
        load(&with_key(BASE, key, value)).unwrap_or_else(|e| panic!("{key} = {value}: {e}"));
    }
    for (url, says) in [
        ("http://127.0.0.1:99999", "not a TCP port"),
        ("http://127.0.0.1:0", "not a TCP port"),
        ("http://127.0.0.1:80x", "not a TCP port"),
        ("http://:8000", "names no host"),
    ] {
        let text = BASE.replace("http://127.0.0.1:8000", url);
        let err = load(&text).unwrap_err().to_string();
        assert!(
            err.contains("target.base_url") && err.contains(says),
            "{url}: {err}"
        );
    }
    for url in [
        "http://[::1]:8000",
        "https://api.example.com",
        "http://h:8000/v1?x=1",
    ] {
        load(&BASE.replace("http://127.0.0.1:8000", url)).unwrap_or_else(|e| panic!("{url}: {e}"));
    }
}

/// `config check` asks `check_files`: a missing prompt file or tokenizer, a directory or a
/// device is refused there, not first at `record`.
#[test]
fn named_files_are_checked_before_a_run() {
    let dir = percentes_testkit::Scratch::new("files-check");
    let file = dir.join("prompts.txt");
    std::fs::write(&file, "hello\n").unwrap();
    let route = |path: &std::path::Path| {
        BASE.replace(
            "path = \"/v1/chat/completions\"\n",
            &format!(
                "path = \"/v1/chat/completions\"\nprompt_file = {:?}\n",
                path.display().to_string()
            ),
        )
    };
    load(&route(&file)).unwrap().check_files().unwrap();
    let mut bad = vec![
        (dir.join("missing.txt"), "No such file"),
        (dir.to_path_buf(), "a directory"),
    ];
    if cfg!(unix) {
        bad.push(("/dev/zero".into(), "character device"));
    }
    for (path, says) in bad {
        let err = load(&route(&path))
            .unwrap()
            .check_files()
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("routes[0].prompt_file") && err.contains(says),
            "{path:?}: {err}"
        );
    }
    let tokenizer = with_key(BASE, "target.tokenizer", "\"/dev/zero\"");
    let err = load(&tokenizer)
        .unwrap()
        .check_files()
        .unwrap_err()
        .to_string();
    assert!(err.contains("target.tokenizer"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_scrape_period_is_divided_by_the_time_factor_down_to_the_floor() {
    let pinned = pins::value::SERVER_SCRAPE_PERIOD_MS as u64;
    let floor = pins::value::CLIENT_GAUGE_PERIOD_FLOOR_MS as u64;
    let with_factor = |factor: u32| {
        let text = crate::journal::synthetic::GOLDEN_CONFIG
            .replace("time_factor = 100", &format!("time_factor = {factor}"));
        assert!(
            text.contains(&format!("time_factor = {factor}")),
            "the golden config names its factor"
        );
        Config::parse(text.as_bytes()).unwrap().scrape_period_ms()
    };
    assert_eq!(with_factor(1), pinned);
    assert_eq!(with_factor(2), pinned / 2);
    assert_eq!(with_factor(10), floor);
}

const ADDRESSES: &str =
    "replica_addresses = { \"replica-0\" = \"127.0.0.1:8001\", \"replica-1\" = \"127.0.0.1:8002\" }";

/// Issue 52, then issue 55 item 4: a `[server_metrics]` section that names no replica address
/// and no extra endpoint scrapes the base URL's own host (it used to do nothing, silently, then
/// was refused); only an https base URL, whose host is not scraped, leaves nothing, and is
/// refused saying what to add. Without the section, or with scraping off, nothing is scraped.
#[test]
fn a_server_metrics_section_with_no_address_scrapes_the_base_urls_host() {
    let golden = crate::journal::synthetic::GOLDEN_CONFIG;
    let with = |section: &str, addresses: &str| {
        let text = golden.replace(
            "[target]",
            &format!("[server_metrics]\n{section}\n\n[target]\n{addresses}"),
        );
        Config::parse(text.as_bytes())
    };
    let config = with("preset = \"vllm\"", "").unwrap();
    let host = config.target.base_url.strip_prefix("http://").unwrap();
    let host = host.split('/').next().unwrap();
    let expected: BTreeMap<String, String> = [("target".to_owned(), host.to_owned())].into();
    // The golden names two replicas: the host is scraped as `target`, not as one of them.
    assert_eq!(config.scrape_addresses(), expected);
    let https = golden.replace("http://", "https://");
    let why = Config::parse(
        https
            .replace(
                "[target]",
                "[server_metrics]\npreset = \"vllm\"\n\n[target]",
            )
            .as_bytes(),
    )
    .unwrap_err()
    .to_string();
    assert!(
        why.contains("§2") && why.contains("nothing would be scraped") && why.contains("https"),
        "{why}"
    );
    let named = with("preset = \"vllm\"", ADDRESSES).unwrap();
    assert_eq!(named.scrape_addresses(), named.target.replica_addresses);
    assert!(with("scrape = false", "")
        .unwrap()
        .scrape_addresses()
        .is_empty());
    assert!(Config::parse(golden.as_bytes())
        .unwrap()
        .scrape_addresses()
        .is_empty());
    with("scrape = false", "").unwrap();
    with("extra = { router = \"http://127.0.0.1:9000/metrics\" }", "").unwrap();
    Config::parse(golden.as_bytes()).unwrap();
}

#[test]
fn server_metrics_names_urls_and_paths_are_checked_at_load() {
    let with = |section: &str| {
        let text = crate::journal::synthetic::GOLDEN_CONFIG.replace(
            "[target]",
            &format!("[server_metrics]\n{section}\n\n[target]\n{ADDRESSES}"),
        );
        Config::parse(text.as_bytes())
    };
    let config =
        with("preset = \"vllm\"\nmetrics = [\"vllm:request_queue_time_seconds\"]").unwrap();
    assert!(config
        .server_metrics
        .selects("vllm:request_queue_time_seconds"));
    assert!(config.server_metrics.selects("vllm:num_requests_waiting"));
    assert!(!config.server_metrics.selects("sglang:num_queue_reqs"));
    for (section, key, says) in [
        (
            "metrics = [\"9bad\"]",
            "server_metrics.metrics",
            "not a Prometheus metric name",
        ),
        (
            "path = \"metrics\"",
            "server_metrics.path",
            "not a request path",
        ),
        (
            "extra = { r = \"https://h:1/m\" }",
            "server_metrics.extra.r",
            "not an http:// URL",
        ),
        (
            "extra = { r = \"http://h/m\" }",
            "server_metrics.extra.r",
            "names no port",
        ),
        (
            "extra = { r = \"http://h:99999/m\" }",
            "server_metrics.extra.r",
            "not a TCP port",
        ),
        (
            "extra = { r = \"http://h:9000\" }",
            "server_metrics.extra.r",
            "names no path",
        ),
        (
            "preset = \"triton\"",
            "server_metrics.preset",
            "not one of: auto, vllm",
        ),
        (
            "scrapes = true",
            "server_metrics.scrapes",
            "takes scrape, preset, metrics, path, extra",
        ),
    ] {
        let e = with(section).unwrap_err().to_string();
        assert!(e.contains(key) && e.contains(says), "{section}: {e}");
    }
}

#[test]
fn thresholds_load_read_and_a_bad_one_is_refused_at_its_key() {
    let text = format!(
        "{BASE}\n[thresholds]\nfail_on = [\"ttft_p99 < 500ms\", \"error_rate@fault < 5%\"]\n"
    );
    let config = load(&text).unwrap();
    assert_eq!(config.thresholds.len(), 2);
    assert_eq!(config.thresholds[1].window.as_deref(), Some("fault"));
    let (message, at) = refusal(&format!(
        "{BASE}\n[thresholds]\nfail_on = [\"ttft_p99 < 500ms\", \"ttft_p99 < 500\"]\n"
    ));
    assert!(
        message.contains("thresholds.fail_on[1]") && message.contains("needs its unit"),
        "{message}"
    );
    assert!(at.is_some(), "the refusal points into the file");
    let (message, _) = refusal(&format!("{BASE}\n[thresholds]\nfail = []\n"));
    assert!(message.contains("fail_on"), "{message}");
    // The criteria judge a run and are not part of its design (a campaign groups by design).
    let plain = design_hash(BASE.as_bytes()).unwrap();
    assert_eq!(design_hash(text.as_bytes()).unwrap(), plain);
}

/// Issue 55 item 1: `[slo]` holds the pinned SLO's keys and the user's own beside them; a
/// route's list must name a route, and every objective is read at its key.
#[test]
fn a_declared_slo_loads_beside_the_pins_and_a_bad_one_is_refused_at_its_key() {
    let text = format!(
        "{BASE}\n[slo]\nttft_ms = 1000\ndeclared = [\"ttft <= 500ms\", \"tpot < 50ms\"]\n[slo.routes]\nchat = [\"e2e <= 2s\"]\n"
    );
    let config = load(&text).unwrap();
    let slo = config.slo.clone().expect("declared");
    assert_eq!(
        slo.to_string(),
        "ttft<=500ms, tpot<50ms; route chat: e2e<=2s"
    );
    assert_eq!(slo.for_route("chat")[0].limit_ns, 2_000_000_000);
    // The pin kept its own rule beside it.
    let (message, _) = refusal(&format!(
        "{BASE}\n[slo]\nttft_ms = 2000\ndeclared = [\"ttft <= 5s\"]\n"
    ));
    assert!(message.contains("slo.ttft_ms"), "{message}");
    let (message, _) = refusal(&format!(
        "{BASE}\n[slo]\ndeclared = [\"ttft <= 500ms\", \"ttft_p99 < 1s\"]\n"
    ));
    assert!(
        message.contains("slo.declared") && message.contains("no objective metric `ttft_p99`"),
        "{message}"
    );
    let (message, _) = refusal(&format!(
        "{BASE}\n[slo]\ndeclared = [\"ttft <= 500ms\"]\n[slo.routes]\nbatch = [\"e2e <= 2s\"]\n"
    ));
    assert!(
        message.contains("slo.routes.batch") && message.contains("its routes are chat"),
        "{message}"
    );
    let (message, _) = refusal(&format!("{BASE}\n[slo]\ndeclare = []\n"));
    assert!(
        message.contains("slo.declare") && message.contains("slo.declared"),
        "{message}"
    );
    let (message, _) = refusal(&format!(
        "{BASE}\n[slo]\n[slo.routes]\nchat = [\"e2e <= 2s\"]\n"
    ));
    assert!(
        message.contains("slo.declared") && message.contains("names no objective"),
        "{message}"
    );
    // An SLO judges every request: another SLO is another design (a campaign does not pool
    // goodputs read under two).
    assert_ne!(
        design_hash(text.as_bytes()).unwrap(),
        design_hash(BASE.as_bytes()).unwrap()
    );
}

/// Issue 38: a replica-loss run of a self-hosted target whose requests name no replica is
/// refused when it declares layer 7, warned of when it declares nothing, and loads clean as
/// layer 4 (G1 recorded only) or with a replica header.
#[test]
fn a_routing_regime_that_cannot_attribute_replicas_is_refused_at_its_key() {
    let base = "schema_version = 1\nprofile = \"experiment\"\n[target]\nkind = \"self-hosted\"\nbase_url = \"http://svc:8000\"\nmodel = \"m\"\nreplicas = [\"replica-0\", \"replica-1\"]\nROUTING\n[schedule]\nseed = 1\narrival = \"poisson\"\n[calibration]\nlambda_max_rps = 10.0\n[fault]\nvariant = \"clean-delete\"\nvictim = \"replica-1\"\ninjector = \"exec\"\nfire_command = [\"kubectl\", \"delete\", \"pod\", \"replica-1\"]\n[[routes]]\nlabel = \"chat\"\npath = \"/v1/chat/completions\"\n";
    let with = |routing: &str| load(&base.replace("ROUTING", routing));
    let refused = with("routing = \"layer-7\"").unwrap_err().to_string();
    assert!(
        refused.contains("target.replica_header") && refused.contains("layer-4"),
        "{refused}"
    );
    let unstated = with("").unwrap();
    assert_eq!(unstated.warnings().len(), 1, "{:?}", unstated.warnings());
    assert!(unstated.warnings()[0].contains("target.routing is not declared"));
    for fine in [
        "routing = \"layer-4\"",
        "routing = \"layer-7\"\nreplica_header = \"x-upstream\"",
        "replica_header = \"x-upstream\"",
    ] {
        assert_eq!(
            with(fine).unwrap().warnings(),
            Vec::<String>::new(),
            "{fine}"
        );
    }
    assert!(with("routing = \"layer-3\"").is_err());
}

/// Issue 38: the fault's confirmation address may be a DNS name (a headless Service's pod), as
/// a replica's may; a URL is refused at its key.
#[test]
fn a_confirmation_address_may_be_a_name_and_must_be_host_and_port() {
    let base = "schema_version = 1\nprofile = \"experiment\"\n[target]\nkind = \"self-hosted\"\nbase_url = \"http://svc:8000\"\nmodel = \"m\"\nreplicas = [\"replica-0\", \"replica-1\"]\nrouting = \"layer-4\"\n[schedule]\nseed = 1\narrival = \"poisson\"\n[calibration]\nlambda_max_rps = 10.0\n[fault]\nCONFIRM\nvariant = \"clean-delete\"\nvictim = \"replica-1\"\ninjector = \"exec\"\nfire_command = [\"kubectl\", \"delete\", \"pod\", \"replica-1\"]\n[[routes]]\nlabel = \"chat\"\npath = \"/v1/chat/completions\"\n";
    let with =
        |address: &str| load(&base.replace("CONFIRM", &format!("confirm_address = {address:?}")));
    for fine in [
        "10.0.0.12:8000",
        "replica-1.vllm.default.svc.cluster.local:8000",
        "_http._tcp.replica-1.vllm.default.svc.cluster.local",
    ] {
        with(fine).unwrap_or_else(|e| panic!("{fine}: {e}"));
    }
    for bad in ["http://replica-1:8000", "replica-1", "replica-1:0"] {
        let error = with(bad).unwrap_err().to_string();
        assert!(error.contains("fault.confirm_address"), "{bad}: {error}");
    }
    // What the key's sentence says is wrong, by kind.
    use super::relations::{host_and_port, AddressError};
    let owned = |s: &str| s.to_owned();
    assert_eq!(host_and_port("replica-1"), Err(AddressError::NoPort));
    assert_eq!(
        host_and_port("replica-1:0"),
        Err(AddressError::Port { port: owned("0") })
    );
    assert_eq!(
        host_and_port("http://replica-1:8000"),
        Err(AddressError::Host {
            host: owned("http://replica-1")
        })
    );
    assert_eq!(
        host_and_port("_http.replica-1"),
        Err(AddressError::Srv {
            address: owned("_http.replica-1")
        })
    );
}

/// `injector = "network-policy"` (issue 38 item 3): a black-hole only, with
/// `[fault.network_policy]` selecting the victim by labels and naming the expiry Job's image;
/// each missing or malformed part refused with its key.
#[test]
fn a_network_policy_partition_is_a_black_hole_with_its_section() {
    let fault = |variant: &str, section: &str| {
        BASE.replace(
            "variant = \"clean-delete\"\nvictim = \"replica-1\"\ninjector = \"kill-pid-file\"\npid_file = \"/run/replica-1.pid\"\n",
            &format!("variant = \"{variant}\"\nvictim = \"replica-1\"\ninjector = \"network-policy\"\n{section}"),
        )
    };
    let section = "[fault.network_policy]\npod_labels = { \"statefulset.kubernetes.io/pod-name\" = \"replica-1\" }\nexpiry_image = \"percentes:latest\"\n";
    let config = load(&fault("black-hole", section)).unwrap();
    let np = config.fault.network_policy.unwrap();
    assert_eq!(
        (np.namespace.as_str(), np.service_account.as_str()),
        ("default", "percentes-recorder")
    );
    assert_eq!(np.kubectl, ["kubectl"]);
    for (text, says) in [
        (
            fault("clean-delete", section),
            "is for variant \"black-hole\"",
        ),
        (fault("black-hole", ""), "needs [fault.network_policy]"),
        (
            fault(
                "black-hole",
                &section.replace(
                    "{ \"statefulset.kubernetes.io/pod-name\" = \"replica-1\" }",
                    "{}",
                ),
            ),
            "fault.network_policy.pod_labels",
        ),
        (
            fault(
                "black-hole",
                &section.replace("= \"replica-1\" }", "= \"replica 1\" }"),
            ),
            "is not a Kubernetes label",
        ),
        (
            fault(
                "black-hole",
                &format!("{section}namespace = \"Serving.ns\"\n"),
            ),
            "fault.network_policy.namespace",
        ),
        (
            fault("black-hole", &format!("{section}kubectl = []\n")),
            "expiry_image and kubectl",
        ),
    ] {
        let error = load(&text).unwrap_err().to_string();
        assert!(error.contains(says), "{says}: {error}");
    }
}

mod recording;

#[test]
fn a_calibrations_capacity_figures_load_and_bad_ones_are_named() {
    // What `percentes calibrate` prints beside lambda_max (SPEC §10 "Capacity check").
    let with = |lines: &str| {
        BASE.replace(
            "lambda_max_rps = 20.0",
            &format!("lambda_max_rps = 20.0\n{lines}"),
        )
    };
    let config = load(&with(
        "probe_ms = 41.5\nceiling_rps = 24.0\nceiling_offered_rps = 26.0",
    ))
    .unwrap();
    assert_eq!(config.calibration.probe_ms, Some(41.5));
    assert_eq!(config.calibration.ceiling_rps, Some(24.0));
    assert_eq!(config.calibration.ceiling_offered_rps, Some(26.0));
    for (lines, key, says) in [
        ("probe_ms = 0.0", "calibration.probe_ms", "positive time"),
        ("probe_ms = -1.0", "calibration.probe_ms", "positive time"),
        (
            "ceiling_rps = 24.0",
            "calibration.ceiling_rps",
            "ceiling_offered_rps",
        ),
        (
            "ceiling_offered_rps = 26.0",
            "calibration.ceiling_rps",
            "give both",
        ),
        (
            "ceiling_rps = -24.0\nceiling_offered_rps = 26.0",
            "calibration.ceiling_rps",
            "positive rate",
        ),
    ] {
        let err = load(&with(lines)).unwrap_err().to_string();
        assert!(err.contains(key) && err.contains(says), "{lines}: {err}");
    }
}
