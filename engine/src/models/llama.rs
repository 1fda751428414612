//! The llama decoder (Llama 2/3, SmolLM, Mistral-style dense models):
//! RMSNorm, grouped-query attention with RoPE, SwiGLU MLP, on the shared
//! pre-norm decoder stack. Llama has nothing of its own beyond the common
//! hyper-parameters.

use super::causal_lm::CausalLm;
use super::decoder::Decoder;
use super::forward::AttentionSpec;
use super::self_attention::SelfAttention;
use crate::error::Result;
use crate::loading::config::{HyperParams, ModelConfig};
use crate::loading::family::Family;
use crate::loading::weights::TensorMap;

/// How llama's files describe it: llama.cpp's converter permutes its Q/K
/// rows for interleaved RoPE.
pub const FAMILY: Family = Family {
    gguf_permutes_qk: true,
    ..Family::plain("llama", "llama", "LlamaForCausalLM")
};

/// The registry's loader.
pub fn load(
    config: ModelConfig,
    _hyper: &HyperParams,
    weights: &TensorMap,
) -> Result<Box<dyn CausalLm>> {
    let spec = AttentionSpec::from_config(&config);
    let decoder = Decoder::swiglu(config, weights, |p| {
        SelfAttention::load(weights, &format!("{p}.self_attn"), spec.clone())
    })?;
    Ok(Box::new(decoder))
}
