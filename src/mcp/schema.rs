//! Tool schemas from the one source of every JSON shape: the utoipa schemas that the
//! OpenAPI document publishes. A tool's `inputSchema` and `outputSchema` are the schema of
//! its parameter and answer types, with `#/components/schemas/X` references turned into
//! `#/$defs/X` (JSON Schema 2020-12, the dialect MCP assumes) and the root made a plain
//! `{"type": "object", ...}` as MCP requires.

use serde_json::{Map, Value};
use utoipa::openapi::{RefOr, Schema};
use utoipa::ToSchema;

const COMPONENTS: &str = "#/components/schemas/";
const DEFS: &str = "#/$defs/";

/// The JSON Schema object of `T`.
pub fn of<T: ToSchema>() -> Map<String, Value> {
    let mut found: Vec<(String, RefOr<Schema>)> = Vec::new();
    T::schemas(&mut found);
    let mut defs = Map::new();
    for (name, schema) in found {
        let mut value = serde_json::to_value(schema).unwrap_or(Value::Null);
        rewrite_refs(&mut value);
        defs.insert(name, value);
    }
    let mut root = serde_json::to_value(T::schema()).unwrap_or(Value::Null);
    rewrite_refs(&mut root);
    let mut root = match root {
        Value::Object(map) => map,
        _ => Map::new(),
    };
    flatten_all_of(&mut root, &defs);
    root.insert("type".into(), Value::String("object".into()));
    let mut used = Vec::new();
    collect_refs(&Value::Object(root.clone()), &defs, &mut used);
    if !used.is_empty() {
        let mut kept = Map::new();
        for name in used {
            if let Some(schema) = defs.get(&name) {
                kept.insert(name, schema.clone());
            }
        }
        root.insert("$defs".into(), Value::Object(kept));
    }
    root
}

/// `#/components/schemas/X` → `#/$defs/X`, everywhere in `value`.
fn rewrite_refs(value: &mut Value) {
    match value {
        Value::Object(map) => {
            if let Some(Value::String(r)) = map.get_mut("$ref") {
                if let Some(name) = r.strip_prefix(COMPONENTS) {
                    *r = format!("{DEFS}{name}");
                }
            }
            map.values_mut().for_each(rewrite_refs);
        }
        Value::Array(items) => items.iter_mut().for_each(rewrite_refs),
        _ => {}
    }
}

/// A root made of `allOf` object parts (a `#[serde(flatten)]`ed struct) becomes one object:
/// its parts' `properties` and `required` merged.
fn flatten_all_of(root: &mut Map<String, Value>, defs: &Map<String, Value>) {
    let Some(Value::Array(parts)) = root.remove("allOf") else {
        return;
    };
    let mut properties = match root.remove("properties") {
        Some(Value::Object(p)) => p,
        _ => Map::new(),
    };
    let mut required: Vec<Value> = match root.remove("required") {
        Some(Value::Array(r)) => r,
        _ => Vec::new(),
    };
    for part in parts {
        let part = match part.get("$ref").and_then(Value::as_str) {
            Some(r) => r
                .strip_prefix(DEFS)
                .and_then(|name| defs.get(name))
                .cloned()
                .unwrap_or(Value::Null),
            None => part,
        };
        if let Some(Value::Object(p)) = part.get("properties") {
            properties.extend(p.clone());
        }
        if let Some(Value::Array(r)) = part.get("required") {
            for name in r {
                if !required.contains(name) {
                    required.push(name.clone());
                }
            }
        }
    }
    root.insert("properties".into(), Value::Object(properties));
    if !required.is_empty() {
        root.insert("required".into(), Value::Array(required));
    }
}

/// The names of the `$defs` that `value` reaches, directly or through other defs.
fn collect_refs(value: &Value, defs: &Map<String, Value>, out: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            if let Some(name) = map
                .get("$ref")
                .and_then(Value::as_str)
                .and_then(|r| r.strip_prefix(DEFS))
            {
                if !out.iter().any(|n| n == name) {
                    out.push(name.to_string());
                    if let Some(def) = defs.get(name) {
                        collect_refs(def, defs, out);
                    }
                }
            }
            map.values().for_each(|v| collect_refs(v, defs, out));
        }
        Value::Array(items) => items.iter().for_each(|v| collect_refs(v, defs, out)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::surface::wire::{NoteList, NoteRead};

    fn refs_resolve(schema: &Map<String, Value>) {
        let mut used = Vec::new();
        let empty = Map::new();
        let defs = schema
            .get("$defs")
            .and_then(Value::as_object)
            .unwrap_or(&empty);
        collect_refs(&Value::Object(schema.clone()), defs, &mut used);
        for name in used {
            assert!(
                defs.contains_key(&name),
                "{name} is referenced but not in $defs"
            );
        }
        let text = Value::Object(schema.clone()).to_string();
        assert!(!text.contains(COMPONENTS), "{text}");
    }

    #[test]
    fn a_list_answer_is_an_object_whose_refs_all_resolve() {
        let schema = of::<NoteList>();
        assert_eq!(schema["type"], "object");
        assert!(schema["properties"]["coverage"].is_object());
        assert!(schema["$defs"]["Coverage"].is_object());
        assert!(schema["$defs"]["NoteHandle"].is_object());
        refs_resolve(&schema);
    }

    #[test]
    fn a_flattened_read_becomes_one_object() {
        let schema = of::<NoteRead>();
        assert_eq!(schema["type"], "object");
        assert!(schema.get("allOf").is_none());
        let properties = schema["properties"].as_object().unwrap();
        for field in ["note_id", "slug", "version_id", "lines"] {
            assert!(properties.contains_key(field), "{field}: {properties:?}");
        }
        let required: Vec<&str> = schema["required"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(Value::as_str)
            .collect();
        assert!(required.contains(&"lines") && required.contains(&"slug"));
        refs_resolve(&schema);
    }
}
