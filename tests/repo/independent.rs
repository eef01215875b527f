//! The independent verifier (scripts/verify_journal.py, written from formats/JOURNAL.md alone,
//! with its own BLAKE3) must agree with `percentes verify`: if it ever disagrees, JOURNAL.md or
//! the code is wrong.

use std::process::Command;

use super::golden::{percentes, root};

fn python() -> Option<&'static str> {
    let ok = Command::new("python3")
        .arg("--version")
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    if !ok {
        crate::prerequisite_missing("the independent verifier", "python3 is not installed");
    }
    ok.then_some("python3")
}

fn both(path: &str) -> (serde_json::Value, serde_json::Value) {
    let (_, rust, _) = percentes(&["verify", "--json", path]);
    let out = Command::new(python().unwrap())
        .args(["scripts/verify_journal.py", "--json", path])
        .current_dir(root())
        .output()
        .unwrap();
    let independent: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{path}: {e}: {}", String::from_utf8_lossy(&out.stderr)));
    (serde_json::from_str(&rust).unwrap(), independent)
}

#[test]
fn the_independent_verifier_agrees_on_every_golden_and_on_damage() {
    // Pure-Python BLAKE3 over every golden and its damage loads a core for seconds: it takes
    // the machine, so a recording beside it keeps a clean client gate.
    let _machine = crate::machine();
    if python().is_none() {
        return;
    }
    let dir = std::env::temp_dir().join(format!("percentes-independent-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut paths: Vec<String> = ["sealed", "aborted", "torn", "signed"]
        .iter()
        .map(|n| format!("golden/v1/{n}.pj"))
        .collect();
    // Damaged copies: a flipped payload byte, a flipped chain value, a cut inside the header.
    let sealed = std::fs::read(root().join("golden/v1/sealed.pj")).unwrap();
    for (name, edit) in [
        ("flip-payload", 4000usize),
        ("flip-chain", sealed.len() - 3),
    ] {
        let mut copy = sealed.clone();
        copy[edit] ^= 0x40;
        let path = dir.join(format!("{name}.pj"));
        std::fs::write(&path, copy).unwrap();
        paths.push(path.to_str().unwrap().to_owned());
    }
    let path = dir.join("cut-header.pj");
    std::fs::write(&path, &sealed[..100]).unwrap();
    // Issue 33's repros, whole journals that break one rule each: a completed seal giving a
    // reason, a host-fact key twice, the schedule rule twice in either order.
    use percentes_formats::journal::records::SealStatus;
    use percentes_formats::journal::synthetic;
    let crafted = [
        (
            "completed-with-reason",
            synthetic::rewritten(&sealed, |_| {}, Some((SealStatus::Completed, "fine"))),
        ),
        (
            "host-fact-twice",
            synthetic::rewritten(
                &sealed,
                |h| {
                    let first = h.host[0].clone();
                    h.host.push(first)
                },
                None,
            ),
        ),
        (
            "rule-twice-valid-first",
            synthetic::rewritten(
                &sealed,
                |h| {
                    h.extensions.push(("schedule-rule".into(), vec![2]));
                    h.extensions.push(("schedule-rule".into(), vec![9]));
                },
                None,
            ),
        ),
        (
            "rule-twice-valid-last",
            synthetic::rewritten(
                &sealed,
                |h| {
                    h.extensions.push(("schedule-rule".into(), vec![9]));
                    h.extensions.push(("schedule-rule".into(), vec![2]));
                },
                None,
            ),
        ),
    ];
    // A deterministic schedule under rule 2 whose phases do not hold a whole number of
    // periods (1/7 s): rule 1 would give another digest, so the independent verifier's
    // "matches" shows it applies the rule JOURNAL.md states.
    let config = percentes_formats::config::Config::parse(
        synthetic::GOLDEN_CONFIG
            .replace("arrival = \"poisson\"", "arrival = \"deterministic\"")
            .replace("rate_rps = 6.0", "rate_rps = 7.0")
            .as_bytes(),
    )
    .unwrap();
    let params = config.schedule_params();
    let rule1 = percentes_formats::schedule::ScheduleParams {
        grid: percentes_formats::schedule::Grid::PerPhase,
        ..params.clone()
    };
    assert_ne!(
        rule1.digest(),
        params.digest(),
        "the rules must differ here"
    );
    // Rule 5's models (issue 37 item 3): the header's schedule swapped for a closed, a
    // semi-open and a replayed one with its count and digest, as a recorder writes them; the
    // independent verifier regenerates each from JOURNAL.md alone.
    use percentes_formats::schedule::{Think, ThinkLaw, Workload};
    let think = Think {
        mean_ns: 150_000_000,
        law: ThinkLaw::Exponential,
    };
    let golden = synthetic::golden_config().schedule_params();
    let models = [
        (
            "workload-closed",
            percentes_formats::schedule::ScheduleParams {
                workload: Workload::Closed { users: 7, think },
                ..golden.clone()
            },
        ),
        (
            "workload-semi-open",
            percentes_formats::schedule::ScheduleParams {
                workload: Workload::SemiOpen { turns: 3, think },
                ..golden.clone()
            },
        ),
        (
            "workload-replay",
            golden
                .clone()
                .replaying((0..40).map(|i| i * 9_876_543 + (i % 3) * 1_000).collect()),
        ),
    ];
    let crafted: Vec<(&str, Vec<u8>)> = crafted
        .into_iter()
        .chain(models.into_iter().map(|(name, params)| {
            let bytes = synthetic::rewritten(
                &sealed,
                |h| {
                    h.schedule_requests = params.iter().count() as u64;
                    h.schedule_digest = params.digest();
                    h.schedule = params.clone();
                },
                None,
            );
            (name, bytes)
        }))
        .chain([(
            "deterministic-rule-2",
            // The synthetic writer keeps rule 1 (golden/v1's bytes); the header is rewritten
            // to rule 2 with its schedule's count and digest, as a recorder writes it.
            synthetic::rewritten(
                &synthetic::bytes(&config, &synthetic::Options::default()),
                |h| {
                    h.schedule = params.clone();
                    h.schedule_requests = params.iter().count() as u64;
                    h.schedule_digest = params.digest();
                },
                None,
            ),
        )])
        .collect();
    for (name, bytes) in crafted {
        let path = dir.join(format!("{name}.pj"));
        std::fs::write(&path, bytes).unwrap();
        paths.push(path.to_str().unwrap().to_owned());
    }
    paths.push(path.to_str().unwrap().to_owned());

    for path in &paths {
        let (rust, independent) = both(path);
        assert_eq!(rust["verdict"], independent["verdict"], "{path}");
        if path.contains("-twice") || path.contains("with-reason") {
            assert_eq!(rust["verdict"], "tampered", "{path}");
        }
        assert_eq!(rust["records"], independent["records"], "{path}");
        if rust["verdict"] == "sealed-intact" {
            assert_eq!(rust["chain_head"], independent["chain_head"], "{path}");
            assert_eq!(independent["schedule_digest"], "matches", "{path}");
            for key in [
                "requests",
                "completed",
                "errored",
                "censored",
                "events",
                "telemetry",
                "checkpoints",
            ] {
                assert_eq!(
                    rust["counts"][key], independent["counts"][key],
                    "{path}: {key}"
                );
            }
        }
    }
    std::fs::remove_dir_all(dir).unwrap();
}

/// Kind 8 (JOURNAL.md "8 stream"), read from the document alone: `verify_journal.py --streams`
/// decodes every stream record as `percentes inspect --records --kind 8` does, and judges each
/// by the document's rules exactly where `percentes analyze` accepts or refuses it; one crafted
/// journal per rule breaks that rule once.
#[test]
fn the_independent_verifier_reads_and_judges_stream_records_as_analyze_does() {
    let _machine = crate::machine();
    if python().is_none() {
        return;
    }
    use percentes_formats::journal::records::Record;
    use percentes_formats::journal::stream::StreamRecord;
    use percentes_formats::journal::synthetic;
    let dir = std::env::temp_dir().join(format!(
        "percentes-independent-streams-{}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let sealed = std::fs::read(root().join("golden/v1/sealed.pj")).unwrap();
    let streamed = synthetic::with_streams(&sealed, (3, 5), 25_000_000);
    fn first(records: &mut [Record]) -> &mut StreamRecord {
        records
            .iter_mut()
            .find_map(|r| match r {
                Record::Stream(s) => Some(s),
                _ => None,
            })
            .unwrap()
    }
    type Edit = fn(&mut Vec<Record>);
    let cases: [(&str, Edit); 8] = [
        ("ok", |_| {}),
        ("rule-1-twice", |r| first(r).kinds[1].kind = 1),
        ("rule-1-one-delta-two-times", |r| {
            first(r).kinds[0].deltas = 1
        }),
        ("rule-2-first-gap", |r| first(r).deliveries[0].gap_us = 3),
        ("rule-2-total", |r| first(r).deliveries_total = 100),
        ("rule-3-gaps", |r| first(r).deliveries[2].gap_us += 50_000),
        ("rule-4-late", |r| {
            for t in &mut first(r).kinds {
                t.first_ns += 60_000_000_000;
                t.last_ns += 60_000_000_000;
            }
        }),
        ("rule-5-second", |r| {
            let copy = first(r).clone();
            r.insert(0, Record::Stream(copy));
        }),
    ];
    for (name, edit) in cases {
        let path = dir.join(format!("{name}.pj"));
        std::fs::write(&path, synthetic::with_records(&streamed, edit)).unwrap();
        let path = path.to_str().unwrap();
        let out = Command::new(python().unwrap())
            .args(["scripts/verify_journal.py", "--streams", path])
            .current_dir(root())
            .output()
            .unwrap();
        let stdout = String::from_utf8(out.stdout).unwrap();
        let judged: Vec<serde_json::Value> = stdout
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert!(
            !judged.is_empty(),
            "{name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let broken: Vec<&serde_json::Value> =
            judged.iter().filter(|j| j["verdict"] != "ok").collect();
        let (code, _, stderr) = percentes(&[
            "analyze",
            path,
            "-o",
            dir.join(name).to_str().unwrap(),
            "--diagnose",
        ]);
        if name == "ok" {
            assert!(broken.is_empty(), "{name}: {broken:?}");
            assert_ne!(code, 1, "{name}: {stderr}");
            // The decode, field by field, against `inspect`'s.
            let (_, records, _) = percentes(&["inspect", path, "--records", "--kind", "stream"]);
            let inspected: Vec<serde_json::Value> = records
                .lines()
                .map(|l| serde_json::from_str(l).unwrap())
                .collect();
            assert_eq!(inspected.len(), judged.len());
            for (rust, python) in inspected.iter().zip(&judged) {
                assert_eq!(rust["index"], python["index"]);
                assert_eq!(rust["deliveries_total"], python["deliveries_total"]);
                assert_eq!(rust["reasoning_tokens"], python["reasoning_tokens"]);
                let kinds: Vec<serde_json::Value> = rust["kinds"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|k| {
                        serde_json::json!([k["kind"], k["first_ns"], k["last_ns"], k["deltas"]])
                    })
                    .collect();
                assert_eq!(serde_json::Value::Array(kinds), python["kinds"]);
                let deliveries: Vec<serde_json::Value> = rust["deliveries"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|d| serde_json::json!([d["gap_us"], d["deltas"]]))
                    .collect();
                assert_eq!(serde_json::Value::Array(deliveries), python["deliveries"]);
            }
        } else {
            assert_eq!(broken.len(), 1, "{name}: {judged:?}");
            let rule = name.split('-').take(2).collect::<Vec<_>>().join(" ");
            assert!(
                broken[0]["verdict"].as_str().unwrap().starts_with(&rule),
                "{name}: {broken:?}"
            );
            assert_eq!(
                code, 1,
                "{name}: analyze must refuse it as the document does"
            );
            assert!(stderr.contains("stream record"), "{name}: {stderr}");
        }
    }
    std::fs::remove_dir_all(dir).unwrap();
}

/// Python's HdrHistogram (PyPI `hdrhistogram`, which `.ci/run` installs) decodes every histogram
/// of a report's interval log to the counts, max and nearest-rank percentiles report.json prints
/// (scripts/check_hlog.py), on the sealed golden's three windows.
#[test]
fn python_hdrhistogram_reads_the_interval_log_as_the_report_does() {
    // An analysis and a Python decoder: it takes the machine like the other heavy tests.
    let _machine = crate::machine();
    if python().is_none() {
        return;
    }
    let has_hdrh = Command::new("python3")
        .args(["-c", "import hdrh"])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    if !has_hdrh {
        crate::prerequisite_missing(
            "Python's HdrHistogram reading the interval log",
            "the Python package hdrhistogram is not installed (pip install hdrhistogram; .ci/run does)",
        );
        return;
    }
    let dir = std::env::temp_dir().join(format!("percentes-hlog-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let (code, stdout, stderr) = percentes(&[
        "analyze",
        root().join("golden/v1/sealed.pj").to_str().unwrap(),
        "-o",
        dir.to_str().unwrap(),
        // The synthetic journal has no `placement` fact, so v0.4 withholds its windows (G2.4).
        "--spec",
        "v0.3",
    ]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    let out = Command::new("python3")
        .arg("scripts/check_hlog.py")
        .arg(&dir)
        .current_dir(root())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Three windows, five histograms each: TTFT, end-to-end, inter-chunk, TPOT, per-token ITL.
    assert_eq!(text.matches(": agrees").count(), 15, "{text}");
    std::fs::remove_dir_all(dir).unwrap();
}
