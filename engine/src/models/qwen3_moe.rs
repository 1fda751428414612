//! Qwen3-MoE (Qwen3-Coder, Qwen3-A3B): Qwen3's attention; in sparse layers
//! a router picks the top-k of `num_experts` SwiGLU experts per token
//! (softmax over all experts, optionally renormalised over the chosen k)
//! and the experts run through MLX's gather matmul; other layers keep a
//! dense MLP.

use mlx_rs::ops::indexing::IndexOp;
use mlx_rs::ops::{argpartition_axis, expand_dims_axes, gather_mm, softmax_axis, stack, sum_axis};
use mlx_rs::Array;

use super::causal_lm::CausalLm;
use super::decoder::{Decoder, DecoderLayer};
use super::feed_forward::FeedForward;
use super::forward::ForwardContext;
use super::gated_mlp::{Activation, GatedMlp};
use super::qwen3;
use crate::error::{EngineError, Result};
use crate::loading::config::{HyperParams, ModelConfig};
use crate::loading::weights::{Linear, TensorMap};

/// The registry's loader: reads the expert hyper-parameters.
pub fn load(
    config: ModelConfig,
    hyper: &HyperParams,
    weights: &TensorMap,
) -> Result<Box<dyn CausalLm>> {
    let missing =
        |key: &str| EngineError::invalid_model(weights.origin(), format!("qwen3_moe needs {key}"));
    let experts = hyper
        .usize(&["num_experts", "expert_count"])
        .ok_or_else(|| missing("num_experts"))?;
    let top_k = hyper
        .usize(&["num_experts_per_tok", "expert_used_count"])
        .ok_or_else(|| missing("num_experts_per_tok"))?;
    // llama.cpp's qwen3moe always renormalises the chosen weights.
    let normalize = hyper
        .get(&["norm_topk_prob"])
        .and_then(|v| v.as_bool())
        .unwrap_or(true);
    let sparse_step = hyper.usize(&["decoder_sparse_step"]).unwrap_or(1).max(1);
    let dense_only: Vec<usize> = hyper
        .get(&["mlp_only_layers"])
        .and_then(|v| v.as_array())
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_u64())
                .map(|v| v as usize)
                .collect()
        })
        .unwrap_or_default();
    let c = config.clone();
    let decoder = Decoder::load(config, weights, |i, p| {
        let sparse = experts > 0 && !dense_only.contains(&i) && (i + 1) % sparse_step == 0;
        let ffn: Box<dyn FeedForward> = if sparse {
            Box::new(SparseMoe::load(
                weights,
                &format!("{p}.mlp"),
                experts,
                top_k,
                normalize,
            )?)
        } else {
            Box::new(GatedMlp::load(
                weights,
                &format!("{p}.mlp"),
                Activation::Silu,
            )?)
        };
        Ok(DecoderLayer {
            attention: qwen3::attention(&c, weights, p)?,
            ffn,
        })
    })?;
    Ok(Box::new(decoder))
}

/// A routed mixture of SwiGLU experts.
struct SparseMoe {
    /// The router: `[experts, dim]`.
    router: Linear,
    /// Each projection for every expert, transposed for `x @ w`:
    /// gate and up `[experts, dim, inter]`, down `[experts, inter, dim]`.
    gate: Array,
    up: Array,
    down: Array,
    top_k: i32,
    normalize: bool,
}

impl SparseMoe {
    /// Experts as MLX folders store them (`switch_mlp.<proj>.weight`,
    /// stacked) or as HF does (`experts.<e>.<proj>.weight`, one each).
    fn load(
        weights: &TensorMap,
        prefix: &str,
        experts: usize,
        top_k: usize,
        normalize: bool,
    ) -> Result<Self> {
        let stacked = |proj: &str| -> Result<Array> {
            let switch = format!("{prefix}.switch_mlp.{proj}");
            let w = if weights.contains(&format!("{switch}.weight")) {
                weights.linear(&switch)?.to_dense()?
            } else {
                let each = (0..experts)
                    .map(|e| {
                        weights
                            .linear(&format!("{prefix}.experts.{e}.{proj}"))?
                            .to_dense()
                    })
                    .collect::<Result<Vec<_>>>()?;
                stack(&each, 0)?
            };
            // [experts, out, in] -> [experts, in, out]
            Ok(w.transpose_axes(&[0, 2, 1])?.contiguous()?)
        };
        Ok(SparseMoe {
            router: weights.linear(&format!("{prefix}.gate"))?,
            gate: stacked("gate_proj")?,
            up: stacked("up_proj")?,
            down: stacked("down_proj")?,
            top_k: top_k as i32,
            normalize,
        })
    }
}

impl FeedForward for SparseMoe {
    fn forward(&self, ctx: &ForwardContext, x: &Array) -> Result<Array> {
        let k = self.top_k;
        let gates = softmax_axis(&ctx.linear(&self.router, x)?, -1, true)?;
        // The k best experts per row (in no particular order) and their
        // weights.
        let experts = gates.dim(-1);
        let chosen = argpartition_axis(&gates, experts - k, -1)?.index((.., .., experts - k..));
        let mut scores = gates.take_along_axis(&chosen, -1)?;
        if self.normalize {
            scores = scores.divide(sum_axis(&scores, -1, true)?)?;
        }
        // Row r goes through its k experts: [1, rows, 1, 1, dim] against
        // [experts, dim, inter] picked by [1, rows, k].
        let rows = expand_dims_axes(x, &[-2, -3])?;
        let through = |w: &Array, input: &Array| gather_mm(input, w, None, &chosen, false);
        let hidden =
            mlx_rs::nn::silu(through(&self.gate, &rows)?)?.multiply(through(&self.up, &rows)?)?;
        let out = through(&self.down, &hidden)?; // [1, rows, k, 1, dim]
        let out = out.squeeze_axes(&[-2])?; // [1, rows, k, dim]
        let weighted = out.multiply(expand_dims_axes(&scores, &[-1])?)?;
        Ok(sum_axis(&weighted, -2, false)?)
    }

    fn stored(&self) -> Vec<Array> {
        vec![
            self.router.stored(),
            self.gate.clone(),
            self.up.clone(),
            self.down.clone(),
        ]
    }

    fn batch_invariant(&self) -> bool {
        false
    }
}
