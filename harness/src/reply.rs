//! The assistant's reply read out of an [`Exchange`], the same way for a
//! whole body and for a stream (whose deltas are folded as OpenAI clients
//! fold them: content and reasoning concatenated, tool calls assembled by
//! index). Checks look at this, so they hold for both modes.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::target::Exchange;

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    pub index: usize,
    pub id: Option<String>,
    pub name: String,
    /// As sent: a JSON text (streams: the concatenated fragments).
    pub arguments: String,
    /// Stream pieces that carried this call's id or name again after the
    /// first (a protocol error some servers make).
    pub repeated_headers: usize,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Reply {
    /// Chat content, or a completion's text.
    pub content: String,
    pub content_null: bool,
    pub reasoning: String,
    pub tool_calls: Vec<ToolCall>,
    pub finish_reason: Option<String>,
    pub usage: Option<Value>,
    /// `logprobs.content` entries, in order.
    pub logprobs: Vec<Value>,
    /// Whether any `logprobs` object was present at all.
    pub logprobs_present: bool,
    /// An `{"error": ...}` object in the body or the stream.
    pub error: Option<Value>,
}

impl Reply {
    pub fn of(ex: &Exchange) -> Reply {
        if ex.streamed && !ex.chunks.is_empty() {
            Self::of_chunks(&ex.chunks)
        } else {
            Self::of_body(&ex.body)
        }
    }

    fn of_body(body: &Value) -> Reply {
        let mut r = Reply {
            error: body.get("error").cloned(),
            usage: body.get("usage").filter(|u| !u.is_null()).cloned(),
            ..Default::default()
        };
        let choice = &body["choices"][0];
        r.finish_reason = choice["finish_reason"].as_str().map(str::to_string);
        read_logprobs(&mut r, &choice["logprobs"]);
        if let Some(text) = choice["text"].as_str() {
            r.content = text.to_string();
            return r;
        }
        let m = &choice["message"];
        r.content_null = m["content"].is_null();
        r.content = m["content"].as_str().unwrap_or_default().to_string();
        r.reasoning = reasoning_of(m).to_string();
        if let Some(calls) = m["tool_calls"].as_array() {
            for (i, c) in calls.iter().enumerate() {
                r.tool_calls.push(ToolCall {
                    index: i,
                    id: c["id"].as_str().map(str::to_string),
                    name: c["function"]["name"].as_str().unwrap_or_default().into(),
                    arguments: arguments_text(&c["function"]["arguments"]),
                    repeated_headers: 0,
                });
            }
        }
        r
    }

    fn of_chunks(chunks: &[Value]) -> Reply {
        let mut r = Reply::default();
        for c in chunks {
            if let Some(e) = c.get("error") {
                r.error = Some(e.clone());
                continue;
            }
            if let Some(u) = c.get("usage").filter(|u| !u.is_null()) {
                r.usage = Some(u.clone());
            }
            let Some(choice) = c["choices"].get(0) else {
                continue;
            };
            if let Some(f) = choice["finish_reason"].as_str() {
                r.finish_reason = Some(f.to_string());
            }
            read_logprobs(&mut r, &choice["logprobs"]);
            if let Some(text) = choice["text"].as_str() {
                r.content.push_str(text);
                continue;
            }
            let d = &choice["delta"];
            if let Some(t) = d["content"].as_str() {
                r.content.push_str(t);
            }
            r.reasoning.push_str(reasoning_of(d));
            for piece in d["tool_calls"].as_array().into_iter().flatten() {
                let index = piece["index"].as_u64().unwrap_or(0) as usize;
                let name = piece["function"]["name"].as_str();
                let id = piece["id"].as_str();
                let args = piece["function"]["arguments"].as_str().unwrap_or_default();
                match r.tool_calls.iter_mut().find(|t| t.index == index) {
                    Some(call) => {
                        if name.is_some_and(|n| !n.is_empty()) || id.is_some() {
                            call.repeated_headers += 1;
                        }
                        call.arguments.push_str(args);
                    }
                    None => r.tool_calls.push(ToolCall {
                        index,
                        id: id.map(str::to_string),
                        name: name.unwrap_or_default().to_string(),
                        arguments: args.to_string(),
                        repeated_headers: 0,
                    }),
                }
            }
        }
        r.content_null = r.content.is_empty() && !r.tool_calls.is_empty();
        r
    }

    /// A usage field as a number.
    pub fn usage_field(&self, path: &str) -> Option<u64> {
        let mut v = self.usage.as_ref()?;
        for key in path.split('.') {
            v = v.get(key)?;
        }
        v.as_u64()
    }
}

/// Servers name it `reasoning_content` (vLLM, DeepSeek) or `reasoning`.
fn reasoning_of(m: &Value) -> &str {
    m["reasoning_content"]
        .as_str()
        .or_else(|| m["reasoning"].as_str())
        .unwrap_or_default()
}

/// Arguments are a JSON text; a server that sends an object is read as its
/// text (the type check reports it).
fn arguments_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

fn read_logprobs(r: &mut Reply, lp: &Value) {
    if lp.is_null() {
        return;
    }
    r.logprobs_present = true;
    if let Some(items) = lp["content"].as_array() {
        r.logprobs.extend(items.iter().cloned());
    }
}
