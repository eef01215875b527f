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

/// The keys of `[slo]` that are not pins: the user's declared SLO (SPEC §4 "A declared SLO"),
/// left for the typed stage.
pub(super) const SLO_DECLARED_KEYS: [&str; 2] = ["declared", "routes"];

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
        if let Some(why) = outside_domain(pin, value) {
            return Err(ConfigError::Invalid {
                key: key.into(),
                message: format!(
                    "{} {why} ({}, pinned at {})",
                    show(&found),
                    pin.clause,
                    pin.value
                ),
                at: None,
            });
        }
        configured.insert(key, value);
    }
    limits_relate(&configured)?;
    for section in PINNED_ONLY_SECTIONS {
        match table.get(*section) {
            Some(toml::Value::Table(rest)) => {
                let declared =
                    |key: &String| *section == "slo" && SLO_DECLARED_KEYS.contains(&key.as_str());
                if let Some(unknown) = rest.keys().find(|k| !declared(k)) {
                    let prefix = format!("{section}.");
                    return Err(ConfigError::UnknownKey {
                        key: format!("{section}.{unknown}"),
                        known: PINS
                            .iter()
                            .filter(|p| p.configurable && p.key.starts_with(&prefix))
                            .map(|p| p.key.to_owned())
                            .chain(
                                SLO_DECLARED_KEYS
                                    .iter()
                                    .filter(|_| *section == "slo")
                                    .map(|k| format!("slo.{k}")),
                            )
                            .collect(),
                        at: None,
                    });
                }
                if rest.is_empty() {
                    table.remove(*section);
                }
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

/// Why a stricter value is still outside what the pin can mean, if it is: a limit no run can
/// meet is not a stricter gate but a broken one. Percentages are shares of 100; a ratio the
/// run must reach (goodput) is at most 1; a time or share at most zero can never be met; a
/// count of recordings allowed is at least one.
fn outside_domain(pin: &pins::Pin, value: Value) -> Option<&'static str> {
    use pins::Rule;
    let v = value.as_f64();
    if pin.unit == "%" && v > 100.0 {
        return Some("is over 100 %");
    }
    if pin.rule == Rule::AtLeast && pin.unit.is_empty() && v > 1.0 {
        return Some("is a share above 1, which no run reaches");
    }
    if pin.rule == Rule::AtMost && matches!(pin.unit, "%" | "ms" | "recordings") && v <= 0.0 {
        return Some("is a limit of zero, which no run meets");
    }
    None
}

/// Limits that bound one quantity from two sides, or a quantile and the maximum, must leave
/// room between them: a replica's share between its minimum and maximum, the skew's maximum
/// at or above its p99 limit.
fn limits_relate(configured: &BTreeMap<&'static str, Value>) -> Result<(), ConfigError> {
    let value = |pin: &pins::Pin| configured.get(pin.key).copied().unwrap_or(pin.value);
    for (low, high) in [
        (
            &pins::GATES_REPLICA_SHARE_MIN_PERCENT,
            &pins::GATES_REPLICA_SHARE_MAX_PERCENT,
        ),
        (&pins::GATES_SEND_SKEW_P99_MS, &pins::GATES_SEND_SKEW_MAX_MS),
    ] {
        if value(high).as_f64() < value(low).as_f64() {
            let key = if configured.contains_key(high.key) {
                high
            } else {
                low
            };
            return Err(ConfigError::Invalid {
                key: key.key.into(),
                message: format!(
                    "leaves no value a run could meet: {} = {} is above {} = {}; keep the first at or below the second ({})",
                    low.key,
                    value(low),
                    high.key,
                    value(high),
                    key.clause
                ),
                at: None,
            });
        }
    }
    Ok(())
}
