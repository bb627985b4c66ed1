//! Tool schemas in the form every client's validator accepts.
//!
//! A component declares its schemas in full (draft 2020-12, as its SDK derives them);
//! the host checks every call's input against that full form. What a [`ToolSpec`] holds
//! is derived here: `portable`, the same contract in the keywords every client's
//! validator accepts (standard formats only, one type per `anyOf` branch). The form an
//! MCP server lists (shorter, for the model's context) is the server's own business
//! (`cheng-serve`'s `listed` module).
//! [`ToolSpec`]: crate::ToolSpec

use serde_json::Value;

/// The formats JSON Schema draft 2020-12 defines. A component built with an older SDK
/// may declare others (schemars' `uint64`, `int32`, `double`…): clients' validators warn
/// on each, every time they list the tools, and check nothing more for it.
const STANDARD_FORMATS: &[&str] = &[
    "date-time",
    "date",
    "time",
    "duration",
    "email",
    "idn-email",
    "hostname",
    "idn-hostname",
    "ipv4",
    "ipv6",
    "uri",
    "uri-reference",
    "iri",
    "iri-reference",
    "uuid",
    "uri-template",
    "json-pointer",
    "relative-json-pointer",
    "regex",
];

/// `schema` in the form every client accepts, at any depth: every non-standard `format`
/// removed (an unsigned one keeps its bound as `minimum: 0`), and a list of types
/// (`["string", "null"]`) as `anyOf` branches of one type each.
pub(crate) fn portable(mut schema: Value) -> Value {
    fn walk(v: &mut Value) {
        match v {
            Value::Object(map) => {
                if let Some(f) = map.get("format").and_then(|f| f.as_str()).map(str::to_string)
                    && !STANDARD_FORMATS.contains(&f.as_str())
                {
                    map.remove("format");
                    if f.starts_with("uint") && !map.contains_key("minimum") {
                        map.insert("minimum".into(), 0.into());
                    }
                }
                // A nullable field as `"type": ["string", "null"]` is legal, but clients
                // that map schemas onto a one-type dialect reject it (the Inspector's
                // --strict warns on each): the same contract as one type per branch.
                if let Some(types) = map.get("type").and_then(|t| t.as_array()).cloned() {
                    map.remove("type");
                    let branches: Vec<Value> = types.into_iter().map(|t| serde_json::json!({ "type": t })).collect();
                    let any = Value::Array(branches);
                    if map.contains_key("anyOf") {
                        let all = map.entry("allOf").or_insert_with(|| Value::Array(Vec::new()));
                        if let Some(list) = all.as_array_mut() {
                            list.push(serde_json::json!({ "anyOf": any }));
                        }
                    } else {
                        map.insert("anyOf".into(), any);
                    }
                }
                // `properties` and `$defs` map names to schemas; a property may be
                // called "format" itself, and is walked as a schema, never removed.
                map.values_mut().for_each(walk);
            }
            Value::Array(items) => items.iter_mut().for_each(walk),
            _ => {}
        }
    }
    walk(&mut schema);
    schema
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn only_portable_are_declared() {
        let s = json!({"type": "object", "properties": {
            "n": {"type": "integer", "format": "uint64", "minimum": 0},
            "i": {"type": "integer", "format": "int32"},
            "u": {"type": "integer", "format": "uint"},
            "when": {"type": "string", "format": "date-time"},
            "format": {"type": "string", "format": "double"},
            "list": {"type": "array", "items": {"type": "number", "format": "double"}},
            "maybe": {"type": ["string", "null"], "description": "d"}
        }});
        let out = portable(s);
        let p = &out["properties"];
        assert_eq!(p["n"], json!({"type": "integer", "minimum": 0}));
        assert_eq!(p["i"], json!({"type": "integer"}));
        assert_eq!(p["u"], json!({"type": "integer", "minimum": 0}));
        assert_eq!(p["when"]["format"], "date-time");
        assert_eq!(p["format"], json!({"type": "string"}));
        assert_eq!(p["list"]["items"], json!({"type": "number"}));
        assert_eq!(p["maybe"], json!({"anyOf": [{"type": "string"}, {"type": "null"}], "description": "d"}));
    }
}
