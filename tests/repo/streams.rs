//! Streams as today's models send them (issue 49; SPEC §3 "What a stream's figures are about",
//! amendment A4), recorded against the mock, whose timing and token kinds are known: a reasoning
//! phase before the answer, a tool call whose arguments arrive in pieces, the Responses API.
//! Each run is read under v0.5 and under v0.4, so the test shows both what A4 reads and what the
//! earlier reading published. A run this busy machine failed on the client gate alone is
//! recorded again (after `await_calm`); the expectations themselves are never widened.
//!
//! The mock's truth: TTFT 20 ms to the first token of any kind; 20 reasoning tokens 20 ms apart,
//! then 10 answer tokens 10 ms apart; so the first answer token at 20 + 19 x 20 + 10 = 410 ms,
//! the reasoning span 380 ms, the end at 500 ms, TPOT (500 - 20) / 29 = 16.55 ms, and 29
//! delivery gaps of which 19 are 20 ms and 10 are 10 ms.

#![cfg(target_os = "linux")]

use std::path::PathBuf;

use percentes_analyzer::analysis;
use percentes_analyzer::model::{Analyzer, Distribution, Report, WindowReport};
use percentes_analyzer::JournalFile;
use percentes_formats::config::Config;
use percentes_formats::spec::Spec;
use percentes_recorder::run::{self, Options};
use percentes_scenarios::config::{MockConfig, ReasoningField};
use percentes_scenarios::mock;
use percentes_scenarios::timing::Distribution as Timing;

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("percentes-streams-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

/// A reasoning model: 20 ms to the first token, 20 reasoning tokens 20 ms apart, the rest
/// 10 ms apart.
fn reasoning_mock(field: ReasoningField) -> MockConfig {
    let mut m = MockConfig::constant(20.0, 10.0, 4096);
    m.timing.reasoning_tokens = 20;
    m.timing.reasoning_gap = Some(Timing::Constant { ms: 20.0 });
    m.timing.reasoning_field = field;
    m
}

/// A dev run of stated durations (0.5 s warm-up, 3 s measured, no cooldown; the pinned 30 s
/// timeout) at 20 rps, one route of `tokens` tokens; `route` adds the route's own keys.
fn config(addr: &str, path: &str, tokens: u32, route: &str) -> Config {
    let text = format!(
        "schema_version = 1\nprofile = \"dev\"\n[dev]\nwarmup_s = 0.5\nmeasure_s = 3.0\ncooldown_s = 0\n[target]\nkind = \"mock\"\nbase_url = \"http://{addr}\"\nmodel = \"mock\"\nreplicas = [\"replica-0\"]\n\
         [schedule]\nseed = 11\narrival = \"deterministic\"\nrate_rps = 20\n[fault]\nvariant = \"none\"\n[[routes]]\nlabel = \"r\"\npath = \"{path}\"\n{route}\n[routes.output_tokens]\nkind = \"fixed\"\ntokens = {tokens}\n"
    );
    Config::parse(text.as_bytes()).unwrap_or_else(|e| panic!("{e}"))
}

/// Records against a fresh mock until `check` holds on the v0.5 reading, retrying only a run
/// whose client gate failed (the machine, not the instrument); returns both readings.
fn recorded(
    name: &str,
    target: impl Fn() -> Config,
    check: impl Fn(&WindowReport) -> Result<(), String>,
) -> (Report, Report) {
    let mut seen = Vec::new();
    for attempt in 1..=3 {
        let path = scratch(name);
        let options = Options {
            force: true,
            ..Options::new(path.clone())
        };
        run::record(&target(), &options).unwrap();
        let file = JournalFile::open(&path).unwrap();
        let run = percentes_analyzer::load::load(&file).unwrap();
        let analyzer = Analyzer {
            diagnose: true,
            ..Default::default()
        };
        let v5 = analysis::analyze(&run, &file, Spec::V0_5, &analyzer);
        let v4 = analysis::analyze(&run, &file, Spec::V0_4, &analyzer);
        assert!(
            v5.validity.only_client_gates_failed(),
            "{name}: a gate other than the client's failed"
        );
        let Err(why) = check(measurement(&v5)) else {
            return (v5, v4);
        };
        let noisy = v5.validity.gates.iter().any(|g| !g.holds());
        assert!(
            noisy,
            "{name}: {why}, on a run whose client gate held (earlier: {seen:?})"
        );
        seen.push(format!("attempt {attempt}: {why}"));
        seen.push(crate::await_calm(name));
    }
    panic!("{name}: the client gate and the check failed on every recording: {seen:?}")
}

fn measurement(report: &Report) -> &WindowReport {
    report
        .windows
        .iter()
        .find(|w| w.window == "measurement")
        .unwrap_or_else(|| panic!("no statistics: {:?}", report.windows_withheld))
}

fn ms(d: &Distribution, q: &str) -> f64 {
    d.percentiles_us
        .iter()
        .find(|(n, _)| n == q)
        .map_or(f64::NAN, |(_, us)| *us as f64 / 1e3)
}

/// `found` within `band` ms of `truth`, or why not.
fn near(what: &str, found: f64, truth: f64, band: f64) -> Result<(), String> {
    if (found - truth).abs() <= band {
        Ok(())
    } else {
        Err(format!(
            "{what} {found:.3} ms, not within {band} ms of {truth} ms"
        ))
    }
}

/// The first token's lateness the receive path allows: the canary's worst lag in the window, and
/// the histogram's three significant figures.
fn first_token_band(w: &WindowReport) -> f64 {
    w.receive_path.canary_max_us.unwrap_or(0.0) / 1e3 + 2.0
}

/// A reasoning stream (`delta.reasoning_content`) read by kind: TTFT is the first reasoning
/// delta, the first answer token and the reasoning span are figures of their own, the reasoning
/// tokens reconcile with the usage, TPOT is over every token, and the inter-token figure is the
/// gap between deliveries. Under v0.4 the same journal reads TTFT at the first answer token: the
/// defect A4 corrects. Deliberate break: reading only `delta.content` (the old recorder) puts
/// TTFT at 410 ms.
#[test]
fn a_reasoning_stream_is_timed_by_kind() {
    let _machine = crate::recording();
    let target = || {
        let addr = mock::spawn_background(reasoning_mock(ReasoningField::ReasoningContent), 1)
            .unwrap()
            .0;
        config(&addr.to_string(), "/v1/chat/completions", 30, "")
    };
    let (v5, v4) = recorded("reasoning.pj", target, |w| {
        let s = w.streams.as_ref().ok_or("no stream figures under v0.5")?;
        if w.outcomes.completed != w.scheduled || w.scheduled < 50 {
            return Err(format!(
                "{} of {} completed",
                w.outcomes.completed, w.scheduled
            ));
        }
        let band = first_token_band(w);
        near(
            "TTFT p50",
            ms(&w.ttft, "p50"),
            20.0 + band / 2.0,
            band / 2.0 + 0.5,
        )?;
        near("first answer p50", ms(&s.ttfat, "p50"), 410.0, band + 4.0)?;
        near(
            "reasoning span p50",
            ms(&s.reasoning_span, "p50"),
            380.0,
            4.0,
        )?;
        near("TPOT p50", ms(&w.tokens.tpot, "p50"), 480.0 / 29.0, 0.5)?;
        near("inter-token p50", ms(&w.inter_chunk, "p50"), 20.0, 1.0)?;
        Ok(())
    });
    let w = measurement(&v5);
    let s = w.streams.as_ref().unwrap();
    assert_eq!(
        s.output.iter().collect::<Vec<_>>(),
        [(&"answer+reasoning".to_owned(), &w.outcomes.completed)]
    );
    assert_eq!(s.with_record, w.outcomes.completed);
    assert_eq!(
        s.reasoning_tokens.percentiles[0],
        ("p50".to_owned(), 20),
        "the usage's reasoning tokens"
    );
    assert!(
        s.reasoning_reconciled.ends_with("one token a delta"),
        "{}",
        s.reasoning_reconciled
    );
    assert_eq!(s.one_token_per_delta, Some(true));
    assert_eq!(
        s.deliveries,
        30 * w.outcomes.completed,
        "one delivery a token"
    );
    assert_eq!(
        w.tokens.multi_token_chunks, 0,
        "one token a delta, as the usage says"
    );
    assert!(w.inter_chunk.refused.is_empty());
    // The old reading of the same journal: the reasoning phase folded into TTFT, unnamed.
    let old = measurement(&v4);
    assert!(
        ms(&old.ttft, "p50") > 400.0,
        "{:?}",
        old.ttft.percentiles_us
    );
    assert!(
        old.tokens.multi_token_chunks > 0,
        "v0.4 divided 30 tokens over 10 events"
    );
}

/// A tool-call-only answer (`delta.tool_calls`, `content: null`), forced by `tool_choice` and
/// checked against the function's parameters: completes as a correct success with TTFT at its
/// first delta, well before its end, and TPOT and the inter-token figure read; v0.4 had TTFT
/// equal to end-to-end and no TPOT. Deliberate break: ignoring `tool_calls` makes TTFT = e2e.
#[test]
fn a_tool_call_only_answer_has_a_first_token_before_its_end() {
    let _machine = crate::recording();
    let route = r#"tool_choice = "lookup"
tools = '[{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}}}]'
verify = { structured = true }"#;
    let target = || {
        let addr = mock::spawn_background(MockConfig::constant(10.0, 10.0, 4096), 1)
            .unwrap()
            .0;
        config(&addr.to_string(), "/v1/chat/completions", 6, route)
    };
    let (v5, v4) = recorded("tools.pj", target, |w| {
        if w.outcomes.completed != w.scheduled {
            return Err(format!("{:?}", w.classes));
        }
        let band = first_token_band(w);
        near(
            "TTFT p50",
            ms(&w.ttft, "p50"),
            10.0 + band / 2.0,
            band / 2.0 + 0.5,
        )?;
        near(
            "e2e p50",
            ms(&w.e2e, "p50"),
            60.0 + band / 2.0,
            band / 2.0 + 1.0,
        )?;
        near("TPOT p50", ms(&w.tokens.tpot, "p50"), 10.0, 0.5)?;
        near("inter-token p50", ms(&w.inter_chunk, "p50"), 10.0, 1.0)?;
        Ok(())
    });
    let w = measurement(&v5);
    assert_eq!(w.classes.get("correct-success"), Some(&w.scheduled));
    let s = w.streams.as_ref().unwrap();
    assert_eq!(s.output.keys().collect::<Vec<_>>(), ["tool-call"]);
    assert_eq!(
        s.ttfat.n, 0,
        "no answer token: a tool call is the whole answer"
    );
    let old = measurement(&v4);
    assert_eq!(
        ms(&old.ttft, "p50"),
        ms(&old.e2e, "p50"),
        "v0.4: TTFT = e2e on a tool-call stream"
    );
    assert_eq!(old.tokens.tpot.n, 0, "v0.4 had no TPOT for it");
}

/// The Responses API (`/v1/responses`): typed events, no `data: [DONE]`, usage in
/// `response.completed` with its reasoning tokens; a JSON answer checked against its schema.
#[test]
fn a_responses_api_stream_with_reasoning_and_a_json_answer() {
    let _machine = crate::recording();
    let route = r#"response_format = '{"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}'
verify = { structured = true }"#;
    let target = || {
        let addr = mock::spawn_background(reasoning_mock(ReasoningField::Reasoning), 1)
            .unwrap()
            .0;
        config(&addr.to_string(), "/v1/responses", 30, route)
    };
    let (v5, _) = recorded("responses.pj", target, |w| {
        if w.outcomes.completed != w.scheduled {
            return Err(format!("{:?}", w.classes));
        }
        let s = w.streams.as_ref().ok_or("no stream figures")?;
        let band = first_token_band(w);
        near(
            "TTFT p50",
            ms(&w.ttft, "p50"),
            20.0 + band / 2.0,
            band / 2.0 + 0.5,
        )?;
        near("first answer p50", ms(&s.ttfat, "p50"), 410.0, band + 4.0)?;
        Ok(())
    });
    let w = measurement(&v5);
    assert_eq!(w.classes.get("correct-success"), Some(&w.scheduled));
    let s = w.streams.as_ref().unwrap();
    assert_eq!(s.reasoning_tokens.percentiles[0].1, 20);
    assert_eq!(s.one_token_per_delta, Some(true));
}

/// A prompt file whose lines carry their own parts, as a request log holds them: a forced tool
/// call, a JSON format in the API's wrapper, an image as a data URL, and a plain prompt. Each
/// request goes with its line's parts and is checked by them: every one a correct success, the
/// tool-call lines' output a tool call, the others' an answer; the journal's prompt-set fact
/// counts what the lines carried. Deliberate break: sending the route's parts on every line
/// leaves the tool lines without a call.
#[test]
fn each_prompt_file_line_sends_its_own_parts() {
    let _machine = crate::recording();
    let lines = [
        r#"{"prompt": "look it up", "tools": [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}}}], "tool_choice": "required"}"#,
        r#"{"prompt": "answer in JSON", "response_format": {"type": "json_schema", "json_schema": {"name": "a", "schema": {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}}}}"#,
        r#"{"messages": [{"role": "user", "content": [{"type": "text", "text": "what is this"}, {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}]}]}"#,
        r#"{"prompt": "plain"}"#,
    ];
    let file = scratch("parts.jsonl");
    std::fs::write(&file, lines.join("\n")).unwrap();
    let route = format!(
        "prompt_file = {:?}\nverify = {{ structured = true }}",
        file.to_str().unwrap()
    );
    let target = || {
        let addr = mock::spawn_background(MockConfig::constant(10.0, 10.0, 4096), 1)
            .unwrap()
            .0;
        config(&addr.to_string(), "/v1/chat/completions", 6, &route)
    };
    let (v5, _) = recorded("line-parts.pj", target, |w| {
        if w.outcomes.completed != w.scheduled {
            return Err(format!("{:?}", w.classes));
        }
        Ok(())
    });
    let w = measurement(&v5);
    assert_eq!(w.classes.get("correct-success"), Some(&w.scheduled));
    let s = w.streams.as_ref().unwrap();
    let tool_calls = s.output.get("tool-call").copied().unwrap_or(0);
    let answers = s.output.get("answer").copied().unwrap_or(0);
    assert_eq!(tool_calls + answers, w.scheduled, "{:?}", s.output);
    // Request i sends line i mod 4: a quarter of them the tool call.
    assert!(
        tool_calls.abs_diff(w.scheduled / 4) <= 1,
        "{tool_calls} tool calls of {}",
        w.scheduled
    );
    let file = JournalFile::open(&scratch("line-parts.pj")).unwrap();
    let (header, _) = file.header().unwrap();
    let fact = header
        .host
        .iter()
        .find(|(k, _)| k == "prompt-set r")
        .map(|(_, v)| v.clone())
        .unwrap_or_default();
    assert!(
        fact.contains("3 lines carry their own parts (tools 1, tool_choice 1, response_format 1, images 1: 1 images, 8 bytes"),
        "{fact}"
    );
}
