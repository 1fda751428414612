//! Qwen3-Next (Qwen3-Coder-Next): a hybrid stack. Every
//! `full_attention_interval`-th layer is softmax attention with an output
//! gate, q/k norms and partial RoPE; the others are Gated DeltaNet linear
//! attention ([`super::gated_delta_net`]) with a fixed recurrent state.
//! Routed experts with a shared expert where `decoder_sparse_step` and
//! `mlp_only_layers` place them. HF checkpoints store the stack's norms
//! zero-centred (+1 at load) and the convolution as `[channels, 1,
//! kernel]`; MLX folders have both converted. Qwen3.5 builds on the same
//! stack ([`super::qwen3_5`]).

use super::causal_lm::CausalLm;
use super::decoder::{Decoder, DecoderLayer, Mixer, Style};
use super::feed_forward::FeedForward;
use super::forward::{AttentionSpec, QkNorm};
use super::gated_delta_net::{DeltaNetDims, GatedDeltaNet, Projections};
use super::gated_mlp::{Activation, GatedMlp};
use super::self_attention::SelfAttention;
use super::sparse_moe::{Routing, SharedExpertMoe};
use crate::error::{EngineError, Result};
use crate::loading::config::{HyperParams, ModelConfig};
use crate::loading::family::Family;
use crate::loading::weights::TensorMap;

/// How Qwen3-Next's files describe it. It loads from HF/MLX folders; the
/// GGUF name is llama.cpp's, whose recurrent tensors the GGUF path does
/// not map.
pub const FAMILY: Family = Family::plain("qwen3_next", "qwen3next", "Qwen3NextForCausalLM");

/// The registry's loader.
pub fn load(
    config: ModelConfig,
    hyper: &HyperParams,
    weights: &TensorMap,
) -> Result<Box<dyn CausalLm>> {
    if let Some(scaling) = hyper.get(&["rope_scaling"]).filter(|v| !v.is_null()) {
        return Err(EngineError::invalid_model(
            weights.origin(),
            format!("qwen3_next rope_scaling {scaling} is not supported"),
        ));
    }
    let hybrid = Hybrid {
        projections: Projections::FusedPerKeyHead,
        routing: Routing::read(hyper, weights.origin(), "qwen3_next", false)?,
        rope_base: config.rope_theta,
        partial_rotary: hyper.f32(&["partial_rotary_factor"]).unwrap_or(1.0),
    };
    build(config, hyper, weights, hybrid)
}

/// What differs between the hybrid Qwen architectures.
pub(super) struct Hybrid {
    pub projections: Projections,
    pub routing: Routing,
    pub rope_base: f32,
    /// The share of each head RoPE rotates.
    pub partial_rotary: f32,
}

/// The hybrid stack.
pub(super) fn build(
    config: ModelConfig,
    hyper: &HyperParams,
    weights: &TensorMap,
    hybrid: Hybrid,
) -> Result<Box<dyn CausalLm>> {
    let origin = weights.origin();
    let interval = hyper
        .usize(&["full_attention_interval"])
        .unwrap_or(4)
        .max(1);
    let recurrent = |i: usize| !(i + 1).is_multiple_of(interval);
    let dims = DeltaNetDims::read(hyper, config.rms_norm_eps, origin)?;
    let first_recurrent = (0..config.num_layers).find(|&i| recurrent(i));
    let hf = match first_recurrent {
        Some(i) => GatedDeltaNet::hf_layout(weights, &format!("model.layers.{i}.linear_attn"))?,
        None => false,
    };
    let norm_offset = if hf { 1.0 } else { 0.0 };
    let rope_dims = (config.head_dim as f32 * hybrid.partial_rotary) as usize;
    if rope_dims == 0 || rope_dims > config.head_dim || !rope_dims.is_multiple_of(2) {
        return Err(EngineError::invalid_model(
            origin,
            format!(
                "partial_rotary_factor {} of head_dim {}",
                hybrid.partial_rotary, config.head_dim
            ),
        ));
    }
    let c = config.clone();
    let style = Style {
        norm_offset,
        ..Style::default()
    };
    let decoder = Decoder::load_styled(config, weights, style, |i, p| {
        let mixer = if recurrent(i) {
            Mixer::Recurrent(GatedDeltaNet::load(
                weights,
                &format!("{p}.linear_attn"),
                dims,
                hybrid.projections,
            )?)
        } else {
            let norm = |name: &str| -> Result<_> {
                Ok(weights
                    .dense(&format!("{p}.self_attn.{name}.weight"))?
                    .add(mlx_rs::Array::from_f32(norm_offset))?)
            };
            let spec = AttentionSpec {
                qk_norm: Some(QkNorm::new(
                    &norm("q_norm")?,
                    &norm("k_norm")?,
                    c.num_heads,
                    c.num_kv_heads,
                    c.rms_norm_eps,
                )?),
                rope_base: hybrid.rope_base,
                rope_dims,
                output_gate: true,
                ..AttentionSpec::from_config(&c)
            };
            Mixer::Attention(SelfAttention::load(
                weights,
                &format!("{p}.self_attn"),
                spec,
            )?)
        };
        let mlp = format!("{p}.mlp");
        let ffn: Box<dyn FeedForward> = match hybrid.routing.sparse(i) {
            true => Box::new(SharedExpertMoe::load(weights, &mlp, &hybrid.routing)?),
            false => Box::new(GatedMlp::load(weights, &mlp, Activation::Silu)?),
        };
        Ok(DecoderLayer { mixer, ffn })
    })?;
    Ok(Box::new(decoder))
}
