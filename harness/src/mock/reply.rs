//! What a mock says: a reply that depends only on the prompt (so a replay
//! alone gives the same text, and another request's text is told apart),
//! or, when the request asks for a JSON schema, an instance of it that
//! keeps its `const`s (a grammar-enforcing server's behaviour).

use rand::rngs::StdRng;
use rand::{Rng as _, SeedableRng as _};
use serde_json::{json, Map, Value};

use crate::bench::dataset::hash;

/// One word per token, so token counts are word counts.
const WORDS: [&str; 32] = [
    "amber", "basil", "cedar", "delta", "ember", "fjord", "garnet", "harbor", "indigo", "juniper",
    "kelp", "lumen", "maple", "nectar", "onyx", "pebble", "quartz", "raven", "saffron", "tundra",
    "umber", "velvet", "willow", "xenon", "yarrow", "zephyr", "acorn", "birch", "comet", "dune",
    "echo", "flint",
];

/// The prompt's text, whatever the protocol: messages, prompt, input,
/// system and instructions, joined.
pub fn prompt_text(request: &Value) -> String {
    fn text(v: &Value, out: &mut String) {
        match v {
            Value::String(s) => {
                out.push_str(s);
                out.push('\n');
            }
            Value::Array(items) => items.iter().for_each(|i| text(i, out)),
            Value::Object(o) => {
                for key in ["content", "text", "input"] {
                    if let Some(x) = o.get(key) {
                        text(x, out);
                    }
                }
            }
            _ => {}
        }
    }
    let mut out = String::new();
    for key in ["system", "instructions", "messages", "prompt", "input"] {
        if let Some(v) = request.get(key) {
            text(v, &mut out);
        }
    }
    out
}

/// A mock's tokens of `text`: each run of non-space characters with the
/// spaces before it. Replies are streamed one token per event, and
/// `/tokenize` counts the same way, so a client can re-count them.
pub fn tokens(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut after_word = false;
    for c in text.chars() {
        let space = c.is_whitespace();
        if out.is_empty() || (space && after_word) {
            out.push(String::new());
        }
        out.last_mut().expect("a token").push(c);
        after_word = !space;
    }
    out
}

/// A schema instance as text whose tokens are its fields: JSON with a
/// line per member (still JSON, the same value).
pub fn spaced_json(v: &Value) -> String {
    let mut out = Vec::new();
    let formatter = serde_json::ser::PrettyFormatter::with_indent(b"");
    let mut ser = serde_json::Serializer::with_formatter(&mut out, formatter);
    serde::Serialize::serialize(v, &mut ser).expect("JSON");
    String::from_utf8(out).expect("UTF-8")
}

/// The words of the reply to `prompt`, `n` of them, each a token (the
/// first without its leading space).
pub fn words(prompt: &str, n: usize) -> Vec<String> {
    let mut rng = StdRng::seed_from_u64(hash(prompt));
    (0..n)
        .map(|k| {
            let w = WORDS[rng.random_range(0..WORDS.len())];
            if k == 0 {
                w.to_string()
            } else {
                format!(" {w}")
            }
        })
        .collect()
}

/// The JSON schema a request asks its reply to follow, in any protocol.
pub fn schema_of(request: &Value) -> Option<&Value> {
    [
        "/response_format/json_schema/schema",
        "/output_config/format/schema",
        "/text/format/schema",
    ]
    .iter()
    .find_map(|p| request.pointer(p))
}

/// An instance of `schema`: consts and the first enum value kept, other
/// fields given a plain value of their type.
pub fn instance(schema: &Value) -> Value {
    if let Some(c) = schema.get("const") {
        return c.clone();
    }
    if let Some(first) = schema["enum"].as_array().and_then(|e| e.first()) {
        return first.clone();
    }
    match schema["type"].as_str() {
        Some("object") => {
            let mut o = Map::new();
            if let Some(props) = schema["properties"].as_object() {
                for (k, v) in props {
                    o.insert(k.clone(), instance(v));
                }
            }
            Value::Object(o)
        }
        Some("array") => json!([]),
        Some("string") => json!("text"),
        Some("integer") | Some("number") => json!(0),
        Some("boolean") => json!(true),
        _ => Value::Null,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_follow_the_prompt_and_schemas_keep_their_consts() {
        let a = json!({"messages": [{"role": "user", "content": "Hi AFM-000001"}]});
        let b = json!({"messages": [{"role": "user", "content": "Hi AFM-000002"}]});
        let (pa, pb) = (prompt_text(&a), prompt_text(&b));
        assert_eq!(words(&pa, 8), words(&pa, 8));
        assert_ne!(words(&pa, 8), words(&pb, 8));
        assert_eq!(words(&pa, 3).concat().split(' ').count(), 3);
        let schema = json!({"type": "object", "properties": {
            "tag": {"type": "string", "const": "AFM-00000a"},
            "mood": {"type": "string", "enum": ["calm", "busy"]}}});
        let req = json!({"output_config": {"format": {"type": "json_schema", "schema": schema}}});
        assert_eq!(
            instance(schema_of(&req).unwrap()),
            json!({"tag": "AFM-00000a", "mood": "calm"})
        );
        let v = json!({"tag": "AFM-00000a", "mood": "calm"});
        let text = spaced_json(&v);
        assert_eq!(serde_json::from_str::<Value>(&text).unwrap(), v);
        let t = tokens(&text);
        assert_eq!(t.concat(), text);
        assert_eq!(t.len(), 6, "{t:?}");
        assert_eq!(tokens("  a b\n c"), vec!["  a", " b", "\n c"]);
    }
}
