//! The engine: one thread owns the model and its MLX state and runs the
//! scheduler; requests reach it over a channel and each gets its own stream
//! of events back. Nothing MLX crosses threads.
//!
//! The server and the harness's in-process target both go through
//! [`Engine::submit`], so they see the same behaviour.

use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver};

use crate::error::{EngineError, Result};
use crate::loading::chat_template::TemplateInput;
use crate::loading::source::ModelSource;
use crate::loading::LoadedModel;
use crate::parsers::{OutputConfig, ToolCallFormat};
use crate::runtime::config::EngineConfig;
use crate::runtime::events::{engine_gone, Completion, EngineEvent, Failure};
use crate::runtime::grammar::{constraint_of, Constraint, GrammarMode};
use crate::runtime::model_text::ModelText;
use crate::runtime::request::{ChatRequest, ToolChoice};
use crate::runtime::scheduler::Scheduler;
use crate::runtime::sequence::NewSequence;
use crate::runtime::stats::EngineStats;

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
                let started = LoadedModel::load_source(&source, thread_config.weight_mode)
                    .and_then(|mut loaded| {
                        if let Some(src) = &thread_config.chat_template {
                            loaded.template = loaded.template.replaced_by(src)?;
                        }
                        ModelText::split(loaded, &thread_config)
                    })
                    .and_then(|(text, mut model)| {
                        if thread_config.deterministic {
                            model.set_batch_invariant(true)?;
                        }
                        Ok((Arc::new(text), model))
                    });
                let (text, model) = match started {
                    Ok(parts) => parts,
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                        return;
                    }
                };
                let _ = ready_tx.send(Ok(text.clone()));
                let scheduler = Scheduler::new(model, text, thread_config, thread_stats);
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
        let output = self.output_config(request, &prompt_text)?;
        self.submit_tokens(prompt, request, Some(output))
    }

    /// How a chat request's output is parsed: tool calls only when tools
    /// are offered and not refused with `tool_choice: "none"`; reasoning
    /// always, open from the start when the prompt opened it.
    fn output_config(&self, request: &ChatRequest, prompt_text: &str) -> Result<OutputConfig> {
        let tools = request.tool_specs()?;
        let refused = request.tool_choice()? == ToolChoice::None;
        let mut config = OutputConfig::text(self.text.reasoning);
        if !tools.is_empty() && !refused {
            config.tool_format = Some(self.text.tool_format);
            config.tools =
                OutputConfig::tool_schemas(tools.iter().map(|t| (t.name.as_str(), &t.parameters)));
        }
        config.prompt_opens_reasoning = self.text.reasoning.prompt_opens(prompt_text);
        config.call_id_prefix = new_call_id_prefix();
        Ok(config)
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

    /// Waits for the end and folds the whole completion.
    pub fn collect_blocking(mut self) -> Result<Completion> {
        let mut c = Completion::default();
        while let Some(event) = self.next_blocking() {
            if let Some(end) = c.absorb(event) {
                return end.map(|()| c).map_err(Failure::into_error);
            }
        }
        Err(engine_gone().into_error())
    }

    /// Waits for the end and folds the whole completion, for async callers.
    pub async fn collect(mut self) -> std::result::Result<Completion, Failure> {
        let mut c = Completion::default();
        while let Some(event) = self.next().await {
            if let Some(end) = c.absorb(event) {
                return end.map(|()| c);
            }
        }
        Err(engine_gone())
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
