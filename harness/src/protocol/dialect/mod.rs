//! One dialect per wire protocol a server may speak: OpenAI chat and
//! completions, Anthropic Messages, OpenAI Responses. A dialect prepares a
//! suite's request for sending (streaming flags, a seed where the protocol
//! has one), reads a whole or streamed reply into the same [`Reply`],
//! checks a stream against the protocol's event rules, and says where the
//! request keeps its tools and its output schema. Checks stay the same for
//! every protocol; the exchange's path picks the dialect.

mod anthropic;
mod openai;
mod responses;

use std::collections::HashMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::outcome::Outcome;
use crate::protocol::exchange::Exchange;
use crate::protocol::reply::Reply;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Dialect {
    /// OpenAI chat and completions.
    #[default]
    OpenAi,
    /// Anthropic Messages.
    Anthropic,
    /// OpenAI Responses.
    Responses,
}

/// The request's token budget in any protocol's words: chat's
/// `max_completion_tokens` (which supersedes its `max_tokens`), then
/// `max_tokens` (completions, Messages), then Responses'
/// `max_output_tokens`.
pub fn token_budget(request: &Value) -> Option<u64> {
    ["max_completion_tokens", "max_tokens", "max_output_tokens"]
        .iter()
        .find_map(|k| request[k].as_u64())
}

/// What a stream event carries (see [`Dialect::output_of`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Output {
    /// Answer text or a tool call's pieces.
    Answer,
    /// Reasoning ("thinking") text.
    Reasoning,
}

impl Reply {
    /// The reply of an exchange, read in its protocol.
    pub fn of(ex: &Exchange) -> Reply {
        Dialect::of(ex).read(ex)
    }
}

impl Dialect {
    /// Completes a request for sending: `stream` as asked; OpenAI chat
    /// also gets the run's seed and usage in streams (the other protocols
    /// have no such fields, and servers may refuse unknown ones).
    pub fn prepare(self, body: &mut Map<String, Value>, stream: bool, seed: u64) {
        if self == Dialect::OpenAi {
            body.entry("seed").or_insert(Value::from(seed));
        }
        if stream {
            body.insert("stream".into(), Value::Bool(true));
            if self == Dialect::OpenAi {
                body.entry("stream_options")
                    .or_insert(serde_json::json!({"include_usage": true}));
            }
        }
    }

    /// Whether a reply to `request` must carry the usage: every whole
    /// reply does, and every stream of Messages and Responses; an OpenAI
    /// stream only when `stream_options.include_usage` asks for it.
    pub fn asks_usage(self, request: &Value, streamed: bool) -> bool {
        match self {
            Dialect::OpenAi if streamed => {
                request
                    .pointer("/stream_options/include_usage")
                    .and_then(Value::as_bool)
                    == Some(true)
            }
            _ => true,
        }
    }

    /// The reply, whole or folded from the stream as the protocol's
    /// clients fold it.
    pub fn read(self, ex: &Exchange) -> Reply {
        let streamed = ex.streamed && !ex.chunks.is_empty();
        match (self, streamed) {
            (Dialect::OpenAi, false) => openai::of_body(&ex.body),
            (Dialect::OpenAi, true) => openai::of_chunks(&ex.chunks),
            (Dialect::Anthropic, false) => anthropic::of_body(&ex.body),
            (Dialect::Anthropic, true) => anthropic::of_events(&ex.chunks),
            (Dialect::Responses, false) => responses::of_body(&ex.body),
            (Dialect::Responses, true) => responses::of_events(&ex.chunks),
        }
    }

    /// The stream follows the protocol's rules.
    pub fn stream_protocol(self, ex: &Exchange) -> Outcome {
        match self {
            Dialect::OpenAi => openai::stream_protocol(ex),
            Dialect::Anthropic => anthropic::stream_protocol(ex),
            Dialect::Responses => responses::stream_protocol(ex),
        }
    }

    /// The text pieces of a stream (content and reasoning deltas), in
    /// order, without the empty ones.
    pub fn text_deltas(self, ex: &Exchange) -> Vec<String> {
        let pointers: &[&str] = match self {
            Dialect::OpenAi => &[
                "/choices/0/delta/content",
                "/choices/0/delta/reasoning_content",
                "/choices/0/delta/reasoning",
                "/choices/0/text",
            ],
            Dialect::Anthropic => &["/delta/text", "/delta/thinking"],
            Dialect::Responses => &["/delta"],
        };
        ex.chunks
            .iter()
            .flat_map(|c| pointers.iter().filter_map(|p| c.pointer(p)?.as_str()))
            .filter(|t| !t.is_empty())
            .map(str::to_string)
            .collect()
    }

    /// What a stream event carries that a user would see: answer text or
    /// a call's pieces, reasoning, or nothing (role, usage, bookkeeping).
    /// Benchmarks time the first token and the first answer token by it.
    pub fn output_of(self, chunk: &Value) -> Option<Output> {
        let text = |v: Option<&Value>| v.and_then(Value::as_str).is_some_and(|s| !s.is_empty());
        match self {
            Dialect::OpenAi => {
                let choice = chunk.get("choices")?.get(0)?;
                let delta = &choice["delta"];
                let calls = delta["tool_calls"]
                    .as_array()
                    .is_some_and(|a| !a.is_empty());
                if text(choice.get("text")) || text(delta.get("content")) || calls {
                    Some(Output::Answer)
                } else if text(delta.get("reasoning_content")) || text(delta.get("reasoning")) {
                    Some(Output::Reasoning)
                } else {
                    None
                }
            }
            Dialect::Anthropic => match chunk.pointer("/delta/type")?.as_str()? {
                "text_delta" if text(chunk.pointer("/delta/text")) => Some(Output::Answer),
                "input_json_delta" => Some(Output::Answer),
                "thinking_delta" if text(chunk.pointer("/delta/thinking")) => {
                    Some(Output::Reasoning)
                }
                _ => None,
            },
            Dialect::Responses => match chunk["type"].as_str()? {
                "response.output_text.delta" | "response.function_call_arguments.delta"
                    if text(chunk.get("delta")) =>
                {
                    Some(Output::Answer)
                }
                "response.reasoning_text.delta" | "response.reasoning_summary_text.delta"
                    if text(chunk.get("delta")) =>
                {
                    Some(Output::Reasoning)
                }
                _ => None,
            },
        }
    }

    /// Each offered tool's parameters schema by name.
    pub fn tool_schemas(self, request: &Value) -> HashMap<String, Value> {
        let tools = request["tools"].as_array().into_iter().flatten();
        tools
            .filter_map(|t| {
                let (f, key) = match self {
                    Dialect::OpenAi => (&t["function"], "parameters"),
                    Dialect::Anthropic => (t, "input_schema"),
                    Dialect::Responses => (t, "parameters"),
                };
                Some((
                    f["name"].as_str()?.to_string(),
                    f.get(key)
                        .cloned()
                        .unwrap_or(serde_json::json!({"type": "object"})),
                ))
            })
            .collect()
    }

    /// The JSON Schema the request asks the output to meet, if any.
    pub fn output_schema(self, request: &Value) -> Option<Value> {
        let at = match self {
            Dialect::OpenAi => "/response_format/json_schema/schema",
            Dialect::Anthropic => "/output_config/format/schema",
            Dialect::Responses => "/text/format/schema",
        };
        request.pointer(at).cloned()
    }
}

/// What every stream must be: a 200 with events and only SSE fields.
pub(crate) fn stream_basics(ex: &Exchange) -> Outcome {
    use crate::outcome::{clip, ensure};
    ensure(ex.status == 200, "status 200", || ex.status.to_string())?;
    ensure(!ex.chunks.is_empty(), "stream events", || {
        format!("none; body {}", clip(&ex.body.to_string()))
    })?;
    ensure(ex.malformed_lines.is_empty(), "only SSE fields", || {
        format!("{:?}", ex.malformed_lines)
    })
}

/// Each event's SSE name, when it has one, is its data's `type`.
pub(crate) fn events_named_by_type(ex: &Exchange, name_required: bool) -> Outcome {
    for (name, e) in ex.events.iter().zip(&ex.chunks) {
        let kind = e["type"].as_str().unwrap_or_default();
        crate::outcome::ensure(
            name == kind || (!name_required && name.is_empty()),
            "each event named by its type",
            || format!("event: {name:?} with data type {kind:?}"),
        )?;
    }
    Ok(())
}

/// Token counts of a reply, however the protocol names them.
pub(crate) struct Counts {
    pub prompt: u64,
    pub completion: u64,
    /// As the server reported it; `None` when the protocol has no total.
    pub total: Option<u64>,
    pub cached: Option<u64>,
    pub reasoning: Option<u64>,
}

/// Usage in OpenAI's shape (`prompt_tokens`, `completion_tokens`,
/// `total_tokens`, `prompt_tokens_details.cached_tokens`,
/// `completion_tokens_details.reasoning_tokens`), which the checks read.
pub(crate) fn usage(c: Counts) -> Value {
    let Counts {
        prompt,
        completion,
        total,
        cached,
        reasoning,
    } = c;
    let mut u = serde_json::json!({
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": total.unwrap_or(prompt + completion),
    });
    if let Some(c) = cached {
        u["prompt_tokens_details"] = serde_json::json!({"cached_tokens": c});
    }
    if let Some(r) = reasoning {
        u["completion_tokens_details"] = serde_json::json!({"reasoning_tokens": r});
    }
    u
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A streamed exchange of named events on `path`.
    fn stream(path: &str, events: &[Value]) -> Exchange {
        Exchange {
            path: path.into(),
            status: 200,
            streamed: true,
            chunks: events.to_vec(),
            events: events
                .iter()
                .map(|e| e["type"].as_str().unwrap_or_default().to_string())
                .collect(),
            ..Default::default()
        }
    }

    fn messages_events() -> Vec<Value> {
        vec![
            json!({"type": "message_start", "message": {"usage": {"input_tokens": 7, "output_tokens": 0}}}),
            json!({"type": "ping"}),
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hi"}}),
            json!({"type": "content_block_stop", "index": 0}),
            json!({"type": "content_block_start", "index": 1, "content_block": {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {}}}),
            json!({"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": "{\"a\":"}}),
            json!({"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": "1}"}}),
            json!({"type": "content_block_stop", "index": 1}),
            json!({"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": null}, "usage": {"output_tokens": 5}}),
            json!({"type": "message_stop"}),
        ]
    }

    #[test]
    fn a_messages_stream_is_read_and_checked() {
        let ex = stream("/v1/messages", &messages_events());
        assert_eq!(Dialect::of(&ex).stream_protocol(&ex), Ok(()));
        let r = Dialect::of(&ex).read(&ex);
        assert_eq!(r.content, "Hi");
        assert_eq!(r.tool_calls[0].arguments, "{\"a\":1}");
        assert_eq!(r.finish_reason.as_deref(), Some("tool_use"));
        assert_eq!(r.usage_field("total_tokens"), Some(12));
    }

    #[test]
    fn messages_stream_faults_are_caught() {
        // A delta after its block stopped.
        let mut late = messages_events();
        late.swap(3, 4);
        let ex = stream("/v1/messages", &late);
        assert!(Dialect::of(&ex).stream_protocol(&ex).is_err());
        // A text delta inside a tool_use block.
        let mut wrong = messages_events();
        wrong[6]["delta"] = json!({"type": "text_delta", "text": "x"});
        let ex = stream("/v1/messages", &wrong);
        assert!(Dialect::of(&ex).stream_protocol(&ex).is_err());
        // No message_stop.
        let mut cut = messages_events();
        cut.pop();
        let ex = stream("/v1/messages", &cut);
        assert!(Dialect::of(&ex).stream_protocol(&ex).is_err());
    }

    fn responses_events() -> Vec<Value> {
        let item = json!({"type": "message", "id": "m", "content": [{"type": "output_text", "text": "Hello"}]});
        let events = vec![
            json!({"type": "response.created", "response": {}}),
            json!({"type": "response.output_item.added", "output_index": 0, "item": {"type": "message", "id": "m", "content": []}}),
            json!({"type": "response.output_text.delta", "output_index": 0, "delta": "Hel"}),
            json!({"type": "response.output_text.delta", "output_index": 0, "delta": "lo"}),
            json!({"type": "response.output_item.done", "output_index": 0, "item": item}),
            json!({"type": "response.completed", "response": {"status": "completed", "output": [item],
                "usage": {"input_tokens": 3, "output_tokens": 2, "total_tokens": 5}}}),
        ];
        events
            .into_iter()
            .enumerate()
            .map(|(k, mut e)| {
                e["sequence_number"] = k.into();
                e
            })
            .collect()
    }

    #[test]
    fn a_responses_stream_is_read_and_checked() {
        let ex = stream("/v1/responses", &responses_events());
        assert_eq!(Dialect::of(&ex).stream_protocol(&ex), Ok(()));
        let r = Dialect::of(&ex).read(&ex);
        assert_eq!(r.content, "Hello");
        assert_eq!(r.finish_reason.as_deref(), Some("completed"));
        assert_eq!(r.usage_field("total_tokens"), Some(5));
    }

    #[test]
    fn responses_stream_faults_are_caught() {
        // A duplicated delta: the deltas no longer add up to the item.
        let mut doubled = responses_events();
        doubled.insert(3, doubled[2].clone());
        for (k, e) in doubled.iter_mut().enumerate() {
            e["sequence_number"] = k.into();
        }
        let ex = stream("/v1/responses", &doubled);
        assert!(Dialect::of(&ex).stream_protocol(&ex).is_err());
        // Numbers that do not rise.
        let mut numbers = responses_events();
        numbers[3]["sequence_number"] = 1.into();
        let ex = stream("/v1/responses", &numbers);
        assert!(Dialect::of(&ex).stream_protocol(&ex).is_err());
    }
}
