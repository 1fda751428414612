//! A decoder layer (attention or a Gated DeltaNet recurrence, then a gated
//! MLP or routed experts) as ONE op on the CPU:
//! afm's whole-layer primitive ([`cpu::layer`]), where the layer's parts
//! are ones it runs. Built at load beside the layer's op-graph form, which
//! stays the route for everything else: Metal, `AFM_LAYER=off`, layers it
//! does not take (dense or unsupported weights). A
//! layer that takes it does so in every pass (decoding rows, prefill chunks
//! or both), so a row's arithmetic never depends on what else shares its
//! pass.

use mlx_rs::Array;

use super::feed_forward::{FeedForward, LayerParts};
use super::forward::ForwardContext;
use super::gated_delta_net::GatedDeltaNet;
use super::self_attention::SelfAttention;
use crate::cpu;
use crate::cpu::layer::{Config, Format, Gemma4, PerLayer, Recurrent, Routed, Rows};
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

/// What Gemma 4 adds to a layer: the MoE block's routed experts beside
/// the dense MLP (26B-A4B), and after the feed-forward block the per-layer
/// input (its gate and projection, its norm and the layer's index among
/// the pass's per-layer inputs) and the layer scalar.
pub struct Gemma4Parts<'a> {
    pub moe: Option<Gemma4MoeParts<'a>>,
    pub per_layer: Option<PerLayerParts<'a>>,
    pub scalar: &'a Array,
}

/// Gemma 4's routed experts: the router reads `norm(h, router_norm)`, the
/// experts `norm(h, experts_norm)`; the routed sum is normed by
/// `experts_out_norm`, the dense MLP's output by `dense_out_norm`.
pub struct Gemma4MoeParts<'a> {
    pub router: &'a Linear,
    pub router_norm: &'a Array,
    pub expert_scale: &'a Array,
    pub gate: &'a QuantizedWeight,
    pub up: &'a QuantizedWeight,
    pub down: &'a QuantizedWeight,
    pub top_k: usize,
    pub experts_norm: &'a Array,
    pub experts_out_norm: &'a Array,
    pub dense_out_norm: &'a Array,
}

pub struct PerLayerParts<'a> {
    pub gate: &'a Linear,
    pub projection: &'a Linear,
    pub norm: &'a Array,
    pub index: usize,
}

pub struct LayerOp {
    /// The primitive's inputs after `h` and the store, in its order, up to
    /// the per-layer inputs (which come with each pass).
    weights: Vec<Array>,
    /// Its inputs after the per-layer inputs.
    end_weights: Vec<Array>,
    config: Config,
}

/// The feed-forward block's part of a layer's inputs and config.
struct FeedForwardParts<'a> {
    packed: Vec<&'a QuantizedWeight>,
    act: cpu::glu::Act,
    routed: Option<Routed>,
}

impl<'a> FeedForwardParts<'a> {
    fn of(ffn: &'a dyn FeedForward) -> Option<Self> {
        Some(match ffn.layer_parts()? {
            LayerParts::Gated(mlp) => FeedForwardParts {
                packed: vec![one(mlp.gate_up)?, mlp.down.packed()?],
                act: mlp.act,
                routed: None,
            },
            LayerParts::Routed(experts) => {
                let mut packed = vec![
                    experts.router.packed()?,
                    experts.gate,
                    experts.up,
                    experts.down,
                ];
                if let Some(shared) = &experts.shared {
                    // One activation serves the routed and shared experts.
                    if shared.mlp.act != experts.act {
                        return None;
                    }
                    packed.extend([
                        one(shared.mlp.gate_up)?,
                        shared.mlp.down.packed()?,
                        shared.gate.packed()?,
                    ]);
                }
                FeedForwardParts {
                    packed,
                    act: experts.act,
                    routed: Some(Routed {
                        experts: experts.gate.weight.dim(0) as usize,
                        top_k: experts.top_k,
                        normalize: experts.normalize,
                        shared: experts.shared.is_some(),
                    }),
                }
            }
        })
    }
}

/// The primitive's inputs after `h` and the store: the mixer norm, the
/// mixer's two products, the feed-forward norm and products, the mixer's
/// own arrays (`extra`), then the output norms.
fn inputs(
    norms: &LayerNorms,
    packed: &[&QuantizedWeight],
    extra: Vec<Array>,
) -> Option<Vec<Array>> {
    let mut weights = vec![norms.attn.clone()];
    for (i, q) in packed.iter().enumerate() {
        if i == 2 {
            weights.push(norms.ffn.clone());
        }
        weights.extend([q.weight.clone(), q.scales.clone(), q.biases.clone()?]);
    }
    weights.extend(extra);
    weights.extend(norms.attn_out.cloned());
    weights.extend(norms.ffn_out.cloned());
    Some(weights)
}

fn formats(packed: &[&QuantizedWeight]) -> Vec<Format> {
    packed
        .iter()
        .map(|q| Format {
            bits: q.bits,
            group_size: q.group_size,
        })
        .collect()
}

impl LayerOp {
    /// The layer's one-op form, or `None` where the primitive does not run
    /// it (the layer then stays MLX ops).
    pub fn new(
        norms: LayerNorms,
        attention: &SelfAttention,
        ffn: &dyn FeedForward,
    ) -> Option<Self> {
        Self::attention(norms, attention, ffn, None)
    }

    /// A Gemma 4 layer's one-op form: [`new`](Self::new)'s (`ffn` being
    /// the dense MLP), with the MoE block's experts beside it, and ending
    /// with the per-layer input and the layer scalar.
    pub fn gemma4(
        norms: LayerNorms,
        attention: &SelfAttention,
        ffn: &dyn FeedForward,
        parts: Gemma4Parts,
    ) -> Option<Self> {
        Self::attention(norms, attention, ffn, Some(parts))
    }

    fn attention(
        norms: LayerNorms,
        attention: &SelfAttention,
        ffn: &dyn FeedForward,
        gemma4_parts: Option<Gemma4Parts>,
    ) -> Option<Self> {
        if !cpu::layer::path().is_primitive() {
            return None;
        }
        let spec = attention.spec();
        let (qkv, o) = attention.projections();
        let mut ff = FeedForwardParts::of(ffn)?;
        let mut packed = vec![one(qkv)?, o.packed()?];
        let moe = gemma4_parts.as_ref().and_then(|e| e.moe.as_ref());
        if let Some(m) = moe {
            // The experts (products 2-5), then the dense MLP (6 and 7).
            if ff.routed.is_some() {
                return None;
            }
            packed.extend([m.router.packed()?, m.gate, m.up, m.down]);
            ff.routed = Some(Routed {
                experts: m.gate.weight.dim(0) as usize,
                top_k: m.top_k,
                normalize: false,
                shared: false,
            });
        }
        packed.extend(&ff.packed);
        let per_layer = gemma4_parts.as_ref().and_then(|e| e.per_layer.as_ref());
        if let Some(p) = per_layer {
            // Products 4 and 5 (the primitive takes them with a dense MLP).
            if ff.routed.is_some() {
                return None;
            }
            packed.extend([p.gate.packed()?, p.projection.packed()?]);
        }
        let mut extra = Vec::new();
        let qk_norm = spec.qk_norm.as_ref().map(|n| {
            let (q, k, eps) = n.parts();
            extra.extend([q.clone(), k.clone()]);
            eps
        });
        let gemma4 = Gemma4 {
            rope_freqs: spec.rope_freqs.is_some(),
            v_norm: spec.v_norm,
            k_eq_v: spec.k_eq_v,
            kv_shared: spec.shares_kv_of.is_some(),
            per_layer: per_layer.map(|p| PerLayer {
                dim: p.gate.packed().map_or(0, |q| q.weight.dim(0) as usize),
                index: p.index,
            }),
            layer_scalar: gemma4_parts.is_some(),
            moe: moe.is_some(),
        };
        let mut end_weights: Vec<Array> = per_layer.map(|p| p.norm.clone()).into_iter().collect();
        end_weights.extend(gemma4_parts.as_ref().map(|e| e.scalar.clone()));
        let config = Config {
            recurrent: None,
            heads: spec.heads,
            kv_heads: spec.kv_heads,
            head_dim: spec.head_dim,
            formats: formats(&packed),
            routed: ff.routed,
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
            act: ff.act,
            gemma4,
        };
        let mut weights = inputs(&norms, &packed, extra)?;
        weights.extend(spec.rope_freqs.clone());
        if let Some(m) = moe {
            weights.extend(
                [
                    m.router_norm,
                    m.expert_scale,
                    m.experts_norm,
                    m.experts_out_norm,
                    m.dense_out_norm,
                ]
                .map(Array::clone),
            );
        }
        Some(LayerOp {
            weights,
            end_weights,
            config,
        })
    }

    /// A recurrent (Gated DeltaNet) layer's one-op form, or `None` where
    /// the primitive does not run it.
    pub fn recurrent(
        norms: LayerNorms,
        mixer: &GatedDeltaNet,
        ffn: &dyn FeedForward,
    ) -> Option<Self> {
        if !cpu::layer::path().is_primitive() {
            return None;
        }
        let parts = mixer.layer_parts();
        // The gated norm takes the layer norms' eps inside the primitive.
        if parts.dims.eps != norms.eps {
            return None;
        }
        let ff = FeedForwardParts::of(ffn)?;
        let mut packed = vec![one(parts.input)?, parts.output.packed()?];
        packed.extend(&ff.packed);
        let extra = [parts.conv, parts.decay, parts.dt_bias, parts.norm]
            .into_iter()
            .cloned()
            .collect();
        let d = parts.dims;
        let config = Config {
            recurrent: Some(Recurrent {
                key_heads: d.key_heads,
                value_heads: d.value_heads,
                key_dim: d.key_dim,
                value_dim: d.value_dim,
            }),
            heads: 0,
            kv_heads: 0,
            head_dim: 0,
            formats: formats(&packed),
            routed: ff.routed,
            eps: norms.eps,
            qk_norm: None,
            attn_out_norm: norms.attn_out.is_some(),
            ffn_out_norm: norms.ffn_out.is_some(),
            rope_base: 0.0,
            rope_dims: 0,
            output_gate: false,
            rope_traditional: false,
            scale: 0.0,
            window: None,
            act: ff.act,
            gemma4: Gemma4::default(),
        };
        Some(LayerOp {
            weights: inputs(&norms, &packed, extra)?,
            end_weights: Vec::new(),
            config,
        })
    }

    /// The layer over the pass's hidden rows `h` (`[1, rows, dim]`):
    /// `layer` is the attention layer whose store takes its keys and
    /// values, or the recurrent layer whose states it steps. `per_layer`:
    /// the pass's per-layer inputs (`[1, rows, layers, dim]`), for a layer
    /// built with them.
    pub fn forward(
        &self,
        ctx: &mut ForwardContext,
        layer: usize,
        h: &Array,
        rows: &Rows,
        per_layer: Option<&Array>,
    ) -> Result<Array> {
        let blas_min_rows = match ctx.batch_invariant() {
            true => 0,
            false => cpu::qmm::BLAS_MIN_ROWS,
        };
        if self.config.gemma4.per_layer.is_some() != per_layer.is_some() {
            return Err(crate::error::EngineError::Internal(
                "a one-op layer takes per-layer inputs exactly when built with them".into(),
            ));
        }
        let run = |a: &Array, b: &Array| {
            let mut inputs = vec![h, a, b];
            inputs.extend(self.weights.iter());
            inputs.extend(per_layer);
            inputs.extend(self.end_weights.iter());
            cpu::layer::decoder_layer(&inputs, &self.config, rows, blas_min_rows)
        };
        match (self.config.recurrent, self.config.gemma4.kv_shared) {
            (Some(_), _) => ctx.recurrent_layer_op(layer, run),
            (None, true) => ctx.shared_layer_op(layer, run),
            (None, false) => ctx.layer_op(layer, run),
        }
    }
}

/// A fused projection's one packed matrix.
fn one(lin: &FusedLinear) -> Option<&QuantizedWeight> {
    lin.single().and_then(Linear::packed)
}

/// Logs how many of a model's layers run as one op (a model whose weights
/// the primitive does not take keeps its layers as ops, silently otherwise).
pub fn log_coverage(one_op: usize, layers: usize) {
    if cpu::layer::path().is_primitive() {
        tracing::info!("decoder layers as one CPU op: {one_op} of {layers}");
    }
}
