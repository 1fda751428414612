//! The runtime: the engine thread that owns the model, the scheduler that
//! batches every running request into one forward pass per step, and each
//! request's token-to-event pipeline.
//!
//! ```text
//! engine        Engine::submit (caller's thread) -> channel -> engine thread
//! scheduler     admission, prefix-cache use, the forward plan of a step
//! prefill_budget / prefill_order   how many prompt tokens a step reads,
//!               and whose first
//! sequence      per request: sampling, grammar, thinking budget,
//!               detokenizing, stop strings, output parsing -> events
//! events        what a stream reports; the one fold into a Completion
//! stats         counters, made before the event that could reveal them
//! prefix_cache  radix tree of prompt KV      sampler   logits -> token
//! grammar       llguidance constraints        stop      stop strings
//! request       what the engine is asked, in no protocol's shape
//! generate      one sequence, no scheduler (benchmarks, CLI)
//! ```

mod config;
mod constraint;
mod engine;
mod events;
mod generate;
mod grammar;
mod model_text;
mod prefill_budget;
mod prefill_order;
mod prefix_cache;
mod request;
mod sampler;
mod scheduler;
mod sequence;
mod settings;
mod stats;
mod stop;
mod tool_spec;

pub use config::EngineConfig;
pub use constraint::Constraint;
pub use engine::{Engine, RequestStream};
pub use events::{
    Completion, EngineEvent, Failure, FinishReason, TokenLogprob, ToolCallDelta, TopLogprob, Usage,
};
pub use generate::{generate, Generation};
pub use grammar::{GrammarCompiler, GrammarMode, GrammarState, ReasoningPrefix};
pub use model_text::ModelText;
pub use prefix_cache::{PrefixCache, PrefixMatch};
pub use request::{
    fit_max_tokens, GenerationRequest, OverlongMaxTokens, Priority, Prompt, RequestLimits,
    ToolChoice,
};
pub use sampler::{argmax, logprobs, Sampler, SamplingParams};
pub use settings::GenerationSettings;
pub use stats::{EngineStats, BATCH_SIZE_BUCKETS};
pub use stop::{StopMatcher, StopScan};
pub use tool_spec::ToolSpec;
