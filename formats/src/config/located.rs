//! Where a key stands in the configuration text, and serde's messages in the words a user knows.
//!
//! Every loading error that names a key also names the line and column of that key in the file,
//! so a user with a long configuration goes straight to the mistake. The positions come from
//! toml's spanned parse of the same text; the typed stage deserializes from that spanned tree, so
//! its errors (a wrong type, an unknown key inside `[[routes]]`) carry a byte span that
//! [`Index::key_at`] turns back into the full dotted key.

use std::fmt;
use std::ops::Range;

use toml::de::{DeTable, DeValue};
use toml::Spanned;

/// A 1-based line and column (in characters) in the configuration text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Location {
    /// The line, from 1.
    pub line: usize,
    /// The column, in characters, from 1.
    pub column: usize,
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}, column {}", self.line, self.column)
    }
}

/// The line and column of byte `offset` of `text` (an offset inside a character counts as that
/// character).
pub(super) fn location(text: &str, offset: usize) -> Location {
    let mut end = offset.min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let before = &text[..end];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    Location {
        line,
        column: before[line_start..].chars().count() + 1,
    }
}

/// Every key of the text with its full dotted path (`routes[1].verify.status`), the span of the
/// key and the span of its value.
#[derive(Clone, Debug)]
pub(super) struct Index {
    text: String,
    keys: Vec<(String, Range<usize>, Range<usize>)>,
}

impl Index {
    pub(super) fn new(text: &str, root: &DeTable<'_>) -> Index {
        let mut index = Index {
            text: text.to_owned(),
            keys: Vec::new(),
        };
        index.walk_table("", root);
        index
    }

    fn walk_table(&mut self, prefix: &str, table: &DeTable<'_>) {
        for (key, value) in table.iter() {
            let path = if prefix.is_empty() {
                key.get_ref().to_string()
            } else {
                format!("{prefix}.{}", key.get_ref())
            };
            self.keys.push((path.clone(), key.span(), value.span()));
            self.walk_value(&path, value);
        }
    }

    fn walk_value(&mut self, path: &str, value: &Spanned<DeValue<'_>>) {
        match value.get_ref() {
            DeValue::Table(table) => self.walk_table(path, table),
            DeValue::Array(array) => {
                for (i, item) in array.iter().enumerate() {
                    let item_path = format!("{path}[{i}]");
                    self.keys
                        .push((item_path.clone(), item.span(), item.span()));
                    self.walk_value(&item_path, item);
                }
            }
            _ => {}
        }
    }

    /// The line and column of byte `offset`.
    pub(super) fn location(&self, offset: usize) -> Location {
        location(&self.text, offset)
    }

    /// Where `key` is written: its key's position, or for a key inside an array of tables that
    /// the file never names (`routes[0].weight` left to its default), the table's position.
    pub(super) fn locate(&self, key: &str) -> Option<Location> {
        let mut key = key;
        loop {
            if let Some((_, span, _)) = self.keys.iter().find(|(p, _, _)| p == key) {
                return Some(self.location(span.start));
            }
            key = &key[..key.rfind(['.', '['])?];
        }
    }

    /// The innermost key whose key or value contains `span` (the key an error is about).
    pub(super) fn key_at(&self, span: &Range<usize>) -> Option<&str> {
        self.keys
            .iter()
            .filter(|(_, key, value)| contains(key, span) || contains(value, span))
            .min_by_key(|(path, key, value)| {
                let width = if contains(key, span) {
                    key.len()
                } else {
                    value.len()
                };
                (width, usize::MAX - path.len())
            })
            .map(|(path, _, _)| path.as_str())
    }
}

fn contains(outer: &Range<usize>, inner: &Range<usize>) -> bool {
    outer.start <= inner.start && inner.end <= outer.end && outer.start < outer.end
}

/// serde's type names in the words of someone writing a configuration.
fn kind_words(expected: &str) -> String {
    match expected {
        "u8" => "a whole number from 0 to 255".into(),
        "u16" => "a whole number from 0 to 65535".into(),
        "u32" => "a whole number from 0 to 4294967295".into(),
        "u64" | "usize" => "a whole number, 0 or more".into(),
        "i64" | "i32" => "a whole number".into(),
        "f64" | "f32" => "a number".into(),
        "a boolean" | "bool" => "true or false".into(),
        "a sequence" => "a list".into(),
        "a map" | "struct" => "a table".into(),
        other if other.starts_with("struct ") => "a table".into(),
        other if other.starts_with("enum ") => "one of the names this key takes".into(),
        other => other.into(),
    }
}

/// What the user wrote, as serde names it (`string "one"`, ``integer `5` ``).
fn found_words(found: &str) -> String {
    let plain = found.replace('`', "");
    for (prefix, words) in [
        ("string ", "the text "),
        ("integer ", "the whole number "),
        ("floating point ", "the number "),
        ("boolean ", ""),
    ] {
        if let Some(rest) = plain.strip_prefix(prefix) {
            return format!("{words}{rest}");
        }
    }
    match plain.as_str() {
        "map" => "a table".into(),
        "sequence" => "a list".into(),
        other => other.into(),
    }
}

/// Names between backticks in serde's lists (`` `label`, `path` `` -> `label, path`).
fn names(list: &str) -> String {
    list.replace(", or ", ", ")
        .replace(" or ", ", ")
        .split(", ")
        .map(|n| n.trim_matches('`'))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A typed-stage message rewritten for people: what was expected, what was found, what to do.
/// Returns the message and, for a missing key, that key's name.
pub(super) fn plain(message: &str) -> (String, Option<String>) {
    let message = message.trim();
    let first = message.lines().next().unwrap_or_default();
    if let Some(rest) = first
        .strip_prefix("invalid type: ")
        .or_else(|| first.strip_prefix("invalid value: "))
    {
        if let Some((found, expected)) = rest.split_once(", expected ") {
            return (
                format!(
                    "expected {}, found {}",
                    kind_words(expected),
                    found_words(found)
                ),
                None,
            );
        }
    }
    if let Some(rest) = first.strip_prefix("unknown field ") {
        if let Some((field, expected)) = rest.split_once(", expected one of ") {
            return (
                format!(
                    "unknown key {field}: this table takes {}; fix its spelling or remove it",
                    names(expected)
                ),
                None,
            );
        }
        if let Some((field, expected)) = rest.split_once(", expected ") {
            return (
                format!(
                    "unknown key {field}: this table takes {}; fix its spelling or remove it",
                    names(expected)
                ),
                None,
            );
        }
        return (
            format!("unknown key {rest}: this table takes no such key; remove it"),
            None,
        );
    }
    if let Some(rest) = first.strip_prefix("unknown variant ") {
        if let Some((variant, expected)) = rest.split_once(", expected one of ") {
            return (
                format!("{variant} is not one of: {}", names(expected)),
                None,
            );
        }
        if let Some((variant, expected)) = rest.split_once(", expected ") {
            return (
                format!("{variant} is not one of: {}", names(expected)),
                None,
            );
        }
    }
    if let Some(rest) = first.strip_prefix("missing field ") {
        let field = rest.trim_matches('`').to_owned();
        return (format!("missing; this table needs `{field}`"), Some(field));
    }
    (first.to_owned(), None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serde_words_become_a_users_words() {
        let check = |message: &str, expected: &str| assert_eq!(plain(message).0, expected);
        check(
            "invalid type: string \"one\", expected u64",
            "expected a whole number, 0 or more, found the text \"one\"",
        );
        check(
            "invalid value: integer `-1`, expected u32",
            "expected a whole number from 0 to 4294967295, found the whole number -1",
        );
        check(
            "invalid type: integer `5`, expected a boolean",
            "expected true or false, found the whole number 5",
        );
        check(
            "unknown field `labl`, expected one of `label`, `path`",
            "unknown key `labl`: this table takes label, path; fix its spelling or remove it",
        );
        check(
            "unknown variant `poison`, expected `poisson` or `deterministic`",
            "`poison` is not one of: poisson, deterministic",
        );
        assert_eq!(plain("missing field `seed`").1.as_deref(), Some("seed"));
    }
}
