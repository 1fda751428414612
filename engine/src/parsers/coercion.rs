//! Schema-driven coercion of tool-call arguments.
//!
//! Models write `"10"` for an integer, `"True"` for a boolean, an array as a
//! string, or (in XML formats) every value as text. Each argument is turned
//! into the JSON type its tool's `parameters` schema declares. Coercion
//! never drops a field and never fails: a value that cannot be converted
//! stays as it was (a string for text) and is counted.

use serde_json::{Map, Number, Value};

/// Coerces arguments against one tool's `parameters` schema.
pub struct Coercer<'a> {
    root: Option<&'a Value>,
    /// Values that did not fit their schema and could not be converted.
    pub failures: usize,
}

/// The JSON types a schema admits, in the order the schema lists them.
#[derive(Debug, Default)]
struct Admits {
    types: Vec<&'static str>,
    /// An `enum`/`const` list, when the schema has one.
    values: Vec<Value>,
    /// The branch schemas of `anyOf`/`oneOf` (for nested coercion).
    branches: Vec<Value>,
}

impl Admits {
    fn has(&self, t: &str) -> bool {
        self.types.contains(&t)
    }
    fn any(&self) -> bool {
        self.types.is_empty() && self.values.is_empty()
    }
}

const TYPES: [&str; 7] = [
    "string", "integer", "number", "boolean", "array", "object", "null",
];

impl<'a> Coercer<'a> {
    pub fn new(parameters: Option<&'a Value>) -> Self {
        Coercer {
            root: parameters,
            failures: 0,
        }
    }

    /// The schema of argument `key` (none when the tool or key is unknown).
    pub fn property(&self, key: &str) -> Option<Value> {
        let root = self.root?;
        let props = self.resolve(root).get("properties")?.as_object()?;
        props.get(key).map(|s| self.resolve(s).clone())
    }

    /// Coerces a value written as text (XML parameter formats): entities
    /// are decoded by the caller; the text becomes the declared type.
    pub fn coerce_text(&mut self, schema: Option<&Value>, text: &str) -> Value {
        let Some(schema) = schema else {
            return Value::String(text.to_string());
        };
        match self.convert_text(schema, text) {
            Some(v) => v,
            None => {
                self.failures += 1;
                Value::String(text.to_string())
            }
        }
    }

    /// Coerces a value the model wrote as JSON.
    pub fn coerce_value(&mut self, schema: Option<&Value>, value: Value) -> Value {
        let Some(schema) = schema else {
            return value;
        };
        match self.convert_value(schema, value) {
            Ok(v) => v,
            Err(v) => {
                self.failures += 1;
                v
            }
        }
    }

    /// `Some(converted)` or `None` when the text fits no admitted type.
    fn convert_text(&mut self, schema: &Value, text: &str) -> Option<Value> {
        let admits = self.admits(schema);
        if admits.any() {
            return Some(Value::String(text.to_string()));
        }
        let t = text.trim();
        if admits.has("null") && (t == "null" || t.is_empty()) {
            return Some(Value::Null);
        }
        if !admits.values.is_empty() {
            // An enum: the listed value the text spells, string or not.
            return admits
                .values
                .iter()
                .find(|v| match v {
                    Value::String(s) => s == text || s == t,
                    other => serde_json::from_str::<Value>(t).is_ok_and(|parsed| parsed == **other),
                })
                .cloned();
        }
        if admits.has("string") {
            return Some(Value::String(text.to_string()));
        }
        for ty in &admits.types {
            let v = match *ty {
                "integer" => parse_integer(t),
                "number" => parse_number(t),
                "boolean" => parse_bool(t),
                "array" | "object" => match serde_json::from_str::<Value>(t) {
                    Ok(v @ Value::Array(_)) if *ty == "array" => Some(v),
                    Ok(v @ Value::Object(_)) if *ty == "object" => Some(v),
                    _ => None,
                },
                _ => None,
            };
            if let Some(v) = v {
                return Some(match self.convert_value(schema, v) {
                    Ok(v) | Err(v) => v,
                });
            }
        }
        None
    }

    /// `Ok(converted)`, or `Err(original)` when it fits no admitted type.
    fn convert_value(&mut self, schema: &Value, value: Value) -> Result<Value, Value> {
        let admits = self.admits(schema);
        if admits.any() {
            return Ok(value);
        }
        if !admits.values.is_empty() {
            if admits.values.contains(&value) {
                return Ok(value);
            }
            let text = match &value {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            return self.convert_text(schema, &text).ok_or(value);
        }
        match value {
            Value::String(s) => {
                if admits.has("string") {
                    Ok(Value::String(s))
                } else {
                    self.convert_text(schema, &s).ok_or(Value::String(s))
                }
            }
            Value::Null if admits.has("null") => Ok(Value::Null),
            Value::Bool(_) if admits.has("boolean") => Ok(value),
            Value::Number(n) => {
                if admits.has("integer") {
                    if n.is_i64() || n.is_u64() {
                        return Ok(Value::Number(n));
                    }
                    if let Some(i) = n.as_f64().and_then(integral) {
                        return Ok(Value::Number(i.into()));
                    }
                }
                if admits.has("number") {
                    return Ok(Value::Number(n));
                }
                if admits.has("string") {
                    return Ok(Value::String(n.to_string()));
                }
                Err(Value::Number(n))
            }
            Value::Object(map) if admits.has("object") => {
                let schema = self.object_schema(schema, &admits);
                Ok(Value::Object(self.convert_members(schema.as_ref(), map)))
            }
            Value::Array(items) if admits.has("array") => {
                let item_schema = self.array_items(schema, &admits);
                Ok(Value::Array(
                    items
                        .into_iter()
                        .map(|v| self.coerce_value(item_schema.as_ref(), v))
                        .collect(),
                ))
            }
            Value::Bool(b) if admits.has("string") => Ok(Value::String(b.to_string())),
            other => Err(other),
        }
    }

    fn convert_members(
        &mut self,
        schema: Option<&Value>,
        map: Map<String, Value>,
    ) -> Map<String, Value> {
        let props = schema
            .and_then(|s| s.get("properties"))
            .and_then(Value::as_object)
            .cloned();
        let extra = schema
            .and_then(|s| s.get("additionalProperties"))
            .filter(|v| v.is_object())
            .cloned();
        map.into_iter()
            .map(|(k, v)| {
                let sub = props
                    .as_ref()
                    .and_then(|p| p.get(&k))
                    .or(extra.as_ref())
                    .map(|s| self.resolve(s).clone());
                let v = self.coerce_value(sub.as_ref(), v);
                (k, v)
            })
            .collect()
    }

    /// The schema describing an object's members: the schema itself, or
    /// its first object branch.
    fn object_schema(&self, schema: &Value, admits: &Admits) -> Option<Value> {
        let own = self.resolve(schema);
        if own.get("properties").is_some() || own.get("additionalProperties").is_some() {
            return Some(own.clone());
        }
        admits
            .branches
            .iter()
            .map(|b| self.resolve(b))
            .find(|b| b.get("properties").is_some())
            .cloned()
    }

    fn array_items(&self, schema: &Value, admits: &Admits) -> Option<Value> {
        let own = self.resolve(schema);
        own.get("items")
            .or_else(|| {
                admits
                    .branches
                    .iter()
                    .find_map(|b| self.resolve(b).get("items"))
            })
            .map(|s| self.resolve(s).clone())
    }

    fn admits(&self, schema: &Value) -> Admits {
        let mut out = Admits::default();
        self.collect_admits(schema, &mut out, 0);
        out
    }

    fn collect_admits(&self, schema: &Value, out: &mut Admits, depth: usize) {
        if depth > 16 {
            return;
        }
        let schema = self.resolve(schema);
        let add = |out: &mut Admits, t: &str| {
            if let Some(known) = TYPES.iter().find(|k| **k == t) {
                if !out.types.contains(known) {
                    out.types.push(known);
                }
            }
        };
        match schema.get("type") {
            Some(Value::String(t)) => add(out, t),
            Some(Value::Array(ts)) => ts
                .iter()
                .filter_map(Value::as_str)
                .for_each(|t| add(out, t)),
            _ => {}
        }
        if let Some(Value::Array(vals)) = schema.get("enum") {
            out.values.extend(vals.iter().cloned());
        }
        if let Some(c) = schema.get("const") {
            out.values.push(c.clone());
        }
        if schema.get("type").is_none() {
            if schema.get("properties").is_some() {
                add(out, "object");
            } else if schema.get("items").is_some() {
                add(out, "array");
            }
        }
        for key in ["anyOf", "oneOf"] {
            if let Some(Value::Array(branches)) = schema.get(key) {
                for b in branches {
                    out.branches.push(b.clone());
                    self.collect_admits(b, out, depth + 1);
                }
            }
        }
    }

    /// Follows a local `$ref` (`#/$defs/X`, `#/definitions/X`).
    fn resolve<'s>(&'s self, schema: &'s Value) -> &'s Value {
        let mut s = schema;
        for _ in 0..8 {
            let Some(r) = s.get("$ref").and_then(Value::as_str) else {
                return s;
            };
            let Some(target) = r
                .strip_prefix('#')
                .and_then(|p| self.root.and_then(|root| root.pointer(p)))
            else {
                return s;
            };
            s = target;
        }
        s
    }
}

fn parse_integer(t: &str) -> Option<Value> {
    if let Ok(i) = t.parse::<i64>() {
        return Some(i.into());
    }
    t.parse::<f64>().ok().and_then(integral).map(Value::from)
}

fn integral(f: f64) -> Option<i64> {
    (f.is_finite() && f.fract() == 0.0 && f.abs() < 9.0e15).then_some(f as i64)
}

fn parse_number(t: &str) -> Option<Value> {
    if let Ok(i) = t.parse::<i64>() {
        return Some(i.into());
    }
    let f = t.parse::<f64>().ok().filter(|f| f.is_finite())?;
    Number::from_f64(f).map(Value::Number)
}

fn parse_bool(t: &str) -> Option<Value> {
    match t {
        "true" | "True" | "TRUE" => Some(Value::Bool(true)),
        "false" | "False" | "FALSE" => Some(Value::Bool(false)),
        _ => None,
    }
}

/// Decodes the XML entities models write in parameter text
/// (`&lt; &gt; &amp; &quot; &apos;` and numeric `&#NN;` / `&#xHH;`).
pub fn decode_entities(text: &str) -> String {
    if !text.contains('&') {
        return text.to_string();
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(amp) = rest.find('&') {
        out.push_str(&rest[..amp]);
        rest = &rest[amp..];
        let decoded = rest.find(';').filter(|&semi| semi <= 10).and_then(|semi| {
            let name = &rest[1..semi];
            let c = match name {
                "lt" => Some('<'),
                "gt" => Some('>'),
                "amp" => Some('&'),
                "quot" => Some('"'),
                "apos" => Some('\''),
                _ => name
                    .strip_prefix("#x")
                    .or_else(|| name.strip_prefix("#X"))
                    .and_then(|h| u32::from_str_radix(h, 16).ok())
                    .or_else(|| name.strip_prefix('#').and_then(|d| d.parse().ok()))
                    .and_then(char::from_u32),
            };
            c.map(|c| (c, semi + 1))
        });
        match decoded {
            Some((c, len)) => {
                out.push(c);
                rest = &rest[len..];
            }
            None => {
                out.push('&');
                rest = &rest[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Value {
        json!({"type": "object", "properties": {
            "count": {"type": "integer"},
            "celsius": {"type": "number"},
            "enabled": {"type": "boolean"},
            "tags": {"type": "array", "items": {"type": "integer"}},
            "opts": {"type": "object", "properties": {"depth": {"type": "integer"}}},
            "maybe": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
            "unit": {"enum": ["celsius", "fahrenheit"]},
            "level": {"enum": [1, 2, 3]},
            "name": {"type": "string"},
            "items": {"type": "array", "items": {"$ref": "#/$defs/Item"}},
        }, "$defs": {"Item": {"type": "object", "properties": {"qty": {"type": "integer"}}}}})
    }

    fn text(key: &str, raw: &str) -> (Value, usize) {
        let s = schema();
        let mut c = Coercer::new(Some(&s));
        let p = c.property(key);
        let v = c.coerce_text(p.as_ref(), raw);
        (v, c.failures)
    }

    fn value(key: &str, raw: Value) -> (Value, usize) {
        let s = schema();
        let mut c = Coercer::new(Some(&s));
        let p = c.property(key);
        let v = c.coerce_value(p.as_ref(), raw);
        (v, c.failures)
    }

    #[test]
    fn text_becomes_the_declared_type() {
        assert_eq!(text("count", "10"), (json!(10), 0));
        assert_eq!(text("count", " 7\n"), (json!(7), 0));
        assert_eq!(text("celsius", "22.5"), (json!(22.5), 0));
        assert_eq!(text("enabled", "True"), (json!(true), 0));
        assert_eq!(text("enabled", "false"), (json!(false), 0));
        assert_eq!(text("tags", "[1, 2]"), (json!([1, 2]), 0));
        assert_eq!(text("tags", "[\"3\"]"), (json!([3]), 0));
        assert_eq!(text("opts", "{\"depth\": \"2\"}"), (json!({"depth": 2}), 0));
        assert_eq!(text("maybe", "null"), (json!(null), 0));
        assert_eq!(text("maybe", ""), (json!(null), 0));
        assert_eq!(text("maybe", "4"), (json!(4), 0));
        assert_eq!(text("unit", "celsius"), (json!("celsius"), 0));
        assert_eq!(text("level", "2"), (json!(2), 0));
        assert_eq!(text("name", "42"), (json!("42"), 0));
        assert_eq!(text("unknown", "42"), (json!("42"), 0));
    }

    #[test]
    fn unconvertible_text_stays_a_string_and_is_counted() {
        assert_eq!(text("count", "ten"), (json!("ten"), 1));
        assert_eq!(text("count", ""), (json!(""), 1));
        assert_eq!(text("enabled", "yes"), (json!("yes"), 1));
        assert_eq!(text("unit", "kelvin"), (json!("kelvin"), 1));
        assert_eq!(text("tags", "[1,"), (json!("[1,"), 1));
    }

    #[test]
    fn json_values_are_coerced_deeply() {
        assert_eq!(value("celsius", json!("22.5")), (json!(22.5), 0));
        assert_eq!(value("enabled", json!("True")), (json!(true), 0));
        assert_eq!(value("count", json!(3.0)), (json!(3), 0));
        assert_eq!(value("name", json!(5)), (json!("5"), 0));
        assert_eq!(value("tags", json!("[1,2]")), (json!([1, 2]), 0));
        assert_eq!(
            value("items", json!([{"qty": "2"}, {"qty": 3}])),
            (json!([{"qty": 2}, {"qty": 3}]), 0)
        );
        assert_eq!(value("count", json!(true)), (json!(true), 1));
    }

    #[test]
    fn entities_are_decoded() {
        assert_eq!(
            decode_entities("a &lt;b&gt; &amp;&amp; &#65;&#x42; &bogus; &"),
            "a <b> && AB &bogus; &"
        );
    }
}
