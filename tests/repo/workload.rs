//! The workload models (issue 37 item 3, SPEC §1 "Workload models") against the mock: a closed
//! run's audit says closed, a semi-open run's says semi-open, a replay sends at its trace's
//! times, and the analyzer refuses a follow-up whose time or place the model does not give.
//!
//! What these tests read is what the schedule and the server did (the audit's words, the
//! journal's records, counts and segments), never the client's lateness: their recordings share
//! the machine with the light work beside them, and one the busy machine spoiled on the
//! client's own gates is read as its diagnosis. Abandonment, whose instants a stall would turn
//! into the client's lateness, is read from the simulator's journal.

use percentes_formats::journal::records::{ExtensionKey, Record};
use percentes_formats::journal::synthetic;

use super::golden::percentes;

fn scratch(name: &str) -> percentes_testkit::Scratch {
    percentes_testkit::Scratch::new(&format!("workload-{name}"))
}

/// The mock every recording here is sent to: first token at 20 ms, 0.1 ms apart, 64 tokens; its
/// address.
fn mock() -> String {
    let mock = percentes_scenarios::config::MockConfig::constant(20.0, 0.1, 64);
    percentes_scenarios::mock::spawn_background(mock, 1)
        .unwrap()
        .0
        .to_string()
}

/// report.json's measurement window, and whether a request (by index) was intended in it.
fn measurement(
    json: &serde_json::Value,
    journal: &std::path::Path,
) -> (serde_json::Value, impl Fn(u64) -> bool) {
    let window = json["windows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["window"] == "measurement")
        .unwrap()
        .clone();
    let intended: std::collections::HashMap<u64, u64> = records(journal, "request")
        .iter()
        .map(|r| {
            (
                r["index"].as_u64().unwrap(),
                r["intended_ns"].as_u64().unwrap(),
            )
        })
        .collect();
    let (from, to) = (
        window["start_s"].as_f64().unwrap() * 1e9,
        window["end_s"].as_f64().unwrap() * 1e9,
    );
    let measured = move |index: u64| {
        let at = intended[&index] as f64;
        at >= from && at < to
    };
    (window, measured)
}

/// Records a quick run against `addr` with `flags` and returns its report.json, analyzed with
/// `--diagnose`: what these tests read (the audit's workload, the journal's records, the
/// windows' counts and segments) is what the server and the schedule did, never the client's
/// lateness, so a run the busy machine spoiled on the client's own gates (G2, and only those)
/// is read as it is, marked a diagnosis, rather than recorded again. Any other failure fails
/// the test.
fn record(addr: &str, dir: &std::path::Path, name: &str, flags: &[&str]) -> serde_json::Value {
    let journal = dir.join(format!("{name}.pj"));
    let report = dir.join(name);
    let url = format!("http://{addr}");
    let mut args = vec![
        "record",
        "--url",
        &url,
        "--model",
        "mock",
        "--stream",
        "--duration",
        "3s",
        "--warmup",
        "500ms",
        "--quiet",
        "--force",
        "-o",
        journal.to_str().unwrap(),
    ];
    args.extend_from_slice(flags);
    let (code, stdout, stderr) = percentes(&args);
    assert!(
        code == 0 || code == 2,
        "{name}: exit {code}: {stdout}{stderr}"
    );
    let (code, stdout, stderr) = percentes(&[
        "analyze",
        journal.to_str().unwrap(),
        "--diagnose",
        "-o",
        report.to_str().unwrap(),
    ]);
    let json: serde_json::Value = serde_json::from_slice(
        &std::fs::read(report.join("report.json"))
            .unwrap_or_else(|e| panic!("{name}: no report ({e}): {stdout}{stderr}")),
    )
    .unwrap();
    let failed: Vec<String> = json["validity"]["gates"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|g| g["status"] == "fail")
        .map(|g| g["gate"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        code,
        if failed.is_empty() { 0 } else { 2 },
        "{name}: {stdout}{stderr}"
    );
    assert!(
        failed.iter().all(|g| g.starts_with("G2")),
        "{name}: {failed:?}: {stdout}{stderr}"
    );
    if !failed.is_empty() {
        eprintln!("{name}: read as a diagnosis; this busy machine failed the client's own gates {failed:?}");
    }
    json
}

/// The three models, one recording each. Deliberate breaks: the pacer sending a closed user's
/// follow-up without waiting for its response (or its think time) fails the analyzer's chain
/// check; an audit that still said "open loop" fails the workload assertions; a replay that
/// drew Poisson times instead of the trace's fails the times' equality.
#[cfg(target_os = "linux")]
#[test]
fn each_workload_model_is_chosen_journaled_and_audited() {
    let _beside = crate::beside();
    let addr = mock();
    let dir = scratch("models");

    let closed = record(
        &addr,
        &dir,
        "closed",
        &["--concurrency", "3", "--think-time", "50ms"],
    );
    let workload = closed["audit"]["workload_model"].as_str().unwrap();
    assert!(workload.starts_with("closed loop: 3 users"), "{workload}");
    assert!(
        workload.contains("not latency at a fixed arrival rate"),
        "{workload}"
    );
    assert!(workload.contains("N / (R + Z)"), "{workload}");
    // The summary says it first (issue 54 item 6), in summary.json and in the terminal's text.
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("closed").join("summary.json")).unwrap())
            .unwrap();
    let said = summary["workload"].as_str().unwrap_or_default();
    assert!(
        said.starts_with(
            "workload: closed loop, 3 users: the requests per second below are an outcome"
        ),
        "{summary}"
    );
    let (_, text, _) = percentes(&[
        "analyze",
        dir.join("closed.pj").to_str().unwrap(),
        "--diagnose",
        "-o",
        dir.join("closed-again").to_str().unwrap(),
    ]);
    assert!(text.contains(said), "{text}");

    let semi = record(
        &addr,
        &dir,
        "semi",
        &[
            "--turns",
            "3",
            "--rate",
            "3",
            "--think-time",
            "20ms",
            "--think",
            "exponential",
        ],
    );
    let workload = semi["audit"]["workload_model"].as_str().unwrap();
    assert!(
        workload.starts_with("semi-open: sessions arrive open loop"),
        "{workload}"
    );
    assert!(
        workload.contains("closed sequence of 3 requests"),
        "{workload}"
    );
    // Sessions of three: follow-ups there are, each turn 1 or 2 of a session.
    let extensions = records(&dir.join("semi.pj"), "request-extension");
    let turns: Vec<u64> = extensions
        .iter()
        .filter_map(|x| x["fields"]["turn"].as_u64())
        .collect();
    assert!(
        !turns.is_empty() && turns.iter().all(|t| (1..=2).contains(t)),
        "{turns:?}"
    );
    // The independent verifier, from JOURNAL.md alone (the exponential think time's binary64
    // order included), gives every follow-up of both runs the time the recorder sent it at.
    if super::independent::python().is_some() {
        for name in ["closed", "semi"] {
            let judged = super::independent::follow_ups(&dir.join(format!("{name}.pj")));
            assert!(!judged.is_empty(), "{name}: no follow-ups");
            assert!(judged.iter().all(|(_, v)| v == "ok"), "{name}: {judged:?}");
        }
    }

    // A trace whose gaps no arrival law would draw, with its own prompts.
    let trace = dir.join("trace.jsonl");
    let times_ms: Vec<f64> = (0..30)
        .map(|i| f64::from(i) * 90.0 + f64::from(i % 4) * 7.5)
        .collect();
    let lines: String = times_ms
        .iter()
        .enumerate()
        .map(|(i, t)| format!("{{\"timestamp\": {t}, \"prompt\": \"line {i} of the trace\"}}\n"))
        .collect();
    std::fs::write(&trace, lines).unwrap();
    let replay = record(&addr, &dir, "replay", &["--trace", trace.to_str().unwrap()]);
    let workload = replay["audit"]["workload_model"].as_str().unwrap();
    assert!(
        workload.starts_with("replay: open loop at a trace's times (30 requests"),
        "{workload}"
    );
    let sent = records(&dir.join("replay.pj"), "request");
    assert_eq!(sent.len(), 30);
    // Sent at the trace's times: none before its time, in the trace's order, and any sent later
    // than G2.1's max is the client's own failure, which its gate reports (on this shared
    // machine that happens; the pacer keeping a schedule's times is asserted on the simulator,
    // recorder/src/run/sim/tests.rs, where no host noise can excuse a miss).
    let skew_max_ns = 50_000_000; // gates.send_skew_max_ms (G2.1's max), pins.rs
    let mut sent: Vec<(u64, u64)> = sent
        .iter()
        .map(|r| {
            let i = r["index"].as_u64().unwrap();
            let intended = r["intended_ns"].as_u64().unwrap();
            assert_eq!(intended, (times_ms[i as usize] * 1e6) as u64, "request {i}");
            let dispatched = r["dispatched_ns"].as_u64().unwrap();
            assert!(dispatched >= intended, "{r}");
            (i, dispatched)
        })
        .collect();
    sent.sort_unstable();
    assert!(sent.windows(2).all(|w| w[0].1 <= w[1].1), "{sent:?}");
    let late = sent
        .iter()
        .any(|&(i, at)| at - (times_ms[i as usize] * 1e6) as u64 > skew_max_ns);
    let gates = replay["validity"]["gates"].as_array().unwrap();
    let g21_failed = gates
        .iter()
        .any(|g| g["gate"].as_str().unwrap().starts_with("G2.1") && g["status"] == "fail");
    assert!(!late || g21_failed, "{gates:?}");
}

fn records(journal: &std::path::Path, kind: &str) -> Vec<serde_json::Value> {
    let (code, stdout, stderr) = percentes(&[
        "inspect",
        journal.to_str().unwrap(),
        "--records",
        "--kind",
        kind,
    ]);
    assert_eq!(code, 0, "{stderr}");
    stdout
        .lines()
        .filter(|l| l.contains("\"record\""))
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// A closed journal from the recorder, edited three ways, each rewritten with a good chain so
/// only the edit is wrong: a follow-up 1 ms early, a follow-up with no session, and a session's
/// last request dropped (its user stopped early without a stop). The analyzer refuses each,
/// naming the request. Deliberate break: skipping `Turns::check` lets all three through.
#[cfg(target_os = "linux")]
#[test]
fn a_follow_up_the_model_does_not_give_is_refused() {
    let _beside = crate::beside();
    let mock = percentes_scenarios::config::MockConfig::constant(20.0, 0.1, 32);
    let addr = percentes_scenarios::mock::spawn_background(mock, 1)
        .unwrap()
        .0
        .to_string();
    let dir = scratch("tamper");
    let url = format!("http://{addr}");
    let journal = dir.join("closed.pj");
    let (code, stdout, stderr) = percentes(&[
        "record",
        "--url",
        &url,
        "--model",
        "mock",
        "--concurrency",
        "2",
        "--duration",
        "2s",
        "--warmup",
        "200ms",
        "--quiet",
        "-o",
        journal.to_str().unwrap(),
    ]);
    assert!(code == 0 || code == 2, "exit {code}: {stdout}{stderr}");
    let bytes = std::fs::read(&journal).unwrap();
    let follow_up = |r: &Record| match r {
        Record::RequestExtension(x) => x.get(ExtensionKey::Turn).map(|_| x.index),
        _ => None,
    };
    let first = bytes_records(&journal)
        .iter()
        .find_map(follow_up)
        .expect("a follow-up");
    use percentes_analyzer::load::FollowUpMismatch as M;
    use percentes_analyzer::load::ScheduleMismatch;
    type Kind = fn(&M) -> bool;
    let cases: Vec<(&str, Vec<u8>, &str, Kind)> = vec![
        (
            "early",
            synthetic::with_records(&bytes, |records| {
                for r in records.iter_mut() {
                    if let Record::Request(q) = r {
                        if q.index == first {
                            q.intended_ns -= 1_000_000;
                        }
                    }
                }
            }),
            "model says",
            |m| {
                matches!(
                    m,
                    M::NotTheModels {
                        expected: Some(_),
                        ..
                    }
                )
            },
        ),
        (
            "no-session",
            synthetic::with_records(&bytes, |records| {
                records.retain(|r| follow_up(r) != Some(first));
            }),
            "has no session and turn",
            |m| matches!(m, M::Unplaced { .. }),
        ),
        (
            "cut-short",
            synthetic::with_records(&bytes, |records| {
                let last = records
                    .iter()
                    .filter_map(|r| match r {
                        Record::Request(q) => Some(q.index),
                        _ => None,
                    })
                    .max()
                    .unwrap();
                records.retain(|r| match r {
                    Record::Request(q) => q.index != last,
                    Record::RequestExtension(x) => x.index != last,
                    Record::Stream(x) => x.index != last,
                    _ => true,
                });
            }),
            "never sent or never recorded",
            |m| matches!(m, M::EndedEarly { .. }),
        ),
    ];
    for (name, edited, says, kind) in cases {
        let path = dir.join(format!("{name}.pj"));
        std::fs::write(&path, edited).unwrap();
        let file = percentes_analyzer::JournalFile::open(&path).unwrap();
        match percentes_analyzer::load::load(&file) {
            Err(percentes_analyzer::load::LoadError::Schedule(ScheduleMismatch::FollowUp(m))) => {
                assert!(kind(&m), "{name}: {m:?}")
            }
            other => panic!(
                "{name}: not refused by the schedule check: {:?}",
                other.err()
            ),
        }
        let (code, stdout, stderr) = percentes(&[
            "analyze",
            path.to_str().unwrap(),
            "-o",
            dir.join(name).to_str().unwrap(),
        ]);
        assert_ne!(code, 0, "{name}: analyzed: {stdout}");
        assert!(stderr.contains(says), "{name}: {stderr}");
        if name == "early" && super::independent::python().is_some() {
            let judged = super::independent::follow_ups(&path);
            let moved = judged.iter().find(|(i, _)| *i == first);
            assert!(
                moved.is_some_and(|(_, v)| v.starts_with("intended")),
                "{judged:?}"
            );
        }
    }
}

fn bytes_records(journal: &std::path::Path) -> Vec<Record> {
    let file = percentes_analyzer::JournalFile::open(journal).unwrap();
    let report = file.verify(&Default::default());
    file.records(&report).filter_map(|(_, r)| r.ok()).collect()
}

/// SplitMix64's finalizer, written out here from JOURNAL.md "Schedule" rule 1 (not imported
/// from the schedule code), for the auditor's recomputation below.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A shared-prefix pool against the mock (issue 55 item 2, SPEC §1 "Shared prefixes"): the
/// header carries it, an auditor recomputes every request's entry from JOURNAL.md rule 6 alone
/// and, in dispatch order, which ones a cache could have held; report.json's designed reuse and
/// `--by prefix`'s segments agree with that count. Deliberate breaks: a draw by index instead of
/// session, or the first use counted as a hit, changes the recomputed counts; a report that
/// lost the pool has no `prefix_reuse`.
#[cfg(target_os = "linux")]
#[test]
fn a_shared_prefix_pool_is_journaled_recomputable_and_segmented() {
    let _beside = crate::beside();
    let addr = mock();
    let dir = scratch("prefixes");
    let json = record(
        &addr,
        &dir,
        "pool",
        &["--rate", "12", "--shared-prefixes", "3x40:0.75"],
    );
    let journal = dir.join("pool.pj");
    // The auditor's recomputation: seed 1 (the quick run's default), 3 entries of 40 words,
    // 750,000 ppm.
    let entry = |session: u64| {
        let d = mix(1 ^ mix(session ^ 0x7072_6566_6978_0000));
        (d % 1_000_000 < 750_000).then(|| mix(d) % 3)
    };
    let mut sent: Vec<(u64, u64, Option<u64>, Option<u32>)> = bytes_records(&journal)
        .into_iter()
        .filter_map(|r| match r {
            Record::Request(q) => Some((
                q.dispatched_ns?,
                q.index,
                entry(q.index),
                q.usage_prompt_tokens,
            )),
            _ => None,
        })
        .collect();
    sent.sort();
    let mut seen = std::collections::HashSet::new();
    let (mut first_use, mut seen_before, mut none) = (0u64, 0u64, 0u64);
    let (mut designed, mut prompts) = (0u64, 0u64);
    let (measurement, measured) = measurement(&json, &journal);
    for (_, index, e, usage) in &sent {
        let hit = e.is_some_and(|e| !seen.insert(e));
        if !measured(*index) {
            continue;
        }
        match (e, hit) {
            (None, _) => none += 1,
            (Some(_), false) => first_use += 1,
            (Some(_), true) => seen_before += 1,
        }
        if let Some(tokens) = usage {
            prompts += u64::from(*tokens);
            designed += if hit { 40 } else { 0 };
        }
    }
    let reuse = &measurement["prefix_reuse"];
    assert_eq!(
        (
            reuse["first_use"].as_u64(),
            reuse["seen_before"].as_u64(),
            reuse["requests"].as_u64()
        ),
        (
            Some(first_use),
            Some(seen_before),
            Some(first_use + seen_before + none)
        ),
        "{reuse}"
    );
    assert!(
        none > 0 && seen_before > 0,
        "{none} without, {seen_before} seen before"
    );
    assert_eq!(reuse["designed_tokens"].as_u64(), Some(designed), "{reuse}");
    assert_eq!(reuse["prompt_tokens"].as_u64(), Some(prompts), "{reuse}");
    // `analyze --by prefix` (a diagnosis where the client's gates failed, as above): the three
    // expectations, counted as above.
    let out = dir.join("by-prefix");
    let (code, stdout, stderr) = percentes(&[
        "analyze",
        journal.to_str().unwrap(),
        "--by",
        "prefix",
        "--diagnose",
        "-o",
        out.to_str().unwrap(),
    ]);
    assert!(code == 0 || code == 2, "{stdout}{stderr}");
    let by: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("report.json")).unwrap()).unwrap();
    let segment = |name: &str| {
        by["segments"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["window"] == "measurement" && s["key"][0][1] == name)
            .map(|s| s["scheduled"].as_u64().unwrap())
    };
    assert_eq!(segment("shared, seen before"), Some(seen_before), "{by}");
    assert_eq!(segment("no shared prefix"), Some(none));
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(md.contains("## Shared prefixes (§1)"), "{md}");
    // The header carries the pool; inspect shows the extension.
    let (_, header, _) = percentes(&["inspect", journal.to_str().unwrap()]);
    assert!(
        header.contains(
            "shared prefixes: 3 entries of 40 filler units, drawn by 75.00 % of the sessions"
        ),
        "{header}"
    );
}

/// Abandonment (issue 55 item 3, SPEC §1 "Abandonment"): 40 % of the requests marked for
/// closing 60 ms after their intended time, answers of about 175 ms (first token at 20 ms, 32
/// tokens 5 ms apart). An auditor recomputes which requests were marked and when from JOURNAL.md
/// rule 7 alone; every marked request is `abandoned` at exactly its instant with the output read
/// until then, every other completes; under v0.5 the summary and report.json count them apart
/// from the censored, under v0.4 among them. Deliberate breaks: closing at the deadline instead,
/// a draw by session, or counting them censored under v0.5 fail here.
///
/// The journal is the simulator's (recorder/src/run/sim.rs: the production worker loop on
/// virtual time, the recorder's own journal), with the table `--abandon 0.4:60ms` writes
/// (formats' quick-run tests check that flag): a close at its instant is exact there, while on
/// this shared machine a stall past an instant makes that request the client's lateness, not an
/// abandonment, and a recording had to be made again (issue 51).
#[cfg(target_os = "linux")]
#[test]
fn abandoned_requests_are_closed_at_their_instant_and_counted_apart() {
    use percentes_recorder::run::sim::{World, MS};
    let _beside = crate::beside();
    let dir = scratch("abandon");
    let mut world = World {
        dev: "warmup_s = 1\nmeasure_s = 3\ncooldown_s = 0",
        tables_toml: "[workload.abandon]\nshare = 0.4\nafter_ms = 60\n",
        ..World::new(10.0, std::time::Duration::ZERO)
    }
    .configured();
    world.target.ttft_ns = 20 * MS;
    world.target.tpot_ns = 5 * MS;
    world.target.tokens = 32;
    let journal = dir.join("abandon.pj");
    std::fs::write(&journal, world.run().journal()).unwrap();
    let report = dir.join("abandon");
    let (code, stdout, stderr) = percentes(&[
        "analyze",
        journal.to_str().unwrap(),
        "-o",
        report.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(report.join("report.json")).unwrap()).unwrap();
    let marked = |index: u64| {
        let d = mix(1 ^ mix(index ^ 0x6162_616e_646f_6e00));
        d % 1_000_000 < 400_000
    };
    let (mut abandoned, mut completed) = (0u64, 0u64);
    for r in bytes_records(&journal) {
        let Record::Request(q) = r else { continue };
        if marked(q.index) {
            abandoned += 1;
            assert_eq!(q.class, 22, "request {}: {q:?}", q.index);
            assert_eq!(q.terminal_ns, q.intended_ns + 60_000_000, "{q:?}");
            assert!(q.content_events > 0, "it streamed until closed: {q:?}");
        } else {
            completed += 1;
            assert_eq!(q.class, 0, "request {}: {q:?}", q.index);
        }
    }
    assert!(abandoned > 5 && completed > 5, "{abandoned} {completed}");
    let windows = json["windows"].as_array().unwrap();
    let (mut counted, mut marked_in) = (0, 0);
    for w in windows {
        assert_eq!(w["outcomes"]["censored"], 0, "{w}");
        counted += w["outcomes"]["abandoned"].as_u64().unwrap_or(0);
        marked_in += w["abandonment"]["marked"].as_u64().unwrap_or(0);
    }
    assert_eq!((counted, marked_in), (abandoned, abandoned));
    let summary = std::fs::read_to_string(dir.join("abandon").join("report.md")).unwrap();
    assert!(summary.contains("## Abandonment (§1)"), "{summary}");
    let (_, header, _) = percentes(&["inspect", journal.to_str().unwrap()]);
    assert!(
        header.contains("abandonment: 40.00 % of the requests marked, each closed 0.060 s after"),
        "{header}"
    );
    let out = dir.join("v0.4");
    let (_, text, _) = percentes(&[
        "analyze",
        journal.to_str().unwrap(),
        "--spec",
        "v0.4",
        "-o",
        out.to_str().unwrap(),
    ]);
    assert!(!text.contains("abandoned by design"), "{text}");
    let old: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("report.json")).unwrap()).unwrap();
    let censored: u64 = old["windows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["outcomes"]["censored"].as_u64().unwrap())
        .sum();
    assert_eq!(
        censored, abandoned,
        "v0.4 reads them as their outcome byte says"
    );
}

/// A conversation history against the mock (issue 55 item 2, SPEC §1 "Conversation
/// histories"): semi-open sessions of 3 turns, every session opening with the pool's one
/// 10-word entry. The mock counts a prompt's words as its tokens, so each turn's count is its
/// session's first turn's plus one own prompt per earlier turn: the history was resent, in full,
/// every time. An auditor recomputes the design from the records alone (one replica: turn k
/// could find its session's longest counted earlier prompt; a turn 0 the entry's 10 once any
/// session sent it) and report.json's designed reuse agrees. Deliberate breaks: a history that
/// drops the oldest turn, or a design that forgot the history (only the entry's 10 words), fail
/// here.
#[cfg(target_os = "linux")]
#[test]
fn a_conversation_history_is_resent_journaled_and_designed() {
    let _beside = crate::beside();
    let addr = mock();
    let dir = scratch("history");
    let json = record(
        &addr,
        &dir,
        "history",
        &[
            "--rate",
            "4",
            "--turns",
            "3",
            "--history",
            "--shared-prefixes",
            "1x10",
        ],
    );
    let journal = dir.join("history.pj");
    // Each request's session and turn (a session's first request is its own, turn 0).
    let mut place = std::collections::HashMap::new();
    for r in bytes_records(&journal) {
        if let Record::RequestExtension(x) = r {
            if let (Some(s), Some(t)) = (x.get(ExtensionKey::Session), x.get(ExtensionKey::Turn)) {
                place.insert(x.index, (s, t));
            }
        }
    }
    // (dispatched, index, (session, turn), prompt tokens counted)
    type Sent = (u64, u64, (u64, u64), Option<u32>);
    let mut sent: Vec<Sent> = bytes_records(&journal)
        .into_iter()
        .filter_map(|r| match r {
            Record::Request(q) => Some((
                q.dispatched_ns?,
                q.index,
                place.get(&q.index).copied().unwrap_or((q.index, 0)),
                q.usage_prompt_tokens,
            )),
            _ => None,
        })
        .collect();
    sent.sort();
    // The resent history: turn k's count is turn 0's plus k own prompts.
    let by_place: std::collections::HashMap<(u64, u64), u32> = sent
        .iter()
        .filter_map(|(_, _, p, usage)| Some((*p, (*usage)?)))
        .collect();
    let own: std::collections::BTreeSet<u32> = by_place
        .iter()
        .filter(|((_, turn), _)| *turn > 0)
        .filter_map(|((session, turn), usage)| {
            let first = by_place.get(&(*session, 0))?;
            Some((usage - first) / *turn as u32)
        })
        .collect();
    assert_eq!(own.len(), 1, "one own prompt's length per turn: {own:?}");
    let own = *own.iter().next().unwrap();
    for ((session, turn), usage) in &by_place {
        if let Some(first) = by_place.get(&(*session, 0)) {
            assert_eq!(*usage, first + own * *turn as u32, "{session}-{turn}");
        }
    }
    assert!(by_place.keys().any(|(_, turn)| *turn == 2), "{by_place:?}");
    // The auditor's design over the measurement window's requests.
    let (measurement, measured) = measurement(&json, &journal);
    let (mut entry_sent, mut longest) = (false, std::collections::HashMap::new());
    let (mut seen_before, mut designed, mut prompts) = (0u64, 0u64, 0u64);
    for (_, index, (session, turn), usage) in &sent {
        let mut reuse = entry_sent.then_some(10u32);
        if *turn > 0 {
            if let Some(&l) = longest.get(session) {
                reuse = Some(reuse.unwrap_or(0).max(l));
            }
        }
        entry_sent = true;
        let l = longest.entry(*session).or_insert(0u32);
        *l = (*l).max(usage.unwrap_or(0));
        if !measured(*index) {
            continue;
        }
        seen_before += u64::from(reuse.is_some());
        if let Some(tokens) = usage {
            prompts += u64::from(*tokens);
            designed += u64::from(reuse.unwrap_or(0));
        }
    }
    let reuse = &measurement["prefix_reuse"];
    assert_eq!(reuse["history"], true, "{reuse}");
    assert_eq!(reuse["seen_before"].as_u64(), Some(seen_before), "{reuse}");
    assert_eq!(reuse["designed_tokens"].as_u64(), Some(designed), "{reuse}");
    assert_eq!(reuse["prompt_tokens"].as_u64(), Some(prompts), "{reuse}");
    assert!(designed > 10 * seen_before, "the history counts: {reuse}");
    let md = std::fs::read_to_string(dir.join("history").join("report.md")).unwrap();
    assert!(
        md.contains("## Shared prefixes and conversation histories (§1)"),
        "{md}"
    );
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("history").join("summary.json")).unwrap())
            .unwrap();
    assert!(
        summary["workload"]
            .as_str()
            .is_some_and(|w| w.contains("resending the session's earlier turns")),
        "{summary}"
    );
    let (_, header, _) = percentes(&["inspect", journal.to_str().unwrap()]);
    assert!(
        header.contains("conversation history: each turn resends its session's earlier user turns"),
        "{header}"
    );
}
