//! Report-level oracles: scripted journals whose every number is known in advance, analyzed
//! through load -> analyze -> render exactly as `percentes analyze` does.

use super::*;
use crate::estimate::incidence::Method;
use crate::report;
use percentes_formats::config::Config;
use percentes_formats::journal::records::{
    event_kind_code, EventRecord, RequestRecord, SealStatus, TelemetryRecord,
};
use percentes_formats::journal::synthetic::{self, completed, ended, telemetry_at};
use percentes_formats::schedule::Entry;

const MS: u64 = 1_000_000;
const S: u64 = 1_000_000_000;

/// Dev profile, time factor 10: warm-up 6 s, measurement 30 s, cooldown 6 s, timeout 3 s;
/// 20 rps deterministic, so request i is sent at i x 50 ms.
const STEADY: &str = r#"
schema_version = 1
profile = "dev"
[dev]
time_factor = 10
[target]
kind = "mock"
base_url = "http://127.0.0.1:8000"
model = "mock"
replicas = ["replica-0", "replica-1"]
[schedule]
seed = 7
arrival = "deterministic"
rate_rps = 20.0
[fault]
variant = "none"
[[routes]]
label = "chat"
path = "/v1/chat/completions"
weight = 1
"#;

/// The same with a clean-delete fault: 2 x 0.65 x 20 = 26 rps; warm-up 6 s, baseline 30 s,
/// T_inject 36 s, fault and recovery to 96 s, cooldown to 102 s; detector R 1 s, H 3 s, 0.1 s
/// buckets.
const FAULT: &str = r#"
schema_version = 1
profile = "dev"
[dev]
time_factor = 10
[target]
kind = "mock"
base_url = "http://127.0.0.1:8000"
model = "mock"
replicas = ["replica-0", "replica-1"]
[schedule]
seed = 7
arrival = "deterministic"
[calibration]
lambda_max_rps = 20.0
[fault]
variant = "clean-delete"
victim = "replica-1"
injector = "kill-pid-file"
pid_file = "state/replica-1.pid"
[[routes]]
label = "chat"
path = "/v1/chat/completions"
weight = 1
"#;

fn config(text: &str) -> Config {
    Config::parse(text.as_bytes()).expect("test config loads")
}

/// Telemetry each second of the schedule, every gate passing.
fn quiet_telemetry(seconds: u64) -> Vec<TelemetryRecord> {
    (1..=seconds).map(|s| telemetry_at(s * S)).collect()
}

fn journal_file(name: &str, bytes: &[u8]) -> JournalFile {
    let dir = std::env::temp_dir().join(format!("percentes-analysis-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    JournalFile::open(&path).unwrap()
}

fn analyze_bytes(name: &str, bytes: &[u8], method: Method) -> Report {
    let file = journal_file(name, bytes);
    let run = crate::load::load(&file).expect("scripted journals load");
    analyze(
        &run,
        &file,
        method,
        &Analyzer {
            version: "test".into(),
            commit: "test".into(),
        },
    )
}

fn window<'a>(report: &'a Report, name: &str) -> &'a WindowReport {
    report
        .windows
        .iter()
        .find(|w| w.window == name)
        .unwrap_or_else(|| panic!("no {name} window"))
}

fn reading<'a>(w: &'a WindowReport, q: &str) -> &'a str {
    &w.completion
        .readings
        .iter()
        .find(|r| r.quantile == q)
        .unwrap()
        .text
}

/// SPEC A1's counterexample inside a measurement window: half the requests error at 0.5 s, the
/// other half complete at 1 s.
fn a1_journal() -> Vec<u8> {
    let request = |e: &Entry| {
        Some(if e.index.is_multiple_of(2) {
            ended(e, "reset", 500 * MS)
        } else {
            completed(e, 100_000, 200 * MS, S, vec![1000; 4])
        })
    };
    synthetic::scripted(
        &config(STEADY),
        &request,
        Vec::new(),
        quiet_telemetry(42),
        SealStatus::Completed,
    )
}

#[test]
fn a1_at_report_level_v0_2_gives_one_half_and_v0_1_gives_one() {
    let bytes = a1_journal();
    let v2 = analyze_bytes("a1.pj", &bytes, Method::AalenJohansen);
    let v1 = analyze_bytes("a1.pj", &bytes, Method::KaplanMeierErrorsCensored);
    assert!(v2.validity.valid, "{:?}", v2.validity);
    let (m2, m1) = (window(&v2, "measurement"), window(&v1, "measurement"));
    assert_eq!(m2.scheduled, 600);
    assert_eq!((m2.outcomes.completed, m2.outcomes.errored), (300, 300));
    assert_eq!(m2.completion.final_incidence, 0.5);
    assert_eq!(m1.completion.final_incidence, 1.0);
    assert_eq!(reading(m2, "p50"), "p50 = 1.000 s");
    assert_eq!(
        reading(m2, "p90"),
        "p90 unattainable; final incidence 0.5000, ceiling 0.5000"
    );
    assert_eq!(reading(m1, "p90"), "p90 = 1.000 s");
    // Half errored: the completed-only percentiles carry the §3 caveat.
    assert!(
        m2.caveat.as_deref().unwrap().contains("0.5000"),
        "{:?}",
        m2.caveat
    );
    assert_eq!(m2.error_rate.value, Some(0.5));
    // Only completions enter the histograms.
    assert_eq!(m2.e2e.n, 300);
    assert_eq!(m2.inter_chunk.n, 300 * 4);
    // HdrHistogram reads a quantile as the highest value equivalent to the recorded one at three
    // significant figures (as Java's and Python's do): 200,000 us reads as 200,063 us.
    assert_eq!(m2.ttft.percentiles_us[0], ("p50".into(), 200_063));
    assert_eq!(v2.provenance.spec_applied, "v0.2");
    assert_eq!(v1.provenance.spec_applied, "v0.1");
}

#[test]
fn reanalysis_is_byte_identical_and_the_versions_differ_only_where_errors_precede_completions() {
    let bytes = a1_journal();
    let render = |method| {
        let r = analyze_bytes("same.pj", &bytes, method);
        (
            report::json(&r),
            report::markdown(&r),
            report::interval_log(&r).unwrap(),
        )
    };
    let first = render(Method::AalenJohansen);
    assert_eq!(
        first,
        render(Method::AalenJohansen),
        "same journal, same spec: same bytes"
    );

    // No errors at all: v0.1 and v0.2 give the same numbers; only the labels naming the version differ.
    let clean = synthetic::scripted(
        &config(STEADY),
        &|e: &Entry| {
            Some(if e.index.is_multiple_of(7) {
                ended(e, "timeout", 3 * S)
            } else {
                completed(e, 100_000, 150 * MS, 700 * MS, vec![500; 3])
            })
        },
        Vec::new(),
        quiet_telemetry(42),
        SealStatus::Completed,
    );
    let strip = |method| {
        let mut r = analyze_bytes("clean.pj", &clean, method);
        r.provenance.spec_applied.clear();
        r.provenance.curve_method.clear();
        for w in &mut r.windows {
            w.completion.method = "";
        }
        report::json(&r)
    };
    assert_eq!(
        strip(Method::AalenJohansen),
        strip(Method::KaplanMeierErrorsCensored)
    );
    // With errors before completions they differ.
    let a1 = |method| {
        let mut r = analyze_bytes("a1b.pj", &bytes, method);
        r.provenance.spec_applied.clear();
        r.provenance.curve_method.clear();
        for w in &mut r.windows {
            w.completion.method = "";
        }
        report::json(&r)
    };
    assert_ne!(
        a1(Method::AalenJohansen),
        a1(Method::KaplanMeierErrorsCensored)
    );
}

#[test]
fn censored_requests_stay_on_the_curve_and_out_of_the_histograms() {
    // Every 10th request hangs to the 3 s horizon; the rest complete at 400 ms.
    let bytes = synthetic::scripted(
        &config(STEADY),
        &|e: &Entry| {
            Some(if e.index.is_multiple_of(10) {
                ended(e, "timeout", 3 * S)
            } else {
                completed(e, 100_000, 100 * MS, 400 * MS, vec![])
            })
        },
        Vec::new(),
        quiet_telemetry(42),
        SealStatus::Completed,
    );
    let r = analyze_bytes("hang.pj", &bytes, Method::AalenJohansen);
    let m = window(&r, "measurement");
    assert_eq!(m.outcomes.censored, 60);
    assert_eq!(m.censored_rate.value, Some(0.1));
    assert_eq!(m.e2e.n, 540);
    assert_eq!(m.completion.final_incidence, 0.9);
    assert!(
        (m.completion.ceiling - 1.0).abs() < 1e-12,
        "censored mass can still complete"
    );
    assert_eq!(reading(m, "p50"), "p50 = 0.400 s");
    assert_eq!(reading(m, "p95"), "p95 > 3.000 s (horizon); ceiling 1.0000");
    // 10 % censored is over the 5 % line: the caveat travels with the percentiles.
    assert!(m.caveat.is_some());
    // Goodput: completions within the SLO over all scheduled.
    assert_eq!(m.goodput.value, Some(0.9));
}

#[test]
fn tails_report_intervals_only_with_the_sample_budget() {
    let r = analyze_bytes("a1tails.pj", &a1_journal(), Method::AalenJohansen);
    let m = window(&r, "measurement");
    // 300 completions: p95 gets an interval (>= 73), p99 does not (< 381).
    assert!(m.e2e.tails[0].interval_us.is_some(), "{:?}", m.e2e.tails[0]);
    assert_eq!(
        m.e2e.tails[1].text,
        "p99-CI omitted (sample budget insufficient, §7)"
    );
    // The warm-up has 120 requests, 60 completed: neither.
    let w = window(&r, "warm-up");
    assert_eq!(
        w.e2e.tails[0].text,
        "p95-CI omitted (sample budget insufficient, §7)"
    );
}

fn gate<'a>(r: &'a Report, prefix: &str) -> &'a Gate {
    r.validity
        .gates
        .iter()
        .find(|g| g.gate.starts_with(prefix))
        .unwrap()
}

fn steady_with(
    telemetry: Vec<TelemetryRecord>,
    request: &dyn Fn(&Entry) -> Option<RequestRecord>,
) -> Report {
    let bytes = synthetic::scripted(
        &config(STEADY),
        request,
        Vec::new(),
        telemetry,
        SealStatus::Completed,
    );
    analyze_bytes("gates.pj", &bytes, Method::AalenJohansen)
}

fn fine(e: &Entry) -> Option<RequestRecord> {
    Some(completed(e, 100_000, 100 * MS, 400 * MS, vec![]))
}

#[test]
fn each_client_gate_passes_fails_and_goes_unobserved() {
    let passing = steady_with(quiet_telemetry(42), &fine);
    assert!(passing.validity.valid);
    assert!(
        passing.validity.gates.iter().all(|g| g.status == "pass"),
        "{:?}",
        passing.validity.gates
    );
    assert_eq!(passing.validity.gates.len(), 5);

    // G2.1: one dispatch 60 ms late in the measurement window fails the max (50 ms) but not p99.
    let late = steady_with(quiet_telemetry(42), &|e: &Entry| {
        Some(completed(
            e,
            if e.index == 300 { 60 * MS } else { 100_000 },
            100 * MS,
            400 * MS,
            vec![],
        ))
    });
    assert_eq!(gate(&late, "G2.1 send skew max").status, "fail");
    assert_eq!(
        gate(&late, "G2.1 send skew max").by.as_deref(),
        Some("10.000 ms over")
    );
    assert_eq!(gate(&late, "G2.1 send skew p99").status, "pass");
    assert!(!late.validity.valid);
    assert!(
        late.windows.is_empty(),
        "an invalid run publishes no statistic"
    );
    assert!(late
        .windows_withheld
        .as_deref()
        .unwrap()
        .contains("G2.1 send skew max"));
    // ... and the same late dispatch in the warm-up is outside the measured windows.
    let warm = steady_with(quiet_telemetry(42), &|e: &Entry| {
        Some(completed(
            e,
            if e.index == 3 { 60 * MS } else { 100_000 },
            100 * MS,
            400 * MS,
            vec![],
        ))
    });
    assert!(warm.validity.valid);

    // G2.2: one undispatched request.
    let undispatched = steady_with(quiet_telemetry(42), &|e: &Entry| {
        Some(if e.index == 200 {
            ended(e, "undispatched", 0)
        } else {
            completed(e, 100_000, 100 * MS, 400 * MS, vec![])
        })
    });
    assert_eq!(gate(&undispatched, "G2.2").status, "fail");
    assert_eq!(gate(&undispatched, "G2.2").observed, "1 requests");

    // G2.3: five consecutive seconds at 75 % host CPU, inside the measurement window.
    let mut hot = quiet_telemetry(42);
    for t in &mut hot[10..15] {
        t.host_cpu_busy_ppm = 750_000;
    }
    let r = steady_with(hot.clone(), &fine);
    assert_eq!(gate(&r, "G2.3").status, "fail");
    assert_eq!(gate(&r, "G2.3").observed, "75.000 %");
    // Four hot seconds average under 70 % over every 5 s window: pass.
    hot[14].host_cpu_busy_ppm = 100_000;
    let r = steady_with(hot, &fine);
    assert_eq!(gate(&r, "G2.3").status, "pass", "{:?}", gate(&r, "G2.3"));

    // G2.4: one second whose ticker p99 is 1 ms exactly (the gate is strict).
    let mut stalled = quiet_telemetry(42);
    stalled[20].stall_p99_ns = 1_000_000;
    let r = steady_with(stalled, &fine);
    assert_eq!(gate(&r, "G2.4").status, "fail");

    // No telemetry at all: CPU and stall are unobserved, which fails the run (§10).
    let r = steady_with(Vec::new(), &fine);
    assert_eq!(gate(&r, "G2.3").status, "unobserved");
    assert_eq!(gate(&r, "G2.4").status, "unobserved");
    assert!(!r.validity.valid);
}

/// The fault run: the victim (odd indices) errors from T_inject for 20 s; requests in flight on it
/// at the fire are reset at the fire; then everything completes again.
fn fault_journal(recover_after_s: Option<u64>) -> Vec<u8> {
    let inject = 36 * S;
    let fired = inject + 50 * MS;
    let request = move |e: &Entry| {
        let t = e.intended_ns;
        let on_victim = e.index % 2 == 1;
        let mut r = completed(e, 100_000, 100 * MS, 500 * MS, vec![2000; 2]);
        r.replica = if on_victim { "replica-1" } else { "replica-0" }.into();
        let broken = t >= inject && recover_after_s.is_none_or(|s| t < inject + s * S);
        if on_victim && t < fired && t + 500 * MS > fired {
            // In flight on the victim at the fire: reset then.
            let mut reset = ended(e, "reset", fired - t);
            reset.replica = "replica-1".into();
            return Some(reset);
        }
        if on_victim && broken {
            let mut refused = ended(e, "refused", MS);
            refused.replica = String::new();
            return Some(refused);
        }
        Some(r)
    };
    let event = |at_ns, kind: &str| EventRecord {
        at_ns,
        kind: event_kind_code(kind).unwrap(),
        subject: "replica-1".into(),
        detail: String::new(),
        value: None,
    };
    synthetic::scripted(
        &config(FAULT),
        &request,
        vec![event(0, "fault-armed"), event(fired, "fault-fired")],
        quiet_telemetry(102),
        SealStatus::Completed,
    )
}

#[test]
fn fault_windows_follow_the_fire_anchor_and_the_recovery_boundary() {
    let r = analyze_bytes("fault.pj", &fault_journal(Some(20)), Method::AalenJohansen);
    assert!(r.validity.valid, "{:?}", r.validity);
    let names: Vec<&str> = r.timeline.windows.iter().map(|w| w.window).collect();
    assert_eq!(
        names,
        ["warm-up", "baseline", "guard", "fault", "recovery", "cooldown"]
    );
    // The fire was 50 ms late: the anchor is T_inject, and the baseline ends tau = 3 s before it.
    assert_eq!(r.timeline.fire_anchor_s, Some(36.0));
    assert_eq!(r.timeline.windows[1].end_s, 33.0);
    assert_eq!(r.timeline.windows[2].end_s, 36.0);
    // Errors stop at 56 s. Half the traffic failing gives windowed goodput 0.5; the 1 s detector
    // window first reaches 90 % of the baseline once at most 0.2 s of it precede 56 s.
    let recovered = r.timeline.recovered_s.unwrap();
    assert!(
        (56.7..=57.0).contains(&recovered),
        "recovered at {recovered}"
    );
    let fault = window(&r, "fault");
    assert!(
        fault.error_rate.value.unwrap() > 0.45,
        "{:?}",
        fault.error_rate
    );
    assert_eq!(window(&r, "recovery").outcomes.errored, 0);
    assert_eq!(window(&r, "baseline").goodput.value, Some(1.0));
    // Modal distance is reported on the fault window only; completions there are all 500 ms,
    // baseline SD 0: a signed infinity.
    assert_eq!(fault.modal_distance.len(), 2);
    assert_eq!(fault.modal_distance[1].distance, "+inf");
    // In flight at the fire: every victim request in flight was reset; the survivor's completed.
    let f = r.in_flight_at_fire.as_ref().unwrap();
    assert_eq!(f.victim, "replica-1");
    assert!(
        f.on_victim.errored > 0 && f.on_victim.completed == 0,
        "{f:?}"
    );
    assert!(
        f.on_survivors.completed > 0 && f.on_survivors.errored == 0,
        "{f:?}"
    );
    // AC4: nothing from the baseline window is unresolved at the fire.
    assert_eq!(window(&r, "baseline").outcomes.errored, 0);
}

#[test]
fn without_recovery_the_fault_window_runs_to_the_timeout() {
    let r = analyze_bytes("stuck.pj", &fault_journal(None), Method::AalenJohansen);
    assert_eq!(r.timeline.recovered_s, None);
    assert!(
        r.timeline.recovery_note.contains("no recovery"),
        "{}",
        r.timeline.recovery_note
    );
    assert_eq!(
        (window(&r, "fault").start_s, window(&r, "fault").end_s),
        (36.0, 96.0)
    );
    assert_eq!(window(&r, "recovery").scheduled, 0);
}

#[test]
fn an_unsealed_or_dev_run_says_not_publishable_in_every_output() {
    let r = analyze_bytes("dev.pj", &a1_journal(), Method::AalenJohansen);
    assert!(r
        .not_publishable
        .iter()
        .any(|w| w.contains("NOT PUBLISHABLE")));
    assert!(report::markdown(&r).contains("NOT PUBLISHABLE"));
    assert!(report::json(&r).contains("NOT PUBLISHABLE"));
    assert!(
        r.audit.decision.starts_with("descriptive only"),
        "{}",
        r.audit.decision
    );
}

#[test]
fn the_audit_reconciles_stage_counts_and_rates() {
    let r = analyze_bytes("audit.pj", &a1_journal(), Method::AalenJohansen);
    let a = &r.audit;
    assert!(a.reconciled, "{}", a.reconciliation);
    assert_eq!(a.stages[0], ("scheduled".into(), 840));
    assert_eq!(a.stages[1], ("dispatched".into(), 840));
    // The skew of every dispatch is 50 or 100 us.
    assert_eq!(a.skew_us.max, 100);
    let measurement = a.phases.iter().find(|p| p.phase == "measurement").unwrap();
    assert_eq!(measurement.requested_rps, 20.0);
    assert_eq!(measurement.achieved_rps, 20.0);
    assert_eq!(measurement.scheduled_cv, Some(0.0));
}

#[test]
fn the_interval_log_decodes_to_the_same_histograms() {
    use hdrhistogram::serialization::interval_log::{IntervalLogIterator, LogEntry};
    use hdrhistogram::serialization::Deserializer;
    let r = analyze_bytes("hlog.pj", &a1_journal(), Method::AalenJohansen);
    let log = report::interval_log(&r).unwrap();
    let mut decoded = 0;
    for entry in IntervalLogIterator::new(&log) {
        let LogEntry::Interval(h) = entry.unwrap() else {
            continue;
        };
        let tag = h.tag().unwrap().as_str().to_owned();
        let bytes = base64_decode(h.encoded_histogram());
        let histogram: hdrhistogram::Histogram<u64> = Deserializer::new()
            .deserialize(&mut bytes.as_slice())
            .unwrap();
        let (latency, name) = tag.split_once('.').unwrap();
        let w = window(&r, name);
        let expected = match latency {
            "ttft" => &w.ttft,
            "e2e" => &w.e2e,
            _ => &w.inter_chunk,
        };
        assert_eq!(
            &histogram,
            expected.histogram.as_ref().unwrap().inner(),
            "{tag}"
        );
        decoded += 1;
    }
    assert_eq!(decoded, 3 * r.windows.len());
}

/// Standard base64 (the interval log's encoding), decoded by hand so the test does not lean on
/// the same code that wrote it.
fn base64_decode(text: &str) -> Vec<u8> {
    let value = |c: u8| match c {
        b'A'..=b'Z' => c - b'A',
        b'a'..=b'z' => c - b'a' + 26,
        b'0'..=b'9' => c - b'0' + 52,
        b'+' => 62,
        b'/' => 63,
        _ => panic!("not base64: {c}"),
    };
    let clean: Vec<u8> = text.bytes().filter(|&c| c != b'=').collect();
    let mut out = Vec::new();
    for chunk in clean.chunks(4) {
        let mut acc = 0u32;
        for (i, &c) in chunk.iter().enumerate() {
            acc |= u32::from(value(c)) << (18 - 6 * i);
        }
        let bytes = acc.to_be_bytes();
        out.extend_from_slice(&bytes[1..chunk.len()]);
    }
    out
}

#[test]
fn the_parquet_export_has_one_row_per_scheduled_request() {
    use polars::prelude::*;
    let file = journal_file("export.pj", &a1_journal());
    let run = crate::load::load(&file).unwrap();
    let scheduled = run.requests.len();
    let path =
        std::env::temp_dir().join(format!("percentes-export-{}.parquet", std::process::id()));
    assert_eq!(crate::export::parquet(run, &path).unwrap(), scheduled);
    let frame = ParquetReader::new(std::fs::File::open(&path).unwrap())
        .finish()
        .unwrap();
    assert_eq!(frame.height(), 840);
    // Errored requests have no e2e latency (null), completed ones do.
    let e2e = frame.column("e2e_ns").unwrap();
    assert_eq!(e2e.null_count(), 420);
    let outcome = frame.column("outcome").unwrap().str().unwrap();
    assert_eq!(outcome.get(0), Some("errored"));
    assert_eq!(outcome.get(1), Some("completed"));
    let _ = std::fs::remove_file(path);
}

mod properties {
    use super::*;
    use proptest::prelude::*;

    /// Whether some errored request of `rows` ended strictly before some completed one (on the
    /// latency axis): exactly where v0.1 and v0.2 part (A1).
    fn error_precedes_completion(outcomes: &[(bool, u64)]) -> bool {
        let first_error = outcomes
            .iter()
            .filter(|(done, _)| !done)
            .map(|&(_, t)| t)
            .min();
        let last_completion = outcomes
            .iter()
            .filter(|(done, _)| *done)
            .map(|&(_, t)| t)
            .max();
        matches!((first_error, last_completion), (Some(e), Some(c)) if e < c)
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]

        /// Per request: (errored?, latency in 50 ms steps), cycled over the schedule.
        #[test]
        fn reanalysis_is_identical_and_versions_part_exactly_where_errors_precede_completions(
            pattern in proptest::collection::vec((proptest::bool::weighted(0.2), 1u64..40), 1..60),
        ) {
            let script = pattern.clone();
            let request = move |e: &Entry| {
                let (errored, steps) = script[e.index as usize % script.len()];
                Some(if errored {
                    ended(e, "reset", steps * 50 * MS)
                } else {
                    completed(e, 100_000, steps * 25 * MS, steps * 50 * MS, vec![])
                })
            };
            let bytes = synthetic::scripted(&config(STEADY), &request, Vec::new(), quiet_telemetry(42), SealStatus::Completed);
            let v2 = analyze_bytes("prop.pj", &bytes, Method::AalenJohansen);
            let again = analyze_bytes("prop.pj", &bytes, Method::AalenJohansen);
            prop_assert_eq!(report::json(&v2), report::json(&again));
            prop_assert_eq!(report::markdown(&v2), report::markdown(&again));
            let v1 = analyze_bytes("prop.pj", &bytes, Method::KaplanMeierErrorsCensored);
            let file = journal_file("prop.pj", &bytes);
            let run = crate::load::load(&file).unwrap();
            for (w2, w1) in v2.windows.iter().zip(&v1.windows) {
                let rows: Vec<(bool, u64)> = (0..run.requests.len())
                    .filter(|&r| (w2.start_s..w2.end_s).contains(&(run.requests.intended_ns[r] as f64 / 1e9)))
                    .map(|r| (
                        run.requests.outcome(r) == Some(Outcome::Completed),
                        run.requests.terminal_ns[r] - run.requests.intended_ns[r],
                    ))
                    .collect();
                let apart = w2
                    .completion
                    .grid
                    .iter()
                    .zip(&w1.completion.grid)
                    .any(|(a, b)| (a.incidence - b.incidence).abs() > 1e-12)
                    || (w2.completion.final_incidence - w1.completion.final_incidence).abs() > 1e-12;
                prop_assert_eq!(apart, error_precedes_completion(&rows), "window {}", w2.window);
            }
        }
    }
}
