//! Request templates: the bytes of request i, from the route, the target and the index.

use percentes_formats::config::{Config, Route};
use percentes_formats::pins;

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
}

impl Target {
    /// Parses an `http://` or `https://` base URL (ports default to 80 and 443).
    pub fn parse(base_url: &str) -> Result<Target, String> {
        let (rest, tls) = if let Some(rest) = base_url.strip_prefix("http://") {
            (rest, false)
        } else if let Some(rest) = base_url.strip_prefix("https://") {
            (rest, true)
        } else {
            return Err(format!(
                "target.base_url {base_url:?} must start with http:// or https://"
            ));
        };
        let authority = rest.split('/').next().unwrap_or_default();
        if authority.is_empty() {
            return Err(format!("target.base_url {base_url:?} has no host"));
        }
        let default_port = if tls { 443 } else { 80 };
        let (host, port) = match authority.rsplit_once(':') {
            Some((h, p)) if !h.ends_with(']') || p.is_empty() => match p.parse::<u16>() {
                Ok(port) => (h.to_owned(), port),
                Err(_) => return Err(format!("target.base_url {base_url:?}: bad port {p:?}")),
            },
            _ => (authority.to_owned(), default_port),
        };
        Ok(Target {
            address: format!("{host}:{port}"),
            host,
            port,
            tls,
        })
    }
}

/// A route's request, prebuilt: everything but the index is fixed, so building request i is a
/// few appends (no JSON value per request).
#[derive(Clone, Debug)]
pub struct Template {
    /// The request line and headers up to the request id's digits.
    head_prefix: Vec<u8>,
    /// The JSON body up to the prompt's index digits.
    body_prefix: Vec<u8>,
    /// JSON-escaped prompt continuations after the digits (one per prompt-set line, or one
    /// generated filler), each ending the body.
    body_suffixes: Vec<Vec<u8>>,
}

fn json_string_inner(text: &str) -> String {
    let quoted = serde_json::to_string(text).unwrap_or_else(|_| "\"\"".into());
    quoted[1..quoted.len() - 1].to_owned()
}

impl Template {
    /// `prompts` is the route's prompt set, if it has one.
    pub fn new(
        config: &Config,
        target: &Target,
        route: &Route,
        prompts: Option<&[String]>,
    ) -> Template {
        let max_tokens = config.number(&pins::TARGET_MAX_TOKENS) as u64;
        let ignore_eos = config
            .target
            .ignore_eos
            .unwrap_or(config.target.kind != percentes_formats::config::TargetKind::Hosted);
        let stream = route.streams(&config.target);
        let completions =
            route.path.ends_with("/completions") && !route.path.ends_with("/chat/completions");
        let model = serde_json::to_string(&config.target.model).unwrap_or_default();
        // A unique prefix per request (SPEC §1): "request {index} of percentes.", then the prompt.
        let opening = if completions {
            "\"prompt\":\""
        } else {
            "\"messages\":[{\"role\":\"user\",\"content\":\""
        };
        let closing = if completions { "\"}" } else { "\"}]}" };
        let body_prefix = format!(
            "{{\"model\":{model},\"max_tokens\":{max_tokens},\"stream\":{stream},\"ignore_eos\":{ignore_eos},{opening}request "
        )
        .into_bytes();
        let continuations: Vec<String> = match prompts {
            Some(lines) => lines
                .iter()
                .map(|l| format!(" of percentes. {}", json_string_inner(l)))
                .collect(),
            None => {
                let mut filler = String::from(" of percentes.");
                for word in 0..route.prompt_tokens.saturating_sub(4) {
                    filler.push_str(if word % 2 == 0 { " alpha" } else { " beta" });
                }
                vec![filler]
            }
        };
        let body_suffixes = continuations
            .into_iter()
            .map(|c| format!("{c}{closing}").into_bytes())
            .collect();
        let head_prefix = format!(
            "POST {} HTTP/1.1\r\nhost: {}\r\ncontent-type: application/json\r\naccept: {}\r\nx-request-id: pct-",
            route.path,
            target.host,
            if stream { "text/event-stream" } else { "application/json" },
        )
        .into_bytes();
        Template {
            head_prefix,
            body_prefix,
            body_suffixes,
        }
    }

    /// The bytes of scheduled request `index` (a prompt set's line i mod n).
    pub fn bytes(&self, index: u64) -> Vec<u8> {
        use std::io::Write;
        let digits = index.to_string();
        let suffix = &self.body_suffixes[(index % self.body_suffixes.len() as u64) as usize];
        let body_len = self.body_prefix.len() + digits.len() + suffix.len();
        let mut out = Vec::with_capacity(self.head_prefix.len() + 64 + body_len);
        out.extend_from_slice(&self.head_prefix);
        let _ = write!(out, "{digits}\r\ncontent-length: {body_len}\r\n\r\n");
        out.extend_from_slice(&self.body_prefix);
        out.extend_from_slice(digits.as_bytes());
        out.extend_from_slice(suffix);
        out
    }
}

/// Loads a route's prompt set: one prompt per non-empty line.
pub fn load_prompts(path: &str) -> Result<Vec<String>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("prompt_file {path}: {e}"))?;
    let prompts: Vec<String> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(str::to_owned)
        .collect();
    if prompts.is_empty() {
        return Err(format!("prompt_file {path} has no prompt (one per line)"));
    }
    Ok(prompts)
}

/// A route's verification rule from its `[routes.verify]` (default: `model` = target.model).
pub fn rule(config: &Config, route: &Route) -> Result<crate::exchange::Rule, String> {
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
            return Err(format!(
                "routes {:?}: verify.json_field {f:?} needs verify.json_value",
                route.label
            ))
        }
    };
    let content_blake3 = match &v.content_blake3 {
        None => None,
        Some(hex) => Some(percentes_formats::journal::parse_hash(hex).ok_or_else(|| {
            format!(
                "routes {:?}: verify.content_blake3 must be 64 hex digits",
                route.label
            )
        })?),
    };
    Ok(crate::exchange::Rule {
        status: v.status,
        header,
        field,
        content_blake3,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

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
    }

    #[test]
    fn request_i_is_unique_and_well_formed() {
        let config = Config::parse(
            percentes_formats::config::example(percentes_formats::config::Profile::Dev).as_bytes(),
        )
        .unwrap();
        let target = Target::parse(&config.target.base_url).unwrap();
        let template = Template::new(&config, &target, &config.routes[0], None);
        let a = String::from_utf8(template.bytes(7)).unwrap();
        let b = String::from_utf8(template.bytes(8)).unwrap();
        let lines = vec!["a \"quoted\" line".to_owned(), "two".to_owned()];
        let with_set = Template::new(&config, &target, &config.routes[0], Some(&lines));
        let c = String::from_utf8(with_set.bytes(4)).unwrap();
        let json: serde_json::Value =
            serde_json::from_str(c.split_once("\r\n\r\n").unwrap().1).unwrap();
        assert_eq!(
            json["messages"][0]["content"],
            "request 4 of percentes. a \"quoted\" line"
        );
        assert_ne!(a, b);
        let (head, body) = a.split_once("\r\n\r\n").unwrap();
        assert!(
            head.starts_with("POST /v1/chat/completions HTTP/1.1\r\n")
                && head.contains("x-request-id: pct-7")
        );
        assert!(head.contains(&format!("content-length: {}", body.len())));
        let json: serde_json::Value = serde_json::from_str(body).unwrap();
        assert_eq!(
            (
                json["max_tokens"].as_u64(),
                json["ignore_eos"].as_bool(),
                json["stream"].as_bool()
            ),
            (Some(256), Some(true), Some(true))
        );
        assert!(json["messages"][0]["content"]
            .as_str()
            .unwrap()
            .starts_with("request 7 of percentes."));
    }
}
