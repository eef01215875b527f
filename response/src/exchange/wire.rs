//! What the recorder reads of a response's JSON, borrowed where the text needs no unescaping so a
//! token costs no allocation; every other field is skipped unread. Two shapes: a Chat Completions
//! or Completions chunk (or non-streamed body), and a Responses API event (or non-streamed
//! response). Each names the generated output it carries as [`Piece`]s (formats/JOURNAL.md "8
//! stream": which delta is which kind).

use std::borrow::Cow;

use percentes_formats::journal::stream::OutputKind;
use serde::de::IgnoredAny;
use serde::Deserialize;

/// One piece of generated output.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Piece<'c> {
    /// Text of a kind: answer, reasoning or refusal.
    Text(OutputKind, &'c str),
    /// A tool call's name, or a piece of its arguments, by the call's index in the response.
    Tool {
        /// The call's index (`tool_calls[].index`, or the Responses API's `output_index`).
        index: u32,
        /// Its function's name, on the piece that carries it.
        name: Option<&'c str>,
        /// A piece of its arguments (JSON text, whole only once every piece arrived).
        arguments: &'c str,
    },
}

impl Piece<'_> {
    /// The kind of output it is.
    pub(crate) fn kind(&self) -> OutputKind {
        match self {
            Piece::Text(kind, _) => *kind,
            Piece::Tool { .. } => OutputKind::ToolCall,
        }
    }
}

/// A Chat Completions or Completions chunk, or a non-streamed body.
#[derive(Deserialize)]
pub(crate) struct ChunkIn<'a> {
    #[serde(borrow, default)]
    pub(crate) model: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    choices: Option<Vec<ChoiceIn<'a>>>,
    #[serde(default)]
    pub(crate) usage: Option<UsageIn>,
    #[serde(default)]
    pub(crate) error: Option<IgnoredAny>,
}

#[derive(Deserialize)]
struct ChoiceIn<'a> {
    #[serde(borrow, default)]
    delta: Option<MessageIn<'a>>,
    #[serde(borrow, default)]
    message: Option<MessageIn<'a>>,
    #[serde(borrow, default)]
    text: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct MessageIn<'a> {
    #[serde(borrow, default)]
    content: Option<Cow<'a, str>>,
    /// vLLM before 0.10, SGLang and DeepSeek's API.
    #[serde(borrow, default)]
    reasoning_content: Option<Cow<'a, str>>,
    /// vLLM from 0.10 on.
    #[serde(borrow, default)]
    reasoning: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    refusal: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    tool_calls: Option<Vec<ToolCallIn<'a>>>,
}

#[derive(Deserialize)]
struct ToolCallIn<'a> {
    #[serde(default)]
    index: Option<u32>,
    #[serde(borrow, default)]
    function: Option<FunctionIn<'a>>,
}

#[derive(Deserialize)]
struct FunctionIn<'a> {
    #[serde(borrow, default)]
    name: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    arguments: Option<Cow<'a, str>>,
}

/// A response's usage, in either API's names.
#[derive(Deserialize)]
pub(crate) struct UsageIn {
    #[serde(default)]
    prompt_tokens: Option<u64>,
    #[serde(default)]
    completion_tokens: Option<u64>,
    #[serde(default)]
    input_tokens: Option<u64>,
    #[serde(default)]
    output_tokens: Option<u64>,
    #[serde(default)]
    completion_tokens_details: Option<DetailsIn>,
    #[serde(default)]
    output_tokens_details: Option<DetailsIn>,
}

#[derive(Deserialize)]
struct DetailsIn {
    #[serde(default)]
    reasoning_tokens: Option<u64>,
}

impl UsageIn {
    /// Prompt (input) tokens.
    pub(crate) fn prompt(&self) -> Option<u64> {
        self.prompt_tokens.or(self.input_tokens)
    }

    /// Completion (output) tokens: every generated token, reasoning included.
    pub(crate) fn completion(&self) -> Option<u64> {
        self.completion_tokens.or(self.output_tokens)
    }

    /// The reasoning tokens among them.
    pub(crate) fn reasoning(&self) -> Option<u64> {
        self.completion_tokens_details
            .as_ref()
            .or(self.output_tokens_details.as_ref())
            .and_then(|d| d.reasoning_tokens)
    }
}

fn text<'c>(kind: OutputKind, value: &'c Option<Cow<'_, str>>) -> Option<Piece<'c>> {
    value
        .as_deref()
        .filter(|t| !t.is_empty())
        .map(|t| Piece::Text(kind, t))
}

impl ChunkIn<'_> {
    /// The first choice's generated pieces, reasoning before the answer (the order a chunk that
    /// carries both was generated in).
    pub(crate) fn pieces(&self) -> Vec<Piece<'_>> {
        let mut out = Vec::new();
        let Some(choice) = self.choices.as_ref().and_then(|c| c.first()) else {
            return out;
        };
        if let Some(m) = choice.delta.as_ref().or(choice.message.as_ref()) {
            out.extend(text(OutputKind::Reasoning, &m.reasoning_content));
            out.extend(text(OutputKind::Reasoning, &m.reasoning));
            out.extend(text(OutputKind::Answer, &m.content));
            out.extend(text(OutputKind::Refusal, &m.refusal));
            for (k, call) in m.tool_calls.iter().flatten().enumerate() {
                let function = call.function.as_ref();
                let name = function
                    .and_then(|f| f.name.as_deref())
                    .filter(|n| !n.is_empty());
                let arguments = function
                    .and_then(|f| f.arguments.as_deref())
                    .unwrap_or_default();
                if name.is_some() || !arguments.is_empty() {
                    out.push(Piece::Tool {
                        index: call.index.unwrap_or(k as u32),
                        name,
                        arguments,
                    });
                }
            }
        }
        out.extend(text(OutputKind::Answer, &choice.text));
        out
    }
}

/// One Responses API event (the `data` of `event: response.…`).
#[derive(Deserialize)]
pub(crate) struct EventIn<'a> {
    #[serde(borrow, default, rename = "type")]
    pub(crate) kind: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    delta: Option<Cow<'a, str>>,
    #[serde(default)]
    output_index: Option<u32>,
    #[serde(borrow, default)]
    pub(crate) response: Option<ResponseIn<'a>>,
    #[serde(borrow, default)]
    item: Option<ItemIn<'a>>,
}

/// A Responses API response object: in `response.created`, `response.completed` and the like, or
/// a non-streamed body.
#[derive(Deserialize)]
pub(crate) struct ResponseIn<'a> {
    #[serde(borrow, default)]
    pub(crate) model: Option<Cow<'a, str>>,
    #[serde(default)]
    pub(crate) usage: Option<UsageIn>,
    #[serde(borrow, default)]
    pub(crate) status: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    output: Option<Vec<ItemIn<'a>>>,
    #[serde(default)]
    pub(crate) error: Option<IgnoredAny>,
}

#[derive(Deserialize)]
struct ItemIn<'a> {
    #[serde(borrow, default, rename = "type")]
    kind: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    name: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    arguments: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    content: Option<Vec<PartIn<'a>>>,
    #[serde(borrow, default)]
    summary: Option<Vec<PartIn<'a>>>,
}

#[derive(Deserialize)]
struct PartIn<'a> {
    #[serde(borrow, default, rename = "type")]
    kind: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    text: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    refusal: Option<Cow<'a, str>>,
}

impl EventIn<'_> {
    /// The generated piece a delta event carries; a function call's item when it is added (its
    /// name is generated output too).
    pub(crate) fn piece(&self) -> Option<Piece<'_>> {
        let delta = self.delta.as_deref().unwrap_or_default();
        let index = self.output_index.unwrap_or(0);
        let kind = match self.kind.as_deref()? {
            "response.output_text.delta" => OutputKind::Answer,
            "response.reasoning_text.delta" | "response.reasoning_summary_text.delta" => {
                OutputKind::Reasoning
            }
            "response.refusal.delta" => OutputKind::Refusal,
            "response.function_call_arguments.delta" | "response.custom_tool_call_input.delta" => {
                return (!delta.is_empty()).then_some(Piece::Tool {
                    index,
                    name: None,
                    arguments: delta,
                })
            }
            "response.output_item.added" => {
                let item = self.item.as_ref()?;
                let name = item.name.as_deref().filter(|n| !n.is_empty());
                return (item.kind.as_deref() == Some("function_call") && name.is_some())
                    .then_some(Piece::Tool {
                        index,
                        name,
                        arguments: item.arguments.as_deref().unwrap_or_default(),
                    });
            }
            _ => return None,
        };
        (!delta.is_empty()).then_some(Piece::Text(kind, delta))
    }
}

impl ResponseIn<'_> {
    /// A non-streamed response's generated pieces, in its output's order.
    pub(crate) fn pieces(&self) -> Vec<Piece<'_>> {
        let mut out = Vec::new();
        for (index, item) in self.output.iter().flatten().enumerate() {
            match item.kind.as_deref() {
                Some("function_call") => out.push(Piece::Tool {
                    index: index as u32,
                    name: item.name.as_deref(),
                    arguments: item.arguments.as_deref().unwrap_or_default(),
                }),
                Some("reasoning") => {
                    for part in item.content.iter().chain(&item.summary).flatten() {
                        out.extend(text(OutputKind::Reasoning, &part.text));
                    }
                }
                Some("message") => {
                    for part in item.content.iter().flatten() {
                        match part.kind.as_deref() {
                            Some("refusal") => out.extend(text(OutputKind::Refusal, &part.refusal)),
                            _ => out.extend(text(OutputKind::Answer, &part.text)),
                        }
                    }
                }
                _ => {}
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunk(json: &str) -> Vec<(OutputKind, String)> {
        let c: ChunkIn = serde_json::from_str(json).unwrap();
        c.pieces()
            .iter()
            .map(|p| match p {
                Piece::Text(k, t) => (*k, t.to_string()),
                Piece::Tool {
                    index,
                    name,
                    arguments,
                } => (
                    OutputKind::ToolCall,
                    format!("{index}:{}:{arguments}", name.unwrap_or("")),
                ),
            })
            .collect()
    }

    #[test]
    fn every_delta_kind_of_a_chat_chunk_is_read() {
        use OutputKind::*;
        assert_eq!(
            chunk(r#"{"choices":[{"delta":{"reasoning_content":"think"}}]}"#),
            [(Reasoning, "think".into())]
        );
        assert_eq!(
            chunk(r#"{"choices":[{"delta":{"reasoning":"a","content":"b"}}]}"#),
            [(Reasoning, "a".into()), (Answer, "b".into())]
        );
        assert_eq!(
            chunk(
                r#"{"choices":[{"delta":{"content":null,"tool_calls":[{"index":0,"id":"c1","type":"function","function":{"name":"get_weather","arguments":""}}]}}]}"#
            ),
            [(ToolCall, "0:get_weather:".into())]
        );
        assert_eq!(
            chunk(
                r#"{"choices":[{"delta":{"tool_calls":[{"index":1,"function":{"arguments":"{\"ci"}}]}}]}"#
            ),
            [(ToolCall, "1::{\"ci".into())]
        );
        assert_eq!(
            chunk(r#"{"choices":[{"delta":{"role":"assistant","content":""}}]}"#),
            []
        );
        assert_eq!(
            chunk(r#"{"choices":[{"delta":{"refusal":"no"}}]}"#),
            [(Refusal, "no".into())]
        );
        assert_eq!(
            chunk(r#"{"choices":[{"text":"t"}]}"#),
            [(Answer, "t".into())]
        );
        assert_eq!(
            chunk(r#"{"choices":[{"message":{"content":"x","reasoning":"r"}}]}"#),
            [(Reasoning, "r".into()), (Answer, "x".into())]
        );
    }

    #[test]
    fn usage_in_either_api_names_its_reasoning_tokens() {
        let u: UsageIn = serde_json::from_str(
            r#"{"prompt_tokens":5,"completion_tokens":30,"completion_tokens_details":{"reasoning_tokens":20}}"#,
        )
        .unwrap();
        assert_eq!(
            (u.prompt(), u.completion(), u.reasoning()),
            (Some(5), Some(30), Some(20))
        );
        let u: UsageIn = serde_json::from_str(
            r#"{"input_tokens":5,"output_tokens":30,"output_tokens_details":{"reasoning_tokens":0},"completion_tokens_details":null}"#,
        )
        .unwrap();
        assert_eq!(
            (u.prompt(), u.completion(), u.reasoning()),
            (Some(5), Some(30), Some(0))
        );
    }

    #[test]
    fn responses_events_and_bodies_name_their_pieces() {
        let e: EventIn = serde_json::from_str(
            r#"{"type":"response.reasoning_text.delta","delta":"hm","output_index":0,"item_id":"r","sequence_number":3}"#,
        )
        .unwrap();
        assert_eq!(e.piece(), Some(Piece::Text(OutputKind::Reasoning, "hm")));
        let e: EventIn = serde_json::from_str(
            r#"{"type":"response.output_item.added","output_index":1,"item":{"type":"function_call","name":"f","arguments":"","call_id":"c"}}"#,
        )
        .unwrap();
        assert_eq!(
            e.piece(),
            Some(Piece::Tool {
                index: 1,
                name: Some("f"),
                arguments: ""
            })
        );
        let e: EventIn = serde_json::from_str(
            r#"{"type":"response.output_item.added","output_index":0,"item":{"type":"message","content":[]}}"#,
        )
        .unwrap();
        assert_eq!(e.piece(), None);
        let r: ResponseIn = serde_json::from_str(
            r#"{"model":"m","status":"completed","error":null,"output":[{"type":"reasoning","content":[{"type":"reasoning_text","text":"why"}],"summary":[]},{"type":"message","content":[{"type":"output_text","text":"so"}]}],"usage":{"input_tokens":3,"output_tokens":2}}"#,
        )
        .unwrap();
        assert_eq!(
            r.pieces(),
            [
                Piece::Text(OutputKind::Reasoning, "why"),
                Piece::Text(OutputKind::Answer, "so")
            ]
        );
        assert!(r.error.is_none());
    }
}
