//! The OpenAI wire protocol over the engine, independent of any transport:
//! request bytes in; a JSON body, or a stream of chunk JSON objects, out.
//!
//! The HTTP server wraps these functions, and the harness's in-process
//! target calls them directly, so both see the same bytes.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};

use crate::error::EngineError;
use crate::parsers::ParsedToolCall;
use crate::runtime::{
    ChatRequest, Engine, EngineEvent, GrammarMode, RequestStream, TokenLogprob, ToolCallDelta,
    Usage,
};

/// What a client sees on failure: an HTTP status and an OpenAI error body.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    pub status: u16,
    pub kind: &'static str,
    pub message: String,
    pub param: Option<String>,
    pub code: Option<String>,
}

impl ApiError {
    pub fn new(status: u16, kind: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            status,
            kind,
            message: message.into(),
            param: None,
            code: None,
        }
    }

    pub fn bad_request(message: impl Into<String>, param: Option<String>) -> Self {
        ApiError {
            param,
            ..ApiError::new(400, "invalid_request_error", message)
        }
    }

    /// `{"error": {"message", "type", "param", "code"}}`.
    pub fn body(&self) -> Value {
        json!({"error": {
            "message": self.message,
            "type": self.kind,
            "param": self.param,
            "code": self.code,
        }})
    }
}

impl From<EngineError> for ApiError {
    fn from(e: EngineError) -> Self {
        match e {
            EngineError::InvalidRequest { message, param } => ApiError::bad_request(message, param),
            EngineError::Template(m) => {
                ApiError::bad_request(format!("chat template: {m}"), Some("messages".into()))
            }
            other => ApiError::new(500, "server_error", other.to_string()),
        }
    }
}

/// The served model and the names clients may use for it.
pub struct ApiContext {
    pub engine: Engine,
    /// Accepted values of a request's `model` (the first is reported).
    pub model_ids: Vec<String>,
    pub fingerprint: String,
}

impl ApiContext {
    pub fn new(engine: Engine, requested_as: &str) -> Self {
        let mut model_ids = vec![requested_as.to_string()];
        if engine.model_name() != requested_as {
            model_ids.push(engine.model_name().to_string());
        }
        let fingerprint = format!("fp_afm_{}", env!("CARGO_PKG_VERSION").replace('.', "_"));
        ApiContext {
            engine,
            model_ids,
            fingerprint,
        }
    }

    /// `GET /v1/models`.
    pub fn models(&self) -> Value {
        json!({"object": "list", "data": [{
            "id": self.model_ids[0],
            "object": "model",
            "created": unix_now(),
            "owned_by": "afm",
        }]})
    }

    fn check_model(&self, request: &ChatRequest) -> Result<(), ApiError> {
        match &request.model {
            Some(m) if !m.is_empty() && !self.model_ids.contains(m) => Err(ApiError {
                code: Some("model_not_found".into()),
                param: Some("model".into()),
                ..ApiError::new(
                    404,
                    "invalid_request_error",
                    format!(
                        "the model '{m}' does not exist (this server has '{}')",
                        self.model_ids[0]
                    ),
                )
            }),
            _ => Ok(()),
        }
    }

    /// `POST /v1/chat/completions`.
    pub async fn chat_completions(&self, body: &[u8]) -> Result<ApiResponse, ApiError> {
        let request = parse_body(body)?;
        self.check_model(&request)?;
        let stream = self.engine.submit(&request)?;
        self.respond(request, stream, Kind::Chat).await
    }

    /// `POST /v1/completions`: a plain-text prompt, no chat template.
    pub async fn completions(&self, body: &[u8]) -> Result<ApiResponse, ApiError> {
        let value: Value = serde_json::from_slice(body)
            .map_err(|e| ApiError::bad_request(format!("invalid JSON body: {e}"), None))?;
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
        let mut value = value;
        if let Value::Object(map) = &mut value {
            map.remove("prompt");
            map.insert("messages".into(), json!([{"role": "user", "content": ""}]));
        }
        let request: ChatRequest = serde_json::from_value(value)
            .map_err(|e| ApiError::bad_request(format!("invalid request: {e}"), None))?;
        self.check_model(&request)?;
        let stream = self.engine.submit_prompt(&prompt, &request)?;
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
            id: new_id(kind),
            created: unix_now(),
            model: self.model_ids[0].clone(),
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
            Ok(ApiResponse::Stream { chunks, grammar })
        } else {
            Ok(ApiResponse::Complete {
                body: chunks.collect().await?,
                grammar,
            })
        }
    }
}

/// A successful response: a whole body, or SSE chunks.
pub enum ApiResponse {
    Complete {
        body: Value,
        grammar: GrammarMode,
    },
    Stream {
        chunks: ChunkStream,
        grammar: GrammarMode,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Chat,
    Text,
}

fn parse_body(body: &[u8]) -> Result<ChatRequest, ApiError> {
    let value: Value = serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("invalid JSON body: {e}"), None))?;
    if !value.is_object() {
        return Err(ApiError::bad_request(
            "the body must be a JSON object",
            None,
        ));
    }
    if value.get("messages").is_none() {
        return Err(ApiError::bad_request(
            "messages: this field is required",
            Some("messages".into()),
        ));
    }
    serde_json::from_value(value)
        .map_err(|e| ApiError::bad_request(format!("invalid request: {e}"), None))
}

fn failure(message: String, client_error: bool) -> ApiError {
    if client_error {
        ApiError::bad_request(message, None)
    } else {
        ApiError::new(500, "server_error", message)
    }
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

fn new_id(kind: Kind) -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let prefix = match kind {
        Kind::Chat => "chatcmpl",
        Kind::Text => "cmpl",
    };
    format!("{prefix}-{nanos:x}{n:04x}")
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

/// A tool-call piece as it appears in a streamed `delta.tool_calls`.
fn tool_call_delta_json(d: &ToolCallDelta) -> Value {
    match (&d.id, &d.name) {
        (Some(id), Some(name)) => json!({
            "index": d.index,
            "id": id,
            "type": "function",
            "function": {"name": name, "arguments": d.arguments},
        }),
        _ => json!({"index": d.index, "function": {"arguments": d.arguments}}),
    }
}

/// A whole call as it appears in a response's `message.tool_calls`.
fn tool_call_json(c: &ParsedToolCall) -> Value {
    json!({
        "id": c.id,
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
fn chat_message(content: String, reasoning: String, calls: &[ParsedToolCall]) -> Value {
    let mut m = json!({"role": "assistant", "content": content});
    if calls.is_empty() {
        return with_reasoning(m, reasoning);
    }
    if m["content"] == "" {
        m["content"] = Value::Null;
    }
    m["tool_calls"] = calls.iter().map(tool_call_json).collect();
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
pub struct ChunkStream {
    stream: RequestStream,
    kind: Kind,
    id: String,
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
    /// The next chunk; `None` after the last one (then a transport sends
    /// its end marker, `data: [DONE]` for SSE). An engine failure becomes
    /// an `{"error": ...}` chunk.
    pub async fn next(&mut self) -> Option<Value> {
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
                            json!({"tool_calls": [tool_call_delta_json(d)]}),
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
                    return Some(failure(message, client_error).body());
                }
                None => {
                    self.done = true;
                    return Some(ApiError::new(500, "server_error", "the engine stopped").body());
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
        let c = self
            .stream
            .collect()
            .await
            .map_err(|f| failure(f.message, f.client_error))?;
        let finish_reason = c.finish_reason.expect("a finished completion").as_str();
        let lp = self.logprobs.then(|| logprobs_json(&c.logprobs));
        let (object, choice) = match self.kind {
            Kind::Chat => (
                "chat.completion",
                json!({
                    "index": 0,
                    "message": chat_message(c.text, c.reasoning, &c.tool_calls),
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
