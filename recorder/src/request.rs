//! Request templates: the bytes of request i, from the route, the target and the index.

use crate::error::RecordError;
use std::sync::Arc;

pub use crate::images::{images_fact, load_images, Image};
pub use crate::prompts::{load_prompts, Prompt, PromptContent, PromptSet};
use crate::tokens::Filler;
use percentes_formats::config::parts::{Api, PartError};
use percentes_formats::config::{Config, Lengths, Route, TokenSide};
use percentes_formats::journal::records::{ExtensionKey, RequestExtension};
use percentes_formats::schedule::{Entry, History, PrefixPool, ScheduleParams};
use percentes_response::exchange;

/// The target, from `target.base_url`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    /// The host name or address, as the URL writes it.
    pub host: String,
    /// The port (the scheme's default when the URL has none).
    pub port: u16,
    /// The `host:port` to connect to.
    pub address: String,
    /// `https://`: TLS (rustls) on every connection.
    pub tls: bool,
    /// The URL's path, without a trailing `/`, put in front of every route's path (an
    /// Azure-style `/openai/deployments/x`); empty for none.
    pub path_prefix: String,
    /// The URL's query (after `?`), sent on every request (`api-version=...`).
    pub query: Option<String>,
}

impl Target {
    /// Parses an `http://` or `https://` base URL (ports default to 80 and 443). The path and
    /// query are kept; credentials in the URL are refused (the configuration loader refuses
    /// them first, since the journal copies the configuration).
    pub fn parse(base_url: &str) -> Result<Target, RecordError> {
        let (rest, tls) = if let Some(rest) = base_url.strip_prefix("http://") {
            (rest, false)
        } else if let Some(rest) = base_url.strip_prefix("https://") {
            (rest, true)
        } else {
            return Err(RecordError::config(format!(
                "target.base_url {base_url:?} must start with http:// or https://"
            )));
        };
        let end = rest.find(['/', '?']).unwrap_or(rest.len());
        let (authority, after) = rest.split_at(end);
        if authority.is_empty() {
            return Err(RecordError::config(format!(
                "target.base_url {base_url:?} has no host"
            )));
        }
        if authority.contains('@') {
            return Err(RecordError::config("target.base_url carries credentials; name an environment variable in target.api_key_env instead"));
        }
        let (path, query) = match after.split_once('?') {
            Some((p, q)) => (p, Some(q.to_owned()).filter(|q| !q.is_empty())),
            None => (after, None),
        };
        let default_port = if tls { 443 } else { 80 };
        let (host, port) = match authority.rsplit_once(':') {
            Some((h, p)) if !h.ends_with(']') || p.is_empty() => match p.parse::<u16>() {
                Ok(port) => (h.to_owned(), port),
                Err(_) => {
                    return Err(RecordError::config(format!(
                        "target.base_url {base_url:?}: bad port {p:?}"
                    )))
                }
            },
            _ => (authority.to_owned(), default_port),
        };
        Ok(Target {
            address: format!("{host}:{port}"),
            host,
            port,
            tls,
            path_prefix: path.trim_end_matches('/').to_owned(),
            query,
        })
    }

    /// The `Host` header's value: the host, with the port when it is not the scheme's default
    /// (RFC 9110 §7.2).
    pub fn host_header(&self) -> String {
        let default_port = if self.tls { 443 } else { 80 };
        if self.port == default_port {
            self.host.clone()
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }

    /// The request target for a route's `path`: the URL's path prefix, the route's path, and
    /// the URL's query after the route's own.
    pub fn request_target(&self, path: &str) -> String {
        let mut out = format!("{}{path}", self.path_prefix);
        if let Some(query) = &self.query {
            out.push(if path.contains('?') { '&' } else { '?' });
            out.push_str(query);
        }
        out
    }
}

/// Request header lines every request carries beyond the recorder's own: `[target.headers]`,
/// `[target.secret_headers]` and the API key. Its `Debug` never shows the lines (they may hold
/// secrets).
#[derive(Clone, Default)]
pub struct ExtraHeaders {
    lines: String,
    /// The secrets (the key and each secret header's value), to redact from anything a server
    /// echoes back into a message.
    secrets: Vec<(String, String)>,
}

impl std::fmt::Debug for ExtraHeaders {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "ExtraHeaders({} bytes, {} secrets)",
            self.lines.len(),
            self.secrets.len()
        )
    }
}

impl ExtraHeaders {
    /// The configuration's headers and, with `target.api_key_env` and
    /// `[target.secret_headers]`, the values read from the environment variables they name
    /// through `lookup` (a missing or empty variable refuses to start).
    pub fn new(
        target: &percentes_formats::config::Target,
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<ExtraHeaders, RecordError> {
        let mut lines = String::new();
        for (name, value) in &target.headers {
            lines.push_str(&format!("{}: {value}\r\n", name.to_ascii_lowercase()));
        }
        let mut secrets = Vec::new();
        let mut read = |variable: &str, what: &str| -> Result<String, RecordError> {
            let value = lookup(variable).unwrap_or_default();
            let value = value.trim();
            if value.is_empty() {
                return Err(RecordError::config(format!(
                    "{what} names {variable}, which is not set (or empty) in this environment; export the value as {variable}"
                )));
            }
            if !value
                .bytes()
                .all(|b| b == b' ' || (b'!'..=b'~').contains(&b))
            {
                return Err(RecordError::config(format!(
                    "the value in {variable} holds a character a header cannot carry (CR, LF, tab, NUL or non-ASCII)"
                )));
            }
            secrets.push((variable.to_owned(), value.to_owned()));
            Ok(value.to_owned())
        };
        for (name, variable) in &target.secret_headers {
            let value = read(variable, &format!("target.secret_headers.{name}"))?;
            lines.push_str(&format!("{}: {value}\r\n", name.to_ascii_lowercase()));
        }
        if let Some(variable) = &target.api_key_env {
            let value = read(variable, "target.api_key_env")?;
            if value.contains(' ') {
                return Err(RecordError::config(format!(
                    "the key in {variable} holds a space, which a key never does"
                )));
            }
            let header = target.api_key_header();
            if header == "authorization" {
                lines.push_str(&format!("authorization: Bearer {value}\r\n"));
            } else {
                lines.push_str(&format!("{header}: {value}\r\n"));
            }
        }
        // Servers and proxies log who called: name the tool and its version, unless the
        // configuration names another agent (target.headers.User-Agent).
        if !target
            .headers
            .keys()
            .any(|name| name.eq_ignore_ascii_case("user-agent"))
        {
            lines.push_str(&format!("user-agent: {USER_AGENT}\r\n"));
        }
        Ok(ExtraHeaders { lines, secrets })
    }

    /// The header lines, each ending CRLF.
    pub fn lines(&self) -> &str {
        &self.lines
    }

    /// `text` with every occurrence of a secret replaced by the name of the variable it came
    /// from, for a message that may quote a server.
    pub fn redact(&self, text: &str) -> String {
        let mut out = text.to_owned();
        for (variable, value) in self.secrets.iter().filter(|(_, v)| !v.is_empty()) {
            out = out.replace(value.as_str(), &format!("[${variable}]"));
        }
        out
    }

    /// Redacts `text` in place where it holds a secret, cut again to `bytes` (a journal field's
    /// limit): what a server sent back (a replica header reflecting the request's
    /// Authorization, an error body quoting it) never carries a secret into the journal.
    pub fn scrub(&self, text: &mut String, bytes: usize) {
        let holds = self
            .secrets
            .iter()
            .any(|(_, v)| !v.is_empty() && text.contains(v.as_str()));
        if holds {
            *text = exchange::cut(&self.redact(text), bytes).to_owned();
        }
    }
}

/// The User-Agent every request carries unless the configuration sets one.
pub const USER_AGENT: &str = concat!("percentes/", env!("CARGO_PKG_VERSION"));

/// A route's request, prebuilt: everything but the index is fixed, so building request i is a
/// few appends (no JSON value per request). Its `Debug` shows sizes only (the head may hold the
/// API key).
#[derive(Clone)]
pub struct Template {
    /// The request line and headers up to the request id's digits.
    head_prefix: Vec<u8>,
    /// The JSON body up to the prompt's index digits.
    body_prefix: Vec<u8>,
    /// JSON-escaped prompt continuations after the digits (one per prompt-set line, or one
    /// generated filler), each with its line's own fields, up to the output cap that ends the
    /// body. Shared, not copied, by the workers' clones: a prompt set (and its lines' images)
    /// can be large.
    body_suffixes: Arc<Vec<Vec<u8>>>,
    /// Each prompt's own `max_tokens` (a JSONL line's), by the same index as `body_suffixes`.
    own_max_tokens: Vec<Option<u32>>,
    /// Each prompt's own length in tokens, when a tokenizer counted it.
    own_prompt_tokens: Vec<Option<u32>>,
    /// The route's output-length distribution and the schedule's seed it draws from.
    lengths: Option<(Lengths, u64)>,
    /// The pinned `max_tokens`, when neither gives one.
    pinned_max_tokens: u32,
    /// A generated prompt's length from `input_tokens`, in place of `body_suffixes`.
    input: Option<GeneratedInput>,
    /// What precedes the output-length cap's number: `,"max_tokens":`, or the Responses API's
    /// `,"max_output_tokens":`.
    max_field: &'static str,
    /// The shared-prefix pool's texts, when the workload declares one (SPEC §1 "Shared
    /// prefixes"): each goes before `request {index}`, so the unique part follows it.
    shared: Option<SharedPrefixes>,
    /// Per `body_suffixes` entry, how many of its bytes are the prompt's own text (after the
    /// marker, before the closing): what a later turn repeats under a conversation history;
    /// `None` where the prompt is more than one text (a conversation, images, its own fields).
    texts_end: Vec<Option<usize>>,
    /// Whether each turn resends its session's earlier turns (SPEC §1 "Conversation
    /// histories").
    history: bool,
    /// Whether each prompt already holds its session's history: a semi-open run's ShareGPT
    /// conversation, turn k its messages up to its (k + 1)-th human turn.
    conversation_turns: bool,
}

/// `[workload.prefixes]`'s texts and the draw that picks one per session.
#[derive(Clone, Debug)]
struct SharedPrefixes {
    pool: PrefixPool,
    seed: u64,
    /// Entry k's text: `shared context {k} of percentes.`, its length's filler units, a space.
    texts: Arc<Vec<String>>,
    /// The pre-flight's text: as long as the longest entry, but no entry's (`shared context
    /// {entries}`), so the sample shows a prompt too long for the server before the run and
    /// warms no entry the design counts.
    probe: Arc<str>,
}

impl SharedPrefixes {
    fn of(config: &Config) -> Option<SharedPrefixes> {
        let pool = config.prefix_pool()?;
        let filler = Filler::words(pool.longest());
        Some(SharedPrefixes::cut(pool, config.schedule.seed, &filler))
    }

    fn cut(pool: PrefixPool, seed: u64, filler: &Filler) -> SharedPrefixes {
        let texts = (0..pool.entries)
            .map(|k| {
                format!(
                    "shared context {k} of percentes.{} ",
                    filler.first(pool.tokens_of(k))
                )
            })
            .collect();
        let probe = format!(
            "shared context {} of percentes.{} ",
            pool.entries,
            filler.first(pool.longest())
        );
        SharedPrefixes {
            pool,
            seed,
            texts: Arc::new(texts),
            probe: probe.into(),
        }
    }

    /// The text session `session` opens with ("" for none).
    fn text(&self, session: u64) -> &str {
        self.pool
            .draw(self.seed, session)
            .and_then(|k| self.texts.get(k as usize))
            .map_or("", String::as_str)
    }
}

/// `routes[i].input_tokens`: each request's generated prompt cut from one filler to its drawn
/// length (SPEC §P "Token lengths").
#[derive(Clone, Debug)]
struct GeneratedInput {
    lengths: Lengths,
    seed: u64,
    filler: Arc<Filler>,
    /// Whether a unit of the filler is a token of `target.tokenizer` (else a word).
    counted: bool,
    /// What ends the body after the prompt (the JSON string's and the message's closing, and
    /// the images after the text).
    closing: Arc<str>,
}

impl GeneratedInput {
    fn length(&self, index: u64) -> u32 {
        self.lengths
            .draw(TokenSide::Input, self.seed, index)
            .unwrap_or(0)
            .min(self.filler.len())
    }
}

impl std::fmt::Debug for Template {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Template(head {} bytes, body {} bytes, {} prompts)",
            self.head_prefix.len(),
            self.body_prefix.len(),
            self.body_suffixes.len()
        )
    }
}

fn json_string_inner(text: &str) -> String {
    let quoted = serde_json::to_string(text).unwrap_or_else(|_| "\"\"".into());
    quoted[1..quoted.len() - 1].to_owned()
}

impl Template {
    /// `prompts` is the route's prompt set, if it has one; `extra` the configured headers and
    /// the API key; `pinned_max_tokens` the plan's `target.max_tokens` (§6, [`RunPlan`]). No
    /// image is attached ([`Template::with_images`] attaches the route's).
    ///
    /// [`RunPlan`]: crate::run::RunPlan
    pub fn new(
        config: &Config,
        target: &Target,
        route: &Route,
        prompts: Option<&PromptSet>,
        extra: &ExtraHeaders,
        pinned_max_tokens: u32,
    ) -> Template {
        Template::with_images(
            config,
            target,
            route,
            (prompts, extra),
            pinned_max_tokens,
            &[],
        )
    }

    /// [`Template::new`] with `images` attached to each request's user message (SPEC §1 "What a
    /// request carries"): the route's own, read by [`load_images`]. The route's tools, tool
    /// choice and response format are in the body, in its API's shape (`Route::parts_fields`).
    pub fn with_images(
        config: &Config,
        target: &Target,
        route: &Route,
        (prompts, extra): (Option<&PromptSet>, &ExtraHeaders),
        pinned_max_tokens: u32,
        images: &[Image],
    ) -> Template {
        // §6: mock and self-hosted requests ignore EOS (fixed output lengths); hosted ones do not,
        // and send the field only when configured (third-party APIs refuse fields they do not
        // know, and not ignoring EOS is their default).
        let ignore_eos = match (config.target.ignore_eos, config.target.kind) {
            (Some(value), _) => Some(value),
            (None, percentes_formats::config::TargetKind::Hosted) => None,
            (None, _) => Some(true),
        };
        let stream = route.streams(&config.target);
        let api = route.api();
        let completions = api == Api::Completions;
        let model = serde_json::to_string(&config.target.model).unwrap_or_default();
        let mut fields = format!("{{\"model\":{model},\"stream\":{stream},");
        // The Responses API reports usage in its completed event, unasked.
        if stream && config.target.include_usage && api != Api::Responses {
            // The final chunk then carries the token counts (OpenAI's and vLLM's usage chunk).
            fields.push_str("\"stream_options\":{\"include_usage\":true},");
        }
        // A unique prefix per request (SPEC §1): "request {index} of percentes.", then the prompt.
        // A set with conversations sends every prompt as one, its first message carrying the
        // prefix; that message writes its content before its role (JSON keys have no order), so
        // everything after the index digits can differ from prompt to prompt. Where a prompt
        // file's lines carry their own tools, choice, format or images, each line's body ends
        // with its own fields.
        let own_parts = prompts.is_some_and(PromptSet::has_parts);
        if !own_parts {
            fields.push_str(&parts_fields(route, ignore_eos));
        }
        let conversations = !completions && prompts.is_some_and(PromptSet::has_messages);
        let arrays = !images.is_empty() || prompts.is_some_and(PromptSet::has_images);
        let opening = opening(api, conversations, arrays);
        let body_prefix = format!("{fields}{opening}request ").into_bytes();
        let continuation = |text: &str| format!(" of percentes. {}", json_string_inner(text));
        // A prompt a later turn can repeat as text: one plain string, nothing attached.
        let plain = !own_parts && !conversations && !arrays;
        let texts_end: Vec<Option<usize>> = match prompts {
            Some(set) => set
                .prompts
                .iter()
                .map(|p| match &p.content {
                    PromptContent::Text(t) if plain => Some(continuation(t).len()),
                    _ => None,
                })
                .collect(),
            None => vec![plain.then(|| generated_words(route.prompt_tokens).len())],
        };
        let continuations: Vec<(String, Option<u32>)> = match prompts {
            Some(set) => set
                .prompts
                .iter()
                .map(|p| {
                    let line = p.parts.as_deref();
                    let images_of = |k: usize| -> Vec<&Image> {
                        line.map(|x| {
                            x.images
                                .iter()
                                .filter(|(m, _)| *m == k)
                                .map(|(_, i)| i)
                                .collect()
                        })
                        .unwrap_or_default()
                    };
                    let closes = |k: usize| content_closing(api, arrays, &images_of(k));
                    let mut text = match (&p.content, conversations) {
                        (PromptContent::Text(t), false) => format!(
                            "{}{}",
                            continuation(t),
                            prompt_closing(api, arrays, &images_of(0))
                        ),
                        (PromptContent::Text(t), true) => {
                            format!("{}{},\"role\":\"user\"}}]", continuation(t), closes(0))
                        }
                        (PromptContent::Messages(m), _) => {
                            let mut out = String::new();
                            for (k, (role, content)) in m.iter().enumerate() {
                                let role = json_string_inner(role);
                                if k == 0 {
                                    out.push_str(&format!(
                                        "{}{},\"role\":\"{role}\"}}",
                                        continuation(content),
                                        closes(0)
                                    ));
                                } else if images_of(k).is_empty() {
                                    out.push_str(&format!(
                                        ",{{\"role\":\"{role}\",\"content\":\"{}\"}}",
                                        json_string_inner(content)
                                    ));
                                } else {
                                    out.push_str(&format!(
                                        ",{{\"role\":\"{role}\",\"content\":{}{}{}}}",
                                        text_part_opening(api),
                                        json_string_inner(content),
                                        closes(k)
                                    ));
                                }
                            }
                            out.push(']');
                            out
                        }
                    };
                    if own_parts {
                        let own = match line {
                            Some(x) => parts_fields(&x.route(route), ignore_eos),
                            None => parts_fields(route, ignore_eos),
                        };
                        if !own.is_empty() {
                            text.push(',');
                            text.push_str(own.trim_end_matches(','));
                        }
                    }
                    (text, p.max_tokens)
                })
                .collect(),
            None => {
                let filler = generated_words(route.prompt_tokens);
                let images: Vec<&Image> = images.iter().collect();
                vec![(
                    format!("{filler}{}", prompt_closing(api, arrays, &images)),
                    None,
                )]
            }
        };
        let closing = prompt_closing(api, arrays, &images.iter().collect::<Vec<_>>());
        let (body_suffixes, own_max_tokens): (Vec<Vec<u8>>, _) = continuations
            .into_iter()
            .map(|(c, max_tokens)| (c.into_bytes(), max_tokens))
            .unzip();
        let own_prompt_tokens = match prompts {
            Some(set) => set.prompts.iter().map(|p| p.prompt_tokens).collect(),
            None => vec![None],
        };
        let head_prefix = format!(
            "POST {} HTTP/1.1\r\nhost: {}\r\ncontent-type: application/json\r\naccept: {}\r\n{}x-request-id: pct-",
            target.request_target(&route.path),
            target.host_header(),
            if stream { "text/event-stream" } else { "application/json" },
            extra.lines(),
        )
        .into_bytes();
        Template {
            head_prefix,
            body_prefix,
            body_suffixes: Arc::new(body_suffixes),
            own_max_tokens,
            own_prompt_tokens,
            lengths: route.output_tokens.map(|l| (l, config.schedule.seed)),
            pinned_max_tokens,
            input: route.input_tokens.map(|lengths| GeneratedInput {
                lengths,
                seed: config.schedule.seed,
                filler: Filler::words(lengths.longest()),
                counted: false,
                closing: closing.into(),
            }),
            max_field: match api {
                Api::Responses => ",\"max_output_tokens\":",
                Api::Chat | Api::Completions => ",\"max_tokens\":",
            },
            shared: SharedPrefixes::of(config),
            texts_end,
            history: config.history().is_some(),
            conversation_turns: prompts.is_some_and(|set| set.session_turns > 1),
        }
    }

    /// Whether a later turn can repeat an earlier one's prompt: every prompt is one plain text
    /// (resent as text), or each is its ShareGPT session's conversation so far (a conversation
    /// history needs one; setup refuses a route where neither holds).
    pub fn resends_turns(&self) -> bool {
        self.conversation_turns
            || self.input.is_some()
            || self.texts_end.iter().all(Option::is_some)
    }

    /// The template with its shared prefixes cut from `filler`, whose units are tokens of
    /// `target.tokenizer`: each entry's length is then in that tokenizer's tokens.
    pub fn shared_counted_by(mut self, filler: &Filler) -> Template {
        if let Some(shared) = self.shared.take() {
            self.shared = Some(SharedPrefixes::cut(shared.pool, shared.seed, filler));
        }
        self
    }

    /// The template with its generated prompts cut from `filler`, whose units are tokens of
    /// `target.tokenizer` (built by [`ModelTokenizer::filler`](crate::tokens::ModelTokenizer::filler)).
    pub fn counted_by(mut self, filler: Arc<Filler>) -> Template {
        if let Some(input) = &mut self.input {
            input.filler = filler;
            input.counted = true;
        }
        self
    }

    /// Request `index`'s own prompt length in tokens, where it is known: a generated prompt cut
    /// to a tokenizer's count, or a prompt the tokenizer counted.
    pub fn prompt_tokens(&self, index: u64) -> Option<u32> {
        match &self.input {
            Some(input) => input.counted.then(|| input.length(index)),
            None => self.own_prompt_tokens[(index % self.own_prompt_tokens.len() as u64) as usize],
        }
    }

    /// The journal's kind-6 record for request `index` (SPEC §P "Token lengths"): the
    /// `max_tokens` it asked for and its prompt's length in tokens, when either varies from
    /// request to request or a tokenizer counted it; `None` when every request of the route
    /// asks for the pinned length and nothing was counted (the record would say only that).
    pub fn extension(&self, index: u64) -> Option<RequestExtension> {
        self.extension_for(index, index)
    }

    /// [`Template::extension`] for request `index` sending prompt `content` (a follow-up's,
    /// SPEC §1 "Workload models").
    pub fn extension_for(&self, index: u64, content: u64) -> Option<RequestExtension> {
        let varies = self.lengths.is_some()
            || self.input.is_some()
            || self.own_max_tokens.iter().any(Option::is_some)
            || self.own_prompt_tokens.iter().any(Option::is_some);
        if !varies {
            return None;
        }
        let mut fields = vec![(
            ExtensionKey::MaxTokens as u16,
            u64::from(self.max_tokens(content)),
        )];
        if let Some(tokens) = self.prompt_tokens(content) {
            fields.push((ExtensionKey::PromptTokens as u16, u64::from(tokens)));
        }
        Some(RequestExtension { index, fields })
    }

    /// Request `index`'s `max_tokens`: its prompt's own, else the route's distribution's draw
    /// (SPEC §P "Output lengths"), else the pin.
    pub fn max_tokens(&self, index: u64) -> u32 {
        let which = (index % self.body_suffixes.len() as u64) as usize;
        self.own_max_tokens[which]
            .or_else(|| self.lengths.and_then(|(l, seed)| l.max_tokens(seed, index)))
            .unwrap_or(self.pinned_max_tokens)
    }

    /// The bytes of scheduled request `index` (a prompt set's line i mod n), its own session.
    pub fn bytes(&self, index: u64) -> Vec<u8> {
        self.bytes_for(index, index, index)
    }

    /// The bytes of request `index` sending prompt `content` in session `session` (its lengths
    /// and prompt are content's; the unique marker is the index's; the shared prefix before it,
    /// if the pool draws one, is the session's).
    pub fn bytes_for(&self, index: u64, content: u64, session: u64) -> Vec<u8> {
        let shared = self.shared.as_ref().map_or("", |s| s.text(session));
        self.bytes_with(index, &index.to_string(), content, shared)
    }

    /// The bytes of scheduled `entry` under `params`: [`Template::bytes_for`] its prompt
    /// ([`ScheduleParams::content`]) and session; under a conversation history (SPEC §1
    /// "Conversation histories") its marker is `{session}-{turn}` and its session's shared
    /// prefix is followed by every earlier turn's marker and own text, so turn k's prompt opens
    /// with turn k - 1's; a ShareGPT session's turns, which hold the conversation so far, all
    /// take the marker `{session}-0`.
    pub fn bytes_of(&self, entry: &Entry, params: &ScheduleParams) -> Vec<u8> {
        let content = params.content(entry);
        if !self.history {
            return self.bytes_for(entry.index, content, entry.session);
        }
        let shared = self.shared.as_ref().map_or("", |s| s.text(entry.session));
        if self.conversation_turns {
            // The conversation so far is the prompt; its first turn's marker opens every turn.
            let marker = History::marker(entry.session, 0);
            return self.bytes_with(entry.index, &marker, content, shared);
        }
        let mut opening = String::from(shared);
        for turn in 0..entry.turn {
            let earlier = params.content(&Entry { turn, ..*entry });
            opening.push_str("request ");
            opening.push_str(&History::marker(entry.session, turn));
            self.push_own_text(earlier, &mut opening);
            opening.push(' ');
        }
        let marker = History::marker(entry.session, entry.turn);
        self.bytes_with(entry.index, &marker, content, &opening)
    }

    /// Appends prompt `content`'s text after its marker, JSON-escaped, without what closes the
    /// body: what a later turn resends (nothing where the prompt is not one plain text, which
    /// setup refuses under a history).
    fn push_own_text(&self, content: u64, out: &mut String) {
        if let Some(input) = &self.input {
            out.push_str(" of percentes.");
            out.push_str(input.filler.first(input.length(content)));
            return;
        }
        let which = (content % self.body_suffixes.len() as u64) as usize;
        let end = self.texts_end.get(which).copied().flatten().unwrap_or(0);
        out.push_str(&String::from_utf8_lossy(&self.body_suffixes[which][..end]));
    }

    /// The pre-flight's request `index`: where the workload declares shared prefixes, it opens
    /// with a text as long as the longest entry but none of them (a prompt the server cannot
    /// take shows before the run; no entry is warmed).
    pub fn sample_bytes(&self, index: u64) -> Vec<u8> {
        let shared = self.shared.as_ref().map_or("", |s| &*s.probe);
        self.bytes_with(index, &index.to_string(), index, shared)
    }

    /// Request `index`'s bytes: `marker` after `request ` in the body (the index's digits, or
    /// a history's session and turn), prompt `content`, `shared` before the marker.
    fn bytes_with(&self, index: u64, marker: &str, content: u64, shared: &str) -> Vec<u8> {
        use std::io::Write;
        let field = self.max_field.as_bytes();
        let digits = index.to_string();
        // The body prefix ends "request "; the shared text goes before it.
        let opening_end = self.body_prefix.len() - b"request ".len();
        let generated;
        let suffix: &[u8] = match &self.input {
            Some(input) => {
                generated = format!(
                    " of percentes.{}{}",
                    input.filler.first(input.length(content)),
                    &*input.closing
                );
                generated.as_bytes()
            }
            None => &self.body_suffixes[(content % self.body_suffixes.len() as u64) as usize],
        };
        let tokens = self.max_tokens(content).to_string();
        let body_len = self.body_prefix.len()
            + shared.len()
            + marker.len()
            + suffix.len()
            + field.len()
            + tokens.len()
            + 1;
        let mut out = Vec::with_capacity(self.head_prefix.len() + 64 + body_len);
        out.extend_from_slice(&self.head_prefix);
        let _ = write!(out, "{digits}\r\ncontent-length: {body_len}\r\n\r\n");
        out.extend_from_slice(&self.body_prefix[..opening_end]);
        out.extend_from_slice(shared.as_bytes());
        out.extend_from_slice(&self.body_prefix[opening_end..]);
        out.extend_from_slice(marker.as_bytes());
        out.extend_from_slice(suffix);
        out.extend_from_slice(field);
        out.extend_from_slice(tokens.as_bytes());
        out.push(b'}');
        out
    }
}

/// A generated prompt of `prompt_tokens` words: ` of percentes.` and alternating filler words,
/// the marker's four words counted in.
fn generated_words(prompt_tokens: u32) -> String {
    let mut filler = String::from(" of percentes.");
    for word in 0..prompt_tokens.saturating_sub(4) {
        filler.push_str(if word % 2 == 0 { " alpha" } else { " beta" });
    }
    filler
}

/// The body fields a route adds beside its prompt, as JSON text ending in a comma (empty for
/// none): `ignore_eos` as the target asks (`None`: not sent), never `true` on a route that asks
/// for a structure (SPEC §2 "What a request carries": a server made to ignore the end of its
/// grammar generates past it; vLLM writes the JSON, then free text), then the tools, the choice
/// and the format, checked when the configuration (or the prompt file) loaded.
fn parts_fields(route: &Route, ignore_eos: Option<bool>) -> String {
    let ignore_eos = ignore_eos.map(|v| v && !route.asks_structure());
    let mut out = match ignore_eos {
        Some(value) => format!("\"ignore_eos\":{value},"),
        None => String::new(),
    };
    out.push_str(&route.parts_fields("routes").unwrap_or_default());
    out
}

/// The body's opening before the prompt's text, by API: a Completions prompt string, or the
/// first message (its content an array of parts when `arrays`: some request attaches images),
/// in Chat Completions' `messages` or the Responses API's `input`. A conversation's first
/// message writes its role after its content.
fn opening(api: Api, conversations: bool, arrays: bool) -> String {
    if api == Api::Completions {
        return "\"prompt\":\"".into();
    }
    let list = match api {
        Api::Responses => "\"input\":[{",
        _ => "\"messages\":[{",
    };
    let role = if conversations {
        ""
    } else {
        "\"role\":\"user\","
    };
    let content = if arrays {
        text_part_opening(api)
    } else {
        "\"".into()
    };
    format!("{list}{role}\"content\":{content}")
}

/// A content array's opening up to its text: `[{"type":"text","text":"` (the Responses API's
/// part type is `input_text`).
fn text_part_opening(api: Api) -> String {
    let kind = match api {
        Api::Responses => "input_text",
        _ => "text",
    };
    format!("[{{\"type\":\"{kind}\",\"text\":\"")
}

/// What closes a message's content after its text: the string's quote, or, as an array of
/// parts, the text part, then each image as a data URL in the API's part shape.
fn content_closing(api: Api, arrays: bool, images: &[&Image]) -> String {
    if !arrays {
        return "\"".into();
    }
    let mut closing = String::from("\"}");
    for image in images {
        closing.push_str(&match api {
            Api::Responses => format!(
                ",{{\"type\":\"input_image\",\"image_url\":\"{}\"}}",
                image.data_url
            ),
            _ => format!(
                ",{{\"type\":\"image_url\",\"image_url\":{{\"url\":\"{}\"}}}}",
                image.data_url
            ),
        });
    }
    closing.push(']');
    closing
}

/// What ends a single prompt's text: a Completions prompt's quote, or the user message's
/// content ([`content_closing`]) and the list.
fn prompt_closing(api: Api, arrays: bool, images: &[&Image]) -> String {
    match api {
        Api::Completions => "\"".into(),
        _ => format!("{}}}]", content_closing(api, arrays, images)),
    }
}

/// A route's verification rule from its `[routes.verify]` (default: `model` = target.model).
pub fn rule(config: &Config, route: &Route) -> Result<exchange::Rule, RecordError> {
    let v = &route.verify;
    let header = v.header.as_deref().map(|h| match h.split_once(':') {
        Some((name, value)) => (
            name.trim().to_ascii_lowercase(),
            Some(value.trim().to_owned()),
        ),
        None => (h.trim().to_ascii_lowercase(), None),
    });
    let field = match (&v.json_field, &v.json_value) {
        (None, None) => Some(("model".to_owned(), config.target.model.clone())),
        (Some(f), Some(value)) => Some((f.clone(), value.clone())),
        (None, Some(value)) => Some(("model".to_owned(), value.clone())),
        (Some(f), None) => {
            return Err(RecordError::config(format!(
                "routes {:?}: verify.json_field {f:?} needs verify.json_value",
                route.label
            )))
        }
    };
    let content_blake3 = match &v.content_blake3 {
        None => None,
        Some(hex) => Some(percentes_formats::journal::parse_hash(hex).ok_or_else(|| {
            RecordError::config(format!(
                "routes {:?}: verify.content_blake3 must be 64 hex digits",
                route.label
            ))
        })?),
    };
    let key = format!("routes {:?}", route.label);
    let structured = route
        .structured_checks(&key)
        .map_err(|e| RecordError::config(e.to_string()))?
        .map(|(answer, functions)| exchange::Structured { answer, functions });
    Ok(exchange::Rule {
        replica_header: config
            .target
            .replica_header
            .as_deref()
            .map(str::to_ascii_lowercase),
        status: v.status,
        header,
        field,
        content_blake3,
        api: route.api(),
        structured,
        by_prompt: Vec::new(),
    })
}

/// Where `set`'s lines carry their own tools or format and `route` checks structured answers:
/// each prompt's checks (its line's parts on the route, or the route's own), by prompt index,
/// for [`exchange::Rule::by_prompt`]; empty otherwise.
pub fn prompt_checks(
    route: &Route,
    set: &PromptSet,
) -> Result<Vec<Option<Arc<exchange::Structured>>>, PartError> {
    use std::collections::HashMap;
    if !route.verify.structured || !set.has_parts() {
        return Ok(Vec::new());
    }
    let key = format!("routes {:?}", route.label);
    // Lines that carry the same parts share one compiled check.
    type Parts<'a> = (Option<&'a str>, Option<&'a str>, Option<&'a str>);
    let mut compiled: HashMap<Parts, Option<Arc<exchange::Structured>>> = HashMap::new();
    let mut out = Vec::with_capacity(set.prompts.len());
    for p in &set.prompts {
        let parts: Parts = match p.parts.as_deref() {
            Some(x) => (
                x.tools.as_deref(),
                x.tool_choice.as_deref(),
                x.response_format.as_deref(),
            ),
            None => (None, None, None),
        };
        if let Some(done) = compiled.get(&parts) {
            out.push(done.clone());
            continue;
        }
        let effective = route.with_own_parts(parts.0, parts.1, parts.2);
        let checks = effective
            .structured_checks(&key)?
            .map(|(answer, functions)| Arc::new(exchange::Structured { answer, functions }));
        compiled.insert(parts, checks.clone());
        out.push(checks);
    }
    Ok(out)
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

    /// The pinned `target.max_tokens` (§6), as a run's plan gives it.
    const PINNED: u32 = percentes_formats::pins::value::TARGET_MAX_TOKENS as u32;

    /// `route`'s template with no prompt set and no extra headers.
    fn bare(config: &Config, target: &Target, route: &Route) -> Template {
        Template::new(
            config,
            target,
            route,
            None,
            &ExtraHeaders::default(),
            PINNED,
        )
    }

    /// `route`'s template drawing from the prompt set `set`, with no extra headers.
    fn from_set(config: &Config, target: &Target, route: &Route, set: &PromptSet) -> Template {
        Template::new(
            config,
            target,
            route,
            Some(set),
            &ExtraHeaders::default(),
            PINNED,
        )
    }

    #[test]
    fn targets() {
        assert_eq!(
            Target::parse("http://127.0.0.1:8000").unwrap().address,
            "127.0.0.1:8000"
        );
        assert_eq!(Target::parse("http://svc/v1").unwrap().address, "svc:80");
        let tls = Target::parse("https://api.example").unwrap();
        assert_eq!((tls.address.as_str(), tls.tls), ("api.example:443", true));
        assert!(Target::parse("ftp://x").is_err());
        assert!(Target::parse("http://").is_err());
        assert!(Target::parse("http://h:x").is_err());
        assert!(Target::parse("http://u:p@h").is_err());
    }

    #[test]
    fn a_base_url_keeps_its_path_and_query_and_the_host_its_port() {
        let azure = Target::parse(
            "https://x.openai.azure.com/openai/deployments/gpt/?api-version=2024-10-21",
        )
        .unwrap();
        assert_eq!(
            azure.request_target("/chat/completions"),
            "/openai/deployments/gpt/chat/completions?api-version=2024-10-21"
        );
        assert_eq!(
            azure.request_target("/x?a=1"),
            "/openai/deployments/gpt/x?a=1&api-version=2024-10-21"
        );
        assert_eq!(azure.host_header(), "x.openai.azure.com");
        let local = Target::parse("http://127.0.0.1:8000").unwrap();
        assert_eq!(local.request_target("/v1/models"), "/v1/models");
        assert_eq!(local.host_header(), "127.0.0.1:8000");
        assert_eq!(Target::parse("https://h:443/").unwrap().host_header(), "h");
        assert_eq!(
            Target::parse("http://[::1]:9000/p").unwrap().host_header(),
            "[::1]:9000"
        );
    }

    fn config(extra_target: &str, kind: &str, profile: &str) -> Config {
        Config::parse(
            format!(
                "schema_version = 1\nprofile = \"{profile}\"\n[target]\nkind = \"{kind}\"\nbase_url = \"http://127.0.0.1:8000\"\nmodel = \"m\"\n{extra_target}\n\
                 [schedule]\nseed = 1\narrival = \"poisson\"\nrate_rps = 2.0\n[fault]\nvariant = \"none\"\n[[routes]]\nlabel = \"chat\"\npath = \"/v1/chat/completions\"\n"
            )
            .as_bytes(),
        )
        .unwrap()
    }

    fn body(template: &Template, index: u64) -> (String, serde_json::Value) {
        let text = String::from_utf8(template.bytes(index)).unwrap();
        let (head, body) = text.split_once("\r\n\r\n").unwrap();
        assert!(head.contains(&format!("content-length: {}", body.len())));
        (head.to_owned(), serde_json::from_str(body).unwrap())
    }

    /// A route's parts in each API's shape: the Responses API's input and output cap, tools and a
    /// forced choice, a strict JSON format, images as a message's parts; a route that asks for
    /// a structured answer never asks the server to ignore the end of sequence.
    #[test]
    fn requests_carry_their_parts_in_the_routes_api_shape() {
        let with_route = |route: &str, path: &str| {
            let text = format!(
                "schema_version = 1\nprofile = \"dev\"\n[target]\nkind = \"self-hosted\"\nbase_url = \"http://127.0.0.1:8000\"\nmodel = \"m\"\n[schedule]\nseed = 1\narrival = \"poisson\"\nrate_rps = 2.0\n[fault]\nvariant = \"none\"\n[[routes]]\nlabel = \"r\"\npath = \"{path}\"\n{route}\n"
            );
            Config::parse(text.as_bytes()).unwrap_or_else(|e| panic!("{e}"))
        };
        let target = Target::parse("http://127.0.0.1:8000").unwrap();
        let schema =
            r#"response_format = '{"type": "object", "properties": {"a": {"type": "string"}}}'"#;
        let config = with_route(schema, "/v1/responses");
        let (_, json) = body(&bare(&config, &target, &config.routes[0]), 3);
        assert_eq!(
            json["input"][0]["content"]
                .as_str()
                .unwrap()
                .split(' ')
                .take(2)
                .collect::<Vec<_>>(),
            ["request", "3"]
        );
        assert_eq!(json["max_output_tokens"], PINNED);
        assert!(json.get("max_tokens").is_none() && json.get("stream_options").is_none());
        assert_eq!(json["text"]["format"]["type"], "json_schema");
        assert_eq!(
            json["ignore_eos"], false,
            "a structured answer ends where it ends"
        );
        let tools = r#"tools = '[{"type": "function", "function": {"name": "f"}}]'
tool_choice = "f""#;
        let config = with_route(tools, "/v1/chat/completions");
        let (_, json) = body(&bare(&config, &target, &config.routes[0]), 3);
        assert_eq!(json["tool_choice"]["function"]["name"], "f");
        assert_eq!(json["tools"][0]["function"]["name"], "f");
        assert_eq!(json["ignore_eos"], false);
        let plain = with_route("", "/v1/chat/completions");
        assert_eq!(
            body(&bare(&plain, &target, &plain.routes[0]), 3).1["ignore_eos"],
            true
        );
        let image = Image::from_data_url("data:image/png;base64,YWJj", "k").unwrap();
        let template = Template::with_images(
            &plain,
            &target,
            &plain.routes[0],
            (None, &ExtraHeaders::default()),
            PINNED,
            &[image],
        );
        let (_, json) = body(&template, 5);
        let parts = &json["messages"][0]["content"];
        assert!(parts[0]["text"]
            .as_str()
            .unwrap()
            .starts_with("request 5 of percentes."));
        assert_eq!(parts[1]["image_url"]["url"], "data:image/png;base64,YWJj");
    }

    /// A shared-prefix pool (SPEC §1 "Shared prefixes"): the session's drawn entry opens the
    /// prompt, before the request's own marker; two sessions drawing one entry send the same
    /// opening bytes, a session drawing none opens with its marker; a session's turns share its
    /// entry; the content length counts the shared text.
    #[test]
    fn a_shared_prefix_opens_the_prompt_before_the_unique_marker() {
        let text = "schema_version = 1\nprofile = \"dev\"\n[target]\nkind = \"self-hosted\"\nbase_url = \"http://127.0.0.1:8000\"\nmodel = \"m\"\n[schedule]\nseed = 5\narrival = \"poisson\"\nrate_rps = 2.0\n[fault]\nvariant = \"none\"\n[[routes]]\nlabel = \"r\"\npath = \"/v1/chat/completions\"\n[workload.prefixes]\nentries = 3\ntokens = [4, 6]\nshare = 0.5\n";
        let config = Config::parse(text.as_bytes()).unwrap_or_else(|e| panic!("{e}"));
        let target = Target::parse("http://127.0.0.1:8000").unwrap();
        let template = bare(&config, &target, &config.routes[0]);
        let pool = config.prefix_pool().unwrap();
        let content = |index: u64, session: u64| {
            let text = String::from_utf8(template.bytes_for(index, index, session)).unwrap();
            let (head, body) = text.split_once("\r\n\r\n").unwrap();
            assert!(head.contains(&format!("content-length: {}", body.len())));
            let json: serde_json::Value = serde_json::from_str(body).unwrap();
            json["messages"][0]["content"].as_str().unwrap().to_owned()
        };
        let (mut with, mut without) = (0, 0);
        for session in 0..40u64 {
            let prompt = content(session, session);
            match pool.draw(5, session) {
                Some(k) => {
                    with += 1;
                    let words = pool.tokens_of(k) as usize;
                    let opening = format!("shared context {k} of percentes.");
                    assert!(prompt.starts_with(&opening), "{prompt}");
                    // The entry's filler words, then the request's own marker.
                    let rest: Vec<&str> = prompt[opening.len()..].split(' ').collect();
                    assert_eq!(
                        rest[words + 1..words + 3],
                        ["request", &session.to_string()]
                    );
                    // A later turn of the session (another index) opens the same way.
                    let turn = content(1_000 + session, session);
                    assert_eq!(turn[..opening.len()], prompt[..opening.len()]);
                    assert!(turn.contains(&format!("request {} of", 1_000 + session)));
                }
                None => {
                    without += 1;
                    assert!(prompt.starts_with(&format!("request {session} of percentes.")));
                }
            }
        }
        assert!(with > 5 && without > 5, "{with} with, {without} without");
        // The pre-flight's sample: as long as the longest entry, and none of them.
        let text = String::from_utf8(template.sample_bytes(u64::MAX)).unwrap();
        let (_, body) = text.split_once("\r\n\r\n").unwrap();
        let json: serde_json::Value = serde_json::from_str(body).unwrap();
        let prompt = json["messages"][0]["content"].as_str().unwrap();
        assert!(
            prompt.starts_with("shared context 3 of percentes."),
            "{prompt}"
        );
        assert_eq!(
            prompt.split(' ').take_while(|w| *w != "request").count(),
            5 + 6
        );
    }

    /// A conversation history (SPEC §1 "Conversation histories"): turn k's prompt is the
    /// session's shared prefix, then each earlier turn's `request {session}-{j}` and own text in
    /// order, then its own marker and text; so it opens with turn k - 1's whole prompt. Each
    /// turn's own text is its prompt's (semi-open: `session x turns + turn`), the header keeps
    /// the index; a prompt that is more than one text cannot be resent.
    #[test]
    fn a_history_resends_the_sessions_earlier_turns_in_order() {
        let text = "schema_version = 1\nprofile = \"dev\"\n[target]\nkind = \"self-hosted\"\nbase_url = \"http://127.0.0.1:8000\"\nmodel = \"m\"\n[schedule]\nseed = 5\narrival = \"poisson\"\nrate_rps = 2.0\n[fault]\nvariant = \"none\"\n[workload]\nmodel = \"semi-open\"\nturns = 3\nhistory = true\n[[routes]]\nlabel = \"r\"\npath = \"/v1/chat/completions\"\n[routes.input_tokens]\nkind = \"uniform\"\nmin = 1\nmax = 9\n[workload.prefixes]\nentries = 1\ntokens = 2\n";
        let config = Config::parse(text.as_bytes()).unwrap_or_else(|e| panic!("{e}"));
        let params = config.schedule_params();
        let target = Target::parse("http://127.0.0.1:8000").unwrap();
        let template = bare(&config, &target, &config.routes[0]);
        assert!(template.resends_turns());
        let prompt = |index: u64, turn: u32| {
            let entry = Entry {
                index,
                intended_ns: 0,
                route: 0,
                phase: 0,
                session: 7,
                turn,
            };
            let text = String::from_utf8(template.bytes_of(&entry, &params)).unwrap();
            let (head, body) = text.split_once("\r\n\r\n").unwrap();
            assert!(head.contains(&format!("x-request-id: pct-{index}\r\n")));
            assert!(head.contains(&format!("content-length: {}", body.len())));
            let json: serde_json::Value = serde_json::from_str(body).unwrap();
            json["messages"][0]["content"].as_str().unwrap().to_owned()
        };
        let lengths = config.routes[0].input_tokens.unwrap();
        let own = |turn: u64| {
            let words = lengths.draw(TokenSide::Input, 5, 7 * 3 + turn).unwrap();
            let filler = Filler::words(9);
            format!("request 7-{turn} of percentes.{}", filler.first(words))
        };
        let shared = format!(
            "shared context 0 of percentes.{} ",
            Filler::words(2).first(2)
        );
        assert_eq!(prompt(7, 0), format!("{shared}{}", own(0)));
        assert_eq!(prompt(40, 1), format!("{shared}{} {}", own(0), own(1)));
        let third = prompt(41, 2);
        assert_eq!(third, format!("{shared}{} {} {}", own(0), own(1), own(2)));
        assert!(third.starts_with(&prompt(40, 1)));
        // A conversation prompt set cannot be resent as text.
        let dir = percentes_testkit::Scratch::new("history");
        // The route's prompts from a file of `format` holding `contents`, and the template.
        let from_file = |name: &str, contents: &str, format: &str| {
            let file = dir.join(name);
            std::fs::write(&file, contents).unwrap();
            let with_set = text.replace(
                "[routes.input_tokens]\nkind = \"uniform\"\nmin = 1\nmax = 9\n",
                &format!(
                    "prompt_file = {:?}\nprompt_format = \"{format}\"\n",
                    file.to_str().unwrap()
                ),
            );
            let config = Config::parse(with_set.as_bytes()).unwrap_or_else(|e| panic!("{e}"));
            let set =
                crate::prompts::load_prompts(&config.routes[0], &config, None, PINNED).unwrap();
            let template = from_set(&config, &target, &config.routes[0], &set);
            (config, template)
        };
        let conversation = "{\"messages\": [{\"role\": \"system\", \"content\": \"s\"}, {\"role\": \"user\", \"content\": \"u\"}]}\n";
        assert!(!from_file("p.jsonl", conversation, "jsonl")
            .1
            .resends_turns());
        // A ShareGPT session's turns hold the conversation so far: each opens with the first
        // turn's marker, so turn 2's messages extend turn 1's.
        let sharegpt = r#"[{"conversations": [{"from": "human", "value": "h1"}, {"from": "gpt", "value": "g1"}, {"from": "human", "value": "h2"}, {"from": "gpt", "value": "g2"}, {"from": "human", "value": "h3"}]}]"#;
        let (config, template) = from_file("c.json", sharegpt, "sharegpt");
        assert!(template.resends_turns());
        let params = config.schedule_params();
        let messages = |index: u64, turn: u32| {
            let entry = Entry {
                index,
                intended_ns: 0,
                route: 0,
                phase: 0,
                session: 0,
                turn,
            };
            let text = String::from_utf8(template.bytes_of(&entry, &params)).unwrap();
            let body = text.split_once("\r\n\r\n").unwrap().1.to_owned();
            let json: serde_json::Value = serde_json::from_str(&body).unwrap();
            json["messages"]
                .as_array()
                .unwrap()
                .iter()
                .map(|m| m["content"].as_str().unwrap().to_owned())
                .collect::<Vec<_>>()
        };
        let (first, second) = (messages(0, 1), messages(9, 2));
        assert_eq!(
            first,
            [
                "shared context 0 of percentes. the of request 0-0 of percentes. h1",
                "g1",
                "h2"
            ]
        );
        assert_eq!(second[..3], first[..]);
        assert_eq!(second[3..], ["g2", "h3"]);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn request_i_is_unique_and_well_formed() {
        let config = Config::parse(
            percentes_formats::config::example(percentes_formats::config::Profile::Dev).as_bytes(),
        )
        .unwrap();
        let target = Target::parse(&config.target.base_url).unwrap();
        let none = ExtraHeaders::default();
        let template = bare(&config, &target, &config.routes[0]);
        let (head, json) = body(&template, 7);
        assert_ne!(template.bytes(7), template.bytes(8));
        let set = PromptSet {
            prompts: vec![Prompt::text("a \"quoted\" line"), Prompt::text("two")],
            blake3: [0; 32],
            format: percentes_formats::config::PromptFormat::Text,
            skipped: 0,
            skipped_no_reply: 0,
            session_turns: 1,
        };
        let with_set = Template::new(
            &config,
            &target,
            &config.routes[0],
            Some(&set),
            &none,
            PINNED,
        );
        let (_, c) = body(&with_set, 4);
        assert_eq!(
            c["messages"][0]["content"],
            "request 4 of percentes. a \"quoted\" line"
        );
        assert!(
            head.starts_with("POST /v1/chat/completions HTTP/1.1\r\n")
                && head.contains("x-request-id: pct-7")
        );
        assert_eq!(
            (
                json["max_tokens"].as_u64(),
                json["ignore_eos"].as_bool(),
                json["stream"].as_bool(),
                json["stream_options"]["include_usage"].as_bool(),
            ),
            (Some(256), Some(true), Some(true), Some(true))
        );
        assert!(json["messages"][0]["content"]
            .as_str()
            .unwrap()
            .starts_with("request 7 of percentes."));
    }

    #[test]
    fn hosted_requests_send_only_what_is_configured_and_the_key_from_the_environment() {
        let hosted = config(
            "api_key_env = \"PCT_KEY\"\ninclude_usage = false\n[target.headers]\nOpenAI-Organization = \"org-1\"\n[target.secret_headers]\nX-Goog-Api-Key = \"PCT_GOOG\"",
            "hosted",
            "hosted",
        );
        let extra = ExtraHeaders::new(&hosted.target, |v| match v {
            "PCT_KEY" => Some("sk-secret".into()),
            "PCT_GOOG" => Some("AIza-goog".into()),
            _ => None,
        })
        .unwrap();
        let target = Target::parse(&hosted.target.base_url).unwrap();
        let template = Template::new(&hosted, &target, &hosted.routes[0], None, &extra, PINNED);
        let (head, json) = body(&template, 1);
        assert!(
            head.contains("\r\nauthorization: Bearer sk-secret\r\n"),
            "{head}"
        );
        assert!(
            head.contains("\r\nopenai-organization: org-1\r\n"),
            "{head}"
        );
        assert!(head.contains("\r\nhost: 127.0.0.1:8000\r\n"), "{head}");
        // No ignore_eos (not configured for a hosted target), no stream_options (switched off).
        assert!(
            json.get("ignore_eos").is_none() && json.get("stream_options").is_none(),
            "{json}"
        );
        assert!(head.contains("\r\nx-goog-api-key: AIza-goog\r\n"), "{head}");
        // The tool names itself, once; a configured User-Agent replaces it.
        let agent = format!(
            "\r\nuser-agent: percentes/{}\r\n",
            env!("CARGO_PKG_VERSION")
        );
        assert_eq!(head.matches("user-agent:").count(), 1, "{head}");
        assert!(head.contains(&agent), "{head}");
        let own = config(
            "[target.headers]\nUser-Agent = \"ci-bot/2\"",
            "hosted",
            "hosted",
        );
        let extra_own = ExtraHeaders::new(&own.target, |_| None).unwrap();
        let template_own = Template::new(&own, &target, &own.routes[0], None, &extra_own, PINNED);
        let (head_own, _) = body(&template_own, 1);
        assert!(
            head_own.contains("\r\nuser-agent: ci-bot/2\r\n"),
            "{head_own}"
        );
        assert_eq!(head_own.matches("user-agent:").count(), 1, "{head_own}");
        // Neither Debug shows a secret.
        let debug = format!("{template:?}{extra:?}");
        assert!(!debug.contains("sk-secret") && !debug.contains("AIza-goog"));
        assert_eq!(
            extra.redact("echo: Bearer sk-secret, AIza-goog"),
            "echo: Bearer [$PCT_KEY], [$PCT_GOOG]"
        );
        // A missing variable refuses, naming it.
        let err = refused(ExtraHeaders::new(&hosted.target, |v| {
            (v == "PCT_KEY").then(|| "sk-secret".into())
        }));
        assert!(err.contains("PCT_GOOG") && err.contains("not set"), "{err}");
        let err = refused(ExtraHeaders::new(&hosted.target, |_| {
            Some("a\u{7f}b".into())
        }));
        assert!(err.contains("cannot carry"), "{err}");
        let azure = config(
            "api_key_env = \"K\"\napi_key_header = \"api-key\"",
            "hosted",
            "hosted",
        );
        let extra = ExtraHeaders::new(&azure.target, |_| Some("abc".into())).unwrap();
        assert_eq!(
            extra.lines(),
            format!("api-key: abc\r\nuser-agent: {USER_AGENT}\r\n")
        );
    }

    /// `config` with route 0 reading `file` (written with `text`) in its default format.
    fn with_prompts(name: &str, text: &str, profile: &str, kind: &str) -> Config {
        let path = percentes_testkit::shared_folder("request").join(name);
        std::fs::write(&path, text).unwrap();
        let base = config("", kind, profile);
        let text = std::str::from_utf8(base.raw_bytes()).unwrap().to_owned()
            + &format!("prompt_file = {:?}\n", path.to_str().unwrap());
        Config::parse(text.as_bytes()).unwrap()
    }

    /// Lines that carry their own parts: each body has its line's tools, choice and format (in
    /// place of the route's), `ignore_eos` false where the line asks for a structure, and its
    /// images as content parts of the message they go with; every body is JSON. Under
    /// `verify.structured`, each prompt has its own checks, lines with the same parts sharing them.
    #[test]
    fn each_line_sends_and_is_checked_by_its_own_parts() {
        let dir = percentes_testkit::Scratch::new("request");
        std::fs::write(dir.join("dot.gif"), b"GIF89a").unwrap();
        let forced = r#""tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "required": ["q"]}}}], "tool_choice": "f""#;
        let text = [
            format!(r#"{{"prompt": "call", {forced}}}"#),
            r#"{"prompt": "plain"}"#.into(),
            r#"{"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yes?"}, {"role": "user", "content": [{"type": "text", "text": "this"}, {"type": "image_url", "image_url": {"url": "dot.gif"}}]}], "response_format": "json_object"}"#.into(),
            format!(r#"{{"prompt": "again", {forced}}}"#),
        ]
        .join("\n");
        let path = dir.join("lines.jsonl");
        std::fs::write(&path, text).unwrap();
        let base = config("", "mock", "dev");
        let route_keys = format!(
            "prompt_file = {:?}\nresponse_format = '{{\"type\": \"object\", \"required\": [\"a\"]}}'\nverify = {{ structured = true }}\n",
            path.to_str().unwrap()
        );
        let text = std::str::from_utf8(base.raw_bytes()).unwrap().to_owned() + &route_keys;
        let config = Config::parse(text.as_bytes()).unwrap_or_else(|e| panic!("{e}"));
        let route = &config.routes[0];
        let set = load_prompts(route, &config, None, PINNED).unwrap();
        let target = Target::parse(&config.target.base_url).unwrap();
        let template = from_set(&config, &target, route, &set);
        let bodies: Vec<serde_json::Value> = (0..4).map(|i| body(&template, i).1).collect();
        // The forced call: the line's tools and choice, and the route's format kept.
        assert_eq!(bodies[0]["tool_choice"]["function"]["name"], "f");
        assert_eq!(bodies[0]["tools"][0]["function"]["name"], "f");
        assert_eq!(bodies[0]["response_format"]["type"], "json_schema");
        assert_eq!(bodies[0]["ignore_eos"], false);
        assert_eq!(
            bodies[0]["messages"][0]["content"][0]["type"], "text",
            "a set with images sends arrays"
        );
        // The plain line: the route's parts (a format, so still no ignore_eos).
        assert!(bodies[1].get("tools").is_none());
        assert_eq!(bodies[1]["response_format"]["type"], "json_schema");
        // The conversation: its format, and the image with its own (the last) message.
        assert_eq!(bodies[2]["response_format"]["type"], "json_object");
        let messages = bodies[2]["messages"].as_array().unwrap();
        assert_eq!(messages.len(), 3);
        assert!(messages[0]["content"][0]["text"]
            .as_str()
            .unwrap()
            .starts_with("request 2 of percentes. hi"));
        assert_eq!(messages[1]["content"], "yes?");
        assert_eq!(messages[2]["content"][0]["text"], "this");
        assert_eq!(
            messages[2]["content"][1]["image_url"]["url"],
            "data:image/gif;base64,R0lGODlh"
        );
        assert_eq!(bodies[3]["max_tokens"], PINNED);
        // The checks, by prompt.
        let checks = prompt_checks(route, &set).unwrap();
        assert_eq!(checks.len(), 4);
        let check = |i: usize| checks[i].as_deref().unwrap();
        assert_eq!(check(0).functions.len(), 1);
        assert!(
            check(0).answer.as_ref().unwrap().check_text("{}").is_err(),
            "the route's format"
        );
        assert!(check(1).functions.is_empty());
        assert!(
            check(2).answer.as_ref().unwrap().check_text("{}").is_ok(),
            "the line's json_object"
        );
        assert!(Arc::ptr_eq(
            checks[0].as_ref().unwrap(),
            checks[3].as_ref().unwrap()
        ));
    }

    #[test]
    fn a_jsonl_prompt_set_carries_each_lines_max_tokens() {
        let text =
            "{\"prompt\": \"short\", \"max_tokens\": 16, \"id\": 1}\n\n{\"prompt\": \"long\"}\n";
        let dev = with_prompts("set.jsonl", text, "dev", "mock");
        let set = load_prompts(&dev.routes[0], &dev, None, PINNED).unwrap();
        assert_eq!(set.prompts.len(), 2);
        let target = Target::parse(&dev.target.base_url).unwrap();
        let template = from_set(&dev, &target, &dev.routes[0], &set);
        assert_eq!(body(&template, 0).1["max_tokens"], 16);
        assert_eq!(body(&template, 1).1["max_tokens"], 256);
        // Outside the dev profile a per-line length other than the pin is refused.
        let hosted = with_prompts("set.jsonl", text, "hosted", "hosted");
        let err = refused(load_prompts(&hosted.routes[0], &hosted, None, PINNED));
        assert!(err.contains("line 1") && err.contains("§6"), "{err}");
        for (text, says) in [
            ("{\"text\": \"x\"}", "\"prompt\""),
            ("not json", "not JSON"),
            ("{\"prompt\": \"x\", \"max_tokens\": 0}", "at least 1"),
        ] {
            let dev = with_prompts("bad.jsonl", text, "dev", "mock");
            let err = refused(load_prompts(&dev.routes[0], &dev, None, PINNED));
            assert!(err.contains(says), "{text}: {err}");
        }
    }

    #[test]
    fn a_set_with_conversations_sends_each_as_chat_messages_with_the_unique_prefix_first() {
        // Line 0 a plain prompt, line 1 a system + user conversation with quotes to escape.
        let text = "{\"prompt\": \"plain\"}\n{\"messages\": [{\"role\": \"system\", \"content\": \"be \\\"terse\\\"\"}, {\"role\": \"user\", \"content\": \"hi\"}]}\n";
        let dev = with_prompts("chat.jsonl", text, "dev", "mock");
        let set = load_prompts(&dev.routes[0], &dev, None, PINNED).unwrap();
        let target = Target::parse(&dev.target.base_url).unwrap();
        let template = from_set(&dev, &target, &dev.routes[0], &set);
        let (_, plain) = body(&template, 4);
        assert_eq!(
            plain["messages"],
            serde_json::json!([{"role": "user", "content": "request 4 of percentes. plain"}])
        );
        let (_, chat) = body(&template, 5);
        assert_eq!(
            chat["messages"],
            serde_json::json!([
                {"role": "system", "content": "request 5 of percentes. be \"terse\""},
                {"role": "user", "content": "hi"}
            ])
        );
        assert_eq!(chat["max_tokens"], 256);
        assert_ne!(
            template.bytes(5),
            template.bytes(7),
            "the prefix differs per request"
        );
    }

    /// tests/data/tokenizer.json (scripts/make-test-tokenizer.py).
    fn fixture_tokenizer() -> crate::tokens::ModelTokenizer {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/data/tokenizer.json");
        crate::tokens::ModelTokenizer::load(path).unwrap()
    }

    fn route_with(extra: &str) -> Config {
        let base = config("", "mock", "dev");
        let text = std::str::from_utf8(base.raw_bytes()).unwrap().to_owned() + extra;
        Config::parse(text.as_bytes()).unwrap()
    }

    #[test]
    fn a_generated_prompt_is_as_many_tokens_as_its_draw_and_the_extension_says_so() {
        let config = route_with(
            "[routes.input_tokens]\nkind = \"uniform\"\nmin = 1\nmax = 300\n[routes.output_tokens]\nkind = \"uniform\"\nmin = 8\nmax = 64\n",
        );
        let route = &config.routes[0];
        let lengths = route.input_tokens.unwrap();
        let target = Target::parse(&config.target.base_url).unwrap();
        let tokenizer = fixture_tokenizer();
        let template =
            bare(&config, &target, route).counted_by(tokenizer.filler(lengths.longest()).unwrap());
        for index in [0, 1, 2, 17, 99, 12_345] {
            let (_, json) = body(&template, index);
            let content = json["messages"][0]["content"].as_str().unwrap();
            let prefix = format!("request {index} of percentes.");
            assert!(content.starts_with(&prefix), "{content}");
            let drawn = lengths
                .draw(TokenSide::Input, config.schedule.seed, index)
                .unwrap();
            // Counted afresh from the bytes sent: the prefix's tokens, then exactly the draw.
            assert_eq!(
                tokenizer.count(content).unwrap(),
                tokenizer.count(&prefix).unwrap() + drawn,
                "{index}: {content}"
            );
            let max_tokens = route.output_tokens.unwrap().max_tokens(1, index).unwrap();
            assert_eq!(json["max_tokens"], max_tokens);
            let extension = template.extension(index).unwrap();
            assert_eq!(extension.index, index);
            assert_eq!(
                extension.get(ExtensionKey::MaxTokens),
                Some(u64::from(max_tokens))
            );
            assert_eq!(
                extension.get(ExtensionKey::PromptTokens),
                Some(u64::from(drawn))
            );
        }
        // Without a tokenizer the same lengths count words, and the journal claims no tokens.
        let words = bare(&config, &target, route);
        let (_, json) = body(&words, 5);
        let content = json["messages"][0]["content"].as_str().unwrap();
        let drawn = lengths.draw(TokenSide::Input, 1, 5).unwrap() as usize;
        assert_eq!(content.split_whitespace().count(), 4 + drawn, "{content}");
        assert_eq!(
            words.extension(5).unwrap().get(ExtensionKey::PromptTokens),
            None
        );
        // A route with neither writes no extension: every request asks for the pin.
        let plain = config_plain();
        let template = bare(&plain, &target, &plain.routes[0]);
        assert_eq!(template.extension(3), None);
    }

    fn config_plain() -> Config {
        config("", "mock", "dev")
    }

    #[test]
    fn a_sharegpt_reply_sets_the_length_a_dataset_prompt_asks_for() {
        let text = r#"[
          {"conversations": [{"from": "human", "value": "Say something."}, {"from": "gpt", "value": "the recorder sends every request at its own time"}]},
          {"conversations": [{"from": "human", "value": "No reply here."}]},
          {"conversations": [{"from": "system", "value": "Be brief."}, {"from": "human", "value": "Why?"}, {"from": "gpt", "value": "unanticipated"}]}
        ]"#;
        let dir = percentes_testkit::Scratch::new("request");
        let path = dir.join("replies.json");
        std::fs::write(&path, text).unwrap();
        let tokenizer_path = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/data/tokenizer.json");
        let config = Config::parse(
            format!(
                "schema_version = 1\nprofile = \"dev\"\n[target]\nkind = \"mock\"\nbase_url = \"http://127.0.0.1:8000\"\nmodel = \"m\"\ntokenizer = {tokenizer_path:?}\n\
                 [schedule]\nseed = 1\narrival = \"poisson\"\nrate_rps = 2.0\n[fault]\nvariant = \"none\"\n[[routes]]\nlabel = \"chat\"\npath = \"/v1/chat/completions\"\n\
                 prompt_file = {:?}\nprompt_format = \"sharegpt\"\n[routes.output_tokens]\nkind = \"dataset\"\n",
                path.to_str().unwrap()
            )
            .as_bytes(),
        )
        .unwrap();
        let tokenizer = fixture_tokenizer();
        let set = load_prompts(&config.routes[0], &config, Some(&tokenizer), PINNED).unwrap();
        // The entry without a reply is left out and counted; the others ask for their replies'
        // lengths (10 tokens for "unanticipated", as Python's tokenizers counts it).
        assert_eq!(set.prompts.len(), 2);
        assert_eq!(set.skipped_no_reply, 1);
        assert!(
            set.fact().contains("1 entries skipped: no reply"),
            "{}",
            set.fact()
        );
        let first = tokenizer
            .count("the recorder sends every request at its own time")
            .unwrap();
        assert_eq!(set.prompts[0].max_tokens, Some(first));
        assert_eq!(set.prompts[1].max_tokens, Some(10));
        // Each prompt's own length: its messages' contents, counted.
        assert_eq!(
            set.prompts[1].prompt_tokens,
            Some(tokenizer.count("Be brief.").unwrap() + tokenizer.count("Why?").unwrap())
        );
        let target = Target::parse(&config.target.base_url).unwrap();
        let template = from_set(&config, &target, &config.routes[0], &set);
        let (_, json) = body(&template, 3);
        assert_eq!(json["max_tokens"], 10);
        assert_eq!(
            template.extension(3).unwrap().get(ExtensionKey::MaxTokens),
            Some(10)
        );
        // Without the tokenizer there is nothing to measure the replies with.
        let error = refused(load_prompts(&config.routes[0], &config, None, PINNED));
        assert!(error.contains("target.tokenizer"), "{error}");
    }
}
