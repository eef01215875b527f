//! golden/v1: committed journals and their expected `verify` and `inspect` output; golden/runs:
//! recorded runs and their expected analyses under every spec version.
//!
//! The promise of golden/v1: a v1 journal written by any release verifies and decodes
//! identically in every later release. Those files are frozen: no flag rewrites them, and a
//! mismatch is a broken promise (or, if readers must change, format v2 with goldens of its own).
//! The expected reports of golden/runs follow the analyzer: `UPDATE_GOLDEN=1 cargo test --test
//! repo golden` rewrites them, and the diff is reviewed like code. A mismatch prints a unified
//! diff either way. Never delete an old version's goldens.

use percentes_formats::spec::Spec;
use std::path::{Path, PathBuf};
use std::process::Command;

use percentes_formats::journal::synthetic::{self, Ending, Options};

pub struct Case {
    pub name: &'static str,
    pub options: fn() -> Options,
    /// Extra `verify` arguments.
    pub verify_args: &'static [&'static str],
    pub exit: i32,
}

pub const CASES: &[Case] = &[
    Case {
        name: "sealed",
        options: Options::default,
        verify_args: &[],
        exit: 0,
    },
    Case {
        name: "aborted",
        options: || Options {
            ending: Ending::Aborted { after_requests: 12 },
            ..Options::default()
        },
        verify_args: &[],
        exit: 0,
    },
    Case {
        name: "torn",
        options: || Options {
            ending: Ending::Torn { after_requests: 20 },
            ..Options::default()
        },
        verify_args: &[],
        exit: 1,
    },
    Case {
        name: "signed",
        options: || Options {
            signer: Some(synthetic::golden_signing_key()),
            ..Options::default()
        },
        verify_args: &["--pubkey", "golden/v1/signed.pub"],
        exit: 0,
    },
];

pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn dir() -> PathBuf {
    root().join("golden/v1")
}

pub fn percentes(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_percentes"))
        .args(args)
        .current_dir(root())
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

/// `percentes scenario run scenarios/catalogue/NAME.toml --time-factor F --force --diagnose -o
/// OUT`, once. A scenario test asserts what the fault did (censoring at the recorder's own
/// deadline, gates G3 and G4, fault fidelity, the declared expectations), none of it within
/// reach of this machine's timer noise; so a run the busy machine failed on the client gate (G2)
/// alone is read as its diagnosis (exit 2, the report's statistics marked NOT PUBLISHABLE), not
/// recorded again. Any other gate failing, or any exit but 0 or 2, fails the test. Returns the
/// exit code and standard output.
/// Whether a recorded golden was made under v0.4 and has the reports of v0.4 and later only:
/// the recordings of issue 34 (`-factor10`) and of issue 36 (`-factor5`).
pub fn v0_4_only(name: &str) -> bool {
    name.ends_with("-factor10") || name.ends_with("-factor5")
}

/// The spec versions a recorded golden has reports under.
pub fn versions_of(name: &str) -> Vec<Spec> {
    Spec::ALL
        .into_iter()
        .filter(|&spec| !v0_4_only(name) || spec >= Spec::V0_4)
        .collect()
}

pub fn scenario_run(name: &str, factor: u32, out: &Path) -> (i32, String) {
    let (code, stdout, stderr) = percentes(&[
        "scenario",
        "run",
        &format!("scenarios/catalogue/{name}.toml"),
        "--time-factor",
        &factor.to_string(),
        "--force",
        "--diagnose",
        "-o",
        out.to_str().unwrap(),
    ]);
    let failed: Vec<&str> = stdout.lines().filter(|l| l.starts_with("gate ")).collect();
    let only_g2 = failed.iter().all(|l| l.starts_with("gate G2"));
    assert!(
        code == 0 || code == 2 && !failed.is_empty() && only_g2,
        "{name}: exit {code}: {stdout}{stderr}"
    );
    if code == 2 {
        eprintln!(
            "{name}: read as a diagnosis; this busy machine failed the client gate: {failed:?}"
        );
    }
    (code, stdout)
}

fn updating() -> bool {
    std::env::var_os("UPDATE_GOLDEN").is_some()
}

fn generate(case: &Case) -> Vec<u8> {
    synthetic::bytes(&synthetic::golden_config(), &(case.options)())
}

/// A unified diff of `expected` (the committed file) against `actual`, one hunk around the lines
/// that differ (everything between the longest common head and tail), with three lines of
/// context.
pub fn unified_diff(name: &str, expected: &str, actual: &str) -> String {
    let old: Vec<&str> = expected.lines().collect();
    let new: Vec<&str> = actual.lines().collect();
    let head = old.iter().zip(&new).take_while(|(a, b)| a == b).count();
    let tail = old[head..]
        .iter()
        .rev()
        .zip(new[head..].iter().rev())
        .take_while(|(a, b)| a == b)
        .count();
    let context = 3;
    let start = head.saturating_sub(context);
    let old_end = (old.len() - tail + context).min(old.len());
    let new_end = (new.len() - tail + context).min(new.len());
    let mut out = format!(
        "--- {name} (committed)\n+++ {name} (this build)\n@@ -{},{} +{},{} @@\n",
        start + 1,
        old_end - start,
        start + 1,
        new_end - start
    );
    for line in &old[start..head] {
        out.push_str(&format!(" {line}\n"));
    }
    for line in &old[head..old.len() - tail] {
        out.push_str(&format!("-{line}\n"));
    }
    for line in &new[head..new.len() - tail] {
        out.push_str(&format!("+{line}\n"));
    }
    for line in &old[old.len() - tail..old_end] {
        out.push_str(&format!(" {line}\n"));
    }
    out
}

/// A frozen golden (golden/v1): never rewritten.
fn compare_frozen(path: &Path, actual: &str) {
    // A new recording's reports under the older versions are written once, under
    // UPDATE_GOLDEN, and never rewritten after.
    if updating() && !path.exists() {
        std::fs::write(path, actual).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: {e}: a frozen golden is missing", path.display()));
    assert!(
        expected == actual,
        "{} is frozen (format v1's compatibility promise) and this build disagrees:\n{}",
        path.display(),
        unified_diff(&path.display().to_string(), &expected, actual)
    );
}

/// An expected analysis (golden/runs): rewritten under `UPDATE_GOLDEN=1`.
fn compare(path: &Path, actual: &str) {
    if updating() {
        std::fs::write(path, actual).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(path).unwrap_or_else(|e| {
        panic!(
            "{}: {e}; run UPDATE_GOLDEN=1 cargo test --test repo golden",
            path.display()
        )
    });
    assert!(
        expected == actual,
        "{} differs from this build's analysis (review, then UPDATE_GOLDEN=1 cargo test --test repo golden):\n{}",
        path.display(),
        unified_diff(&path.display().to_string(), &expected, actual)
    );
}

#[test]
fn a_mismatch_reads_as_a_unified_diff() {
    let diff = unified_diff("x", "a\nb\nc\nd\ne\nf\ng\nh\n", "a\nb\nc\nd\nE\nf\ng\nh\n");
    assert_eq!(
        diff,
        "--- x (committed)\n+++ x (this build)\n@@ -2,7 +2,7 @@\n b\n c\n d\n-e\n+E\n f\n g\n h\n"
    );
    let grown = unified_diff("x", "a\n", "a\nb\n");
    assert!(grown.ends_with(" a\n+b\n"), "{grown}");
}

#[test]
fn goldens_verify_and_decode_as_recorded() {
    let _beside = crate::beside();
    for case in CASES {
        let journal = format!("golden/v1/{}.pj", case.name);
        let mut args = vec!["verify", journal.as_str()];
        args.extend_from_slice(case.verify_args);
        let (code, stdout, stderr) = percentes(&args);
        assert_eq!(code, case.exit, "{journal}: {stdout}{stderr}");
        compare_frozen(&dir().join(format!("{}.verify.txt", case.name)), &stdout);

        let (code, stdout, _) = percentes(&["inspect", journal.as_str(), "--records"]);
        assert_eq!(code, 0);
        compare_frozen(&dir().join(format!("{}.records.jsonl", case.name)), &stdout);
    }
}

/// An alarm for accidental changes to what the writer emits. The committed v1 journals are
/// frozen: a writer that no longer reproduces them either has a bug, or writes format v2, whose
/// goldens go in golden/v2 beside these.
#[test]
fn the_writer_still_writes_the_golden_bytes() {
    let _beside = crate::beside();
    for case in CASES {
        let committed = std::fs::read(dir().join(format!("{}.pj", case.name))).unwrap();
        assert!(
            generate(case) == committed,
            "the writer no longer reproduces golden/v1/{}.pj",
            case.name
        );
    }
}

/// The stream golden (issue 49, A4): `golden/streams/reasoning-tools-mock.pj`, recorded against
/// `percentes mock --config golden/streams/mock.toml` (a reasoning model: 20 reasoning tokens
/// 20 ms apart, then the rest 10 ms apart) with `percentes record golden/streams/run.toml`:
/// three routes, a chat answer after reasoning, a forced tool call after reasoning checked
/// against its function's parameters, and a Responses API JSON answer checked against its
/// schema. Its report under the current version (segmented by output, `--by output`) follows
/// the analyzer; its v0.4 report, the earlier reading of the same streams, is frozen.
#[test]
fn the_stream_golden_analyzes_to_its_expected_reports() {
    let _beside = crate::beside();
    use percentes_analyzer::analysis;
    use percentes_analyzer::model::{Analyzer, SegmentColumn};
    use percentes_analyzer::{load, report, JournalFile};
    let dir = root().join("golden/streams");
    let name = "reasoning-tools-mock";
    let file = JournalFile::open(&dir.join(format!("{name}.pj"))).unwrap();
    let run = load::load(&file).unwrap();
    let analyzer = Analyzer {
        version: "golden".into(),
        commit: "golden".into(),
        diagnose: false,
        by: vec![SegmentColumn::Output],
    };
    for spec in [Spec::V0_4, Spec::CURRENT] {
        let result = analysis::analyze(&run, &file, spec, &analyzer);
        assert!(result.validity.valid, "{name} under {spec}");
        let stem = if spec == Spec::CURRENT {
            name.to_owned()
        } else {
            format!("{name}.{spec}")
        };
        let check = if spec == Spec::CURRENT {
            compare
        } else {
            compare_frozen
        };
        check(
            &dir.join(format!("{stem}.report.json")),
            &report::json(&result),
        );
        check(
            &dir.join(format!("{stem}.report.md")),
            &report::markdown(&result),
        );
        if spec == Spec::CURRENT {
            let w = result
                .windows
                .iter()
                .find(|w| w.window == "measurement")
                .unwrap();
            let s = w.streams.as_ref().unwrap();
            let kinds: Vec<&String> = s.output.keys().collect();
            assert_eq!(kinds, ["answer+reasoning", "reasoning+tool-call"], "{s:?}");
            assert_eq!(s.with_record, w.outcomes.completed);
            assert_eq!(w.classes.get("correct-success"), Some(&w.scheduled));
        }
    }
}

/// Every recording in golden/runs, by name without `.pj`, in order: the demo's, and one per
/// runnable catalogue scenario.
fn recorded_runs() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(root().join("golden/runs"))
        .unwrap()
        .filter_map(|e| {
            let name = e.unwrap().file_name().into_string().unwrap();
            name.strip_suffix(".pj").map(str::to_owned)
        })
        .collect();
    names.sort();
    names
}

/// Every host fact a recorded golden carries has a typed key ([`HostFact`]) or belongs to a
/// keyed family (`accelerator.NAME`, `prompt-set LABEL`): no reader matches a spelling of its
/// own (issue 33 item 5).
#[test]
fn every_recorded_host_fact_has_a_typed_key() {
    use percentes_formats::journal::header::HostFact;
    for name in recorded_runs() {
        let file =
            percentes_analyzer::JournalFile::open(&root().join(format!("golden/runs/{name}.pj")))
                .unwrap();
        let (header, _) = file.header().unwrap();
        for (key, _) in &header.host {
            let family = key.starts_with(&HostFact::accelerator(""))
                || key.starts_with(&HostFact::prompt_set(""))
                || key.starts_with(&HostFact::images(""));
            assert!(
                HostFact::from_key(key).is_some() || family,
                "{name}: host fact {key:?} has no HostFact"
            );
        }
    }
    for fact in HostFact::ALL {
        assert_eq!(HostFact::from_key(fact.key()), Some(fact));
    }
}

/// Recorded runs and their expected analyses (golden/runs): `demo-clean-delete.pj` is
/// `percentes demo --time-factor 100` recorded on the project's 2-core machine (a clean delete
/// with the orchestrator's reschedule, every gate passing: the catalogue's clean-delete
/// scenario); `replica-loss-black-hole.pj` and `pod-churn.pj` are `percentes scenario run
/// scenarios/catalogue/NAME.toml --time-factor 100` (the black-hole as root, in network
/// namespaces; G3 and G4 passing, cleanup confirmed), as are `store-outage-under-spike.pj`
/// and `noisy-neighbour-cpu-throttle.pj` (one replica, a degradation, routes segmented). The
/// `NAME-factor10.pj` recordings are the same commands at `--time-factor 10` by the recorder of
/// 2026-12-04 (issue 34: removal + R + H fit their phases), plus the catalogue's
/// `replica-loss-clean-delete` scenario, recorded under v0.4 with the workers' own tickers; the
/// noisy neighbour's failed G2 on this 2-core host twice and is kept as the invalid case.
/// `replica-loss-vllm-factor5.pj` is run 1 of issue 36's campaign (studies/replica-loss-vllm):
/// `scenario run replica-loss-vllm --time-factor 5` against two real vLLM replicas behind
/// HAProxy, placed, whose replacement's start-up is real; its recovery outlasts R after the
/// removal, so it is the golden that reads a TTR on software nobody here wrote; its HAProxy
/// held each response's head and first tokens (no `option http-no-delay`), which v0.5 names.
/// `replica-loss-vllm-no-delay-factor5.pj` is run 1 of issue 52's campaign of the same study
/// (studies/replica-loss-vllm/no-delay): HAProxy with `option http-no-delay` journaled as the
/// `proxy` host fact, the recorder's group at the most CPU weight, and the capacity calibrated
/// on the day (32 rps, where issue 36's campaign had 62.359). Any
/// analyzer change that moves a
/// number shows up as a diff of the expected report.json and report.md; review it like code and
/// regenerate with `UPDATE_GOLDEN=1 cargo test --test repo golden`. The journals themselves are
/// recordings and are never regenerated.
#[test]
fn recorded_runs_analyze_to_their_expected_reports() {
    // Ten analyses (five recordings under two spec versions), about a core for five seconds:
    // never beside a recording, whose client gate they could fail.
    let _machine = crate::beside();
    use percentes_analyzer::analysis;
    use percentes_analyzer::model::Analyzer;
    use percentes_analyzer::{load, report, JournalFile};
    let dir = root().join("golden/runs");
    let names = recorded_runs();
    let mut measured: Vec<String> = Vec::new();
    assert_eq!(
        names,
        [
            "demo-clean-delete",
            "demo-clean-delete-factor10",
            "noisy-neighbour-cpu-throttle",
            "noisy-neighbour-cpu-throttle-factor10",
            "pod-churn",
            "pod-churn-factor10",
            "replica-loss-black-hole",
            "replica-loss-black-hole-factor10",
            "replica-loss-clean-delete-factor10",
            "replica-loss-vllm-factor5",
            "replica-loss-vllm-no-delay-factor5",
            "store-outage-under-spike",
            "store-outage-under-spike-factor10",
        ],
        "a recording without its expected reports, or a scenario without its recording"
    );
    for name in &names {
        let file = JournalFile::open(&dir.join(format!("{name}.pj"))).unwrap();
        let run = load::load(&file).unwrap();
        let analyzer = Analyzer {
            version: "golden".into(),
            commit: "golden".into(),
            diagnose: false,
            by: Vec::new(),
        };
        // Under the current version the expected files are NAME.report.*; under each older one,
        // NAME.VERSION.report.*, frozen: an archived journal re-analyzed under v0.1 to v0.4
        // keeps every figure it was published with, so UPDATE_GOLDEN never rewrites those. The
        // recordings at time factor 10 (issue 34) were made under v0.4 and have the reports of
        // v0.4 and later only.
        let recent = v0_4_only(name);
        for spec in versions_of(name) {
            let result = analysis::analyze(&run, &file, spec, &analyzer);
            // From v0.4 (A3) the recordings made before the workers' own stall tickers leave
            // G2.4 unobserved, and nothing else fails them: their ticker did not bound the
            // send path (SPEC §2).
            let old_ticker = !recent && spec >= Spec::V0_4;
            let failed: Vec<&str> = result.validity.failed().map(|g| g.id.name()).collect();
            if old_ticker {
                assert_eq!(failed, ["G2.4 runtime stall p99"], "{name} under {spec}");
            } else if name == "noisy-neighbour-cpu-throttle-factor10" {
                // The CPU neighbour of this scenario shares this 2-core host with the recorder,
                // whose workers' own tickers feel it: recorded twice, it failed G2 both times,
                // and is kept as the real invalid run that v0.4 must print no recovery from.
                assert_eq!(
                    failed,
                    ["G2.1 send skew p99", "G2.4 runtime stall p99"],
                    "{name} under {spec}"
                );
            } else {
                assert!(
                    result.validity.valid,
                    "{name} under {spec}: {:?}",
                    result.windows_withheld
                );
            }
            assert_eq!(result.provenance.spec_applied, spec.name());
            let stem = if spec == Spec::CURRENT {
                name.clone()
            } else {
                format!("{name}.{spec}")
            };
            let check = if spec == Spec::CURRENT {
                compare
            } else {
                compare_frozen
            };
            check(
                &dir.join(format!("{stem}.report.json")),
                &report::json(&result),
            );
            check(
                &dir.join(format!("{stem}.report.md")),
                &report::markdown(&result),
            );
            if spec == Spec::V0_3 || (recent && spec == Spec::V0_4) {
                recovery_reads_honestly(
                    name,
                    &result,
                    &analysis::analyze(&run, &file, Spec::V0_2, &analyzer),
                );
            }
            if spec >= Spec::V0_4 {
                a3_claims_only_what_it_measured(name, &result, &report::markdown(&result));
            }
            if spec == Spec::CURRENT
                && result
                    .recovery
                    .as_ref()
                    .is_some_and(|r| r.to_pre_fault.ttr_s.is_some())
            {
                measured.push(name.clone());
            }
            if spec == Spec::CURRENT {
                plots_are_drawn(name, &result, &run);
            }
        }
    }
    // Issue 34's must-show: at least three fault goldens whose v0.4 headline reads a measured
    // TTR (not a bound at the detector's resolution), one of them on real parts.
    assert!(
        measured.len() >= 3 && measured.iter().any(|n| n.contains("vllm")),
        "goldens with a measured TTR under v0.4: {measured:?}"
    );
}

/// Issue 54's must-show, the plots regenerated for every golden: each plot of the current
/// version's report is a whole SVG whose every number is finite, and each line it draws stays
/// inside the picture.
fn plots_are_drawn(
    name: &str,
    report: &percentes_analyzer::model::Report,
    run: &percentes_analyzer::load::Run,
) {
    let plots = percentes_analyzer::plots::all(report, &run.requests);
    assert!(!plots.is_empty(), "{name}: no plot");
    for (file, svg) in plots {
        assert!(
            svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"),
            "{name} {file}: not a whole SVG"
        );
        assert!(
            !["NaN", "=\"inf", "=\"-inf", ",inf", ",-inf", " inf,", " -inf,"]
                .iter()
                .any(|bad| svg.contains(bad)),
            "{name} {file}: a number that is not one"
        );
        let width: f64 = svg
            .split("width=\"")
            .nth(1)
            .and_then(|w| w.split('"').next())
            .and_then(|w| w.parse().ok())
            .unwrap_or_else(|| panic!("{name} {file}: no width"));
        for points in svg.split("points=\"").skip(1) {
            let coords = points.split('"').next().unwrap_or_default();
            for xy in coords.split_whitespace() {
                let x: f64 = xy.split(',').next().and_then(|x| x.parse().ok()).unwrap();
                assert!(
                    (-1.0..=width + 1.0).contains(&x),
                    "{name} {file}: a line point at x = {x}, outside the {width} px picture"
                );
            }
        }
    }
}

/// Issue 34's must-show, over every v0.4 golden report: no duration at the detector's
/// resolution presented as a measurement; no percentage without its n; no component recovery
/// before the removal; no claim over zero measured cells; no recovery reading in an invalid run;
/// the outage figures read over [fire anchor, removal).
fn a3_claims_only_what_it_measured(
    name: &str,
    report: &percentes_analyzer::model::Report,
    markdown: &str,
) {
    let Some(r) = &report.recovery else {
        panic!("{name}: every golden is a fault run and has a recovery report")
    };
    if !report.validity.valid {
        for said in [
            "recovered to the pre-fault baseline",
            "order them the same way",
            "returned after",
            "settled into",
        ] {
            assert!(
                !markdown.contains(said),
                "{name}: an invalid run says {said:?}"
            );
        }
        assert!(report.headline.is_empty(), "{name}: {}", report.headline);
        assert!(r.survivor.is_empty() && r.sweep.is_empty() && r.components.is_empty());
        assert!(r.to_pre_fault.ttr_s.is_none() && r.to_equilibrium.ttr_s.is_none());
        assert!(r.to_pre_fault.bound_s.is_none() && r.to_equilibrium.bound_s.is_none());
        return;
    }
    let a = r.amended.as_ref().expect("v0.4 keeps the A2 section");
    let bucket = r.bucket_s;
    // A measured recovery ends more than R plus a bucket after the start it is measured from.
    let measured_from = |ttr_s: Option<f64>, start_after_anchor: f64| {
        ttr_s.is_none_or(|t| t > start_after_anchor + r.window_s + bucket - 1e-9)
    };
    let removal_after_anchor = a.removal_s.map(|s| s - r.fire_anchor_s);
    if let Some(removal) = removal_after_anchor {
        assert!(
            measured_from(r.to_pre_fault.ttr_s, removal),
            "{name}: the pre-fault TTR {:?} is at the detector's resolution after the removal at {removal}",
            r.to_pre_fault.ttr_s
        );
        for c in &r.components {
            if let Some(at) = c.ttr.at_s {
                assert!(
                    at >= a.removal_s.unwrap(),
                    "{name}: {} recovered at {at}, before the removal",
                    c.component
                );
            }
            if c.component != "backlog drain" {
                assert!(
                    measured_from(c.ttr.ttr_s, removal),
                    "{name}: {}",
                    c.component
                );
            }
        }
    }
    assert!(
        measured_from(r.to_equilibrium.ttr_s, 0.0),
        "{name}: the equilibrium TTR {:?} is R",
        r.to_equilibrium.ttr_s
    );
    if r.to_pre_fault.ttr_s.is_none() {
        for d in r.durations.iter().filter(|d| d.duration != "detection") {
            assert!(
                d.seconds.is_none(),
                "{name}: {} without a measured end",
                d.duration
            );
        }
    }
    let both = r
        .sweep
        .iter()
        .filter(|c| c.to_pre_fault_s.is_some() && c.to_equilibrium_s.is_some())
        .count();
    if both == 0 {
        assert!(
            !r.sweep_note.contains("same way"),
            "{name}: {}",
            r.sweep_note
        );
    }
    // Every percentage of the headline carries its n ("x % of n").
    let headline = &report.headline;
    for (at, _) in headline.match_indices(" %") {
        let after = &headline[at + 2..];
        assert!(
            after.starts_with(" of "),
            "{name}: a percentage without its n at {:?}",
            &headline[at.saturating_sub(12)..(at + 20).min(headline.len())]
        );
    }
    let outage = r.survivor.iter().find(|s| s.span == "outage").unwrap();
    assert_eq!(
        outage.from_s, r.fire_anchor_s,
        "{name}: the outage starts at the fire anchor"
    );
    assert_eq!(
        outage.to_s, a.removal_s,
        "{name}: the outage ends at the removal"
    );
}

/// A table over its memory budget lives in spill files (issue 19 item 4); where it lives must not
/// move a byte of any report. Every golden journal is loaded with no heap budget at all, so each
/// numeric column is a mapped file, and analyzed under every spec version beside the same journal
/// loaded onto the heap. A spill folder that does not exist is a load error that names it.
#[test]
fn a_spilled_request_table_analyzes_to_the_same_reports() {
    let _machine = crate::machine();
    use percentes_analyzer::analysis;
    use percentes_analyzer::model::Analyzer;
    use percentes_analyzer::{load, report, JournalFile};
    let dir = root().join("golden/runs");
    let spill_dir = percentes_testkit::Scratch::new("spill");
    let spilled = load::Options {
        table_memory: 0,
        spill_dir: spill_dir.to_path_buf(),
        ..Default::default()
    };
    let analyzer = Analyzer {
        version: "golden".into(),
        commit: "golden".into(),
        diagnose: false,
        by: {
            use percentes_analyzer::model::SegmentColumn::*;
            vec![Route, Replica, Status, Protocol]
        },
    };
    let names = recorded_runs();
    assert_eq!(names.len(), 13, "{names:?}");
    // One journal a core at a time (the test holds the machine).
    crate::on_every_core(&names, |name| {
        let file = JournalFile::open(&dir.join(format!("{name}.pj"))).unwrap();
        let heap = load::load(&file).unwrap();
        let verified = vec![file.verify(&Default::default())];
        let mapped =
            load::load_verified_with(std::slice::from_ref(&file), verified, &spilled).unwrap();
        assert!(!heap.requests.is_spilled() && mapped.requests.is_spilled());
        assert!(mapped.requests.terminal_ns.is_spilled() && mapped.requests.index.is_spilled());
        for spec in Spec::ALL {
            let expected = analysis::analyze(&heap, &file, spec, &analyzer);
            let actual = analysis::analyze(&mapped, &file, spec, &analyzer);
            assert_eq!(
                report::json(&actual),
                report::json(&expected),
                "{name} under {spec}: report.json"
            );
            assert_eq!(
                report::markdown(&actual),
                report::markdown(&expected),
                "{name} under {spec}: report.md"
            );
            if spec == Spec::CURRENT {
                // The written files too: the plots and histograms read the table itself.
                let out = |which: &str| spill_dir.join(format!("{name}-{which}"));
                report::write(&expected, &heap.requests, &out("heap")).unwrap();
                report::write(&actual, &mapped.requests, &out("mapped")).unwrap();
                let mut files: Vec<_> = std::fs::read_dir(out("heap"))
                    .unwrap()
                    .map(|e| e.unwrap().file_name())
                    .collect();
                files.sort();
                assert!(files.len() >= 4, "{files:?}");
                for f in files {
                    assert!(
                        std::fs::read(out("heap").join(&f)).unwrap()
                            == std::fs::read(out("mapped").join(&f)).unwrap(),
                        "{name}: {f:?} differs"
                    );
                }
                std::fs::remove_dir_all(out("heap")).unwrap();
                std::fs::remove_dir_all(out("mapped")).unwrap();
            }
        }
    });
    let left: Vec<_> = std::fs::read_dir(&spill_dir).unwrap().collect();
    assert!(left.is_empty(), "spill files left behind: {left:?}");
    std::fs::remove_dir(&spill_dir).unwrap();

    let file = JournalFile::open(&dir.join(format!("{}.pj", names[0]))).unwrap();
    let nowhere = load::Options {
        table_memory: 0,
        spill_dir: spill_dir.join("missing"),
        ..Default::default()
    };
    let verified = vec![file.verify(&Default::default())];
    let error = load::load_verified_with(std::slice::from_ref(&file), verified, &nowhere)
        .unwrap_err()
        .to_string();
    assert!(
        error.contains(&spill_dir.join("missing").display().to_string())
            && error.contains("--spill-dir"),
        "{error}"
    );
}

/// What amendment A2 promises of every fault run's recovery report (issue 15's checks), read
/// beside the same journal's v0.2 report: the timeline's times never go backwards, no duration is
/// negative, no recovery to the pre-fault baseline comes before the confirmed removal, an entry
/// the v0.2 rule read before the removal is flagged, and an equilibrium TTR equal to R says why.
fn recovery_reads_honestly(
    name: &str,
    v3: &percentes_analyzer::model::Report,
    v2: &percentes_analyzer::model::Report,
) {
    let Some(r) = &v3.recovery else {
        panic!("{name}: every golden is a fault run and has a recovery report")
    };
    let a = r.amended.as_ref().expect("v0.3 carries the A2 section");
    let times: Vec<f64> = r.timeline.iter().filter_map(|s| s.from_s).collect();
    assert!(
        times.windows(2).all(|w| w[0] <= w[1]),
        "{name}: timeline out of order: {:?}",
        r.timeline
    );
    for state in [
        "Stabilizing",
        "Healthy",
        "Injecting",
        "Faulted",
        "Removing",
        "Recovering",
    ] {
        assert!(
            r.timeline.iter().any(|s| s.state == state),
            "{name}: no {state} state"
        );
    }
    for d in &r.durations {
        assert!(
            d.seconds.is_none_or(|s| s >= 0.0),
            "{name}: {} negative",
            d.duration
        );
    }
    if let (Some(at), Some(removal)) = (r.to_pre_fault.at_s, a.removal_s) {
        assert!(
            at >= removal,
            "{name}: recovered at {at} before the removal at {removal}"
        );
    }
    if r.to_pre_fault.at_s.is_some() {
        assert!(
            a.removal_s.is_some(),
            "{name}: a recovery without a confirmed removal"
        );
    }
    let v2_at = v2.recovery.as_ref().and_then(|r| r.to_pre_fault.at_s);
    if let (Some(early), Some(removal)) = (v2_at, a.removal_s) {
        if early < removal {
            assert!(
                r.to_pre_fault
                    .flags
                    .iter()
                    .any(|f| f.starts_with("early detection")),
                "{name}: v0.2 recovered at {early} before the removal at {removal}, unflagged"
            );
        }
    }
    if let Some(ttr) = r.to_equilibrium.ttr_s {
        if (ttr - r.window_s).abs() < r.bucket_s / 2.0 {
            assert!(
                r.to_equilibrium
                    .flags
                    .iter()
                    .any(|f| f.starts_with("TTR equals R")),
                "{name}: an equilibrium TTR equal to R, unexplained"
            );
        }
    }
    assert_eq!(
        a.fidelity.len(),
        7,
        "{name}: seven fidelity evidence points"
    );
}

/// Issue 18 item 6: the demo recording's report.html renders in a real browser. Headless
/// Chromium (Debian's, installed by `.ci/run`) takes a screenshot through
/// `scripts/screenshot-report.sh`; the test fails when no PNG comes back, when it is not the size
/// asked for, or when it is so small that the page must be blank (a white 1200 x 1600 page
/// compresses to a few KB; this report's summary, tables and plots to well over 100 KB). The
/// page itself must lead with the summary box and carry the plots and the gate table's marks.
#[test]
fn the_report_page_renders_in_a_browser_with_its_summary_first() {
    let _machine = crate::beside();
    use percentes_analyzer::model::Analyzer;
    use percentes_analyzer::{analysis, load, report, JournalFile};
    let dir = percentes_testkit::Scratch::new("screenshot");
    let file =
        JournalFile::open(&root().join("golden/runs/demo-clean-delete-factor10.pj")).unwrap();
    let run = load::load(&file).unwrap();
    let analyzer = Analyzer {
        version: "test".into(),
        commit: "test".into(),
        diagnose: false,
        by: Vec::new(),
    };
    let result = analysis::analyze(&run, &file, Spec::CURRENT, &analyzer);
    report::write(&result, &run.requests, &dir).unwrap();
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    let summary = html
        .find("<div class=\"summary valid\">")
        .expect("a summary box");
    let provenance = html.find("<td>spec applied</td>").unwrap();
    assert!(summary < provenance, "the summary leads");
    assert!(html.contains("<td class=\"good\">pass</td>"));
    assert!(html.contains("<div class=\"plot\" id=\"latency\">"));
    assert!(
        !html.contains("&gt; Under"),
        "the headline is a quote, not a literal >"
    );

    let browser = ["chromium", "chromium-browser"].iter().any(|b| {
        Command::new(b)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    });
    if !browser {
        crate::prerequisite_missing(
            "the report page screenshot",
            "chromium is not installed (apt-get install chromium)",
        );
        return;
    }
    let out = Command::new("bash")
        .arg(root().join("scripts/screenshot-report.sh"))
        .arg(&dir)
        .arg("1200x1600")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let png = std::fs::read(dir.join("report.png")).unwrap();
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n", "not a PNG");
    let width = u32::from_be_bytes(png[16..20].try_into().unwrap());
    let height = u32::from_be_bytes(png[20..24].try_into().unwrap());
    assert_eq!((width, height), (1200, 1600));
    assert!(
        png.len() > 100_000,
        "{} bytes: the page rendered blank",
        png.len()
    );

    // Issue 54 item 5: the page leads with what the run was, then the card, then the plots,
    // the auditor's tables after them; and on the demo's page and the vLLM golden's, at a
    // laptop's width and a narrow one, nothing runs past the viewport (a wide table scrolls in
    // its own box, preformatted text wraps, a plot shrinks).
    let at = |needle: &str| html.find(needle).unwrap_or_else(|| panic!("{needle}"));
    assert!(at("<table class=\"identity\">") < summary);
    assert!(summary < at("<h2>Plots</h2>"));
    assert!(at("<h2>Plots</h2>") < at("<h2>Validity"));
    let vllm = percentes_testkit::Scratch::new("screenshot-vllm");
    let file = JournalFile::open(&root().join("golden/runs/replica-loss-vllm-factor5.pj")).unwrap();
    let run = load::load(&file).unwrap();
    let result = analysis::analyze(&run, &file, Spec::CURRENT, &analyzer);
    report::write(&result, &run.requests, &vllm).unwrap();
    for page in [&dir, &vllm] {
        for width in ["1200", "800"] {
            let out = Command::new("bash")
                .arg(root().join("scripts/page-overflow.sh"))
                .arg(page)
                .arg(width)
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "{}: {}{}",
                page.display(),
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
    let out = Command::new("bash")
        .arg(root().join("scripts/screenshot-report.sh"))
        .arg(&vllm)
        .arg("1200x1600")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let _ = std::fs::remove_dir_all(&vllm);
}
