//! Sharded capture (SPEC §2 "Sharded capture"): N recorders on one schedule, merged into a
//! manifest, verified, and analyzed exactly as one recorder's journal of the same records.

use std::path::{Path, PathBuf};

use percentes_analyzer::model::Analyzer;
use percentes_analyzer::{analysis, report, shards, JournalFile};
use percentes_formats::journal::synthetic;
use percentes_formats::spec::Spec;

use super::golden::{percentes, root};

fn scratch(name: &str) -> percentes_testkit::Scratch {
    percentes_testkit::Scratch::new(&format!("shards-{name}"))
}

fn analyzer() -> Analyzer {
    Analyzer {
        version: "shards".into(),
        commit: "shards".into(),
        diagnose: false,
        by: Vec::new(),
    }
}

/// The live recordings' analyzer: a run only the client gate failed is read as its diagnosis
/// (`analyze --diagnose`), because on this VM that gate fails every recording for minutes at a
/// time and what is compared here (the merged run against one journal of the same records)
/// does not depend on it.
fn diagnosing() -> Analyzer {
    Analyzer {
        diagnose: true,
        ..analyzer()
    }
}

/// Whether every gate that failed is the client's.
fn only_client(r: &percentes_analyzer::model::Report) -> bool {
    r.validity.only_client_gates_failed()
}

/// A report's JSON with what names the files rather than the records taken out: the chain head
/// (a merged run cites its manifest's binding) and the shard heads.
fn numbers(report: &percentes_analyzer::model::Report) -> serde_json::Value {
    let mut value: serde_json::Value = serde_json::from_str(&report::json(report)).unwrap();
    let provenance = value["provenance"].as_object_mut().unwrap();
    provenance.remove("chain_head");
    provenance.remove("shard_heads");
    without_recorders(&mut value);
    value
}

/// A report's JSON less the clock and generator, which a merged run gives shard by shard (issue
/// 38 item 5).
fn without_recorders(value: &mut serde_json::Value) {
    value["audit"]["clock_model"] = serde_json::Value::Null;
    if let Some(artifact) = value["audit"]["artifact"].as_object_mut() {
        artifact.remove("clock");
        artifact.remove("generator");
    }
}

/// A report's markdown without the lines that describe the recorders (see [`numbers`]).
fn markdown_but_recorders(report: &percentes_analyzer::model::Report) -> String {
    report::markdown(report)
        .lines()
        .filter(|l| {
            !(l.starts_with("| clock model |")
                || l.starts_with("| generator |")
                || l.starts_with("- Clock:"))
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Writes `count` shards of `journal` into `dir` and returns their paths, highest index first
/// (merge takes them in any order).
fn split_into(dir: &Path, stem: &str, journal: &[u8], count: u32) -> Vec<PathBuf> {
    let mut paths: Vec<PathBuf> = synthetic::split(journal, count)
        .into_iter()
        .enumerate()
        .map(|(k, bytes)| {
            let path = dir.join(format!("{stem}-shard-{k}.pj"));
            std::fs::write(&path, bytes).unwrap();
            path
        })
        .collect();
    paths.reverse();
    paths
}

/// A merged run whose shards were sealed differently says so shard by shard in its provenance:
/// shard 2 aborted while 0 and 1 completed reads `0/3 completed; 1/3 completed; 2/3 aborted
/// (...)`, never shard 0's `completed` alone; shards that agree read as one journal would.
#[test]
fn a_merged_run_cites_every_shards_seal_when_they_differ() {
    let _machine = crate::beside();
    let dir = scratch("seals");
    let sealed = std::fs::read(root().join("golden/v1/sealed.pj")).unwrap();
    let aborted = std::fs::read(root().join("golden/v1/aborted.pj")).unwrap();
    let mut paths = split_into(&dir, "sealed", &sealed, 3);
    paths.retain(|p| !p.to_string_lossy().ends_with("-shard-2.pj"));
    let other = split_into(&dir, "aborted", &aborted, 3);
    paths.extend(
        other
            .into_iter()
            .filter(|p| p.to_string_lossy().ends_with("-shard-2.pj")),
    );
    let manifest = dir.join("mixed.manifest.json");
    shards::merge(&paths, &manifest, None, false).unwrap();
    let (files, merged) = shards::open(&manifest).unwrap();
    let report = analysis::analyze(&merged, &files, Spec::CURRENT, &analyzer());
    let seal = &report.provenance.seal;
    assert!(
        seal.starts_with("0/3 completed; 1/3 completed; 2/3 aborted"),
        "{seal}"
    );
    assert_eq!(report.provenance.journal_verdict, "sealed-intact");
    assert!(
        report
            .not_publishable
            .iter()
            .any(|w| w.contains("was aborted")),
        "{:?}",
        report.not_publishable
    );
}

#[test]
fn every_golden_recording_split_over_three_shards_merges_and_analyzes_as_recorded() {
    let _machine = crate::beside();
    let dir = scratch("goldens");
    for name in [
        "demo-clean-delete",
        "noisy-neighbour-cpu-throttle",
        "pod-churn",
        "replica-loss-black-hole",
        "store-outage-under-spike",
    ] {
        let path = root().join(format!("golden/runs/{name}.pj"));
        let bytes = std::fs::read(&path).unwrap();
        let file = JournalFile::open(&path).unwrap();
        let single = percentes_analyzer::load::load(&file).unwrap();
        let paths = split_into(&dir, name, &bytes, 3);
        let manifest_path = dir.join(format!("{name}.manifest.json"));
        let (manifest, _) = shards::merge(&paths, &manifest_path, None, false).unwrap();
        assert_eq!(manifest.shard_count, 3);
        assert_eq!(
            manifest.shards.iter().map(|s| s.index).collect::<Vec<_>>(),
            [0, 1, 2]
        );
        let (files, merged) = shards::open(&manifest_path).unwrap();
        assert_eq!(merged.requests.len(), single.requests.len());
        assert_eq!(merged.requests.index, single.requests.index);
        for spec in Spec::ALL {
            let one = analysis::analyze(&single, &file, spec, &analyzer());
            let many = analysis::analyze(&merged, &files, spec, &analyzer());
            assert_eq!(
                numbers(&many),
                numbers(&one),
                "{name} under {spec}: the merged analysis differs from the recorded one"
            );
            assert_eq!(many.provenance.chain_head, manifest.binding);
            assert_eq!(many.provenance.shard_heads.as_ref().map(Vec::len), Some(3));
            // The markdown differs only where it cites the heads.
            let head = one.provenance.chain_head.clone();
            assert_eq!(
                markdown_but_recorders(&many).replace(&manifest.binding, &head),
                markdown_but_recorders(&one),
                "{name} under {spec}"
            );
            // The merged run's audit names every recorder and the clocks they read.
            if let Some(artifact) = &many.audit.artifact {
                for k in 0..3 {
                    let shard = format!("shard {k} of 3: host ");
                    assert!(
                        artifact.generator.contains(&shard),
                        "{}",
                        artifact.generator
                    );
                }
                assert!(artifact.clock.starts_with("3 shards"), "{}", artifact.clock);
            }
            assert!(
                many.audit.clock_model.starts_with("3 shards"),
                "{}",
                many.audit.clock_model
            );
        }
        // One recorder's journal of the same records: the shards joined back.
        let shard_bytes: Vec<Vec<u8>> = {
            let mut p = paths.clone();
            p.reverse();
            p.iter().map(|p| std::fs::read(p).unwrap()).collect()
        };
        let joined = synthetic::join(&shard_bytes.iter().map(Vec::as_slice).collect::<Vec<_>>());
        let joined_path = dir.join(format!("{name}.joined.pj"));
        std::fs::write(&joined_path, joined).unwrap();
        let joined_file = JournalFile::open(&joined_path).unwrap();
        let joined_run = percentes_analyzer::load::load(&joined_file).unwrap();
        assert_eq!(
            numbers(&analysis::analyze(
                &joined_run,
                &joined_file,
                Spec::CURRENT,
                &analyzer()
            )),
            numbers(&analysis::analyze(
                &single,
                &file,
                Spec::CURRENT,
                &analyzer()
            )),
            "{name}: split then joined is the recording"
        );
    }
    std::fs::remove_dir_all(dir).unwrap();
}

/// Runs `percentes merge` over `paths` into `dir/manifest.json`.
fn merge(dir: &Path, paths: &[&Path]) -> (i32, String, String) {
    let manifest = dir.join("manifest.json");
    let mut args = vec!["merge", "--force", "-o", manifest.to_str().unwrap()];
    args.extend(paths.iter().map(|p| p.to_str().unwrap()));
    percentes(&args)
}

#[test]
fn merge_refuses_a_missing_duplicated_foreign_or_tampered_shard_and_verify_a_replaced_one() {
    let _beside = crate::beside();
    let dir = scratch("refusals");
    let golden = std::fs::read(root().join("golden/runs/pod-churn.pj")).unwrap();
    let mut paths = split_into(&dir, "run", &golden, 3);
    paths.reverse();
    let p: Vec<&Path> = paths.iter().map(PathBuf::as_path).collect();

    let (code, stdout, stderr) = merge(&dir, &[p[2], p[0], p[1]]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(stdout.contains("merged 3 shards"), "{stdout}");
    let manifest = dir.join("manifest.json");
    let text = std::fs::read_to_string(&manifest).unwrap();
    assert!(text.contains("\"file\": \"run-shard-1.pj\""), "{text}");

    // verify, analyze, export and campaign take the manifest in place of a journal.
    let (code, stdout, _) = percentes(&["verify", manifest.to_str().unwrap()]);
    assert_eq!(code, 0, "{stdout}");
    assert!(stdout.contains("every one of the"), "{stdout}");
    let out = dir.join("report");
    // v0.3: under v0.4 this recording, made before the workers' own tickers, fails G2.4 and
    // publishes no statistic; v0.3 compares every figure.
    let (code, _, stderr) = percentes(&[
        "analyze",
        manifest.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
        "--spec",
        "v0.3",
    ]);
    assert_eq!(code, 0, "{stderr}");
    let expected = std::fs::read_to_string(root().join("golden/runs/pod-churn.v0.3.report.json"))
        .unwrap()
        .parse::<serde_json::Value>()
        .unwrap();
    let mut got: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap();
    let mut expected = expected;
    for v in [&mut got, &mut expected] {
        without_recorders(v);
        let p = v["provenance"].as_object_mut().unwrap();
        for key in [
            "chain_head",
            "shard_heads",
            "analyzer_version",
            "analyzer_commit",
        ] {
            p.remove(key);
        }
    }
    assert_eq!(
        got, expected,
        "the manifest's report is the golden's, provenance aside"
    );
    let parquet = dir.join("run.parquet");
    let (code, _, stderr) = percentes(&[
        "export",
        manifest.to_str().unwrap(),
        "--parquet",
        parquet.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stderr.contains(&format!(
            "wrote {} rows",
            percentes_analyzer::load::load(
                &JournalFile::open(&root().join("golden/runs/pod-churn.pj")).unwrap()
            )
            .unwrap()
            .requests
            .len()
        )),
        "{stderr}"
    );
    let (code, stdout, stderr) = percentes(&[
        "campaign",
        manifest.to_str().unwrap(),
        "-o",
        dir.join("campaign").to_str().unwrap(),
        "--spec",
        "v0.3",
    ]);
    assert_eq!(code, 0, "{stdout}{stderr}");

    // Missing: two of three.
    let (code, _, stderr) = merge(&dir, &[p[0], p[2]]);
    assert_eq!(code, 1);
    assert!(stderr.contains("shard 1/3 is missing"), "{stderr}");
    // Duplicated: shard 2 twice (a copy).
    let copy = dir.join("copy-of-2.pj");
    std::fs::copy(p[2], &copy).unwrap();
    let (code, _, stderr) = merge(&dir, &[p[0], p[1], p[2], &copy]);
    assert_eq!(code, 1);
    assert!(stderr.contains("given more than once"), "{stderr}");
    // Foreign: a shard of another configuration in place of shard 1.
    let other = std::fs::read(root().join("golden/runs/demo-clean-delete.pj")).unwrap();
    let other_dir = dir.join("other");
    std::fs::create_dir_all(&other_dir).unwrap();
    let foreign = split_into(&other_dir, "other", &other, 3);
    let (code, _, stderr) = merge(&dir, &[p[0], &foreign[1], p[2]]);
    assert_eq!(code, 1);
    assert!(stderr.contains("is foreign"), "{stderr}");
    assert!(stderr.contains("config hash"), "{stderr}");
    // Tampered: a flipped byte in shard 1's last block.
    let mut bytes = std::fs::read(p[1]).unwrap();
    let at = bytes.len() - 200;
    bytes[at] ^= 1;
    let tampered = dir.join("tampered-1.pj");
    std::fs::write(&tampered, &bytes).unwrap();
    let (code, _, stderr) = merge(&dir, &[p[0], &tampered, p[2]]);
    assert_eq!(code, 1);
    assert!(
        stderr.contains("tampered-1.pj: verdict tampered"),
        "{stderr}"
    );

    // After merge: a shard file damaged, or replaced by another intact journal of the same share,
    // is refused by verify.
    std::fs::copy(&tampered, p[1]).unwrap();
    let (code, _, stderr) = percentes(&["verify", manifest.to_str().unwrap()]);
    assert_eq!(code, 1);
    assert!(stderr.contains("verdict tampered"), "{stderr}");
    std::fs::write(p[1], resealed_with_another_chain(&golden)).unwrap();
    let (code, _, stderr) = percentes(&["verify", manifest.to_str().unwrap()]);
    assert_eq!(code, 1);
    assert!(
        stderr.contains("replaced or changed after merge"),
        "{stderr}"
    );
    // The shard as merged (the split is deterministic) verifies again; an edited manifest does not.
    std::fs::write(p[1], synthetic::split(&golden, 3).remove(1)).unwrap();
    let (code, stdout, _) = percentes(&["verify", manifest.to_str().unwrap()]);
    assert_eq!(code, 0, "{stdout}");
    // Two shard files swapped on disk: each intact, each with the head bound for the other.
    let swap = dir.join("swap.pj");
    std::fs::rename(p[0], &swap).unwrap();
    std::fs::rename(p[1], p[0]).unwrap();
    std::fs::rename(&swap, p[1]).unwrap();
    let (code, _, stderr) = percentes(&["verify", manifest.to_str().unwrap()]);
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains("shard 1: the manifest names run-shard-1.pj for it, and that file holds shard 0: the files were swapped or renamed after merge"),
        "{stderr}"
    );
    std::fs::rename(p[0], &swap).unwrap();
    std::fs::rename(p[1], p[0]).unwrap();
    std::fs::rename(&swap, p[1]).unwrap();
    let (code, stdout, _) = percentes(&["verify", manifest.to_str().unwrap()]);
    assert_eq!(code, 0, "{stdout}");
    std::fs::write(
        &manifest,
        text.replace("\"shard_count\": 3", "\"shard_count\": 2"),
    )
    .unwrap();
    let (code, _, stderr) = percentes(&["verify", manifest.to_str().unwrap()]);
    assert_eq!(code, 1);
    assert!(stderr.contains("edited after merge"), "{stderr}");
    std::fs::remove_dir_all(dir).unwrap();
}

/// Shard 1 of `golden` with its first request record's detail changed: intact, same share, another
/// chain.
fn resealed_with_another_chain(golden: &[u8]) -> Vec<u8> {
    use percentes_formats::journal::records::Record;
    use percentes_formats::journal::{Header, JournalWriter};
    let shard = synthetic::split(golden, 3).remove(1);
    let report = percentes_formats::journal::verify::verify(&shard, &Default::default());
    let (header, end, _) = Header::decode(&shard).unwrap();
    let mut writer = JournalWriter::create(Vec::new(), &header, None).unwrap();
    let mut seal = None;
    let mut changed = false;
    for framed in
        percentes_formats::journal::verify::records(&shard, end, report.verified_bytes as usize)
    {
        match Record::decode(framed.kind, framed.body).unwrap() {
            Record::Seal(s) => seal = Some(s),
            Record::Request(mut r) if !changed => {
                r.detail.push_str(" (edited)");
                changed = true;
                writer.append(&Record::Request(r)).unwrap();
            }
            Record::Checkpoint(_) => {}
            other => writer.append(&other).unwrap(),
        }
    }
    let seal = seal.unwrap();
    let status =
        percentes_formats::journal::records::SealStatus::from_byte(seal.body.status).unwrap();
    writer
        .seal(seal.body.at_ns, status, &seal.body.reason)
        .unwrap()
        .0
}

#[test]
fn a_signed_manifest_verifies_only_by_its_key() {
    let _beside = crate::beside();
    let dir = scratch("signed");
    let golden = std::fs::read(root().join("golden/runs/demo-clean-delete.pj")).unwrap();
    let paths = split_into(&dir, "run", &golden, 2);
    let (code, _, stderr) = percentes(&["keygen", "--out", dir.join("op").to_str().unwrap()]);
    assert_eq!(code, 0, "{stderr}");
    let (code, _, stderr) = percentes(&["keygen", "--out", dir.join("other").to_str().unwrap()]);
    assert_eq!(code, 0, "{stderr}");
    let manifest = dir.join("m.json");
    let mut args = vec![
        "merge".to_owned(),
        "-o".into(),
        manifest.display().to_string(),
        "--sign-key".into(),
        dir.join("op.key").display().to_string(),
    ];
    args.extend(paths.iter().map(|p| p.display().to_string()));
    let (code, stdout, stderr) = percentes(&args.iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(stdout.contains("(signed)"), "{stdout}");
    let verify = |key: &str| {
        percentes(&[
            "verify",
            manifest.to_str().unwrap(),
            "--pubkey",
            dir.join(key).to_str().unwrap(),
        ])
    };
    let (code, stdout, _) = verify("op.pub");
    assert_eq!(code, 0, "{stdout}");
    assert!(stdout.contains("signed by the trusted key"), "{stdout}");
    let (code, _, stderr) = verify("other.pub");
    assert_eq!(code, 1);
    assert!(stderr.contains("not by the trusted key"), "{stderr}");
    // merge refuses to replace a manifest without --force.
    let (code, _, stderr) = percentes(&args.iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(code, 1);
    assert!(stderr.contains("--force"), "{stderr}");
    // --expect-head is the binding for a manifest.
    let text = std::fs::read_to_string(&manifest).unwrap();
    let binding = serde_json::from_str::<serde_json::Value>(&text).unwrap()["binding"]
        .as_str()
        .unwrap()
        .to_owned();
    let (code, _, _) = percentes(&[
        "verify",
        manifest.to_str().unwrap(),
        "--expect-head",
        &binding,
    ]);
    assert_eq!(code, 0);
    let (code, stdout, _) = percentes(&[
        "verify",
        manifest.to_str().unwrap(),
        "--expect-head",
        &"0".repeat(64),
    ]);
    assert_eq!(code, 1);
    // One verdict, the journal's for a head the chain never passes through; never
    // "sealed-intact" first and a mismatch after, nor a sixth verdict in JSON.
    assert!(
        stdout.contains("verdict: tampered") && !stdout.contains("sealed-intact:"),
        "{stdout}"
    );
    let (code, stdout, _) = percentes(&[
        "verify",
        "--json",
        manifest.to_str().unwrap(),
        "--expect-head",
        &"0".repeat(64),
    ]);
    assert_eq!(code, 1);
    let json: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(json["verdict"], "tampered", "{stdout}");
    // A refused manifest still answers --json on standard output, with every reason.
    let edited = text.replace(&binding, &"1".repeat(64));
    std::fs::write(&manifest, edited).unwrap();
    let (code, stdout, _) = percentes(&["verify", "--json", manifest.to_str().unwrap()]);
    assert_eq!(code, 1);
    let json: serde_json::Value = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("verify --json wrote no JSON ({e}): {stdout:?}"));
    assert_eq!(json["verdict"], "tampered", "{stdout}");
    assert!(
        json["refused"][0]
            .as_str()
            .unwrap()
            .contains("edited after merge"),
        "{stdout}"
    );
    std::fs::remove_dir_all(dir).unwrap();
}

/// A report's JSON without what depends on how a recorder's host CPU samples are grouped: a
/// merged run reads each shard's host as a series of its own (each host is gated), one journal
/// holding every shard's samples reads them as one series. Everything else must agree.
#[cfg(target_os = "linux")]
fn numbers_but_host_cpu(report: &percentes_analyzer::model::Report) -> serde_json::Value {
    let mut value = numbers(report);
    value["audit"]["telemetry"]
        .as_object_mut()
        .unwrap()
        .remove("host_cpu_max_5s_percent");
    if let Some(threats) = value["audit"]["artifact"]["threats"].as_array_mut() {
        for threat in threats {
            threat.as_object_mut().unwrap().remove("shows");
        }
    }
    for gate in value["validity"]["gates"].as_array_mut().unwrap() {
        if gate["gate"].as_str().unwrap().contains("host CPU") {
            gate.as_object_mut().unwrap().remove("observed");
        }
    }
    value
}

#[cfg(target_os = "linux")]
#[test]
fn three_shard_recorders_on_one_schedule_merge_verify_and_analyze_as_one_recorder() {
    use percentes_scenarios::testbed::Testbed;
    use std::process::Command;
    // Beside the light work, not alone: three recorders and two replicas take under a tenth of
    // a core over the run (measured: 0.7 CPU-s in 7.4 s), and what is asserted reads no time
    // the client kept (below).
    let _beside = crate::beside();
    let binary = Path::new(env!("CARGO_BIN_EXE_percentes"));
    let dir = scratch("live");
    // Fast replicas (5 ms to first token, 0.1 ms a token): every request completes well inside
    // the dev profile's divided timeout.
    let mock = dir.join("mock.toml");
    std::fs::write(
        &mock,
        "[timing]\nttft = { kind = \"constant\", ms = 5.0 }\ntoken_gap = { kind = \"constant\", ms = 0.1 }\n",
    )
    .unwrap();
    let bed = Testbed::start(binary, 2, Some(&mock)).unwrap();
    let config = dir.join("run.toml");
    std::fs::write(
        &config,
        format!(
            "schema_version = 1\nprofile = \"dev\"\n[dev]\ntime_factor = 100\n[target]\nkind = \"mock\"\nbase_url = \"http://{}\"\nmodel = \"mock\"\nreplicas = [\"replica-0\", \"replica-1\"]\nstream = false\n\
             [schedule]\nseed = 3\narrival = \"poisson\"\nrate_rps = 30.0\n[fault]\nvariant = \"none\"\n[[routes]]\nlabel = \"chat\"\npath = \"/v1/chat/completions\"\n",
            bed.service()
        ),
    )
    .unwrap();
    // Recorded once and read as the diagnosis: what is asserted (the merge is the join, every
    // index recorded, both replicas served) holds whatever this busy machine did to the client's
    // own gate, which is the only gate allowed to fail.
    let (merged, joined, shard_reports, served) = {
        // One agreed epoch, 3 s ahead: every recorder starts, waits and counts from it.
        let start_at = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64()
            + 3.0;
        let children: Vec<_> = (0..3)
            .map(|k| {
                Command::new(binary)
                    .args([
                        "record",
                        config.to_str().unwrap(),
                        "--force",
                        "--quiet",
                        "-o",
                    ])
                    .arg(dir.join(format!("shard-{k}.pj")))
                    .args(["--shard", &format!("{k}/3")])
                    .args(["--start-at", &format!("{start_at:.3}")])
                    .stdout(std::process::Stdio::piped())
                    .stderr(std::process::Stdio::piped())
                    .spawn()
                    .unwrap()
            })
            .collect();
        for (k, child) in children.into_iter().enumerate() {
            let out = child.wait_with_output().unwrap();
            assert!(
                out.status.code().is_some_and(|c| c == 0 || c == 2),
                "shard {k}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        let paths: Vec<PathBuf> = (0..3).map(|k| dir.join(format!("shard-{k}.pj"))).collect();
        let manifest = dir.join("manifest.json");
        let (code, stdout, stderr) = merge(
            &dir,
            &paths.iter().map(PathBuf::as_path).collect::<Vec<_>>(),
        );
        assert_eq!(code, 0, "{stdout}{stderr}");
        let (code, stdout, stderr) = percentes(&["verify", manifest.to_str().unwrap()]);
        assert_eq!(code, 0, "{stdout}{stderr}");
        let (files, run) = shards::open(&manifest).unwrap();
        assert!(run.missing.is_empty(), "every index recorded");
        let merged = analysis::analyze(&run, &files, Spec::CURRENT, &diagnosing());
        let served = run.requests.replicas.values.clone();
        let bytes: Vec<Vec<u8>> = paths.iter().map(|p| std::fs::read(p).unwrap()).collect();
        let joined_path = dir.join("joined.pj");
        std::fs::write(
            &joined_path,
            synthetic::join(&bytes.iter().map(Vec::as_slice).collect::<Vec<_>>()),
        )
        .unwrap();
        let joined_file = JournalFile::open(&joined_path).unwrap();
        let joined_run = percentes_analyzer::load::load(&joined_file).unwrap();
        let joined = analysis::analyze(&joined_run, &joined_file, Spec::CURRENT, &diagnosing());
        let shard_reports: Vec<_> = paths
            .iter()
            .map(|p| {
                let file = JournalFile::open(p).unwrap();
                let run = percentes_analyzer::load::load(&file).unwrap();
                // Each shard's header: its share, the agreed epoch, its clock and start facts.
                assert_eq!(
                    run.header.clock.realtime_epoch_ns,
                    (start_at * 1000.0).round() as i64 * 1_000_000
                );
                for key in ["clock-sync", "boot-id", "shard-start-late-ns"] {
                    assert!(
                        run.header.host.iter().any(|(k, _)| k == key),
                        "{key} journaled"
                    );
                }
                analysis::analyze(&run, &file, Spec::CURRENT, &diagnosing())
            })
            .collect();
        (merged, joined, shard_reports, served)
    };
    assert!(
        only_client(&merged) && only_client(&joined),
        "{:?}",
        merged.validity.failed().collect::<Vec<_>>()
    );
    assert_eq!(
        numbers_but_host_cpu(&merged),
        numbers_but_host_cpu(&joined),
        "the merged run analyzes as one recorder's journal of the same records"
    );
    // Each shard's host is gated on its own: the merged run's host CPU is the worst shard's.
    let worst = shard_reports
        .iter()
        .filter_map(|r| r.audit.telemetry.host_cpu_max_5s_percent)
        .fold(f64::MIN, f64::max);
    assert_eq!(merged.audit.telemetry.host_cpu_max_5s_percent, Some(worst));
    // Through the router, to both replicas, from all three shards.
    assert!(
        served.contains(&"replica-0".to_owned()) && served.contains(&"replica-1".to_owned()),
        "{served:?}"
    );
    let measured = merged
        .windows
        .iter()
        .find(|w| w.window == "measurement")
        .unwrap();
    assert_eq!(
        measured.outcomes.completed, measured.scheduled,
        "every measured request completed"
    );
    drop(bed);
    std::fs::remove_dir_all(dir).unwrap();
}

/// A shard given alone is refused by every command that reads a run, with the merge to run;
/// with `--shard-alone` each output says "shard k of N" and is not publishable. Before, `analyze
/// s0.pj` reported "1065 of 1065 scheduled" of a 3,193-request schedule, "shard" nowhere.
/// Deliberate break: without the refusal in `shards::open_with` the first assertion fails.
#[test]
fn a_lone_shard_is_refused_unless_asked_for_and_then_says_so_everywhere() {
    let _beside = crate::beside();
    let dir = scratch("lone");
    let bytes = std::fs::read(root().join("golden/runs/demo-clean-delete.pj")).unwrap();
    let paths = split_into(&dir, "demo", &bytes, 3);
    let shard = paths[1].to_str().unwrap();
    let out = dir.join("out");
    let out_s = out.to_str().unwrap();
    let parquet = dir.join("s1.parquet");
    let parquet_s = parquet.to_str().unwrap();
    let commands: [Vec<&str>; 4] = [
        vec!["analyze", shard, "-o", out_s],
        vec!["campaign", shard, "-o", out_s],
        vec!["export", shard, "--parquet", parquet_s, "--force"],
        vec!["query", shard, "SELECT count(*) AS n FROM requests"],
    ];
    for args in &commands {
        let (code, _, stderr) = percentes(args);
        assert!(
            code == 1
                && stderr.contains("is shard 1 of 3")
                && stderr.contains("percentes merge")
                && stderr.contains("--shard-alone"),
            "{args:?}: exit {code}: {stderr}"
        );
    }
    let says = "shard 1 of 3 read alone";
    for args in &commands {
        let mut args = args.clone();
        args.push("--shard-alone");
        let (code, stdout, stderr) = percentes(&args);
        assert!(code == 0 || code == 2, "{args:?}: exit {code}: {stderr}");
        match args[0] {
            "analyze" => {
                assert!(stdout.contains(says), "{stdout}");
                for file in ["report.md", "report.json"] {
                    let text = std::fs::read_to_string(out.join(file)).unwrap();
                    assert!(text.contains(says), "{file}");
                }
            }
            "campaign" => {
                let text = std::fs::read_to_string(out.join("campaign.md")).unwrap();
                assert!(text.contains(says), "campaign.md");
            }
            "export" => {
                let bytes = std::fs::read(&parquet).unwrap();
                assert!(
                    bytes.windows(says.len()).any(|w| w == says.as_bytes()),
                    "the Parquet file's metadata does not say it"
                );
            }
            _ => assert!(stdout.contains(says), "{stdout}"),
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
