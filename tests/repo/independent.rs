//! The independent verifier (scripts/verify_journal.py, written from formats/JOURNAL.md alone,
//! with its own BLAKE3) must agree with `percentes verify`: if it ever disagrees, JOURNAL.md or
//! the code is wrong.

use std::process::Command;

use super::golden::{percentes, root};

pub(crate) fn python() -> Option<&'static str> {
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

/// The independent verifier's judgement of every follow-up of a closed or semi-open journal
/// (`--follow-ups`, JOURNAL.md "Schedule" rule 5): (index, verdict) in index order.
pub(crate) fn follow_ups(journal: &std::path::Path) -> Vec<(u64, String)> {
    let out = Command::new(python().expect("python3"))
        .args(["scripts/verify_journal.py", "--follow-ups"])
        .arg(journal)
        .current_dir(root())
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|line| {
            let v: serde_json::Value = serde_json::from_str(line).unwrap();
            (
                v["index"].as_u64().unwrap(),
                v["verdict"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

#[test]
fn the_independent_verifier_agrees_on_every_golden_and_on_damage() {
    // Pure-Python BLAKE3 over every golden and its damage loads a core for seconds: it takes
    // the machine, so a recording beside it keeps a clean client gate.
    let _machine = crate::machine();
    if python().is_none() {
        return;
    }
    let dir = percentes_testkit::Scratch::new("independent");
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
        // Rule 6 (issue 55 item 2): a shared-prefix pool, hashed into the digest; and one whose
        // entry count is out of range, which both verifiers call tampered.
        (
            "workload-prefix-pool",
            percentes_formats::schedule::ScheduleParams {
                prefixes: Some(percentes_formats::schedule::PrefixPool {
                    entries: 5,
                    tokens: vec![64, 300],
                    share_ppm: 600_000,
                }),
                ..golden.clone()
            },
        ),
        (
            "workload-abandonment",
            percentes_formats::schedule::ScheduleParams {
                abandon: Some(percentes_formats::schedule::Abandonment {
                    share_ppm: 350_000,
                    mean_ns: 700_000_000,
                    law: percentes_formats::schedule::ThinkLaw::Exponential,
                }),
                ..golden.clone()
            },
        ),
        // Rule 8 (issue 55 item 2): a semi-open session's conversation history, hashed in.
        (
            "workload-history",
            percentes_formats::schedule::ScheduleParams {
                workload: Workload::SemiOpen { turns: 4, think },
                history: Some(percentes_formats::schedule::History::UserTurns),
                ..golden.clone()
            },
        ),
        (
            "prefix-pool-out-of-range",
            percentes_formats::schedule::ScheduleParams {
                prefixes: Some(percentes_formats::schedule::PrefixPool {
                    entries: 0,
                    tokens: vec![64],
                    share_ppm: 600_000,
                }),
                ..golden.clone()
            },
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
    // A history extension with a form this build does not know: tampered for both.
    let history_form_2 = crafted
        .iter()
        .find(|(name, _)| *name == "workload-history")
        .map(|(_, bytes)| {
            let key = b"conversation-history";
            let at = bytes.windows(key.len()).position(|w| w == key).unwrap() + key.len();
            let mut damaged = bytes.clone();
            assert_eq!(damaged[at + 4], 1, "the form byte after the value's length");
            damaged[at + 4] = 2;
            ("history-form-2", damaged)
        });
    let crafted = crafted
        .into_iter()
        .chain(history_form_2)
        .map(|(name, bytes)| (name.to_owned(), bytes))
        .chain(edge_cases(&sealed));
    for (name, bytes) in crafted {
        let path = dir.join(format!("{name}.pj"));
        std::fs::write(&path, bytes).unwrap();
        paths.push(path.to_str().unwrap().to_owned());
    }
    paths.push(path.to_str().unwrap().to_owned());
    // Every golden journal, as recorded.
    for folder in ["golden/runs", "golden/streams"] {
        for entry in std::fs::read_dir(root().join(folder)).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "pj") {
                paths.push(path.to_str().unwrap().to_owned());
            }
        }
    }

    // Both verifiers on every path, over every core the test holds (pure-Python BLAKE3 keeps one
    // busy per journal), then the comparisons in order.
    let judged = crate::on_every_core(&paths, |path| both(path));
    for (path, (rust, independent)) in paths.iter().zip(judged) {
        assert_eq!(rust["verdict"], independent["verdict"], "{path}");
        if path.contains("-twice") || path.contains("with-reason") {
            assert_eq!(rust["verdict"], "tampered", "{path}");
        }
        assert_eq!(rust["records"], independent["records"], "{path}");
        if let Some(verdict) = expected_verdict(path) {
            assert_eq!(rust["verdict"], verdict, "{path}");
        }
        if rust["verdict"] == "sealed-intact" {
            assert_eq!(rust["chain_head"], independent["chain_head"], "{path}");
            let digest = if path.contains("phase-invalid") {
                "not regenerable"
            } else {
                "matches"
            };
            assert_eq!(independent["schedule_digest"], digest, "{path}");
            if path.contains("workload-prefix-pool") {
                // Rule 6's draw, recomputed by the independent verifier, as the code draws it.
                let pool = percentes_formats::schedule::PrefixPool {
                    entries: 5,
                    tokens: vec![64, 300],
                    share_ppm: 600_000,
                };
                let header =
                    percentes_formats::journal::Header::decode(&std::fs::read(path).unwrap())
                        .unwrap()
                        .0;
                let mut drawn = std::collections::BTreeMap::<String, u64>::new();
                for index in 0..header.schedule_requests {
                    let key = pool
                        .draw(header.schedule.seed, index)
                        .map_or("none".to_owned(), |k| k.to_string());
                    *drawn.entry(key).or_default() += 1;
                }
                assert_eq!(
                    independent["prefix_draws"],
                    serde_json::json!(drawn),
                    "{path}"
                );
                assert_eq!(drawn.len(), 6, "every entry and none: {drawn:?}");
            }
            if path.contains("workload-abandonment") {
                // Rule 7's draw and delays, recomputed by the independent verifier.
                let header =
                    percentes_formats::journal::Header::decode(&std::fs::read(path).unwrap())
                        .unwrap()
                        .0;
                let abandon = header.schedule.abandon.unwrap();
                let delays: Vec<u64> = (0..header.schedule_requests)
                    .filter_map(|i| abandon.draw(header.schedule.seed, i))
                    .collect();
                assert!(!delays.is_empty());
                assert_eq!(
                    independent["abandon_marked"],
                    serde_json::json!({"count": delays.len(), "delay_ns_sum": delays.iter().sum::<u64>()}),
                    "{path}"
                );
            }
            if path.contains("phase-invalid") {
                // No configuration defines such a phase: analyze refuses the journal.
                let out = format!("{path}.report");
                let (code, _, stderr) = percentes(&["analyze", path, "-o", &out]);
                assert_ne!(code, 0, "{path}: {stderr}");
                assert!(stderr.contains("schedule check failed"), "{path}: {stderr}");
            }
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
    // A trusted head equal to C_0 (the header hash) is a block boundary: it covers the header
    // and no record, a prefix, for both verifiers.
    let body = u32::from_le_bytes(sealed[12..16].try_into().unwrap()) as usize;
    let c0 = blake3::hash(&sealed[..20 + body]).to_hex().to_string();
    let golden = root().join("golden/v1/sealed.pj");
    let golden = golden.to_str().unwrap();
    let (code, rust, _) = percentes(&["verify", "--json", "--expect-head", &c0, golden]);
    assert_eq!(code, 1, "{rust}");
    let rust: serde_json::Value = serde_json::from_str(&rust).unwrap();
    assert_eq!(rust["head_match"]["match"], "prefix");
    assert_eq!(rust["head_match"]["records"], 0);
    let out = Command::new(python().unwrap())
        .args([
            "scripts/verify_journal.py",
            "--json",
            "--expect-head",
            &c0,
            golden,
        ])
        .current_dir(root())
        .output()
        .unwrap();
    let independent: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(independent["trusted_head"], "prefix");
    std::fs::remove_dir_all(dir).unwrap();
}

/// The verdict JOURNAL.md gives each edge case of [`edge_cases`], by its name's opening.
fn expected_verdict(path: &str) -> Option<&'static str> {
    let name = std::path::Path::new(path).file_stem()?.to_str()?;
    [
        ("codec-other", "unsupported-version"),
        ("codec-damaged", "tampered"),
        ("profile-", "tampered"),
        ("factor-", "tampered"),
        ("seal-status-3", "tampered"),
        ("header-length-damaged", "tampered"),
        ("header-short", "unsealed-prefix"),
        ("tail-blk1-", "unsealed-prefix"),
        ("tail-other", "tampered"),
        ("phase-", "sealed-intact"),
        ("replay-past-end", "sealed-intact"),
        ("prefix-pool-out-of-range", "tampered"),
        ("workload-prefix-pool", "sealed-intact"),
        ("workload-abandonment", "sealed-intact"),
        ("workload-history", "sealed-intact"),
        ("history-form-2", "tampered"),
    ]
    .iter()
    .find(|(opening, _)| name.starts_with(opening))
    .map(|(_, verdict)| *verdict)
}

/// JOURNAL.md's documented edge cases (issue 50 item 3), one journal each: a codec written by
/// another build and one changed by damage; a profile and time factors out of their domains; a
/// seal status of 3; a damaged header length in a file too short for it, and a short file with
/// an intact one; tails of 1 to 23 bytes after the header that open like `BLK1` and one that
/// does not; phases of zero length and of rates that name no schedule; a replay whose last
/// entries fall at or past the schedule's end.
fn edge_cases(sealed: &[u8]) -> Vec<(String, Vec<u8>)> {
    use percentes_formats::journal::synthetic::rewritten;
    use percentes_formats::schedule::Phase;
    let mut cases: Vec<(String, Vec<u8>)> = Vec::new();
    let header = |name: &str, edit: &dyn Fn(&mut percentes_formats::journal::header::Header)| {
        (name.to_owned(), rewritten(sealed, |h| edit(h), None))
    };
    cases.push(header("codec-other", &|h| h.codec = "bincode 9.9.9".into()));
    cases.push(header("profile-lab", &|h| h.profile = "lab".into()));
    cases.push(header("factor-experiment-5", &|h| {
        h.profile = "experiment".into();
        h.dev_time_factor = 5;
    }));
    cases.push(header("factor-dev-0", &|h| {
        h.profile = "dev".into();
        h.dev_time_factor = 0;
    }));
    cases.push(header("factor-dev-1001", &|h| {
        h.profile = "dev".into();
        h.dev_time_factor = 1001;
    }));
    // The codec string's third byte (after its u32 length) flipped, the chain left as it was.
    let mut damaged = sealed.to_vec();
    damaged[26] ^= 0x01;
    cases.push(("codec-damaged".into(), damaged));
    // The seal's status byte set to 3 and its block's chain value computed anew: the seal is
    // the last block, alone in it; its body opens with `at` (8 bytes) and then the status.
    let start = sealed.windows(4).rposition(|w| w == b"BLK1").unwrap();
    let mut seal3 = sealed.to_vec();
    seal3[start + 24 + 5 + 8] = 3;
    let end = seal3.len() - 32;
    let key: [u8; 32] = seal3[start - 32..start].try_into().unwrap();
    let chain = blake3::keyed_hash(&key, &seal3[start..end]);
    seal3[end..].copy_from_slice(chain.as_bytes());
    cases.push(("seal-status-3".into(), seal3));
    // Step 2: a damaged length check is tampered even where the file ends inside the header.
    let mut short = sealed[..40].to_vec();
    cases.push(("header-short".into(), short.clone()));
    short[16] ^= 0x10;
    cases.push(("header-length-damaged".into(), short));
    // Step 5: a tail of fewer than 24 bytes after the header.
    let body = u32::from_le_bytes(sealed[12..16].try_into().unwrap()) as usize;
    let first_block = 20 + body + 32;
    assert_eq!(&sealed[first_block..first_block + 4], b"BLK1");
    for tail in [1, 3, 4, 5, 23] {
        let name = format!("tail-blk1-{tail}");
        cases.push((name, sealed[..first_block + tail].to_vec()));
    }
    let mut other = sealed[..first_block + 5].to_vec();
    other[first_block + 1] = b'X';
    cases.push(("tail-other".into(), other));
    // "Schedule" step 2: a phase of zero length holds no arrival (the digest recomputed with
    // it); a phase whose rate names no schedule is not regenerated (the digest left as it was).
    cases.push(header("phase-zero-length", &|h| {
        let mut schedule = h.schedule.clone();
        schedule.phases.insert(
            1,
            Phase {
                name: "spike".into(),
                duration_ns: 0,
                rate_rps: 50.0,
            },
        );
        h.schedule_requests = schedule.iter().count() as u64;
        h.schedule_digest = schedule.digest();
        h.schedule = schedule;
    }));
    for (name, rate) in [
        ("phase-invalid-nan", f64::NAN),
        ("phase-invalid-zero", 0.0),
        ("phase-invalid-negative", -1.0),
        ("phase-invalid-fast", 2e6),
    ] {
        cases.push(header(name, &|h| h.schedule.phases[0].rate_rps = rate));
    }
    // Rule 5, replay: entries at or past the last phase's end are not in the schedule.
    cases.push(header("replay-past-end", &|h| {
        let total = h.schedule.total_duration_ns();
        let times = vec![0, 5, total / 2, total - 1, total, total + 7];
        let schedule = h.schedule.clone().replaying(times);
        h.schedule_requests = schedule.iter().count() as u64;
        assert_eq!(h.schedule_requests, 4);
        h.schedule_digest = schedule.digest();
        h.schedule = schedule;
    }));
    cases
}

/// Kind 8 (JOURNAL.md "8 stream"), read from the document alone: `verify_journal.py --streams`
/// decodes every stream record as `percentes inspect --records --kind 8` does, and judges each
/// by the document's rules exactly where `percentes analyze` accepts or refuses it; one crafted
/// journal per rule breaks that rule once.
#[test]
fn the_independent_verifier_reads_and_judges_stream_records_as_analyze_does() {
    let _machine = crate::beside();
    if python().is_none() {
        return;
    }
    use percentes_formats::journal::records::Record;
    use percentes_formats::journal::synthetic;
    let dir = percentes_testkit::Scratch::new("independent-streams");
    let sealed = std::fs::read(root().join("golden/v1/sealed.pj")).unwrap();
    let streamed = synthetic::with_streams(&sealed, (3, 5), 25_000_000);
    use synthetic::first_stream as first;
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
    // An analysis and a Python decoder, a core at the most: never beside a recording.
    let _machine = crate::beside();
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
    let dir = percentes_testkit::Scratch::new("hlog");
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

/// Kind 7 (JOURNAL.md "7 scrape", "What a reader refuses"), from the document alone:
/// `verify_journal.py --scrapes` judges every scrape record of the vLLM golden `ok`, and, on a
/// small journal with one source's records, each crafted break as the rule `analyze` refuses it
/// by, and a journal that breaks none as `analyze` accepts it.
#[test]
fn the_independent_verifier_judges_scrape_records_as_analyze_does() {
    let _machine = crate::beside();
    if python().is_none() {
        return;
    }
    use percentes_formats::journal::records::Record;
    use percentes_formats::journal::scrape::{Sample, ScrapeRecord, SeriesDefinition};
    use percentes_formats::journal::synthetic;
    let judge = |path: &str| -> Vec<serde_json::Value> {
        let out = Command::new(python().unwrap())
            .args(["scripts/verify_journal.py", "--scrapes", path])
            .current_dir(root())
            .output()
            .unwrap();
        String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    };
    let golden = root().join("golden/runs/replica-loss-vllm-factor5.pj");
    let judged = judge(golden.to_str().unwrap());
    assert_eq!(judged.len(), 1447);
    assert!(judged.iter().all(|j| j["verdict"] == "ok"));

    let dir = percentes_testkit::Scratch::new("independent-scrapes");
    let sealed = std::fs::read(root().join("golden/v1/sealed.pj")).unwrap();
    let define = |id: u32, kind: u8| SeriesDefinition {
        id,
        kind,
        family: format!("f{id}"),
        name: format!("f{id}"),
        labels: vec![("le".into(), "+Inf".into())],
    };
    let at = |k: u64| (k * 1_000_000_000, k * 1_000_000_000 + 5_000_000);
    // A counter (0) and a gauge (1); the gauge gone in the second answer, back in the third.
    let base = || -> Vec<ScrapeRecord> {
        (0..4u64)
            .map(|k| ScrapeRecord {
                source: "replica-0".into(),
                sent_ns: at(k).0,
                received_ns: at(k).1,
                first: k == 0,
                restarted: false,
                defined: if k == 0 {
                    vec![define(0, 2), define(1, 1)]
                } else {
                    Vec::new()
                },
                samples: match k {
                    0 => vec![Sample { id: 0, value: 3.0 }, Sample { id: 1, value: 7.0 }],
                    2 => vec![Sample { id: 1, value: 2.0 }],
                    _ => vec![Sample { id: 0, value: 1.0 }],
                },
                gone: if k == 1 { vec![1] } else { Vec::new() },
            })
            .collect()
    };
    type Edit = fn(&mut Vec<ScrapeRecord>);
    let cases: [(&str, Edit); 9] = [
        ("ok", |_| {}),
        ("rule-1-back", |s| {
            // Sent before the previous answer (received at 1.005 s) was in.
            s[2].sent_ns = 1_000_000_000;
            s[2].received_ns = 1_005_000_000;
        }),
        ("rule-2-first", |s| s[3].first = true),
        ("rule-3-again", |s| {
            let again = s[0].defined[0].clone();
            s[2].defined.push(again);
            s[2].samples.push(Sample { id: 0, value: 1.0 });
        }),
        ("rule-3-kind", |s| {
            s[2].defined.push(SeriesDefinition {
                id: 2,
                kind: 7,
                family: "x".into(),
                name: "x".into(),
                labels: Vec::new(),
            });
            s[2].samples.push(Sample { id: 2, value: 0.0 });
        }),
        ("rule-4-undefined", |s| {
            s[3].samples.push(Sample { id: 9, value: 1.0 })
        }),
        ("rule-4-twice", |s| {
            s[3].samples.push(Sample { id: 0, value: 1.0 })
        }),
        ("rule-5-gone-twice", |s| s[2].gone.push(1)),
        ("rule-6-down", |s| s[3].samples[0].value = -1.0),
    ];
    for (name, edit) in cases {
        let mut scrapes = base();
        edit(&mut scrapes);
        let bytes = synthetic::with_records(&sealed, |records| {
            for (k, s) in scrapes.into_iter().enumerate() {
                records.insert(k, Record::Scrape(s));
            }
        });
        let path = dir.join(format!("{name}.pj"));
        std::fs::write(&path, bytes).unwrap();
        let path = path.to_str().unwrap();
        let judged = judge(path);
        assert_eq!(judged.len(), 4, "{name}");
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
            assert!(broken.is_empty(), "{name}: {judged:?}");
            assert_ne!(code, 1, "{name}: {stderr}");
        } else {
            let rule = name.split('-').take(2).collect::<Vec<_>>().join(" ");
            assert!(
                !broken.is_empty() && broken[0]["verdict"].as_str().unwrap().starts_with(&rule),
                "{name}: {judged:?}"
            );
            assert_eq!(code, 1, "{name}: analyze must refuse it: {stderr}");
            assert!(
                stderr.contains(&format!("\"7 scrape\", {rule})")),
                "{name}: {stderr}"
            );
        }
    }
    std::fs::remove_dir_all(dir).unwrap();
}

/// Manifests (JOURNAL.md "Manifest"), read from the document alone: `verify_journal.py
/// --manifest` accepts exactly what `percentes verify` accepts, on a merged run and on one edit
/// per sentence (files swapped on disk, a key missing, twice or unknown, another version,
/// uppercase hex, a bound field or a restated one changed, a signature by another key).
#[test]
fn the_independent_verifier_judges_manifests_as_verify_does() {
    let _machine = crate::beside();
    let Some(python) = python() else { return };
    use percentes_formats::journal::synthetic;
    let dir = percentes_testkit::Scratch::new("manifests");
    let sealed = std::fs::read(root().join("golden/v1/sealed.pj")).unwrap();
    let shards: Vec<String> = synthetic::split(&sealed, 3)
        .into_iter()
        .enumerate()
        .map(|(k, bytes)| {
            let path = dir.join(format!("s{k}.pj"));
            std::fs::write(&path, bytes).unwrap();
            path.display().to_string()
        })
        .collect();
    let key = |name: &str| {
        let (code, _, stderr) = percentes(&["keygen", "--out", dir.join(name).to_str().unwrap()]);
        assert_eq!(code, 0, "{stderr}");
        std::fs::read_to_string(dir.join(format!("{name}.pub")))
            .unwrap()
            .trim()
            .to_owned()
    };
    let (op, other) = (key("op"), key("other"));
    let merge = |name: &str, sign: bool| {
        let path = dir.join(name);
        let mut args = vec!["merge", "-o", path.to_str().unwrap()];
        let key = dir.join("op.key");
        if sign {
            args.extend(["--sign-key", key.to_str().unwrap()]);
        }
        args.extend(shards.iter().map(String::as_str));
        let (code, stdout, stderr) = percentes(&args);
        assert_eq!(code, 0, "{stdout}{stderr}");
        std::fs::read_to_string(&path).unwrap()
    };
    let plain = merge("plain.json", false);
    let signed = merge("signed.json", true);
    let judge = |name: &str, text: &str, trusted: Option<&str>| {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        let mut rust = vec!["verify", path.to_str().unwrap()];
        let pubkey = dir.join(format!(
            "{}.pub",
            if trusted == Some(&op) { "op" } else { "other" }
        ));
        let mut py = vec![
            "scripts/verify_journal.py",
            path.to_str().unwrap(),
            "--manifest",
        ];
        if let Some(trusted) = trusted {
            rust.extend(["--pubkey", pubkey.to_str().unwrap()]);
            py.extend(["--trusted-key", trusted]);
        }
        let (code, stdout, stderr) = percentes(&rust);
        let out = Command::new(python)
            .args(&py)
            .current_dir(root())
            .output()
            .unwrap();
        let independent: serde_json::Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{name}: {e}: {}", String::from_utf8_lossy(&out.stderr)));
        let intact = independent["verdict"] == "intact";
        assert_eq!(
            code == 0,
            intact,
            "{name}: verify said {stdout}{stderr}; the independent verifier {independent}"
        );
        intact
    };
    assert!(judge("plain.json", &plain, None));
    assert!(judge("signed.json", &signed, Some(&op)));
    let changed = |from: &str, to: &str, text: &str| {
        assert!(text.contains(from), "{from}");
        text.replacen(from, to, 1)
    };
    let binding = serde_json::from_str::<serde_json::Value>(&plain).unwrap()["binding"]
        .as_str()
        .unwrap()
        .to_owned();
    let refused: Vec<(&str, String, Option<&str>)> = vec![
        ("signed-by-another.json", signed.clone(), Some(&other)),
        ("unsigned-with-key.json", plain.clone(), Some(&op)),
        (
            "no-signature-key.json",
            changed(",\n  \"signature\": null", "", &plain),
            None,
        ),
        (
            "version-2.json",
            changed("\"manifest_version\": 1", "\"manifest_version\": 2", &plain),
            None,
        ),
        (
            "key-twice.json",
            changed(
                "\"shard_count\": 3,",
                "\"shard_count\": 3,\n  \"shard_count\": 3,",
                &plain,
            ),
            None,
        ),
        (
            "shard-key-twice.json",
            changed(
                "\"file\": \"s1.pj\",",
                "\"file\": \"s1.pj\",\n      \"file\": \"s1.pj\",",
                &plain,
            ),
            None,
        ),
        (
            "unknown-key.json",
            changed("\"binding\"", "\"note\": \"x\",\n  \"binding\"", &plain),
            None,
        ),
        (
            "shard-unknown-key.json",
            changed(
                "\"file\": \"s1.pj\",",
                "\"file\": \"s1.pj\",\n      \"size\": 1,",
                &plain,
            ),
            None,
        ),
        (
            "uppercase-binding.json",
            changed(&binding, &binding.to_uppercase(), &plain),
            None,
        ),
        (
            "bound-field-edited.json",
            changed("\"shard_count\": 3", "\"shard_count\": 4", &plain),
            None,
        ),
        (
            "restated-field-edited.json",
            changed("\"seal\": \"completed\"", "\"seal\": \"aborted\"", &plain),
            None,
        ),
    ];
    for (name, text, trusted) in &refused {
        assert!(!judge(name, text, *trusted), "{name} must be refused");
    }
    // Two shard files swapped on disk: each intact, each with another shard's head.
    std::fs::rename(&shards[0], dir.join("t.pj")).unwrap();
    std::fs::rename(&shards[1], &shards[0]).unwrap();
    std::fs::rename(dir.join("t.pj"), &shards[1]).unwrap();
    assert!(!judge("swapped.json", &plain, None));
    std::fs::remove_dir_all(dir).unwrap();
}

/// External timeline events (JOURNAL.md "2 event", `timeline`), read from the document alone:
/// `verify_journal.py --timeline` recomputes each one's `at` from the time its detail states and
/// the header's two epochs, which `analyze` reads as written; a forged `at` is found.
#[test]
fn the_independent_verifier_recomputes_external_timeline_times() {
    let _machine = crate::beside();
    let Some(python) = python() else { return };
    use percentes_formats::journal::records::{EventKind, EventRecord, Record};
    use percentes_formats::journal::synthetic;
    let sealed = std::fs::read(root().join("golden/v1/sealed.pj")).unwrap();
    let dir = percentes_testkit::Scratch::new("timeline");
    let probe = dir.join("probe.pj");
    std::fs::write(&probe, &sealed).unwrap();
    let clock = percentes_analyzer::JournalFile::open(&probe)
        .unwrap()
        .header()
        .unwrap()
        .0
        .clock;
    let (mono, real) = (clock.monotonic_epoch_ns, clock.realtime_epoch_ns);
    let event = |at_ns: u64, detail: String| {
        Record::Event(EventRecord {
            at_ns,
            kind: EventKind::Timeline.code(),
            subject: "container-start".into(),
            detail,
            value: None,
        })
    };
    let read = 2_000_000_000u64;
    let events = [
        (1_500_000_000u64, format!("pod up (external: stated at {} ns on CLOCK_MONOTONIC; read at {read} ns from the epoch)", mono + 1_500_000_000)),
        (2_400_000_000, format!("pod up (external: stated at {} ns on CLOCK_REALTIME; read at {read} ns from the epoch)", real + 2_400_000_000)),
        (read, format!("pod up (external: stated no time: read at {read} ns from the epoch)")),
        // Forged: the detail states 1.5 s, the record says 1.7 s.
        (1_700_000_000, format!("pod up (external: stated at {} ns on CLOCK_MONOTONIC; read at {read} ns from the epoch)", mono + 1_500_000_000)),
    ];
    let bytes = synthetic::with_records(&sealed, |records| {
        let at = records
            .iter()
            .position(|r| matches!(r, Record::Checkpoint(_)))
            .unwrap_or(0);
        for (i, (at_ns, detail)) in events.iter().enumerate() {
            records.insert(at + i, event(*at_ns, detail.clone()));
        }
    });
    let path = dir.join("timeline.pj");
    std::fs::write(&path, bytes).unwrap();
    let (code, stdout, _) = percentes(&["verify", path.to_str().unwrap()]);
    assert_eq!(code, 0, "{stdout}");
    let out = Command::new(python)
        .args(["scripts/verify_journal.py", "--timeline"])
        .arg(&path)
        .current_dir(root())
        .output()
        .unwrap();
    let verdicts: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["verdict"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    assert_eq!(verdicts.len(), 4, "{verdicts:?}");
    assert!(verdicts[..3].iter().all(|v| v == "ok"), "{verdicts:?}");
    assert!(
        verdicts[3].starts_with("at 1700000000, the detail states 1500000000"),
        "{verdicts:?}"
    );
    std::fs::remove_dir_all(dir).unwrap();
}
