//! The wire shapes of a mock's replies in the four protocols it serves:
//! the events of a stream, each marked with the token it carries (so the
//! schedule knows when it is due), and the whole reply of a request that
//! did not stream.

use serde_json::{json, Value};

use crate::protocol::endpoint::Endpoint;

/// One SSE event and the token it is due with: an event carrying token k
/// is due when token k is; bookkeeping before the first token goes with
/// it, and after the last with the last.
pub struct Frame {
    pub text: String,
    /// The token this event carries, if it carries one.
    pub token: Option<usize>,
    /// The token whose time it is sent at.
    pub due_with: usize,
}

/// A stream's events as they are built.
#[derive(Default)]
struct Frames(Vec<Frame>);

impl Frames {
    /// One SSE event (`event: NAME` when named) carrying `v`.
    fn push(&mut self, v: Value, name: Option<&str>, token: Option<usize>, due_with: usize) {
        let text = match name {
            Some(n) => format!("event: {n}\ndata: {v}\n\n"),
            None => format!("data: {v}\n\n"),
        };
        self.0.push(Frame {
            text,
            token,
            due_with,
        });
    }
}

/// What the mock answers, before it is framed in the endpoint's shape.
pub struct MockReply<'a> {
    pub endpoint: Endpoint,
    pub id: &'a str,
    pub model: &'a str,
    pub pieces: &'a [String],
    pub prompt_tokens: usize,
    /// It stopped at its token budget.
    pub cut: bool,
    /// Chat and completions: a final usage chunk was asked for.
    pub include_usage: bool,
}

impl MockReply<'_> {
    fn text(&self) -> String {
        self.pieces.concat()
    }

    fn usage_openai(&self) -> Value {
        let n = self.pieces.len();
        json!({"prompt_tokens": self.prompt_tokens, "completion_tokens": n,
               "total_tokens": self.prompt_tokens + n})
    }

    fn usage_io(&self) -> Value {
        let n = self.pieces.len();
        json!({"input_tokens": self.prompt_tokens, "output_tokens": n,
               "total_tokens": self.prompt_tokens + n})
    }

    /// The events of its stream, in order: its protocol's shape.
    pub fn frames(&self) -> Vec<Frame> {
        let mut out = Frames::default();
        match self.endpoint {
            Endpoint::Chat | Endpoint::Completions => self.openai_frames(&mut out),
            Endpoint::Messages => self.messages_frames(&mut out),
            Endpoint::Responses => self.responses_frames(&mut out),
        }
        out.0
    }

    /// The last token's index: the events after the tokens go with it.
    fn last(&self) -> usize {
        self.pieces.len().saturating_sub(1)
    }

    /// Chat or completions chunks, a final usage chunk if asked, `[DONE]`.
    fn openai_frames(&self, out: &mut Frames) {
        let last = self.last();
        let chat = self.endpoint == Endpoint::Chat;
        let object = if chat {
            "chat.completion.chunk"
        } else {
            "text_completion"
        };
        let finish = if self.cut { "length" } else { "stop" };
        let choice = |piece: Option<&str>, k: usize, finish: Option<&str>| {
            if chat {
                let mut delta = json!({});
                if k == 0 {
                    delta["role"] = "assistant".into();
                }
                if let Some(p) = piece {
                    delta["content"] = p.into();
                }
                json!({"index": 0, "delta": delta, "finish_reason": finish})
            } else {
                json!({"index": 0, "text": piece.unwrap_or(""), "logprobs": null,
                       "finish_reason": finish})
            }
        };
        let chunk = |choices: Value| {
            json!({"id": self.id, "object": object, "created": 0, "model": self.model,
                   "choices": choices})
        };
        if self.pieces.is_empty() {
            out.push(chunk(json!([choice(None, 0, None)])), None, None, 0);
        }
        for (k, p) in self.pieces.iter().enumerate() {
            out.push(chunk(json!([choice(Some(p), k, None)])), None, Some(k), k);
        }
        out.push(
            chunk(json!([choice(None, self.pieces.len(), Some(finish))])),
            None,
            None,
            last,
        );
        if self.include_usage {
            let mut u = chunk(json!([]));
            u["usage"] = self.usage_openai();
            out.push(u, None, None, last);
        }
        out.0.push(Frame {
            text: "data: [DONE]\n\n".into(),
            token: None,
            due_with: last,
        });
    }

    /// Anthropic's named events: message and block start, a text delta
    /// per token, block stop, the message delta with its usage, stop.
    fn messages_frames(&self, out: &mut Frames) {
        let last = self.last();
        let stop = if self.cut { "max_tokens" } else { "end_turn" };
        let mut named = |v: Value, token: Option<usize>, due_with: usize| {
            let name = v["type"].as_str().unwrap_or_default().to_string();
            out.push(v, Some(&name), token, due_with);
        };
        named(
            json!({"type": "message_start", "message": {"id": self.id, "type": "message",
                "role": "assistant", "content": [], "model": self.model,
                "stop_reason": null, "stop_sequence": null,
                "usage": {"input_tokens": self.prompt_tokens, "output_tokens": 0}}}),
            None,
            0,
        );
        named(
            json!({"type": "content_block_start", "index": 0,
                   "content_block": {"type": "text", "text": ""}}),
            None,
            0,
        );
        for (k, p) in self.pieces.iter().enumerate() {
            named(
                json!({"type": "content_block_delta", "index": 0,
                       "delta": {"type": "text_delta", "text": p}}),
                Some(k),
                k,
            );
        }
        named(
            json!({"type": "content_block_stop", "index": 0}),
            None,
            last,
        );
        named(
            json!({"type": "message_delta",
                   "delta": {"stop_reason": stop, "stop_sequence": null},
                   "usage": {"output_tokens": self.pieces.len()}}),
            None,
            last,
        );
        named(json!({"type": "message_stop"}), None, last);
    }

    /// Responses' numbered events: created, the message item and its text
    /// part added, a delta per token, each done, then completed (or
    /// incomplete at the token budget).
    fn responses_frames(&self, out: &mut Frames) {
        let last = self.last();
        let item_id = format!("msg_{}", self.id);
        let mut seq = 0u64;
        let mut event = |mut v: Value, token: Option<usize>, due_with: usize| {
            v["sequence_number"] = seq.into();
            seq += 1;
            let name = v["type"].as_str().unwrap_or_default().to_string();
            out.push(v, Some(&name), token, due_with);
        };
        let response = |status: &str, output: Value, usage: Value| {
            let mut r = json!({"id": self.id, "object": "response", "created_at": 0,
                "status": status, "model": self.model, "output": output,
                "usage": usage});
            if status == "incomplete" {
                r["incomplete_details"] = json!({"reason": "max_output_tokens"});
            }
            r
        };
        let item = |status: &str, text: &str| {
            json!({"id": item_id, "type": "message", "role": "assistant",
                   "status": status,
                   "content": [{"type": "output_text", "text": text, "annotations": []}]})
        };
        event(
            json!({"type": "response.created",
                   "response": response("in_progress", json!([]), Value::Null)}),
            None,
            0,
        );
        let mut added = item("in_progress", "");
        added["content"] = json!([]);
        event(
            json!({"type": "response.output_item.added", "output_index": 0, "item": added}),
            None,
            0,
        );
        event(
            json!({"type": "response.content_part.added", "item_id": item_id,
                   "output_index": 0, "content_index": 0,
                   "part": {"type": "output_text", "text": "", "annotations": []}}),
            None,
            0,
        );
        for (k, p) in self.pieces.iter().enumerate() {
            event(
                json!({"type": "response.output_text.delta", "item_id": item_id,
                       "output_index": 0, "content_index": 0, "delta": p}),
                Some(k),
                k,
            );
        }
        let text = self.text();
        event(
            json!({"type": "response.output_text.done", "item_id": item_id,
                   "output_index": 0, "content_index": 0, "text": text}),
            None,
            last,
        );
        event(
            json!({"type": "response.content_part.done", "item_id": item_id,
                   "output_index": 0, "content_index": 0,
                   "part": {"type": "output_text", "text": text, "annotations": []}}),
            None,
            last,
        );
        event(
            json!({"type": "response.output_item.done", "output_index": 0,
                   "item": item("completed", &text)}),
            None,
            last,
        );
        let (kind, status) = if self.cut {
            ("response.incomplete", "incomplete")
        } else {
            ("response.completed", "completed")
        };
        event(
            json!({"type": kind, "response": response(status,
                json!([item("completed", &text)]), self.usage_io())}),
            None,
            last,
        );
    }

    /// The reply of a request that did not stream.
    pub fn whole(&self) -> Value {
        let text = self.text();
        match self.endpoint {
            Endpoint::Chat => json!({"id": self.id, "object": "chat.completion", "created": 0,
                "model": self.model, "choices": [{"index": 0,
                "message": {"role": "assistant", "content": text},
                "finish_reason": if self.cut { "length" } else { "stop" }}],
                "usage": self.usage_openai()}),
            Endpoint::Completions => json!({"id": self.id, "object": "text_completion",
                "created": 0, "model": self.model, "choices": [{"index": 0, "text": text,
                "logprobs": null, "finish_reason": if self.cut { "length" } else { "stop" }}],
                "usage": self.usage_openai()}),
            Endpoint::Messages => json!({"id": self.id, "type": "message", "role": "assistant",
                "model": self.model, "content": [{"type": "text", "text": text}],
                "stop_reason": if self.cut { "max_tokens" } else { "end_turn" },
                "stop_sequence": null,
                "usage": {"input_tokens": self.prompt_tokens, "output_tokens": self.pieces.len()}}),
            Endpoint::Responses => {
                let mut r = json!({"id": self.id, "object": "response", "created_at": 0,
                    "status": if self.cut { "incomplete" } else { "completed" },
                    "model": self.model, "output": [{"id": format!("msg_{}", self.id),
                    "type": "message", "role": "assistant", "status": "completed",
                    "content": [{"type": "output_text", "text": text, "annotations": []}]}],
                    "usage": self.usage_io()});
                if self.cut {
                    r["incomplete_details"] = json!({"reason": "max_output_tokens"});
                }
                r
            }
        }
    }
}
