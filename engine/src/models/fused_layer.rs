//! A decoder layer (attention, then a gated MLP or routed experts) as ONE
//! op on the CPU:
//! afm's whole-layer primitive ([`cpu::layer`]), where the layer's parts
//! are ones it runs. Built at load beside the layer's op-graph form, which
//! stays the route for everything else: Metal, `AFM_LAYER=off`, layers it
//! does not take (KV-sharing, explicit-frequency RoPE, value norms, dense
//! or unsupported weights, a shared expert beside the routed ones,
//! recurrent mixers). A layer that takes it does so in every pass
//! (decoding rows, prefill chunks or both), so a row's arithmetic never
//! depends on what else shares its pass.

use mlx_rs::Array;

use super::feed_forward::{FeedForward, LayerParts};
use super::forward::ForwardContext;
use super::self_attention::SelfAttention;
use crate::cpu;
use crate::cpu::layer::{Config, Format, Routed, Rows};
use crate::error::Result;
use crate::layers::{FusedLinear, Linear, QuantizedWeight};

/// A layer's norm weights: the attention input's and the MLP input's, and
/// (Gemma) the norms of each block's output before its residual add.
pub struct LayerNorms<'a> {
    pub attn: &'a Array,
    pub attn_out: Option<&'a Array>,
    pub ffn: &'a Array,
    pub ffn_out: Option<&'a Array>,
    pub eps: f32,
}

pub struct FusedLayer {
    /// The primitive's inputs after `h` and the store, in its order.
    weights: Vec<Array>,
    config: Config,
}

impl FusedLayer {
    /// The layer's one-op form, or `None` where the primitive does not run
    /// it (the layer then stays MLX ops).
    pub fn new(
        norms: LayerNorms,
        attention: &SelfAttention,
        ffn: &dyn FeedForward,
    ) -> Option<Self> {
        if !cpu::layer::path().is_primitive() {
            return None;
        }
        let spec = attention.spec();
        let plain = spec.v_norm.is_none()
            && !spec.k_eq_v
            && spec.shares_kv_of.is_none()
            && spec.rope_freqs.is_none();
        if !plain {
            return None;
        }
        let (qkv, o) = attention.projections();
        let mut packed = vec![one(qkv)?, o.packed()?];
        let (act, routed) = match ffn.layer_parts()? {
            LayerParts::Gated(mlp) => {
                packed.extend([one(mlp.gate_up)?, mlp.down.packed()?]);
                (mlp.act, None)
            }
            LayerParts::Routed(experts) => {
                packed.extend([
                    experts.router.packed()?,
                    experts.gate,
                    experts.up,
                    experts.down,
                ]);
                let routed = Routed {
                    experts: experts.gate.weight.dim(0) as usize,
                    top_k: experts.top_k,
                    normalize: experts.normalize,
                };
                (experts.act, Some(routed))
            }
        };
        let mut weights = vec![norms.attn.clone()];
        for (i, q) in packed.iter().enumerate() {
            if i == 2 {
                weights.push(norms.ffn.clone());
            }
            weights.extend([q.weight.clone(), q.scales.clone(), q.biases.clone()?]);
        }
        let qk_norm = spec.qk_norm.as_ref().map(|n| {
            let (q, k, eps) = n.parts();
            weights.extend([q.clone(), k.clone()]);
            eps
        });
        weights.extend(norms.attn_out.cloned());
        weights.extend(norms.ffn_out.cloned());
        let config = Config {
            heads: spec.heads,
            kv_heads: spec.kv_heads,
            head_dim: spec.head_dim,
            formats: packed
                .iter()
                .map(|q| Format {
                    bits: q.bits,
                    group_size: q.group_size,
                })
                .collect(),
            routed,
            eps: norms.eps,
            qk_norm,
            attn_out_norm: norms.attn_out.is_some(),
            ffn_out_norm: norms.ffn_out.is_some(),
            rope_base: spec.rope_base,
            rope_dims: spec.rope_dims,
            output_gate: spec.output_gate,
            rope_traditional: spec.rope_traditional,
            scale: spec.scale,
            window: spec.window,
            act,
        };
        Some(FusedLayer { weights, config })
    }

    /// The layer over the pass's hidden rows `h` (`[1, rows, dim]`), its
    /// keys and values written into attention layer `layer`'s store.
    pub fn forward(
        &self,
        ctx: &mut ForwardContext,
        layer: usize,
        h: &Array,
        rows: &Rows,
    ) -> Result<Array> {
        let blas_min_rows = match ctx.batch_invariant() {
            true => 0,
            false => cpu::qmm::BLAS_MIN_ROWS,
        };
        ctx.layer_op(layer, |keys, values| {
            let mut inputs = vec![h, keys, values];
            inputs.extend(self.weights.iter());
            cpu::layer::decoder_layer(&inputs, &self.config, rows, blas_min_rows)
        })
    }
}

/// A fused projection's one packed matrix.
fn one(lin: &FusedLinear) -> Option<&QuantizedWeight> {
    lin.single().and_then(Linear::packed)
}

/// Logs how many of a model's layers run as one op (a model whose weights
/// the primitive does not take keeps its layers as ops, silently otherwise).
pub fn log_coverage(fused: usize, layers: usize) {
    if cpu::layer::path().is_primitive() {
        tracing::info!("decoder layers as one CPU op: {fused} of {layers}");
    }
}
