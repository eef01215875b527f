//! Prompt sets: a route's `prompt_file`, read in its `prompt_format` (issue 18 item 3).
//!
//! - `text`: one prompt per non-empty line.
//! - `jsonl`: one JSON object a line, either `{"prompt": "..."}` or a chat
//!   `{"messages": [{"role": "user", "content": "..."}, ...]}`, each with an optional
//!   `max_tokens` and its own `tools`, `tool_choice`, `response_format` and images
//!   ([`line`]); other fields are ignored.
//! - `sharegpt`: the ShareGPT file most LLM benchmarks use, a JSON array of
//!   `{"conversations": [{"from": "human", "value": "..."}, {"from": "gpt", ...}, ...]}`: each
//!   entry's turns up to and including its first human turn are the request (system turns kept),
//!   as vLLM's and guidellm's benchmarks read it; an entry without a human turn is skipped and
//!   counted.
//!
//! Request i uses prompt i mod n, after its unique prefix (SPEC §1). The file's BLAKE3 and its
//! format go in the journal's host facts, so a re-run can show it sent the same prompts.
//!
//! With `output_tokens = "dataset"` each prompt asks for its own length: a JSONL line's
//! `max_tokens` (every line must have one), or a ShareGPT entry's reply (the turn after its
//! first human turn) as `target.tokenizer` counts it, an entry without a reply skipped and
//! counted. With a tokenizer, each prompt's own length is counted too, for the journal.

use crate::error::RecordError;
use percentes_formats::config::parts::PartError;
use percentes_formats::config::{Config, Lengths, Profile, PromptFormat, Route};
use percentes_formats::files::{read_bounded, PROMPT_FILE_BYTES_MAX};

use crate::tokens::ModelTokenizer;

mod line;
pub use line::LineParts;

/// What a prompt sends.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PromptContent {
    /// One text: the user message of a chat route, the prompt of a completions route.
    Text(String),
    /// A chat conversation, in order: (role, content), the last one the user's.
    Messages(Vec<(String, String)>),
}

/// One prompt of a prompt set.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Prompt {
    /// What it sends, after the request's unique prefix.
    pub content: PromptContent,
    /// Its own `max_tokens` (a JSONL line's value, a ShareGPT reply's length), or the pin's.
    pub max_tokens: Option<u32>,
    /// Its content's length as the tokenizer counts it (the messages' contents summed, no
    /// template), when there is a tokenizer.
    pub prompt_tokens: Option<u32>,
    /// What a JSONL line carries beyond its text (tools, choice, format, images), if anything.
    pub parts: Option<Box<LineParts>>,
}

impl Prompt {
    /// A text prompt with the pinned length.
    pub fn text(text: &str) -> Prompt {
        Prompt {
            content: PromptContent::Text(text.to_owned()),
            max_tokens: None,
            prompt_tokens: None,
            parts: None,
        }
    }

    /// The texts it sends, in order.
    fn texts(&self) -> Vec<&str> {
        match &self.content {
            PromptContent::Text(t) => vec![t.as_str()],
            PromptContent::Messages(m) => m.iter().map(|(_, c)| c.as_str()).collect(),
        }
    }
}

/// A route's prompt set, loaded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PromptSet {
    /// The prompts, in file order; request i uses prompt i mod n.
    pub prompts: Vec<Prompt>,
    /// BLAKE3 of the file's bytes, journaled with the host facts so the set can be matched.
    pub blake3: [u8; 32],
    /// The format it was read in.
    pub format: PromptFormat,
    /// Entries the format skips (a ShareGPT conversation without a human turn).
    pub skipped: usize,
    /// ShareGPT entries skipped under `output_tokens = dataset` for want of a reply to measure.
    pub skipped_no_reply: usize,
    /// Requests per ShareGPT conversation: a semi-open run's turns (each entry then K prompts in
    /// a row, SPEC §1 "Workload models"), else 1.
    pub session_turns: u32,
}

impl PromptSet {
    /// Whether any prompt is a conversation (a chat route then sends every prompt as one).
    pub fn has_messages(&self) -> bool {
        self.prompts
            .iter()
            .any(|p| matches!(p.content, PromptContent::Messages(_)))
    }

    /// Whether any prompt carries parts of its own (a JSONL line's tools, choice, format or
    /// images): each prompt's body then carries its own.
    pub fn has_parts(&self) -> bool {
        self.prompts.iter().any(|p| p.parts.is_some())
    }

    /// Whether any prompt attaches images (its messages' contents are then arrays of parts).
    pub fn has_images(&self) -> bool {
        self.prompts
            .iter()
            .any(|p| p.parts.as_ref().is_some_and(|x| !x.images.is_empty()))
    }

    /// What the lines carry beyond their text, for the host fact: `; 12 lines carry their own
    /// parts (tools 4, tool_choice 4, response_format 8, images 3: 5 images, 123456 bytes,
    /// BLAKE3 of their BLAKE3s in line order ...)`; empty when none does.
    fn parts_fact(&self) -> String {
        let with: Vec<&LineParts> = self
            .prompts
            .iter()
            .filter_map(|p| p.parts.as_deref())
            .collect();
        if with.is_empty() {
            return String::new();
        }
        let count = |has: fn(&LineParts) -> bool| with.iter().filter(|p| has(p)).count();
        let mut hasher = blake3::Hasher::new();
        let (mut n, mut bytes) = (0usize, 0u64);
        for (_, image) in with.iter().flat_map(|p| &p.images) {
            hasher.update(image.blake3.as_bytes());
            n += 1;
            bytes += image.bytes;
        }
        let images = if n == 0 {
            String::new()
        } else {
            format!(
                ": {n} images, {bytes} bytes, BLAKE3 of their BLAKE3s in line order {}",
                hasher.finalize().to_hex()
            )
        };
        format!(
            "; {} lines carry their own parts (tools {}, tool_choice {}, response_format {}, images {}{images})",
            with.len(),
            count(|p| p.tools.is_some()),
            count(|p| p.tool_choice.is_some()),
            count(|p| p.response_format.is_some()),
            count(|p| !p.images.is_empty()),
        )
    }

    /// The host fact: `sharegpt, 1000 prompts (3 entries skipped: no human turn), BLAKE3 ...`,
    /// then what the lines carry beyond their text, where they carry anything.
    pub fn fact(&self) -> String {
        let mut reasons = Vec::new();
        if self.skipped > 0 {
            reasons.push(if self.session_turns > 1 {
                format!(
                    "{} entries skipped: fewer than {} human turns",
                    self.skipped, self.session_turns
                )
            } else {
                format!("{} entries skipped: no human turn", self.skipped)
            });
        }
        if self.skipped_no_reply > 0 {
            reasons.push(format!(
                "{} entries skipped: no reply to take the output length from",
                self.skipped_no_reply
            ));
        }
        let skipped = if reasons.is_empty() {
            String::new()
        } else {
            format!(" ({})", reasons.join("; "))
        };
        format!(
            "{}, {} prompts{skipped}, BLAKE3 {}{}",
            self.format.name(),
            self.prompts.len(),
            percentes_formats::journal::hex(&self.blake3),
            self.parts_fact()
        )
    }
}

/// Loads a route's prompt set. A per-prompt `max_tokens` other than the pinned one is refused
/// outside the dev profile (§6: `target.max_tokens` is pinned on every request), and a
/// conversation is refused on a route that is not a chat route. `pinned_max_tokens` is the plan's
/// `target.max_tokens`.
pub fn load_prompts(
    route: &Route,
    config: &Config,
    tokenizer: Option<&ModelTokenizer>,
    pinned_max_tokens: u32,
) -> Result<PromptSet, RecordError> {
    let path = route.prompt_file.as_deref().unwrap_or_default();
    let bytes = read_bounded(path.as_ref(), PROMPT_FILE_BYTES_MAX, "a prompt file")
        .map_err(|e| RecordError::config(format!("prompt_file {path}: {e}")))?;
    let text = std::str::from_utf8(&bytes)
        .map_err(|e| RecordError::config(format!("prompt_file {path}: not UTF-8 ({e})")))?;
    let format = route.prompt_format_resolved().unwrap_or(PromptFormat::Text);
    let dataset = route.output_tokens == Some(Lengths::Dataset);
    // A semi-open run's sessions are ShareGPT's conversations, a request a human turn.
    let session_turns = match (format, config.workload()) {
        (PromptFormat::Sharegpt, percentes_formats::schedule::Workload::SemiOpen { turns, .. }) => {
            turns
        }
        _ => 1,
    };
    let mut skipped_no_reply = 0;
    let (mut prompts, skipped) = match format {
        PromptFormat::Text => (
            text.lines()
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .map(Prompt::text)
                .collect(),
            0,
        ),
        PromptFormat::Jsonl => (
            jsonl((path, text), route, config, dataset, pinned_max_tokens)?,
            0,
        ),
        PromptFormat::Sharegpt => {
            let replies = dataset.then_some(tokenizer).map(|t| {
                t.ok_or_else(|| {
                    RecordError::config(format!("prompt_file {path}: output_tokens = dataset measures each reply, and that needs target.tokenizer"))
                })
            });
            let replies = replies.transpose()?;
            // A semi-open run's sessions are the conversations, a request a human turn.
            let (prompts, skipped, no_reply) = sharegpt(path, text, replies, session_turns)?;
            skipped_no_reply = no_reply;
            (prompts, skipped)
        }
    };
    if let Some(t) = tokenizer {
        for prompt in &mut prompts {
            let mut tokens = 0u32;
            for text in prompt.texts() {
                tokens = tokens.saturating_add(t.count(text)?);
            }
            prompt.prompt_tokens = Some(tokens);
        }
    }
    sendable(route, format, &prompts).map_err(|e| RecordError::config(e.to_string()))?;
    Ok(PromptSet {
        prompts,
        blake3: *blake3::hash(&bytes).as_bytes(),
        format,
        skipped,
        skipped_no_reply,
        session_turns,
    })
}

/// Whether `prompts`, read from `route`'s prompt file in `format`, can be sent and checked: at
/// least one prompt, conversations only on a chat route, and under `verify.structured`
/// something to check, on the route or on some line.
fn sendable(route: &Route, format: PromptFormat, prompts: &[Prompt]) -> Result<(), PartError> {
    let key = format!(
        "prompt_file {}",
        route.prompt_file.as_deref().unwrap_or_default()
    );
    let wrong = |problem: String| {
        Err(PartError {
            key: key.clone(),
            problem,
        })
    };
    if prompts.is_empty() {
        return wrong(format!(
            "has no prompt (read as {}: {})",
            format.name(),
            match format {
                PromptFormat::Text => "one per line",
                PromptFormat::Jsonl => "one JSON object a line",
                PromptFormat::Sharegpt => "a JSON array of conversations with a human turn",
            }
        ));
    }
    let chat = route.path.ends_with("/chat/completions");
    if !chat
        && prompts
            .iter()
            .any(|p| matches!(p.content, PromptContent::Messages(_)))
    {
        return wrong(format!(
            "holds conversations (messages), and route {:?} ({}) is not a chat route: send them to /v1/chat/completions",
            route.label, route.path
        ));
    }
    let asks = |p: &Prompt| p.parts.as_ref().is_some_and(|x| x.has_fields());
    if route.verify.structured
        && route.tools.is_none()
        && route.response_format.is_none()
        && !prompts.iter().any(asks)
    {
        return wrong(format!(
            "route {:?} has verify.structured, and neither the route nor any line asks for a response_format or tools to check an answer against",
            route.label
        ));
    }
    Ok(())
}

fn jsonl(
    (path, text): (&str, &str),
    route: &Route,
    config: &Config,
    dataset: bool,
    pinned: u32,
) -> Result<Vec<Prompt>, RecordError> {
    let mut prompts = Vec::new();
    let mut images = line::LineImages::beside(path);
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let at = format!("prompt_file {path} line {}", i + 1);
        let value: serde_json::Value = serde_json::from_str(line)
            .map_err(|e| RecordError::config(format!("{at}: not JSON ({e})")))?;
        let (content, in_messages, last) = match (value.get("prompt"), value.get("messages")) {
            (Some(serde_json::Value::String(p)), None) => {
                (PromptContent::Text(p.clone()), Vec::new(), 0)
            }
            (None, Some(serde_json::Value::Array(messages))) => {
                let (messages, in_messages) = chat_messages(&at, messages, &mut images)?;
                let last = messages.len() - 1;
                (PromptContent::Messages(messages), in_messages, last)
            }
            _ => {
                return Err(RecordError::config(format!(
                    "{at}: needs a string field \"prompt\" or an array \"messages\" (one of them)"
                )))
            }
        };
        let max_tokens = match value.get("max_tokens") {
            None | Some(serde_json::Value::Null) => None,
            Some(n) => match n.as_u64().and_then(|n| u32::try_from(n).ok()) {
                Some(n) if n >= 1 => Some(n),
                _ => {
                    return Err(RecordError::config(format!(
                        "{at}: max_tokens must be a whole number of at least 1"
                    )))
                }
            },
        };
        if dataset && max_tokens.is_none() {
            return Err(RecordError::config(format!(
                "{at}: has no max_tokens, and output_tokens = dataset takes each line's own"
            )));
        }
        if let Some(n) = max_tokens {
            if n != pinned && config.profile != Profile::Dev {
                return Err(RecordError::config(format!(
                    "{at}: max_tokens {n} differs from the pinned {pinned} (SPEC §6, target.max_tokens); per-line lengths run under the dev profile only"
                )));
            }
        }
        let parts = line::line_parts(&at, &value, (in_messages, last), &mut images, route)
            .map_err(|e| RecordError::config(e.to_string()))?;
        prompts.push(Prompt {
            content,
            max_tokens,
            prompt_tokens: None,
            parts: parts.map(Box::new),
        });
    }
    Ok(prompts)
}

/// The roles a chat message may have.
const ROLES: [&str; 4] = ["system", "user", "assistant", "developer"];

/// A JSONL line's `messages`: each `{"role": ..., "content": ...}` with a known role and a
/// content ([`line::message_content`]: a string, or parts with one text and images), the last
/// one the user's. Returns the messages and their images, by message.
fn chat_messages(
    at: &str,
    messages: &[serde_json::Value],
    images: &mut line::LineImages,
) -> Result<(Vec<(String, String)>, line::Images), RecordError> {
    let mut out = Vec::with_capacity(messages.len());
    let mut found = Vec::new();
    for (k, m) in messages.iter().enumerate() {
        let role = m.get("role").and_then(|r| r.as_str());
        let content = m.get("content");
        match (role, content) {
            (Some(role), Some(content)) if ROLES.contains(&role) => {
                let (text, own) =
                    line::message_content(&format!("{at}: messages[{k}]"), content, images)
                        .map_err(|e| RecordError::config(e.to_string()))?;
                found.extend(own.into_iter().map(|image| (k, image)));
                out.push((role.to_owned(), text))
            }
            (Some(role), Some(_)) => {
                return Err(RecordError::config(format!(
                    "{at}: messages[{k}].role {role:?} is not one of {ROLES:?}"
                )))
            }
            _ => {
                return Err(RecordError::config(format!(
                    "{at}: messages[{k}] needs a string \"role\" and a \"content\""
                )))
            }
        }
    }
    match out.last() {
        Some((role, _)) if role == "user" => Ok((out, found)),
        Some((role, _)) => Err(RecordError::config(format!(
            "{at}: the last message is the {role}'s; the request asks for the reply to a user message"
        ))),
        None => Err(RecordError::config(format!("{at}: messages is empty"))),
    }
}

/// A ShareGPT file: (prompts, entries skipped for want of a human turn, entries skipped for want
/// of a reply). With `replies`, each prompt asks for its reply's length in tokens (at least 1).
/// A ShareGPT file's requests. With `turns` = 1 each entry is one request, its turns up to and
/// including its first human turn. With `turns` = K > 1 (a semi-open run's sessions, SPEC §1
/// "Workload models") each entry with at least K human turns is K requests in a row, request k
/// its turns up to and including its (k + 1)-th human turn, the entry's own replies as the
/// history; an entry with fewer is skipped and counted. Returns the prompts and the entries
/// skipped for no human turn (or too few), and for no reply where a reply's length is asked for.
fn sharegpt(
    path: &str,
    text: &str,
    replies: Option<&ModelTokenizer>,
    turns: u32,
) -> Result<(Vec<Prompt>, usize, usize), RecordError> {
    let value: serde_json::Value = serde_json::from_str(text).map_err(|e| {
        RecordError::config(format!(
            "prompt_file {path}: not JSON (ShareGPT is one JSON array): {e}"
        ))
    })?;
    let Some(entries) = value.as_array() else {
        return Err(RecordError::config(format!(
            "prompt_file {path}: ShareGPT is a JSON array of conversations, and this is not an array"
        )));
    };
    let turns = turns.max(1) as usize;
    let mut prompts = Vec::new();
    let mut skipped = 0;
    let mut no_reply = 0;
    'entries: for (i, entry) in entries.iter().enumerate() {
        let messages = conversation(path, i, entry, turns)?;
        // Where each human turn is, the first `turns` of them.
        let asks: Vec<usize> = (0..messages.len())
            .filter(|&k| messages[k].0 == "user")
            .take(turns)
            .collect();
        if asks.len() < turns {
            skipped += 1;
            continue;
        }
        let mut own = Vec::with_capacity(turns);
        for &ask in &asks {
            // The turn after the human turn: the reply, when it is the assistant's.
            let reply = messages
                .get(ask + 1)
                .filter(|(role, _)| role == "assistant")
                .map(|(_, v)| v.as_str());
            let max_tokens = match (replies, reply) {
                (None, _) => None,
                (Some(t), Some(reply)) => Some(t.count(reply)?.max(1)),
                (Some(_), None) => {
                    no_reply += 1;
                    continue 'entries;
                }
            };
            own.push(Prompt {
                content: PromptContent::Messages(messages[..=ask].to_vec()),
                max_tokens,
                prompt_tokens: None,
                parts: None,
            });
        }
        prompts.extend(own);
    }
    Ok((prompts, skipped, no_reply))
}

/// One ShareGPT entry's turns as (role, text): `user`, `assistant` or `system`, read up to the
/// turn after its `asks`-th human turn (what is after it is never sent, and not checked).
fn conversation(
    path: &str,
    i: usize,
    entry: &serde_json::Value,
    asks: usize,
) -> Result<Vec<(String, String)>, RecordError> {
    let turns = entry
        .get("conversations")
        .or_else(|| entry.get("conversation"))
        .and_then(|c| c.as_array())
        .ok_or_else(|| {
            RecordError::config(format!(
                "prompt_file {path} entry {i}: needs a \"conversations\" array"
            ))
        })?;
    let mut messages = Vec::with_capacity(turns.len());
    for (k, turn) in turns.iter().enumerate() {
        let from = turn.get("from").and_then(|f| f.as_str());
        let value = turn.get("value").and_then(|v| v.as_str());
        let (Some(from), Some(value)) = (from, value) else {
            return Err(RecordError::config(format!(
                "prompt_file {path} entry {i} turn {k}: needs string \"from\" and \"value\""
            )));
        };
        let role = match from {
            "human" | "user" => "user",
            "gpt" | "chatgpt" | "bard" | "bing" | "assistant" => "assistant",
            "system" => "system",
            other => {
                return Err(RecordError::config(format!(
                    "prompt_file {path} entry {i} turn {k}: \"from\" {other:?} is neither human, gpt nor system"
                )))
            }
        };
        let asked = messages.iter().filter(|(r, _)| r == "user").count();
        if asked == asks {
            // The turn after the last human turn asked for: its reply, or not.
            if role == "assistant" {
                messages.push((role.to_owned(), value.to_owned()));
            }
            break;
        }
        messages.push((role.to_owned(), value.to_owned()));
    }
    Ok(messages)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The sentence of a refusal of the configuration (kind `Config`, never another).
    fn refused<T: std::fmt::Debug>(result: Result<T, crate::error::RecordError>) -> String {
        let e = result.unwrap_err();
        assert_eq!(e.kind(), crate::error::ErrorKind::Config, "{e}");
        e.to_string()
    }
    use percentes_formats::pins;

    /// The pinned `target.max_tokens` (§6), as a run's plan gives it.
    const PINNED: u32 = pins::value::TARGET_MAX_TOKENS as u32;

    fn config(route_extra: &str, path: &str) -> Config {
        Config::parse(
            format!(
                "schema_version = 1\nprofile = \"dev\"\n[target]\nkind = \"mock\"\nbase_url = \"http://127.0.0.1:8000\"\nmodel = \"m\"\n\
                 [schedule]\nseed = 1\narrival = \"poisson\"\nrate_rps = 2.0\n[fault]\nvariant = \"none\"\n[[routes]]\nlabel = \"chat\"\npath = \"{path}\"\n{route_extra}\n"
            )
            .as_bytes(),
        )
        .unwrap()
    }

    fn scratch(name: &str, text: &str) -> String {
        let path = percentes_testkit::shared_folder("prompts").join(name);
        std::fs::write(&path, text).unwrap();
        path.to_str().unwrap().to_owned()
    }

    fn load(name: &str, text: &str, format: Option<&str>, path: &str) -> Result<PromptSet, String> {
        load_set(name, text, format, path).map_err(|e| {
            assert_eq!(e.kind(), crate::error::ErrorKind::Config, "{e}");
            e.to_string()
        })
    }

    fn load_set(
        name: &str,
        text: &str,
        format: Option<&str>,
        path: &str,
    ) -> Result<PromptSet, crate::error::RecordError> {
        let file = scratch(name, text);
        let mut extra = format!("prompt_file = {file:?}\n");
        if let Some(f) = format {
            extra.push_str(&format!("prompt_format = \"{f}\"\n"));
        }
        let config = config(&extra, path);
        load_prompts(&config.routes[0], &config, None, PINNED)
    }

    /// A semi-open run of 2 turns: each conversation with two human turns is two prompts in a
    /// row, the second with the first exchange as its history; one with a single human turn is
    /// skipped and counted, and said so in the host fact.
    #[test]
    fn a_semi_open_run_sends_each_conversation_turn_by_turn() {
        let text = r#"[
          {"conversations": [{"from": "human", "value": "Hi"}, {"from": "gpt", "value": "Hello"}, {"from": "human", "value": "Bye"}, {"from": "gpt", "value": "Ciao"}, {"from": "human", "value": "never sent"}]},
          {"conversations": [{"from": "human", "value": "Only one"}, {"from": "gpt", "value": "ok"}]},
          {"conversations": [{"from": "human", "value": "A"}, {"from": "human", "value": "B"}]}
        ]"#;
        let file = scratch("multi.json", text);
        let config = config(
            &format!("prompt_file = {file:?}\nprompt_format = \"sharegpt\"\n"),
            "/v1/chat/completions",
        );
        let semi = Config::parse(
            String::from_utf8(config.raw_bytes().to_vec())
                .unwrap()
                .replace(
                    "[fault]",
                    "[workload]\nmodel = \"semi-open\"\nturns = 2\n[fault]",
                )
                .as_bytes(),
        )
        .unwrap();
        let set = load_prompts(&semi.routes[0], &semi, None, PINNED).unwrap();
        let m = |pairs: &[(&str, &str)]| {
            PromptContent::Messages(
                pairs
                    .iter()
                    .map(|(r, v)| (r.to_string(), v.to_string()))
                    .collect(),
            )
        };
        assert_eq!(
            set.prompts
                .iter()
                .map(|p| p.content.clone())
                .collect::<Vec<_>>(),
            [
                m(&[("user", "Hi")]),
                m(&[("user", "Hi"), ("assistant", "Hello"), ("user", "Bye")]),
                m(&[("user", "A")]),
                m(&[("user", "A"), ("user", "B")]),
            ]
        );
        assert_eq!(set.skipped, 1);
        assert!(
            set.fact()
                .contains("1 entries skipped: fewer than 2 human turns"),
            "{}",
            set.fact()
        );
        // The same file read for an open run: each conversation's first human turn.
        assert_eq!(
            load_prompts(&config.routes[0], &config, None, PINNED)
                .unwrap()
                .prompts
                .len(),
            3
        );
    }

    #[test]
    fn a_sharegpt_file_gives_each_conversation_up_to_its_first_human_turn() {
        // Hand-made in the shape of ShareGPT_V3_unfiltered_cleaned_split.json: an id and
        // conversations of from/value turns.
        let text = r#"[
          {"id": "a", "conversations": [{"from": "human", "value": "What is 2+2?"}, {"from": "gpt", "value": "4"}]},
          {"id": "b", "conversations": [{"from": "gpt", "value": "orphan reply"}]},
          {"id": "c", "conversations": [{"from": "system", "value": "Be brief."}, {"from": "human", "value": "Name a colour."}, {"from": "gpt", "value": "Red."}, {"from": "human", "value": "Another?"}]},
          {"id": "d", "conversations": []}
        ]"#;
        let set = load("share.json", text, Some("sharegpt"), "/v1/chat/completions").unwrap();
        assert_eq!(set.skipped, 2);
        assert_eq!(
            set.prompts
                .iter()
                .map(|p| p.content.clone())
                .collect::<Vec<_>>(),
            [
                PromptContent::Messages(vec![("user".into(), "What is 2+2?".into())]),
                PromptContent::Messages(vec![
                    ("system".into(), "Be brief.".into()),
                    ("user".into(), "Name a colour.".into())
                ]),
            ]
        );
        assert!(
            set.fact()
                .starts_with("sharegpt, 2 prompts (2 entries skipped: no human turn), BLAKE3 "),
            "{}",
            set.fact()
        );
        // Conversations need a chat route.
        let err = load("share.json", text, Some("sharegpt"), "/v1/completions").unwrap_err();
        assert!(err.contains("not a chat route"), "{err}");
        for (bad, says) in [
            ("{}", "not an array"),
            ("[{\"id\": 1}]", "\"conversations\""),
            (
                "[{\"conversations\": [{\"from\": \"robot\", \"value\": \"x\"}]}]",
                "robot",
            ),
            ("[1,", "not JSON"),
        ] {
            let err = load("bad.json", bad, Some("sharegpt"), "/v1/chat/completions").unwrap_err();
            assert!(err.contains(says), "{bad}: {err}");
        }
        let err = load("none.json", "[]", Some("sharegpt"), "/v1/chat/completions").unwrap_err();
        assert!(err.contains("no prompt"), "{err}");
    }

    #[test]
    fn a_jsonl_line_may_be_a_prompt_or_a_chat_conversation() {
        let text = "{\"prompt\": \"plain\"}\n{\"messages\": [{\"role\": \"system\", \"content\": \"terse\"}, {\"role\": \"user\", \"content\": \"hi\"}], \"max_tokens\": 8}\n";
        let set = load("mixed.jsonl", text, None, "/v1/chat/completions").unwrap();
        assert_eq!(set.format, PromptFormat::Jsonl);
        assert!(set.has_messages());
        assert_eq!(set.prompts[0].content, PromptContent::Text("plain".into()));
        assert_eq!(set.prompts[1].max_tokens, Some(8));
        for (bad, says) in [
            ("{\"messages\": []}", "empty"),
            ("{\"messages\": [{\"role\": \"user\", \"content\": [{\"type\": \"text\"}]}]}", "needs a string \"text\""),
            ("{\"messages\": [{\"role\": \"user\"}]}", "needs a string \"role\" and a \"content\""),
            ("{\"messages\": [{\"role\": \"robot\", \"content\": \"x\"}]}", "robot"),
            ("{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}, {\"role\": \"assistant\", \"content\": \"y\"}]}", "last message"),
            ("{\"prompt\": \"x\", \"messages\": []}", "one of them"),
        ] {
            let err = load("bad.jsonl", bad, None, "/v1/chat/completions").unwrap_err();
            assert!(err.contains(says), "{bad}: {err}");
        }
        // A .txt file read as JSONL when told so; a .jsonl file read as text when told so.
        let set = load(
            "lines.txt",
            "{\"prompt\": \"p\"}\n",
            Some("jsonl"),
            "/v1/chat/completions",
        )
        .unwrap();
        assert_eq!(set.prompts[0].content, PromptContent::Text("p".into()));
        let set = load(
            "raw.jsonl",
            "{\"prompt\": \"p\"}\n",
            Some("text"),
            "/v1/chat/completions",
        )
        .unwrap();
        assert_eq!(
            set.prompts[0].content,
            PromptContent::Text("{\"prompt\": \"p\"}".into())
        );
    }

    /// A JSONL line carries its own tools, choice, format and images, in the API's own shapes
    /// (a request log's), each checked as a route's are; the host fact counts them and hashes
    /// the images. Files are named relative to the prompt file and never fetched.
    #[test]
    fn a_jsonl_line_carries_its_own_parts_checked_as_a_routes_are() {
        scratch(
            "cat.png",
            "not really a PNG: its bytes are sent as they are",
        );
        let lines = [
            r#"{"prompt": "call it", "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}], "tool_choice": {"type": "function", "function": {"name": "f"}}}"#,
            r#"{"prompt": "json please", "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "object"}}}}"#,
            r#"{"prompt": "look", "images": ["cat.png", "data:image/png;base64,YWJj"]}"#,
            r#"{"messages": [{"role": "system", "content": "terse"}, {"role": "user", "content": [{"type": "text", "text": "what is this"}, {"type": "image_url", "image_url": {"url": "cat.png"}}]}]}"#,
            r#"{"prompt": "plain"}"#,
        ];
        let set = load(
            "parts.jsonl",
            &lines.join("\n"),
            None,
            "/v1/chat/completions",
        )
        .unwrap();
        assert!(set.has_parts() && set.has_images());
        let parts = |i: usize| set.prompts[i].parts.as_deref();
        assert_eq!(parts(0).unwrap().tool_choice.as_deref(), Some("f"));
        assert!(parts(0)
            .unwrap()
            .tools
            .as_deref()
            .unwrap()
            .contains("\"name\":\"f\""));
        let format = parts(1)
            .unwrap()
            .route(&config("", "/v1/chat/completions").routes[0]);
        assert_eq!(
            format.response_format_declared("r").unwrap(),
            Some(percentes_formats::config::parts::ResponseFormat::Schema(
                serde_json::json!({"type": "object"})
            )),
            "the API's json_schema wrapper is read as its schema"
        );
        let images = &parts(2).unwrap().images;
        assert_eq!(
            images
                .iter()
                .map(|(m, i)| (*m, i.path.as_str(), i.bytes))
                .collect::<Vec<_>>(),
            [(0, "cat.png", 48), (0, "data URL", 3)]
        );
        assert_eq!(
            set.prompts[3].content,
            PromptContent::Messages(vec![
                ("system".into(), "terse".into()),
                ("user".into(), "what is this".into())
            ])
        );
        assert_eq!(
            parts(3).unwrap().images[0].0,
            1,
            "the image goes with its message"
        );
        assert_eq!(parts(4), None);
        let fact = set.fact();
        assert!(
            fact.contains("; 4 lines carry their own parts (tools 1, tool_choice 1, response_format 1, images 2: 3 images, 99 bytes, BLAKE3 of their BLAKE3s in line order "),
            "{fact}"
        );
        let tools = r#""tools": [{"type": "function", "function": {"name": "f"}}]"#;
        for (bad, path, says) in [
            (r#"{"prompt": "x", "images": ["https://example.com/cat.png"]}"#.to_owned(), "/v1/chat/completions", "never fetched"),
            (r#"{"prompt": "x", "images": ["absent.png"]}"#.into(), "/v1/chat/completions", "relative to the prompt file's folder"),
            (r#"{"prompt": "x", "images": ["data:text/plain;base64,YWJj"]}"#.into(), "/v1/chat/completions", "is not image/png"),
            (format!(r#"{{"prompt": "x", {tools}, "tool_choice": "g"}}"#), "/v1/chat/completions", "\"g\" is neither auto"),
            (r#"{"prompt": "x", "tool_choice": "auto"}"#.into(), "/v1/chat/completions", "declares no tools"),
            (r#"{"prompt": "x", "response_format": "xml"}"#.into(), "/v1/chat/completions", "response_format is"),
            (r#"{"prompt": "x", "response_format": {"type": "json_schema"}}"#.into(), "/v1/chat/completions", "needs its schema object"),
            (r#"{"messages": [{"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}]}"#.into(), "/v1/chat/completions", "a second text part"),
            (r#"{"messages": [{"role": "user", "content": [{"type": "input_audio"}]}]}"#.into(), "/v1/chat/completions", "\"input_audio\" is not sent"),
            (format!(r#"{{"prompt": "x", {tools}}}"#), "/v1/completions", "takes a prompt only"),
        ] {
            let err = load("bad-parts.jsonl", &bad, None, path).unwrap_err();
            assert!(err.contains(says) && err.contains("line 1"), "{bad}: {err}");
        }
        // verify.structured on a route whose lines ask for nothing to check.
        let file = scratch("plain.jsonl", r#"{"prompt": "x"}"#);
        let c = config(
            &format!("prompt_file = {file:?}\nverify = {{ structured = true }}\n"),
            "/v1/chat/completions",
        );
        let err = refused(load_prompts(&c.routes[0], &c, None, PINNED));
        assert!(err.contains("neither the route nor any line"), "{err}");
    }
}
