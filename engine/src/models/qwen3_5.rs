//! Qwen3.5 and Qwen3.6 (`qwen3_5`, dense, and `qwen3_5_moe`): Qwen3-Next's
//! hybrid stack ([`super::qwen3_next`]) with the mixer's projections kept
//! apart (`in_proj_qkv`, `in_proj_z`, `in_proj_b`, `in_proj_a`), RoPE
//! settings under `rope_parameters` (its `mrope_section` reduces to plain
//! RoPE for text), and in the MoE variant experts in every layer (HF
//! checkpoints fuse them as `experts.gate_up_proj`). The checkpoints are
//! multimodal: the text model's settings sit in `text_config`, its tensors
//! under `language_model`.

use super::causal_lm::CausalLm;
use super::gated_delta_net::Projections;
use super::qwen3_next::{build, Hybrid};
use super::sparse_moe::Routing;
use crate::error::{EngineError, Result};
use crate::loading::config::{HyperParams, ModelConfig};
use crate::loading::family::Family;
use crate::loading::weights::TensorMap;

/// How Qwen3.5's files describe it (dense; a multimodal checkpoint's
/// text part is `qwen3_5_text`). Loads from HF/MLX folders.
pub const FAMILY: Family = Family {
    aliases: &["qwen3_5_text"],
    ..Family::plain("qwen3_5", "qwen35", "Qwen3_5ForConditionalGeneration")
};

/// The MoE variant's, built by the same [`load`].
pub const MOE_FAMILY: Family = Family {
    aliases: &["qwen3_5_moe_text"],
    ..Family::plain(
        "qwen3_5_moe",
        "qwen35moe",
        "Qwen3_5MoeForConditionalGeneration",
    )
};

/// The registry's loader (both variants: a config without experts is the
/// dense one).
pub fn load(
    config: ModelConfig,
    hyper: &HyperParams,
    weights: &TensorMap,
) -> Result<Box<dyn CausalLm>> {
    let rope = hyper.get(&["rope_parameters"]).and_then(|v| v.as_object());
    let rope_key = |key: &str| rope.and_then(|r| r.get(key));
    let kind = rope_key("rope_type")
        .or_else(|| rope_key("type"))
        .and_then(|v| v.as_str())
        .unwrap_or("default");
    if kind != "default" {
        return Err(EngineError::invalid_model(
            weights.origin(),
            format!(
                "{} rope_type '{kind}' is not supported",
                config.architecture
            ),
        ));
    }
    let routing = match hyper.usize(&["num_experts"]).unwrap_or(0) {
        0 => Routing::dense(),
        _ => Routing::read(hyper, weights.origin(), &config.architecture, true)?.everywhere(),
    };
    let hybrid = Hybrid {
        projections: Projections::Separate,
        routing,
        rope_base: rope_key("rope_theta")
            .and_then(|v| v.as_f64())
            .map_or(config.rope_theta, |v| v as f32),
        partial_rotary: rope_key("partial_rotary_factor")
            .and_then(|v| v.as_f64())
            .map(|v| v as f32)
            .or_else(|| hyper.f32(&["partial_rotary_factor"]))
            .unwrap_or(0.25),
    };
    build(config, hyper, weights, hybrid)
}
