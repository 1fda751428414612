//! OpenAI's Responses API over the engine: `POST /v1/responses`, whole or
//! streamed.
//!
//! The output is a list of items: a `reasoning` item (the model's
//! reasoning as `reasoning_text`), a `message` with one `output_text`
//! part, and a `function_call` item per call. A stream announces each item
//! (`response.output_item.added`), sends its text or arguments in deltas,
//! closes it (`...done`, `response.output_item.done`), and ends with
//! `response.completed` (or `response.incomplete` when `max_output_tokens`
//! ran out) carrying the whole response; every event has a
//! `sequence_number`.

mod request;

use serde_json::{json, Value};

use crate::api::context::{event_stream, ApiContext, ApiResponse, SseEvent};
use crate::api::error::ApiError;
use crate::api::event_queue::{Queue, Translate};
use crate::api::ids::{new_id, unix_now};
use crate::runtime::{EngineEvent, FinishReason, RequestStream, TokenLogprob, Usage};

use crate::api::thinking::seal_reasoning;

use request::{ResponsesRequest, ToolNames, PARAM_NAMES};

impl ApiContext {
    /// `POST /v1/responses`.
    pub async fn responses(&self, body: &[u8]) -> Result<ApiResponse, ApiError> {
        self.responses_inner(body)
            .await
            .map_err(|e| e.renaming(PARAM_NAMES))
    }

    async fn responses_inner(&self, body: &[u8]) -> Result<ApiResponse, ApiError> {
        let request = ResponsesRequest::from_json(body)?;
        self.check_model(request.model.as_deref())?;
        let generation = request.to_generation()?;
        let stream = self.engine.submit(&generation)?;
        let grammar = stream.grammar;
        let id = new_id("resp_");
        let echo = json!({
            "id": id,
            "object": "response",
            "created_at": unix_now(),
            "status": "in_progress",
            "completed_at": null,
            "error": null,
            "incomplete_details": null,
            "instructions": request.instructions,
            "max_output_tokens": request.max_output_tokens,
            "model": self.model(),
            "output": [],
            "parallel_tool_calls": generation.parallel_tool_calls,
            "previous_response_id": null,
            "reasoning": {"effort": null, "summary": null},
            "store": request.store.unwrap_or(false),
            "temperature": generation.sampling.temperature,
            "top_p": generation.sampling.top_p,
            "text": request.text.clone().unwrap_or_else(|| json!({"format": {"type": "text"}})),
            "tool_choice": request.tool_choice.clone().unwrap_or_else(|| json!("auto")),
            "tools": echoed_tools(request.tools.as_deref().unwrap_or_default()),
            "truncation": "disabled",
            "metadata": {},
        });
        let mut out = Output {
            response: echo,
            items: Vec::new(),
            call_ids: new_id("call_"),
            cut: false,
            names: request.tool_names(),
            seal_reasoning: request.include_reasoning(),
        };
        if request.stream {
            let events = ResponseEvents {
                out,
                stream,
                open: None,
                sequence: 0,
                queue: Queue::new(),
            };
            return Ok(ApiResponse::Stream {
                events: event_stream(events),
                grammar,
            });
        }
        let c = stream.collect().await.map_err(ApiError::from)?;
        if !c.reasoning.is_empty() {
            let k = out.push(Kind::Reasoning, None);
            out.items[k].text = c.reasoning;
        }
        if !c.text.is_empty() || c.tool_calls.is_empty() {
            let k = out.push(Kind::Message, None);
            out.items[k].text = c.text;
            out.items[k].logprobs = c.logprobs;
        }
        for call in &c.tool_calls {
            let k = out.push(Kind::FunctionCall, Some(call.name.clone()));
            out.items[k].text = call.arguments.clone();
        }
        let finish = c.finish_reason.expect("a finished completion");
        out.cut = finish == FinishReason::Length;
        Ok(ApiResponse::Complete {
            body: out.finished(finish, &c.usage),
            grammar,
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Reasoning,
    Message,
    FunctionCall,
}

/// One output item as it grows.
struct Item {
    kind: Kind,
    id: String,
    /// Function calls: the call's name.
    name: Option<String>,
    /// Reasoning or message text, or a call's arguments.
    text: String,
    logprobs: Vec<TokenLogprob>,
    /// Function calls: the call's index among the reply's calls.
    call_index: usize,
}

/// The response being built: its echo of the request and its items.
struct Output {
    response: Value,
    items: Vec<Item>,
    /// Function-call ids are this and the call's index.
    call_ids: String,
    /// The reply was cut by `max_output_tokens`.
    cut: bool,
    /// Namespaced tools' flat names: a call is reported in its namespace.
    names: ToolNames,
    /// Reasoning items carry `encrypted_content` (`include`).
    seal_reasoning: bool,
}

impl Output {
    fn push(&mut self, kind: Kind, name: Option<String>) -> usize {
        let prefix = match kind {
            Kind::Reasoning => "rs_",
            Kind::Message => "msg_",
            Kind::FunctionCall => "fc_",
        };
        let call_index = self
            .items
            .iter()
            .filter(|i| i.kind == Kind::FunctionCall)
            .count();
        self.items.push(Item {
            kind,
            id: new_id(prefix),
            name,
            text: String::new(),
            logprobs: Vec::new(),
            call_index,
        });
        self.items.len() - 1
    }

    /// Item `k` as JSON, `done` or still in progress (empty). Once done,
    /// the last item of a reply cut by `max_output_tokens` is
    /// `incomplete`, as the response is.
    fn item_json(&self, k: usize, done: bool) -> Value {
        let item = &self.items[k];
        let status = match done {
            false => "in_progress",
            true if self.cut && k + 1 == self.items.len() => "incomplete",
            true => "completed",
        };
        let text = if done { item.text.as_str() } else { "" };
        match item.kind {
            Kind::Reasoning => {
                let mut r = json!({
                    "type": "reasoning",
                    "id": item.id,
                    "summary": [],
                    "content": if done { json!([{"type": "reasoning_text", "text": text}]) } else { json!([]) },
                });
                if self.seal_reasoning && done {
                    r["encrypted_content"] = seal_reasoning(text).into();
                }
                r
            }
            Kind::Message => json!({
                "type": "message",
                "id": item.id,
                "status": status,
                "role": "assistant",
                "content": if done { json!([self.text_part(item)]) } else { json!([]) },
            }),
            Kind::FunctionCall => {
                let (namespace, name) = self.names.split(item.name.as_deref().unwrap_or_default());
                let mut call = json!({
                    "type": "function_call",
                    "id": item.id,
                    "call_id": format!("{}_{}", self.call_ids, item.call_index),
                    "name": name,
                    "arguments": text,
                    "status": status,
                });
                if let Some(ns) = namespace {
                    call["namespace"] = ns.into();
                }
                call
            }
        }
    }

    /// An `output_text` part; `logprobs` is always there (the schema
    /// requires it), empty unless asked for.
    fn text_part(&self, item: &Item) -> Value {
        json!({
            "type": "output_text",
            "text": item.text,
            "annotations": [],
            "logprobs": logprobs_json(&item.logprobs),
        })
    }

    /// The whole response at its end.
    fn finished(&self, finish: FinishReason, usage: &Usage) -> Value {
        let mut r = self.response.clone();
        r["output"] = (0..self.items.len())
            .map(|k| self.item_json(k, true))
            .collect();
        if finish == FinishReason::Length {
            r["status"] = "incomplete".into();
            r["incomplete_details"] = json!({"reason": "max_output_tokens"});
        } else {
            r["status"] = "completed".into();
            r["completed_at"] = unix_now().into();
        }
        r["usage"] = json!({
            "input_tokens": usage.prompt_tokens,
            "input_tokens_details": {"cached_tokens": usage.cached_tokens},
            "output_tokens": usage.completion_tokens,
            "output_tokens_details": {"reasoning_tokens": usage.reasoning_tokens},
            "total_tokens": usage.prompt_tokens + usage.completion_tokens,
        });
        r
    }
}

/// The request's tools as the response echoes them: `strict` said
/// (Responses' default is true) and `parameters` present, as the schema
/// requires.
fn echoed_tools(tools: &[Value]) -> Value {
    tools
        .iter()
        .map(|t| {
            let mut t = t.clone();
            if t["type"] == "function" {
                if t.get("strict").is_none_or(Value::is_null) {
                    t["strict"] = true.into();
                }
                if t.get("parameters").is_none() {
                    t["parameters"] = Value::Null;
                }
            }
            t
        })
        .collect()
}

fn logprobs_json(items: &[TokenLogprob]) -> Value {
    items
        .iter()
        .map(|t| {
            json!({
                "token": t.token,
                "logprob": t.logprob,
                "bytes": t.bytes,
                "top_logprobs": t.top_logprobs,
            })
        })
        .collect()
}

/// A streamed response's events, built from the engine's.
struct ResponseEvents {
    out: Output,
    stream: RequestStream,
    /// The item receiving deltas.
    open: Option<usize>,
    sequence: u64,
    queue: Queue<SseEvent>,
}

impl Translate for ResponseEvents {
    type Piece = SseEvent;

    fn ends(&mut self) -> (&mut Queue<SseEvent>, &mut RequestStream) {
        (&mut self.queue, &mut self.stream)
    }

    fn open(&mut self) {
        let r = self.out.response.clone();
        self.push(json!({"type": "response.created", "response": r}));
        self.push(json!({"type": "response.in_progress", "response": r}));
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
                if !reasoning.is_empty() {
                    let k = self.ensure_open(Kind::Reasoning);
                    self.out.items[k].text.push_str(&reasoning);
                    let id = self.out.items[k].id.clone();
                    self.push(json!({
                        "type": "response.reasoning_text.delta",
                        "item_id": id, "output_index": k, "content_index": 0,
                        "delta": reasoning,
                    }));
                }
                if !text.is_empty() {
                    let k = self.ensure_open(Kind::Message);
                    self.out.items[k].text.push_str(&text);
                    // Empty unless asked for: the engine sends none.
                    let lp = logprobs_json(&logprobs);
                    self.out.items[k].logprobs.extend(logprobs);
                    let id = self.out.items[k].id.clone();
                    self.push(json!({
                        "type": "response.output_text.delta",
                        "item_id": id, "output_index": k, "content_index": 0,
                        "delta": text, "logprobs": lp,
                    }));
                }
                for piece in tool_calls {
                    if let Some(name) = piece.name {
                        self.close();
                        let k = self.out.push(Kind::FunctionCall, Some(name));
                        self.open_item(k);
                    }
                    if let (Some(k), false) = (self.open, piece.arguments.is_empty()) {
                        self.out.items[k].text.push_str(&piece.arguments);
                        let id = self.out.items[k].id.clone();
                        self.push(json!({
                            "type": "response.function_call_arguments.delta",
                            "item_id": id, "output_index": k, "delta": piece.arguments,
                        }));
                    }
                }
            }
            EngineEvent::Finished {
                finish_reason,
                usage,
            } => {
                if self.out.items.is_empty() {
                    self.ensure_open(Kind::Message);
                }
                self.out.cut = finish_reason == FinishReason::Length;
                self.close();
                let response = self.out.finished(finish_reason, &usage);
                let kind = if finish_reason == FinishReason::Length {
                    "response.incomplete"
                } else {
                    "response.completed"
                };
                self.push(json!({"type": kind, "response": response}));
                self.queue.end();
            }
            EngineEvent::Failed { .. } => unreachable!("next_piece takes failures"),
        }
    }

    fn failed(&mut self, error: ApiError) {
        self.push(json!({
            "type": "error",
            "code": error.code,
            "message": error.message,
            "param": error.param,
        }));
    }
}

impl ResponseEvents {
    /// The open item if it is of `kind`, else a new one.
    fn ensure_open(&mut self, kind: Kind) -> usize {
        if let Some(k) = self.open {
            if self.out.items[k].kind == kind && kind != Kind::FunctionCall {
                return k;
            }
        }
        self.close();
        let k = self.out.push(kind, None);
        self.open_item(k);
        k
    }

    fn open_item(&mut self, k: usize) {
        let item = self.out.item_json(k, false);
        self.push(json!({"type": "response.output_item.added", "output_index": k, "item": item}));
        if self.out.items[k].kind == Kind::Message {
            let id = self.out.items[k].id.clone();
            self.push(json!({
                "type": "response.content_part.added",
                "item_id": id, "output_index": k, "content_index": 0,
                "part": {"type": "output_text", "text": "", "annotations": [], "logprobs": []},
            }));
        }
        self.open = Some(k);
    }

    fn close(&mut self) {
        let Some(k) = self.open.take() else {
            return;
        };
        let item = &self.out.items[k];
        let (id, text) = (item.id.clone(), item.text.clone());
        match item.kind {
            Kind::Reasoning => self.push(json!({
                "type": "response.reasoning_text.done",
                "item_id": id, "output_index": k, "content_index": 0, "text": text,
            })),
            Kind::Message => {
                let part = self.out.text_part(item);
                let logprobs = logprobs_json(&item.logprobs);
                self.push(json!({
                    "type": "response.output_text.done",
                    "item_id": id, "output_index": k, "content_index": 0, "text": text,
                    "logprobs": logprobs,
                }));
                self.push(json!({
                    "type": "response.content_part.done",
                    "item_id": id, "output_index": k, "content_index": 0, "part": part,
                }));
            }
            Kind::FunctionCall => {
                let flat = item.name.clone().unwrap_or_default();
                let name = self.out.names.split(&flat).1.to_string();
                self.push(json!({
                    "type": "response.function_call_arguments.done",
                    "item_id": id, "output_index": k, "name": name, "arguments": text,
                }));
            }
        }
        let item = self.out.item_json(k, true);
        self.push(json!({"type": "response.output_item.done", "output_index": k, "item": item}));
    }

    /// Queues an event, numbered, named by its type.
    fn push(&mut self, mut data: Value) {
        data["sequence_number"] = self.sequence.into();
        self.sequence += 1;
        let name = data["type"].as_str().unwrap_or("message").to_string();
        self.queue.push(SseEvent::named(&name, &data));
    }
}
