//! One request's observation: HTTP events in, timestamps and a classification out (SPEC §3 and the
//! response classes of formats/JOURNAL.md). Pure: the I/O happens in `client`.

use std::borrow::Cow;
use std::rc::Rc;

use percentes_formats::config::parts::Api;
use percentes_formats::config::schema::Schema;
use percentes_formats::journal::records::Outcome;
use percentes_formats::journal::stream::{OutputKind, StreamRecord};
use percentes_formats::pins;
use serde_json::Value;

use crate::http1::Event;
use crate::sse::{SseError, SseEvent, SseParser};

mod output;
mod wire;

pub use output::Output;
use wire::{ChunkIn, EventIn, Piece, ResponseIn, UsageIn};

/// The response header that attributes a request to a replica (the mock's; a router's upstream
/// header is used when present).
pub const REPLICA_HEADERS: &[&str] = &["x-percentes-upstream", "x-percentes-replica"];

/// Content gaps a request records at most (SPEC §2, `client.content_gaps_max`).
pub const CONTENT_GAPS_MAX: usize = pins::value::CLIENT_CONTENT_GAPS_MAX as usize;
/// Longest replica name recorded (`client.replica_bytes_max`).
pub const REPLICA_BYTES_MAX: usize = pins::value::CLIENT_REPLICA_BYTES_MAX as usize;
/// Longest detail recorded with a class (`client.detail_bytes_max`).
pub const DETAIL_BYTES_MAX: usize = pins::value::CLIENT_DETAIL_BYTES_MAX as usize;

/// `text` cut to at most `bytes`, at a character boundary.
pub fn cut(text: &str, bytes: usize) -> &str {
    if text.len() <= bytes {
        return text;
    }
    let mut end = bytes;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// A request's fate, decided.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verdict {
    /// How the request ended.
    pub outcome: Outcome,
    /// A class name from `percentes_formats::journal::records::CLASSES`.
    pub class: &'static str,
    /// Free text behind the class: the status line, the OS error, the failed check.
    pub detail: String,
}

impl Verdict {
    /// An errored verdict of `class`.
    pub fn errored(class: &'static str, detail: impl Into<String>) -> Verdict {
        Verdict {
            outcome: Outcome::Errored,
            class,
            detail: detail.into(),
        }
    }
}

/// The schemas a structured answer is held to (`verify.structured`, SPEC §1 "What a request
/// carries").
#[derive(Clone, Debug, Default)]
pub struct Structured {
    /// The answer's schema (`response_format`), when the route asks for a format.
    pub answer: Option<Schema>,
    /// Each declared function's parameters, by name.
    pub functions: Vec<(String, Schema)>,
}

/// A route's verification rule, resolved (see `percentes_formats::config::Verify`).
#[derive(Clone, Debug, Default)]
pub struct Rule {
    /// The exact HTTP status required (default: any 2xx).
    pub status: Option<u16>,
    /// Lowercased header name and, optionally, the exact value.
    pub header: Option<(String, Option<String>)>,
    /// A top-level JSON field and the value it must have.
    pub field: Option<(String, String)>,
    /// BLAKE3 of the whole content text.
    pub content_blake3: Option<[u8; 32]>,
    /// The lowercased response header naming the replica (`target.replica_header`); without
    /// it, [`REPLICA_HEADERS`].
    pub replica_header: Option<String>,
    /// The API the route speaks: what its chunks or events look like, and how a stream ends.
    pub api: Api,
    /// The answer's and the tool calls' schemas, when the route asks for the check.
    pub structured: Option<Structured>,
    /// Where a prompt file's lines carry their own tools or format: each prompt's schemas (its
    /// line's parts on the route), by prompt index; request sending prompt c is checked by
    /// entry c mod n in place of `structured`. Empty otherwise.
    pub by_prompt: Vec<Option<std::sync::Arc<Structured>>>,
}

impl Rule {
    /// The schemas a request sending prompt `slot` (already reduced mod n) is held to.
    fn structured_at(&self, slot: usize) -> Option<&Structured> {
        if self.by_prompt.is_empty() {
            self.structured.as_ref()
        } else {
            self.by_prompt.get(slot).and_then(Option::as_deref)
        }
    }
}

impl Rule {
    /// The default rule: the `model` field equals `model`.
    pub fn model(model: &str) -> Rule {
        Rule {
            field: Some(("model".into(), model.into())),
            ..Rule::default()
        }
    }
}

/// What a response has shown so far.
#[derive(Debug)]
pub struct Exchange {
    streaming: bool,
    /// Shared by every exchange of the route: built once, never cloned per request.
    rule: Rc<Rule>,
    /// The running content digest, kept only when the rule checks one (a hasher is about 2 KB,
    /// and every in-flight request's future would carry it).
    content: Option<Box<blake3::Hasher>>,
    failed_check: Option<String>,
    /// The response's status, once its head arrived.
    pub status: Option<u16>,
    /// The replica named by the response header, empty when unattributed.
    pub replica: String,
    /// When the response head arrived, ns from the epoch.
    pub response_head_ns: Option<u64>,
    /// When the first answer content arrived, ns from the epoch.
    pub first_content_ns: Option<u64>,
    last_content_ns: Option<u64>,
    /// Gaps between consecutive answer content events, us, at least 1 (§3).
    pub content_gaps_us: Vec<u32>,
    /// Answer content events seen.
    pub content_events: u32,
    /// `usage.prompt_tokens` as the server reported it.
    pub usage_prompt_tokens: Option<u32>,
    /// `usage.completion_tokens` as the server reported it.
    pub usage_completion_tokens: Option<u32>,
    /// Every kind of generated output, by delivery: the request's kind-8 record.
    pub output: Output,
    /// The answer's text, kept only when the rule checks it against a schema.
    answer: Option<String>,
    /// Each tool call's (index, name, arguments), kept only when the rule checks them.
    calls: Option<Vec<(u32, String, String)>>,
    /// The prompt this request sends, mod the rule's [`Rule::by_prompt`]: which checks apply.
    slot: usize,
    /// The server asked to close the connection after this response.
    pub close_after: bool,
    sse: SseParser,
    /// The stream's end was seen: `data: [DONE]`, or the Responses API's `response.completed`.
    done_marker: bool,
    body: Vec<u8>,
    /// Set once the request's fate is known early (an error status, broken framing).
    decided: Option<Verdict>,
    /// HTTP/2: while the request body waits for the server's flow-control window, (bytes of
    /// the request, bytes still unsent); a timeout then says the request stalled there.
    pub waiting_for_window: Option<(u64, usize)>,
}

impl Exchange {
    /// An exchange checked by the default rule (the `model` field), when a model is given.
    pub fn new(streaming: bool, expected_model: Option<String>) -> Exchange {
        Exchange::with_rule(
            streaming,
            expected_model.map(|m| Rule::model(&m)).unwrap_or_default(),
        )
    }

    /// An exchange checked by `rule`.
    pub fn with_rule(streaming: bool, rule: impl Into<Rc<Rule>>) -> Exchange {
        let rule = rule.into();
        Exchange {
            streaming,
            content: rule.content_blake3.map(|_| Box::new(blake3::Hasher::new())),
            answer: None,
            calls: None,
            slot: 0,
            rule,
            failed_check: None,
            status: None,
            replica: String::new(),
            response_head_ns: None,
            first_content_ns: None,
            last_content_ns: None,
            content_gaps_us: Vec::new(),
            content_events: 0,
            usage_prompt_tokens: None,
            usage_completion_tokens: None,
            output: Output::until(u64::MAX),
            close_after: false,
            sse: SseParser::default(),
            done_marker: false,
            body: Vec::new(),
            decided: None,
            waiting_for_window: None,
        }
        .prompt(0)
    }

    /// The exchange of a request that sends prompt `content` of its route's prompt set: its
    /// structured checks are that prompt's ([`Rule::by_prompt`]).
    pub fn prompt(mut self, content: u64) -> Exchange {
        let n = self.rule.by_prompt.len().max(1) as u64;
        self.slot = (content % n) as usize;
        let structured = self.rule.structured_at(self.slot);
        self.answer = structured
            .filter(|s| s.answer.is_some())
            .map(|_| String::new());
        self.calls = structured
            .filter(|s| !s.functions.is_empty())
            .map(|_| Vec::new());
        self
    }

    /// The exchange of a request whose deadline is `deadline_ns`: output read after it is not
    /// counted in its stream record (by then the request was censored, SPEC §3).
    pub fn until(mut self, deadline_ns: u64) -> Exchange {
        self.output = Output::until(deadline_ns);
        self
    }

    /// The verdict, once the response has decided it (an error status or broken framing).
    pub fn decided(&self) -> Option<&Verdict> {
        self.decided.as_ref()
    }

    fn decide(&mut self, verdict: Verdict) {
        if self.decided.is_none() {
            self.decided = Some(verdict);
        }
    }

    /// The request's kind-8 stream record, when any output arrived.
    pub fn stream_record(&self, index: u64) -> Option<StreamRecord> {
        self.output.record(index)
    }

    /// Takes one HTTP event observed at `now_ns`.
    pub fn on_http(&mut self, event: Event, now_ns: u64) {
        if self.decided.is_some() {
            return;
        }
        match event {
            Event::Head { status, headers } => self.on_head(status, &headers, now_ns),
            Event::Data(bytes) => {
                if !self.streaming {
                    if self.body.len() + bytes.len() <= crate::http1::BODY_KEPT_BYTES_MAX {
                        self.body.extend_from_slice(&bytes);
                    }
                    return;
                }
                let mut events = Vec::new();
                match self.sse.feed(&bytes, &mut events) {
                    Ok(()) => {}
                    Err(SseError::InvalidUtf8) => {
                        return self.decide(Verdict::errored(
                            "malformed-sse",
                            "invalid UTF-8 in the event stream",
                        ))
                    }
                    Err(SseError::TooLarge) => {
                        return self
                            .decide(Verdict::errored("malformed-sse", "an event over 1 MiB"))
                    }
                }
                for event in events {
                    self.on_sse(event, now_ns);
                    if self.decided.is_some() {
                        return;
                    }
                }
            }
            Event::End => {}
            Event::Malformed(why) => self.decide(Verdict::errored("malformed-framing", why)),
        }
    }

    fn on_head(&mut self, status: u16, headers: &[(String, String)], now_ns: u64) {
        self.status = Some(status);
        self.response_head_ns = Some(now_ns);
        let found = match &self.rule.replica_header {
            Some(name) => headers.iter().find(|(k, _)| k == name),
            None => REPLICA_HEADERS
                .iter()
                .find_map(|name| headers.iter().find(|(k, _)| k == name)),
        };
        if let Some((_, v)) = found {
            self.replica = cut(v, REPLICA_BYTES_MAX).to_owned();
        }
        self.close_after = headers
            .iter()
            .any(|(k, v)| k == "connection" && v.eq_ignore_ascii_case("close"));
        self.check_head(status, headers);
        match status {
            200..=299 => {}
            429 | 503 => self.decide(Verdict::errored("rejection", format!("HTTP {status}"))),
            502 | 504 => self.decide(Verdict::errored(
                "dependency-failure",
                format!("HTTP {status}"),
            )),
            _ => self.decide(Verdict::errored("http-status", format!("HTTP {status}"))),
        }
    }

    fn on_sse(&mut self, event: SseEvent, now_ns: u64) {
        if self.done_marker {
            return;
        }
        if event.data == "[DONE]" {
            self.done_marker = true;
            return;
        }
        match self.rule.api {
            Api::Responses => self.on_event(&event.data, now_ns),
            Api::Chat | Api::Completions => self.on_chunk(&event.data, now_ns),
        }
    }

    /// A Chat Completions or Completions chunk.
    fn on_chunk(&mut self, data: &str, now_ns: u64) {
        let chunk: ChunkIn = match serde_json::from_str(data) {
            Ok(c) => c,
            Err(_) => return self.not_json(data),
        };
        if chunk.error.is_some() {
            let shown: String = data.chars().take(120).collect();
            return self.decide(Verdict::errored(
                "http-status",
                format!("error event in the stream: {shown}"),
            ));
        }
        self.check_field(chunk.model.as_deref(), data);
        for piece in chunk.pieces() {
            self.piece(piece, now_ns, true);
        }
        self.read_usage(chunk.usage.as_ref());
    }

    /// A Responses API event: a delta, the response's start or end, or its failure.
    fn on_event(&mut self, data: &str, now_ns: u64) {
        let event: EventIn = match serde_json::from_str(data) {
            Ok(e) => e,
            Err(_) => return self.not_json(data),
        };
        match event.kind.as_deref() {
            Some("error" | "response.failed") => {
                let shown: String = data.chars().take(120).collect();
                self.decide(Verdict::errored(
                    "http-status",
                    format!("error event in the stream: {shown}"),
                ))
            }
            // An incomplete response (cut at max_output_tokens) ended whole, as a chat stream
            // that finished for its length does.
            Some("response.completed" | "response.incomplete") => {
                self.done_marker = true;
                if let Some(response) = &event.response {
                    self.check_field(response.model.as_deref(), data);
                    self.read_usage(response.usage.as_ref());
                }
            }
            Some("response.created" | "response.in_progress") => {
                let model = event.response.as_ref().and_then(|r| r.model.as_deref());
                self.check_field(model, data);
            }
            _ => {
                if let Some(piece) = event.piece() {
                    self.piece(piece, now_ns, true);
                }
            }
        }
    }

    fn not_json(&mut self, data: &str) {
        let shown: String = data.chars().take(60).collect();
        self.decide(Verdict::errored(
            "malformed-sse",
            format!("data is not a JSON chunk: {shown:?}"),
        ));
    }

    /// One piece of generated output read at `now_ns`; `timed` says whether an answer piece is
    /// a content event of the request record (a non-streamed body has one, set by `finish`).
    fn piece(&mut self, piece: Piece, now_ns: u64, timed: bool) {
        self.output.delta(piece.kind(), now_ns);
        match piece {
            Piece::Text(OutputKind::Answer, text) => {
                if let Some(hasher) = self.content.as_mut() {
                    hasher.update(text.as_bytes());
                }
                if let Some(answer) = self.answer.as_mut() {
                    if answer.len() + text.len() <= crate::http1::BODY_KEPT_BYTES_MAX {
                        answer.push_str(text);
                    }
                }
                if timed {
                    self.content_event(now_ns);
                }
            }
            Piece::Tool {
                index,
                name,
                arguments,
            } => {
                let Some(calls) = self.calls.as_mut() else {
                    return;
                };
                let at = match calls.iter().position(|(i, _, _)| *i == index) {
                    Some(at) => at,
                    None => {
                        calls.push((index, String::new(), String::new()));
                        calls.len() - 1
                    }
                };
                let call = &mut calls[at];
                if let Some(name) = name {
                    call.1 = name.to_owned();
                }
                if call.2.len() + arguments.len() <= crate::http1::BODY_KEPT_BYTES_MAX {
                    call.2.push_str(arguments);
                }
            }
            Piece::Text(..) => {}
        }
    }

    fn content_event(&mut self, now_ns: u64) {
        match self.last_content_ns {
            None => self.first_content_ns = Some(now_ns),
            Some(last) => {
                // SPEC §3: a gap under 1 us is recorded as 1 us. Past the pinned count the gaps
                // are not kept (a record stays under the journal's size limit); the content
                // events still count them, so the record says how many are missing.
                if self.content_gaps_us.len() < CONTENT_GAPS_MAX {
                    let gap_us =
                        (now_ns.saturating_sub(last) / 1000).clamp(1, u64::from(u32::MAX)) as u32;
                    self.content_gaps_us.push(gap_us);
                }
            }
        }
        self.last_content_ns = Some(now_ns);
        self.content_events += 1;
    }

    fn fail_check(&mut self, why: String) {
        if self.failed_check.is_none() {
            self.failed_check = Some(why);
        }
    }

    fn check_head(&mut self, status: u16, headers: &[(String, String)]) {
        let rule = Rc::clone(&self.rule);
        if let Some((name, value)) = &rule.header {
            let found = headers.iter().find(|(k, _)| k == name).map(|(_, v)| v);
            let ok = match (found, value) {
                (None, _) => false,
                (Some(_), None) => true,
                (Some(f), Some(v)) => f == v,
            };
            if !ok {
                self.fail_check(format!(
                    "header {name} is {found:?}, expected {}",
                    value.as_deref().unwrap_or("present")
                ));
            }
        }
        if let Some(expected) = self.rule.status {
            if (200..300).contains(&status) && expected != status {
                self.fail_check(format!("status {status}, expected {expected}"));
            }
        }
    }

    /// The JSON-field rule: `model` is read from the typed chunk (the Responses API's from its
    /// response object); any other field (rare) from a generic parse of the raw text.
    fn check_field(&mut self, model: Option<&str>, raw: &str) {
        let rule = Rc::clone(&self.rule);
        let Some((field, expected)) = &rule.field else {
            return;
        };
        let found: Option<Cow<str>> = if field == "model" {
            model.map(Cow::Borrowed)
        } else {
            match serde_json::from_str::<Value>(raw) {
                Ok(value) if !value[field.as_str()].is_null() => Some(Cow::Owned(
                    value[field.as_str()]
                        .to_string()
                        .trim_matches('"')
                        .to_owned(),
                )),
                _ => None,
            }
        };
        // A chunk without the field (a bare usage chunk from some servers) is not checked.
        if let Some(found) = found {
            if found.as_ref() != expected.as_str() {
                self.fail_check(format!("{field} is {found:?}, expected {expected:?}"));
            }
        }
    }

    fn read_usage(&mut self, usage: Option<&UsageIn>) {
        let Some(usage) = usage else {
            return;
        };
        if let Some(n) = usage.prompt() {
            self.usage_prompt_tokens = u32::try_from(n).ok();
        }
        if let Some(n) = usage.completion() {
            self.usage_completion_tokens = u32::try_from(n).ok();
        }
        if let Some(n) = usage.reasoning() {
            self.output.reasoning_tokens = u32::try_from(n).ok();
        }
    }

    /// A non-streamed body, read whole at `now_ns`: one delivery of everything it generated.
    fn read_body(&mut self, now_ns: u64) -> Option<Verdict> {
        let body = std::mem::take(&mut self.body);
        let text = String::from_utf8_lossy(&body);
        let not_json = || {
            let what = match self.rule.api {
                Api::Responses => "response",
                Api::Chat | Api::Completions => "completion",
            };
            Some(Verdict::errored(
                "malformed-framing",
                format!("2xx body is not a JSON {what}"),
            ))
        };
        let answered = match self.rule.api {
            Api::Responses => {
                let Ok(response) = serde_json::from_str::<ResponseIn>(&text) else {
                    return not_json();
                };
                if response.error.is_some() || response.status.as_deref() == Some("failed") {
                    let shown: String = text.chars().take(120).collect();
                    return Some(Verdict::errored(
                        "http-status",
                        format!("the response failed: {shown}"),
                    ));
                }
                self.check_field(response.model.as_deref(), &text);
                self.read_usage(response.usage.as_ref());
                self.pieces_at(response.pieces(), now_ns)
            }
            Api::Chat | Api::Completions => {
                let Ok(chunk) = serde_json::from_str::<ChunkIn>(&text) else {
                    return not_json();
                };
                self.check_field(chunk.model.as_deref(), &text);
                self.read_usage(chunk.usage.as_ref());
                self.pieces_at(chunk.pieces(), now_ns)
            }
        };
        if answered {
            self.content_events = 1;
            self.first_content_ns = Some(now_ns);
        }
        None
    }

    /// Takes every piece of a body at `now_ns`; whether any of them was answer text.
    fn pieces_at(&mut self, pieces: Vec<Piece>, now_ns: u64) -> bool {
        let mut answered = false;
        for piece in pieces {
            answered |= matches!(piece, Piece::Text(OutputKind::Answer, _));
            self.piece(piece, now_ns, false);
        }
        answered
    }

    /// The structured checks (`verify.structured`): the answer against the format's schema
    /// (when an answer came, or nothing at all did), each tool call's arguments against its
    /// function's parameters.
    fn check_structured(&mut self) {
        let rule = Rc::clone(&self.rule);
        let Some(structured) = rule.structured_at(self.slot) else {
            return;
        };
        let calls = self.calls.take().unwrap_or_default();
        if let (Some(schema), Some(answer)) = (&structured.answer, self.answer.take()) {
            if !answer.is_empty() || calls.is_empty() {
                if let Err(e) = schema.check_text(&answer) {
                    self.fail_check(format!("the answer does not match its schema: {e}"));
                }
            }
        }
        for (index, name, arguments) in calls {
            match structured.functions.iter().find(|(n, _)| *n == name) {
                None => self.fail_check(format!(
                    "tool call {index} names {name:?}, which is not one of the route's tools"
                )),
                Some((_, schema)) => {
                    if let Err(e) = schema.check_text(&arguments) {
                        self.fail_check(format!(
                            "tool call {index} ({name}): its arguments do not match the function's parameters: {e}"
                        ));
                    }
                }
            }
        }
    }

    /// The verdict once the connection is done with: `ended` says whether the body ended as
    /// framed (false: the peer closed first). `transport` is an I/O failure, if one happened.
    pub fn finish(&mut self, ended: bool, transport: Option<Verdict>, now_ns: u64) -> Verdict {
        if let Some(verdict) = self.decided.take() {
            return verdict;
        }
        if let Some(verdict) = transport {
            return verdict;
        }
        if self.status.is_none() {
            return Verdict::errored("premature-close", "connection closed before a response");
        }
        if !ended {
            return Verdict::errored("premature-close", "connection closed before the body's end");
        }
        if self.streaming {
            if !self.done_marker {
                let end = match self.rule.api {
                    Api::Responses => "response.completed",
                    Api::Chat | Api::Completions => "data: [DONE]",
                };
                return Verdict::errored("malformed-sse", format!("stream ended without {end}"));
            }
        } else if let Some(verdict) = self.read_body(now_ns) {
            return verdict;
        }
        if let (Some(expected), Some(hasher)) = (self.rule.content_blake3, self.content.as_ref()) {
            let found = hasher.finalize();
            if *found.as_bytes() != expected {
                self.fail_check(format!(
                    "content BLAKE3 {} is not the expected one",
                    found.to_hex()
                ));
            }
        }
        self.check_structured();
        if let Some(why) = self.failed_check.take() {
            return Verdict::errored("incorrect-success", why);
        }
        Verdict {
            outcome: Outcome::Completed,
            class: "correct-success",
            detail: String::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(status: u16, headers: &[(&str, &str)]) -> Event {
        Event::Head {
            status,
            headers: headers
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        }
    }

    fn chunk(text: &str) -> String {
        format!("data: {{\"model\":\"mock\",\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"{text}\"}}}}]}}\n\n")
    }

    #[test]
    fn the_replica_is_read_from_the_configured_header_only_when_one_is_configured() {
        let headers = [
            ("x-percentes-upstream", "replica-0"),
            ("x-upstream", "10.0.0.12:8000"),
        ];
        let mut x = Exchange::new(false, None);
        x.on_http(head(200, &headers), 1_000);
        assert_eq!(x.replica, "replica-0", "the testbed's header by default");
        let rule = Rule {
            replica_header: Some("x-upstream".into()),
            ..Rule::default()
        };
        let mut x = Exchange::with_rule(false, rule.clone());
        x.on_http(head(200, &headers), 1_000);
        assert_eq!(x.replica, "10.0.0.12:8000");
        let mut x = Exchange::with_rule(false, rule);
        x.on_http(head(200, &headers[..1]), 1_000);
        assert_eq!(
            x.replica, "",
            "configured and absent: unattributed, not the mock's header"
        );
    }

    fn streamed(events: &[String], done: bool) -> (Exchange, Verdict) {
        let mut x = Exchange::new(true, Some("mock".into()));
        x.on_http(head(200, &[("x-percentes-replica", "replica-1")]), 1_000);
        for (i, e) in events.iter().enumerate() {
            x.on_http(
                Event::Data(e.clone().into_bytes()),
                2_000_000 + i as u64 * 5_000_000,
            );
        }
        if done {
            x.on_http(Event::Data(b"data: {\"model\":\"mock\",\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":2}}\n\ndata: [DONE]\n\n".to_vec()), 20_000_000);
        }
        x.on_http(Event::End, 20_000_001);
        let v = x.finish(true, None, 20_000_002);
        (x, v)
    }

    #[test]
    fn a_stream_completes_with_gaps_usage_and_replica() {
        let (x, v) = streamed(&[chunk("a"), chunk("b")], true);
        assert_eq!(v.class, "correct-success");
        assert_eq!(x.first_content_ns, Some(2_000_000));
        assert_eq!(x.content_gaps_us, [5_000]);
        assert_eq!(
            (
                x.content_events,
                x.usage_prompt_tokens,
                x.usage_completion_tokens
            ),
            (2, Some(3), Some(2))
        );
        assert_eq!(x.replica, "replica-1");
    }

    #[test]
    fn stream_failures_are_classified() {
        assert_eq!(streamed(&[chunk("a")], false).1.class, "malformed-sse");
        assert_eq!(
            streamed(&["data: {not json\n\n".into()], true).1.class,
            "malformed-sse"
        );
        let wrong =
            "data: {\"model\":\"stale-model\",\"choices\":[{\"delta\":{\"content\":\"x\"}}]}\n\n"
                .to_owned();
        let (_, v) = streamed(&[wrong], true);
        assert_eq!(v.class, "incorrect-success", "{v:?}");
        let mut x = Exchange::new(true, None);
        x.on_http(head(200, &[]), 1);
        x.on_http(Event::Data(b"data: \xc3\x28\n\n".to_vec()), 2);
        assert_eq!(x.finish(true, None, 3).class, "malformed-sse");
    }

    #[test]
    fn statuses_and_transport() {
        for (status, class) in [
            (429, "rejection"),
            (503, "rejection"),
            (502, "dependency-failure"),
            (504, "dependency-failure"),
            (500, "http-status"),
            (404, "http-status"),
        ] {
            let mut x = Exchange::new(true, None);
            x.on_http(head(status, &[]), 1);
            assert_eq!(x.finish(true, None, 2).class, class, "{status}");
        }
        let mut x = Exchange::new(true, None);
        assert_eq!(x.finish(false, None, 1).class, "premature-close");
        let mut x = Exchange::new(true, None);
        x.on_http(head(200, &[]), 1);
        assert_eq!(x.finish(false, None, 1).class, "premature-close");
        let mut x = Exchange::new(true, None);
        x.on_http(Event::Malformed("malformed status line".into()), 1);
        assert_eq!(x.finish(false, None, 2).class, "malformed-framing");
        let mut x = Exchange::new(true, None);
        x.on_http(head(200, &[]), 1);
        assert_eq!(
            x.finish(false, Some(Verdict::errored("reset", "ECONNRESET")), 2)
                .class,
            "reset"
        );
    }

    #[test]
    fn non_streaming_bodies() {
        let mut x = Exchange::new(false, Some("mock".into()));
        x.on_http(head(200, &[("connection", "close")]), 1);
        x.on_http(Event::Data(br#"{"model":"mock","choices":[{"message":{"content":"hi"}}],"usage":{"prompt_tokens":1,"completion_tokens":1}}"#.to_vec()), 2);
        x.on_http(Event::End, 3);
        assert_eq!(x.finish(true, None, 4).class, "correct-success");
        assert!(x.close_after);
        let mut x = Exchange::new(false, None);
        x.on_http(head(200, &[]), 1);
        x.on_http(Event::Data(b"<html>".to_vec()), 2);
        assert_eq!(x.finish(true, None, 3).class, "malformed-framing");
    }

    #[test]
    fn a_response_of_262k_events_makes_a_record_under_the_journal_limit() {
        // Before the cap, one response like this made a record over 1 MiB; the writer refused
        // it and stopped, and the recorder went on sending load unrecorded.
        use percentes_formats::journal::records::{Record, RequestRecord};
        let mut x = Exchange::new(true, Some("mock".into()));
        x.on_http(
            head(200, &[("x-percentes-replica", &"r".repeat(10_000))]),
            1,
        );
        let events = 262_144u64;
        let one = chunk("x");
        let mut batch = String::new();
        for i in 0..events {
            batch.push_str(&one);
            if i % 4096 == 4095 {
                x.on_http(
                    Event::Data(std::mem::take(&mut batch).into_bytes()),
                    1_000 + i * 3_000,
                );
            }
        }
        x.on_http(
            Event::Data(b"data: [DONE]\n\n".to_vec()),
            events * 3_000 + 2_000,
        );
        x.on_http(Event::End, events * 3_000 + 3_000);
        assert_eq!(
            x.finish(true, None, events * 3_000 + 4_000).class,
            "correct-success"
        );
        assert_eq!(x.content_events as u64, events);
        assert_eq!(x.content_gaps_us.len(), CONTENT_GAPS_MAX);
        assert_eq!(x.replica.len(), REPLICA_BYTES_MAX);
        let record = RequestRecord {
            content_gaps_us: x.content_gaps_us.clone(),
            content_events: x.content_events,
            replica: x.replica.clone(),
            detail: "d".repeat(DETAIL_BYTES_MAX),
            ..percentes_formats::journal::synthetic::request(0, 0, 0)
        };
        let body = Record::Request(record).encode_body();
        assert!(
            body.len() <= percentes_formats::journal::RECORD_BYTES_MAX as usize,
            "{} bytes",
            body.len()
        );
    }

    #[test]
    fn cut_keeps_whole_characters() {
        assert_eq!(cut("abc", 5), "abc");
        assert_eq!(cut("héllo", 2), "h");
        assert_eq!(cut("héllo", 3), "hé");
    }

    #[test]
    fn sub_microsecond_gaps_are_floored_to_one() {
        let mut x = Exchange::new(true, None);
        x.on_http(head(200, &[]), 1);
        x.on_http(
            Event::Data(format!("{}{}", chunk("a"), chunk("b")).into_bytes()),
            10,
        );
        assert_eq!(x.content_gaps_us, [1]);
    }
}

/// The streams of today's models (issue 49): every kind of generated output is timed and
/// counted, each API's way of ending is understood, and a structured answer is checked.
#[cfg(test)]
mod stream_tests {
    use super::*;
    use percentes_formats::config::parts::Api;

    fn head() -> Event {
        Event::Head {
            status: 200,
            headers: vec![("x-percentes-replica".into(), "r0".into())],
        }
    }

    fn delta(field: &str, text: &str) -> String {
        format!("data: {{\"model\":\"m\",\"choices\":[{{\"index\":0,\"delta\":{{\"{field}\":\"{text}\"}}}}]}}\n\n")
    }

    /// `events` fed one read each, `ms` apart from 10 ms on; then the end.
    fn run(rule: Rule, events: &[String], end: &str) -> (Exchange, Verdict) {
        let mut x = Exchange::with_rule(true, rule);
        x.on_http(head(), 1_000_000);
        for (i, e) in events.iter().enumerate() {
            x.on_http(
                Event::Data(e.clone().into_bytes()),
                10_000_000 + i as u64 * 10_000_000,
            );
        }
        x.on_http(Event::Data(end.as_bytes().to_vec()), 900_000_000);
        x.on_http(Event::End, 900_000_001);
        let v = x.finish(true, None, 900_000_002);
        (x, v)
    }

    fn chat() -> Rule {
        Rule::model("m")
    }

    const USAGE_DONE: &str = "data: {\"model\":\"m\",\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":4,\"completion_tokens_details\":{\"reasoning_tokens\":2}}}\n\ndata: [DONE]\n\n";

    #[test]
    fn reasoning_then_answer_times_both_and_counts_reasoning_tokens() {
        let events = [
            delta("reasoning_content", "a"),
            delta("reasoning", "b"),
            delta("content", "c"),
            delta("content", "d"),
        ];
        let (x, v) = run(chat(), &events, USAGE_DONE);
        assert_eq!(v.class, "correct-success");
        // The request record keeps its meaning: the first answer content and its gaps.
        assert_eq!(x.first_content_ns, Some(30_000_000));
        assert_eq!(
            (x.content_events, x.content_gaps_us.clone()),
            (2, vec![10_000])
        );
        let r = x.stream_record(7).unwrap();
        assert_eq!(r.first_ns(), Some(10_000_000));
        assert_eq!(r.tally(OutputKind::Reasoning).unwrap().deltas, 2);
        assert_eq!(r.tally(OutputKind::Answer).unwrap().first_ns, 30_000_000);
        assert_eq!(r.reasoning_tokens, Some(2));
        assert_eq!(r.deliveries_total, 4);
        assert_eq!(x.usage_completion_tokens, Some(4));
    }

    #[test]
    fn a_tool_call_only_stream_completes_with_its_first_delta_timed() {
        let first = "data: {\"model\":\"m\",\"choices\":[{\"delta\":{\"content\":null,\"tool_calls\":[{\"index\":0,\"id\":\"c\",\"type\":\"function\",\"function\":{\"name\":\"f\",\"arguments\":\"\"}}]}}]}\n\n".to_owned();
        let piece = |a: &str| {
            format!("data: {{\"model\":\"m\",\"choices\":[{{\"delta\":{{\"tool_calls\":[{{\"index\":0,\"function\":{{\"arguments\":\"{a}\"}}}}]}}}}]}}\n\n")
        };
        let events = [first, piece("{\\\"q\\\": "), piece("1}")];
        let (x, v) = run(chat(), &events, "data: [DONE]\n\n");
        assert_eq!(v.class, "correct-success");
        assert_eq!((x.first_content_ns, x.content_events), (None, 0));
        let r = x.stream_record(0).unwrap();
        assert_eq!(r.first_ns(), Some(10_000_000));
        assert_eq!(r.tally(OutputKind::ToolCall).unwrap().deltas, 3);
        assert!(r.tally(OutputKind::Answer).is_none());
    }

    fn responses() -> Rule {
        Rule {
            api: Api::Responses,
            ..Rule::model("m")
        }
    }

    fn event(kind: &str, rest: &str) -> String {
        format!("event: {kind}\ndata: {{\"type\":\"{kind}\"{rest}}}\n\n")
    }

    #[test]
    fn a_responses_api_stream_ends_at_its_completed_event() {
        let events = [
            event(
                "response.created",
                ",\"response\":{\"model\":\"m\",\"status\":\"in_progress\"}",
            ),
            event(
                "response.reasoning_text.delta",
                ",\"delta\":\"hm\",\"output_index\":0",
            ),
            event(
                "response.output_text.delta",
                ",\"delta\":\"so\",\"output_index\":1",
            ),
        ];
        let completed = event(
            "response.completed",
            ",\"response\":{\"model\":\"m\",\"status\":\"incomplete\",\"usage\":{\"input_tokens\":5,\"output_tokens\":2,\"output_tokens_details\":{\"reasoning_tokens\":1}}}",
        );
        let (x, v) = run(responses(), &events, &completed);
        assert_eq!(v.class, "correct-success", "{v:?}");
        assert_eq!(x.first_content_ns, Some(30_000_000));
        assert_eq!(
            (x.usage_prompt_tokens, x.usage_completion_tokens),
            (Some(5), Some(2))
        );
        let r = x.stream_record(0).unwrap();
        assert_eq!(
            (r.first_ns(), r.reasoning_tokens),
            (Some(20_000_000), Some(1))
        );
        // Without its completed event the stream did not end whole; a failed response errs.
        let (_, v) = run(responses(), &events, "");
        assert_eq!(
            (v.class, v.detail.as_str()),
            ("malformed-sse", "stream ended without response.completed")
        );
        let (_, v) = run(
            responses(),
            &events,
            &event("response.failed", ",\"response\":{\"status\":\"failed\"}"),
        );
        assert_eq!(v.class, "http-status");
        // The model is checked where the Responses API names it.
        let wrong = [event(
            "response.created",
            ",\"response\":{\"model\":\"stale\"}",
        )];
        let (_, v) = run(responses(), &wrong, &completed);
        assert_eq!(v.class, "incorrect-success");
    }

    fn structured(answer: Option<serde_json::Value>) -> Rule {
        use percentes_formats::config::schema::Schema;
        let parameters = serde_json::json!({"type": "object", "properties": {"q": {"type": "integer"}}, "required": ["q"]});
        Rule {
            structured: Some(Structured {
                answer: answer.map(|a| Schema::compile(&a).unwrap()),
                functions: vec![("f".into(), Schema::compile(&parameters).unwrap())],
            }),
            ..Rule::model("m")
        }
    }

    #[test]
    fn a_structured_answer_and_each_call_are_checked_against_their_schemas() {
        let schema = serde_json::json!({"type": "object", "required": ["answer"]});
        let answer = |text: &str| vec![delta("content", text)];
        let (_, v) = run(
            structured(Some(schema.clone())),
            &answer("{\\\"answer\\\": 1}"),
            "data: [DONE]\n\n",
        );
        assert_eq!(v.class, "correct-success", "{v:?}");
        let (_, v) = run(
            structured(Some(schema.clone())),
            &answer("{\\\"other\\\": 1}"),
            "data: [DONE]\n\n",
        );
        assert_eq!(v.class, "incorrect-success");
        assert!(
            v.detail
                .contains("the required property \"answer\" is missing"),
            "{v:?}"
        );
        let (_, v) = run(
            structured(Some(schema)),
            &answer("not json"),
            "data: [DONE]\n\n",
        );
        assert!(v.detail.contains("not JSON"), "{v:?}");
        let call = |name: &str, args: &str| {
            vec![format!("data: {{\"model\":\"m\",\"choices\":[{{\"delta\":{{\"tool_calls\":[{{\"index\":0,\"function\":{{\"name\":\"{name}\",\"arguments\":\"{args}\"}}}}]}}}}]}}\n\n")]
        };
        let (_, v) = run(
            structured(None),
            &call("f", "{\\\"q\\\": 3}"),
            "data: [DONE]\n\n",
        );
        assert_eq!(v.class, "correct-success", "{v:?}");
        let (_, v) = run(
            structured(None),
            &call("f", "{\\\"q\\\": \\\"x\\\"}"),
            "data: [DONE]\n\n",
        );
        assert!(
            v.detail
                .contains("tool call 0 (f): its arguments do not match"),
            "{v:?}"
        );
        let (_, v) = run(structured(None), &call("g", "{}"), "data: [DONE]\n\n");
        assert!(
            v.detail
                .contains("\"g\", which is not one of the route's tools"),
            "{v:?}"
        );
    }

    /// Where a prompt file's lines carry their own parts, the request is checked by its
    /// prompt's: prompt c by entry c mod n, and an entry of none checks nothing.
    #[test]
    fn a_request_is_checked_by_the_parts_of_the_prompt_it_sends() {
        use std::sync::Arc;
        let with_format = structured(Some(serde_json::json!({"type": "object"})))
            .structured
            .map(Arc::new);
        let rule = Rc::new(Rule {
            by_prompt: vec![with_format, None],
            ..Rule::model("m")
        });
        let answer = |prompt: u64| {
            let mut x = Exchange::with_rule(true, Rc::clone(&rule)).prompt(prompt);
            x.on_http(head(), 1_000);
            x.on_http(
                Event::Data(delta("content", "not json").into_bytes()),
                2_000,
            );
            x.on_http(Event::Data(b"data: [DONE]\n\n".to_vec()), 3_000);
            x.on_http(Event::End, 3_001);
            x.finish(true, None, 3_002)
        };
        assert_eq!(answer(0).class, "incorrect-success");
        assert_eq!(answer(1).class, "correct-success");
        assert_eq!(
            answer(4).class,
            "incorrect-success",
            "4 mod 2 is prompt 0's"
        );
    }

    #[test]
    fn a_non_streamed_tool_call_is_one_delivery_and_output_after_the_deadline_is_left_out() {
        let mut x = Exchange::with_rule(false, chat());
        x.on_http(head(), 1_000);
        x.on_http(Event::Data(br#"{"model":"m","choices":[{"message":{"content":null,"reasoning_content":"r","tool_calls":[{"index":0,"function":{"name":"f","arguments":"{}"}}]}}],"usage":{"prompt_tokens":1,"completion_tokens":5}}"#.to_vec()), 2_000);
        x.on_http(Event::End, 3_000);
        assert_eq!(x.finish(true, None, 4_000).class, "correct-success");
        let r = x.stream_record(0).unwrap();
        assert_eq!(
            (r.deliveries_total, r.deltas(), r.first_ns()),
            (1, 2, Some(4_000))
        );
        assert_eq!(x.content_events, 0);
        let mut late = Exchange::with_rule(true, chat()).until(15_000_000);
        late.on_http(head(), 1_000);
        late.on_http(Event::Data(delta("content", "a").into_bytes()), 10_000_000);
        late.on_http(Event::Data(delta("content", "b").into_bytes()), 20_000_000);
        assert_eq!(late.stream_record(0).unwrap().deltas(), 1);
    }
}

#[cfg(test)]
mod rule_tests {
    use super::*;

    fn run(rule: Rule, headers: &[(&str, &str)], status: u16) -> Verdict {
        let mut x = Exchange::with_rule(true, rule);
        let headers = headers
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        x.on_http(Event::Head { status, headers }, 1);
        let body = "data: {\"model\":\"mock\",\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\ndata: [DONE]\n\n";
        x.on_http(Event::Data(body.as_bytes().to_vec()), 2);
        x.on_http(Event::End, 3);
        x.finish(true, None, 4)
    }

    #[test]
    fn each_rule_passes_and_fails() {
        assert_eq!(run(Rule::model("mock"), &[], 200).class, "correct-success");
        assert_eq!(
            run(Rule::model("other"), &[], 200).class,
            "incorrect-success"
        );
        let status = Rule {
            status: Some(200),
            ..Rule::default()
        };
        assert_eq!(run(status.clone(), &[], 200).class, "correct-success");
        assert_eq!(run(status, &[], 203).class, "incorrect-success");
        let header = Rule {
            header: Some(("x-cache".into(), Some("HIT".into()))),
            ..Rule::default()
        };
        assert_eq!(
            run(header.clone(), &[("x-cache", "HIT")], 200).class,
            "correct-success"
        );
        assert_eq!(
            run(header.clone(), &[("x-cache", "MISS")], 200).class,
            "incorrect-success"
        );
        assert_eq!(run(header, &[], 200).class, "incorrect-success");
        let digest = Rule {
            content_blake3: Some(*blake3::hash(b"hi").as_bytes()),
            ..Rule::default()
        };
        assert_eq!(run(digest, &[], 200).class, "correct-success");
        let digest = Rule {
            content_blake3: Some(*blake3::hash(b"stale").as_bytes()),
            ..Rule::default()
        };
        let verdict = run(digest, &[], 200);
        assert_eq!(verdict.class, "incorrect-success");
        assert!(verdict.detail.contains("BLAKE3"), "{verdict:?}");
    }
}
