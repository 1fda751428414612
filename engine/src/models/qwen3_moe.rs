//! Qwen3-MoE (Qwen3-Coder, Qwen3-A3B): Qwen3's attention; routed SwiGLU
//! experts ([`super::sparse_moe`]) in the layers `decoder_sparse_step` and
//! `mlp_only_layers` pick; a dense MLP in the others. (llama.cpp's
//! qwen3moe always renormalises the chosen weights: so does a config
//! without `norm_topk_prob`.)

use super::causal_lm::CausalLm;
use super::decoder::{Decoder, DecoderLayer, Mixer};
use super::feed_forward::FeedForward;
use super::gated_mlp::{Activation, GatedMlp};
use super::qwen3;
use super::sparse_moe::{Routing, SparseMoe};
use crate::error::Result;
use crate::loading::config::{HyperParams, ModelConfig};
use crate::loading::family::Family;
use crate::loading::weights::TensorMap;

/// How Qwen3-MoE's files describe it: GGUF names its expert counts and
/// stacked experts its own way.
pub const FAMILY: Family = Family {
    gguf_keys: &[
        ("expert_count", "num_experts"),
        ("expert_used_count", "num_experts_per_tok"),
        ("expert_feed_forward_length", "moe_intermediate_size"),
    ],
    gguf_tensors: &[
        ("ffn_gate_inp", "mlp.gate"),
        ("ffn_gate_exps", "mlp.switch_mlp.gate_proj"),
        ("ffn_up_exps", "mlp.switch_mlp.up_proj"),
        ("ffn_down_exps", "mlp.switch_mlp.down_proj"),
    ],
    ..Family::plain("qwen3_moe", "qwen3moe", "Qwen3MoeForCausalLM")
};

/// The registry's loader: reads the expert hyper-parameters.
pub fn load(
    config: ModelConfig,
    hyper: &HyperParams,
    weights: &TensorMap,
) -> Result<Box<dyn CausalLm>> {
    let routing = Routing::read(hyper, weights.origin(), "qwen3_moe", true)?;
    let c = config.clone();
    let decoder = Decoder::load(config, weights, |i, p| {
        let ffn: Box<dyn FeedForward> = if routing.sparse(i) {
            Box::new(SparseMoe::load(weights, &format!("{p}.mlp"), &routing)?)
        } else {
            Box::new(GatedMlp::load(
                weights,
                &format!("{p}.mlp"),
                Activation::Silu,
            )?)
        };
        Ok(DecoderLayer {
            mixer: Mixer::Attention(qwen3::attention(&c, weights, p)?),
            ffn,
        })
    })?;
    Ok(Box::new(decoder))
}
