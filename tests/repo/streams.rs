//! Streams as today's models send them (issue 49; SPEC §3 "What a stream's figures are about",
//! amendment A4): a reasoning phase before the answer, a tool call whose arguments arrive in
//! pieces, the Responses API. Each run is read under v0.5 and under v0.4, so the test shows both
//! what A4 reads and what the earlier reading published.
//!
//! The timing tests run the recorder's production worker loop on simulated time
//! (`percentes_recorder::run::sim`) against a target that sends the mock's own events
//! (`percentes_scenarios::mock::streamed`) on the mock's timing, and analyze the journal that run
//! writes: every figure exact, no host noise to record again past (issue 51 item 3). The prompt
//! file's parts, a point about what reaches a real server, are recorded against the mock.
//!
//! The truth: TTFT 20 ms to the first token of any kind; 20 reasoning tokens 20 ms apart, then
//! 10 answer tokens 10 ms apart; so the first answer token at 20 + 19 x 20 + 10 = 410 ms, the
//! reasoning span 380 ms, the end at 500 ms, TPOT (500 - 20) / 29 = 16.55 ms, and 29 delivery
//! gaps of which 19 are 20 ms and 10 are 10 ms.

#![cfg(target_os = "linux")]

use std::path::PathBuf;

use percentes_analyzer::analysis;
use percentes_analyzer::model::{Analyzer, Distribution, Report, WindowReport};
use percentes_analyzer::JournalFile;
use percentes_formats::config::Config;
use percentes_formats::spec::Spec;
use percentes_recorder::run::sim::{Answers, Events, World, MS};
use percentes_recorder::run::{self, Options};
use percentes_scenarios::config::{MockConfig, ReasoningField};
use percentes_scenarios::mock;

/// A file of the tests' shared folder (`percentes_testkit::shared_folder`), named by the test.
fn scratch(name: &str) -> PathBuf {
    percentes_testkit::shared_folder("streams").join(name)
}

/// A reasoning model's events: 20 reasoning tokens before the answer, in `field`.
fn reasoning_mock(field: ReasoningField) -> MockConfig {
    let mut m = MockConfig::constant(20.0, 10.0, 4096);
    m.timing.reasoning_tokens = 20;
    m.timing.reasoning_field = field;
    m
}

/// 20 rps for the default simulated schedule (30 s measured), one route (`route`: its keys),
/// against a target that answers with `mock`'s events 20 ms after the request (the head with
/// the first token, as the mock sends it), its tokens 10 ms apart and its reasoning tokens
/// 20 ms apart. Its journal is analyzed under v0.5 and v0.4; every gate must hold.
fn simulated(name: &str, mock_config: MockConfig, route: &'static str) -> (Report, Report) {
    let _beside = crate::beside();
    let mut world = World {
        route_toml: route,
        ..World::new(20.0, std::time::Duration::ZERO)
    }
    .configured();
    let target = &mut world.target;
    (target.head_ns, target.ttft_ns, target.tpot_ns) = (20 * MS, 20 * MS, 10 * MS);
    target.reasoning_gap_ns = Some(20 * MS);
    target.answers = Some(Answers::new(move |index, path, body| {
        let streamed = mock::streamed(&mock_config, path, body, index)
            .unwrap_or_else(|e| panic!("the mock refuses request {index}: {e}"));
        Events {
            prologue: streamed.prologue,
            tokens: streamed.tokens,
            epilogue: streamed.epilogue,
        }
    }));
    let path = scratch(name);
    std::fs::write(&path, world.run().journal()).unwrap();
    let file = JournalFile::open(&path).unwrap();
    let run = percentes_analyzer::load::load(&file).unwrap();
    let analyzer = Analyzer::default();
    let v5 = analysis::analyze(&run, &file, Spec::V0_5, &analyzer);
    let v4 = analysis::analyze(&run, &file, Spec::V0_4, &analyzer);
    let failed: Vec<_> = v5.validity.failed().collect();
    assert!(failed.is_empty(), "{name}: gates failed: {failed:?}");
    (v5, v4)
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

/// `found` within `band` ms of `truth`.
fn near(what: &str, found: f64, truth: f64, band: f64) {
    assert!(
        (found - truth).abs() <= band,
        "{what} {found:.3} ms, not within {band} ms of {truth} ms"
    );
}

/// The band a simulated figure is read within: the histogram's three significant figures at
/// 500 ms, and the simulated timer's 50 us floor.
const BAND_MS: f64 = 0.6;

/// A reasoning stream (`delta.reasoning_content`) read by kind: TTFT is the first reasoning
/// delta, the first answer token and the reasoning span are figures of their own, the reasoning
/// tokens reconcile with the usage, TPOT is over every token, and the inter-token figure is the
/// gap between deliveries. Under v0.4 the same journal reads TTFT at the first answer token: the
/// defect A4 corrects. Deliberate break: reading only `delta.content` (the old recorder) puts
/// TTFT at 410 ms.
#[test]
fn a_reasoning_stream_is_timed_by_kind() {
    let (v5, v4) = simulated(
        "reasoning.pj",
        reasoning_mock(ReasoningField::ReasoningContent),
        "label = \"r\"\npath = \"/v1/chat/completions\"\n[routes.output_tokens]\nkind = \"fixed\"\ntokens = 30\n",
    );
    let w = measurement(&v5);
    assert!(w.scheduled >= 500, "{} scheduled", w.scheduled);
    assert_eq!(w.outcomes.completed, w.scheduled, "{:?}", w.classes);
    let s = w.streams.as_ref().expect("stream figures under v0.5");
    near("TTFT p50", ms(&w.ttft, "p50"), 20.0, BAND_MS);
    near("first answer p50", ms(&s.ttfat, "p50"), 410.0, BAND_MS);
    near(
        "reasoning span p50",
        ms(&s.reasoning_span, "p50"),
        380.0,
        BAND_MS,
    );
    near("TPOT p50", ms(&w.tokens.tpot, "p50"), 480.0 / 29.0, 0.1);
    near("inter-token p50", ms(&w.inter_chunk, "p50"), 20.0, 0.1);
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
    let route = r#"label = "r"
path = "/v1/chat/completions"
tool_choice = "lookup"
tools = '[{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}}}]'
verify = { structured = true }
[routes.output_tokens]
kind = "fixed"
tokens = 6
"#;
    let (v5, v4) = simulated("tools.pj", MockConfig::constant(20.0, 10.0, 4096), route);
    let w = measurement(&v5);
    assert_eq!(w.outcomes.completed, w.scheduled, "{:?}", w.classes);
    // The first delta at 20 ms, five more 10 ms apart: the end at 70 ms.
    near("TTFT p50", ms(&w.ttft, "p50"), 20.0, BAND_MS);
    near("e2e p50", ms(&w.e2e, "p50"), 70.0, BAND_MS);
    near("TPOT p50", ms(&w.tokens.tpot, "p50"), 10.0, 0.1);
    near("inter-token p50", ms(&w.inter_chunk, "p50"), 10.0, 0.1);
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
    let route = r#"label = "r"
path = "/v1/responses"
response_format = '{"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}'
verify = { structured = true }
[routes.output_tokens]
kind = "fixed"
tokens = 30
"#;
    let (v5, _) = simulated(
        "responses.pj",
        reasoning_mock(ReasoningField::Reasoning),
        route,
    );
    let w = measurement(&v5);
    assert_eq!(w.classes.get("correct-success"), Some(&w.scheduled));
    let s = w.streams.as_ref().expect("stream figures");
    near("TTFT p50", ms(&w.ttft, "p50"), 20.0, BAND_MS);
    near("first answer p50", ms(&s.ttfat, "p50"), 410.0, BAND_MS);
    assert_eq!(s.reasoning_tokens.percentiles[0].1, 20);
    assert_eq!(s.one_token_per_delta, Some(true));
}

/// A dev run of stated durations (0.5 s warm-up, 3 s measured, no cooldown; the pinned 30 s
/// timeout) at 20 rps against the mock at `addr`, one route of `tokens` tokens; `route` adds
/// the route's own keys.
fn config(addr: &str, path: &str, tokens: u32, route: &str) -> Config {
    let text = format!(
        "schema_version = 1\nprofile = \"dev\"\n[dev]\nwarmup_s = 0.5\nmeasure_s = 3.0\ncooldown_s = 0\n[target]\nkind = \"mock\"\nbase_url = \"http://{addr}\"\nmodel = \"mock\"\nreplicas = [\"replica-0\"]\n\
         [schedule]\nseed = 11\narrival = \"deterministic\"\nrate_rps = 20\n[fault]\nvariant = \"none\"\n[[routes]]\nlabel = \"r\"\npath = \"{path}\"\n{route}\n[routes.output_tokens]\nkind = \"fixed\"\ntokens = {tokens}\n"
    );
    Config::parse(text.as_bytes()).unwrap_or_else(|e| panic!("{e}"))
}

/// Records `config` once and reads it under v0.5 for diagnosis: a run this busy machine failed
/// on the client gate alone is read as it is (the test's point is what reached the server, not
/// its timing); any other failing gate fails the test.
fn recorded(name: &str, config: &Config) -> Report {
    let _machine = crate::recording();
    let path = scratch(name);
    let options = Options {
        force: true,
        ..Options::new(path.clone())
    };
    run::record(config, &options).unwrap();
    let file = JournalFile::open(&path).unwrap();
    let run = percentes_analyzer::load::load(&file).unwrap();
    let analyzer = Analyzer {
        diagnose: true,
        ..Default::default()
    };
    let v5 = analysis::analyze(&run, &file, Spec::V0_5, &analyzer);
    assert!(
        v5.validity.only_client_gates_failed(),
        "{name}: a gate other than the client's failed"
    );
    v5
}

/// A prompt file whose lines carry their own parts, as a request log holds them: a forced tool
/// call, a JSON format in the API's wrapper, an image as a data URL, and a plain prompt. Each
/// request goes with its line's parts and is checked by them: every one a correct success, the
/// tool-call lines' output a tool call, the others' an answer; the journal's prompt-set fact
/// counts what the lines carried. Deliberate break: sending the route's parts on every line
/// leaves the tool lines without a call.
#[test]
fn each_prompt_file_line_sends_its_own_parts() {
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
    let addr = mock::spawn_background(MockConfig::constant(10.0, 10.0, 4096), 1)
        .unwrap()
        .0;
    let v5 = recorded(
        "line-parts.pj",
        &config(&addr.to_string(), "/v1/chat/completions", 6, &route),
    );
    let w = measurement(&v5);
    assert_eq!(w.outcomes.completed, w.scheduled, "{:?}", w.classes);
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
