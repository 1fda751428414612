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
use crate::loading::weights::TensorMap;

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
