//! The JSON Schema checks a structured answer is held to (SPEC §2 "What a request carries"):
//! a route's `response_format` schema for its answer, each declared tool's `parameters` for the
//! arguments of a call to it. A success whose answer does not parse, or does not match, is an
//! incorrect success (JOURNAL.md's class 8), like a stale model.
//!
//! What is checked is a stated subset of JSON Schema 2020-12, and a schema is compiled before the
//! run: a keyword outside the subset refuses the configuration with its path (the request can
//! still carry such a schema when the route does not ask for the check), so the recorder never
//! reports as checked what it did not check. The subset is the one structured-output engines
//! (vLLM's guided decoding, OpenAI's strict mode) build on: `type`, `enum`, `const`,
//! `properties`, `required`, `additionalProperties`, `items`, `minItems`, `maxItems`,
//! `uniqueItems`, `minimum`, `maximum`, `exclusiveMinimum`, `exclusiveMaximum`, `minLength`,
//! `maxLength`, `minProperties`, `maxProperties`, `anyOf`, `oneOf`, `allOf`, `not`, and local
//! `$ref`s to `$defs` or `definitions`. Annotations (`title`, `description`, `default`,
//! `examples`, `format`, `$schema`, `$id`, `$comment`, `deprecated`, `readOnly`, `writeOnly`) are
//! read and not checked, as 2020-12 makes `format` an annotation by default. `pattern`,
//! `patternProperties`, `multipleOf`, `prefixItems`, `contains`, `dependentRequired` and the
//! rest are refused: checking them is not built.
//!
//! ```
//! use percentes_formats::config::schema::Schema;
//! let schema = Schema::compile(&serde_json::json!({
//!     "type": "object",
//!     "properties": {"city": {"type": "string", "minLength": 1}},
//!     "required": ["city"],
//!     "additionalProperties": false,
//! })).unwrap();
//! assert!(schema.check_text(r#"{"city": "Lyon"}"#).is_ok());
//! assert_eq!(
//!     schema.check_text(r#"{"town": "Lyon"}"#).unwrap_err().to_string(),
//!     "$: the required property \"city\" is missing"
//! );
//! ```

use std::collections::BTreeMap;

use serde_json::{Map, Value};

/// Why a schema does not compile, or a value does not match it: where (a JSON pointer into the
/// schema, `#/properties/a`, or a path into the value, `$.items[2]`) and what.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SchemaError {
    /// Where: `#/...` in the schema, `$...` in the value.
    pub at: String,
    /// What is wrong there.
    pub problem: String,
}

impl std::fmt::Display for SchemaError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.at, self.problem)
    }
}

impl std::error::Error for SchemaError {}

fn error(at: &str, problem: impl Into<String>) -> SchemaError {
    SchemaError {
        at: at.to_owned(),
        problem: problem.into(),
    }
}

/// How deep a `$ref` chain or a nested schema may go (a schema that refers to itself without
/// descending into the value would otherwise never end).
const DEPTH_MAX: usize = 64;

const ANNOTATIONS: [&str; 11] = [
    "title",
    "description",
    "default",
    "examples",
    "format",
    "$schema",
    "$id",
    "$comment",
    "deprecated",
    "readOnly",
    "writeOnly",
];

/// A JSON type as `type` names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Type {
    Null,
    Boolean,
    Object,
    Array,
    Number,
    Integer,
    String,
}

impl Type {
    fn parse(name: &str) -> Option<Type> {
        Some(match name {
            "null" => Type::Null,
            "boolean" => Type::Boolean,
            "object" => Type::Object,
            "array" => Type::Array,
            "number" => Type::Number,
            "integer" => Type::Integer,
            "string" => Type::String,
            _ => return None,
        })
    }

    fn name(self) -> &'static str {
        match self {
            Type::Null => "null",
            Type::Boolean => "boolean",
            Type::Object => "object",
            Type::Array => "array",
            Type::Number => "number",
            Type::Integer => "integer",
            Type::String => "string",
        }
    }

    fn of(value: &Value) -> Type {
        match value {
            Value::Null => Type::Null,
            Value::Bool(_) => Type::Boolean,
            Value::Object(_) => Type::Object,
            Value::Array(_) => Type::Array,
            Value::Number(n) if n.is_i64() || n.is_u64() => Type::Integer,
            Value::Number(n) if n.as_f64().is_some_and(|f| f.fract() == 0.0) => Type::Integer,
            Value::Number(_) => Type::Number,
            Value::String(_) => Type::String,
        }
    }

    fn admits(self, value: &Value) -> bool {
        let found = Type::of(value);
        found == self || (self == Type::Number && found == Type::Integer)
    }
}

/// One compiled schema node.
#[derive(Clone, Debug, Default)]
struct Node {
    /// `false`: nothing matches.
    never: bool,
    types: Option<Vec<Type>>,
    enumerated: Option<Vec<Value>>,
    constant: Option<Value>,
    properties: BTreeMap<String, usize>,
    required: Vec<String>,
    /// `None`: any; `Some(None)`: none allowed; `Some(Some(n))`: each must match node n.
    additional: Option<Option<usize>>,
    items: Option<usize>,
    min_items: Option<u64>,
    max_items: Option<u64>,
    unique_items: bool,
    min_properties: Option<u64>,
    max_properties: Option<u64>,
    minimum: Option<f64>,
    maximum: Option<f64>,
    exclusive_minimum: Option<f64>,
    exclusive_maximum: Option<f64>,
    min_length: Option<u64>,
    max_length: Option<u64>,
    any_of: Vec<usize>,
    one_of: Vec<usize>,
    all_of: Vec<usize>,
    not: Option<usize>,
    reference: Option<String>,
}

/// A compiled schema: checks a JSON value, or text that must parse as one.
#[derive(Clone, Debug)]
pub struct Schema {
    nodes: Vec<Node>,
    /// `$defs` and `definitions` by the reference that names them (`#/$defs/Name`).
    definitions: BTreeMap<String, usize>,
}

impl Schema {
    /// Compiles `schema`; the error names the first keyword outside the subset, or the value
    /// that is not a schema, by its JSON pointer.
    pub fn compile(schema: &Value) -> Result<Schema, SchemaError> {
        let mut compiled = Schema {
            nodes: Vec::new(),
            definitions: BTreeMap::new(),
        };
        compiled.node(schema, "#", 0)?;
        for target in compiled.nodes.iter().filter_map(|n| n.reference.as_ref()) {
            if !compiled.definitions.contains_key(target) {
                return Err(error(
                    target,
                    "this $ref names no $defs or definitions entry of the schema (only local references are checked)",
                ));
            }
        }
        Ok(compiled)
    }

    fn node(&mut self, schema: &Value, at: &str, depth: usize) -> Result<usize, SchemaError> {
        if depth > DEPTH_MAX {
            return Err(error(
                at,
                format!("the schema nests deeper than {DEPTH_MAX} levels"),
            ));
        }
        let id = self.nodes.len();
        self.nodes.push(Node::default());
        let map = match schema {
            Value::Bool(true) => return Ok(id),
            Value::Bool(false) => {
                self.nodes[id].never = true;
                return Ok(id);
            }
            Value::Object(map) => map,
            other => {
                return Err(error(
                    at,
                    format!(
                        "a schema is an object or a boolean, not {}",
                        Type::of(other).name()
                    ),
                ))
            }
        };
        let mut node = Node::default();
        for (key, value) in map {
            let here = format!("{at}/{key}");
            if !self.structural(&mut node, key, value, &here, depth)? {
                bound(&mut node, key, value, &here)?;
            }
        }
        self.nodes[id] = node;
        Ok(id)
    }

    /// Reads a keyword that holds schemas, types or values into `node`; false for any other.
    fn structural(
        &mut self,
        node: &mut Node,
        key: &str,
        value: &Value,
        here: &str,
        depth: usize,
    ) -> Result<bool, SchemaError> {
        match key {
            k if ANNOTATIONS.contains(&k) => {}
            "$defs" | "definitions" => {
                let Value::Object(defs) = value else {
                    return Err(error(here, "must be an object of schemas"));
                };
                for (name, def) in defs {
                    let def_id = self.node(def, &format!("{here}/{name}"), depth + 1)?;
                    self.definitions.insert(format!("{here}/{name}"), def_id);
                }
            }
            "$ref" => node.reference = Some(local_reference(value, here)?),
            "type" => node.types = Some(types(value, here)?),
            "enum" => {
                let Value::Array(values) = value else {
                    return Err(error(here, "must be an array"));
                };
                node.enumerated = Some(values.clone());
            }
            "const" => node.constant = Some(value.clone()),
            "properties" => {
                let Value::Object(properties) = value else {
                    return Err(error(here, "must be an object of schemas"));
                };
                for (name, property) in properties {
                    let p = self.node(property, &format!("{here}/{name}"), depth + 1)?;
                    node.properties.insert(name.clone(), p);
                }
            }
            "additionalProperties" => {
                node.additional = match value {
                    Value::Bool(true) => None,
                    Value::Bool(false) => Some(None),
                    schema => Some(Some(self.node(schema, here, depth + 1)?)),
                }
            }
            "items" => node.items = Some(self.node(value, here, depth + 1)?),
            "anyOf" | "oneOf" | "allOf" => {
                let Value::Array(schemas) = value else {
                    return Err(error(here, "must be an array of schemas"));
                };
                if schemas.is_empty() {
                    return Err(error(here, "must not be empty"));
                }
                let mut ids = Vec::new();
                for (i, s) in schemas.iter().enumerate() {
                    ids.push(self.node(s, &format!("{here}/{i}"), depth + 1)?);
                }
                match key {
                    "anyOf" => node.any_of = ids,
                    "oneOf" => node.one_of = ids,
                    _ => node.all_of = ids,
                }
            }
            "not" => node.not = Some(self.node(value, here, depth + 1)?),
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// Checks `text`: it must parse as JSON, and match.
    pub fn check_text(&self, text: &str) -> Result<(), SchemaError> {
        let value: Value = serde_json::from_str(text).map_err(|e| {
            let shown: String = text.chars().take(60).collect();
            error("$", format!("not JSON ({e}): {shown:?}"))
        })?;
        self.check(&value)
    }

    /// Checks `value`; the error names the first place that does not match, by its path
    /// (`$.items[2].name`), and what was expected there.
    pub fn check(&self, value: &Value) -> Result<(), SchemaError> {
        self.matches(0, value, "$", 0)
    }

    fn matches(&self, id: usize, value: &Value, at: &str, depth: usize) -> Result<(), SchemaError> {
        if depth > DEPTH_MAX {
            return Err(error(
                at,
                format!("the schema's references go deeper than {DEPTH_MAX} levels here"),
            ));
        }
        let node = &self.nodes[id];
        if node.never {
            return Err(error(at, "the schema allows nothing here"));
        }
        if let Some(target) = &node.reference {
            self.matches(self.definitions[target], value, at, depth + 1)?;
        }
        node.value_rules(value, at)?;
        match value {
            Value::Object(map) => self.object(node, map, at, depth)?,
            Value::Array(items) => self.array(node, items, at, depth)?,
            _ => {}
        }
        self.combinators(node, value, at, depth)
    }

    fn combinators(
        &self,
        node: &Node,
        value: &Value,
        at: &str,
        depth: usize,
    ) -> Result<(), SchemaError> {
        for &sub in &node.all_of {
            self.matches(sub, value, at, depth + 1)?;
        }
        let matching = |subs: &[usize]| {
            subs.iter()
                .filter(|&&sub| self.matches(sub, value, at, depth + 1).is_ok())
                .count()
        };
        if !node.any_of.is_empty() && matching(&node.any_of) == 0 {
            return Err(error(at, "matches none of anyOf's schemas"));
        }
        if !node.one_of.is_empty() {
            let matched = matching(&node.one_of);
            if matched != 1 {
                return Err(error(
                    at,
                    format!("matches {matched} of oneOf's schemas, not exactly one"),
                ));
            }
        }
        if let Some(sub) = node.not {
            if self.matches(sub, value, at, depth + 1).is_ok() {
                return Err(error(at, "matches the schema under not"));
            }
        }
        Ok(())
    }

    fn object(
        &self,
        node: &Node,
        map: &Map<String, Value>,
        at: &str,
        depth: usize,
    ) -> Result<(), SchemaError> {
        for name in &node.required {
            if !map.contains_key(name) {
                return Err(error(
                    at,
                    format!("the required property {name:?} is missing"),
                ));
            }
        }
        let n = map.len() as u64;
        if node.min_properties.is_some_and(|m| n < m) || node.max_properties.is_some_and(|m| n > m)
        {
            return Err(error(
                at,
                format!("{n} properties, outside the schema's bounds"),
            ));
        }
        for (name, value) in map {
            let here = format!("{at}.{name}");
            match (node.properties.get(name), node.additional) {
                (Some(&p), _) => self.matches(p, value, &here, depth + 1)?,
                (None, Some(None)) => {
                    return Err(error(
                        at,
                        format!(
                            "the property {name:?} is not allowed (additionalProperties is false)"
                        ),
                    ))
                }
                (None, Some(Some(extra))) => self.matches(extra, value, &here, depth + 1)?,
                (None, None) => {}
            }
        }
        Ok(())
    }

    fn array(
        &self,
        node: &Node,
        items: &[Value],
        at: &str,
        depth: usize,
    ) -> Result<(), SchemaError> {
        let n = items.len() as u64;
        if node.min_items.is_some_and(|m| n < m) || node.max_items.is_some_and(|m| n > m) {
            return Err(error(at, format!("{n} items, outside the schema's bounds")));
        }
        if node.unique_items {
            for (i, a) in items.iter().enumerate() {
                if items[..i].iter().any(|b| same(a, b)) {
                    return Err(error(
                        &format!("{at}[{i}]"),
                        "repeats an earlier item (uniqueItems)",
                    ));
                }
            }
        }
        if let Some(each) = node.items {
            for (i, item) in items.iter().enumerate() {
                self.matches(each, item, &format!("{at}[{i}]"), depth + 1)?;
            }
        }
        Ok(())
    }
}

impl Node {
    /// The rules on the value itself: its type, enum, const, and a string's or number's bounds.
    fn value_rules(&self, value: &Value, at: &str) -> Result<(), SchemaError> {
        if let Some(types) = &self.types {
            if !types.iter().any(|t| t.admits(value)) {
                let names: Vec<&str> = types.iter().map(|t| t.name()).collect();
                return Err(error(
                    at,
                    format!(
                        "expected {}, found {}",
                        names.join(" or "),
                        Type::of(value).name()
                    ),
                ));
            }
        }
        if let Some(values) = &self.enumerated {
            if !values.iter().any(|v| same(v, value)) {
                return Err(error(
                    at,
                    format!("{value} is not one of the enum's values"),
                ));
            }
        }
        if let Some(constant) = &self.constant {
            if !same(constant, value) {
                return Err(error(at, format!("{value} is not the const {constant}")));
            }
        }
        match value {
            Value::String(s) => {
                let chars = s.chars().count() as u64;
                if self.min_length.is_some_and(|m| chars < m) {
                    return Err(error(
                        at,
                        format!("{chars} characters, fewer than minLength"),
                    ));
                }
                if self.max_length.is_some_and(|m| chars > m) {
                    return Err(error(
                        at,
                        format!("{chars} characters, more than maxLength"),
                    ));
                }
            }
            Value::Number(n) => {
                let x = n.as_f64().unwrap_or(f64::NAN);
                let out = self.minimum.is_some_and(|m| x < m)
                    || self.maximum.is_some_and(|m| x > m)
                    || self.exclusive_minimum.is_some_and(|m| x <= m)
                    || self.exclusive_maximum.is_some_and(|m| x >= m);
                if out {
                    return Err(error(at, format!("{n} is outside the schema's bounds")));
                }
            }
            _ => {}
        }
        Ok(())
    }
}

/// Reads a keyword that bounds a value into `node`; any other keyword is outside the subset.
fn bound(node: &mut Node, key: &str, value: &Value, here: &str) -> Result<(), SchemaError> {
    match key {
        "required" => {
            let names = value.as_array().and_then(|names| {
                names
                    .iter()
                    .map(|n| n.as_str().map(str::to_owned))
                    .collect::<Option<Vec<_>>>()
            });
            node.required = names.ok_or_else(|| error(here, "must be an array of names"))?;
        }
        "minItems" => node.min_items = Some(count(value, here)?),
        "maxItems" => node.max_items = Some(count(value, here)?),
        "uniqueItems" => {
            node.unique_items = value
                .as_bool()
                .ok_or_else(|| error(here, "must be true or false"))?
        }
        "minProperties" => node.min_properties = Some(count(value, here)?),
        "maxProperties" => node.max_properties = Some(count(value, here)?),
        "minLength" => node.min_length = Some(count(value, here)?),
        "maxLength" => node.max_length = Some(count(value, here)?),
        "minimum" => node.minimum = Some(number(value, here)?),
        "maximum" => node.maximum = Some(number(value, here)?),
        "exclusiveMinimum" => node.exclusive_minimum = Some(number(value, here)?),
        "exclusiveMaximum" => node.exclusive_maximum = Some(number(value, here)?),
        other => {
            return Err(error(
                here,
                format!("the keyword {other:?} is not among those this build checks (SPEC §2 \"What a request carries\"); send the schema without asking for the check, or leave the keyword out"),
            ))
        }
    }
    Ok(())
}

fn local_reference(value: &Value, here: &str) -> Result<String, SchemaError> {
    let Some(target) = value.as_str() else {
        return Err(error(here, "must be a string"));
    };
    if !target.starts_with("#/$defs/") && !target.starts_with("#/definitions/") {
        return Err(error(
            here,
            format!("{target:?} is not a local reference to #/$defs/NAME or #/definitions/NAME (only those are checked)"),
        ));
    }
    Ok(target.to_owned())
}

fn types(value: &Value, here: &str) -> Result<Vec<Type>, SchemaError> {
    let names: Vec<&Value> = match value {
        Value::Array(names) => names.iter().collect(),
        one => vec![one],
    };
    names
        .into_iter()
        .map(|name| {
            name.as_str().and_then(Type::parse).ok_or_else(|| {
                error(
                    here,
                    format!("{name} is not a JSON Schema type (null, boolean, object, array, number, integer, string)"),
                )
            })
        })
        .collect()
}

/// JSON equality as JSON Schema reads it: numbers by value (1 and 1.0 are equal).
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| same(a, b))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same(v, w)))
        }
        _ => a == b,
    }
}

fn count(value: &Value, at: &str) -> Result<u64, SchemaError> {
    value
        .as_u64()
        .ok_or_else(|| error(at, "must be a whole number, 0 or more"))
}

fn number(value: &Value, at: &str) -> Result<f64, SchemaError> {
    value
        .as_f64()
        .filter(|x| x.is_finite())
        .ok_or_else(|| error(at, "must be a number"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn check(schema: Value, value: Value) -> Result<(), String> {
        Schema::compile(&schema)
            .unwrap()
            .check(&value)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn types_enums_and_consts() {
        assert!(check(json!({"type": "integer"}), json!(3)).is_ok());
        assert!(check(json!({"type": "integer"}), json!(3.0)).is_ok());
        assert_eq!(
            check(json!({"type": "integer"}), json!(3.5)),
            Err("$: expected integer, found number".into())
        );
        assert!(check(json!({"type": "number"}), json!(3)).is_ok());
        assert!(check(json!({"type": ["string", "null"]}), json!(null)).is_ok());
        assert!(check(json!({"enum": ["a", 1]}), json!(1.0)).is_ok());
        assert!(check(json!({"enum": ["a", 1]}), json!("b")).is_err());
        assert!(check(json!({"const": {"x": [1]}}), json!({"x": [1.0]})).is_ok());
        assert!(check(json!(true), json!({"anything": 1})).is_ok());
        assert!(check(json!(false), json!(1)).is_err());
    }

    #[test]
    fn objects_arrays_and_bounds_name_the_place() {
        let schema = json!({
            "type": "object",
            "properties": {
                "items": {"type": "array", "items": {"type": "object", "properties": {"name": {"type": "string", "maxLength": 3}}}, "minItems": 1, "uniqueItems": true},
                "score": {"type": "number", "minimum": 0, "exclusiveMaximum": 1}
            },
            "required": ["items"],
            "additionalProperties": {"type": "boolean"}
        });
        assert!(check(
            schema.clone(),
            json!({"items": [{"name": "ab"}], "score": 0.5, "ok": true})
        )
        .is_ok());
        assert_eq!(
            check(
                schema.clone(),
                json!({"items": [{"name": "ab"}, {"name": "abcd"}]})
            ),
            Err("$.items[1].name: 4 characters, more than maxLength".into())
        );
        assert_eq!(
            check(schema.clone(), json!({"items": [], "score": 0.5})),
            Err("$.items: 0 items, outside the schema's bounds".into())
        );
        assert!(check(schema.clone(), json!({"items": [{}], "score": 1})).is_err());
        assert!(check(schema.clone(), json!({"items": [{}, {}]}))
            .unwrap_err()
            .contains("uniqueItems"));
        assert_eq!(
            check(schema, json!({"items": [{}], "ok": "yes"})),
            Err("$.ok: expected boolean, found string".into())
        );
        let closed =
            json!({"type": "object", "properties": {"a": {}}, "additionalProperties": false});
        assert!(check(closed, json!({"a": 1, "b": 2}))
            .unwrap_err()
            .contains("\"b\" is not allowed"));
    }

    #[test]
    fn combinators_and_local_references() {
        let schema = json!({
            "$defs": {"node": {"type": "object", "properties": {"next": {"anyOf": [{"$ref": "#/$defs/node"}, {"type": "null"}]}}}},
            "$ref": "#/$defs/node"
        });
        assert!(check(schema.clone(), json!({"next": {"next": null}})).is_ok());
        assert!(check(schema, json!({"next": {"next": 3}})).is_err());
        let one = json!({"oneOf": [{"type": "integer"}, {"type": "number"}]});
        assert!(check(one.clone(), json!(1.5)).is_ok());
        assert!(check(one, json!(1))
            .unwrap_err()
            .contains("matches 2 of oneOf"));
        assert!(check(json!({"not": {"type": "string"}}), json!("x")).is_err());
        assert!(check(json!({"allOf": [{"minimum": 1}, {"maximum": 2}]}), json!(3)).is_err());
        // A reference that refers to itself without descending stops at the depth limit.
        let looped = json!({"$defs": {"a": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"});
        assert!(check(looped, json!(1)).unwrap_err().contains("deeper than"));
    }

    #[test]
    fn keywords_outside_the_subset_refuse_to_compile_by_path() {
        for (schema, expected) in [
            (
                json!({"properties": {"a": {"type": "string", "pattern": "^x"}}}),
                "#/properties/a/pattern: the keyword \"pattern\"",
            ),
            (
                json!({"type": "text"}),
                "#/type: \"text\" is not a JSON Schema type",
            ),
            (
                json!({"$ref": "https://example.com/s.json"}),
                "is not a local reference",
            ),
            (json!({"$ref": "#/$defs/missing"}), "names no $defs"),
            (
                json!({"items": 3}),
                "#/items: a schema is an object or a boolean, not integer",
            ),
            (
                json!({"minLength": -1}),
                "#/minLength: must be a whole number",
            ),
        ] {
            let error = Schema::compile(&schema).unwrap_err().to_string();
            assert!(error.contains(expected), "{error} (expected {expected:?})");
        }
        // Annotations are read, not checked.
        assert!(Schema::compile(
            &json!({"title": "x", "format": "date", "description": "y", "type": "string"})
        )
        .is_ok());
    }

    #[test]
    fn text_that_is_not_json_says_so() {
        let schema = Schema::compile(&json!({"type": "object"})).unwrap();
        assert!(schema
            .check_text("{\"a\": 1")
            .unwrap_err()
            .problem
            .starts_with("not JSON"));
    }
}
