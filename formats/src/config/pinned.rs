//! The first loading stage: every keyed pin found, type-checked against its rule and removed.

use std::collections::BTreeMap;

use super::ConfigError;
use crate::pins::{self, Value, PINS};

/// A TOML value as the user wrote it, for error messages.
fn show(value: &toml::Value) -> String {
    match value {
        toml::Value::Integer(v) => v.to_string(),
        toml::Value::Float(v) => format!("{v:?}"),
        toml::Value::Boolean(v) => v.to_string(),
        toml::Value::String(v) => format!("{v:?}"),
        other => format!("a {}", other.type_str()),
    }
}

/// Sections that hold only pinned keys.
const PINNED_ONLY_SECTIONS: &[&str] = &[
    "experiment",
    "client",
    "gates",
    "slo",
    "recovery",
    "analysis",
    "campaign",
    "statistics",
    "shards",
];

/// Checks and removes every keyed pin from the table; returns the configured values.
pub(super) fn take_pins(
    table: &mut toml::Table,
) -> Result<BTreeMap<&'static str, Value>, ConfigError> {
    let mut configured = BTreeMap::new();
    for pin in PINS.iter().filter(|p| p.configurable) {
        let key = pin.key;
        let (section, leaf) = match key.split_once('.') {
            Some((s, l)) => (Some(s), l),
            None => (None, key),
        };
        let holder = match section {
            None => Some(&mut *table),
            Some(s) => match table.get_mut(s) {
                Some(toml::Value::Table(t)) => Some(t),
                Some(_) => {
                    return Err(ConfigError::Invalid {
                        key: s.into(),
                        message: "must be a [section]".into(),
                        at: None,
                    })
                }
                None => None,
            },
        };
        let Some(found) = holder.and_then(|t| t.remove(leaf)) else {
            if key == "schema_version" {
                return Err(ConfigError::Invalid {
                    key: key.into(),
                    message: "missing; this build reads schema_version = 1 (§6)".into(),
                    at: None,
                });
            }
            continue;
        };
        let value = match (pin.value, &found) {
            (Value::Int(_), toml::Value::Integer(v)) => Value::Int(*v),
            (Value::Float(_), toml::Value::Float(v)) => Value::Float(*v),
            (Value::Float(_), toml::Value::Integer(v)) => Value::Float(*v as f64),
            (expected, other) => {
                return Err(ConfigError::Invalid {
                    key: key.into(),
                    message: format!(
                        "expected {} like {expected}, found {}",
                        match expected {
                            Value::Int(_) => "a whole number",
                            Value::Float(_) => "a number",
                        },
                        other.type_str()
                    ),
                    at: None,
                })
            }
        };
        // Every pin is a count, a duration, a share or a threshold: none is negative, and a
        // negative threshold would read as "stricter" under an at-most rule.
        if value.as_f64() < 0.0 && value.as_f64().is_finite() {
            return Err(ConfigError::Invalid {
                key: key.into(),
                message: format!(
                    "{} is negative; the pin is {} ({} {})",
                    show(&found),
                    pin.value,
                    pins::rule_words(pin.rule),
                    pin.clause
                ),
                at: None,
            });
        }
        if key == "schema_version" && pins::weakens(pin, value) {
            return Err(ConfigError::Invalid {
                key: key.into(),
                message: format!(
                    "{value} is not a schema this build reads; it reads schema_version = 1 (§6)"
                ),
                at: None,
            });
        }
        if pins::weakens(pin, value) || !value.as_f64().is_finite() {
            return Err(ConfigError::WeakensPin {
                key,
                clause: pin.clause,
                what: pin.what,
                rule: pin.rule,
                pinned: pin.value,
                configured: show(&found),
                at: None,
            });
        }
        configured.insert(key, value);
    }
    for section in PINNED_ONLY_SECTIONS {
        match table.get(*section) {
            Some(toml::Value::Table(rest)) => {
                if let Some(unknown) = rest.keys().next() {
                    let prefix = format!("{section}.");
                    return Err(ConfigError::UnknownKey {
                        key: format!("{section}.{unknown}"),
                        known: PINS
                            .iter()
                            .filter(|p| p.configurable && p.key.starts_with(&prefix))
                            .map(|p| p.key.to_owned())
                            .collect(),
                        at: None,
                    });
                }
                table.remove(*section);
            }
            Some(_) => {
                return Err(ConfigError::Invalid {
                    key: (*section).into(),
                    message: "must be a [section]".into(),
                    at: None,
                })
            }
            None => {}
        }
    }
    // [calibration] may hold only pins; once they are taken, an empty section is dropped so the
    // typed stage sees an absent (defaulted) section rather than an empty table.
    if matches!(table.get("calibration"), Some(toml::Value::Table(t)) if t.is_empty()) {
        table.remove("calibration");
    }
    Ok(configured)
}
