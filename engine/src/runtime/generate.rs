//! Single-sequence generation: prefill the prompt, then decode token by
//! token until an EOS id, a stop string or `max_tokens`, streaming text as
//! it completes.

use crate::error::{EngineError, Result};
use crate::loading::eos::EosSet;
use crate::loading::tokenizer::{IncrementalDecoder, TextTokenizer};
use crate::models::CausalLm;
use crate::models::KvCache;
use crate::runtime::events::FinishReason;
use crate::runtime::sampler::Sampler;
use crate::runtime::settings::GenerationSettings;
use crate::runtime::stop::StopMatcher;

/// The result of one generation.
#[derive(Debug, Clone, PartialEq)]
pub struct Generation {
    pub text: String,
    /// Generated ids, without the EOS id that ended it.
    pub tokens: Vec<u32>,
    pub finish_reason: FinishReason,
    pub prompt_tokens: usize,
}

/// Generates a continuation of `prompt` under `settings`, calling
/// `on_text` with each piece of completed text as soon as it is known (a
/// piece that may begin a stop string is held until it cannot). Logprobs
/// and tool-call limits are the engine's ([`crate::Engine`]): asked of
/// this plain-text loop, they are an error, never silently dropped.
pub fn generate(
    model: &dyn CausalLm,
    tokenizer: &TextTokenizer,
    eos: &EosSet,
    prompt: &[u32],
    settings: &GenerationSettings,
    mut on_text: impl FnMut(&str),
) -> Result<Generation> {
    if settings.logprobs.is_some() {
        return Err(EngineError::invalid_param(
            "logprobs",
            "generate() reports no logprobs; run the request on the Engine",
        ));
    }
    if settings.max_tool_calls.is_some() {
        return Err(EngineError::invalid_param(
            "max_tool_calls",
            "generate() parses no tool calls; run the request on the Engine",
        ));
    }
    let mut sampler = Sampler::new(settings.sampling.clone()).with_prompt(prompt);
    let mut cache = KvCache::new(model.kv_layout());
    let mut decoder = IncrementalDecoder::new();
    let mut stops = StopMatcher::new(settings.stop.clone());
    let mut text = String::new();
    let mut tokens = Vec::new();
    let mut finish_reason = FinishReason::Length;
    let mut input: Vec<u32> = prompt.to_vec();
    let mut emit = |piece: &str, text: &mut String| {
        if !piece.is_empty() {
            on_text(piece);
            text.push_str(piece);
        }
    };
    let mut stopped = false;
    while tokens.len() < settings.max_tokens {
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
        let scan = stops.push(&decoder.push(tokenizer, next)?);
        emit(&scan.emit, &mut text);
        if scan.stopped_by.is_some() {
            (finish_reason, stopped) = (FinishReason::Stop, true);
            break;
        }
        input = vec![next];
    }
    if !stopped {
        let scan = stops.push(&decoder.finish(tokenizer)?);
        emit(&scan.emit, &mut text);
        if scan.stopped_by.is_some() {
            finish_reason = FinishReason::Stop;
        } else {
            emit(&stops.finish(), &mut text);
        }
    }
    Ok(Generation {
        text,
        tokens,
        finish_reason,
        prompt_tokens: prompt.len(),
    })
}
