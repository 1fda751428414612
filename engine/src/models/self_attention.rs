//! Self-attention as HF checkpoints lay it out (`<p>.q_proj`, `k_proj`,
//! `v_proj`, `o_proj`): the three input projections as one matmul, the
//! forward context's shared attention (which applies the spec's q/k norm,
//! RoPE and window), then the output projection.

use mlx_rs::Array;

use super::forward::{AttentionSpec, ForwardContext};
use crate::error::Result;
use crate::loading::weights::{FusedLinear, Linear, TensorMap};

pub struct SelfAttention {
    /// q, k and v projections as one matmul.
    qkv: FusedLinear,
    o: Linear,
    spec: AttentionSpec,
}

impl SelfAttention {
    /// The projections under `prefix` (e.g. `model.layers.3.self_attn`).
    pub fn load(weights: &TensorMap, prefix: &str, spec: AttentionSpec) -> Result<Self> {
        let linear = |name: &str| weights.linear(&format!("{prefix}.{name}"));
        Ok(SelfAttention {
            qkv: FusedLinear::new(vec![
                linear("q_proj")?,
                linear("k_proj")?,
                linear("v_proj")?,
            ])?,
            o: linear("o_proj")?,
            spec,
        })
    }

    pub fn spec(&self) -> &AttentionSpec {
        &self.spec
    }

    /// Layer `layer`'s attention over the batch rows `x`.
    pub fn forward(&self, ctx: &mut ForwardContext, layer: usize, x: &Array) -> Result<Array> {
        // q and k side by side, so one RoPE call rotates both.
        let [qk, v]: [Array; 2] = ctx
            .fused_grouped(&self.qkv, x, &[2, 1])?
            .try_into()
            .expect("q and k, then v");
        let o = ctx.attention(layer, &qk, &v, &self.spec)?;
        ctx.linear(&self.o, &o)
    }

    /// The stored weight arrays (to evaluate them at load).
    pub fn stored(&self) -> Vec<Array> {
        let mut out = self.qkv.stored();
        out.push(self.o.stored());
        out
    }
}
