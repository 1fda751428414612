//! What the engine is asked to do, in no protocol's shape: every API
//! (OpenAI chat and completions, Anthropic Messages, OpenAI Responses)
//! reads its own wire format into a [`GenerationRequest`], and the engine
//! checks it only against the model's limits.
//!
//! Chat messages are in the chat template's shape (HF's: `role`, `content`
//! as text or parts, `tool_calls` with `function.arguments`, `tool` results
//! with `tool_call_id`), since that is what templates consume.

use serde_json::{Map, Value};

use crate::error::{EngineError, Result};
use crate::runtime::constraint::Constraint;
use crate::runtime::sampler::SamplingParams;
use crate::runtime::tool_spec::ToolSpec;

/// The model-given bounds a request is checked against.
#[derive(Debug, Clone, Copy)]
pub struct RequestLimits {
    pub max_logprobs: usize,
    pub default_max_tokens: usize,
    pub context_length: usize,
    pub vocab_size: usize,
}

/// A requested `max_tokens` larger than what the context holds beside
/// the prompt: cut to what fits (the reply then ends with finish reason
/// `length`, as llama.cpp and vLLM serve it), or refused (as OpenAI does).
/// Coding agents send `max_tokens: 32000` whatever the model's context, so
/// cutting is the default.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OverlongMaxTokens {
    #[default]
    Cut,
    Refuse,
}

/// The tokens a request may generate: `asked` (its `max_tokens`, or the
/// server's default when it gave none, which is always cut) beside a
/// prompt of `prompt` tokens in a context of `context`.
pub fn fit_max_tokens(
    asked: usize,
    given: bool,
    prompt: usize,
    context: usize,
    policy: OverlongMaxTokens,
) -> Result<usize> {
    let room = context.saturating_sub(prompt);
    if asked <= room {
        return Ok(asked);
    }
    if given && policy == OverlongMaxTokens::Refuse {
        return Err(EngineError::invalid_param(
            "max_tokens",
            format!(
                "the prompt has {prompt} tokens and max_tokens asks for {asked} more, \
                 past the model's context of {context} tokens (this server refuses \
                 rather than cutting max_tokens to {room}: --refuse-overlong-max-tokens)"
            ),
        ));
    }
    Ok(room)
}

/// What to continue.
#[derive(Debug, Clone, PartialEq)]
pub enum Prompt {
    /// Messages rendered by the chat template; the output is parsed for
    /// reasoning and tool calls.
    Chat {
        messages: Vec<Value>,
        /// Extra template variables (`enable_thinking`, ...).
        template_kwargs: Map<String, Value>,
    },
    /// Text tokenized as is; the output is plain text.
    Text(String),
    /// Token ids as given (a completions `prompt` of ids); plain text out.
    Tokens(Vec<u32>),
}

/// Whether and which tools may be called.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum ToolChoice {
    #[default]
    Auto,
    /// No call may be made.
    None,
    /// Some call must be made.
    Required,
    /// This function must be called.
    Named(String),
}

/// Who waits on a request, which decides its turn for a decode slot
/// (`scheduler`): a client on an open connection, or a batch job that has
/// hours. Ordered: the first is served first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub enum Priority {
    /// Interactive requests: admitted before any batch request waiting.
    #[default]
    Interactive,
    /// Batch API lines: admitted only when no interactive request waits,
    /// into slots that leave one free for the next interactive arrival.
    Batch,
}

/// A request to the engine.
#[derive(Debug, Clone, PartialEq)]
pub struct GenerationRequest {
    pub prompt: Prompt,
    pub tools: Vec<ToolSpec>,
    pub tool_choice: ToolChoice,
    pub sampling: SamplingParams,
    /// `None`: the engine's default.
    pub max_tokens: Option<usize>,
    /// Generation ends before any of these; they are never output.
    pub stop: Vec<String>,
    /// `Some(k)`: report each token's logprob and the k best.
    pub logprobs: Option<usize>,
    /// What the output (after any reasoning) must match; tool calls are
    /// constrained from `tools` and `tool_choice`, not here.
    pub constraint: Option<Constraint>,
    /// Reasoning tokens allowed before the end of reasoning is forced.
    pub thinking_budget: Option<usize>,
    /// Several tool calls in one turn (OpenAI's `parallel_tool_calls`,
    /// Anthropic's `disable_parallel_tool_use` inverted); off, the turn
    /// ends after its first call.
    pub parallel_tool_calls: bool,
    /// Its turn for a decode slot beside other requests.
    pub priority: Priority,
}

impl GenerationRequest {
    /// A chat request with default settings.
    pub fn chat(messages: Vec<Value>) -> Self {
        GenerationRequest {
            prompt: Prompt::Chat {
                messages,
                template_kwargs: Map::new(),
            },
            tools: Vec::new(),
            tool_choice: ToolChoice::Auto,
            sampling: SamplingParams::default(),
            max_tokens: None,
            stop: Vec::new(),
            logprobs: None,
            constraint: None,
            thinking_budget: None,
            parallel_tool_calls: true,
            priority: Priority::Interactive,
        }
    }

    /// Checks what depends on the model (logprob count, token ids) and
    /// returns the number of tokens asked for; what fits the context
    /// beside the prompt is [`fit_max_tokens`]'s to say.
    pub fn checked_max_tokens(&self, limits: &RequestLimits) -> Result<usize> {
        if let Some(k) = self.logprobs {
            if k > limits.max_logprobs {
                return Err(EngineError::invalid_param(
                    "top_logprobs",
                    format!("must be at most {}", limits.max_logprobs),
                ));
            }
        }
        if let Some((id, _)) = self
            .sampling
            .logit_bias
            .iter()
            .find(|(id, _)| *id as usize >= limits.vocab_size)
        {
            return Err(EngineError::invalid_param(
                "logit_bias",
                format!("'{id}' is not a token id of this model"),
            ));
        }
        match self.max_tokens {
            Some(0) => Err(EngineError::invalid_param(
                "max_tokens",
                "must be at least 1",
            )),
            Some(n) => Ok(n),
            None => Ok(limits.default_max_tokens),
        }
    }

    /// The tools a call may name: none when refused, the named one when
    /// forced. Naming a tool that is not offered is the request's error.
    pub fn callable_tools(&self) -> Result<Vec<ToolSpec>> {
        match &self.tool_choice {
            ToolChoice::None => Ok(Vec::new()),
            ToolChoice::Auto => Ok(self.tools.clone()),
            ToolChoice::Required if self.tools.is_empty() => Err(EngineError::invalid_param(
                "tool_choice",
                "requires at least one tool",
            )),
            ToolChoice::Required => Ok(self.tools.clone()),
            ToolChoice::Named(name) => {
                let named: Vec<ToolSpec> = self
                    .tools
                    .iter()
                    .filter(|t| &t.name == name)
                    .cloned()
                    .collect();
                if named.is_empty() {
                    return Err(EngineError::invalid_param(
                        "tool_choice",
                        format!("names '{name}', which is not among the tools"),
                    ));
                }
                Ok(named)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const LIMITS: RequestLimits = RequestLimits {
        max_logprobs: 20,
        default_max_tokens: 100,
        context_length: 2048,
        vocab_size: 1000,
    };

    fn param_of(r: Result<usize>) -> Option<String> {
        match r {
            Err(EngineError::InvalidRequest { param, .. }) => param,
            other => panic!("expected an invalid request, got {other:?}"),
        }
    }

    #[test]
    fn an_overlong_max_tokens_is_cut_to_what_fits_unless_refused() {
        use OverlongMaxTokens::{Cut, Refuse};
        assert_eq!(fit_max_tokens(32000, true, 6000, 8192, Cut).unwrap(), 2192);
        assert_eq!(fit_max_tokens(100, true, 6000, 8192, Cut).unwrap(), 100);
        assert_eq!(
            fit_max_tokens(2192, true, 6000, 8192, Refuse).unwrap(),
            2192
        );
        let err = fit_max_tokens(32000, true, 6000, 8192, Refuse).unwrap_err();
        let EngineError::InvalidRequest { message, param } = err else {
            panic!("an invalid request")
        };
        assert_eq!(param.as_deref(), Some("max_tokens"));
        assert!(
            message.contains("6000") && message.contains("8192"),
            "{message}"
        );
        // The server's own default is cut whatever the policy.
        assert_eq!(fit_max_tokens(512, false, 8000, 8192, Refuse).unwrap(), 192);
    }

    #[test]
    fn model_limits_are_checked() {
        let mut r = GenerationRequest::chat(vec![json!({"role": "user", "content": "hi"})]);
        assert_eq!(r.checked_max_tokens(&LIMITS).unwrap(), 100);
        r.max_tokens = Some(0);
        assert_eq!(
            param_of(r.checked_max_tokens(&LIMITS)).as_deref(),
            Some("max_tokens")
        );
        r.max_tokens = Some(4096);
        assert_eq!(r.checked_max_tokens(&LIMITS).unwrap(), 4096);
        r.max_tokens = Some(7);
        r.logprobs = Some(21);
        assert_eq!(
            param_of(r.checked_max_tokens(&LIMITS)).as_deref(),
            Some("top_logprobs")
        );
        r.logprobs = Some(3);
        r.sampling.logit_bias = vec![(5000, 1.0)];
        assert_eq!(
            param_of(r.checked_max_tokens(&LIMITS)).as_deref(),
            Some("logit_bias")
        );
    }

    #[test]
    fn tool_choice_selects_the_callable_tools() {
        let tool = |n: &str| ToolSpec {
            name: n.into(),
            description: None,
            parameters: json!({"type": "object"}),
            strict: false,
        };
        let mut r = GenerationRequest::chat(Vec::new());
        r.tools = vec![tool("a"), tool("b")];
        r.tool_choice = ToolChoice::Named("b".into());
        assert_eq!(r.callable_tools().unwrap(), vec![tool("b")]);
        r.tool_choice = ToolChoice::Named("c".into());
        assert!(r.callable_tools().is_err());
        r.tool_choice = ToolChoice::None;
        assert!(r.callable_tools().unwrap().is_empty());
        r.tools.clear();
        r.tool_choice = ToolChoice::Required;
        assert!(r.callable_tools().is_err());
    }
}
