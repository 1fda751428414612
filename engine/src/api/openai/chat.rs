//! OpenAI chat completions and completions over the engine, independent
//! of any transport: request bytes in; a JSON body, or a stream of chunk
//! events, out.

use std::collections::VecDeque;

use serde_json::{json, Value};

use crate::api::context::{new_id, unix_now, ApiContext, ApiResponse, SseEvent};
use crate::api::error::{ApiError, Protocol};
use crate::api::openai::request::ChatRequest;
use crate::parsers::ParsedToolCall;
use crate::runtime::{EngineEvent, Prompt, RequestStream, TokenLogprob, ToolCallDelta, Usage};

impl ApiContext {
    /// `POST /v1/chat/completions`.
    pub async fn chat_completions(&self, body: &[u8]) -> Result<ApiResponse, ApiError> {
        let request = ChatRequest::from_json(body)?;
        self.check_model(request.model.as_deref())?;
        let generation = request.to_generation()?;
        let stream = self.engine.submit(&generation)?;
        self.respond(request, stream, Kind::Chat).await
    }

    /// `POST /v1/completions`: a plain-text prompt, no chat template.
    pub async fn completions(&self, body: &[u8]) -> Result<ApiResponse, ApiError> {
        let request = ChatRequest::from_json(body)?;
        let value: Value = serde_json::from_slice(body).unwrap_or_default();
        let prompt = match value.get("prompt") {
            Some(Value::String(p)) => p.clone(),
            Some(Value::Array(parts)) if parts.len() == 1 && parts[0].is_string() => {
                parts[0].as_str().unwrap_or_default().to_string()
            }
            _ => {
                return Err(ApiError::bad_request(
                    "prompt: a string is required",
                    Some("prompt".into()),
                ))
            }
        };
        self.check_model(request.model.as_deref())?;
        let generation = request.generation(Prompt::Text(prompt))?;
        let stream = self.engine.submit(&generation)?;
        self.respond(request, stream, Kind::Text).await
    }

    async fn respond(
        &self,
        request: ChatRequest,
        stream: RequestStream,
        kind: Kind,
    ) -> Result<ApiResponse, ApiError> {
        let grammar = stream.grammar;
        let chunks = ChunkStream {
            stream,
            kind,
            id: new_id(match kind {
                Kind::Chat => "chatcmpl-",
                Kind::Text => "cmpl-",
            }),
            call_ids: new_id("call_"),
            created: unix_now(),
            model: self.model().to_string(),
            fingerprint: self.fingerprint.clone(),
            include_usage: request
                .stream_options
                .as_ref()
                .is_some_and(|o| o.include_usage),
            logprobs: request.logprobs,
            sent_role: false,
            done: false,
            queued: VecDeque::new(),
        };
        if request.stream {
            let events = futures_util::stream::unfold(Some(chunks), |chunks| async move {
                let mut chunks = chunks?;
                match chunks.next().await {
                    Some(chunk) => Some((SseEvent::data(&chunk), Some(chunks))),
                    // The end marker of OpenAI streams.
                    None => Some((
                        SseEvent {
                            event: None,
                            data: "[DONE]".into(),
                        },
                        None,
                    )),
                }
            });
            Ok(ApiResponse::Stream {
                events: Box::pin(events),
                grammar,
            })
        } else {
            Ok(ApiResponse::Complete {
                body: chunks.collect().await?,
                grammar,
            })
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Chat,
    Text,
}

fn usage_json(u: &Usage) -> Value {
    json!({
        "prompt_tokens": u.prompt_tokens,
        "completion_tokens": u.completion_tokens,
        "total_tokens": u.prompt_tokens + u.completion_tokens,
        "prompt_tokens_details": {"cached_tokens": u.cached_tokens},
        "completion_tokens_details": {"reasoning_tokens": u.reasoning_tokens},
    })
}

/// A tool-call piece as it appears in a streamed `delta.tool_calls`; ids
/// are the response's prefix and the call's index.
fn tool_call_delta_json(d: &ToolCallDelta, call_ids: &str) -> Value {
    match &d.name {
        Some(name) => json!({
            "index": d.index,
            "id": format!("{call_ids}_{}", d.index),
            "type": "function",
            "function": {"name": name, "arguments": d.arguments},
        }),
        None => json!({"index": d.index, "function": {"arguments": d.arguments}}),
    }
}

/// A whole call as it appears in a response's `message.tool_calls`.
fn tool_call_json(index: usize, c: &ParsedToolCall, call_ids: &str) -> Value {
    json!({
        "id": format!("{call_ids}_{index}"),
        "type": "function",
        "function": {"name": c.name, "arguments": c.arguments},
    })
}

fn logprobs_json(items: &[TokenLogprob]) -> Value {
    json!({"content": items})
}

/// The assistant message of a whole response. `content` is null when the
/// turn is only tool calls, as OpenAI sends it; `reasoning_content` and
/// `tool_calls` appear when there are some.
fn chat_message(
    content: String,
    reasoning: String,
    calls: &[ParsedToolCall],
    call_ids: &str,
) -> Value {
    let mut m = json!({"role": "assistant", "content": content});
    if calls.is_empty() {
        return with_reasoning(m, reasoning);
    }
    if m["content"] == "" {
        m["content"] = Value::Null;
    }
    m["tool_calls"] = calls
        .iter()
        .enumerate()
        .map(|(i, c)| tool_call_json(i, c, call_ids))
        .collect();
    with_reasoning(m, reasoning)
}

fn with_reasoning(mut m: Value, reasoning: String) -> Value {
    if !reasoning.is_empty() {
        m["reasoning_content"] = reasoning.into();
    }
    m
}

/// A request's output as OpenAI stream chunks (`chat.completion.chunk` or
/// `text_completion`), one per engine event; also folds into a whole body.
struct ChunkStream {
    stream: RequestStream,
    kind: Kind,
    id: String,
    /// Tool-call ids are this and the call's index.
    call_ids: String,
    created: u64,
    model: String,
    fingerprint: String,
    include_usage: bool,
    logprobs: bool,
    sent_role: bool,
    done: bool,
    /// Chunks built but not yet handed out (one engine event can make
    /// several: text, then each tool-call piece; the usage chunk).
    queued: VecDeque<Value>,
}

impl ChunkStream {
    /// The next chunk; `None` after the last one. An engine failure
    /// becomes an `{"error": ...}` chunk.
    async fn next(&mut self) -> Option<Value> {
        if let Some(chunk) = self.queued.pop_front() {
            return Some(chunk);
        }
        if self.done {
            return None;
        }
        if self.kind == Kind::Chat && !self.sent_role {
            self.sent_role = true;
            return Some(self.choice_chunk(
                json!({"role": "assistant", "content": ""}),
                None,
                None,
            ));
        }
        loop {
            match self.stream.next().await {
                Some(EngineEvent::Started { .. }) => continue,
                Some(EngineEvent::Delta {
                    text,
                    reasoning,
                    tool_calls,
                    logprobs,
                }) => {
                    let has_logprobs = !logprobs.is_empty();
                    let lp = self.logprobs.then(|| logprobs_json(&logprobs));
                    if self.kind == Kind::Text {
                        if text.is_empty() && !has_logprobs {
                            continue;
                        }
                        return Some(self.text_chunk(text, lp, None));
                    }
                    let mut delta = serde_json::Map::new();
                    if !text.is_empty() || (reasoning.is_empty() && has_logprobs) {
                        delta.insert("content".into(), text.into());
                    }
                    if !reasoning.is_empty() {
                        delta.insert("reasoning_content".into(), reasoning.into());
                    }
                    if !delta.is_empty() {
                        let chunk = self.choice_chunk(Value::Object(delta), lp, None);
                        self.queued.push_back(chunk);
                    }
                    // One chunk per call piece: a call's first delta (id,
                    // name, empty arguments) stays apart from its fragments.
                    for d in &tool_calls {
                        let chunk = self.choice_chunk(
                            json!({"tool_calls": [tool_call_delta_json(d, &self.call_ids)]}),
                            None,
                            None,
                        );
                        self.queued.push_back(chunk);
                    }
                    match self.queued.pop_front() {
                        Some(chunk) => return Some(chunk),
                        None => continue,
                    }
                }
                Some(EngineEvent::Finished {
                    finish_reason,
                    usage,
                }) => {
                    self.done = true;
                    if self.include_usage {
                        let chunk = self.chunk(Vec::new(), Some(usage));
                        self.queued.push_back(chunk);
                    }
                    return Some(self.text_chunk(
                        String::new(),
                        None,
                        Some(finish_reason.as_str()),
                    ));
                }
                Some(EngineEvent::Failed {
                    message,
                    client_error,
                }) => {
                    self.done = true;
                    return Some(ApiError::failure(message, client_error).body(Protocol::OpenAi));
                }
                None => {
                    self.done = true;
                    return Some(
                        ApiError::new(500, "server_error", "the engine stopped")
                            .body(Protocol::OpenAi),
                    );
                }
            }
        }
    }

    fn text_chunk(&self, text: String, logprobs: Option<Value>, finish: Option<&str>) -> Value {
        match self.kind {
            Kind::Chat => {
                let delta = if finish.is_some() && text.is_empty() { json!({}) } else { json!({"content": text}) };
                self.choice_chunk(delta, logprobs, finish)
            }
            Kind::Text => self.chunk(
                vec![json!({"index": 0, "text": text, "logprobs": logprobs, "finish_reason": finish})],
                None,
            ),
        }
    }

    fn choice_chunk(&self, delta: Value, logprobs: Option<Value>, finish: Option<&str>) -> Value {
        self.chunk(
            vec![
                json!({"index": 0, "delta": delta, "logprobs": logprobs, "finish_reason": finish}),
            ],
            None,
        )
    }

    fn chunk(&self, choices: Vec<Value>, usage: Option<Usage>) -> Value {
        let object = match self.kind {
            Kind::Chat => "chat.completion.chunk",
            Kind::Text => "text_completion",
        };
        let mut c = json!({
            "id": self.id,
            "object": object,
            "created": self.created,
            "model": self.model,
            "system_fingerprint": self.fingerprint,
            "choices": choices,
        });
        if let Some(u) = usage {
            c["usage"] = usage_json(&u);
        }
        c
    }

    /// Folds the whole output into one response body.
    async fn collect(self) -> Result<Value, ApiError> {
        let c = self.stream.collect().await.map_err(ApiError::from)?;
        let finish_reason = c.finish_reason.expect("a finished completion").as_str();
        let lp = self.logprobs.then(|| logprobs_json(&c.logprobs));
        let (object, choice) = match self.kind {
            Kind::Chat => (
                "chat.completion",
                json!({
                    "index": 0,
                    "message": chat_message(c.text, c.reasoning, &c.tool_calls, &self.call_ids),
                    "logprobs": lp,
                    "finish_reason": finish_reason,
                }),
            ),
            Kind::Text => (
                "text_completion",
                json!({
                    "index": 0,
                    "text": c.text,
                    "logprobs": lp,
                    "finish_reason": finish_reason,
                }),
            ),
        };
        Ok(json!({
            "id": self.id,
            "object": object,
            "created": self.created,
            "model": self.model,
            "system_fingerprint": self.fingerprint,
            "choices": [choice],
            "usage": usage_json(&c.usage),
        }))
    }
}
