//! Self-attention as HF checkpoints lay it out (`<p>.q_proj`, `k_proj`,
//! `v_proj`, `o_proj`): the three input projections as one matmul, the
//! forward context's shared attention (which applies the spec's q/k norm,
//! RoPE and window), then the output projection, gated when the spec says
//! so.

use mlx_rs::ops::indexing::IndexOp;
use mlx_rs::Array;

use super::forward::{AttentionSpec, ForwardContext};
use crate::error::Result;
use crate::layers::{FusedLinear, Linear};
use crate::loading::weights::TensorMap;

pub struct SelfAttention {
    /// q, k and v projections (and the output gate's) as one matmul.
    qkv: FusedLinear,
    o: Linear,
    spec: AttentionSpec,
}

impl SelfAttention {
    /// The projections under `prefix` (e.g. `model.layers.3.self_attn`).
    pub fn load(weights: &TensorMap, prefix: &str, spec: AttentionSpec) -> Result<Self> {
        let linear = |name: &str| weights.linear(&format!("{prefix}.{name}"));
        // A layer sharing another's KV projects queries only; with K = V
        // there is no value projection.
        let mut parts = vec![linear("q_proj")?];
        if spec.shares_kv_of.is_none() {
            parts.push(linear("k_proj")?);
            if !spec.k_eq_v {
                parts.push(linear("v_proj")?);
            }
        }
        if spec.output_gate {
            // Rows per head: `head_dim` queries, then `head_dim` gate values.
            let d = spec.head_dim as i32;
            let rows = |from: i32| -> Vec<i32> {
                (0..spec.heads as i32)
                    .flat_map(|h| (h * 2 * d + from)..(h * 2 * d + from + d))
                    .collect()
            };
            let q = parts[0].clone();
            parts[0] = q.rows(&rows(0))?;
            parts.push(q.rows(&rows(d))?);
        }
        Ok(SelfAttention {
            qkv: FusedLinear::new(parts)?,
            o: linear("o_proj")?,
            spec,
        })
    }

    pub fn spec(&self) -> &AttentionSpec {
        &self.spec
    }

    /// The q/k/v projections (one matrix when fused) and the output one.
    pub fn projections(&self) -> (&FusedLinear, &Linear) {
        (&self.qkv, &self.o)
    }

    /// Layer `layer`'s attention over the batch rows `x`.
    pub fn forward(&self, ctx: &mut ForwardContext, layer: usize, x: &Array) -> Result<Array> {
        // q and k side by side, so one RoPE call rotates both.
        let spec = &self.spec;
        if spec.output_gate {
            let [qk, v, gate]: [Array; 3] = ctx
                .fused_grouped(&self.qkv, x, &[2, 1, 1])?
                .try_into()
                .expect("q and k, then v, then the gate");
            let o = ctx.attention(layer, &qk, Some(&v), spec)?;
            let o = o.multiply(mlx_rs::ops::sigmoid(&gate)?)?;
            return ctx.linear(&self.o, &o);
        }
        let o = if spec.shares_kv_of.is_some() {
            let q = ctx.fused(&self.qkv, x)?.remove(0);
            ctx.attention(layer, &q, None, spec)?
        } else if spec.k_eq_v {
            let qk = ctx.fused_grouped(&self.qkv, x, &[2])?.remove(0);
            // The values: the key projection's output as it is.
            let v = qk.index((.., .., (spec.heads * spec.head_dim) as i32..));
            ctx.attention(layer, &qk, Some(&v), spec)?
        } else {
            let [qk, v]: [Array; 2] = ctx
                .fused_grouped(&self.qkv, x, &[2, 1])?
                .try_into()
                .expect("q and k, then v");
            ctx.attention(layer, &qk, Some(&v), spec)?
        };
        ctx.linear(&self.o, &o)
    }

    /// The stored weight arrays (to evaluate them at load).
    pub fn stored(&self) -> Vec<Array> {
        let mut out = self.qkv.stored();
        out.push(self.o.stored());
        out
    }
}
