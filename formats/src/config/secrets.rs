//! The secrets stage: no credential reaches the journal. The journal copies the configuration
//! byte for byte (comments included), so a secret written anywhere in it would be in every
//! journal, report and `inspect --config` that cites it. Secrets come from the environment:
//! the API key through `target.api_key_env`, any other secret header through
//! `[target.secret_headers]`. What looks like a credential, by a header's name or by a value's
//! shape, is refused with the place to put it instead.
//!
//! This stage guards what a recording would write. A journal already written is analyzed
//! without it (`Config::parse_journaled`): refusing its bytes would hide nothing.

use super::{located, Config, ConfigError};

/// Fragments of a header (or query parameter) name that say its value is a credential.
const NAME_FRAGMENTS: &[&str] = &[
    "auth",
    "key",
    "token",
    "secret",
    "cookie",
    "session",
    "passw",
    "credential",
    "signature",
    "bearer",
];

/// Prefixes with which issued credentials begin (OpenAI and Anthropic `sk-`, Stripe `sk_`/`rk_`,
/// GitHub `ghp_` and kin, GitLab `glpat-`, Slack `xox?-`, AWS `AKIA`, Google `AIza`, Hugging
/// Face `hf_`, NVIDIA `nvapi-`, Groq `gsk_`, Replicate `r8_`, a JWT's `eyJ`), and the schemes
/// of an Authorization value.
const PREFIXES: &[&str] = &[
    "sk-",
    "sk_",
    "rk_",
    "ghp_",
    "gho_",
    "ghs_",
    "ghu_",
    "github_pat_",
    "glpat-",
    "xoxa-",
    "xoxb-",
    "xoxp-",
    "AKIA",
    "AIza",
    "hf_",
    "nvapi-",
    "gsk_",
    "r8_",
    "eyJ",
];

/// Schemes an Authorization-style value starts with, compared without case.
const SCHEMES: &[&str] = &["bearer ", "basic ", "token ", "digest "];

/// A run of token characters at least this long that mixes letters and digits reads as a
/// generated key (a 128-bit key is 22 base64 or 32 hex characters).
const OPAQUE_MIN: usize = 32;

/// A prefix counts in free text (a comment, a command's argument) only when this many token
/// characters follow it, so that words such as "risk-" or "disk_" are not taken for keys.
const PREFIX_TAIL_MIN: usize = 16;

fn is_token_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"-_+/=.~".contains(&b)
}

/// Why `name` reads as the name of a credential-carrying header or parameter, if it does.
pub fn credential_name(name: &str) -> Option<&'static str> {
    let lower = name.to_ascii_lowercase();
    NAME_FRAGMENTS
        .iter()
        .copied()
        .find(|fragment| lower.contains(fragment))
}

/// Why `value` reads as a credential, if it does: a key's issued prefix, an authorization
/// scheme, or a long opaque run of letters and digits.
pub fn credential_value(value: &str) -> Option<String> {
    let value = value.trim();
    let lower = value.to_ascii_lowercase();
    if let Some(scheme) = SCHEMES.iter().find(|s| lower.starts_with(*s)) {
        return Some(format!("starts with the {:?} scheme", scheme.trim()));
    }
    if let Some(prefix) = PREFIXES.iter().find(|p| value.starts_with(*p)) {
        return Some(format!("starts with {prefix:?}, as issued keys do"));
    }
    opaque_run(value).map(|len| format!("holds an opaque run of {len} letters and digits"))
}

/// The length of the longest run of token characters mixing letters and digits, if it is at
/// least [`OPAQUE_MIN`].
fn opaque_run(text: &str) -> Option<usize> {
    text.as_bytes()
        .split(|b| !is_token_char(*b))
        .filter(|run| {
            run.len() >= OPAQUE_MIN
                && run.iter().any(u8::is_ascii_digit)
                && run.iter().any(u8::is_ascii_alphabetic)
                // A path or a dotted name is words, not a key.
                && !run.contains(&b'/')
                && run.iter().filter(|b| **b == b'.').count() < 2
        })
        .map(<[u8]>::len)
        .max()
}

/// The byte offset of the first issued-key prefix in `text` followed by at least
/// [`PREFIX_TAIL_MIN`] token characters and not inside a longer word.
fn key_in_text(text: &str) -> Option<(usize, &'static str)> {
    let bytes = text.as_bytes();
    for (at, _) in text.char_indices() {
        if at > 0 && is_token_char(bytes[at - 1]) {
            continue;
        }
        for prefix in PREFIXES {
            if text[at..].starts_with(prefix) {
                let tail = bytes[at + prefix.len()..]
                    .iter()
                    .take_while(|b| is_token_char(**b))
                    .count();
                if tail >= PREFIX_TAIL_MIN {
                    return Some((at, prefix));
                }
            }
        }
    }
    None
}

fn refused(key: impl Into<String>, message: impl Into<String>) -> ConfigError {
    ConfigError::Invalid {
        key: key.into(),
        message: message.into(),
        at: None,
    }
}

/// Whether `variable` is an environment variable name (a letter or `_`, then letters, digits
/// and `_`).
pub(super) fn is_variable_name(variable: &str) -> bool {
    variable
        .bytes()
        .next()
        .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
        && variable
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// Query parameter names that carry a credential though no fragment above is in them: a
/// signed URL's `sig` (Azure SAS), a function key's `code` (Azure Functions), `pwd`, `pass`,
/// `jwt`, `hmac`, compared whole and without case.
const QUERY_NAMES: &[&str] = &["sig", "code", "pwd", "pass", "jwt", "hmac"];

/// The first query parameter of `url` (a URL or a path) that reads as a credential, by its
/// name or by its value's shape: (its name, why).
fn query_credential(url: &str) -> Option<(String, String)> {
    let query = url.split_once('?')?.1;
    let query = query.split_once('#').map_or(query, |(q, _)| q);
    query.split(['&', ';']).find_map(|pair| {
        let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
        let whole = QUERY_NAMES
            .iter()
            .find(|n| name.eq_ignore_ascii_case(n))
            .map(|n| format!("\"{n}\" carries a credential"));
        credential_value(value)
            .or_else(|| credential_name(name).map(|f| format!("\"{f}\" in its name")))
            .or(whole)
            .map(|why| (name.to_owned(), why))
    })
}

const MOVE_IT: &str = "the journal copies the configuration, so a secret belongs in the \
                       environment: `[target.secret_headers]` NAME = \"VARIABLE\" (or \
                       target.api_key_env for the API key)";

impl Config {
    /// Refuses a configuration that would write a credential into the journal.
    pub(super) fn check_secrets(&self, text: &str) -> Result<(), ConfigError> {
        let target = &self.target;
        for (name, value) in &target.headers {
            let key = format!("target.headers.{name}");
            if let Some(fragment) = credential_name(name) {
                return Err(refused(
                    key,
                    format!("names a credential (\"{fragment}\" in its name); {MOVE_IT}"),
                ));
            }
            if let Some(why) = credential_value(value) {
                return Err(refused(
                    key,
                    format!("has a value that looks like a credential ({why}); {MOVE_IT}"),
                ));
            }
        }
        // Every URL and path the configuration sends or scrapes: a query is copied into the
        // journal with the configuration, and into every request line.
        let mut urls: Vec<(String, &str)> = vec![("target.base_url".into(), &target.base_url)];
        urls.extend(
            target
                .preflight_path
                .as_deref()
                .map(|p| ("target.preflight_path".to_owned(), p)),
        );
        urls.extend(
            self.routes
                .iter()
                .enumerate()
                .map(|(i, r)| (format!("routes[{i}].path"), r.path.as_str())),
        );
        urls.extend(
            self.server_metrics
                .path
                .as_deref()
                .map(|p| ("server_metrics.path".to_owned(), p)),
        );
        urls.extend(
            self.server_metrics
                .extra
                .iter()
                .map(|(name, url)| (format!("server_metrics.extra.{name}"), url.as_str())),
        );
        for (key, url) in urls {
            if let Some((name, why)) = query_credential(url) {
                return Err(refused(
                    key,
                    format!(
                        "query parameter {name:?} looks like a credential ({why}); the \
                         journal copies the configuration: send the key in a header from \
                         the environment (`[target.secret_headers]` or target.api_key_env)"
                    ),
                ));
            }
        }
        if let Some((at, prefix)) = key_in_text(text) {
            let place = located::location(text, at);
            return Err(ConfigError::Invalid {
                key: "(file)".into(),
                message: format!(
                    "holds what looks like an issued key (starting {prefix:?}); {MOVE_IT}; \
                     remove it, comments included"
                ),
                at: Some(place),
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_shaped_like_keys_are_seen_and_ordinary_ones_are_not() {
        for key in [
            "sk-proj-4f9a1c2b3d",
            "Bearer abc",
            "basic dXNlcjpwYXNz",
            "eyJhbGciOiJIUzI1NiJ9.e30.x",
            "AKIAIOSFODNN7EXAMPLE",
            "0123456789abcdef0123456789abcdef",
            "hf_xyz",
        ] {
            assert!(credential_value(key).is_some(), "{key}");
        }
        for plain in [
            "org-123",
            "bench",
            "perf team",
            "2024-10-21",
            "application/json",
            "/var/lib/percentes/prompts/one-very-long-path-name-2026.jsonl",
            "release-2026.12.03-candidate-build-77",
        ] {
            assert_eq!(credential_value(plain), None, "{plain}");
        }
    }

    #[test]
    fn a_key_in_free_text_is_found_but_words_that_share_a_prefix_are_not() {
        assert_eq!(key_in_text("# risk-free disk_usage task-sk"), None);
        assert_eq!(key_in_text("# sk-short"), None);
        let text = "a = 1\n# old key sk-abcdefghijklmnop1234\n";
        assert_eq!(key_in_text(text), Some((text.find("sk-").unwrap(), "sk-")));
        assert_eq!(
            key_in_text("x=\"hf_0123456789abcdefXYZ\""),
            Some((3, "hf_"))
        );
    }

    #[test]
    fn names_that_carry_credentials() {
        for name in [
            "X-Auth-Token",
            "X-Goog-Api-Key",
            "Ocp-Apim-Subscription-Key",
            "X-Access-Token",
            "Cookie",
            "x-session-id",
        ] {
            assert!(credential_name(name).is_some(), "{name}");
        }
        for name in ["OpenAI-Organization", "x-tenant", "X-Team", "traceparent"] {
            assert_eq!(credential_name(name), None, "{name}");
        }
    }
}
