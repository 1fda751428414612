//! Anthropic's Messages API over the engine: `POST /v1/messages` (whole or
//! streamed) and `POST /v1/messages/count_tokens`.
//!
//! Reasoning becomes `thinking` blocks, content `text` blocks and calls
//! `tool_use` blocks, in that order; a stream opens and closes each block
//! with its own events, in Anthropic's order: `message_start`, `ping`,
//! `content_block_start` / `_delta` / `_stop` per block, `message_delta`
//! (stop reason, output tokens), `message_stop`.

mod request;

use serde_json::{json, Value};

use crate::api::context::{event_stream, ApiContext, ApiResponse, SseEvent};
use crate::api::error::{ApiError, Protocol};
use crate::api::event_queue::{Queue, Translate};
use crate::api::ids::new_id;
use crate::parsers::ParsedToolCall;
use crate::runtime::{EngineEvent, FinishReason, RequestStream, Usage};

use crate::api::thinking::seal_reasoning;

use request::{MessagesRequest, ThinkingDisplay};

impl ApiContext {
    /// `POST /v1/messages`.
    pub async fn messages(&self, body: &[u8]) -> Result<ApiResponse, ApiError> {
        let request = MessagesRequest::from_json(body)?;
        self.check_model(request.model.as_deref())?;
        let generation = request.to_generation(true)?;
        let stream = self
            .engine
            .submit(&generation)
            .map_err(|e| ApiError::from(e).renaming(request::PARAM_NAMES))?;
        let grammar = stream.grammar;
        let reply = Reply {
            id: new_id("msg_"),
            tool_ids: new_id("toolu_"),
            model: self.model().to_string(),
            stops: generation.stop,
            display: request.thinking_display(),
        };
        if request.stream {
            let events = MessageEvents {
                reply,
                stream,
                open: None,
                blocks: 0,
                announced: false,
                thinking: String::new(),
                queue: Queue::new(),
            };
            return Ok(ApiResponse::Stream {
                events: event_stream(events),
                grammar,
            });
        }
        let c = stream.collect().await.map_err(ApiError::from)?;
        let finish = c.finish_reason.expect("a finished completion");
        let mut content = Vec::new();
        if !c.reasoning.is_empty() {
            content.push(reply.thinking_block(&c.reasoning));
        }
        if !c.text.is_empty() || c.tool_calls.is_empty() {
            content.push(text_block(c.text));
        }
        for (i, call) in c.tool_calls.iter().enumerate() {
            content.push(reply.tool_use(i, call));
        }
        let mut body = reply.message(content, &c.usage);
        body["stop_reason"] = stop_reason(finish).into();
        body["stop_sequence"] = reply.stop_sequence(finish);
        body["usage"]["output_tokens"] = c.usage.completion_tokens.into();
        Ok(ApiResponse::Complete { body, grammar })
    }

    /// `POST /v1/messages/count_tokens`: the prompt's tokens, as the model
    /// would see them (template and tools included).
    pub async fn count_tokens(&self, body: &[u8]) -> Result<ApiResponse, ApiError> {
        let request = MessagesRequest::from_json(body)?;
        self.check_model(request.model.as_deref())?;
        let generation = request.to_generation(false)?;
        let tokens = self.engine.prompt_tokens(&generation)?;
        Ok(ApiResponse::Complete {
            body: json!({"input_tokens": tokens.len()}),
            grammar: crate::runtime::GrammarMode::None,
        })
    }
}

/// What every part of one reply shares.
struct Reply {
    id: String,
    /// `tool_use` ids are this and the call's index.
    tool_ids: String,
    model: String,
    stops: Vec<String>,
    /// Whether thinking blocks show their text.
    display: ThinkingDisplay,
}

impl Reply {
    /// The message object, before its stop reason is known.
    fn message(&self, content: Vec<Value>, usage: &Usage) -> Value {
        json!({
            "id": self.id,
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": content,
            "stop_reason": null,
            "stop_sequence": null,
            "stop_details": null,
            "container": null,
            "usage": usage_json(usage, 0),
        })
    }

    /// A whole thinking block: its text unless omitted, and the text sealed
    /// in its signature, so a client that sends the block back (as Claude
    /// Code does, shown or omitted) gives the model its reasoning again.
    fn thinking_block(&self, text: &str) -> Value {
        let shown = match self.display {
            ThinkingDisplay::Shown => text,
            ThinkingDisplay::Omitted => "",
        };
        json!({"type": "thinking", "thinking": shown, "signature": seal_reasoning(text)})
    }

    fn tool_use(&self, index: usize, call: &ParsedToolCall) -> Value {
        // The engine's parser gives a JSON object's text; anything else
        // goes through as a string so a client sees what was generated.
        let input = serde_json::from_str::<Value>(&call.arguments)
            .unwrap_or_else(|_| Value::String(call.arguments.clone()));
        json!({
            "type": "tool_use",
            "id": format!("{}_{index}", self.tool_ids),
            "name": call.name,
            "input": input,
            "caller": {"type": "direct"},
        })
    }

    fn stop_sequence(&self, finish: FinishReason) -> Value {
        match finish {
            FinishReason::StopSequence(k) => self.stops.get(k).cloned().into(),
            _ => Value::Null,
        }
    }
}

fn stop_reason(finish: FinishReason) -> &'static str {
    match finish {
        FinishReason::Stop => "end_turn",
        FinishReason::StopSequence(_) => "stop_sequence",
        FinishReason::Length => "max_tokens",
        FinishReason::ToolCalls => "tool_use",
    }
}

/// Anthropic counts uncached input apart from what was read from cache.
/// The fields of features this server has not (server tools, tiers, cache
/// writes by TTL) are null, as the schema allows.
fn usage_json(u: &Usage, output_tokens: usize) -> Value {
    json!({
        "input_tokens": u.prompt_tokens - u.cached_tokens.min(u.prompt_tokens),
        "cache_read_input_tokens": u.cached_tokens,
        "cache_creation_input_tokens": 0,
        "cache_creation": null,
        "output_tokens": output_tokens,
        "output_tokens_details": null,
        "server_tool_use": null,
        "service_tier": null,
        "inference_geo": null,
    })
}

/// A text block as it starts (streams) or ends (whole replies).
fn text_block(text: String) -> Value {
    json!({"type": "text", "text": text, "citations": null})
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Block {
    Thinking,
    Text,
    ToolUse,
}

/// A streamed reply's events, built from the engine's.
struct MessageEvents {
    reply: Reply,
    stream: RequestStream,
    /// The open content block.
    open: Option<Block>,
    /// Blocks opened so far (the next block's index).
    blocks: usize,
    /// `message_start` was sent.
    announced: bool,
    /// The open thinking block's text, sealed in its signature at its end.
    thinking: String,
    queue: Queue<SseEvent>,
}

impl Translate for MessageEvents {
    type Piece = SseEvent;

    fn ends(&mut self) -> (&mut Queue<SseEvent>, &mut RequestStream) {
        (&mut self.queue, &mut self.stream)
    }

    fn translate(&mut self, event: EngineEvent) {
        match event {
            EngineEvent::Started {
                prompt_tokens,
                cached_tokens,
            } => {
                let usage = Usage {
                    prompt_tokens,
                    cached_tokens,
                    ..Default::default()
                };
                self.start(&usage);
            }
            EngineEvent::Delta {
                text,
                reasoning,
                tool_calls,
                ..
            } => {
                if !reasoning.is_empty() {
                    self.ensure_open(Block::Thinking);
                    self.thinking.push_str(&reasoning);
                    if self.reply.display == ThinkingDisplay::Shown {
                        self.delta(json!({"type": "thinking_delta", "thinking": reasoning}));
                    }
                }
                if !text.is_empty() {
                    self.ensure_open(Block::Text);
                    self.delta(json!({"type": "text_delta", "text": text}));
                }
                for piece in tool_calls {
                    if let Some(name) = &piece.name {
                        self.close();
                        let block = json!({
                            "type": "tool_use",
                            "id": format!("{}_{}", self.reply.tool_ids, piece.index),
                            "name": name,
                            "input": {},
                            "caller": {"type": "direct"},
                        });
                        self.open_block(Block::ToolUse, block);
                    }
                    if !piece.arguments.is_empty() {
                        self.delta(json!({
                            "type": "input_json_delta",
                            "partial_json": piece.arguments,
                        }));
                    }
                }
            }
            EngineEvent::Finished {
                finish_reason,
                usage,
            } => {
                self.start(&usage);
                if self.blocks == 0 {
                    self.ensure_open(Block::Text);
                }
                self.close();
                self.push(
                    "message_delta",
                    json!({
                        "type": "message_delta",
                        "delta": {
                            "stop_reason": stop_reason(finish_reason),
                            "stop_sequence": self.reply.stop_sequence(finish_reason),
                            "stop_details": null,
                            "container": null,
                        },
                        "usage": usage_json(&usage, usage.completion_tokens),
                    }),
                );
                self.push("message_stop", json!({"type": "message_stop"}));
                self.queue.end();
            }
            EngineEvent::Failed { .. } => unreachable!("next_piece takes failures"),
        }
    }

    fn failed(&mut self, error: ApiError) {
        self.queue
            .push(SseEvent::named("error", &error.body(Protocol::Anthropic)));
    }
}

impl MessageEvents {
    /// `message_start` and a `ping`, once.
    fn start(&mut self, usage: &Usage) {
        if self.announced {
            return;
        }
        self.announced = true;
        let message = self.reply.message(Vec::new(), usage);
        self.push(
            "message_start",
            json!({"type": "message_start", "message": message}),
        );
        self.push("ping", json!({"type": "ping"}));
    }

    fn ensure_open(&mut self, kind: Block) {
        if self.open == Some(kind) && kind != Block::ToolUse {
            return;
        }
        self.close();
        let block = match kind {
            Block::Thinking => json!({"type": "thinking", "thinking": "", "signature": ""}),
            _ => text_block(String::new()),
        };
        self.open_block(kind, block);
    }

    fn open_block(&mut self, kind: Block, block: Value) {
        self.push(
            "content_block_start",
            json!({"type": "content_block_start", "index": self.blocks, "content_block": block}),
        );
        self.open = Some(kind);
        self.blocks += 1;
    }

    fn delta(&mut self, delta: Value) {
        self.push(
            "content_block_delta",
            json!({"type": "content_block_delta", "index": self.blocks - 1, "delta": delta}),
        );
    }

    fn close(&mut self) {
        if self.open == Some(Block::Thinking) {
            let signature = seal_reasoning(&std::mem::take(&mut self.thinking));
            self.delta(json!({"type": "signature_delta", "signature": signature}));
        }
        if self.open.take().is_some() {
            self.push(
                "content_block_stop",
                json!({"type": "content_block_stop", "index": self.blocks - 1}),
            );
        }
    }

    fn push(&mut self, name: &str, data: Value) {
        self.queue.push(SseEvent::named(name, &data));
    }
}
