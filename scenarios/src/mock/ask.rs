//! What a completion request asks for, read from its body, and the answer the mock plans for
//! it: its tokens, usage and end; and that answer as the events a stream carries
//! ([`streamed`]), for a simulated target that sends the mock's own bytes.

use serde_json::Value;

use super::output::{self, Api, Encoder, Kind, Shape};
use super::MAX_TOKENS_MAX;
use crate::config::MockConfig;
use crate::timing::Rng;

/// What a completion request asks for.
pub(super) struct Ask {
    pub(super) max_tokens: u32,
    pub(super) stream: bool,
    pub(super) ignore_eos: bool,
    pub(super) prompt_tokens: u32,
    /// `stream_options.include_usage`: a streamed response ends with a usage chunk only when
    /// asked, as OpenAI's and vLLM's servers do.
    pub(super) include_usage: bool,
    /// Tools, a forced call, a JSON format.
    pub(super) shape: Shape,
}

/// The text of a message's content: a string, or the text parts of a list (images and other
/// parts are read past).
fn content_text(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join(" "),
        _ => String::new(),
    }
}

/// The request's ask, or the mock's 400 (its sentence is the answer's error message).
pub(super) fn parse_ask(body: &[u8], api: Api) -> Result<Ask, crate::error::Error> {
    use crate::error::Error;
    let value: Value = serde_json::from_slice(body)
        .map_err(|e| Error::refused(format!("body is not JSON: {e}")))?;
    let prompt_text = match api {
        Api::Chat => value["messages"]
            .as_array()
            .ok_or_else(|| Error::refused("`messages` must be an array"))?
            .iter()
            .map(|m| content_text(&m["content"]))
            .collect::<Vec<_>>()
            .join(" "),
        Api::Completions => value["prompt"]
            .as_str()
            .ok_or_else(|| Error::refused("`prompt` must be a string"))?
            .to_owned(),
        Api::Responses => match &value["input"] {
            Value::String(s) => s.clone(),
            Value::Array(items) => items
                .iter()
                .map(|m| content_text(&m["content"]))
                .collect::<Vec<_>>()
                .join(" "),
            _ => {
                return Err(Error::refused(
                    "`input` must be a string or an array of items",
                ))
            }
        },
    };
    let field = if api == Api::Responses {
        "max_output_tokens"
    } else {
        "max_tokens"
    };
    let max_tokens = match &value[field] {
        Value::Null => 16,
        v => v
            .as_u64()
            .filter(|&n| (1..=u64::from(MAX_TOKENS_MAX)).contains(&n))
            .ok_or_else(|| Error::refused(format!("`{field}` must be 1..={MAX_TOKENS_MAX}")))?
            as u32,
    };
    Ok(Ask {
        max_tokens,
        stream: value["stream"].as_bool().unwrap_or(false),
        ignore_eos: value["ignore_eos"].as_bool().unwrap_or(false),
        prompt_tokens: prompt_text.split_whitespace().count().max(1) as u32,
        include_usage: value["stream_options"]["include_usage"]
            .as_bool()
            .unwrap_or(false),
        shape: Shape::of(&value, api),
    })
}

/// A response's tokens, fixed at arrival, its usage and why it ends when it ends whole.
pub(super) struct Planned {
    pub(super) plan: Vec<output::Token>,
    /// (prompt, completion, reasoning) tokens.
    pub(super) usage: (u32, u32, u32),
    pub(super) finish: &'static str,
}

impl Planned {
    /// The response to `ask` on `api`: its length (a structured answer, a forced call or a JSON
    /// format, is sized to max_tokens: its end is the structure's, which the mock places there,
    /// whether or not EOS is ignored; else drawn from `rng`), then its tokens (reasoning first,
    /// then a forced tool call, a JSON answer or text: `output::tokens`). `stale` is the
    /// incorrect-success sabotage.
    pub(super) fn of(
        config: &MockConfig,
        (api, ask): (Api, &Ask),
        rng: &mut Rng,
        stale: bool,
    ) -> Planned {
        let structured = ask.shape.tool.is_some() || ask.shape.answer_schema.is_some();
        let tokens = if ask.ignore_eos || structured {
            ask.max_tokens
        } else {
            let low = config.timing.min_output_tokens.clamp(1, ask.max_tokens);
            low + (rng.next_u64() % u64::from(ask.max_tokens - low + 1)) as u32
        };
        let plan = output::tokens(
            &ask.shape,
            api,
            (tokens, config.timing.reasoning_tokens),
            stale,
        );
        let tokens = plan.len() as u32;
        let reasoning = plan.iter().filter(|t| t.kind == Kind::Reasoning).count() as u32;
        // Cut at max_tokens, a tool call, or stopped before.
        let finish = if plan.iter().any(|t| t.kind == Kind::Tool) {
            "tool_calls"
        } else if ask.ignore_eos || tokens == ask.max_tokens {
            "length"
        } else {
            "stop"
        };
        Planned {
            plan,
            usage: (ask.prompt_tokens, tokens, reasoning),
            finish,
        }
    }
}

/// A streamed answer as the mock writes it, without its timing or its transport: each part is
/// one HTTP chunk's payload. For a simulated target (the recorder's `run::sim`), so that what
/// it delivers on virtual time is the mock's own bytes.
#[derive(Clone, Debug, Default)]
pub struct Streamed {
    /// The events before the first token (the Responses API's `response.created`; none in the
    /// others).
    pub prologue: Vec<u8>,
    /// Each token's event, and whether the token is reasoning (the mock spaces reasoning tokens
    /// by `timing.reasoning_gap`, the others by `timing.token_gap`).
    pub tokens: Vec<(Vec<u8>, bool)>,
    /// What ends the stream: the usage chunk when asked for and `data: [DONE]`, or the
    /// Responses API's `response.completed`.
    pub epilogue: Vec<u8>,
}

/// The streamed answer the mock under `config` would send to a POST of `body` to `path`, as
/// its request number `arrival` (which seeds its draws): the same tokens, kinds and events as
/// [`serve`](super::serve)'s, with no fault and no sabotage. Refused as the mock refuses a
/// request it answers with 400 or 404.
pub fn streamed(
    config: &MockConfig,
    path: &str,
    body: &[u8],
    arrival: u64,
) -> Result<Streamed, crate::error::Error> {
    let api = match path {
        "/v1/chat/completions" => Api::Chat,
        "/v1/completions" => Api::Completions,
        "/v1/responses" => Api::Responses,
        _ => return Err(crate::error::Error::refused(format!("no route {path}"))),
    };
    let ask = parse_ask(body, api)?;
    let mut rng = Rng::new(config.seed, arrival);
    let Planned {
        plan,
        usage,
        finish,
    } = Planned::of(config, (api, &ask), &mut rng, false);
    let mut encoder = Encoder::new(
        api,
        arrival,
        &config.model,
        config.timing.reasoning_field.name(),
    );
    let last = plan.len().saturating_sub(1);
    Ok(Streamed {
        prologue: encoder.prologue(),
        tokens: plan
            .iter()
            .enumerate()
            .map(|(i, t)| {
                let finish = (i == last).then_some(finish);
                (encoder.token(t, finish), t.kind == Kind::Reasoning)
            })
            .collect(),
        epilogue: encoder.epilogue(usage, ask.include_usage, finish),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reasoning model's stream as `streamed` gives it: the reasoning tokens marked and first,
    /// each token one event in the configured field, the usage and `[DONE]` at the end when
    /// asked for, and the Responses API's `response.created` before the first token.
    #[test]
    fn a_streamed_answer_marks_its_reasoning_and_ends_as_asked() {
        let mut config = MockConfig::constant(20.0, 10.0, 8);
        config.timing.reasoning_tokens = 3;
        let body = br#"{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 8, "ignore_eos": true, "stream": true, "stream_options": {"include_usage": true}}"#;
        let s = streamed(&config, "/v1/chat/completions", body, 5).unwrap();
        assert!(s.prologue.is_empty(), "Chat Completions has no prologue");
        let kinds: Vec<bool> = s.tokens.iter().map(|(_, r)| *r).collect();
        assert_eq!(kinds, [true, true, true, false, false, false, false, false]);
        let text = |b: &[u8]| String::from_utf8(b.to_vec()).unwrap();
        assert!(text(&s.tokens[0].0).contains(r#""reasoning_content":"think0 ""#));
        assert!(text(&s.tokens[3].0).contains(r#""content":"tok0 ""#));
        assert!(text(&s.tokens[7].0).contains(r#""finish_reason":"length""#));
        let end = text(&s.epilogue);
        assert!(end.contains(r#""reasoning_tokens":3"#) && end.ends_with("data: [DONE]\n\n"));
        // The same request on the Responses API opens with `response.created`.
        let body =
            br#"{"input": "hi", "max_output_tokens": 8, "ignore_eos": true, "stream": true}"#;
        let s = streamed(&config, "/v1/responses", body, 5).unwrap();
        assert!(text(&s.prologue).starts_with("event: response.created\n"));
        assert!(text(&s.epilogue).contains("response.completed"));
    }

    /// What the mock answers with 400 or 404 is refused, saying why.
    #[test]
    fn a_request_the_mock_would_refuse_is_refused() {
        let config = MockConfig::constant(20.0, 10.0, 8);
        let no_route = streamed(&config, "/v1/embeddings", b"{}", 0).unwrap_err();
        assert!(no_route.to_string().contains("no route"), "{no_route}");
        let not_json = streamed(&config, "/v1/chat/completions", b"{", 0).unwrap_err();
        assert!(not_json.to_string().contains("not JSON"), "{not_json}");
    }
}
