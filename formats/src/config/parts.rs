//! What a route's requests carry beyond their prompt (SPEC §2 "What a request carries"): the API
//! the route speaks, the tools a model may call and how it must choose, the answer's format, and
//! images. The recorder builds each request's body from these; `config check` refuses what
//! cannot be sent or checked, naming the key.
//!
//! The configuration states tools and formats once, in the Chat Completions API's shape (the one
//! most servers document); a route on the Responses API (`/v1/responses`) sends the same
//! declaration in that API's shape.

use serde_json::{json, Map, Value};

use super::schema::Schema;
use super::Route;

/// Why a route's parts cannot be sent or checked: the key (`routes[0].tools[1]`) and what.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartError {
    /// The configuration key.
    pub key: String,
    /// What is wrong with it.
    pub problem: String,
}

impl std::fmt::Display for PartError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.key, self.problem)
    }
}

impl std::error::Error for PartError {}

fn part(key: impl Into<String>, problem: impl Into<String>) -> PartError {
    PartError {
        key: key.into(),
        problem: problem.into(),
    }
}

/// The API a route speaks, from its path.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Api {
    /// Chat Completions (`/v1/chat/completions`, and any path not named below): `messages` in,
    /// `choices[].delta` out.
    #[default]
    Chat,
    /// Completions (`/v1/completions`): `prompt` in, `choices[].text` out.
    Completions,
    /// The Responses API (`/v1/responses`): `input` in, typed events out (`response.*`), and no
    /// `data: [DONE]` at the end.
    Responses,
}

impl Api {
    /// The API of a request path (its query left out).
    pub fn of_path(path: &str) -> Api {
        let path = path
            .split('?')
            .next()
            .unwrap_or_default()
            .trim_end_matches('/');
        if path.ends_with("/responses") {
            Api::Responses
        } else if path.ends_with("/completions") && !path.ends_with("/chat/completions") {
            Api::Completions
        } else {
            Api::Chat
        }
    }

    /// Its name in messages.
    pub fn name(self) -> &'static str {
        match self {
            Api::Chat => "Chat Completions",
            Api::Completions => "Completions",
            Api::Responses => "Responses",
        }
    }

    /// The body field that caps the output's length.
    pub fn max_tokens_field(self) -> &'static str {
        match self {
            Api::Responses => "max_output_tokens",
            Api::Chat | Api::Completions => "max_tokens",
        }
    }
}

/// The format a route asks the answer to follow.
#[derive(Clone, Debug, PartialEq)]
pub enum ResponseFormat {
    /// Any JSON object (`{"type": "json_object"}`).
    JsonObject,
    /// An answer that matches this JSON Schema (a strict `json_schema` format).
    Schema(Value),
}

/// What `verify.structured` holds a response to: the answer's schema (when the route asks for a
/// format) and each declared function's parameters, by name.
pub type StructuredSchemas = (Option<Schema>, Vec<(String, Schema)>);

/// The image types a route may attach, by file extension, with their media types.
pub const IMAGE_TYPES: [(&str, &str); 5] = [
    ("png", "image/png"),
    ("jpg", "image/jpeg"),
    ("jpeg", "image/jpeg"),
    ("gif", "image/gif"),
    ("webp", "image/webp"),
];

/// The media type of an image file, by its extension; `None` for any other file.
pub fn image_media_type(path: &str) -> Option<&'static str> {
    let extension = path.rsplit_once('.')?.1.to_ascii_lowercase();
    IMAGE_TYPES
        .iter()
        .find(|(e, _)| *e == extension)
        .map(|(_, media)| *media)
}

/// A TOML value as JSON: a string holds JSON text; a table or an array is converted (TOML has no
/// null, and a date is refused: JSON has none).
fn as_json(value: &toml::Value, key: &str) -> Result<Value, PartError> {
    fn convert(value: &toml::Value, key: &str) -> Result<Value, PartError> {
        Ok(match value {
            toml::Value::String(s) => Value::String(s.clone()),
            toml::Value::Integer(i) => json!(i),
            toml::Value::Float(f) => json!(serde_json::Number::from_f64(*f)
                .ok_or_else(|| part(key, format!("{f} is a float that JSON cannot hold")))?),
            toml::Value::Boolean(b) => Value::Bool(*b),
            toml::Value::Datetime(d) => {
                return Err(part(
                    key,
                    format!("{d} is a TOML date, which JSON has no type for"),
                ))
            }
            toml::Value::Array(items) => Value::Array(
                items
                    .iter()
                    .map(|item| convert(item, key))
                    .collect::<Result<_, _>>()?,
            ),
            toml::Value::Table(table) => {
                let mut map = Map::new();
                for (k, v) in table {
                    map.insert(k.clone(), convert(v, key)?);
                }
                Value::Object(map)
            }
        })
    }
    match value {
        toml::Value::String(text) => serde_json::from_str(text).map_err(|e| {
            part(
                key,
                format!("a string here holds JSON, and this does not parse: {e}"),
            )
        }),
        other => convert(other, key),
    }
}

impl Route {
    /// The API this route speaks ([`Api::of_path`]).
    pub fn api(&self) -> Api {
        Api::of_path(&self.path)
    }

    /// Whether the route asks for a structured answer: a `response_format`, or a `tool_choice`
    /// that forces a call (`required` or a function's name). Its requests never ask the server
    /// to ignore the end of sequence (SPEC §2 "What a request carries").
    pub fn asks_structure(&self) -> bool {
        self.response_format.is_some()
            || self
                .tool_choice
                .as_deref()
                .is_some_and(|c| c != "auto" && c != "none")
    }

    /// This route with a request's own tools, choice and format in place of its own, each one
    /// given (JSON text for tools and a format, `json_object` as such; a choice as the key
    /// holds it): how a prompt file's line that carries its own is sent and checked.
    pub fn with_own_parts(
        &self,
        tools: Option<&str>,
        tool_choice: Option<&str>,
        response_format: Option<&str>,
    ) -> Route {
        let mut out = self.clone();
        if let Some(tools) = tools {
            out.tools = Some(toml::Value::String(tools.to_owned()));
        }
        if let Some(choice) = tool_choice {
            out.tool_choice = Some(choice.to_owned());
        }
        if let Some(format) = response_format {
            out.response_format = Some(toml::Value::String(format.to_owned()));
        }
        out
    }

    /// The declared tools, each checked: a function tool with a name and, when given, an object
    /// schema of parameters. `key` names the route in errors (`routes[0]`).
    pub fn tools_declared(&self, key: &str) -> Result<Vec<Value>, PartError> {
        let Some(tools) = &self.tools else {
            return Ok(Vec::new());
        };
        let key = format!("{key}.tools");
        let Value::Array(tools) = as_json(tools, &key)? else {
            return Err(part(&key, "must be an array of tools"));
        };
        if tools.is_empty() {
            return Err(part(
                &key,
                "is empty; leave it out for a route without tools",
            ));
        }
        let mut names: Vec<&str> = Vec::new();
        for (i, tool) in tools.iter().enumerate() {
            let at = format!("{key}[{i}]");
            if tool["type"] != "function" {
                return Err(part(
                    &at,
                    "only function tools are sent (type = \"function\")",
                ));
            }
            let name = tool["function"]["name"].as_str().unwrap_or_default();
            if name.is_empty()
                || !name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
            {
                return Err(part(
                    format!("{at}.function.name"),
                    format!(
                        "must be a name of letters, digits, _ or - (it was {})",
                        tool["function"]["name"]
                    ),
                ));
            }
            if names.contains(&name) {
                return Err(part(
                    format!("{at}.function.name"),
                    format!("{name:?} is declared twice"),
                ));
            }
            names.push(name);
            match &tool["function"]["parameters"] {
                Value::Null | Value::Object(_) => {}
                _ => {
                    return Err(part(
                        format!("{at}.function.parameters"),
                        "must be a JSON Schema object",
                    ))
                }
            }
        }
        Ok(tools)
    }

    /// `tool_choice` as the API writes it; the name of a function must be one of `tools`'.
    pub fn tool_choice_json(&self, key: &str) -> Result<Option<Value>, PartError> {
        let Some(choice) = self.tool_choice.as_deref() else {
            return Ok(None);
        };
        let tools = self.tools_declared(key)?;
        if tools.is_empty() {
            return Err(part(
                format!("{key}.tool_choice"),
                "the route declares no tools to choose from",
            ));
        }
        Ok(Some(match choice {
            "auto" | "none" | "required" => Value::String(choice.to_owned()),
            name => {
                if !tools.iter().any(|t| t["function"]["name"] == name) {
                    return Err(part(
                        format!("{key}.tool_choice"),
                        format!("{name:?} is neither auto, none, required nor the name of one of the route's tools"),
                    ));
                }
                match self.api() {
                    Api::Responses => json!({"type": "function", "name": name}),
                    _ => json!({"type": "function", "function": {"name": name}}),
                }
            }
        }))
    }

    /// The answer's format, when the route asks for one.
    pub fn response_format_declared(&self, key: &str) -> Result<Option<ResponseFormat>, PartError> {
        let Some(format) = &self.response_format else {
            return Ok(None);
        };
        let key = format!("{key}.response_format");
        if format.as_str() == Some("json_object") {
            return Ok(Some(ResponseFormat::JsonObject));
        }
        match as_json(format, &key)? {
            // The API's own wrapper, as a request log holds it: `{"type": "json_object"}`, or
            // `{"type": "json_schema", "json_schema": {"schema": ...}}` (Chat Completions) or
            // `{"type": "json_schema", "schema": ...}` (the Responses API's `text.format`). A
            // JSON Schema's own `type` is never one of these two.
            Value::Object(o) if o.get("type").is_some_and(|t| t == "json_object") => {
                Ok(Some(ResponseFormat::JsonObject))
            }
            Value::Object(o) if o.get("type").is_some_and(|t| t == "json_schema") => {
                match o
                    .get("json_schema")
                    .and_then(|j| j.get("schema"))
                    .or_else(|| o.get("schema"))
                {
                    Some(schema @ Value::Object(_)) => Ok(Some(ResponseFormat::Schema(schema.clone()))),
                    _ => Err(part(
                        &key,
                        "a json_schema format needs its schema object (json_schema.schema, or schema)",
                    )),
                }
            }
            schema @ Value::Object(_) => Ok(Some(ResponseFormat::Schema(schema))),
            _ => Err(part(
                &key,
                "is \"json_object\" or a JSON Schema (a TOML table, or a string of JSON holding an object)",
            )),
        }
    }

    /// The body fields these parts add, as JSON text ending in a comma (empty for none): the
    /// tools, the choice and the format, in the route's API's shape.
    pub fn parts_fields(&self, key: &str) -> Result<String, PartError> {
        let api = self.api();
        let tools = self.tools_declared(key)?;
        let format = self.response_format_declared(key)?;
        if api == Api::Completions
            && (!tools.is_empty() || format.is_some() || !self.images.is_empty())
        {
            return Err(part(
                key,
                format!(
                    "a Completions route ({}) takes a prompt only: tools, response_format and images need /v1/chat/completions or /v1/responses",
                    self.path
                ),
            ));
        }
        let mut out = String::new();
        if !tools.is_empty() {
            let tools: Vec<Value> = match api {
                Api::Responses => tools
                    .iter()
                    .map(|t| {
                        let mut flat = t["function"].clone();
                        flat["type"] = json!("function");
                        flat
                    })
                    .collect(),
                _ => tools,
            };
            out.push_str(&format!("\"tools\":{},", Value::Array(tools)));
        }
        if let Some(choice) = self.tool_choice_json(key)? {
            out.push_str(&format!("\"tool_choice\":{choice},"));
        }
        match (format, api) {
            (None, _) => {}
            (Some(ResponseFormat::JsonObject), Api::Responses) => {
                out.push_str("\"text\":{\"format\":{\"type\":\"json_object\"}},")
            }
            (Some(ResponseFormat::JsonObject), _) => {
                out.push_str("\"response_format\":{\"type\":\"json_object\"},")
            }
            (Some(ResponseFormat::Schema(schema)), Api::Responses) => out.push_str(&format!(
                "\"text\":{},",
                json!({"format": {"type": "json_schema", "name": "percentes", "schema": schema, "strict": true}})
            )),
            (Some(ResponseFormat::Schema(schema)), _) => out.push_str(&format!(
                "\"response_format\":{},",
                json!({"type": "json_schema", "json_schema": {"name": "percentes", "schema": schema, "strict": true}})
            )),
        }
        Ok(out)
    }

    /// With `verify.structured`: the schema the answer must match (any JSON for `json_object`),
    /// `None` when the route asks for no format (a route with a prompt file may ask for nothing
    /// itself: its lines may); each function's parameters by name (any JSON
    /// object where a function declares none). A schema outside the checked subset refuses here.
    pub fn structured_checks(&self, key: &str) -> Result<Option<StructuredSchemas>, PartError> {
        if !self.verify.structured {
            return Ok(None);
        }
        let format = self.response_format_declared(key)?;
        let tools = self.tools_declared(key)?;
        // A JSONL prompt file's lines may carry their own (the recorder checks, when it loads
        // them, that some line does).
        if format.is_none() && tools.is_empty() && self.prompt_file.is_none() {
            return Err(part(
                format!("{key}.verify.structured"),
                "the route has neither response_format nor tools to check an answer against (nor a prompt_file whose lines could carry them)",
            ));
        }
        let answer = match format {
            None => None,
            Some(ResponseFormat::JsonObject) => Some(
                Schema::compile(&json!({"type": "object"}))
                    .map_err(|e| part(key, e.to_string()))?,
            ),
            Some(ResponseFormat::Schema(schema)) => Some(
                Schema::compile(&schema)
                    .map_err(|e| part(format!("{key}.response_format"), e.to_string()))?,
            ),
        };
        let mut functions = Vec::new();
        for (i, tool) in tools.iter().enumerate() {
            let name = tool["function"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            let parameters = match &tool["function"]["parameters"] {
                Value::Null => json!({"type": "object"}),
                p => p.clone(),
            };
            let schema = Schema::compile(&parameters).map_err(|e| {
                part(
                    format!("{key}.tools[{i}].function.parameters"),
                    e.to_string(),
                )
            })?;
            functions.push((name, schema));
        }
        Ok(Some((answer, functions)))
    }

    /// Every part checked as `config check` checks it (each image's type, not its file).
    pub fn check_parts(&self, key: &str) -> Result<(), PartError> {
        self.parts_fields(key)?;
        self.structured_checks(key)?;
        for (i, image) in self.images.iter().enumerate() {
            if image_media_type(image).is_none() {
                return Err(part(
                    format!("{key}.images[{i}]"),
                    format!("{image:?} is not a .png, .jpg, .jpeg, .gif or .webp file"),
                ));
            }
        }
        if !self.images.is_empty() && self.prompt_file.is_some() {
            return Err(part(
                format!("{key}.images"),
                "a route's images go with a generated prompt; a prompt file's lines carry their own (a line's \"images\", or image parts in a message's content)",
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn route(extra: &str) -> Route {
        let text = format!("label = \"r\"\npath = \"/v1/chat/completions\"\n{extra}");
        toml::from_str(&text).unwrap()
    }

    #[test]
    fn the_api_comes_from_the_path() {
        assert_eq!(Api::of_path("/v1/chat/completions"), Api::Chat);
        assert_eq!(Api::of_path("/v1/completions"), Api::Completions);
        assert_eq!(Api::of_path("/v1/responses"), Api::Responses);
        assert_eq!(Api::of_path("/openai/v1/responses/?x=1"), Api::Responses);
        assert_eq!(Api::of_path("/v2/generate"), Api::Chat);
    }

    const TOOL: &str = r#"tools = '[{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]'"#;

    #[test]
    fn tools_and_a_forced_choice_in_each_api_shape() {
        let mut r = route(&format!("{TOOL}\ntool_choice = \"get_weather\""));
        let fields = r.parts_fields("routes[0]").unwrap();
        assert!(
            fields.contains(
                "\"tool_choice\":{\"function\":{\"name\":\"get_weather\"},\"type\":\"function\"}"
            ),
            "{fields}"
        );
        assert!(
            fields.contains("\"tools\":[{\"function\":{\"name\":\"get_weather\""),
            "{fields}"
        );
        r.path = "/v1/responses".into();
        let fields = r.parts_fields("routes[0]").unwrap();
        assert!(
            fields.contains("\"tool_choice\":{\"name\":\"get_weather\",\"type\":\"function\"}"),
            "{fields}"
        );
        assert!(
            fields.contains("\"tools\":[{\"name\":\"get_weather\",\"parameters\""),
            "{fields}"
        );
        // The same tools as TOML tables.
        let toml_tools = route(
            "tool_choice = \"required\"\n[[tools]]\ntype = \"function\"\nfunction = { name = \"f\" }\n",
        );
        assert_eq!(
            toml_tools.parts_fields("routes[0]").unwrap(),
            "\"tools\":[{\"function\":{\"name\":\"f\"},\"type\":\"function\"}],\"tool_choice\":\"required\","
        );
    }

    #[test]
    fn formats_in_each_api_shape() {
        let mut r = route("response_format = \"json_object\"");
        assert_eq!(
            r.parts_fields("routes[0]").unwrap(),
            "\"response_format\":{\"type\":\"json_object\"},"
        );
        r.path = "/v1/responses".into();
        assert_eq!(
            r.parts_fields("routes[0]").unwrap(),
            "\"text\":{\"format\":{\"type\":\"json_object\"}},"
        );
        let schema = route("response_format = { type = \"object\", properties = { answer = { type = \"string\" } } }");
        assert!(schema
            .parts_fields("routes[0]")
            .unwrap()
            .contains("\"json_schema\":{\"name\":\"percentes\",\"schema\":{\"properties\":{\"answer\":{\"type\":\"string\"}},\"type\":\"object\"},\"strict\":true}"));
    }

    #[test]
    fn what_cannot_be_sent_or_checked_is_refused_by_key() {
        for (extra, expected) in [
            ("tools = '[{\"type\": \"retrieval\"}]'", "routes[0].tools[0]: only function tools"),
            ("tools = '[]'", "routes[0].tools: is empty"),
            ("tools = 'not json'", "routes[0].tools: a string here holds JSON"),
            ("tool_choice = \"required\"", "declares no tools"),
            (&format!("{TOOL}\ntool_choice = \"other\""), "\"other\" is neither"),
            ("response_format = 3", "routes[0].response_format: is \"json_object\" or a JSON Schema"),
            ("images = [\"cat.bmp\"]", "routes[0].images[0]: \"cat.bmp\" is not"),
            ("verify = { structured = true }", "neither response_format nor tools"),
            (
                "response_format = '{\"type\": \"string\", \"pattern\": \"x\"}'\nverify = { structured = true }",
                "routes[0].response_format: #/pattern: the keyword \"pattern\"",
            ),
        ] {
            let error = route(extra).check_parts("routes[0]").unwrap_err().to_string();
            assert!(error.contains(expected), "{extra}: {error}");
        }
        let mut completions = route(TOOL);
        completions.path = "/v1/completions".into();
        assert!(completions
            .check_parts("routes[0]")
            .unwrap_err()
            .problem
            .contains("takes a prompt only"));
        // An unchecked schema may use any keyword: the server reads it, nothing claims to check it.
        assert!(
            route("response_format = '{\"type\": \"string\", \"pattern\": \"x\"}'")
                .check_parts("routes[0]")
                .is_ok()
        );
    }

    #[test]
    fn structured_checks_hold_the_answer_and_each_call_to_its_schema() {
        let r = route(&format!(
            "{TOOL}\nresponse_format = \"json_object\"\nverify = {{ structured = true }}"
        ));
        let (answer, functions) = r.structured_checks("routes[0]").unwrap().unwrap();
        assert!(answer.unwrap().check_text("[1]").is_err());
        assert_eq!(functions[0].0, "get_weather");
        assert!(functions[0].1.check_text("{\"city\": \"Oslo\"}").is_ok());
        assert!(functions[0].1.check_text("{}").is_err());
    }
}
