//! What a JSONL prompt line carries beyond its text (SPEC §2 "What a request carries"): its own
//! `tools`, `tool_choice` and `response_format`, each in place of the route's, and images: a
//! `prompt` line's `images` (files, named relative to the prompt file's folder, or data URLs),
//! or image parts in a message's `content` array, as the Chat Completions API writes them.
//!
//! A line is held to what a route is held to: its parts must be sendable on the route's API,
//! and, under `verify.structured`, checkable. Images are read once per file and never fetched
//! from the network: a URL the server fetches would put that fetch inside every measured time.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use percentes_formats::config::parts::{Api, PartError};
use percentes_formats::config::Route;
use percentes_formats::files::LINE_IMAGES_BYTES_MAX;
use serde_json::Value;

use crate::images::Image;

/// Images, each with the message it goes with (0 for a `prompt` line's text).
pub type Images = Vec<(usize, Image)>;

/// A line's own parts. Tools, choice and format are kept as the configuration keys hold them
/// (JSON text; a choice as its name), so the route's own checks and shapes apply unchanged.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LineParts {
    /// `tools`, a JSON array of function tools.
    pub tools: Option<String>,
    /// `tool_choice`: `auto`, `none`, `required` or a function's name.
    pub tool_choice: Option<String>,
    /// `response_format`: `json_object` or a JSON Schema's text.
    pub response_format: Option<String>,
    /// Each image with the message it goes with (0 for a `prompt` line's text).
    pub images: Images,
}

impl LineParts {
    /// Whether the line sets any of tools, choice and format.
    pub fn has_fields(&self) -> bool {
        self.tools.is_some() || self.tool_choice.is_some() || self.response_format.is_some()
    }

    /// `route` as this line's requests go: the line's tools, choice and format in place of the
    /// route's (each one it gives; the route's others kept).
    pub fn route(&self, route: &Route) -> Route {
        route.with_own_parts(
            self.tools.as_deref(),
            self.tool_choice.as_deref(),
            self.response_format.as_deref(),
        )
    }
}

/// The images a prompt file's lines name, read once per file, and what they come to as sent.
pub(super) struct LineImages {
    /// The prompt file's folder: a line's file names are relative to it.
    dir: PathBuf,
    files: HashMap<PathBuf, Image>,
    /// The data URLs' bytes over every line so far (each line carries its own copy).
    sent_bytes: u64,
}

impl LineImages {
    /// The images of the prompt file at `path`.
    pub(super) fn beside(path: &str) -> LineImages {
        LineImages {
            dir: Path::new(path)
                .parent()
                .map(Path::to_path_buf)
                .unwrap_or_default(),
            files: HashMap::new(),
            sent_bytes: 0,
        }
    }

    /// The image `source` names, a data URL or a file; `at` says where, for errors.
    fn image(&mut self, at: &str, source: &str) -> Result<Image, PartError> {
        let image = if source.starts_with("data:") {
            Image::from_data_url(source, at)?
        } else if source.contains("://") {
            return Err(wrong(at, format!(
                "{source:?} is a URL; an image is sent as a file or a data URL, never fetched (a server that fetches it would time the fetch in every request)"
            )));
        } else {
            let file = self.dir.join(source);
            match self.files.get(&file) {
                Some(image) => image.clone(),
                None => {
                    let image = Image::from_file(&file, source, at).map_err(|e| {
                        wrong(
                            at,
                            format!(
                                "{} (a line names files relative to the prompt file's folder)",
                                e.problem
                            ),
                        )
                    })?;
                    self.files.insert(file, image.clone());
                    image
                }
            }
        };
        self.sent_bytes += image.data_url.len() as u64;
        if self.sent_bytes > LINE_IMAGES_BYTES_MAX {
            return Err(wrong(at, format!(
                "the lines' images come to more than {} MiB as sent (each line carries its own copy); use fewer or smaller images",
                LINE_IMAGES_BYTES_MAX >> 20
            )));
        }
        Ok(image)
    }
}

/// What is wrong at `key`.
fn wrong(key: &str, problem: impl Into<String>) -> PartError {
    PartError {
        key: key.to_owned(),
        problem: problem.into(),
    }
}

/// A message's `content`: a string, or an array of parts with at most one text part
/// (`text`/`input_text`) and any number of image parts (`image_url`/`input_image`, whose URL
/// is a data URL or a file). Returns the text and the images.
pub(super) fn message_content(
    at: &str,
    content: &Value,
    images: &mut LineImages,
) -> Result<(String, Vec<Image>), PartError> {
    let parts = match content {
        Value::String(text) => return Ok((text.clone(), Vec::new())),
        Value::Array(parts) => parts,
        _ => return Err(wrong(at, "content is a string or an array of parts")),
    };
    let mut text = None;
    let mut found = Vec::new();
    for (p, part) in parts.iter().enumerate() {
        let at = format!("{at}.content[{p}]");
        match part.get("type").and_then(Value::as_str) {
            Some("text" | "input_text") => {
                let t = part
                    .get("text")
                    .and_then(Value::as_str)
                    .ok_or_else(|| wrong(&at, "a text part needs a string \"text\""))?;
                if text.replace(t.to_owned()).is_some() {
                    return Err(wrong(
                        &at,
                        "a second text part; a message is sent with one text part (join them into one)",
                    ));
                }
            }
            Some("image_url" | "input_image") => {
                let url = match part.get("image_url") {
                    Some(Value::String(url)) => url.as_str(),
                    Some(o) => o.get("url").and_then(Value::as_str).unwrap_or_default(),
                    None => "",
                };
                if url.is_empty() {
                    return Err(wrong(&at, "an image part needs its URL (image_url.url)"));
                }
                found.push(images.image(&at, url)?);
            }
            other => {
                let kind = other.map_or("without a type".to_owned(), |t| format!("of type {t:?}"));
                return Err(wrong(
                    &at,
                    format!("a part {kind} is not sent (text and image parts are)"),
                ));
            }
        }
    }
    let text = text.ok_or_else(|| wrong(at, "the content has no text part"))?;
    Ok((text, found))
}

/// Line `value`'s own parts, `None` when it has none. `messages_images` are the images its
/// messages' content parts held, by message; `last` the index of the message a line's `images`
/// go with (the last, the user's; 0 for a `prompt` line). The parts are checked as the route's
/// are, on `route` with the line's in place of its own.
pub(super) fn line_parts(
    at: &str,
    value: &Value,
    (messages_images, last): (Images, usize),
    images: &mut LineImages,
    route: &Route,
) -> Result<Option<LineParts>, PartError> {
    let mut parts = LineParts {
        images: messages_images,
        ..LineParts::default()
    };
    match value.get("tools") {
        None | Some(Value::Null) => {}
        Some(tools @ Value::Array(_)) => parts.tools = Some(tools.to_string()),
        Some(_) => return Err(wrong(at, "tools must be an array of tools")),
    }
    parts.tool_choice = match value.get("tool_choice") {
        None | Some(Value::Null) => None,
        Some(Value::String(choice)) => Some(choice.clone()),
        // The API's object for one function, in either API's shape.
        Some(o) => Some(
            o.get("function")
                .and_then(|f| f.get("name"))
                .or_else(|| o.get("name"))
                .and_then(Value::as_str)
                .map(str::to_owned)
                .ok_or_else(|| {
                    wrong(at, "tool_choice is auto, none, required, a function's name or {\"type\": \"function\", \"function\": {\"name\": ...}}")
                })?,
        ),
    };
    parts.response_format = match value.get("response_format") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) if s == "json_object" => Some(s.clone()),
        Some(format @ Value::Object(_)) => Some(format.to_string()),
        Some(_) => {
            return Err(wrong(
                at,
                "response_format is \"json_object\" or an object (a JSON Schema, or the API's {\"type\": ...})",
            ))
        }
    };
    match value.get("images") {
        None | Some(Value::Null) => {}
        Some(Value::Array(list)) => {
            for (i, source) in list.iter().enumerate() {
                let at = format!("{at}: images[{i}]");
                let source = source
                    .as_str()
                    .ok_or_else(|| wrong(&at, "a file name or a data URL"))?;
                parts.images.push((last, images.image(&at, source)?));
            }
        }
        Some(_) => return Err(wrong(at, "images is an array of files or data URLs")),
    }
    if !parts.has_fields() && parts.images.is_empty() {
        return Ok(None);
    }
    if route.api() == Api::Completions {
        return Err(wrong(at, format!(
            "carries tools, a format or images, and route {:?} ({}) takes a prompt only: they need /v1/chat/completions or /v1/responses",
            route.label, route.path
        )));
    }
    let effective = parts.route(route);
    effective.parts_fields(at)?;
    effective.structured_checks(at)?;
    Ok(Some(parts))
}
