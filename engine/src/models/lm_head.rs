//! The LM head every architecture ends with: its own `lm_head` matrix or
//! the tied embedding, checked against the vocabulary at load. The engine
//! reads logits rows with a stride of `vocab_size`, so a head of any other
//! width would silently shift every row after the first.

use mlx_rs::Array;

use super::forward::ForwardContext;
use crate::error::{EngineError, Result};
use crate::layers::{Embedding, Linear};
use crate::loading::config::ModelConfig;
use crate::loading::weights::TensorMap;

/// The head named `lm_head`, or the embedding when tied or absent.
pub fn load(weights: &TensorMap, embed: &Embedding, config: &ModelConfig) -> Result<Linear> {
    let head = if config.tie_word_embeddings || !weights.contains("lm_head.weight") {
        embed.0.clone()
    } else {
        weights.linear("lm_head")?
    };
    let rows = head.out_features() as usize;
    if rows != config.vocab_size {
        return Err(EngineError::invalid_model(
            weights.origin(),
            format!(
                "the LM head has {rows} rows but the vocabulary size is {}",
                config.vocab_size
            ),
        ));
    }
    Ok(head)
}

/// The logits of the pass's sampled rows (`[n_sampled, vocab]`; `[0,
/// vocab]` when nothing is sampled): the final norm and the head run on
/// those rows only. Ends the pass (see `ForwardContext::sampled_rows`).
pub fn sampled_logits(
    ctx: &mut ForwardContext,
    h: &Array,
    final_norm: impl Fn(&Array) -> Result<Array>,
    head: &Linear,
    config: &ModelConfig,
) -> Result<Array> {
    let Some(last) = ctx.sampled_rows(h)? else {
        return Ok(Array::zeros::<f32>(&[0, config.vocab_size as i32])?);
    };
    let n = last.dim(1);
    Ok(ctx.linear(head, &final_norm(&last)?)?.reshape(&[n, -1])?)
}
