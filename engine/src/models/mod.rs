//! Decoder architectures behind one trait. Each architecture is one file;
//! [`load`] picks it from the model's config.

mod kv_cache;
mod llama;

pub use kv_cache::KvCache;
pub use llama::Llama;

use mlx_rs::Array;

use crate::error::Result;
use crate::model_config::{Architecture, ModelConfig};
use crate::weights::TensorMap;

/// A causal language model that MLX runs.
pub trait CausalLm {
    fn config(&self) -> &ModelConfig;

    /// Runs `tokens` after what `cache` already holds and returns the logits
    /// of the last position (`[vocab]`, f32, not yet evaluated).
    fn forward(&self, tokens: &[u32], cache: &mut KvCache) -> Result<Array>;

    /// An empty cache sized for this model.
    fn new_cache(&self) -> KvCache;
}

/// Builds the model named by `config.architecture` from `weights`.
pub fn load(config: ModelConfig, weights: &TensorMap) -> Result<Box<dyn CausalLm>> {
    match config.architecture {
        Architecture::Llama => Ok(Box::new(Llama::load(config, weights)?)),
    }
}
