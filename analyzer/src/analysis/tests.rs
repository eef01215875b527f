//! Report-level oracles: scripted journals whose every number is known in advance, analyzed
//! through load -> analyze -> render exactly as `percentes analyze` does.

use super::*;
use crate::model::{Analyzer, Distribution, Effect, Gate, GateId, Report, Status, WindowReport};
use crate::report;
use crate::JournalFile;
use percentes_formats::config::Config;
use percentes_formats::journal::records::EventKind;
use percentes_formats::journal::records::Outcome;
use percentes_formats::journal::records::{
    EventRecord, RequestRecord, SealStatus, TelemetryRecord,
};
use percentes_formats::journal::synthetic::{self, completed, ended, telemetry_at};
use percentes_formats::schedule::Entry;
use percentes_formats::spec::Spec;

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
    let dir = percentes_testkit::Scratch::new("analysis");
    // A fresh file per call: tests run in parallel, and rewriting a file another test has mapped
    // would pull the pages from under it (SIGBUS).
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let path = dir.join(format!("{n}-{name}"));
    std::fs::write(&path, bytes).unwrap();
    let file = JournalFile::open(&path).unwrap();
    // The map holds the bytes from here (nothing reopens the path), so the name goes at once:
    // left in place, a run of these tests left 64 MB in the temporary folder for good. Where a
    // mapped file cannot be removed (Windows), it stays.
    let _ = std::fs::remove_file(&path);
    file
}

fn analyze_bytes(name: &str, bytes: &[u8], spec: Spec) -> Report {
    let file = journal_file(name, bytes);
    let run = crate::load::load(&file).expect("scripted journals load");
    analyze(
        &run,
        &file,
        spec,
        &Analyzer {
            version: "test".into(),
            commit: "test".into(),
            diagnose: false,
            by: Vec::new(),
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
    let v2 = analyze_bytes("a1.pj", &bytes, Spec::V0_2);
    let v1 = analyze_bytes("a1.pj", &bytes, Spec::V0_1);
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
    let first = render(Spec::V0_2);
    assert_eq!(
        first,
        render(Spec::V0_2),
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
    assert_eq!(strip(Spec::V0_2), strip(Spec::V0_1));
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
    assert_ne!(a1(Spec::V0_2), a1(Spec::V0_1));
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
    let r = analyze_bytes("hang.pj", &bytes, Spec::V0_2);
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
    let r = analyze_bytes("a1tails.pj", &a1_journal(), Spec::V0_2);
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

fn gate(r: &Report, id: GateId) -> &Gate {
    r.validity.gates.iter().find(|g| g.id == id).unwrap()
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
    analyze_bytes("gates.pj", &bytes, Spec::V0_2)
}

fn fine(e: &Entry) -> Option<RequestRecord> {
    Some(completed(e, 100_000, 100 * MS, 400 * MS, vec![]))
}

#[test]
fn each_client_gate_passes_fails_and_goes_unobserved() {
    let passing = steady_with(quiet_telemetry(42), &fine);
    assert!(passing.validity.valid);
    let client: Vec<&Gate> = passing
        .validity
        .gates
        .iter()
        .filter(|g| g.id.is_client_gate())
        .collect();
    assert_eq!(client.len(), 5);
    assert!(
        client.iter().all(|g| g.status == Status::Pass),
        "{client:?}"
    );
    // Without a fault the §1 gates do not apply.
    assert!(passing
        .validity
        .gates
        .iter()
        .filter(|g| !g.id.is_client_gate())
        .all(|g| g.status == Status::NotApplicable));

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
    assert_eq!(gate(&late, GateId::SendSkewMax).status, Status::Fail);
    assert_eq!(
        gate(&late, GateId::SendSkewMax).by.as_deref(),
        Some("10.000 ms over")
    );
    assert_eq!(gate(&late, GateId::SendSkewP99).status, Status::Pass);
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
    assert_eq!(
        gate(&undispatched, GateId::Undispatched).status,
        Status::Fail
    );
    assert_eq!(
        gate(&undispatched, GateId::Undispatched).observed,
        "1 requests"
    );

    // G2.3: five consecutive seconds at 75 % host CPU, inside the measurement window.
    let mut hot = quiet_telemetry(42);
    for t in &mut hot[10..15] {
        t.host_cpu_busy_ppm = 750_000;
    }
    let r = steady_with(hot.clone(), &fine);
    assert_eq!(gate(&r, GateId::HostCpu).status, Status::Fail);
    assert_eq!(gate(&r, GateId::HostCpu).observed, "75.000 %");
    // Four hot seconds average under 70 % over every 5 s window: pass.
    hot[14].host_cpu_busy_ppm = 100_000;
    let r = steady_with(hot, &fine);
    assert_eq!(
        gate(&r, GateId::HostCpu).status,
        Status::Pass,
        "{:?}",
        gate(&r, GateId::HostCpu)
    );

    // Issue 50: seconds whose host CPU the recorder could not read (its file descriptors
    // exhausted) are not a quiet host. With 26 of 28 seconds unread and the two read ones idle,
    // the gate once passed at 0 %; it is now not observed, which fails the run (§10).
    let mut unread = quiet_telemetry(42);
    for t in &mut unread[8..34] {
        t.host_cpu_busy_ppm = percentes_formats::journal::records::HOST_CPU_NOT_READ;
        t.recorder_cpu_ns = percentes_formats::journal::records::RECORDER_CPU_NOT_READ;
    }
    let r = steady_with(unread, &fine);
    let g = gate(&r, GateId::HostCpu);
    assert_eq!(g.status, Status::Unobserved, "{g:?}");
    assert!(
        g.note
            .contains("26 measured seconds have no host CPU reading"),
        "{g:?}"
    );
    assert!(!r.validity.valid);

    // G2.4: one second whose ticker p99 is 1 ms exactly (the gate is strict).
    let mut stalled = quiet_telemetry(42);
    stalled[20].stall_p99_ns = 1_000_000;
    let r = steady_with(stalled, &fine);
    assert_eq!(gate(&r, GateId::RuntimeStall).status, Status::Fail);

    // No telemetry at all: CPU and stall are unobserved, which fails the run (§10).
    let r = steady_with(Vec::new(), &fine);
    assert_eq!(gate(&r, GateId::HostCpu).status, Status::Unobserved);
    assert_eq!(gate(&r, GateId::RuntimeStall).status, Status::Unobserved);
    assert!(!r.validity.valid);
}

/// Issue 50: SYNs to the target dropped for a while. Requests 100-199 go out on time and
/// wait 1.5 s for their connect (the SYN retransmitted), so G2.1 fails under v0.3 on (its skew
/// runs to the moment a request could be sent); the report splits the late ones by where the
/// time went and no longer says every late request waited on the client. A starved client whose
/// connects began late is still its own.
#[test]
fn g2_1_says_whose_wait_it_was() {
    // Requests 100-199 connect, the connect beginning `began_ms` after the intended time and
    // ending 1.5 s after it.
    let late_connects = |began_ms: u64| {
        let fate = move |e: &Entry| {
            let mut r = completed(e, 100_000, 1_700 * MS, 2_000 * MS, vec![]);
            if (100..200).contains(&e.index) {
                r.connect_start_ns = Some(e.intended_ns + began_ms * MS);
                r.connect_end_ns = Some(e.intended_ns + 1_500 * MS);
                r.connection_reused = false;
            }
            Some(r)
        };
        let bytes = synthetic::scripted(
            &config(STEADY),
            &fate,
            Vec::new(),
            quiet_telemetry(42),
            SealStatus::Completed,
        );
        let r = analyze_bytes("late-connects.pj", &bytes, Spec::V0_5);
        assert_eq!(gate(&r, GateId::SendSkewP99).status, Status::Fail);
        let words = crate::report::client_words(&r, std::path::Path::new("r.pj")).join("\n");
        (r, words)
    };
    // SYNs dropped: each connect began on time and waited for its SYN-ACK.
    let (r, words) = late_connects(0);
    let split = r.validity.late_sends.expect("the late ones split");
    // Requests 100-119 fall in the 6 s warm-up, which G2.1 does not read.
    assert_eq!(
        (split.late, split.waited_on_connection, split.began_late),
        (80, 80, 0)
    );
    assert!(words.contains("AND THE WAIT WAS THE TARGET'S"), "{words}");
    assert!(
        words.contains("80 began on time and waited for their connection"),
        "{words}"
    );
    assert!(
        !words.contains("every late request waited on the client"),
        "{words}"
    );
    // The same lateness begun late (the connect itself started 1.4 s late): the client's.
    let (r, words) = late_connects(1_400);
    assert_eq!(
        r.validity.late_sends, None,
        "nothing waited on a connection"
    );
    assert!(
        words.contains("THE CLIENT FAILED ITS OWN CHECKS"),
        "{words}"
    );
}

/// One `cgroup-cpu` second: `busy` of a half-core quota (none when `quota_us` is 0), 10 ms
/// throttled in 2 periods.
fn cgroup_second(at_ns: u64, busy: f64, quota_us: u64) -> EventRecord {
    use percentes_formats::journal::cgroup::CgroupCpu;
    let cpu = CgroupCpu {
        version: 2,
        usage_ns: (busy * 0.5 * S as f64) as u64,
        throttled_ns: 10 * MS,
        periods: 10,
        throttled_periods: 2,
        quota_us,
        period_us: 100_000,
        interval_ns: S,
    };
    EventRecord {
        at_ns,
        kind: EventKind::CgroupCpu.code(),
        subject: "/kubepods/pod1".into(),
        detail: cpu.detail(),
        value: cpu.value(),
    }
}

fn with_cgroup(host_ppm: u32, events: Vec<EventRecord>, spec: Spec) -> Report {
    let mut telemetry = quiet_telemetry(42);
    for t in &mut telemetry {
        t.host_cpu_busy_ppm = host_ppm;
    }
    let bytes = synthetic::scripted(
        &config(STEADY),
        &fine,
        events,
        telemetry,
        SealStatus::Completed,
    );
    analyze_bytes("cgroup.pj", &bytes, spec)
}

/// Issue 16 item 5: in a container G2.3 reads the recorder's cgroup against its quota (v0.3),
/// says so, and keeps the host's /proc/stat reading in the audit; v0.2 reads /proc/stat as
/// archived. Hand-computed: 0.9 of a half-core quota is 90 %; the measured span is 6 s to 36 s
/// (warm-up 6 s, measurement 30 s at factor 10), overlapped by the seconds ending at 7 .. 36 s,
/// so 30 seconds of 10 ms and 2 periods throttled: 300 ms in 60 periods. Deliberate break:
/// reading /proc/stat in a container passes the starved recorder and fails the idle one.
#[test]
fn in_a_cgroup_with_a_quota_g2_3_reads_the_cgroup_and_says_so() {
    let busy = |b: f64| (1..=42).map(|s| cgroup_second(s * S, b, 50_000)).collect();
    // The node is quiet (10 %), the recorder's quota is 90 % used: the client is starved.
    let starved = with_cgroup(100_000, busy(0.9), Spec::CURRENT);
    let g = gate(&starved, GateId::HostCpu);
    assert_eq!(g.status, Status::Fail, "{g:?}");
    assert_eq!(g.observed, "90.000 %");
    assert!(g.note.contains("cgroup against its quota"), "{}", g.note);
    let tm = &starved.audit.telemetry;
    assert_eq!(tm.host_cpu_max_5s_percent.map(|v| v.round()), Some(10.0));
    assert_eq!(
        tm.cgroup_cpu_max_5s_percent
            .map(|v| (v * 1e6).round() / 1e6),
        Some(90.0)
    );
    assert_eq!(tm.cgroup_throttled, Some((300.0, 60)));
    assert!(report::markdown(&starved)
        .contains("cgroup CPU max 5 s 90.0 % of its quota (throttled 300.0 ms in 60 periods)"));
    // v0.2's rules read /proc/stat, and say the journal has what v0.3 reads.
    let archived = with_cgroup(100_000, busy(0.9), Spec::V0_2);
    let g = gate(&archived, GateId::HostCpu);
    assert_eq!((g.status, g.observed.as_str()), (Status::Pass, "10.000 %"));
    assert!(g.note.contains("which spec v0.3 gates on"), "{}", g.note);
    // The node is busy (90 %) with other pods, the recorder uses 20 % of its quota: it passes.
    let idle = with_cgroup(900_000, busy(0.2), Spec::CURRENT);
    let g = gate(&idle, GateId::HostCpu);
    assert_eq!((g.status, g.observed.as_str()), (Status::Pass, "20.000 %"));
    // Without a quota the cgroup cannot bound the client: /proc/stat is read, throttling kept.
    let unlimited = (1..=42).map(|s| cgroup_second(s * S, 0.9, 0)).collect();
    let r = with_cgroup(900_000, unlimited, Spec::CURRENT);
    let g = gate(&r, GateId::HostCpu);
    assert_eq!((g.status, g.observed.as_str()), (Status::Fail, "90.000 %"));
    assert!(
        g.note.starts_with("busy share of all host cores"),
        "{}",
        g.note
    );
    assert_eq!(r.audit.telemetry.cgroup_cpu_max_5s_percent, None);
    assert!(r.audit.telemetry.cgroup_throttled.is_some());
    // A second whose detail is not in the form is skipped, not misread.
    let mut broken: Vec<EventRecord> = busy(0.9);
    for e in &mut broken {
        e.detail = e.detail.replace("quota_us", "quota");
    }
    let r = with_cgroup(100_000, broken, Spec::CURRENT);
    assert_eq!(gate(&r, GateId::HostCpu).observed, "10.000 %");
    assert_eq!(r.audit.telemetry.cgroup_throttled, None);
}

/// `diagnose` computes what an invalid run withholds, says so in every output, and leaves the run
/// invalid; a valid run's report is byte-identical with it on or off. Deliberate break: letting
/// `diagnose` clear the invalid verdict, or dropping its NOT PUBLISHABLE line, fails this.
#[test]
fn a_diagnosis_shows_an_invalid_runs_statistics_and_never_publishes_them() {
    let mut stalled = quiet_telemetry(42);
    stalled[20].stall_p99_ns = 1_000_000;
    let bytes = synthetic::scripted(
        &config(STEADY),
        &fine,
        Vec::new(),
        stalled,
        SealStatus::Completed,
    );
    let file = journal_file("diagnose.pj", &bytes);
    let run = crate::load::load(&file).unwrap();
    let analyzer = |diagnose| Analyzer {
        version: "test".into(),
        commit: "test".into(),
        diagnose,
        by: Vec::new(),
    };
    let withheld = analyze(&run, &file, Spec::CURRENT, &analyzer(false));
    let diagnosed = analyze(&run, &file, Spec::CURRENT, &analyzer(true));
    assert!(!withheld.validity.valid && withheld.windows.is_empty());
    assert!(
        !diagnosed.validity.valid,
        "a diagnosis never validates a run"
    );
    assert_eq!(diagnosed.windows_withheld, None);
    assert!(diagnosed
        .not_publishable
        .iter()
        .any(|w| w.starts_with("NOT PUBLISHABLE: the run is invalid") && w.contains("G2.4")));
    assert!(diagnosed
        .not_publishable
        .iter()
        .any(|w| w.contains("for diagnosis only (--diagnose)")));
    assert!(report::markdown(&diagnosed).contains("for diagnosis only (--diagnose)"));
    // The diagnosed statistics are the ones a valid run with the same requests publishes, and on
    // a valid run the option changes nothing.
    let bytes = synthetic::scripted(
        &config(STEADY),
        &fine,
        Vec::new(),
        quiet_telemetry(42),
        SealStatus::Completed,
    );
    let file = journal_file("diagnose-valid.pj", &bytes);
    let run = crate::load::load(&file).unwrap();
    let valid = analyze(&run, &file, Spec::CURRENT, &analyzer(false));
    assert!(valid.validity.valid);
    let m = window(&diagnosed, "measurement");
    let v = window(&valid, "measurement");
    assert_eq!((m.scheduled, m.e2e.n), (v.scheduled, v.e2e.n));
    assert_eq!(m.e2e.percentiles_us, v.e2e.percentiles_us);
    let texts = |w: &WindowReport| -> Vec<String> {
        w.completion
            .readings
            .iter()
            .map(|r| r.text.clone())
            .collect()
    };
    assert_eq!(texts(m), texts(v));
    assert_eq!(
        report::json(&valid),
        report::json(&analyze(&run, &file, Spec::CURRENT, &analyzer(true)))
    );
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
        kind: EventKind::from_name(kind).unwrap().code(),
        subject: "replica-1".into(),
        detail: String::new(),
        value: None,
    };
    let mut events = vec![event(0, "fault-armed"), event(fired, "fault-fired")];
    events.extend(waiting_probes(0, 102, 0));
    synthetic::scripted(
        &config(FAULT),
        &request,
        events,
        quiet_telemetry(102),
        SealStatus::Completed,
    )
}

/// Waiting-queue probes of both replicas each second from `from_s` to `to_s`, at `milli` / 1000.
fn waiting_probes(from_s: u64, to_s: u64, milli: i64) -> Vec<EventRecord> {
    (from_s..to_s)
        .flat_map(|s| {
            ["replica-0", "replica-1"].map(|name| EventRecord {
                at_ns: s * S + 500 * MS,
                kind: EventKind::Probe.code(),
                subject: name.into(),
                detail: "ok".into(),
                value: Some(milli),
            })
        })
        .collect()
}

#[test]
fn fault_windows_follow_the_fire_anchor_and_the_recovery_boundary() {
    let r = analyze_bytes("fault.pj", &fault_journal(Some(20)), Spec::V0_2);
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
    let r = analyze_bytes("stuck.pj", &fault_journal(None), Spec::V0_2);
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
    let r = analyze_bytes("dev.pj", &a1_journal(), Spec::V0_2);
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
    let r = analyze_bytes("audit.pj", &a1_journal(), Spec::V0_2);
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
    let r = analyze_bytes("hlog.pj", &a1_journal(), Spec::V0_2);
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
            "inter-chunk" => &w.inter_chunk,
            "tpot" => &w.tokens.tpot,
            "itl-per-token" => w.tokens.itl_per_token.as_ref().unwrap(),
            other => panic!("unexpected histogram tag {other}"),
        };
        assert_eq!(
            &histogram,
            expected.histogram.as_ref().unwrap().inner(),
            "{tag}"
        );
        decoded += 1;
    }
    assert_eq!(decoded, 5 * r.windows.len());
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
    use polars_core::prelude::*;
    use polars_io::prelude::*;
    let file = journal_file("export.pj", &a1_journal());
    let run = crate::load::load(&file).unwrap();
    let scheduled = run.requests.len();
    let scratch = percentes_testkit::Scratch::new("export");
    let path = scratch.join("export.parquet");
    assert_eq!(crate::export::parquet(run, &path, None).unwrap(), scheduled);
    let frame = ParquetReader::new(std::fs::File::open(&path).unwrap())
        .finish()
        .unwrap();
    assert_eq!(frame.height(), 840);
    // Times are signed, so a reader's difference of two is a number (issue 37 item 7).
    for name in [
        "intended_ns",
        "dispatched_ns",
        "terminal_ns",
        "ttft_ns",
        "e2e_ns",
    ] {
        assert_eq!(
            frame.column(name).unwrap().dtype(),
            &DataType::Int64,
            "{name}"
        );
    }
    let intended = frame
        .column("intended_ns")
        .unwrap()
        .as_materialized_series();
    let dispatched = frame
        .column("dispatched_ns")
        .unwrap()
        .as_materialized_series();
    let early = (intended - dispatched).unwrap();
    assert_eq!(early.dtype(), &DataType::Int64);
    assert!(
        early.i64().unwrap().max().unwrap() <= 0,
        "sent at or after t_i"
    );
    // Errored requests have no e2e latency (null), completed ones do.
    let e2e = frame.column("e2e_ns").unwrap();
    assert_eq!(e2e.null_count(), 420);
    let outcome = frame.column("outcome").unwrap().str().unwrap();
    assert_eq!(outcome.get(0), Some("errored"));
    assert_eq!(outcome.get(1), Some("completed"));
    let _ = std::fs::remove_file(path);
}

/// The export writes the request frame a batch (and row group) at a time, out of the heap or a
/// spilled table alike (issue 19 item 4): how it is cut must not change a value, a null, a type
/// or the provenance. One batch of the heap table against 97-row batches of a spilled one, and
/// both against the frame made from the whole table at once.
#[test]
fn the_parquet_export_in_batches_and_from_spill_files_holds_the_same_frame() {
    use polars_core::prelude::*;
    use polars_io::prelude::*;
    let file = journal_file("export-batches.pj", &a1_journal());
    let dir = percentes_testkit::Scratch::new("export-b");
    let heap = crate::load::load(&file).unwrap();
    let spilled = crate::load::load_verified_with(
        std::slice::from_ref(&file),
        vec![file.verify(&Default::default())],
        &crate::load::Options {
            table_memory: 0,
            spill_dir: dir.to_path_buf(),
            ..Default::default()
        },
    )
    .unwrap();
    assert!(spilled.requests.is_spilled());
    let (whole, cut) = (dir.join("whole.parquet"), dir.join("cut.parquet"));
    let rows = heap.requests.len();
    assert_eq!(rows, 840);
    assert_eq!(
        crate::export::parquet_in_batches(&heap, &whole, usize::MAX, None).unwrap(),
        rows
    );
    assert_eq!(
        crate::export::parquet_in_batches(&spilled, &cut, 97, None).unwrap(),
        rows
    );
    let read = |path: &std::path::Path| {
        let mut reader = ParquetReader::new(std::fs::File::open(path).unwrap());
        let metadata = reader.get_metadata().unwrap().clone();
        (reader.finish().unwrap(), metadata)
    };
    let (whole_frame, whole_meta) = read(&whole);
    let (cut_frame, cut_meta) = read(&cut);
    assert_eq!(whole_meta.row_groups.len(), 1);
    assert_eq!(cut_meta.row_groups.len(), rows.div_ceil(97));
    assert_eq!(whole_meta.key_value_metadata, cut_meta.key_value_metadata);
    assert!(whole_meta
        .key_value_metadata
        .iter()
        .flatten()
        .any(|kv| kv.key == "percentes.chain_head"
            && kv.value.as_deref().is_some_and(|v| v.len() == 64)));
    let (phases, routes) = crate::export::labels(&heap.header);
    let direct = crate::export::requests_frame(&heap.requests, 0..rows, &phases, &routes).unwrap();
    assert_eq!(whole_frame.schema(), direct.schema());
    assert!(
        whole_frame.equals_missing(&direct),
        "{whole_frame}\n{direct}"
    );
    assert_eq!(cut_frame.schema(), direct.schema());
    assert!(cut_frame.equals_missing(&direct), "{cut_frame}\n{direct}");
    // A batch is the table's rows in order: the 97-row cut starts where the last one ended.
    let batches: Vec<DataFrame> =
        crate::export::request_batches(&spilled.requests, &phases, &routes, 97)
            .collect::<PolarsResult<_>>()
            .unwrap();
    assert_eq!(batches.len(), rows.div_ceil(97));
    assert!(batches
        .iter()
        .all(|b| b.height() == 97 || b.height() == rows % 97));
    let index = batches[1].column("index").unwrap().u64().unwrap();
    assert_eq!(index.get(0), Some(spilled.requests.index[97]));
    drop((heap, spilled));
    std::fs::remove_dir_all(&dir).unwrap();
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
            let v2 = analyze_bytes("prop.pj", &bytes, Spec::V0_2);
            let again = analyze_bytes("prop.pj", &bytes, Spec::V0_2);
            prop_assert_eq!(report::json(&v2), report::json(&again));
            prop_assert_eq!(report::markdown(&v2), report::markdown(&again));
            let v1 = analyze_bytes("prop.pj", &bytes, Spec::V0_1);
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

/// Recovery (§5), the §1/§10 gates and the injection timeline on scripted fault runs (AC5).
mod recovery_reports {
    use super::*;
    use std::rc::Rc;

    pub(super) const INJECT: u64 = 36 * S;
    pub(super) const FIRED: u64 = INJECT + 50 * MS;

    pub(super) fn event(at_ns: u64, kind: &str, subject: &str, value: Option<i64>) -> EventRecord {
        EventRecord {
            at_ns,
            kind: EventKind::from_name(kind).unwrap().code(),
            subject: subject.into(),
            detail: if kind == "probe" {
                "ok".into()
            } else {
                String::new()
            },
            value,
        }
    }

    pub(super) fn fault_events() -> Vec<EventRecord> {
        let mut events = vec![
            event(0, "fault-armed", "replica-1", None),
            event(FIRED, "fault-fired", "replica-1", None),
            event(FIRED + 10 * MS, "fault-confirmed", "replica-1", None),
        ];
        events.extend(waiting_probes(0, 102, 0));
        events
    }

    /// A clean-delete run whose every request completes in 500 ms on its replica (index parity),
    /// except where `fate` says otherwise.
    fn run_with(
        config_text: &str,
        fate: impl Fn(&Entry) -> Option<RequestRecord> + 'static,
        events: Vec<EventRecord>,
    ) -> Report {
        run_under(config_text, fate, events, Spec::V0_2)
    }

    /// [`run_with`] analyzed under `spec`.
    pub(super) fn run_under(
        config_text: &str,
        fate: impl Fn(&Entry) -> Option<RequestRecord> + 'static,
        events: Vec<EventRecord>,
        spec: Spec,
    ) -> Report {
        let fate = Rc::new(fate);
        let request = move |e: &Entry| {
            Some(fate(e).unwrap_or_else(|| {
                let mut r = completed(e, 100_000, 100 * MS, 500 * MS, vec![]);
                r.replica = format!("replica-{}", e.index % 2);
                r
            }))
        };
        let bytes = synthetic::scripted(
            &config(config_text),
            &request,
            events,
            quiet_telemetry(102),
            SealStatus::Completed,
        );
        analyze_bytes("recovery.pj", &bytes, spec)
    }

    /// Victim-bound requests (odd indices) fail while `broken(intended)`.
    pub(super) fn failing_while(
        broken: impl Fn(u64) -> bool + 'static,
    ) -> impl Fn(&Entry) -> Option<RequestRecord> {
        move |e: &Entry| {
            (e.index % 2 == 1 && broken(e.intended_ns)).then(|| ended(e, "refused", MS))
        }
    }

    pub(super) fn rec(r: &Report) -> &crate::model::RecoveryReport {
        r.recovery
            .as_ref()
            .unwrap_or_else(|| panic!("no recovery report: {:?}", r.windows_withheld))
    }

    #[test]
    fn ac5_scripted_recovery_is_found_within_r_against_both_baselines() {
        // Half the traffic fails for 20 s after T_inject, then all is well.
        let r = run_with(
            FAULT,
            failing_while(|t| (INJECT..INJECT + 20 * S).contains(&t)),
            fault_events(),
        );
        let rr = rec(&r);
        assert_eq!((rr.window_s, rr.hold_s, rr.bucket_s), (1.0, 3.0, 0.1));
        let ttr = rr.to_pre_fault.ttr_s.unwrap();
        assert!(
            (ttr - 20.0).abs() <= rr.window_s,
            "TTR {ttr} not within R of the scripted 20 s"
        );
        // The windows' recovery boundary is the same detection.
        assert_eq!(r.timeline.recovered_s, rr.to_pre_fault.at_s);
        // The single-replica equilibrium: goodput about 0.5, reached within about R of the fire.
        assert!(rr.equilibrium.estimable, "{:?}", rr.equilibrium);
        let plateau = rr.equilibrium.goodput.unwrap();
        // The plateau window ends with the window that entered recovery, so its last 0.8 s are
        // already healthy: 0.5 x 19 / 19.8 + 0.8 / 19.8 = 0.5232.
        assert!((plateau - 0.5232).abs() < 0.001, "{plateau}");
        let to_eq = rr.to_equilibrium.ttr_s.unwrap();
        assert!(to_eq <= 2.0 * rr.window_s, "{to_eq}");
        assert!(to_eq < ttr, "the two baselines give distinct answers");
        assert_eq!(rr.caveats.len(), 2);
        // The deficit: about half the goodput for about 20 s.
        let deficit = rr.deficit_goodput_s.unwrap();
        assert!((deficit - 10.0).abs() < 1.0, "{deficit}");
        assert_eq!(rr.sweep.len(), 27);
        // Components: the TTFT and e2e shares recover with the goodput; no backlog formed.
        assert!(rr.components[0].ttr.ttr_s.is_some());
        assert!(
            rr.components[3].ttr.text.contains("no backlog"),
            "{:?}",
            rr.components[3]
        );
        // The injection timeline reaches Recovered; degradation runs from confirmed impact.
        let states: Vec<&str> = rr.timeline.iter().map(|s| s.state).collect();
        assert_eq!(
            states,
            [
                "Stabilizing",
                "Healthy",
                "Injecting",
                "Faulted",
                "Recovering",
                "Recovered"
            ]
        );
        let degradation = rr
            .durations
            .iter()
            .find(|d| d.duration == "degradation")
            .unwrap();
        assert!(
            (degradation.seconds.unwrap() - (rr.to_pre_fault.at_s.unwrap() - 36.06)).abs() < 1e-9
        );
        assert!(rr.experiment_invalid.is_empty());
        assert!(report::markdown(&r).contains("## Recovery (§5): clean-delete"));
    }

    #[test]
    fn ac5_a_flapping_script_does_not_read_as_early_recovery() {
        // Failing 36-50 s, a 2 s good blip (shorter than H = 3 s), failing again to 60 s.
        let broken = |t: u64| (INJECT..50 * S).contains(&t) || (52 * S..60 * S).contains(&t);
        let r = run_with(FAULT, failing_while(broken), fault_events());
        let ttr = rec(&r).to_pre_fault.ttr_s.unwrap();
        assert!(
            (ttr - 24.0).abs() <= 1.0,
            "flapping read as recovery at {ttr} s"
        );
    }

    #[test]
    fn ac5_non_recovery_is_reported_as_such() {
        let r = run_with(FAULT, failing_while(|t| t >= INJECT), fault_events());
        let rr = rec(&r);
        assert_eq!(
            rr.to_pre_fault.status,
            "not recovered within the recovery timeout"
        );
        assert_eq!(rr.to_pre_fault.text, "not recovered within 60.000 s");
        assert_eq!(rr.timeline.last().unwrap().state, "ResidualFailure");
        // The plateau runs to the timeout and is estimable; its TTR is measured.
        assert!(rr.equilibrium.estimable);
        assert_eq!(rr.equilibrium.to_s, 96.0);
    }

    #[test]
    fn each_not_estimable_reason_comes_from_a_journal_built_for_it() {
        // Recovered within R of the fire: the plateau is shorter than R.
        let r = run_with(
            FAULT,
            failing_while(|t| (INJECT..INJECT + 200 * MS).contains(&t)),
            fault_events(),
        );
        let rr = rec(&r);
        assert!(!rr.equilibrium.estimable);
        assert_eq!(rr.equilibrium.note, "not estimable: plateau shorter than R");
        assert!(
            rr.to_equilibrium.text.starts_with("N/A"),
            "{}",
            rr.to_equilibrium.text
        );
        // Every request fails from the fire on: zero SLO-goodput on the plateau.
        let all_fail = |e: &Entry| (e.intended_ns >= INJECT).then(|| ended(e, "refused", MS));
        let r = run_with(FAULT, all_fail, fault_events());
        let rr = rec(&r);
        assert_eq!(rr.equilibrium.note, "not estimable: zero SLO-goodput");
        assert_eq!(rr.to_equilibrium.status, "N/A");
        assert_eq!(
            rr.to_pre_fault.status, "not recovered within the recovery timeout",
            "the run stays in the table"
        );
    }

    fn gate_of(r: &Report, id: GateId) -> &Gate {
        r.validity.gates.iter().find(|g| g.id == id).unwrap()
    }

    #[test]
    fn the_experiment_gates_pass_fail_and_go_unobserved() {
        let ok = run_with(FAULT, |_| None, fault_events());
        for name in [
            GateId::ReplicaShare,
            GateId::BaselineGoodput,
            GateId::WaitingQueue,
            GateId::FaultFidelity,
        ] {
            assert_eq!(
                gate_of(&ok, name).status,
                Status::Pass,
                "{:?}",
                gate_of(&ok, name)
            );
        }
        assert_eq!(
            gate_of(&ok, GateId::WaitingQueue).observed,
            "replica-0 0.000, replica-1 0.000"
        );
        assert!(ok.validity.valid);

        // G1: every baseline request served by replica-0: fewer replicas than declared.
        let one = run_with(
            FAULT,
            |e: &Entry| Some(completed(e, 100_000, 100 * MS, 500 * MS, vec![])),
            fault_events(),
        );
        assert_eq!(gate_of(&one, GateId::ReplicaShare).status, Status::Fail);
        assert!(!one.validity.valid && one.recovery.is_none() && one.windows.is_empty());
        // G1 unobserved: nobody names a replica.
        let anonymous = run_with(
            FAULT,
            |e: &Entry| {
                let mut r = completed(e, 100_000, 100 * MS, 500 * MS, vec![]);
                r.replica = String::new();
                Some(r)
            },
            fault_events(),
        );
        assert_eq!(
            gate_of(&anonymous, GateId::ReplicaShare).status,
            Status::Unobserved
        );

        // Layer-4 routing declared (issue 38): a 20/80 split is recorded, not run-failing; all
        // on one replica still fails the run; nobody naming a replica is unobserved, reported.
        let layer_4 = FAULT.replace("[target]\n", "[target]\nrouting = \"layer-4\"\n");
        let skewed = run_with(
            &layer_4,
            |e: &Entry| {
                let mut r = completed(e, 100_000, 100 * MS, 500 * MS, vec![]);
                r.replica = if e.index.is_multiple_of(5) {
                    "replica-1"
                } else {
                    "replica-0"
                }
                .into();
                Some(r)
            },
            fault_events(),
        );
        let g1 = gate_of(&skewed, GateId::ReplicaShare);
        assert_eq!(
            (g1.status, g1.effect),
            (Status::Fail, Effect::Reported),
            "{g1:?}"
        );
        assert!(
            g1.note.contains("layer-4") && skewed.validity.valid,
            "{g1:?}"
        );
        let one = run_with(
            &layer_4,
            |e: &Entry| Some(completed(e, 100_000, 100 * MS, 500 * MS, vec![])),
            fault_events(),
        );
        let g1 = gate_of(&one, GateId::ReplicaShare);
        assert_eq!(
            (g1.status, g1.effect),
            (Status::Fail, Effect::RunInvalidating)
        );
        assert!(!one.validity.valid);
        let anonymous = run_with(
            &layer_4,
            |e: &Entry| {
                let mut r = completed(e, 100_000, 100 * MS, 500 * MS, vec![]);
                r.replica = String::new();
                Some(r)
            },
            fault_events(),
        );
        let g1 = gate_of(&anonymous, GateId::ReplicaShare);
        assert_eq!(
            (g1.status, g1.effect),
            (Status::Unobserved, Effect::Reported)
        );

        // G6: 5 % of the baseline errors: goodput 0.95.
        let lossy = run_with(
            FAULT,
            |e: &Entry| {
                (e.index % 20 == 7 && e.intended_ns < INJECT).then(|| ended(e, "reset", MS))
            },
            fault_events(),
        );
        assert_eq!(
            gate_of(&lossy, GateId::BaselineGoodput).status,
            Status::Fail
        );
        assert!(gate_of(&lossy, GateId::BaselineGoodput)
            .by
            .as_deref()
            .unwrap()
            .ends_with("under"));
        // G6 unobserved: a fire 31 s early leaves no baseline.
        let mut early = fault_events();
        early[1].at_ns = 5 * S;
        early[2].at_ns = 5 * S;
        let r = run_with(FAULT, |_| None, early);
        assert_eq!(
            gate_of(&r, GateId::BaselineGoodput).status,
            Status::Unobserved
        );

        // G7: a waiting queue of 1.5 on average fails; no probes at all is unobserved.
        let mut queued = fault_events();
        queued.retain(|e| e.kind != EventKind::Probe.code());
        let mut deep = queued.clone();
        deep.extend(waiting_probes(0, 102, 1500));
        assert_eq!(
            gate_of(&run_with(FAULT, |_| None, deep), GateId::WaitingQueue).status,
            Status::Fail
        );
        assert_eq!(
            gate_of(&run_with(FAULT, |_| None, queued), GateId::WaitingQueue).status,
            Status::Unobserved
        );

        // Fault fidelity: no fault-fired event.
        let mut unfired = fault_events();
        unfired.retain(|e| e.kind != EventKind::FaultFired.code());
        let r = run_with(FAULT, |_| None, unfired);
        assert_eq!(gate_of(&r, GateId::FaultFidelity).status, Status::Fail);
        assert!(gate_of(&r, GateId::FaultFidelity)
            .observed
            .contains("never fired"));
    }

    /// Black-hole: dev partition 12 s. Victim-bound requests (odd indices) sent during the
    /// partition get no answer and are censored at the 3 s timeout; those in flight at the fire
    /// as well, unless `g3_break`.
    fn black_hole(g3_break: bool, stale_until_s: u64) -> Report {
        let text = FAULT
            .replace("variant = \"clean-delete\"", "variant = \"black-hole\"")
            .replace(
                "injector = \"kill-pid-file\"\npid_file = \"state/replica-1.pid\"",
                "injector = \"exec\"\nfire_command = [\"true\"]",
            );
        let fate = move |e: &Entry| {
            let t = e.intended_ns;
            let victim = e.index % 2 == 1;
            let in_flight_at_fire = t < FIRED && t + 500 * MS > FIRED;
            if victim && in_flight_at_fire {
                let mut r = if g3_break {
                    ended(e, "reset", FIRED - t)
                } else {
                    ended(e, "timeout", 3 * S)
                };
                r.replica = String::new();
                return Some(r);
            }
            if victim && (FIRED..INJECT + stale_until_s * S).contains(&t) {
                let mut r = ended(e, "timeout", 3 * S);
                r.replica = String::new();
                return Some(r);
            }
            None
        };
        let mut events = fault_events();
        events.push(event(INJECT + 12 * S, "fault-expired", "replica-1", None));
        events.push(event(INJECT + 14 * S, "timeline", "weight-load", None));
        run_with(&text, fate, events)
    }

    /// Cleanup is part of the verdict (seeds/004): removal, then two healthy observations.
    #[test]
    fn the_cleanup_verdict_reads_removal_and_the_healthy_observations_after_it() {
        // Expired by the armed expiry, probes ok after it: confirmed by observation.
        let r = black_hole(false, 12);
        let c = r.cleanup.as_ref().unwrap();
        assert_eq!((c.removal, c.confirmed), ("expired", true), "{c:?}");
        assert_eq!(c.removal_at_s, Some(48.0));
        assert!(
            c.healthy_observations >= 2
                && c.verdict.starts_with("cleanup confirmed by observation"),
            "{c:?}"
        );

        let black_hole_text = FAULT
            .replace("variant = \"clean-delete\"", "variant = \"black-hole\"")
            .replace(
                "injector = \"kill-pid-file\"\npid_file = \"state/replica-1.pid\"",
                "injector = \"exec\"\nfire_command = [\"true\"]\nremove_command = [\"true\"]",
            );
        let with = |extra: Vec<EventRecord>| {
            let mut events = fault_events();
            events.extend(extra);
            run_with(&black_hole_text, |_| None, events)
        };
        // A confirmed removal.
        let r = with(vec![event(
            INJECT + 12 * S,
            "fault-removed",
            "replica-1",
            None,
        )]);
        let c = r.cleanup.as_ref().unwrap();
        assert_eq!((c.removal, c.confirmed), ("confirmed", true), "{c:?}");
        assert_eq!(c.attempts.len(), 1);
        // A failed removal: not confirmed, whatever the probes say.
        let mut failed = event(INJECT + 12 * S, "fault-failed", "replica-1", None);
        failed.detail = "removal failed: iptables exited 1".into();
        let r = with(vec![failed]);
        let c = r.cleanup.as_ref().unwrap();
        assert_eq!((c.removal, c.confirmed), ("failed", false), "{c:?}");
        assert!(c.verdict.contains("FAILED"), "{}", c.verdict);
        // Nothing recorded.
        let r = with(vec![]);
        let c = r.cleanup.as_ref().unwrap();
        assert_eq!((c.removal, c.confirmed), ("not recorded", false), "{c:?}");
        // A removal after which the target was observed healthy only once (the probes of
        // waiting_probes stop at 102 s; a removal at 101.5 s leaves one).
        let r = with(vec![event(
            101 * S + 500 * MS,
            "fault-removed",
            "replica-1",
            None,
        )]);
        let c = r.cleanup.as_ref().unwrap();
        assert_eq!((c.healthy_observations, c.confirmed), (1, false), "{c:?}");
        // A clean delete is not undone: removal not applicable, the replacement observed.
        let r = run_with(FAULT, |_| None, fault_events());
        let c = r.cleanup.as_ref().unwrap();
        assert_eq!((c.removal, c.confirmed), ("not applicable", true), "{c:?}");
        assert!(r.escape.is_none());
    }

    /// The containment gate applies with a declaration; an `escape` event fails it and the
    /// report keeps the seeds/004 retention list.
    #[test]
    fn an_escape_event_fails_containment_and_the_report_keeps_the_retention_list() {
        let declared = format!(
            "{FAULT}\n[declaration]\nexperiment_id = \"x-7\"\nrelease = \"rel\"\ndataset = \"ds\"\ntarget = \"replica-1\"\nboundary = \"the pod\"\nprotected_routes = [\"chat\"]\nprotections = [\"breaker\"]\ncleanup = \"kubectl\"\n[declaration.abort]\nprotected_failure_rate = 0.05\n"
        );
        let r = run_with(&declared, |_| None, fault_events());
        assert_eq!(gate_of(&r, GateId::Containment).status, Status::Pass);
        assert!(r.escape.is_none());
        let r = run_with(FAULT, |_| None, fault_events());
        assert_eq!(
            gate_of(&r, GateId::Containment).status,
            Status::NotApplicable
        );

        let mut events = fault_events();
        let mut escape = event(FIRED + 2 * S, "escape", "protected-budget", None);
        escape.detail = "protected traffic over its abort budget".into();
        events.push(escape);
        let r = run_with(&declared, |_| None, events);
        let g = gate_of(&r, GateId::Containment);
        assert_eq!(g.status, Status::Fail, "{g:?}");
        assert!(!r.validity.valid && r.windows.is_empty());
        let e = r.escape.as_ref().unwrap();
        assert_eq!(e.trigger, "protected-budget");
        assert!((e.at_s - 38.05).abs() < 1e-9, "{}", e.at_s);
        let value = |item: &str| {
            e.retain
                .iter()
                .find(|x| x.item == item)
                .unwrap()
                .value
                .clone()
        };
        assert_eq!(value("experiment id"), "x-7");
        assert_eq!(value("active protections"), "breaker");
        // Last trusted: the start of the 5 s window (dev factor 10: 0.5 s) before the escape.
        assert!(
            value("last trusted state").starts_with("37.550 s"),
            "{}",
            value("last trusted state")
        );
        assert_eq!(e.retain.len(), 10);
        let md = crate::report::markdown(&r);
        assert!(
            md.contains("## ESCAPED EXPERIMENT (seeds/004): protected-budget at 38.050 s"),
            "{md}"
        );
    }

    #[test]
    fn black_hole_assertions_decide_the_node_loss_label_without_invalidating() {
        let r = black_hole(false, 12);
        assert_eq!(
            gate_of(&r, GateId::VictimSilence).status,
            Status::Pass,
            "{:?}",
            gate_of(&r, GateId::VictimSilence)
        );
        assert_eq!(
            gate_of(&r, GateId::Staleness).status,
            Status::Pass,
            "{:?}",
            gate_of(&r, GateId::Staleness)
        );
        let rr = rec(&r);
        assert!(rr.label.starts_with("partition heal"), "{}", rr.label);
        assert!(rr
            .node_loss_label
            .as_deref()
            .unwrap()
            .starts_with("node-loss-representative"));
        // A backlog of hanging requests forms and drains after the heal.
        let backlog = &rr.components[3];
        assert_eq!(backlog.ttr.status, "recovered", "{backlog:?}");
        // The timeline removes and recovers; the decomposition has the recorded weight load.
        let states: Vec<&str> = rr.timeline.iter().map(|s| s.state).collect();
        assert_eq!(
            states,
            [
                "Stabilizing",
                "Healthy",
                "Injecting",
                "Faulted",
                "Removing",
                "Recovering",
                "Recovered"
            ]
        );
        // Under v0.2, as archived (v0.5 names it the weight-load log line: issue 52).
        let weight = rr
            .decomposition
            .iter()
            .find(|d| d.boundary == "weight load")
            .unwrap();
        assert_eq!(weight.at_s, Some(50.0));
        let capture = rr
            .decomposition
            .iter()
            .find(|d| d.boundary == "CUDA-graph capture")
            .unwrap();
        assert!(capture.evidence.starts_with("N/A"), "{}", capture.evidence);

        // An errored in-flight victim request fails G3; staleness of 1 s fails G4 (2 s pinned,
        // dev-scaled). Both only strip the label: the run stays valid.
        let r = black_hole(true, 1);
        assert_eq!(gate_of(&r, GateId::VictimSilence).status, Status::Fail);
        assert_eq!(gate_of(&r, GateId::Staleness).status, Status::Fail);
        assert!(r.validity.valid);
        assert!(rec(&r)
            .node_loss_label
            .as_deref()
            .unwrap()
            .starts_with("not node-loss-representative"));
    }

    #[test]
    fn a_campaign_summarizes_five_runs_per_variant_and_compares_them() {
        use crate::campaign::{build, markdown, CampaignRun};
        let durations = [10u64, 12, 14, 16, 30];
        let mut runs: Vec<CampaignRun> = durations
            .iter()
            .enumerate()
            .map(|(i, &d)| CampaignRun {
                name: format!("clean-{i}.pj"),
                report: run_with(
                    FAULT,
                    failing_while(move |t| (INJECT..INJECT + d * S).contains(&t)),
                    fault_events(),
                ),
                accelerator: Vec::new(),
                design: "fault".into(),
                probe_ms: None,
            })
            .collect();
        for i in 0..5u64 {
            runs.push(CampaignRun {
                name: format!("black-hole-{i}.pj"),
                report: black_hole(false, 12 + i),
                accelerator: Vec::new(),
                design: "black-hole".into(),
                probe_ms: None,
            });
        }
        let c = build(&runs);
        assert_eq!(c.groups.len(), 2);
        let clean = c
            .groups
            .iter()
            .find(|g| g.variant == "clean-delete")
            .unwrap();
        assert!(clean.dropped.is_empty(), "{:?}", clean.dropped);
        let ttr = clean
            .scalars
            .iter()
            .find(|s| s.name == "TTR to the two-replica pre-fault baseline")
            .unwrap();
        assert!(ttr.heavy_tailed && ttr.role == "secondary");
        // Values verbatim, each within R of its script, in run order.
        let values: Vec<f64> = ttr.values.iter().map(|(_, v)| *v).collect();
        for (v, d) in values.iter().zip(durations) {
            assert!((v - d as f64).abs() <= 1.0, "{v} vs {d}");
        }
        // The summary by hand from those values: median, mean, t = 2.776 interval.
        let s = ttr.summary.as_ref().unwrap();
        let mut sorted = values.clone();
        sorted.sort_by(f64::total_cmp);
        assert_eq!(s.median, sorted[2]);
        let mean = values.iter().sum::<f64>() / 5.0;
        let sd = (values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / 4.0).sqrt();
        let (lo, hi) = s.t_interval.unwrap();
        assert!((lo - (mean - 2.776 * sd / 5f64.sqrt())).abs() < 1e-9);
        assert!((hi - (mean + 2.776 * sd / 5f64.sqrt())).abs() < 1e-9);
        assert!(
            ttr.text
                .starts_with("TTR to the two-replica pre-fault baseline: median"),
            "{}",
            ttr.text
        );
        // Welch comparisons over the secondaries, Holm-adjusted (never below the raw p).
        assert!(!c.comparisons.is_empty());
        assert!(c
            .comparisons
            .iter()
            .all(|x| x.p_holm >= x.p && x.p_holm <= 1.0));
        // Headline: measured slots filled, the rest left visibly empty.
        assert!(c.headline.contains("over 5 runs"), "{}", c.headline);
        // Under black-hole the victim never answers, so its in-flight requests carry no replica
        // header: the client cannot attribute them, and the slots stay empty rather than guessed.
        assert!(
            c.headline
                .contains("under black-hole, [not measured] failed and [not measured] timed out"),
            "{}",
            c.headline
        );
        assert!(
            c.headline
                .contains("Under clean delete, 0.0 % of the requests"),
            "{}",
            c.headline
        );
        // Only traffic-restored is measured (no timeline events, the victim never went down on its
        // probe): it is the one segment, and the largest.
        assert!(
            c.headline
                .contains("of which traffic-restored were measured, the fire to traffic-restored"),
            "{}",
            c.headline
        );
        assert!(markdown(&c).contains("## Headline"));
        // A dropped run is named, never imputed.
        let mut invalid = runs[..5].to_vec();
        invalid[4].report = run_with(
            FAULT,
            |e: &Entry| Some(completed(e, 100_000, 100 * MS, 500 * MS, vec![])),
            fault_events(),
        );
        let c = build(&invalid);
        let g = &c.groups;
        assert!(
            g.iter().any(|g| g.dropped.iter().any(|d| d.contains("G1"))),
            "{g:?}"
        );
    }

    #[test]
    fn plots_and_the_html_report_are_self_contained_and_deterministic() {
        let events = fault_events();
        let fate = failing_while(|t| (INJECT..INJECT + 20 * S).contains(&t));
        let request = move |e: &Entry| {
            Some(fate(e).unwrap_or_else(|| {
                let mut r = completed(e, 100_000, 100 * MS, 500 * MS, vec![]);
                r.replica = format!("replica-{}", e.index % 2);
                r
            }))
        };
        let bytes = synthetic::scripted(
            &config(FAULT),
            &request,
            events,
            quiet_telemetry(102),
            SealStatus::Completed,
        );
        let file = journal_file("plots.pj", &bytes);
        let run = crate::load::load(&file).unwrap();
        let report = analyze(&run, &file, Spec::CURRENT, &Analyzer::default());
        let plots = crate::plots::all(&report, &run.requests);
        let names: Vec<&str> = plots.iter().map(|(n, _)| *n).collect();
        assert_eq!(
            names,
            [
                "completion.svg",
                "goodput.svg",
                "latency.svg",
                "ttft-distribution.svg",
                "itl-distribution.svg",
                "e2e-distribution.svg",
                "ttft-over-time.svg",
                "tokens-over-time.svg"
            ]
        );
        for (name, svg) in &plots {
            assert!(
                svg.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\"")
                    && svg.ends_with("</svg>\n"),
                "{name}"
            );
        }
        // The goodput timeline marks the fire anchor and both recoveries.
        let goodput = &plots[1].1;
        for mark in [
            "fire anchor",
            "recovered to pre-fault",
            "equilibrium reached",
        ] {
            assert!(goodput.contains(mark), "{mark}");
        }
        let html = crate::html::page(&report, &report::markdown(&report), &plots);
        assert_eq!(html.matches("<svg").count(), 8);
        assert!(!html.contains("<script") && !html.contains("src=") && !html.contains("href="));
        assert!(html.contains("<h2>Recovery (§5): clean-delete</h2>"));
        assert_eq!(
            html,
            crate::html::page(
                &report,
                &report::markdown(&report),
                &crate::plots::all(&report, &run.requests)
            )
        );
    }

    #[test]
    fn g5_compares_accelerator_fingerprints_across_a_campaign() {
        use crate::campaign::{build, CampaignRun};
        let mut report = run_with(FAULT, |_| None, fault_events());
        report.provenance.target_kind = "self-hosted".into();
        let facts = |clock: &str| vec![("accelerator.clock_mhz".to_owned(), clock.to_owned())];
        let runs = |report: &Report, a: Vec<(String, String)>, b: Vec<(String, String)>| {
            vec![
                CampaignRun {
                    name: "a.pj".into(),
                    report: report.clone(),
                    accelerator: a,
                    design: report.provenance.config_hash.clone(),
                    probe_ms: None,
                },
                CampaignRun {
                    name: "b.pj".into(),
                    report: report.clone(),
                    accelerator: b,
                    design: report.provenance.config_hash.clone(),
                    probe_ms: None,
                },
            ]
        };
        assert!(
            build(&runs(&report, facts("1980"), facts("1980"))).groups[0]
                .g5
                .starts_with("pass")
        );
        assert!(
            build(&runs(&report, facts("1980"), facts("1755"))).groups[0]
                .g5
                .starts_with("fail")
        );
        assert!(build(&runs(&report, facts("1980"), Vec::new())).groups[0]
            .g5
            .starts_with("unobserved"));
        // The mock has no accelerator.
        report.provenance.target_kind = "mock".into();
        assert!(build(&runs(&report, Vec::new(), Vec::new())).groups[0]
            .g5
            .starts_with("not applicable"));
    }

    #[test]
    fn a_recorded_node_monitor_grace_of_120_s_fails_a_black_hole_run() {
        let text = FAULT
            .replace("variant = \"clean-delete\"", "variant = \"black-hole\"")
            .replace(
                "injector = \"kill-pid-file\"\npid_file = \"state/replica-1.pid\"",
                "injector = \"exec\"\nfire_command = [\"true\"]",
            );
        let with_grace = |seconds: i64| {
            let mut events = fault_events();
            events.push(event(
                INJECT + S,
                "timeline",
                "node-monitor-grace",
                Some(seconds),
            ));
            run_with(&text, |_| None, events)
        };
        assert_eq!(
            gate_of(&with_grace(40), GateId::NodeMonitorGrace).status,
            Status::Pass
        );
        let r = with_grace(120);
        assert_eq!(gate_of(&r, GateId::NodeMonitorGrace).status, Status::Fail);
        assert!(!r.validity.valid);
        assert_eq!(
            gate_of(
                &run_with(&text, |_| None, fault_events()),
                GateId::NodeMonitorGrace
            )
            .status,
            Status::NotApplicable
        );
    }

    #[test]
    fn black_hole_assertions_go_unobserved_without_their_evidence() {
        let text = FAULT
            .replace("variant = \"clean-delete\"", "variant = \"black-hole\"")
            .replace(
                "injector = \"kill-pid-file\"\npid_file = \"state/replica-1.pid\"",
                "injector = \"exec\"\nfire_command = [\"true\"]",
            );
        // The fault fired but nothing was in flight toward the victim, and nothing after the
        // fire went unanswered: both assertions lack their evidence.
        let quiet = run_with(&text, |_| None, fault_events());
        assert_eq!(
            gate_of(&quiet, GateId::Staleness).status,
            Status::Unobserved
        );
        // No fire at all: both unobserved, and fault fidelity fails the run.
        let mut unfired = fault_events();
        unfired.retain(|e| e.kind != EventKind::FaultFired.code());
        let r = run_with(&text, |_| None, unfired);
        assert_eq!(
            gate_of(&r, GateId::VictimSilence).status,
            Status::Unobserved
        );
        assert_eq!(gate_of(&r, GateId::Staleness).status, Status::Unobserved);
        assert_eq!(gate_of(&r, GateId::FaultFidelity).status, Status::Fail);
    }
}

/// The receive-path check (§2): the loopback canary's per-second summaries, read per window.
mod receive_path_reports {
    use super::*;

    fn canary(at_ns: u64, p99_us: i64, samples: u64, max_us: u64) -> EventRecord {
        EventRecord {
            at_ns,
            kind: EventKind::Canary.code(),
            subject: "loopback".into(),
            detail: format!(
                "samples={samples} p50_ns=1000 max_ns={} interval_ns=1000000000",
                max_us * 1000
            ),
            value: Some(p99_us * 1000),
        }
    }

    fn steady_with(events: Vec<EventRecord>) -> Report {
        let request = |e: &Entry| Some(completed(e, 100_000, 200 * MS, S, vec![1000; 4]));
        let bytes = synthetic::scripted(
            &config(STEADY),
            &request,
            events,
            quiet_telemetry(42),
            SealStatus::Completed,
        );
        analyze_bytes("canary.pj", &bytes, Spec::V0_2)
    }

    #[test]
    fn each_window_reads_the_canary_seconds_that_overlap_it() {
        // STEADY: warm-up [0, 6 s), measurement [6 s, 36 s), cooldown [36 s, 42 s). A summary
        // at t covers (t - 1 s, t].
        let r = steady_with(vec![
            canary(6 * S, 30, 100, 35),             // (5, 6]: warm-up only
            canary(7 * S, 200, 100, 900),           // measurement
            canary(8 * S, 400, 90, 450),            // measurement
            canary(36 * S + 500 * MS, 50, 100, 60), // (35.5, 36.5]: measurement and cooldown
        ]);
        let m = &window(&r, "measurement").receive_path;
        // Hand-computed: seconds 7, 8 and 36.5; samples 100 + 90 + 100; the highest p99 is
        // 400 us (second 8), the largest lag 900 us (second 7).
        assert_eq!((m.canary_seconds, m.canary_samples), (3, 290));
        assert_eq!(m.canary_p99_max_us, Some(400.0));
        assert_eq!(m.canary_max_us, Some(900.0));
        assert!(
            m.text.contains(
                "at most 900 us late (highest per-second p99 400 us; 290 events over 3 s)"
            ),
            "{}",
            m.text
        );
        let w = &window(&r, "warm-up").receive_path;
        assert_eq!((w.canary_seconds, w.canary_samples), (1, 100));
        assert_eq!(
            (w.canary_p99_max_us, w.canary_max_us),
            (Some(30.0), Some(35.0))
        );
        let c = &window(&r, "cooldown").receive_path;
        assert_eq!((c.canary_seconds, c.canary_p99_max_us), (1, Some(50.0)));
        let md = report::markdown(&r);
        assert!(md.contains("Receive path (§2, not a gate): loopback canary: the read loop saw events of known timing at most 900 us late"), "{md}");
    }

    #[test]
    fn a_summary_not_in_the_recorders_form_is_skipped_and_absence_is_said() {
        let mut garbled = canary(7 * S, 200, 100, 900);
        garbled.detail = "samples=lots".into();
        let mut negative = canary(8 * S, 0, 100, 900);
        negative.value = Some(-5);
        let r = steady_with(vec![garbled, negative, canary(38 * S, 20, 100, 25)]);
        let m = &window(&r, "measurement").receive_path;
        assert_eq!((m.canary_seconds, m.canary_p99_max_us), (0, None));
        assert_eq!(m.text, "no loopback canary second overlaps this window");
        let none = steady_with(Vec::new());
        assert!(window(&none, "measurement")
            .receive_path
            .text
            .starts_with("no loopback canary in this journal"));
    }
}

/// Token figures by hand. In the measurement window (6-36 s, indexes 120..720) three kinds of
/// request take turns by index mod 3, 200 of each:
/// - 0: 11 tokens in 11 events (10 gaps of 50 ms), TTFT 100 ms, e2e 600 ms: TPOT 500/10 = 50 ms,
///   11 / 0.6 s = 18.333 tokens/s, per-token gaps 50 ms;
/// - 1: 20 tokens in 5 events (4 gaps of 100 ms), TTFT 100 ms, e2e 500 ms: TPOT 400/19 =
///   21.053 ms, 40 tokens/s, 4 tokens an event so per-token gaps 25 ms;
/// - 2: no usage (2 gaps of 70 ms): out of every token figure, its gaps counted as they are.
///
/// Aggregate output: (200 x 11 + 200 x 20) / 30 s = 206.667 tokens/s.
#[test]
fn token_figures_match_the_hand_computation() {
    let r = steady_with(quiet_telemetry(42), &|e: &Entry| {
        let mut r = match e.index % 3 {
            0 => completed(e, 100_000, 100 * MS, 600 * MS, vec![50_000; 10]),
            1 => completed(e, 100_000, 100 * MS, 500 * MS, vec![100_000; 4]),
            _ => completed(e, 100_000, 100 * MS, 400 * MS, vec![70_000; 2]),
        };
        r.usage_completion_tokens = match e.index % 3 {
            0 => Some(11),
            1 => Some(20),
            _ => None,
        };
        if e.index % 3 == 2 {
            r.usage_prompt_tokens = None;
        }
        Some(r)
    });
    let t = &window(&r, "measurement").tokens;
    assert_eq!(
        (t.completed, t.with_usage, t.multi_token_chunks),
        (600, 400, 200)
    );
    assert_eq!((t.prompt_tokens, t.completion_tokens), (400 * 128, 6_200));
    assert!((t.output_tokens_per_s.unwrap() - 6_200.0 / 30.0).abs() < 1e-9);
    assert!(
        t.text.contains("usage missing from 200 of the 600"),
        "{}",
        t.text
    );
    let rates: Vec<(&str, f64)> = t
        .per_request_tokens_per_s
        .iter()
        .map(|(q, v)| (q.as_str(), *v))
        .collect();
    assert_eq!(rates[0].0, "p10");
    assert!((rates[0].1 - 18.333).abs() < 1e-9 && (rates[1].1 - 18.333).abs() < 1e-9);
    assert!((rates[2].1 - 40.0).abs() < 1e-9, "{rates:?}");
    // TPOT: 200 at 21,052 us (400 ms / 19, floored to whole ns then us), 200 at 50,000 us.
    assert_eq!(t.tpot.n, 400);
    let p95 = t.tpot.tails.iter().find(|x| x.quantile == "p95").unwrap();
    assert_eq!(p95.point_us, Some(50_000));
    let close = |found: u64, expected: u64| (found as f64 / expected as f64 - 1.0).abs() < 1e-3;
    let p50 = |d: &Distribution| d.percentiles_us.iter().find(|(q, _)| q == "p50").unwrap().1;
    assert!(close(p50(&t.tpot), 21_052), "{:?}", t.tpot.percentiles_us);
    // Per token: 800 gaps at 25 ms, 2,000 at 50 ms, 400 at 70 ms.
    let per_token = t.itl_per_token.as_ref().unwrap();
    assert_eq!(per_token.n, 3_200);
    assert!(
        close(p50(per_token), 50_000),
        "{:?}",
        per_token.percentiles_us
    );
    let p90 = per_token
        .percentiles_us
        .iter()
        .find(|(q, _)| q == "p90")
        .unwrap()
        .1;
    assert!(close(p90, 70_000));
    let quarter = per_token.histogram.as_ref().unwrap().quantile_us(0.2);
    assert!(close(quarter, 25_000), "{quarter}");
    // The pooled inter-chunk gaps are unchanged by the division.
    assert_eq!(window(&r, "measurement").inter_chunk.n, 3_200);
    let report_md = report::markdown(&r);
    assert!(
        report_md.contains("time per output token"),
        "markdown names TPOT"
    );
}

mod a3;
mod a4;
mod amended;
mod capacity;
mod change;
mod declared;
mod readings;

#[test]
fn the_inter_chunk_floor_share_counts_gaps_at_one_us_and_only_v0_3_reports_it() {
    use crate::estimate::histogram::LatencyHistogram;
    let mut gaps = LatencyHistogram::pinned();
    for us in [1, 1, 1, 2, 1_000] {
        gaps.record_us(us);
    }
    // A gap under 1 us is recorded at the floor too (§3).
    gaps.record_us(0);
    let share = window::floor_share(Some(&gaps));
    assert_eq!((share.value, share.n), (Some(4.0 / 6.0), 6));
    let none = window::floor_share(None);
    assert_eq!((none.value, none.n), (None, 0));
    // Every window of a v0.3 report carries it; a v0.2 report, archived, does not.
    let journal = synthetic::small_sealed();
    let scratch = percentes_testkit::Scratch::new("floor");
    let path = scratch.join("run.pj");
    std::fs::write(&path, &journal).unwrap();
    let file = JournalFile::open(&path).unwrap();
    let run = crate::load::load(&file).unwrap();
    for (spec, present) in [(Spec::V0_3, true), (Spec::V0_2, false)] {
        let r = analyze(&run, &file, spec, &Default::default());
        assert!(!r.windows.is_empty());
        for w in &r.windows {
            assert_eq!(
                w.inter_chunk_at_floor.is_some(),
                present,
                "{spec} {}",
                w.window
            );
            if let Some(f) = &w.inter_chunk_at_floor {
                assert_eq!(f.n, w.inter_chunk.n);
            }
        }
        let md = report::markdown(&r);
        assert_eq!(
            md.contains("Inter-chunk gaps at the 1 us floor"),
            present,
            "{spec}"
        );
    }
}

/// `analyze --by outcome` on the synthetic journal (94 % completed, 4 % errored, 2 % censored):
/// in every window the segments add up to the window; the completed segment's curve reaches 1
/// and its latencies are the window's own; the errored one's curve stays at 0 with every
/// quantile unattainable; the censored one's stays at 0 with a ceiling of 1, so each quantile
/// reads as beyond the horizon. Nothing changes in the windows themselves.
#[test]
fn segments_by_outcome_read_as_each_outcome_must() {
    use crate::model::SegmentColumn;
    let journal = synthetic::small_sealed();
    let scratch = percentes_testkit::Scratch::new("seg");
    let path = scratch.join("run.pj");
    std::fs::write(&path, &journal).unwrap();
    let file = JournalFile::open(&path).unwrap();
    let run = crate::load::load(&file).unwrap();
    // v0.3: the synthetic journal's header has no `placement` fact, so v0.4 would leave G2.4
    // unobserved and withhold the windows this test reads.
    let plain = analyze(&run, &file, Spec::V0_3, &Default::default());
    let by = Analyzer {
        by: vec![SegmentColumn::Outcome],
        ..Default::default()
    };
    let cut = analyze(&run, &file, Spec::V0_3, &by);
    assert!(plain.segments.is_empty());
    assert_eq!(report::json(&plain), {
        let mut same = cut.clone();
        same.segments.clear();
        report::json(&same)
    });
    for w in &cut.windows {
        let mine: Vec<_> = cut
            .segments
            .iter()
            .filter(|s| s.window == w.window)
            .collect();
        assert_eq!(mine.iter().map(|s| s.scheduled).sum::<u64>(), w.scheduled);
        for s in mine {
            let c = &s.completion;
            match s.key[0].1.as_str() {
                "completed" => {
                    assert_eq!(c.final_incidence, 1.0);
                    assert_eq!(s.ttft.n, w.ttft.n);
                    assert_eq!(s.e2e.percentiles_us, w.e2e.percentiles_us);
                }
                "errored" => {
                    assert_eq!((c.final_incidence, c.ceiling), (0.0, 0.0));
                    assert!(c.readings.iter().all(|r| r.text.contains("unattainable")));
                    assert_eq!(s.ttft.n, 0);
                }
                "censored" => {
                    assert_eq!((c.final_incidence, c.ceiling), (0.0, 1.0));
                    assert!(
                        c.readings.iter().all(|r| r.text.contains("(horizon)")),
                        "{:?}",
                        c.readings
                    );
                }
                other => panic!("{other}"),
            }
            assert_eq!(s.key[0].0, "outcome");
        }
    }
    let md = report::markdown(&cut);
    assert!(
        md.contains("## Segments by outcome (`analyze --by`)"),
        "{md}"
    );
    assert!(!report::markdown(&plain).contains("## Segments"));
}

/// SPEC §10 "Rollouts": a request's release is its replica's in `target.replica_releases`;
/// a replica the map leaves out reads `(no release)`, and one with no replica `(unattributed)`.
#[test]
fn a_requests_release_is_its_replicas() {
    use crate::model::SegmentColumn;
    let journal = synthetic::small_sealed();
    let scratch = percentes_testkit::Scratch::new("release");
    let path = scratch.join("run.pj");
    std::fs::write(&path, &journal).unwrap();
    let file = JournalFile::open(&path).unwrap();
    let mut run = crate::load::load(&file).unwrap();
    run.config
        .target
        .replica_releases
        .insert("replica-0".into(), "stable".into());
    let mut seen = std::collections::BTreeMap::new();
    for row in 0..run.requests.len() {
        let release = super::columns::value(&run, SegmentColumn::Release, row);
        let expected = match run.requests.replica_name(row) {
            Some("replica-0") => "stable",
            Some(_) => "(no release)",
            None => "(unattributed)",
        };
        assert_eq!(release, expected, "row {row}");
        *seen.entry(release).or_insert(0) += 1;
    }
    assert!(
        seen.contains_key("stable") && seen.contains_key("(no release)"),
        "{seen:?}"
    );
    let _ = std::fs::remove_file(&path);
}

#[test]
fn segment_columns_parse_each_once_and_name_the_ones_there_are() {
    use crate::model::SegmentColumn;
    assert_eq!(
        SegmentColumn::parse_list("route, replica").unwrap(),
        [SegmentColumn::Route, SegmentColumn::Replica]
    );
    let error = SegmentColumn::parse_list("route,colour").unwrap_err();
    assert_eq!(
        error,
        crate::model::ColumnsError::Unknown {
            name: "colour".into()
        }
    );
    let error = error.to_string();
    assert!(
        error.contains("\"colour\"") && error.contains("route, replica, release, class"),
        "{error}"
    );
    assert_eq!(
        SegmentColumn::parse_list("class,class"),
        Err(crate::model::ColumnsError::Twice {
            name: "class".into()
        })
    );
}
