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

/// What an output schema keeps of its shape: the answer's top-level fields with their
/// types and which are required, each nested type by its JSON type alone. Every session
/// pays for `tools/list` in context; the full shapes are in the OpenAPI document, and the
/// tool descriptions name the fields an agent reads.
pub fn lean_output(full: Map<String, Value>) -> Map<String, Value> {
    let defs = match full.get("$defs") {
        Some(Value::Object(defs)) => defs.clone(),
        _ => Map::new(),
    };
    let mut root = Value::Object(full);
    shallow(&mut root, &defs);
    match root {
        Value::Object(mut map) => {
            map.remove("$defs");
            // The fields every answer has; the others are allowed (no
            // `additionalProperties: false`) and named in the description.
            let required: Vec<String> = match map.get("required") {
                Some(Value::Array(names)) => names
                    .iter()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect(),
                _ => Vec::new(),
            };
            if let Some(Value::Object(properties)) = map.get_mut("properties") {
                properties.retain(|name, _| required.contains(name));
            }
            map
        }
        _ => Map::new(),
    }
}

/// Annotations an output schema goes without, at any depth.
const NOT_SHAPE: &[&str] = &[
    "description",
    "format",
    "minimum",
    "maximum",
    "minLength",
    "maxLength",
    "examples",
    "example",
    "title",
];

/// `value` (a schema) without [`NOT_SHAPE`] and with every `$ref` replaced by its JSON
/// type.
fn shallow(value: &mut Value, defs: &Map<String, Value>) {
    match value {
        Value::Object(map) => {
            if let Some(name) = map
                .get("$ref")
                .and_then(Value::as_str)
                .and_then(|r| r.strip_prefix(DEFS))
            {
                *value = type_only(defs.get(name));
                return;
            }
            for key in NOT_SHAPE {
                map.remove(*key);
            }
            for (key, v) in map.iter_mut() {
                match (key.as_str(), v) {
                    // Fields by name, whatever they are called: each is a schema.
                    ("properties" | "$defs", Value::Object(fields)) => {
                        fields.values_mut().for_each(|f| shallow(f, defs))
                    }
                    (_, v) => shallow(v, defs),
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|v| shallow(v, defs)),
        _ => {}
    }
}

/// A definition as its JSON type only (`{}`, anything, when it has none).
fn type_of_def(def: &Value) -> Option<Value> {
    if let Some(t) = def.get("type") {
        return Some(t.clone());
    }
    if def.get("allOf").is_some() || def.get("properties").is_some() {
        return Some(Value::String("object".into()));
    }
    None
}

fn type_only(def: Option<&Value>) -> Value {
    let mut out = Map::new();
    if let Some(t) = def.and_then(type_of_def) {
        out.insert("type".into(), t);
    }
    Value::Object(out)
}

/// An input schema as a tool lists it: no description of the whole (the tool's own says
/// it), no `additionalProperties`, short descriptions, a nullable type as its type (an argument left out is
/// the null), no `format`.
pub fn lean_input(mut full: Map<String, Value>) -> Map<String, Value> {
    full.remove("description");
    // The server refuses an unknown argument itself, naming it (`VALIDATION_FAILED`).
    full.remove("additionalProperties");
    let mut root = Value::Object(full);
    tidy_input(&mut root);
    match root {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}

fn tidy_input(value: &mut Value) {
    match value {
        Value::Object(map) => {
            map.remove("format");
            for key in BOUNDS {
                map.remove(*key);
            }
            if let Some(Value::Array(types)) = map.get("type") {
                let kept: Vec<Value> = types.iter().filter(|t| *t != "null").cloned().collect();
                if kept.len() == 1 {
                    map.insert("type".into(), kept[0].clone());
                }
            }
            if let Some(Value::String(text)) = map.get_mut("description") {
                *text = first_sentence(&text.split_whitespace().collect::<Vec<_>>().join(" "));
            }
            for (key, v) in map.iter_mut() {
                match (key.as_str(), v) {
                    // Fields by name, whatever they are called: each is a schema.
                    ("properties" | "$defs", Value::Object(fields)) => {
                        for (name, field) in fields.iter_mut() {
                            if SELF_EXPLAINED.contains(&name.as_str()) {
                                if let Value::Object(field) = field {
                                    field.remove("description");
                                }
                            }
                            tidy_input(field);
                        }
                    }
                    ("description", _) => {}
                    (_, v) => tidy_input(v),
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(tidy_input),
        _ => {}
    }
}

/// The longest argument description a tool lists, in characters.
const ARGUMENT_NOTE: usize = 64;

/// Arguments every agent knows from the tool's description or the name alone.
const SELF_EXPLAINED: &[&str] = &[
    "note",
    "version_id",
    "page_token",
    "page_size",
    "agent_id",
    "idempotency_key",
];

/// Bounds the server checks and names in its refusal; the description gives the range.
const BOUNDS: &[&str] = &["minimum", "maximum", "minLength", "maxLength"];

/// A parameter's description as a tool lists it: its first sentence, cut at a word
/// before [`ARGUMENT_NOTE`] characters (the OpenAPI document keeps the whole).
fn first_sentence(text: &str) -> String {
    // "e.g. " ends no sentence.
    let end = [". ", "; "]
        .iter()
        .filter_map(|stop| {
            text.match_indices(stop)
                .find(|(i, _)| !text[..*i].ends_with("e.g"))
                .map(|(i, _)| i + 1)
        })
        .min()
        .unwrap_or(text.len());
    let sentence = text[..end].trim_end_matches([';', ' ']);
    if sentence.chars().count() <= ARGUMENT_NOTE {
        return sentence.to_string();
    }
    let cut: String = sentence.chars().take(ARGUMENT_NOTE).collect();
    let cut = cut.rsplit_once(' ').map_or(cut.as_str(), |(head, _)| head);
    format!("{cut}…")
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
