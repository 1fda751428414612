//! OpenAI chat completions and completions over the engine, independent
//! of any transport: request bytes in; a JSON body, or a stream of chunk
//! events, out. A request of several choices (`n`, or several completion
//! prompts) runs one engine sequence per choice; they share the prompt's
//! prefix through the prefix cache, and their chunks interleave in one
//! stream, each with its choice's `index`.

use futures_util::{future::join_all, stream::select_all, Stream, StreamExt};
use serde_json::{json, Value};

use crate::api::context::{ApiContext, ApiResponse, SseEvent};
use crate::api::error::{ApiError, Protocol};
use crate::api::event_queue::{next_piece, Queue, Translate};
use crate::api::ids::{new_id, unix_now};
use crate::api::openai::request::{ChatRequest, CompletionRequest, LogprobsField, MAX_CHOICES};
use crate::parsers::ParsedToolCall;
use crate::runtime::{
    EngineEvent, GenerationRequest, Priority, Prompt, RequestStream, TokenLogprob, ToolCallDelta,
    Usage,
};

impl ApiContext {
    /// `POST /v1/chat/completions`.
    pub async fn chat_completions(&self, body: &[u8]) -> Result<ApiResponse, ApiError> {
        self.chat_completions_as(body, Priority::Interactive).await
    }

    /// A chat completion whose engine sequences run at `priority`: the
    /// Batch API runs its lines through here, so a line is read and
    /// answered exactly as the same body posted interactively.
    pub async fn chat_completions_as(
        &self,
        body: &[u8],
        priority: Priority,
    ) -> Result<ApiResponse, ApiError> {
        let request = ChatRequest::from_json(body)?;
        self.check_model(request.model.as_deref())?;
        let generation = request.to_generation()?;
        let choices = self.submit_choices(vec![generation], request.choices()?, priority)?;
        let logprobs = matches!(request.logprobs, Some(LogprobsField::Flag(true)))
            .then_some(LogprobsShape::Chat);
        self.respond(&request, choices, Kind::Chat, logprobs).await
    }

    /// `POST /v1/completions`: plain-text or token-id prompts, no chat
    /// template; `logprobs` in the legacy shape; `echo` puts the prompt
    /// before the completion.
    pub async fn completions(&self, body: &[u8]) -> Result<ApiResponse, ApiError> {
        self.completions_as(body, Priority::Interactive).await
    }

    /// A completion at `priority` (see [`ApiContext::chat_completions_as`]).
    pub async fn completions_as(
        &self,
        body: &[u8],
        priority: Priority,
    ) -> Result<ApiResponse, ApiError> {
        let request = CompletionRequest::from_json(body)?;
        self.check_model(request.settings.model.as_deref())?;
        let prompts = request.prompts()?;
        let n = request.choices()?;
        if prompts.len() * n > MAX_CHOICES {
            return Err(ApiError::invalid_param(
                "n",
                format!("prompts times n must be at most {MAX_CHOICES}"),
            ));
        }
        let logprobs = request.logprobs();
        if request.echo && logprobs.is_some() {
            return Err(ApiError::invalid_param(
                "echo",
                "echo with logprobs needs the prompt's logprobs, which this server does not compute",
            ));
        }
        let echoes = prompts
            .iter()
            .map(|p| match p {
                Prompt::Text(t) if request.echo => Ok(Some(t.clone())),
                Prompt::Tokens(ids) if request.echo => {
                    self.engine.text().tokenizer.decode(ids).map(Some)
                }
                _ => Ok(None),
            })
            .collect::<crate::error::Result<Vec<_>>>()?;
        let generations = prompts
            .into_iter()
            .map(|p| request.settings.generation(p, logprobs))
            .collect::<Result<Vec<_>, _>>()?;
        let mut choices = self.submit_choices(generations, n, priority)?;
        for c in &mut choices {
            c.echo = echoes[c.index / n].clone();
        }
        let shape = logprobs.map(|_| LogprobsShape::Legacy);
        self.respond(&request.settings, choices, Kind::Text, shape)
            .await
    }

    /// `n` sequences per request, in choice order; a sampled choice after
    /// the first gets its own seed (seed + i), or all would be one sample.
    fn submit_choices(
        &self,
        generations: Vec<GenerationRequest>,
        n: usize,
        priority: Priority,
    ) -> Result<Vec<Choice>, ApiError> {
        let mut choices = Vec::with_capacity(generations.len() * n);
        for g in generations {
            for i in 0..n {
                let mut g = g.clone();
                g.priority = priority;
                g.sampling.seed = g.sampling.seed.map(|s| s.wrapping_add(i as u64));
                choices.push(Choice {
                    index: choices.len(),
                    counts_prompt: i == 0,
                    stream: self.engine.submit(&g)?,
                    echo: None,
                });
            }
        }
        Ok(choices)
    }

    async fn respond(
        &self,
        request: &ChatRequest,
        choices: Vec<Choice>,
        kind: Kind,
        logprobs: Option<LogprobsShape>,
    ) -> Result<ApiResponse, ApiError> {
        let grammar = choices[0].stream.grammar;
        let envelope = Envelope {
            kind,
            id: new_id(match kind {
                Kind::Chat => "chatcmpl-",
                Kind::Text => "cmpl-",
            }),
            created: unix_now(),
            model: self.model().to_string(),
            fingerprint: self.fingerprint.clone(),
        };
        let streams: Vec<ChunkStream> = choices
            .into_iter()
            .map(|c| ChunkStream::new(c, envelope.clone(), logprobs))
            .collect();
        if request.stream {
            let include_usage = request
                .stream_options
                .as_ref()
                .is_some_and(|o| o.include_usage);
            Ok(ApiResponse::Stream {
                events: Box::pin(merged(streams, envelope, include_usage)),
                grammar,
            })
        } else {
            Ok(ApiResponse::Complete {
                body: collect(streams, envelope).await?,
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

/// How logprobs are written: chat's `{"content": [...]}`, or completions'
/// legacy `tokens` / `token_logprobs` / `top_logprobs` / `text_offset`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LogprobsShape {
    Chat,
    Legacy,
}

/// One choice's engine sequence.
struct Choice {
    index: usize,
    /// The first choice of its prompt: its prompt counts in the usage.
    counts_prompt: bool,
    stream: RequestStream,
    /// Completions' `echo`: the prompt's text, before the completion.
    echo: Option<String>,
}

/// What every chunk and the whole body of one response share.
#[derive(Debug, Clone)]
struct Envelope {
    kind: Kind,
    id: String,
    created: u64,
    model: String,
    fingerprint: String,
}

impl Envelope {
    fn chunk(&self, choices: Vec<Value>, usage: Option<Value>) -> Value {
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
            c["usage"] = u;
        }
        c
    }
}

/// The usage of a response: each prompt once, every choice's output.
#[derive(Default)]
struct UsageSum(Usage);

impl UsageSum {
    fn add(&mut self, u: &Usage, counts_prompt: bool) {
        if counts_prompt {
            self.0.prompt_tokens += u.prompt_tokens;
            self.0.cached_tokens += u.cached_tokens;
        }
        self.0.completion_tokens += u.completion_tokens;
        self.0.reasoning_tokens += u.reasoning_tokens;
    }

    fn json(&self) -> Value {
        let u = &self.0;
        json!({
            "prompt_tokens": u.prompt_tokens,
            "completion_tokens": u.completion_tokens,
            "total_tokens": u.prompt_tokens + u.completion_tokens,
            "prompt_tokens_details": {"cached_tokens": u.cached_tokens},
            "completion_tokens_details": {"reasoning_tokens": u.reasoning_tokens},
        })
    }
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

/// The assistant message of a whole response. `content` is null when the
/// turn is only tool calls, as OpenAI sends it; `refusal` is always there
/// (null: the model never refuses by protocol); `reasoning_content` and
/// `tool_calls` appear when there are some.
fn chat_message(
    content: String,
    reasoning: String,
    calls: &[ParsedToolCall],
    call_ids: &str,
) -> Value {
    let mut m = json!({"role": "assistant", "content": content, "refusal": null});
    if !calls.is_empty() {
        if m["content"] == "" {
            m["content"] = Value::Null;
        }
        m["tool_calls"] = calls
            .iter()
            .enumerate()
            .map(|(i, c)| tool_call_json(i, c, call_ids))
            .collect();
    }
    if !reasoning.is_empty() {
        m["reasoning_content"] = reasoning.into();
    }
    m
}

/// Logprobs of some tokens in the request's shape; legacy offsets
/// continue from `offset`, the characters written before them.
fn logprobs_json(
    shape: Option<LogprobsShape>,
    items: &[TokenLogprob],
    offset: &mut usize,
) -> Option<Value> {
    match shape? {
        LogprobsShape::Chat => Some(json!({"content": items, "refusal": null})),
        LogprobsShape::Legacy => {
            let mut offsets = Vec::with_capacity(items.len());
            for t in items {
                offsets.push(*offset);
                *offset += t.token.chars().count();
            }
            let top: Vec<serde_json::Map<String, Value>> = items
                .iter()
                .map(|t| {
                    t.top_logprobs
                        .iter()
                        .map(|a| (a.token.clone(), json!(a.logprob)))
                        .collect()
                })
                .collect();
            Some(json!({
                "tokens": items.iter().map(|t| t.token.as_str()).collect::<Vec<_>>(),
                "token_logprobs": items.iter().map(|t| t.logprob).collect::<Vec<_>>(),
                "top_logprobs": top,
                "text_offset": offsets,
            }))
        }
    }
}

/// One stream item: a chunk to send, or the choice's usage at its end.
enum Piece {
    Chunk(Value),
    Usage(Usage, bool),
}

/// One choice's output as OpenAI stream chunks (`chat.completion.chunk`
/// or `text_completion`), one per engine event; also folds into a whole
/// choice.
struct ChunkStream {
    choice: Choice,
    envelope: Envelope,
    /// Tool-call ids are this and the call's index.
    call_ids: String,
    logprobs: Option<LogprobsShape>,
    /// Characters written so far (legacy `text_offset`).
    offset: usize,
    queue: Queue<Piece>,
}

impl ChunkStream {
    fn new(choice: Choice, envelope: Envelope, logprobs: Option<LogprobsShape>) -> Self {
        ChunkStream {
            choice,
            envelope,
            call_ids: new_id("call_"),
            logprobs,
            offset: 0,
            queue: Queue::new(),
        }
    }

    /// The next piece; `None` after the last one. An engine failure
    /// becomes an `{"error": ...}` chunk.
    async fn next(&mut self) -> Option<Piece> {
        next_piece(self).await
    }

    fn text_chunk(&self, text: String, logprobs: Option<Value>, finish: Option<&str>) -> Value {
        match self.envelope.kind {
            Kind::Chat => {
                let delta = if finish.is_some() && text.is_empty() {
                    json!({})
                } else {
                    json!({"content": text})
                };
                self.choice_chunk(delta, logprobs, finish)
            }
            Kind::Text => self.envelope.chunk(
                vec![json!({"index": self.choice.index, "text": text,
                    "logprobs": logprobs, "finish_reason": finish})],
                None,
            ),
        }
    }

    fn choice_chunk(&self, delta: Value, logprobs: Option<Value>, finish: Option<&str>) -> Value {
        self.envelope.chunk(
            vec![json!({"index": self.choice.index, "delta": delta,
                "logprobs": logprobs, "finish_reason": finish})],
            None,
        )
    }

    /// Folds the whole output into one choice and its usage.
    async fn collect(self) -> Result<(Value, Usage, bool), ApiError> {
        let ChunkStream {
            choice,
            envelope,
            call_ids,
            logprobs,
            ..
        } = self;
        let c = choice.stream.collect().await.map_err(ApiError::from)?;
        let finish_reason = c.finish_reason.expect("a finished completion").as_str();
        let echo = choice.echo.unwrap_or_default();
        let lp = logprobs_json(logprobs, &c.logprobs, &mut echo.chars().count());
        let out = match envelope.kind {
            Kind::Chat => json!({
                "index": choice.index,
                "message": chat_message(c.text, c.reasoning, &c.tool_calls, &call_ids),
                "logprobs": lp,
                "finish_reason": finish_reason,
            }),
            Kind::Text => json!({
                "index": choice.index,
                "text": echo + &c.text,
                "logprobs": lp,
                "finish_reason": finish_reason,
            }),
        };
        Ok((out, c.usage, choice.counts_prompt))
    }
}

impl Translate for ChunkStream {
    type Piece = Piece;

    fn ends(&mut self) -> (&mut Queue<Piece>, &mut RequestStream) {
        (&mut self.queue, &mut self.choice.stream)
    }

    /// Chat opens with the assistant's role; a completion with its echo.
    fn open(&mut self) {
        match (self.envelope.kind, self.choice.echo.take()) {
            (Kind::Chat, _) => {
                let delta = json!({"role": "assistant", "content": ""});
                let chunk = self.choice_chunk(delta, None, None);
                self.queue.push(Piece::Chunk(chunk));
            }
            (Kind::Text, Some(echo)) => {
                self.offset = echo.chars().count();
                let chunk = self.text_chunk(echo, None, None);
                self.queue.push(Piece::Chunk(chunk));
            }
            (Kind::Text, None) => {}
        }
    }

    fn translate(&mut self, event: EngineEvent) {
        match event {
            EngineEvent::Started { .. } => {}
            EngineEvent::Delta {
                text,
                reasoning,
                tool_calls,
                logprobs,
            } => {
                let has_logprobs = !logprobs.is_empty();
                let lp = logprobs_json(self.logprobs, &logprobs, &mut self.offset);
                if self.envelope.kind == Kind::Text {
                    if !text.is_empty() || has_logprobs {
                        let chunk = self.text_chunk(text, lp, None);
                        self.queue.push(Piece::Chunk(chunk));
                    }
                    return;
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
                    self.queue.push(Piece::Chunk(chunk));
                }
                // One chunk per call piece: a call's first delta (id,
                // name, empty arguments) stays apart from its fragments.
                for d in &tool_calls {
                    let chunk = self.choice_chunk(
                        json!({"tool_calls": [tool_call_delta_json(d, &self.call_ids)]}),
                        None,
                        None,
                    );
                    self.queue.push(Piece::Chunk(chunk));
                }
            }
            EngineEvent::Finished {
                finish_reason,
                usage,
            } => {
                let last = self.text_chunk(String::new(), None, Some(finish_reason.as_str()));
                self.queue.push(Piece::Chunk(last));
                self.queue
                    .push(Piece::Usage(usage, self.choice.counts_prompt));
                self.queue.end();
            }
            EngineEvent::Failed { .. } => unreachable!("next_piece takes failures"),
        }
    }

    fn failed(&mut self, error: ApiError) {
        self.queue.push(Piece::Chunk(error.body(Protocol::OpenAi)));
    }
}

/// Every choice's chunks as they come, then the usage chunk (when asked)
/// and `[DONE]`.
fn merged(
    streams: Vec<ChunkStream>,
    envelope: Envelope,
    include_usage: bool,
) -> impl Stream<Item = SseEvent> + Send {
    let pieces = select_all(streams.into_iter().map(|s| {
        Box::pin(futures_util::stream::unfold(s, |mut s| async move {
            s.next().await.map(|p| (p, s))
        }))
    }));
    let state = (pieces, UsageSum::default(), Phase::Choices);
    futures_util::stream::unfold(state, move |(mut pieces, mut usage, phase)| {
        let envelope = envelope.clone();
        async move {
            match phase {
                Phase::Choices => loop {
                    match pieces.next().await {
                        Some(Piece::Chunk(c)) => {
                            return Some((SseEvent::data(&c), (pieces, usage, Phase::Choices)))
                        }
                        Some(Piece::Usage(u, counts_prompt)) => usage.add(&u, counts_prompt),
                        // The usage is whole once every choice has ended.
                        None if include_usage => {
                            let chunk = envelope.chunk(Vec::new(), Some(usage.json()));
                            return Some((SseEvent::data(&chunk), (pieces, usage, Phase::Done)));
                        }
                        None => return Some((done_event(), (pieces, usage, Phase::Over))),
                    }
                },
                Phase::Done => Some((done_event(), (pieces, usage, Phase::Over))),
                Phase::Over => None,
            }
        }
    })
}

#[derive(Debug, Clone, Copy)]
enum Phase {
    Choices,
    Done,
    Over,
}

/// The end marker of OpenAI streams.
fn done_event() -> SseEvent {
    SseEvent {
        event: None,
        data: "[DONE]".into(),
    }
}

/// Every choice folded, in index order, into one response body.
async fn collect(streams: Vec<ChunkStream>, envelope: Envelope) -> Result<Value, ApiError> {
    let mut usage = UsageSum::default();
    let mut choices = Vec::with_capacity(streams.len());
    for folded in join_all(streams.into_iter().map(ChunkStream::collect)).await {
        let (choice, u, counts_prompt) = folded?;
        usage.add(&u, counts_prompt);
        choices.push(choice);
    }
    let mut body = envelope.chunk(choices, Some(usage.json()));
    body["object"] = match envelope.kind {
        Kind::Chat => "chat.completion",
        Kind::Text => "text_completion",
    }
    .into();
    Ok(body)
}
