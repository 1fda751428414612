//! Qwen3 (dense): the llama block with a per-head RMSNorm on queries and
//! keys before RoPE; no biases; tied or own LM head.

use super::causal_lm::CausalLm;
use super::decoder::{Decoder, DecoderLayer};
use super::forward::{AttentionSpec, QkNorm};
use super::gated_mlp::{Activation, GatedMlp};
use super::self_attention::SelfAttention;
use crate::error::Result;
use crate::loading::config::{HyperParams, ModelConfig};
use crate::loading::weights::TensorMap;

/// The registry's loader.
pub fn load(
    config: ModelConfig,
    _hyper: &HyperParams,
    weights: &TensorMap,
) -> Result<Box<dyn CausalLm>> {
    let c = config.clone();
    let decoder = Decoder::load(config, weights, |_, p| {
        Ok(DecoderLayer {
            attention: attention(&c, weights, p)?,
            ffn: Box::new(GatedMlp::load(
                weights,
                &format!("{p}.mlp"),
                Activation::Silu,
            )?),
        })
    })?;
    Ok(Box::new(decoder))
}

/// Qwen3's attention under layer prefix `p` (Qwen3-MoE's too).
pub fn attention(config: &ModelConfig, weights: &TensorMap, p: &str) -> Result<SelfAttention> {
    let norm = |name: &str| weights.dense(&format!("{p}.self_attn.{name}.weight"));
    let spec = AttentionSpec {
        heads: config.num_heads,
        kv_heads: config.num_kv_heads,
        head_dim: config.head_dim,
        scale: (config.head_dim as f32).powf(-0.5),
        rope_base: config.rope_theta,
        rope_traditional: config.rope_traditional,
        qk_norm: Some(QkNorm::new(
            &norm("q_norm")?,
            &norm("k_norm")?,
            config.num_heads,
            config.num_kv_heads,
            config.rms_norm_eps,
        )?),
        window: None,
    };
    SelfAttention::load(weights, &format!("{p}.self_attn"), spec)
}
