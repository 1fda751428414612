//! The engine: one thread owns the model and its MLX state and runs the
//! scheduler; requests reach it over a channel and each gets its own stream
//! of events back. Nothing MLX crosses threads.
//!
//! The server and the harness's in-process target both go through
//! [`Engine::submit`], so they see the same behaviour.

use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use serde_json::{Map, Value};
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver};

use crate::error::{EngineError, Result};
use crate::loading::chat_template::TemplateInput;
use crate::loading::source::ModelSource;
use crate::loading::WeightMode;
use crate::models::{KvLayout, LoadedModel};
use crate::parsers::{OutputConfig, ToolCallFormat};
use crate::runtime::config::EngineConfig;
use crate::runtime::constraint::Constraint;
use crate::runtime::events::{engine_gone, Completion, EngineEvent, Failure};
use crate::runtime::grammar::{tool_constraint, GrammarMode, GrammarState};
use crate::runtime::model_text::ModelText;
use crate::runtime::request::{fit_max_tokens, GenerationRequest, Prompt, ToolChoice};
use crate::runtime::scheduler::Scheduler;
use crate::runtime::sequence::NewSequence;
use crate::runtime::settings::{worst_case_positions, GenerationSettings};
use crate::runtime::stats::EngineStats;
use crate::runtime::tool_spec::ToolSpec;

pub(crate) enum Command {
    /// Requests queued in one step of the engine thread.
    Submit(Vec<NewSequence>),
    Shutdown,
}

/// A running engine. Dropping it stops the thread after cancelling requests.
pub struct Engine {
    commands: Sender<Command>,
    text: Arc<ModelText>,
    stats: Arc<Mutex<EngineStats>>,
    config: EngineConfig,
    /// The served model's KV per sequence, to refuse at submission a
    /// request that could never fit the KV budget.
    kv_layout: KvLayout,
    thread: Option<JoinHandle<()>>,
}

impl Engine {
    /// Loads `--model` on a new engine thread and starts serving.
    pub fn start(model: &str, config: EngineConfig) -> Result<Self> {
        if let Some(kernels) = config.kernels {
            crate::cpu::kernels::choose(kernels).map_err(EngineError::Unsupported)?;
        }
        let source = ModelSource::resolve(model)?;
        let (commands, inbox) = mpsc::channel();
        let (ready_tx, ready_rx) = mpsc::sync_channel(1);
        let stats = Arc::new(Mutex::new(EngineStats::default()));
        let thread_stats = stats.clone();
        let thread_config = config.clone();
        let thread = std::thread::Builder::new()
            .name("afm-engine".into())
            .spawn(move || {
                let cache_limit = thread_config.bound_mlx_cache();
                tracing::info!(
                    device = %crate::device::Device::current(),
                    mlx_cache_limit_mb = cache_limit >> 20,
                    kv_budget_mb = thread_config.kv_budget_bytes >> 20,
                    "engine memory"
                );
                let weight_mode = thread_config
                    .weight_mode
                    .unwrap_or_else(WeightMode::for_platform);
                let started = LoadedModel::load_source(&source, weight_mode)
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
                let _ = ready_tx.send(Ok((text.clone(), model.kv_layout().clone())));
                let scheduler = Scheduler::new(model, text, thread_config, thread_stats);
                run(scheduler, inbox);
            })
            .map_err(|e| EngineError::io("starting the engine thread", e))?;
        let (text, kv_layout) = ready_rx.recv().map_err(|_| {
            EngineError::EngineStopped("the engine thread died while loading".into())
        })??;
        Ok(Engine {
            commands,
            text,
            stats,
            config,
            kv_layout,
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

    /// The prompt text chat messages render to with the chat template
    /// (the tools offered are shown to the template).
    pub fn prompt_text(
        &self,
        messages: &[Value],
        template_kwargs: &Map<String, Value>,
        tools: &[ToolSpec],
    ) -> Result<String> {
        if messages.is_empty() {
            return Err(EngineError::invalid_param("messages", "must not be empty"));
        }
        let input = TemplateInput {
            messages: messages.to_vec(),
            tools: (!tools.is_empty()).then(|| tools.iter().map(ToolSpec::template_json).collect()),
            add_generation_prompt: true,
            kwargs: template_kwargs.clone(),
        };
        self.text.template.render(&input)
    }

    /// The prompt ids a request becomes (chat template and tokenizer, the
    /// text tokenized, or its ids checked against the vocabulary).
    pub fn prompt_tokens(&self, request: &GenerationRequest) -> Result<Vec<u32>> {
        Ok(self.encode_prompt(request)?.0)
    }

    /// Checks and queues a request; its events arrive on the stream.
    /// Dropping the stream cancels the request at the next step.
    pub fn submit(&self, request: &GenerationRequest) -> Result<RequestStream> {
        let (sequence, stream) = self.prepare(request)?;
        self.send(vec![sequence])?;
        Ok(stream)
    }

    /// Checks all the requests, then queues them at once: the scheduler
    /// sees them in the same step, whatever the callers' timing, so an
    /// offline batch starts together and computes a shared prefix once.
    /// One bad request queues none.
    pub fn submit_together(&self, requests: &[GenerationRequest]) -> Result<Vec<RequestStream>> {
        let (sequences, streams) = requests
            .iter()
            .map(|r| self.prepare(r))
            .collect::<Result<(Vec<_>, Vec<_>)>>()?;
        self.send(sequences)?;
        Ok(streams)
    }

    fn send(&self, sequences: Vec<NewSequence>) -> Result<()> {
        self.commands
            .send(Command::Submit(sequences))
            .map_err(|_| EngineError::EngineStopped("the engine thread has exited".into()))
    }

    /// A request made ready for the engine thread (on the caller's
    /// thread), with the stream its events will arrive on, in four steps:
    /// its prompt tokens and output parsing, its fit in the context and KV
    /// budget, its grammar compiled, its settings.
    fn prepare(&self, request: &GenerationRequest) -> Result<(NewSequence, RequestStream)> {
        let asked = request.checked_max_tokens(&self.text.limits)?;
        let (prompt, mut output) = self.sequence_prompt(request)?;
        self.check_fits(request, prompt.len(), asked)?;
        let max_tokens = fit_max_tokens(
            asked,
            request.max_tokens.is_some(),
            prompt.len(),
            self.text.limits.context_length,
            self.config.overlong_max_tokens,
        )?;
        let (grammar, mode) = self.grammar(request, &mut output)?;
        let (events, rx) = unbounded_channel();
        let sequence = NewSequence {
            prompt,
            settings: GenerationSettings::of(request, max_tokens),
            grammar,
            output,
            thinking_budget: request.thinking_budget,
            priority: request.priority,
            events,
        };
        Ok((sequence, RequestStream::of(rx, mode)))
    }

    /// The prompt's tokens ([`Engine::prompt_tokens`]; empty: the
    /// document start) and, for a chat, how its output is parsed.
    fn sequence_prompt(
        &self,
        request: &GenerationRequest,
    ) -> Result<(Vec<u32>, Option<OutputConfig>)> {
        let (prompt, chat_text) = self.encode_prompt(request)?;
        let output = match chat_text {
            Some(text) => Some(self.output_config(request, &text)?),
            None => None,
        };
        // An empty text prompt is the document start (OpenAI's default
        // prompt is `<|endoftext|>`): the model's BOS, else its first EOS.
        let prompt = match prompt.is_empty() {
            false => prompt,
            true => self.document_start()?,
        };
        Ok((prompt, output))
    }

    /// The prompt's ids, and a chat's rendered text.
    fn encode_prompt(&self, request: &GenerationRequest) -> Result<(Vec<u32>, Option<String>)> {
        match &request.prompt {
            Prompt::Chat {
                messages,
                template_kwargs,
            } => {
                let text = self.prompt_text(messages, template_kwargs, &request.tools)?;
                Ok((self.text.tokenizer.encode(&text)?, Some(text)))
            }
            Prompt::Text(text) => Ok((self.text.tokenizer.encode(text)?, None)),
            Prompt::Tokens(ids) => {
                let vocab = self.text.limits.vocab_size;
                if let Some(id) = ids.iter().find(|&&id| id as usize >= vocab) {
                    return Err(EngineError::invalid_param(
                        "prompt",
                        format!("{id} is not a token id of this model (vocabulary of {vocab})"),
                    ));
                }
                Ok((ids.clone(), None))
            }
        }
    }

    /// Refuses a prompt the context cannot hold, or whose worst case
    /// (prompt + `max_tokens`) needs more KV than the budget.
    fn check_fits(
        &self,
        request: &GenerationRequest,
        prompt: usize,
        max_tokens: usize,
    ) -> Result<()> {
        let context = self.text.limits.context_length;
        if prompt >= context {
            let param = match request.prompt {
                Prompt::Chat { .. } => "messages",
                Prompt::Text(_) | Prompt::Tokens(_) => "prompt",
            };
            return Err(EngineError::InvalidRequest {
                message: format!(
                    "the prompt has {prompt} tokens; the model's context is {context}"
                ),
                param: Some(param.into()),
            });
        }
        let kv = self
            .kv_layout
            .bytes_for(worst_case_positions(prompt, max_tokens, context));
        if kv > self.config.kv_budget_bytes {
            return Err(EngineError::InvalidRequest {
                message: format!(
                    "the prompt ({prompt} tokens) and max_tokens ({max_tokens}) need up to {} MiB of KV; \
                     this server's budget is {} MiB (--max-kv-mb)",
                    kv.div_ceil(1 << 20),
                    self.config.kv_budget_bytes >> 20
                ),
                param: Some("max_tokens".into()),
            });
        }
        Ok(())
    }

    /// The request's grammar, compiled here on the caller's thread (never
    /// in the decode loop; compiling also rejects bad schemas when
    /// constraints are off), and whether it is enforced. A forced tool
    /// call switches `output` to the grammar's call format.
    fn grammar(
        &self,
        request: &GenerationRequest,
        output: &mut Option<OutputConfig>,
    ) -> Result<(Option<GrammarState>, GrammarMode)> {
        let constraint = match tool_constraint(request)? {
            Some(c) => Some(c),
            // Tools offered and refused: no call may begin.
            None if output.is_some()
                && request.tool_choice == ToolChoice::None
                && !request.tools.is_empty() =>
            {
                match &request.constraint {
                    Some(c) => Some(c.clone()),
                    None => Some(Constraint::NoToolCalls(
                        self.text
                            .tool_format
                            .regions()
                            .starts
                            .iter()
                            .map(|m| m.to_string())
                            .collect(),
                    )),
                }
            }
            None => request.constraint.clone(),
        };
        let Some(c) = constraint else {
            return Ok((None, GrammarMode::None));
        };
        // A reasoning block the prompt opened stays free; the constraint
        // starts after its end marker.
        let reasoning = output
            .as_ref()
            .is_some_and(|o| o.prompt_opens_reasoning)
            .then_some(&self.text.reasoning_prefix);
        let state = self.text.grammar.compile(&c, reasoning)?;
        if self.config.grammar_constraints {
            // Forced calls are written in the grammar's format.
            if let (Some(o), Constraint::ToolCall(_) | Constraint::MaybeToolCall(_)) = (output, &c)
            {
                o.tool_format = Some(ToolCallFormat::Hermes);
            }
            Ok((Some(state), GrammarMode::Enforced))
        } else if let Some(param) = c.needs_enforcing() {
            Err(EngineError::invalid_param(
                param,
                "needs grammar constraints, which this server runs without \
                 (it was started with --no-grammar-constraints)",
            ))
        } else {
            Ok((None, GrammarMode::Downgraded))
        }
    }

    /// The ids of a document's start: the BOS token, else the first EOS id.
    fn document_start(&self) -> Result<Vec<u32>> {
        let bos = self.text.template.bos_token();
        let ids = match bos.is_empty() {
            false => self.text.tokenizer.encode(bos)?,
            true => self.text.eos.ids().take(1).collect(),
        };
        if ids.is_empty() {
            return Err(EngineError::invalid_param(
                "prompt",
                "must not be empty (this model has no BOS or EOS token to start from)",
            ));
        }
        Ok(ids)
    }

    /// How chat output is parsed: tool calls only when tools are offered
    /// and not refused; reasoning always, open from the start when the
    /// prompt opened it.
    fn output_config(
        &self,
        request: &GenerationRequest,
        prompt_text: &str,
    ) -> Result<OutputConfig> {
        let callable = request.callable_tools()?;
        let mut config = OutputConfig::text(self.text.reasoning);
        if !callable.is_empty() {
            config.tool_format = Some(self.text.tool_format);
            config.tools = OutputConfig::tool_schemas(
                request
                    .tools
                    .iter()
                    .map(|t| (t.name.as_str(), &t.parameters)),
            );
        }
        config.prompt_opens_reasoning = self.text.reasoning.prompt_opens(prompt_text);
        Ok(config)
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
                Ok(Command::Submit(all)) => all.into_iter().for_each(|s| scheduler.enqueue(s)),
                Ok(Command::Shutdown) | Err(_) => return,
            }
        }
        loop {
            match inbox.try_recv() {
                Ok(Command::Submit(all)) => all.into_iter().for_each(|s| scheduler.enqueue(s)),
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
    /// A stream of `rx`'s events (the engine's; a test's).
    pub(crate) fn of(rx: UnboundedReceiver<EngineEvent>, grammar: GrammarMode) -> Self {
        RequestStream { rx, grammar }
    }

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
