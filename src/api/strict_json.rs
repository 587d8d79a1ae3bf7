//! JSON bodies parsed strictly: an object that names a key twice is refused, naming the
//! key. serde_json keeps the last value of a repeated key, so `{"content": "a",
//! "content": "b"}` would mean whatever the last parser in a chain decides (a proxy that
//! checks the first and a daemon that writes the second).

use std::cell::RefCell;
use std::fmt;

use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

/// Why a body is not one strict JSON value.
pub enum Refusal {
    /// Not JSON at all (the parser's message).
    Syntax(String),
    /// An object names this key more than once (its dotted path).
    Duplicate(String),
}

/// Parse `bytes` as one JSON value, refusing a repeated key in any object.
pub fn parse(bytes: &[u8]) -> Result<Value, Refusal> {
    let duplicate = RefCell::new(None);
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let parsed = Seed {
        path: "",
        duplicate: &duplicate,
    }
    .deserialize(&mut de)
    .and_then(|v| de.end().map(|()| v));
    match (parsed, duplicate.into_inner()) {
        (Ok(v), _) => Ok(v),
        (Err(_), Some(path)) => Err(Refusal::Duplicate(path)),
        (Err(e), None) => Err(Refusal::Syntax(e.to_string())),
    }
}

#[derive(Clone, Copy)]
struct Seed<'a, 'p> {
    path: &'p str,
    duplicate: &'a RefCell<Option<String>>,
}

impl<'de> DeserializeSeed<'de> for Seed<'_, '_> {
    type Value = Value;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Seed<'_, '_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(v.into())
    }
    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(v.into())
    }
    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number))
    }
    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_string()))
    }
    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        loop {
            let path = format!("{}[{}]", self.path, items.len());
            let seed = Seed {
                path: &path,
                ..self
            };
            match seq.next_element_seed(seed)? {
                Some(v) => items.push(v),
                None => return Ok(Value::Array(items)),
            }
        }
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut object = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            let path = if self.path.is_empty() {
                key.clone()
            } else {
                format!("{}.{key}", self.path)
            };
            if object.contains_key(&key) {
                *self.duplicate.borrow_mut() = Some(path);
                return Err(de::Error::custom("a key appears twice"));
            }
            let value = map.next_value_seed(Seed {
                path: &path,
                ..self
            })?;
            object.insert(key, value);
        }
        Ok(Value::Object(object))
    }
}

#[cfg(test)]
mod tests {
    use super::{parse, Refusal};
    use serde_json::json;

    #[test]
    fn a_repeated_key_is_refused_by_its_path() {
        let dup = |s: &str| match parse(s.as_bytes()) {
            Err(Refusal::Duplicate(p)) => p,
            Err(Refusal::Syntax(e)) => panic!("{s}: syntax {e}"),
            Ok(v) => panic!("{s}: accepted {v}"),
        };
        assert_eq!(dup(r#"{"a": 1, "a": 2}"#), "a");
        assert_eq!(dup(r#"{"x": {"b": 1, "b": 1}}"#), "x.b");
        assert_eq!(dup(r#"{"x": [{}, {"c": 1, "c": 2}]}"#), "x[1].c");
        let v = json!({"a": [1, 2.5, "s", null, true, {"b": -3}], "c": {}});
        assert!(matches!(parse(v.to_string().as_bytes()), Ok(p) if p == v));
        assert!(matches!(parse(b"{\"a\": 1} x"), Err(Refusal::Syntax(_))));
        assert!(matches!(parse(b"{\"a\": }"), Err(Refusal::Syntax(_))));
    }
}
