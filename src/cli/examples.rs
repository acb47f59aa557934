//! `inspect --examples`: example arguments for a tool. The tool's own examples when its
//! input schema has them (JSON Schema `examples`), otherwise made from the schema: required
//! fields with typed placeholders, an enum's first value, a property's own `default` or first
//! example, nested objects filled the same way. A second example adds the optional fields.

use serde::Serialize;
use serde_json::{Map, Value};

/// Deeper schemas are cut with an empty object: an example should stay readable.
const MAX_DEPTH: usize = 4;

/// One example: a title and the arguments object.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Example {
    pub title: String,
    pub arguments: Value,
}

/// Examples for a tool with this input schema.
#[must_use]
pub fn for_schema(schema: &Value) -> Vec<Example> {
    let own: Vec<Example> = schema
        .get("examples")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|e| e.is_object())
        .enumerate()
        .map(|(i, arguments)| Example {
            title: format!("Example {} (from the tool)", i + 1),
            arguments: arguments.clone(),
        })
        .collect();
    if !own.is_empty() {
        return own;
    }
    let required = object(schema, false, 0);
    let mut examples = vec![Example {
        title: "Required parameters".to_owned(),
        arguments: required.clone(),
    }];
    let all = object(schema, true, 0);
    if all != required {
        examples.push(Example {
            title: "All parameters".to_owned(),
            arguments: all,
        });
    }
    examples
}

/// An object for `schema`: its required properties, or all of them.
fn object(schema: &Value, all: bool, depth: usize) -> Value {
    let mut map = Map::new();
    let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
        return Value::Object(map);
    };
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    for (name, property) in properties {
        if all || required.contains(&name.as_str()) {
            map.insert(name.clone(), value(name, property, all, depth + 1));
        }
    }
    Value::Object(map)
}

/// A value for one property.
fn value(name: &str, schema: &Value, all: bool, depth: usize) -> Value {
    if let Some(v) = schema.get("const") {
        return v.clone();
    }
    if let Some(first) = schema.get("enum").and_then(Value::as_array).and_then(|e| e.first()) {
        return first.clone();
    }
    if let Some(v) = schema.get("default") {
        return v.clone();
    }
    if let Some(first) = schema.get("examples").and_then(Value::as_array).and_then(|e| e.first()) {
        return first.clone();
    }
    // `anyOf`/`oneOf`: the first alternative that is not `null`.
    if let Some(first) = schema
        .get("anyOf")
        .or_else(|| schema.get("oneOf"))
        .and_then(Value::as_array)
        .and_then(|alts| {
            alts.iter()
                .find(|a| a.get("type").and_then(Value::as_str) != Some("null"))
        })
    {
        return value(name, first, all, depth);
    }
    let kind = match schema.get("type") {
        Some(Value::String(t)) => t.as_str(),
        Some(Value::Array(types)) => types
            .iter()
            .filter_map(Value::as_str)
            .find(|t| *t != "null")
            .unwrap_or("string"),
        _ if schema.get("properties").is_some() => "object",
        _ => "string",
    };
    match kind {
        "integer" | "number" => schema.get("minimum").cloned().unwrap_or(Value::from(0)),
        "boolean" => Value::Bool(false),
        "array" if depth < MAX_DEPTH => {
            let item = schema.get("items").map_or_else(
                || Value::String(format!("<{name}>")),
                |items| value(name, items, all, depth + 1),
            );
            Value::Array(vec![item])
        }
        "array" => Value::Array(Vec::new()),
        "object" if depth < MAX_DEPTH => object(schema, all, depth),
        "object" => Value::Object(Map::new()),
        "null" => Value::Null,
        _ => Value::String(format!("<{name}>")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_tools_own_examples_win() {
        let schema = json!({"type": "object", "properties": {"a": {"type": "string"}}, "examples": [{"a": "x"}]});
        assert_eq!(
            for_schema(&schema),
            [Example {
                title: "Example 1 (from the tool)".into(),
                arguments: json!({"a": "x"})
            }]
        );
    }

    #[test]
    fn generated_from_the_schema() {
        let schema = json!({
            "type": "object",
            "properties": {
                "repo": {"type": "string"},
                "count": {"type": "integer", "minimum": 1},
                "state": {"enum": ["open", "closed"]},
                "labels": {"type": "array", "items": {"type": "string"}},
                "owner": {"type": "object", "properties": {"login": {"type": "string"}, "id": {"type": "number"}}, "required": ["login"]},
                "draft": {"type": "boolean"}
            },
            "required": ["repo", "count", "state", "owner"]
        });
        let examples = for_schema(&schema);
        assert_eq!(examples[0].title, "Required parameters");
        assert_eq!(
            examples[0].arguments,
            json!({"repo": "<repo>", "count": 1, "state": "open", "owner": {"login": "<login>"}})
        );
        assert_eq!(examples[1].title, "All parameters");
        assert_eq!(examples[1].arguments["labels"], json!(["<labels>"]));
        assert_eq!(examples[1].arguments["owner"], json!({"login": "<login>", "id": 0}));
        assert_eq!(examples[1].arguments["draft"], json!(false));
    }

    #[test]
    fn no_parameters_is_one_empty_example() {
        let examples = for_schema(&json!({"type": "object"}));
        assert_eq!(examples.len(), 1);
        assert_eq!(examples[0].arguments, json!({}));
    }
}
