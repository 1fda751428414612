//! The llama decoder (Llama 2/3, SmolLM, Mistral-style dense models):
//! RMSNorm, grouped-query attention with RoPE, SwiGLU MLP, on the shared
//! pre-norm decoder stack. What is llama's own is its attention spec.

use super::causal_lm::CausalLm;
use super::decoder::{Decoder, DecoderLayer};
use super::forward::AttentionSpec;
use super::gated_mlp::{Activation, GatedMlp};
use super::self_attention::SelfAttention;
use crate::error::Result;
use crate::loading::config::{HyperParams, ModelConfig};
use crate::loading::weights::TensorMap;

/// The registry's loader: llama reads nothing beyond the common
/// hyper-parameters.
pub fn load(
    config: ModelConfig,
    _hyper: &HyperParams,
    weights: &TensorMap,
) -> Result<Box<dyn CausalLm>> {
    let spec = AttentionSpec {
        heads: config.num_heads,
        kv_heads: config.num_kv_heads,
        head_dim: config.head_dim,
        scale: (config.head_dim as f32).powf(-0.5),
        rope_base: config.rope_theta,
        rope_traditional: config.rope_traditional,
        qk_norm: None,
        window: None,
    };
    let decoder = Decoder::load(config, weights, |_, p| {
        Ok(DecoderLayer {
            attention: SelfAttention::load(weights, &format!("{p}.self_attn"), spec.clone())?,
            ffn: Box::new(GatedMlp::load(
                weights,
                &format!("{p}.mlp"),
                Activation::Silu,
            )?),
        })
    })?;
    Ok(Box::new(decoder))
}
