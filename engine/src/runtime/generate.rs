//! Single-sequence generation: prefill the prompt, then decode token by
//! token until an EOS id or `max_tokens`, streaming text as it completes.

use crate::error::Result;
use crate::loading::eos::EosSet;
use crate::loading::tokenizer::{IncrementalDecoder, TextTokenizer};
use crate::models::CausalLm;
use crate::models::KvCache;
use crate::runtime::events::FinishReason;
use crate::runtime::sampler::{Sampler, SamplingParams};

/// Limits and sampling of one generation.
#[derive(Debug, Clone, PartialEq)]
pub struct GenerationParams {
    pub max_tokens: usize,
    pub sampling: SamplingParams,
}

impl Default for GenerationParams {
    fn default() -> Self {
        GenerationParams {
            max_tokens: 256,
            sampling: SamplingParams::default(),
        }
    }
}

/// The result of one generation.
#[derive(Debug, Clone, PartialEq)]
pub struct Generation {
    pub text: String,
    /// Generated ids, without the EOS id that ended it.
    pub tokens: Vec<u32>,
    pub finish_reason: FinishReason,
    pub prompt_tokens: usize,
}

/// Generates a continuation of `prompt`, calling `on_text` with each piece
/// of completed text as soon as it is known.
pub fn generate(
    model: &dyn CausalLm,
    tokenizer: &TextTokenizer,
    eos: &EosSet,
    prompt: &[u32],
    params: &GenerationParams,
    mut on_text: impl FnMut(&str),
) -> Result<Generation> {
    let mut sampler = Sampler::new(params.sampling.clone()).with_prompt(prompt);
    let mut cache = KvCache::new(model.kv_layout());
    let mut decoder = IncrementalDecoder::new();
    let mut text = String::new();
    let mut tokens = Vec::new();
    let mut finish_reason = FinishReason::Length;
    let mut input: Vec<u32> = prompt.to_vec();
    while tokens.len() < params.max_tokens {
        let logits = model.forward(&input, &mut cache)?;
        let logits = logits.as_type::<f32>()?;
        logits.eval()?;
        let mut logits = logits.as_slice::<f32>().to_vec();
        sampler.process(&mut logits);
        let next = sampler.sample(&logits, cache.offset());
        sampler.observe(next);
        if eos.contains(next) {
            finish_reason = FinishReason::Stop;
            break;
        }
        tokens.push(next);
        let piece = decoder.push(tokenizer, next)?;
        if !piece.is_empty() {
            on_text(&piece);
            text.push_str(&piece);
        }
        input = vec![next];
    }
    let rest = decoder.finish(tokenizer)?;
    if !rest.is_empty() {
        on_text(&rest);
        text.push_str(&rest);
    }
    Ok(Generation {
        text,
        tokens,
        finish_reason,
        prompt_tokens: prompt.len(),
    })
}
