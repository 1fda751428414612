//! Anthropic Messages: a reply's content blocks (`text`, `thinking`,
//! `tool_use`), a stream's events folded as Anthropic's SDK folds them,
//! and the rules of that stream's event order.

use serde_json::Value;

use super::{events_named_by_type, stream_basics, usage, Counts};
use crate::outcome::{clip, ensure, Outcome};
use crate::protocol::exchange::Exchange;
use crate::protocol::reply::{Reply, ToolCall};

pub(super) fn of_body(body: &Value) -> Reply {
    let mut r = Reply::default();
    if body["type"] == "error" || body.get("error").is_some() {
        r.error = Some(body["error"].clone());
        return r;
    }
    r.finish_reason = body["stop_reason"].as_str().map(str::to_string);
    r.usage = usage_of(&body["usage"]);
    for block in body["content"].as_array().into_iter().flatten() {
        match block["type"].as_str() {
            Some("text") => r
                .content
                .push_str(block["text"].as_str().unwrap_or_default()),
            Some("thinking") => r
                .reasoning
                .push_str(block["thinking"].as_str().unwrap_or_default()),
            Some("tool_use") => r.tool_calls.push(ToolCall {
                index: r.tool_calls.len(),
                id: block["id"].as_str().map(str::to_string),
                name: block["name"].as_str().unwrap_or_default().to_string(),
                arguments: input_text(&block["input"]),
                repeated_headers: 0,
            }),
            _ => {}
        }
    }
    r.content_null = r.content.is_empty() && !r.tool_calls.is_empty();
    r
}

/// A tool's input as JSON text (it is an object on the wire; a string is
/// kept as sent so the argument check reports it).
fn input_text(input: &Value) -> String {
    match input {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// Anthropic counts uncached input apart from cache reads and writes; the
/// prompt is their sum.
fn usage_of(u: &Value) -> Option<Value> {
    let input = u["input_tokens"].as_u64()?;
    let read = u["cache_read_input_tokens"].as_u64();
    let written = u["cache_creation_input_tokens"].as_u64().unwrap_or(0);
    Some(usage(Counts {
        prompt: input + read.unwrap_or(0) + written,
        completion: u["output_tokens"].as_u64().unwrap_or(0),
        total: None,
        cached: read,
        reasoning: None,
    }))
}

pub(super) fn of_events(events: &[Value]) -> Reply {
    let mut r = Reply::default();
    let mut input_usage = Value::Null;
    // Block index -> tool call position, for input_json_delta.
    let mut blocks: Vec<Option<usize>> = Vec::new();
    for e in events {
        match e["type"].as_str() {
            Some("message_start") => input_usage = e["message"]["usage"].clone(),
            Some("content_block_start") => {
                let index = e["index"].as_u64().unwrap_or(0) as usize;
                if blocks.len() <= index {
                    blocks.resize(index + 1, None);
                }
                let b = &e["content_block"];
                match b["type"].as_str() {
                    Some("tool_use") => {
                        blocks[index] = Some(r.tool_calls.len());
                        r.tool_calls.push(ToolCall {
                            index: r.tool_calls.len(),
                            id: b["id"].as_str().map(str::to_string),
                            name: b["name"].as_str().unwrap_or_default().to_string(),
                            // A non-empty `input` here is the whole input.
                            arguments: match &b["input"] {
                                Value::Object(m) if !m.is_empty() => b["input"].to_string(),
                                _ => String::new(),
                            },
                            repeated_headers: 0,
                        });
                    }
                    Some("text") => r.content.push_str(b["text"].as_str().unwrap_or_default()),
                    Some("thinking") => r
                        .reasoning
                        .push_str(b["thinking"].as_str().unwrap_or_default()),
                    _ => {}
                }
            }
            Some("content_block_delta") => {
                let d = &e["delta"];
                match d["type"].as_str() {
                    Some("text_delta") => {
                        r.content.push_str(d["text"].as_str().unwrap_or_default())
                    }
                    Some("thinking_delta") => r
                        .reasoning
                        .push_str(d["thinking"].as_str().unwrap_or_default()),
                    Some("input_json_delta") => {
                        let index = e["index"].as_u64().unwrap_or(0) as usize;
                        if let Some(Some(k)) = blocks.get(index) {
                            r.tool_calls[*k]
                                .arguments
                                .push_str(d["partial_json"].as_str().unwrap_or_default());
                        }
                    }
                    _ => {}
                }
            }
            Some("message_delta") => {
                if let Some(s) = e["delta"]["stop_reason"].as_str() {
                    r.finish_reason = Some(s.to_string());
                }
                // Output tokens arrive here; input tokens with message_start
                // (or again here, as some servers send them).
                let mut u = input_usage.clone();
                if !u.is_object() {
                    u = serde_json::json!({});
                }
                if let Some(m) = e["usage"].as_object() {
                    for (k, v) in m {
                        u[k] = v.clone();
                    }
                }
                r.usage = usage_of(&u);
            }
            Some("error") => r.error = Some(e["error"].clone()),
            _ => {}
        }
    }
    r.content_null = r.content.is_empty() && !r.tool_calls.is_empty();
    r
}

/// Anthropic's order: `message_start`; then per block `content_block_start`,
/// its deltas (of the block's kind), `content_block_stop`, blocks numbered
/// from 0 and never interleaved; `message_delta` with the stop reason;
/// `message_stop` last. `ping` may come anywhere; each event's SSE name is
/// its data's `type`; no `[DONE]`.
pub(super) fn stream_protocol(ex: &Exchange) -> Outcome {
    stream_basics(ex)?;
    ensure(!ex.done_marker, "no data: [DONE] (not Anthropic's)", || {
        "a [DONE] line".into()
    })?;
    events_named_by_type(ex, true)?;
    let kinds: Vec<&str> = ex
        .chunks
        .iter()
        .map(|e| e["type"].as_str().unwrap_or_default())
        .filter(|k| *k != "ping")
        .collect();
    ensure(
        kinds.first() == Some(&"message_start"),
        "message_start first",
        || format!("{:?}", kinds.first()),
    )?;
    ensure(
        kinds.last() == Some(&"message_stop"),
        "message_stop last",
        || format!("{:?}", kinds.last()),
    )?;
    let mut open: Option<(u64, String)> = None;
    let mut next_index = 0u64;
    let mut message_deltas = 0;
    for e in ex.chunks.iter().filter(|e| e["type"] != "ping") {
        let kind = e["type"].as_str().unwrap_or_default();
        let index = e["index"].as_u64();
        match kind {
            "content_block_start" => {
                ensure(
                    open.is_none(),
                    "a block starts after the previous stopped",
                    || clip(&e.to_string()),
                )?;
                ensure(
                    index == Some(next_index),
                    format!("block index {next_index}"),
                    || clip(&e.to_string()),
                )?;
                ensure(message_deltas == 0, "blocks before message_delta", || {
                    clip(&e.to_string())
                })?;
                let block = e["content_block"]["type"].as_str().unwrap_or_default();
                open = Some((next_index, block.to_string()));
                next_index += 1;
            }
            "content_block_delta" => {
                let Some((at, block)) = &open else {
                    return Err(("a delta inside an open block".into(), clip(&e.to_string())));
                };
                ensure(index == Some(*at), format!("delta of block {at}"), || {
                    clip(&e.to_string())
                })?;
                let delta = e["delta"]["type"].as_str().unwrap_or_default();
                let fits = matches!(
                    (block.as_str(), delta),
                    ("text", "text_delta" | "citations_delta")
                        | ("thinking", "thinking_delta" | "signature_delta")
                        | ("tool_use", "input_json_delta")
                );
                ensure(fits, format!("deltas of a {block} block"), || {
                    format!("{delta} in block {at}")
                })?;
            }
            "content_block_stop" => {
                let Some((at, _)) = open.take() else {
                    return Err(("a stop of an open block".into(), clip(&e.to_string())));
                };
                ensure(index == Some(at), format!("stop of block {at}"), || {
                    clip(&e.to_string())
                })?;
            }
            "message_delta" => {
                ensure(
                    open.is_none(),
                    "message_delta after the last block stopped",
                    || clip(&e.to_string()),
                )?;
                ensure(
                    e["delta"]["stop_reason"].is_string(),
                    "message_delta with a stop_reason",
                    || clip(&e.to_string()),
                )?;
                ensure(
                    e["usage"]["output_tokens"].is_u64(),
                    "message_delta with usage.output_tokens",
                    || clip(&e.to_string()),
                )?;
                message_deltas += 1;
            }
            "message_start" | "message_stop" | "error" => {}
            other => return Err(("a Messages stream event".into(), other.to_string())),
        }
    }
    ensure(message_deltas == 1, "one message_delta", || {
        message_deltas.to_string()
    })
}
