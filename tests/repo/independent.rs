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
