//! OpenAI chat completions and completions: replies (`choices[0]`),
//! stream chunks folded as OpenAI's clients fold them (content and
//! reasoning concatenated, tool calls assembled by index), and the SSE
//! rules of `chat.completion.chunk` / `text_completion` streams.

use std::collections::BTreeSet;

use serde_json::Value;

use crate::outcome::{clip, ensure, Outcome};
use crate::protocol::exchange::Exchange;
use crate::protocol::reply::{Reply, ToolCall};

pub(super) fn of_body(body: &Value) -> Reply {
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

pub(super) fn of_chunks(chunks: &[Value]) -> Reply {
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

pub(super) fn stream_protocol(ex: &Exchange) -> Outcome {
    ensure(ex.status == 200, "status 200", || ex.status.to_string())?;
    ensure(!ex.chunks.is_empty(), "stream chunks", || {
        format!("none; body {}", clip(&ex.body.to_string()))
    })?;
    ensure(ex.malformed_lines.is_empty(), "only data: lines", || {
        format!("{:?}", ex.malformed_lines)
    })?;
    ensure(ex.done_marker, "data: [DONE] last", || "no [DONE]".into())?;
    let ids: BTreeSet<&str> = ex.chunks.iter().filter_map(|c| c["id"].as_str()).collect();
    ensure(ids.len() == 1, "one id for all chunks", || {
        format!("{ids:?}")
    })?;
    let chat = ex.path.ends_with("/chat/completions");
    let object = if chat {
        "chat.completion.chunk"
    } else {
        "text_completion"
    };
    if let Some(c) = ex.chunks.iter().find(|c| c["object"] != object) {
        return Err((format!("object {object}"), clip(&c.to_string())));
    }
    if chat {
        let role = ex.chunks[0].pointer("/choices/0/delta/role");
        ensure(
            role.and_then(Value::as_str) == Some("assistant"),
            "the first delta carries role assistant",
            || clip(&ex.chunks[0].to_string()),
        )?;
    }
    let finishes = ex
        .chunks
        .iter()
        .filter(|c| {
            c.pointer("/choices/0/finish_reason")
                .is_some_and(|f| !f.is_null())
        })
        .count();
    ensure(finishes == 1, "one chunk with a finish_reason", || {
        format!("{finishes}")
    })?;
    if super::Dialect::OpenAi.asks_usage(&ex.request, true) {
        let last = ex.chunks.last().expect("chunks");
        ensure(
            last["usage"].is_object() && last["choices"].as_array().is_some_and(Vec::is_empty),
            "a final usage chunk with empty choices",
            || clip(&last.to_string()),
        )?;
    }
    Ok(())
}
