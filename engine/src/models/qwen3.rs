//! Qwen3 (dense): the llama block with a per-head RMSNorm on queries and
//! keys before RoPE; no biases; tied or own LM head.

use super::causal_lm::CausalLm;
use super::decoder::Decoder;
use super::forward::{AttentionSpec, QkNorm};
use super::self_attention::SelfAttention;
use crate::error::Result;
use crate::loading::config::{HyperParams, ModelConfig};
use crate::loading::family::Family;
use crate::loading::weights::TensorMap;

/// How Qwen3's files describe it.
pub const FAMILY: Family = Family::plain("qwen3", "qwen3", "Qwen3ForCausalLM");

/// The registry's loader.
pub fn load(
    config: ModelConfig,
    _hyper: &HyperParams,
    weights: &TensorMap,
) -> Result<Box<dyn CausalLm>> {
    let c = config.clone();
    let decoder = Decoder::swiglu(config, weights, |p| attention(&c, weights, p))?;
    Ok(Box::new(decoder))
}

/// Qwen3's attention under layer prefix `p` (Qwen3-MoE's too).
pub fn attention(config: &ModelConfig, weights: &TensorMap, p: &str) -> Result<SelfAttention> {
    let norm = |name: &str| weights.dense(&format!("{p}.self_attn.{name}.weight"));
    let spec = AttentionSpec {
        qk_norm: Some(QkNorm::new(
            &norm("q_norm")?,
            &norm("k_norm")?,
            config.num_heads,
            config.num_kv_heads,
            config.rms_norm_eps,
        )?),
        ..AttentionSpec::from_config(config)
    };
    SelfAttention::load(weights, &format!("{p}.self_attn"), spec)
}
