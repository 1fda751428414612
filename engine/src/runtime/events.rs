//! What a request's stream reports, and the one fold of those events into a
//! whole [`Completion`] that every caller (the blocking collector, the
//! API layer's non-streaming replies) uses.

use serde::Serialize;

use crate::error::EngineError;
use crate::parsers::{fold_tool_call, ParsedToolCall};

/// Why generation ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FinishReason {
    /// An EOS id was produced (it is not part of the output).
    Stop,
    /// The request's stop string with this index matched.
    StopSequence(usize),
    /// `max_tokens` were produced.
    Length,
    /// The model ended its turn after calling tools.
    ToolCalls,
}

impl FinishReason {
    /// OpenAI's `finish_reason`.
    pub fn as_str(self) -> &'static str {
        match self {
            FinishReason::Stop | FinishReason::StopSequence(_) => "stop",
            FinishReason::Length => "length",
            FinishReason::ToolCalls => "tool_calls",
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

/// A piece of a tool call: the first piece of call `index` carries its
/// name, later ones argument fragments. Ids are each protocol's to mint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ToolCallDelta {
    pub index: usize,
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

/// A finished request, folded from its events.
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

/// Why a request's stream ended without finishing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    pub message: String,
    /// The request itself is at fault, not the engine.
    pub client_error: bool,
}

impl Completion {
    /// Folds one event in: `None` while the request runs, `Some` once its
    /// stream has ended (finished, or failed).
    pub fn absorb(&mut self, event: EngineEvent) -> Option<Result<(), Failure>> {
        match event {
            EngineEvent::Started { .. } => None,
            EngineEvent::Delta {
                text,
                reasoning,
                tool_calls,
                logprobs,
            } => {
                self.text.push_str(&text);
                self.reasoning.push_str(&reasoning);
                for d in tool_calls {
                    fold_tool_call(&mut self.tool_calls, d.index, d.name, &d.arguments);
                }
                self.logprobs.extend(logprobs);
                None
            }
            EngineEvent::Finished {
                finish_reason,
                usage,
            } => {
                self.finish_reason = Some(finish_reason);
                self.usage = usage;
                Some(Ok(()))
            }
            EngineEvent::Failed {
                message,
                client_error,
            } => Some(Err(Failure {
                message,
                client_error,
            })),
        }
    }
}

impl Failure {
    /// As an engine error: a request error when the request was at fault.
    pub fn into_error(self) -> EngineError {
        if self.client_error {
            EngineError::InvalidRequest {
                message: self.message,
                param: None,
            }
        } else {
            EngineError::EngineStopped(self.message)
        }
    }
}

/// The stream ended without a `Finished` or `Failed` event.
pub(crate) fn engine_gone() -> Failure {
    Failure {
        message: "the engine stopped before the request finished".into(),
        client_error: false,
    }
}
