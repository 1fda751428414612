//! The engine: one thread owns the model and its MLX state and runs the
//! scheduler; requests reach it over a channel and each gets its own stream
//! of events back. Nothing MLX crosses threads.
//!
//! The server and the harness's in-process target both go through
//! [`Engine::submit`], so they see the same behaviour.

use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use serde::Serialize;
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver};

use crate::chat_template::{ChatTemplate, TemplateInput};
use crate::eos::EosSet;
use crate::error::{EngineError, Result};
use crate::generate::FinishReason;
use crate::grammar::{constraint_of, Constraint, GrammarCompiler, GrammarMode, ReasoningPrefix};
use crate::loaded_model::LoadedModel;
use crate::model_source::ModelSource;
use crate::parsers::{OutputConfig, ParseStats, ParsedToolCall, ReasoningFormat, ToolCallFormat};
use crate::request::{ChatRequest, RequestLimits};
use crate::scheduler::{NewSequence, Scheduler};
use crate::tokenizer::TextTokenizer;
use crate::weights::WeightMode;

/// Engine-wide settings (the server's flags).
#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// Sequences decoded together at most (`--concurrent`).
    pub concurrent: usize,
    /// Reuse KV of cached prompt prefixes (`--enable-prefix-caching`).
    pub prefix_caching: bool,
    /// Memory budget of the prefix cache.
    pub prefix_cache_bytes: usize,
    /// Largest `top_logprobs` accepted (`--max-logprobs`).
    pub max_logprobs: usize,
    /// `max_tokens` when a request gives none (`--max-tokens`).
    pub default_max_tokens: usize,
    /// Prompt tokens prefilled per step over all sequences, so decoding
    /// streams keep moving while a long prompt is prefilled.
    pub prefill_chunk: usize,
    pub weight_mode: WeightMode,
    /// Enforce `response_format` and forced tool calls with llguidance
    /// (`--enable-grammar-constraints`); off, such requests are served
    /// unconstrained and marked downgraded.
    pub grammar_constraints: bool,
    /// Batch-invariant mode (`--deterministic`): a request's output is bit
    /// for bit the same alone, in any batch slot, chunked or cached.
    pub deterministic: bool,
    /// Tool-call format (`--tool-call-parser`); `None` detects it from
    /// the chat template.
    pub tool_call_parser: Option<ToolCallFormat>,
    /// Reasoning tokens a request may spend when it sets no
    /// `thinking_budget` (`--thinking-budget`).
    pub thinking_budget: Option<usize>,
    /// Jinja source replacing the model's chat template (`--chat-template`).
    pub chat_template: Option<String>,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            concurrent: 8,
            prefix_caching: false,
            prefix_cache_bytes: 1 << 30,
            max_logprobs: 20,
            default_max_tokens: 512,
            prefill_chunk: 256,
            weight_mode: WeightMode::for_platform(),
            grammar_constraints: false,
            deterministic: false,
            tool_call_parser: None,
            thinking_budget: None,
            chat_template: None,
        }
    }
}

/// What one request's stream reports.
#[derive(Debug, Clone, PartialEq)]
pub enum EngineEvent {
    /// Admitted; its prompt and the part of it served from the prefix cache.
    Started {
        prompt_tokens: usize,
        cached_tokens: usize,
    },
    /// New output (stop strings never included) and the logprobs of the
    /// tokens released with it, when asked for. Chat output is parsed:
    /// `text` is content only, reasoning and tool calls come apart; a
    /// plain-text prompt's output is all `text`.
    Delta {
        text: String,
        reasoning: String,
        tool_calls: Vec<ToolCallDelta>,
        logprobs: Vec<TokenLogprob>,
    },
    Finished {
        finish_reason: FinishReason,
        usage: Usage,
    },
    /// The request could not be completed. `client_error`: the request
    /// itself is at fault (e.g. its grammar allows no token), not the engine.
    Failed { message: String, client_error: bool },
}

/// A piece of a tool call in OpenAI's streaming shape: the first delta of
/// a call carries its id and name, later ones argument fragments.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ToolCallDelta {
    pub index: usize,
    pub id: Option<String>,
    pub name: Option<String>,
    pub arguments: String,
}

/// One generated token's logprob and the best alternatives.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TokenLogprob {
    pub token: String,
    pub logprob: f32,
    pub bytes: Vec<u8>,
    pub top_logprobs: Vec<TopLogprob>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TopLogprob {
    pub token: String,
    pub logprob: f32,
    pub bytes: Vec<u8>,
}

/// Token accounting of one request.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Usage {
    pub prompt_tokens: usize,
    pub completion_tokens: usize,
    /// Prompt tokens whose KV came from the prefix cache.
    pub cached_tokens: usize,
    /// Completion tokens spent inside reasoning.
    pub reasoning_tokens: usize,
}

/// Upper bounds of the batch-size histogram.
pub const BATCH_SIZE_BUCKETS: [usize; 7] = [1, 2, 4, 8, 16, 32, 64];

/// Counters over the engine's life (exported as metrics by the server).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct EngineStats {
    pub requests_admitted: u64,
    pub requests_finished: u64,
    pub requests_cancelled: u64,
    pub requests_failed: u64,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub cached_tokens: u64,
    pub reasoning_tokens: u64,
    /// What the output parsers found and repaired, summed over requests.
    pub output: ParseStats,
    /// Prompt tokens actually run through the model (prefill work done).
    pub prefill_computed_tokens: u64,
    pub cache_hits: u64,
    pub cache_misses: u64,
    pub steps: u64,
    /// Sum of sequences per step (mean batch = this / steps).
    pub batched_sequences: u64,
    /// Steps by batch size: `[i]` counts steps with at most
    /// `BATCH_SIZE_BUCKETS[i]` sequences (and more than the previous bound);
    /// the last slot counts larger batches.
    pub batch_size_steps: [u64; BATCH_SIZE_BUCKETS.len() + 1],
    pub running: usize,
    pub waiting: usize,
}

/// The model's text side, shared with callers' threads (tokenizer and
/// template are thread-safe; the weights stay on the engine thread).
pub struct ModelText {
    pub name: String,
    pub tokenizer: TextTokenizer,
    pub template: ChatTemplate,
    pub eos: EosSet,
    pub limits: RequestLimits,
    /// Compiles request constraints (always built, so schemas are checked
    /// even when constraints are not enforced).
    pub grammar: GrammarCompiler,
    /// How this model writes tool calls (flag, else from the template).
    pub tool_format: ToolCallFormat,
    /// How this model marks reasoning (from the template).
    pub reasoning: ReasoningFormat,
    /// The tokens the engine writes to end reasoning at the budget.
    pub forced_close: Vec<u32>,
    /// The end of reasoning as constrained grammars see it.
    pub reasoning_prefix: ReasoningPrefix,
}

pub(crate) enum Command {
    Submit(Box<NewSequence>),
    Shutdown,
}

/// A running engine. Dropping it stops the thread after cancelling requests.
pub struct Engine {
    commands: Sender<Command>,
    text: Arc<ModelText>,
    stats: Arc<Mutex<EngineStats>>,
    config: EngineConfig,
    thread: Option<JoinHandle<()>>,
}

impl Engine {
    /// Loads `--model` on a new engine thread and starts serving.
    pub fn start(model: &str, config: EngineConfig) -> Result<Self> {
        let source = ModelSource::resolve(model)?;
        let (commands, inbox) = mpsc::channel();
        let (ready_tx, ready_rx) = mpsc::sync_channel(1);
        let stats = Arc::new(Mutex::new(EngineStats::default()));
        let thread_stats = stats.clone();
        let thread_config = config.clone();
        let thread = std::thread::Builder::new()
            .name("afm-engine".into())
            .spawn(move || {
                let mut loaded = match LoadedModel::load_source(&source, thread_config.weight_mode)
                    .and_then(|mut l| {
                        if let Some(src) = &thread_config.chat_template {
                            l.template = l.template.replaced_by(src)?;
                        }
                        Ok(l)
                    }) {
                    Ok(l) => l,
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                        return;
                    }
                };
                loaded
                    .model
                    .set_batch_invariant(thread_config.deterministic);
                let limits = RequestLimits {
                    max_logprobs: thread_config.max_logprobs,
                    default_max_tokens: thread_config.default_max_tokens,
                    context_length: loaded.model.config().max_position_embeddings,
                    vocab_size: loaded.model.config().vocab_size,
                };
                let vocab = loaded.model.config().vocab_size;
                let grammar = match GrammarCompiler::new(&loaded.tokenizer, &loaded.eos, vocab) {
                    Ok(g) => g,
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                        return;
                    }
                };
                let template_source = loaded.template.source();
                let tool_format = thread_config
                    .tool_call_parser
                    .unwrap_or_else(|| ToolCallFormat::detect(template_source));
                let reasoning = ReasoningFormat::detect(template_source);
                let forced_close = match loaded.tokenizer.encode(reasoning.forced_close()) {
                    Ok(ids) => ids,
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                        return;
                    }
                };
                let text = Arc::new(ModelText {
                    reasoning_prefix: ReasoningPrefix::new(&loaded.tokenizer, reasoning.close()),
                    grammar,
                    tool_format,
                    reasoning,
                    forced_close,
                    name: loaded.name,
                    tokenizer: loaded.tokenizer,
                    template: loaded.template,
                    eos: loaded.eos,
                    limits,
                });
                let _ = ready_tx.send(Ok(text.clone()));
                let scheduler = Scheduler::new(loaded.model, text, thread_config, thread_stats);
                run(scheduler, inbox);
            })
            .map_err(|e| EngineError::io("starting the engine thread", e))?;
        let text = ready_rx.recv().map_err(|_| {
            EngineError::EngineStopped("the engine thread died while loading".into())
        })??;
        Ok(Engine {
            commands,
            text,
            stats,
            config,
            thread: Some(thread),
        })
    }

    pub fn model_name(&self) -> &str {
        &self.text.name
    }

    pub fn text(&self) -> &ModelText {
        &self.text
    }

    pub fn config(&self) -> &EngineConfig {
        &self.config
    }

    pub fn stats(&self) -> EngineStats {
        self.stats.lock().expect("stats lock").clone()
    }

    /// The prompt text a request renders to with the chat template.
    pub fn prompt_text(&self, request: &ChatRequest) -> Result<String> {
        request.validate_messages()?;
        let input = TemplateInput {
            messages: request.messages.clone(),
            tools: request.tools.clone(),
            add_generation_prompt: true,
            kwargs: request.chat_template_kwargs.clone().unwrap_or_default(),
        };
        self.text.template.render(&input)
    }

    /// The prompt ids a request renders to (chat template + tokenizer).
    pub fn prompt_tokens(&self, request: &ChatRequest) -> Result<Vec<u32>> {
        self.text.tokenizer.encode(&self.prompt_text(request)?)
    }

    /// Validates and queues a request; its events arrive on the stream.
    /// Dropping the stream cancels the request at the next step.
    pub fn submit(&self, request: &ChatRequest) -> Result<RequestStream> {
        let prompt_text = self.prompt_text(request)?;
        let prompt = self.text.tokenizer.encode(&prompt_text)?;
        let output = self.output_config(request, &prompt_text);
        self.submit_tokens(prompt, request, Some(output))
    }

    /// How a chat request's output is parsed: tool calls only when tools
    /// are offered and not refused with `tool_choice: "none"`; reasoning
    /// always, open from the start when the prompt opened it.
    fn output_config(&self, request: &ChatRequest, prompt_text: &str) -> OutputConfig {
        let tools = request.tools.as_deref().unwrap_or_default();
        let refused =
            matches!(&request.tool_choice, Some(serde_json::Value::String(s)) if s == "none");
        let mut config = OutputConfig::text(self.text.reasoning);
        if !tools.is_empty() && !refused {
            config.tool_format = Some(self.text.tool_format);
            config.tools = OutputConfig::tool_schemas(tools);
        }
        config.prompt_opens_reasoning = self.text.reasoning.prompt_opens(prompt_text);
        config.call_id_prefix = new_call_id_prefix();
        config
    }

    /// Like [`Engine::submit`] for a plain-text prompt (no chat template;
    /// the request's messages are ignored).
    pub fn submit_prompt(&self, prompt: &str, request: &ChatRequest) -> Result<RequestStream> {
        let prompt = self.text.tokenizer.encode(prompt)?;
        if prompt.is_empty() {
            return Err(EngineError::invalid_param("prompt", "must not be empty"));
        }
        self.submit_tokens(prompt, request, None)
    }

    fn submit_tokens(
        &self,
        prompt: Vec<u32>,
        request: &ChatRequest,
        mut output: Option<OutputConfig>,
    ) -> Result<RequestStream> {
        let settings = request.settings(&self.text.limits)?;
        let context = self.text.limits.context_length;
        if prompt.len() >= context {
            return Err(EngineError::InvalidRequest {
                message: format!(
                    "the prompt has {} tokens; the model's context is {context}",
                    prompt.len()
                ),
                param: Some("messages".into()),
            });
        }
        // `tool_choice: "none"` with tools offered: no call may begin.
        let refused_tools = output.as_ref().is_some_and(|o| o.tool_format.is_none())
            && request.tools.as_ref().is_some_and(|t| !t.is_empty());
        let constraint = match constraint_of(request)? {
            None if refused_tools => Some(Constraint::NoToolCalls(
                self.text
                    .tool_format
                    .regions()
                    .starts
                    .iter()
                    .map(|m| m.to_string())
                    .collect(),
            )),
            other => other,
        };
        // A reasoning block the prompt opened stays free; the constraint
        // starts after its end marker.
        let reasoning = output
            .as_ref()
            .is_some_and(|o| o.prompt_opens_reasoning)
            .then_some(&self.text.reasoning_prefix);
        // Compiled here, on the caller's thread, never in the decode loop;
        // compiling also rejects bad schemas when constraints are off.
        let (grammar, mode) = match constraint {
            None => (None, GrammarMode::None),
            Some(c) => {
                let state = self.text.grammar.compile(&c, reasoning)?;
                if self.config.grammar_constraints {
                    // Forced calls are written in the grammar's format.
                    if let (Some(o), Constraint::ToolCall(_) | Constraint::MaybeToolCall(_)) =
                        (&mut output, &c)
                    {
                        o.tool_format = Some(ToolCallFormat::Hermes);
                    }
                    (Some(state), GrammarMode::Enforced)
                } else {
                    (None, GrammarMode::Downgraded)
                }
            }
        };
        let thinking_budget = request.thinking_budget.map(|b| b as usize);
        let (events, rx) = unbounded_channel();
        self.commands
            .send(Command::Submit(Box::new(NewSequence {
                prompt,
                settings,
                grammar,
                output,
                thinking_budget,
                events,
            })))
            .map_err(|_| EngineError::EngineStopped("the engine thread has exited".into()))?;
        Ok(RequestStream { rx, grammar: mode })
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        let _ = self.commands.send(Command::Shutdown);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The engine thread's loop: wait for work when idle, else step.
fn run(mut scheduler: Scheduler, inbox: Receiver<Command>) {
    loop {
        if !scheduler.has_work() {
            match inbox.recv() {
                Ok(Command::Submit(s)) => scheduler.enqueue(*s),
                Ok(Command::Shutdown) | Err(_) => return,
            }
        }
        loop {
            match inbox.try_recv() {
                Ok(Command::Submit(s)) => scheduler.enqueue(*s),
                Ok(Command::Shutdown) => return,
                Err(mpsc::TryRecvError::Empty) => break,
                Err(mpsc::TryRecvError::Disconnected) => {
                    if !scheduler.has_work() {
                        return;
                    }
                    break;
                }
            }
        }
        scheduler.step();
    }
}

/// One request's events.
pub struct RequestStream {
    rx: UnboundedReceiver<EngineEvent>,
    /// Whether the request's constraint is enforced, known at submission
    /// (before any event, so a server can set its response headers).
    pub grammar: GrammarMode,
}

impl RequestStream {
    /// The next event, waiting on this thread (not inside an async runtime).
    pub fn next_blocking(&mut self) -> Option<EngineEvent> {
        self.rx.blocking_recv()
    }

    /// The next event, for async callers.
    pub async fn next(&mut self) -> Option<EngineEvent> {
        self.rx.recv().await
    }

    /// Waits for the end and gathers the whole completion.
    pub fn collect_blocking(mut self) -> Result<Completion> {
        let mut c = Completion::default();
        while let Some(event) = self.next_blocking() {
            match event {
                EngineEvent::Started { .. } => {}
                EngineEvent::Delta {
                    text,
                    reasoning,
                    tool_calls,
                    logprobs,
                } => {
                    c.text.push_str(&text);
                    c.reasoning.push_str(&reasoning);
                    for d in tool_calls {
                        apply_tool_call_delta(&mut c.tool_calls, d);
                    }
                    c.logprobs.extend(logprobs);
                }
                EngineEvent::Finished {
                    finish_reason,
                    usage,
                } => {
                    c.finish_reason = Some(finish_reason);
                    c.usage = usage;
                    return Ok(c);
                }
                EngineEvent::Failed { message, .. } => {
                    return Err(EngineError::EngineStopped(message))
                }
            }
        }
        Err(EngineError::EngineStopped(
            "the stream ended without a finish event".into(),
        ))
    }
}

/// A finished request, gathered from its events.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Completion {
    /// Content (all the text for a plain-text prompt).
    pub text: String,
    pub reasoning: String,
    pub tool_calls: Vec<ParsedToolCall>,
    pub finish_reason: Option<FinishReason>,
    pub usage: Usage,
    pub logprobs: Vec<TokenLogprob>,
}

/// Folds one streamed tool-call piece into whole calls.
pub fn apply_tool_call_delta(calls: &mut Vec<ParsedToolCall>, d: ToolCallDelta) {
    if let (Some(id), Some(name)) = (d.id, d.name) {
        calls.push(ParsedToolCall {
            id,
            name,
            arguments: d.arguments,
        });
    } else if let Some(call) = calls.get_mut(d.index) {
        call.arguments.push_str(&d.arguments);
    }
}

/// A per-request prefix for tool-call ids (`call_<unique>_<index>`), so
/// ids are unique across requests as OpenAI clients assume.
fn new_call_id_prefix() -> String {
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    format!("call_{nanos:08x}{n:04x}_")
}
