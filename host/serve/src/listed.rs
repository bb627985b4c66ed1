//! Tool schemas as `tools/list` sends them: every word of a listed schema sits in the
//! model's context for the whole session, so it says the same as the tool's portable
//! schema (`cheng_host::ToolSpec`) in fewer tokens: no `$schema` (2020-12 is MCP's
//! default dialect), no generator titles, no empty defaults, an optional field as its
//! plain type (leaving it out means none; the host accepts an explicit `null` all the
//! same, as the full schema does), an optional output field out of `required` (the
//! server leaves out null members: [`strip_nulls`]), nested output objects named by
//! their fields in the parent's description (as the tool tables do), and, for the
//! built-in tools, the fields the server's instructions ([`GLOSSARY`]) describe once
//! without their own description. A listed schema never admits less than the full one
//! checks for outputs, so every result validates against what was listed.

use serde_json::{Map, Value};

/// What the server's instructions say once for every built-in tool, in place of a
/// description on each of the fields it names ([`GLOSSARY_INPUT`], [`GLOSSARY_OUTPUT`]).
pub const GLOSSARY: &str = "Paths are relative to the workspace root; a `cwd` left out is the root. A command may wait \
     for a person's approval (say why in `purpose`); a declined one must not be retried. `timeout_ms` is a wall-clock \
     budget. Every result of a built-in tool has `success` and a one-sentence `summary`; a failure adds `error`, `error_kind` (a stable \
     code) and `terminal` (true when retrying cannot help). Results of commands add `command_display` (as run, \
     shell-quoted), `exit_code` (absent when it did not exit by itself), `termination` (exited, timed_out, cancelled, \
     signalled or spawn_failed), `duration_ms`, and `stdout`/`stderr`, head and tail kept over the cap \
     (`stdout_truncated`/`stderr_truncated` say so). Fields that do not apply are left out.";

/// The input fields [`GLOSSARY`] describes.
pub const GLOSSARY_INPUT: &[&str] = &["cwd", "timeout_ms", "purpose"];

/// The output fields (at the root of a result) [`GLOSSARY`] describes.
pub const GLOSSARY_OUTPUT: &[&str] = &[
    "success",
    "summary",
    "error",
    "error_kind",
    "terminal",
    "command_display",
    "exit_code",
    "termination",
    "duration_ms",
    "stdout",
    "stderr",
    "stdout_truncated",
    "stderr_truncated",
];

/// Which schema of a tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// What the tool accepts.
    Input,
    /// What a success result holds.
    Output,
}

/// The listed form of a tool's `schema` (see the module's documentation). `glossary`:
/// the tool is one the server's instructions speak for (a built-in), so the fields
/// [`GLOSSARY`] names lose their own descriptions at the root.
pub fn listed(mut schema: Value, side: Side, glossary: bool) -> Value {
    let Some(root) = schema.as_object_mut() else { return schema };
    root.remove("$schema");
    root.remove("title");
    compact(root, side);
    if let Some(Value::Object(props)) = root.get_mut("properties") {
        let names = match side {
            Side::Input => GLOSSARY_INPUT,
            Side::Output => GLOSSARY_OUTPUT,
        };
        for (name, p) in props.iter_mut() {
            if side == Side::Output {
                collapse(p);
            }
            if glossary
                && names.contains(&name.as_str())
                && let Some(p) = p.as_object_mut()
            {
                p.remove("description");
            }
        }
    }
    schema
}

/// One schema object, compacted in place at every depth.
fn compact(map: &mut Map<String, Value>, side: Side) {
    if map.get("default").is_some_and(empty) {
        map.remove("default");
    }
    // Counts and sizes an output reports carry no bound worth reading.
    if side == Side::Output && map.get("minimum") == Some(&Value::from(0)) {
        map.remove("minimum");
    }
    if let Some(Value::String(d)) = map.get_mut("description") {
        let words = d.split_whitespace().collect::<Vec<_>>().join(" ");
        *d = words;
    }
    let mut optional = Vec::new();
    if let Some(Value::Object(props)) = map.get_mut("properties") {
        for (name, p) in props.iter_mut() {
            if let Some(p) = p.as_object_mut()
                && unwrap_nullable(p)
            {
                optional.push(name.clone());
            }
        }
    }
    if side == Side::Output
        && let Some(Value::Array(required)) = map.get_mut("required")
    {
        required.retain(|r| !r.as_str().is_some_and(|r| optional.iter().any(|o| o == r)));
    }
    for (key, v) in map.iter_mut() {
        match (key.as_str(), v) {
            // Values, not schemas.
            ("default" | "const" | "enum" | "examples" | "required", _) => {}
            ("properties" | "$defs" | "definitions" | "patternProperties", Value::Object(named)) => {
                named.values_mut().filter_map(Value::as_object_mut).for_each(|m| compact(m, side));
            }
            (_, Value::Object(m)) => compact(m, side),
            (_, Value::Array(list)) => list.iter_mut().filter_map(Value::as_object_mut).for_each(|m| compact(m, side)),
            _ => {}
        }
    }
}

/// `anyOf: [X, {"type": "null"}]` (either order) becomes X itself; true when it did.
fn unwrap_nullable(p: &mut Map<String, Value>) -> bool {
    let Some(Value::Array(branches)) = p.get("anyOf") else { return false };
    let null = serde_json::json!({ "type": "null" });
    if branches.len() != 2 || !branches.contains(&null) {
        return false;
    }
    let Some(Value::Object(other)) = branches.iter().find(|b| **b != null).cloned() else { return false };
    p.remove("anyOf");
    for (k, v) in other {
        // The property's own description and default stay; the branch fills the rest.
        p.entry(k).or_insert(v);
    }
    true
}

/// A nested output object (or array of them) as its type, named by its fields in the
/// description: `"files": {"type": "array", "description": "Changed files: {index, path}"}`.
fn collapse(p: &mut Value) {
    let kind = match p.get("type").and_then(Value::as_str) {
        Some("array") => "array",
        Some("object") => "object",
        _ => return,
    };
    let inner = if kind == "array" { p.get("items") } else { Some(&*p) };
    let Some(fields) = inner.and_then(|i| i.get("properties")).and_then(Value::as_object) else { return };
    if fields.is_empty() {
        return;
    }
    let names = fields.keys().map(String::as_str).collect::<Vec<_>>().join(", ");
    let Some(map) = p.as_object_mut() else { return };
    let said = map.get("description").and_then(Value::as_str).unwrap_or("").trim_end_matches('.').to_string();
    let description = if said.is_empty() { format!("{{{names}}}") } else { format!("{said}: {{{names}}}") };
    let mut short = Map::new();
    short.insert("description".into(), description.into());
    short.insert("type".into(), kind.into());
    if kind == "array" {
        short.insert("items".into(), serde_json::json!({ "type": "object" }));
    }
    *map = short;
}

/// A default that says nothing: `null`, `""`, `[]`, `{}`, `false`.
fn empty(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
        Value::Number(_) => false,
    }
}

/// Leave out every `null` member of every object in `v` (a result's optional fields
/// that do not apply), at any depth; `null` items of arrays stay.
pub fn strip_nulls(v: &mut Value) {
    match v {
        Value::Object(map) => {
            map.retain(|_, m| !m.is_null());
            map.values_mut().for_each(strip_nulls);
        }
        Value::Array(items) => items.iter_mut().for_each(strip_nulls),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn full_output() -> Value {
        json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "title": "GitOutput",
            "type": "object",
            "properties": {
                "success": {"type": "boolean", "description": "True when it worked."},
                "exit_code": {"anyOf": [{"type": "integer"}, {"type": "null"}], "minimum": 0,
                              "description": "The exit code."},
                "files": {"type": "array", "description": "Changed files.", "items": {
                    "type": "object", "properties": {"path": {"type": "string"}, "index": {"type": "string"}},
                    "required": ["path", "index"]}},
                "count": {"type": "integer", "minimum": 0, "description": "How many,\n  in all."}
            },
            "required": ["success", "exit_code", "files", "count"]
        })
    }

    #[test]
    fn a_listed_output_says_the_same_in_fewer_words() {
        let l = listed(full_output(), Side::Output, true);
        assert_eq!(
            l,
            json!({
                "type": "object",
                "properties": {
                    "success": {"type": "boolean"},
                    "exit_code": {"type": "integer"},
                    "files": {"type": "array", "items": {"type": "object"}, "description": "Changed files: {index, path}"},
                    "count": {"type": "integer", "description": "How many, in all."}
                },
                "required": ["success", "files", "count"]
            })
        );
        // Without the glossary, the fields it names keep their descriptions.
        let l = listed(full_output(), Side::Output, false);
        assert_eq!(l["properties"]["success"]["description"], "True when it worked.");
        assert_eq!(l["properties"]["exit_code"]["description"], "The exit code.");
    }

    #[test]
    fn a_listed_input_keeps_its_bounds_and_real_defaults() {
        let full = json!({
            "type": "object", "additionalProperties": false,
            "properties": {
                "cwd": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": null, "description": "Where."},
                "args": {"type": "array", "items": {"type": "string"}, "default": [], "description": "Arguments."},
                "max": {"type": "integer", "minimum": 0, "maximum": 10, "default": 5}
            }
        });
        let l = listed(full, Side::Input, true);
        assert_eq!(
            l,
            json!({
                "type": "object", "additionalProperties": false,
                "properties": {
                    "cwd": {"type": "string"},
                    "args": {"type": "array", "items": {"type": "string"}, "description": "Arguments."},
                    "max": {"type": "integer", "minimum": 0, "maximum": 10, "default": 5}
                }
            })
        );
    }

    #[test]
    fn every_result_without_its_nulls_validates_against_the_listed_schema() {
        let full = full_output();
        let mut result =
            json!({"success": true, "exit_code": null, "files": [{"path": "a", "index": "M"}], "count": 1});
        assert!(jsonschema::is_valid(&full, &result));
        let listed = listed(full.clone(), Side::Output, true);
        // The control: a null the listed schema does not admit.
        assert!(!jsonschema::is_valid(&listed, &result));
        strip_nulls(&mut result);
        assert_eq!(result, json!({"success": true, "files": [{"path": "a", "index": "M"}], "count": 1}));
        assert!(jsonschema::is_valid(&listed, &result));
    }
}
