//! What a mock response generates, token by token, and how each API writes it: Chat Completions
//! chunks (`delta.content`, `delta.reasoning_content` or `delta.reasoning`, `delta.tool_calls`),
//! Completions text, and the Responses API's typed events (`response.reasoning_text.delta`,
//! `response.output_text.delta`, `response.function_call_arguments.delta`, `response.completed`).
//! The truth a test knows: a reasoning model's first `reasoning_tokens` tokens are reasoning, a
//! forced tool call (`tool_choice` required or naming a function) is the whole answer, and a
//! requested JSON format gets a JSON answer that matches the schema.

use serde_json::{json, Map, Value};

/// The API a request came in on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Api {
    Chat,
    Completions,
    Responses,
}

/// What one token of a response carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kind {
    Reasoning,
    Answer,
    /// A tool call: the first token names the function, the rest are pieces of its arguments.
    Tool,
}

/// One generated token.
#[derive(Clone, Debug)]
pub(super) struct Token {
    pub(super) kind: Kind,
    pub(super) text: String,
}

/// What a request asks for beyond plain text, read from its body.
#[derive(Clone, Debug, Default)]
pub(super) struct Shape {
    /// A forced tool call: the function's name and its parameters' schema.
    pub(super) tool: Option<(String, Value)>,
    /// A JSON answer: the schema it must match (`{"type": "object"}` for `json_object`).
    pub(super) answer_schema: Option<Value>,
}

impl Shape {
    /// The shape of a request body.
    pub(super) fn of(body: &Value, api: Api) -> Shape {
        let tools: Vec<(String, Value)> = body["tools"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|t| {
                let f = if api == Api::Responses {
                    t
                } else {
                    &t["function"]
                };
                Some((f["name"].as_str()?.to_owned(), f["parameters"].clone()))
            })
            .collect();
        let choice = &body["tool_choice"];
        let forced = match choice {
            Value::String(s) if s == "required" => tools.first().cloned(),
            Value::Object(_) => {
                let name = choice["function"]["name"]
                    .as_str()
                    .or(choice["name"].as_str())
                    .unwrap_or_default();
                tools.iter().find(|(n, _)| n == name).cloned()
            }
            _ => None,
        };
        let format = if api == Api::Responses {
            &body["text"]["format"]
        } else {
            &body["response_format"]
        };
        let answer_schema = match format["type"].as_str() {
            Some("json_object") => Some(json!({"type": "object"})),
            Some("json_schema") => Some(if api == Api::Responses {
                format["schema"].clone()
            } else {
                format["json_schema"]["schema"].clone()
            }),
            _ => None,
        };
        Shape {
            tool: forced,
            answer_schema,
        }
    }
}

/// A value that matches `schema` (the subset percentes checks), its strings made of `words`
/// words so that the whole is long enough to stream as many tokens as asked.
fn example(schema: &Value, root: &Value, words: usize, depth: usize) -> Value {
    if depth > 16 {
        return Value::Null;
    }
    if let Some(target) = schema["$ref"].as_str().and_then(|r| r.strip_prefix("#/")) {
        let mut at = root;
        for part in target.split('/') {
            at = &at[part];
        }
        return example(at, root, words, depth + 1);
    }
    if let Some(value) = schema.get("const") {
        return value.clone();
    }
    if let Some(first) = schema["enum"].as_array().and_then(|e| e.first()) {
        return first.clone();
    }
    if let Some(first) = schema["anyOf"]
        .as_array()
        .or(schema["oneOf"].as_array())
        .and_then(|e| e.first())
    {
        return example(first, root, words, depth + 1);
    }
    let kind = match &schema["type"] {
        Value::Array(types) => types.first().and_then(Value::as_str).unwrap_or("string"),
        Value::String(t) => t.as_str(),
        _ if schema["properties"].is_object() => "object",
        _ => "string",
    };
    match kind {
        "object" => {
            let mut map = Map::new();
            for (name, property) in schema["properties"].as_object().into_iter().flatten() {
                map.insert(name.clone(), example(property, root, words, depth + 1));
            }
            Value::Object(map)
        }
        "array" => {
            let n = schema["minItems"].as_u64().unwrap_or(1).max(1);
            let item = example(&schema["items"], root, words, depth + 1);
            Value::Array(vec![item; n as usize])
        }
        "integer" => json!(schema["minimum"].as_i64().unwrap_or(1)),
        "number" => json!(schema["minimum"].as_f64().unwrap_or(1.5)),
        "boolean" => json!(true),
        "null" => Value::Null,
        _ => {
            let text: Vec<String> = (0..words.max(1)).map(|i| format!("tok{i}")).collect();
            let mut text = text.join(" ");
            if let Some(max) = schema["maxLength"].as_u64() {
                text.truncate(max as usize);
            }
            Value::String(text)
        }
    }
}

/// `text` cut into at most `pieces` pieces of near-equal length, at character boundaries.
fn split(text: &str, pieces: usize) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    let pieces = pieces.clamp(1, chars.len().max(1));
    (0..pieces)
        .map(|k| {
            let (from, to) = (k * chars.len() / pieces, (k + 1) * chars.len() / pieces);
            chars[from..to].iter().collect()
        })
        .collect()
}

/// The tokens of one response: `reasoning` reasoning tokens first (none on Completions), then a
/// forced tool call, a JSON answer, or plain text, `tokens` in all where the content allows.
/// `stale` is the incorrect-success sabotage: every answer token is `stale `.
pub(super) fn tokens(
    shape: &Shape,
    api: Api,
    (tokens, reasoning): (u32, u32),
    stale: bool,
) -> Vec<Token> {
    let reasoning = if api == Api::Completions {
        0
    } else {
        reasoning.min(tokens)
    };
    let mut out: Vec<Token> = (0..reasoning)
        .map(|i| Token {
            kind: Kind::Reasoning,
            text: format!("think{i} "),
        })
        .collect();
    let rest = (tokens - reasoning) as usize;
    if rest == 0 {
        return out;
    }
    let words = rest / 2 + 1;
    match (&shape.tool, &shape.answer_schema) {
        (Some((name, parameters)), _) => {
            out.push(Token {
                kind: Kind::Tool,
                text: name.clone(),
            });
            if rest > 1 {
                let arguments = example(parameters, parameters, words, 0).to_string();
                out.extend(split(&arguments, rest - 1).into_iter().map(|text| Token {
                    kind: Kind::Tool,
                    text,
                }));
            }
        }
        // The incorrect-success sabotage answers stale text, JSON or not.
        (None, Some(schema)) if !stale => {
            let answer = example(schema, schema, words, 0).to_string();
            out.extend(split(&answer, rest).into_iter().map(|text| Token {
                kind: Kind::Answer,
                text,
            }));
        }
        (None, _) => out.extend((0..rest).map(|i| Token {
            kind: Kind::Answer,
            text: if stale {
                "stale ".into()
            } else {
                format!("tok{i} ")
            },
        })),
    }
    out
}

/// Writes a response's tokens as its API does.
#[derive(Debug)]
pub(super) struct Encoder {
    pub(super) api: Api,
    pub(super) id: u64,
    pub(super) model: String,
    /// `reasoning_content` (DeepSeek, SGLang, vLLM before 0.10) or `reasoning` (vLLM since).
    pub(super) reasoning_field: &'static str,
    /// The kind of the previous token, and how many output items have opened (Responses).
    last: Option<Kind>,
    items: u32,
}

impl Encoder {
    pub(super) fn new(api: Api, id: u64, model: &str, reasoning_field: &'static str) -> Encoder {
        Encoder {
            api,
            id,
            model: model.to_owned(),
            reasoning_field,
            last: None,
            items: 0,
        }
    }

    fn event(&self, value: &Value) -> Vec<u8> {
        match self.api {
            Api::Responses => format!(
                "event: {}\ndata: {value}\n\n",
                value["type"].as_str().unwrap_or("message")
            )
            .into_bytes(),
            Api::Chat | Api::Completions => format!("data: {value}\n\n").into_bytes(),
        }
    }

    fn chunk(&self, choices: Value) -> Value {
        json!({
            "id": format!("cmpl-{}", self.id),
            "object": if self.api == Api::Chat { "chat.completion.chunk" } else { "text_completion" },
            "created": 0,
            "model": self.model,
            "choices": choices,
        })
    }

    /// The events before the first token (the Responses API's `response.created`).
    pub(super) fn prologue(&self) -> Vec<u8> {
        match self.api {
            Api::Responses => self.event(&json!({
                "type": "response.created",
                "response": {"id": format!("resp-{}", self.id), "object": "response", "model": self.model, "status": "in_progress", "output": []},
            })),
            Api::Chat | Api::Completions => Vec::new(),
        }
    }

    /// The event of one token; `finish` on the last one (Chat Completions and Completions say
    /// why the response ended in it).
    pub(super) fn token(&mut self, token: &Token, finish: Option<&str>) -> Vec<u8> {
        let first_of_kind = self.last != Some(token.kind);
        let first = self.last.is_none();
        self.last = Some(token.kind);
        match self.api {
            Api::Completions => self.event(
                &self.chunk(json!([{"index": 0, "text": token.text, "finish_reason": finish}])),
            ),
            Api::Chat => {
                let mut delta = json!({});
                if first {
                    delta["role"] = json!("assistant");
                }
                match token.kind {
                    Kind::Reasoning => delta[self.reasoning_field] = json!(token.text),
                    Kind::Answer => delta["content"] = json!(token.text),
                    Kind::Tool if first_of_kind => {
                        delta["content"] = Value::Null;
                        delta["tool_calls"] = json!([{"index": 0, "id": format!("call-{}", self.id), "type": "function", "function": {"name": token.text, "arguments": ""}}]);
                    }
                    Kind::Tool => {
                        delta["tool_calls"] =
                            json!([{"index": 0, "function": {"arguments": token.text}}])
                    }
                }
                self.event(
                    &self.chunk(json!([{"index": 0, "delta": delta, "finish_reason": finish}])),
                )
            }
            Api::Responses => self.response_token(token, first_of_kind),
        }
    }

    fn response_token(&mut self, token: &Token, first_of_kind: bool) -> Vec<u8> {
        let mut out = Vec::new();
        if first_of_kind {
            self.items += 1;
            let item = match token.kind {
                Kind::Reasoning => json!({"type": "reasoning", "content": []}),
                Kind::Answer => json!({"type": "message", "role": "assistant", "content": []}),
                Kind::Tool => {
                    json!({"type": "function_call", "name": token.text, "arguments": "", "call_id": format!("call-{}", self.id)})
                }
            };
            out.extend(self.event(&json!({"type": "response.output_item.added", "output_index": self.items - 1, "item": item})));
            if token.kind == Kind::Tool {
                return out;
            }
        }
        let kind = match token.kind {
            Kind::Reasoning => "response.reasoning_text.delta",
            Kind::Answer => "response.output_text.delta",
            Kind::Tool => "response.function_call_arguments.delta",
        };
        out.extend(self.event(
            &json!({"type": kind, "output_index": self.items - 1, "content_index": 0, "delta": token.text}),
        ));
        out
    }

    /// `usage` in the API's names: (prompt, completion, reasoning) tokens.
    fn usage(&self, (prompt, completion, reasoning): (u32, u32, u32)) -> Value {
        match self.api {
            Api::Responses => json!({
                "input_tokens": prompt,
                "output_tokens": completion,
                "total_tokens": prompt + completion,
                "output_tokens_details": {"reasoning_tokens": reasoning},
            }),
            Api::Chat | Api::Completions => {
                let mut usage = json!({"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion});
                if reasoning > 0 {
                    usage["completion_tokens_details"] = json!({"reasoning_tokens": reasoning});
                }
                usage
            }
        }
    }

    /// What ends a stream: the usage chunk when asked for and `data: [DONE]`, or the Responses
    /// API's `response.completed` (usage always in it).
    pub(super) fn epilogue(
        &self,
        usage: (u32, u32, u32),
        include_usage: bool,
        finish: &str,
    ) -> Vec<u8> {
        match self.api {
            Api::Responses => self.event(&json!({
                "type": "response.completed",
                "response": {
                    "id": format!("resp-{}", self.id),
                    "object": "response",
                    "model": self.model,
                    "status": if finish == "length" { "incomplete" } else { "completed" },
                    "usage": self.usage(usage),
                },
            })),
            Api::Chat | Api::Completions => {
                let mut out = Vec::new();
                if include_usage {
                    let mut chunk = self.chunk(json!([]));
                    chunk["usage"] = self.usage(usage);
                    out.extend(self.event(&chunk));
                }
                out.extend_from_slice(b"data: [DONE]\n\n");
                out
            }
        }
    }

    /// A non-streamed response of `tokens`.
    pub(super) fn body(&self, tokens: &[Token], usage: (u32, u32, u32), finish: &str) -> Value {
        let text = |kind: Kind| -> String {
            tokens
                .iter()
                .filter(|t| t.kind == kind)
                .map(|t| t.text.as_str())
                .collect()
        };
        let tool: Vec<&Token> = tokens.iter().filter(|t| t.kind == Kind::Tool).collect();
        let (name, arguments) = match tool.split_first() {
            Some((name, rest)) => (
                name.text.clone(),
                rest.iter().map(|t| t.text.as_str()).collect::<String>(),
            ),
            None => (String::new(), String::new()),
        };
        let (reasoning, answer) = (text(Kind::Reasoning), text(Kind::Answer));
        match self.api {
            Api::Responses => {
                let mut output = Vec::new();
                if !reasoning.is_empty() {
                    output.push(json!({"type": "reasoning", "content": [{"type": "reasoning_text", "text": reasoning}], "summary": []}));
                }
                if !tool.is_empty() {
                    output.push(json!({"type": "function_call", "name": name, "arguments": arguments, "call_id": format!("call-{}", self.id)}));
                } else {
                    output.push(json!({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": answer}]}));
                }
                json!({
                    "id": format!("resp-{}", self.id),
                    "object": "response",
                    "model": self.model,
                    "status": if finish == "length" { "incomplete" } else { "completed" },
                    "output": output,
                    "usage": self.usage(usage),
                })
            }
            Api::Chat | Api::Completions => {
                let choice = if self.api == Api::Completions {
                    json!({"index": 0, "text": answer, "finish_reason": finish})
                } else {
                    let mut message = json!({"role": "assistant", "content": if tool.is_empty() { json!(answer) } else { Value::Null }});
                    if !reasoning.is_empty() {
                        message[self.reasoning_field] = json!(reasoning);
                    }
                    if !tool.is_empty() {
                        message["tool_calls"] = json!([{"id": format!("call-{}", self.id), "type": "function", "function": {"name": name, "arguments": arguments}}]);
                    }
                    json!({"index": 0, "message": message, "finish_reason": finish})
                };
                json!({
                    "id": format!("cmpl-{}", self.id),
                    "object": if self.api == Api::Chat { "chat.completion" } else { "text_completion" },
                    "created": 0,
                    "model": self.model,
                    "choices": [choice],
                    "usage": self.usage(usage),
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_forced_tool_call_is_the_answer_and_its_arguments_match_the_schema() {
        let body = json!({
            "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer", "minimum": 1}}, "required": ["city"]}}}],
            "tool_choice": "required",
        });
        let shape = Shape::of(&body, Api::Chat);
        let out = tokens(&shape, Api::Chat, (12, 3), false);
        assert_eq!(out.len(), 12);
        assert!(out[..3].iter().all(|t| t.kind == Kind::Reasoning));
        assert_eq!(
            (out[3].kind, out[3].text.as_str()),
            (Kind::Tool, "get_weather")
        );
        let arguments: String = out[4..].iter().map(|t| t.text.as_str()).collect();
        let parsed: Value = serde_json::from_str(&arguments).unwrap();
        assert!(
            parsed["city"].is_string() && parsed["days"] == 1,
            "{parsed}"
        );
        // "auto" leaves the choice to the model: the mock answers in text.
        let auto = Shape::of(
            &json!({"tools": body["tools"], "tool_choice": "auto"}),
            Api::Chat,
        );
        assert!(auto.tool.is_none());
    }

    #[test]
    fn a_json_format_gets_a_json_answer_in_each_api() {
        let schema = json!({"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]});
        for (body, api) in [
            (
                json!({"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": schema}}}),
                Api::Chat,
            ),
            (
                json!({"text": {"format": {"type": "json_schema", "name": "x", "schema": schema}}}),
                Api::Responses,
            ),
        ] {
            let out = tokens(&Shape::of(&body, api), api, (40, 0), false);
            let answer: String = out.iter().map(|t| t.text.as_str()).collect();
            let parsed: Value = serde_json::from_str(&answer).unwrap();
            assert!(parsed["answer"].is_string());
            assert_eq!(out.len(), 40, "{answer}");
        }
    }

    #[test]
    fn the_responses_api_opens_an_item_per_kind_and_ends_with_completed() {
        let mut e = Encoder::new(Api::Responses, 7, "m", "reasoning");
        let think = Token {
            kind: Kind::Reasoning,
            text: "a".into(),
        };
        let say = Token {
            kind: Kind::Answer,
            text: "b".into(),
        };
        let text = String::from_utf8(
            [
                e.prologue(),
                e.token(&think, None),
                e.token(&say, None),
                e.epilogue((1, 2, 1), false, "length"),
            ]
            .concat(),
        )
        .unwrap();
        let kinds: Vec<&str> = text
            .lines()
            .filter_map(|l| l.strip_prefix("event: "))
            .collect();
        assert_eq!(
            kinds,
            [
                "response.created",
                "response.output_item.added",
                "response.reasoning_text.delta",
                "response.output_item.added",
                "response.output_text.delta",
                "response.completed"
            ]
        );
        assert!(
            text.contains("\"status\":\"incomplete\"") && text.contains("\"reasoning_tokens\":1")
        );
        assert!(!text.contains("[DONE]"));
    }
}
