//! How one generation runs: the one settings type, for a request on the
//! engine (checked from the protocol's fields) and for [`generate`]
//! (`crate::runtime::generate`) alike.

use crate::runtime::request::GenerationRequest;
use crate::runtime::sampler::SamplingParams;

/// A generation's settings.
#[derive(Debug, Clone, PartialEq)]
pub struct GenerationSettings {
    pub sampling: SamplingParams,
    pub max_tokens: usize,
    /// Strings that end the output; the first found is never emitted.
    pub stop: Vec<String>,
    /// `Some(k)`: report the chosen token's logprob and the k best.
    pub logprobs: Option<usize>,
    /// Tool calls a turn may make (`Some(1)` for `parallel_tool_calls:
    /// false`): the turn ends when the parser starts one more, which is
    /// never sent.
    pub max_tool_calls: Option<usize>,
}

/// The most positions a request of `prompt` tokens and `max_tokens` new
/// ones can fill in a model of `context` positions: its worst case, which
/// the KV budget, admission, batch-invariant capacity and the clamp of
/// `max_tokens` all read (one computation for all of them).
pub fn worst_case_positions(prompt: usize, max_tokens: usize, context: usize) -> usize {
    (prompt + max_tokens).min(context)
}

impl Default for GenerationSettings {
    /// Greedy-or-default sampling, 256 tokens, no stops, no logprobs.
    fn default() -> Self {
        GenerationSettings {
            sampling: SamplingParams::default(),
            max_tokens: 256,
            stop: Vec::new(),
            logprobs: None,
            max_tool_calls: None,
        }
    }
}

impl GenerationSettings {
    /// A checked request's settings (`max_tokens` already clamped to the
    /// model's limits).
    pub(crate) fn of(request: &GenerationRequest, max_tokens: usize) -> Self {
        GenerationSettings {
            sampling: request.sampling.clone(),
            max_tokens,
            stop: request.stop.clone(),
            logprobs: request.logprobs,
            max_tool_calls: (!request.parallel_tool_calls).then_some(1),
        }
    }
}
