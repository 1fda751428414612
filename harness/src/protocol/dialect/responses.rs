//! OpenAI Responses: a response's output items (`message` with
//! `output_text` parts, `reasoning`, `function_call`), a stream's events
//! folded as OpenAI's SDK folds them, and the rules of those events.

use std::collections::BTreeMap;

use serde_json::Value;

use super::{events_named_by_type, stream_basics, usage, Counts};
use crate::outcome::{clip, ensure, Outcome};
use crate::protocol::exchange::Exchange;
use crate::protocol::reply::{Reply, ToolCall};

pub(super) fn of_body(body: &Value) -> Reply {
    if let Some(e) = body.get("error").filter(|e| !e.is_null()) {
        return Reply {
            error: Some(e.clone()),
            ..Default::default()
        };
    }
    let mut r = Reply::default();
    finish_of(body, &mut r);
    for item in body["output"].as_array().into_iter().flatten() {
        match item["type"].as_str() {
            Some("message") => {
                for part in item["content"].as_array().into_iter().flatten() {
                    if part["type"] == "output_text" {
                        r.content
                            .push_str(part["text"].as_str().unwrap_or_default());
                        if let Some(lp) = part["logprobs"].as_array() {
                            r.logprobs_present = true;
                            r.logprobs.extend(lp.iter().cloned());
                        }
                    }
                }
            }
            Some("reasoning") => r.reasoning.push_str(&reasoning_text(item)),
            Some("function_call") => r.tool_calls.push(ToolCall {
                index: r.tool_calls.len(),
                id: item["call_id"].as_str().map(str::to_string),
                name: item["name"].as_str().unwrap_or_default().to_string(),
                arguments: item["arguments"].as_str().unwrap_or_default().to_string(),
                repeated_headers: 0,
            }),
            _ => {}
        }
    }
    r.content_null = r.content.is_empty() && !r.tool_calls.is_empty();
    r
}

/// Reasoning text (`content` of `reasoning_text` parts), or its summary.
fn reasoning_text(item: &Value) -> String {
    let parts = |key: &str| -> String {
        item[key]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|p| p["text"].as_str())
            .collect()
    };
    let content = parts("content");
    if content.is_empty() {
        parts("summary")
    } else {
        content
    }
}

/// Status (or why it is incomplete) and usage of a whole response.
fn finish_of(response: &Value, r: &mut Reply) {
    r.finish_reason = match response["status"].as_str() {
        Some("incomplete") => response["incomplete_details"]["reason"]
            .as_str()
            .or(Some("incomplete"))
            .map(str::to_string),
        other => other.map(str::to_string),
    };
    let u = &response["usage"];
    if let (Some(input), Some(output)) = (u["input_tokens"].as_u64(), u["output_tokens"].as_u64()) {
        r.usage = Some(usage(Counts {
            prompt: input,
            completion: output,
            total: u["total_tokens"].as_u64(),
            cached: u["input_tokens_details"]["cached_tokens"].as_u64(),
            reasoning: u["output_tokens_details"]["reasoning_tokens"].as_u64(),
        }));
    }
}

pub(super) fn of_events(events: &[Value]) -> Reply {
    let mut r = Reply::default();
    // Output index -> tool call position.
    let mut calls: BTreeMap<u64, usize> = BTreeMap::new();
    for e in events {
        let index = e["output_index"].as_u64().unwrap_or(0);
        match e["type"].as_str() {
            Some("response.output_item.added") if e["item"]["type"] == "function_call" => {
                let item = &e["item"];
                calls.insert(index, r.tool_calls.len());
                r.tool_calls.push(ToolCall {
                    index: r.tool_calls.len(),
                    id: item["call_id"].as_str().map(str::to_string),
                    name: item["name"].as_str().unwrap_or_default().to_string(),
                    arguments: item["arguments"].as_str().unwrap_or_default().to_string(),
                    repeated_headers: 0,
                });
            }
            Some("response.output_text.delta") => {
                r.content.push_str(e["delta"].as_str().unwrap_or_default());
                if let Some(lp) = e["logprobs"].as_array() {
                    r.logprobs_present = true;
                    r.logprobs.extend(lp.iter().cloned());
                }
            }
            Some("response.reasoning_text.delta" | "response.reasoning_summary_text.delta") => r
                .reasoning
                .push_str(e["delta"].as_str().unwrap_or_default()),
            Some("response.function_call_arguments.delta") => {
                if let Some(&k) = calls.get(&index) {
                    r.tool_calls[k]
                        .arguments
                        .push_str(e["delta"].as_str().unwrap_or_default());
                }
            }
            Some("response.completed" | "response.incomplete" | "response.failed") => {
                finish_of(&e["response"], &mut r);
                if let Some(err) = e["response"].get("error").filter(|x| !x.is_null()) {
                    r.error = Some(err.clone());
                }
            }
            Some("error") => r.error = Some(e.clone()),
            _ => {}
        }
    }
    r.content_null = r.content.is_empty() && !r.tool_calls.is_empty();
    r
}

/// Responses' rules: `response.created` first; every event named by its
/// type and numbered by a rising `sequence_number`; each output item
/// announced (`response.output_item.added`) before its deltas and closed
/// (`response.output_item.done`) once; the deltas of an item add up to its
/// final text or arguments; `response.completed` (or `.incomplete` /
/// `.failed`) last, its `output` holding every announced item; no `[DONE]`.
pub(super) fn stream_protocol(ex: &Exchange) -> Outcome {
    stream_basics(ex)?;
    events_named_by_type(ex, false)?;
    let kinds: Vec<&str> = ex
        .chunks
        .iter()
        .map(|e| e["type"].as_str().unwrap_or_default())
        .collect();
    ensure(
        kinds.first() == Some(&"response.created"),
        "response.created first",
        || format!("{:?}", kinds.first()),
    )?;
    let last = kinds.last().copied().unwrap_or_default();
    ensure(
        matches!(
            last,
            "response.completed" | "response.incomplete" | "response.failed"
        ),
        "response.completed, .incomplete or .failed last",
        || last.to_string(),
    )?;
    let numbers: Vec<Option<u64>> = ex
        .chunks
        .iter()
        .map(|e| e["sequence_number"].as_u64())
        .collect();
    ensure(
        numbers.iter().all(Option::is_some) && numbers.windows(2).all(|w| w[0] < w[1]),
        "rising sequence_numbers on every event",
        || format!("{numbers:?}"),
    )?;
    // Output index -> (item type, deltas so far, closed).
    let mut items: BTreeMap<u64, (String, String, bool)> = BTreeMap::new();
    for e in &ex.chunks {
        let kind = e["type"].as_str().unwrap_or_default();
        let index = e["output_index"].as_u64();
        match kind {
            "response.output_item.added" => {
                let at = index.unwrap_or(u64::MAX);
                ensure(
                    !items.contains_key(&at),
                    "each output index announced once",
                    || clip(&e.to_string()),
                )?;
                let item = e["item"]["type"].as_str().unwrap_or_default().to_string();
                items.insert(at, (item, String::new(), false));
            }
            k if k.ends_with(".delta") => {
                let Some((_, text, closed)) = index.and_then(|i| items.get_mut(&i)) else {
                    return Err(("deltas of an announced item".into(), clip(&e.to_string())));
                };
                ensure(!*closed, "no delta after the item is done", || {
                    clip(&e.to_string())
                })?;
                if k == "response.output_text.delta"
                    || k == "response.function_call_arguments.delta"
                {
                    text.push_str(e["delta"].as_str().unwrap_or_default());
                }
            }
            "response.output_item.done" => {
                let Some((_, text, closed)) = index.and_then(|i| items.get_mut(&i)) else {
                    return Err(("done of an announced item".into(), clip(&e.to_string())));
                };
                ensure(!*closed, "each item done once", || clip(&e.to_string()))?;
                *closed = true;
                let item = &e["item"];
                let whole: String = match item["type"].as_str() {
                    Some("message") => item["content"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter_map(|p| p["text"].as_str())
                        .collect(),
                    Some("function_call") => item["arguments"].as_str().unwrap_or_default().into(),
                    _ => text.clone(),
                };
                ensure(
                    &whole == text,
                    "the item's deltas add up to its final text",
                    || format!("deltas {} vs item {}", clip(text), clip(&whole)),
                )?;
            }
            _ => {}
        }
    }
    if let Some((at, _)) = items.iter().find(|(_, (_, _, closed))| !closed) {
        return Err((
            "every item done".into(),
            format!("output index {at} never done"),
        ));
    }
    let final_items = ex
        .chunks
        .last()
        .and_then(|e| e["response"]["output"].as_array())
        .map_or(0, Vec::len);
    ensure(
        final_items == items.len(),
        "the final response holds every announced item",
        || {
            format!(
                "{final_items} items in the response, {} announced",
                items.len()
            )
        },
    )
}
