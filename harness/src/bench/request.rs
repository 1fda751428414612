//! A conversation's next request in the wire shape of the chosen endpoint
//! (`--endpoint chat|completions|messages|responses`), streamed, with the
//! usage each protocol reports in streams asked for.

use anyhow::{bail, Result};
use serde_json::{json, Map, Value};

use crate::protocol::endpoint::Endpoint;

/// What every request of a run has in common.
#[derive(Debug, Clone)]
pub struct RequestSettings {
    pub endpoint: Endpoint,
    pub model: String,
    pub temperature: f64,
    /// vLLM's and llama.cpp's `ignore_eos` (ask for exactly `max_tokens`).
    pub ignore_eos: bool,
    /// Fields merged into every body (a scenario's, or `--extra-body`).
    pub extra: Value,
}

/// One request: its messages (chat shape, the history and the new user
/// turn), tools, token budget and, if any, the output schema.
pub fn body(
    s: &RequestSettings,
    messages: &[Value],
    tools: Option<&Value>,
    max_tokens: u32,
    schema: Option<&Value>,
) -> Result<Value> {
    let text = |m: &Value| -> String {
        match &m["content"] {
            Value::String(t) => t.clone(),
            Value::Array(parts) => parts
                .iter()
                .filter_map(|p| p["text"].as_str())
                .collect::<Vec<_>>()
                .join("\n"),
            _ => String::new(),
        }
    };
    let (system, turns): (Vec<&Value>, Vec<&Value>) = messages
        .iter()
        .partition(|m| m["role"] == "system" || m["role"] == "developer");
    let system_text = system
        .iter()
        .map(|m| text(m))
        .collect::<Vec<_>>()
        .join("\n");
    if tools.is_some() && s.endpoint != Endpoint::Chat {
        bail!("requests with tools run on --endpoint chat only");
    }
    let mut b = match s.endpoint {
        Endpoint::Chat => json!({
            "messages": messages,
            "max_tokens": max_tokens,
            "stream_options": {"include_usage": true},
        }),
        Endpoint::Completions => {
            if schema.is_some() {
                bail!("--endpoint completions has no response_format: use --schema-share 0");
            }
            let mut prompt = String::new();
            if !system_text.is_empty() {
                prompt.push_str(&system_text);
                prompt.push_str("\n\n");
            }
            for m in &turns {
                let who = if m["role"] == "assistant" {
                    "Assistant"
                } else {
                    "User"
                };
                prompt.push_str(&format!("{who}: {}\n", text(m)));
            }
            prompt.push_str("Assistant:");
            json!({
                "prompt": prompt,
                "max_tokens": max_tokens,
                "stream_options": {"include_usage": true},
            })
        }
        Endpoint::Messages => {
            let mut b = json!({
                "messages": turns.iter().map(|m| json!({"role": m["role"], "content": text(m)})).collect::<Vec<_>>(),
                "max_tokens": max_tokens,
            });
            if !system_text.is_empty() {
                b["system"] = system_text.clone().into();
            }
            b
        }
        Endpoint::Responses => {
            let mut b = json!({
                "input": turns.iter().map(|m| json!({"role": m["role"], "content": text(m)})).collect::<Vec<_>>(),
                "max_output_tokens": max_tokens,
                "store": false,
            });
            if !system_text.is_empty() {
                b["instructions"] = system_text.clone().into();
            }
            b
        }
    };
    let o = b.as_object_mut().expect("an object");
    o.insert("model".into(), s.model.clone().into());
    o.insert("stream".into(), true.into());
    o.insert("temperature".into(), s.temperature.into());
    if s.ignore_eos {
        o.insert("ignore_eos".into(), true.into());
    }
    if let Some(t) = tools {
        o.insert("tools".into(), t.clone());
    }
    if let Some(schema) = schema {
        let (key, format) = match s.endpoint {
            Endpoint::Chat => (
                "response_format",
                json!({"type": "json_schema", "json_schema": {"name": "reply", "strict": true, "schema": schema}}),
            ),
            Endpoint::Messages => (
                "output_config",
                json!({"format": {"type": "json_schema", "schema": schema}}),
            ),
            Endpoint::Responses => (
                "text",
                json!({"format": {"type": "json_schema", "name": "reply", "strict": true, "schema": schema}}),
            ),
            Endpoint::Completions => unreachable!("refused above"),
        };
        o.insert(key.into(), format);
    }
    merge(o, &s.extra);
    Ok(b)
}

fn merge(into: &mut Map<String, Value>, extra: &Value) {
    if let Some(extra) = extra.as_object() {
        for (k, v) in extra {
            into.insert(k.clone(), v.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(endpoint: Endpoint) -> RequestSettings {
        RequestSettings {
            endpoint,
            model: "m".into(),
            temperature: 0.0,
            ignore_eos: false,
            extra: json!({}),
        }
    }

    #[test]
    fn each_endpoint_gets_its_own_shape() {
        let messages = [
            json!({"role": "system", "content": "Be brief."}),
            json!({"role": "user", "content": "Hi"}),
            json!({"role": "assistant", "content": "Hello"}),
            json!({"role": "user", "content": "Again"}),
        ];
        let schema = json!({"type": "object"});
        let chat = body(&settings(Endpoint::Chat), &messages, None, 8, Some(&schema)).unwrap();
        assert_eq!(chat["messages"].as_array().unwrap().len(), 4);
        assert_eq!(chat["response_format"]["json_schema"]["schema"], schema);
        assert_eq!(chat["stream_options"]["include_usage"], true);
        let m = body(
            &settings(Endpoint::Messages),
            &messages,
            None,
            8,
            Some(&schema),
        )
        .unwrap();
        assert_eq!(m["system"], "Be brief.");
        assert_eq!(m["messages"].as_array().unwrap().len(), 3);
        assert_eq!(m["output_config"]["format"]["schema"], schema);
        let r = body(&settings(Endpoint::Responses), &messages, None, 8, None).unwrap();
        assert_eq!(
            (r["instructions"].as_str(), r["max_output_tokens"].as_u64()),
            (Some("Be brief."), Some(8))
        );
        let c = body(&settings(Endpoint::Completions), &messages, None, 8, None).unwrap();
        assert_eq!(
            c["prompt"],
            "Be brief.\n\nUser: Hi\nAssistant: Hello\nUser: Again\nAssistant:"
        );
        assert!(body(
            &settings(Endpoint::Completions),
            &messages,
            None,
            8,
            Some(&schema)
        )
        .is_err());
    }
}
