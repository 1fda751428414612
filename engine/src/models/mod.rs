//! Decoder architectures behind one trait. Each architecture is one file;
//! [`load`] picks it from the model's config.

mod kv_cache;
mod llama;

pub use kv_cache::{KvCache, KvSegment};
pub use llama::Llama;

use mlx_rs::Array;

use crate::error::Result;
use crate::model_config::{Architecture, ModelConfig};
use crate::weights::TensorMap;

/// One sequence's part of a batched forward pass.
pub struct BatchItem<'a> {
    /// New tokens: a prefill chunk or the one token being decoded.
    pub tokens: &'a [u32],
    /// The sequence's cache; the new tokens' keys and values are appended.
    pub cache: &'a mut KvCache,
    /// Whether the logits of the last new token are wanted.
    pub sample: bool,
}

/// A causal language model that MLX runs.
pub trait CausalLm {
    fn config(&self) -> &ModelConfig;

    /// Runs every item's new tokens in one pass and returns the logits of the
    /// last token of each item with `sample` set, in item order
    /// (`[n_sampled, vocab]`, f32, not yet evaluated).
    fn forward_batch(&self, items: &mut [BatchItem<'_>]) -> Result<Array>;

    /// One sequence: the logits of the last of `tokens` (`[vocab]`).
    fn forward(&self, tokens: &[u32], cache: &mut KvCache) -> Result<Array> {
        let mut items = [BatchItem {
            tokens,
            cache,
            sample: true,
        }];
        Ok(self.forward_batch(&mut items)?.reshape(&[-1])?)
    }

    /// Batch-invariant mode: results for a sequence must not depend on the
    /// batch, the chunking of its prompt or a cached prefix (bit for bit).
    /// Attention is batch-invariant only over fixed-capacity caches.
    fn set_batch_invariant(&mut self, _on: bool) {}

    /// An empty cache sized for this model.
    fn new_cache(&self) -> KvCache;
}

/// Builds the model named by `config.architecture` from `weights`.
pub fn load(config: ModelConfig, weights: &TensorMap) -> Result<Box<dyn CausalLm>> {
    match config.architecture {
        Architecture::Llama => Ok(Box::new(Llama::load(config, weights)?)),
    }
}
