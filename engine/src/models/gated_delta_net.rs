//! The Gated DeltaNet mixer of Qwen3-Next and Qwen3.5: linear attention
//! with a fixed state per sequence instead of KV per token.
//!
//! Per token: q, k, v go through a short causal depthwise convolution (its
//! last `kernel - 1` inputs are state) and SiLU; q and k are RMS-normed
//! (q scaled by `1/key_dim`, k by `key_dim^-0.5`); then, per value head,
//! with `g = exp(-exp(A_log) * softplus(a + dt_bias))` and `beta =
//! sigmoid(b)`: `S <- g S; S <- S + k (x) ((v - S k) beta); y = S q`. The
//! output goes through a gated RMSNorm (`rms_norm(y) * silu(z)`) and the
//! output projection. Conv and delta states are f32.
//!
//! On the CPU the recurrence of a chunk is one op, afm's primitive
//! ([`cpu::delta_net`]), and with packed weights the whole layer is one
//! (`models::layer_op`); elsewhere (Metal, `AFM_LAYER=off`) it runs as MLX
//! ops, one set per token of a chunk (as mlx-lm's CPU path does): a decode
//! step costs one set for the whole decode group; a prefill chunk of `l`
//! tokens costs `l` sets.

use mlx_rs::fast::rms_norm;
use mlx_rs::ops::indexing::IndexOp;
use mlx_rs::ops::{broadcast_to, concatenate, exp, logaddexp, sigmoid, stack, sum_axis};
use mlx_rs::Array;

use super::forward::{ForwardContext, States};
use super::kv_layout::RecurrentLayer;
use crate::cpu;
use crate::error::{EngineError, Result};
use crate::layers::{FusedLinear, Linear};
use crate::loading::config::HyperParams;
use crate::loading::weights::TensorMap;

/// The mixer's sizes, from the config's `linear_*` keys.
#[derive(Debug, Clone, Copy)]
pub struct DeltaNetDims {
    pub key_heads: usize,
    pub value_heads: usize,
    pub key_dim: usize,
    pub value_dim: usize,
    pub conv_kernel: usize,
    pub eps: f32,
}

impl DeltaNetDims {
    pub fn read(hyper: &HyperParams, eps: f32, origin: &str) -> Result<Self> {
        let need = |key: &str| {
            hyper
                .usize(&[key])
                .ok_or_else(|| EngineError::invalid_model(origin, format!("config lacks {key}")))
        };
        let dims = DeltaNetDims {
            key_heads: need("linear_num_key_heads")?,
            value_heads: need("linear_num_value_heads")?,
            key_dim: need("linear_key_head_dim")?,
            value_dim: need("linear_value_head_dim")?,
            conv_kernel: hyper.usize(&["linear_conv_kernel_dim"]).unwrap_or(4),
            eps,
        };
        if dims.key_heads == 0
            || !dims.value_heads.is_multiple_of(dims.key_heads)
            || dims.conv_kernel < 2
        {
            return Err(EngineError::invalid_model(
                origin,
                format!(
                    "linear attention with {} value heads over {} key heads and a \
                     convolution of {}",
                    dims.value_heads, dims.key_heads, dims.conv_kernel
                ),
            ));
        }
        Ok(dims)
    }

    fn key_total(&self) -> usize {
        self.key_heads * self.key_dim
    }

    fn value_total(&self) -> usize {
        self.value_heads * self.value_dim
    }

    /// Channels of the convolution: q, k and v side by side.
    fn conv_dim(&self) -> usize {
        2 * self.key_total() + self.value_total()
    }

    /// What the batch store keeps for one such layer.
    pub fn state(&self) -> RecurrentLayer {
        RecurrentLayer {
            conv_len: self.conv_kernel - 1,
            conv_dim: self.conv_dim(),
            value_heads: self.value_heads,
            value_dim: self.value_dim,
            key_dim: self.key_dim,
        }
    }
}

/// How a checkpoint stores the input projections.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Projections {
    /// Qwen3-Next: `in_proj_qkvz` and `in_proj_ba`, rows grouped per key
    /// head (`[q, k, v.., z..]` and `[b.., a..]` for each).
    FusedPerKeyHead,
    /// Qwen3.5: `in_proj_qkv`, `in_proj_z`, `in_proj_b`, `in_proj_a`.
    Separate,
}

/// A mixer as a whole-layer primitive takes it (`models::layer_op`).
pub struct DeltaNetParts<'a> {
    /// q, k, v, z, b and a as one product.
    pub input: &'a FusedLinear,
    pub output: &'a Linear,
    /// `[kernel, conv_dim]`.
    pub conv: &'a Array,
    /// `exp(A_log)`.
    pub decay: &'a Array,
    pub dt_bias: &'a Array,
    /// The gated norm's weight.
    pub norm: &'a Array,
    pub dims: DeltaNetDims,
}

pub struct GatedDeltaNet {
    /// qkv, z, b and a as one matmul (rows regrouped at load).
    proj: FusedLinear,
    /// The depthwise convolution, `[kernel, conv_dim]`.
    conv: Array,
    /// `exp(A_log)`, `[value_heads]`.
    decay_rate: Array,
    dt_bias: Array,
    /// The gated norm's weight, `[value_dim]`.
    norm: Array,
    out: Linear,
    dims: DeltaNetDims,
}

impl GatedDeltaNet {
    /// The mixer under `prefix` (e.g. `model.layers.0.linear_attn`).
    pub fn load(
        weights: &TensorMap,
        prefix: &str,
        dims: DeltaNetDims,
        layout: Projections,
    ) -> Result<Self> {
        let linear = |name: &str| weights.linear(&format!("{prefix}.{name}"));
        let parts = match layout {
            Projections::Separate => vec![
                linear("in_proj_qkv")?,
                linear("in_proj_z")?,
                linear("in_proj_b")?,
                linear("in_proj_a")?,
            ],
            Projections::FusedPerKeyHead => {
                let [qkv, z, b, a] =
                    regroup(&linear("in_proj_qkvz")?, &linear("in_proj_ba")?, &dims)?;
                vec![qkv, z, b, a]
            }
        };
        // MLX stores the convolution `[channels, kernel, 1]`, HF/PyTorch
        // `[channels, 1, kernel]`.
        let w = weights.dense(&format!("{prefix}.conv1d.weight"))?;
        let kernel = dims.conv_kernel as i32;
        let conv = match w.shape() {
            [c, k, 1] if *k == kernel => w.reshape(&[*c, kernel])?,
            [c, 1, k] if *k == kernel => w.reshape(&[*c, kernel])?,
            shape => {
                return Err(EngineError::invalid_model(
                    weights.origin(),
                    format!("{prefix}.conv1d.weight has shape {shape:?}"),
                ))
            }
        };
        Ok(GatedDeltaNet {
            proj: FusedLinear::new(parts)?,
            conv: conv.t().contiguous()?,
            decay_rate: exp(weights.dense(&format!("{prefix}.A_log"))?)?,
            dt_bias: weights.dense(&format!("{prefix}.dt_bias"))?,
            norm: weights.dense(&format!("{prefix}.norm.weight"))?,
            out: linear("out_proj")?,
            dims,
        })
    }

    /// The mixer's parts as a whole-layer primitive takes them.
    pub fn layer_parts(&self) -> DeltaNetParts<'_> {
        DeltaNetParts {
            input: &self.proj,
            output: &self.out,
            conv: &self.conv,
            decay: &self.decay_rate,
            dt_bias: &self.dt_bias,
            norm: &self.norm,
            dims: self.dims,
        }
    }

    /// What the batch store keeps for this layer.
    pub fn state(&self) -> RecurrentLayer {
        self.dims.state()
    }

    /// Whether a checkpoint's convolution is in the HF layout (its norms
    /// are then zero-centred, as mlx-lm's sanitize reads them).
    pub fn hf_layout(weights: &TensorMap, prefix: &str) -> Result<bool> {
        let w = weights.dense(&format!("{prefix}.conv1d.weight"))?;
        Ok(w.ndim() == 3 && w.dim(-1) != 1)
    }

    /// Recurrent layer `layer`'s mixer over the batch rows `x`.
    pub fn forward(&self, ctx: &mut ForwardContext, layer: usize, x: &Array) -> Result<Array> {
        let [qkv, z, b, a]: [Array; 4] = ctx
            .fused(&self.proj, x)?
            .try_into()
            .expect("qkv, z, b and a");
        let rows = x.dim(1);
        let (hv, dv) = (self.dims.value_heads as i32, self.dims.value_dim as i32);
        let input = concatenate(&[qkv, b, a], -1)?;
        let y = ctx.recurrent(layer, &input, |x, state| self.step(x, state))?;
        let y = rms_norm(
            y.reshape(&[1, rows, hv, dv])?,
            Some(&self.norm),
            self.dims.eps,
        )?;
        let z = mlx_rs::nn::silu(z.reshape(&[1, rows, hv, dv])?)?;
        ctx.linear(&self.out, &z.multiply(&y)?.reshape(&[1, rows, hv * dv])?)
    }

    /// The recurrence over `x` (`[n, l, conv_dim + 2 * value_heads]`: qkv,
    /// b, a) from `(conv, delta)`.
    fn step(&self, x: &Array, (conv_state, mut state): States) -> Result<(Array, States)> {
        let d = &self.dims;
        if cpu::layer::path().is_primitive() {
            let dims = cpu::delta_net::Dims {
                key_heads: d.key_heads,
                value_heads: d.value_heads,
                key_dim: d.key_dim,
                value_dim: d.value_dim,
            };
            let (y, conv, state) = cpu::delta_net::delta_net(
                x,
                (&conv_state, &state),
                &self.conv,
                &self.decay_rate,
                &self.dt_bias,
                dims,
            )?;
            return Ok((y, (conv, state)));
        }
        let (n, l) = (x.dim(0), x.dim(1));
        let (c, hv) = (d.conv_dim() as i32, d.value_heads as i32);
        let kernel = d.conv_kernel as i32;
        let qkv = x.index((.., .., ..c));
        let b = x.index((.., .., c..c + hv));
        let a = x.index((.., .., c + hv..));

        // The causal convolution over the kept inputs and the new ones.
        let conv_in = concatenate(&[conv_state, qkv], 1)?;
        let new_conv = conv_in.index((.., l.., ..));
        let mut conv_out = conv_in.index((.., 0..l, ..)).multiply(self.conv.index(0))?;
        for j in 1..kernel {
            conv_out = conv_out.add(
                conv_in
                    .index((.., j..j + l, ..))
                    .multiply(self.conv.index(j))?,
            )?;
        }
        let conv_out = mlx_rs::nn::silu(conv_out)?;

        let (hk, dk, dv) = (d.key_heads as i32, d.key_dim as i32, d.value_dim as i32);
        let kt = d.key_total() as i32;
        let heads = |t: Array, h: i32, dim: i32| t.reshape(&[n, l, h, dim]);
        let q = heads(conv_out.index((.., .., ..kt)), hk, dk)?;
        let k = heads(conv_out.index((.., .., kt..2 * kt)), hk, dk)?;
        let v = heads(conv_out.index((.., .., 2 * kt..)), hv, dv)?;
        // L2 norms as RMS norms: rms_norm adds its eps to the mean square,
        // the reference adds 1e-6 to the sum.
        let inv = (d.key_dim as f32).powf(-0.5);
        let eps = 1e-6 * inv * inv;
        let q = rms_norm(q, None, eps)?.multiply(Array::from_f32(inv * inv))?;
        let k = rms_norm(k, None, eps)?.multiply(Array::from_f32(inv))?;
        // Each key head serves `hv / hk` consecutive value heads.
        let repeat = |t: Array| -> Result<Array> {
            let r = hv / hk;
            if r == 1 {
                return Ok(t);
            }
            let t = broadcast_to(t.reshape(&[n, l, hk, 1, dk])?, &[n, l, hk, r, dk])?;
            Ok(t.reshape(&[n, l, hv, dk])?)
        };
        let (q, k) = (repeat(q)?, repeat(k)?);

        let beta = sigmoid(&b)?;
        let softplus = logaddexp(a.add(&self.dt_bias)?, Array::from_f32(0.0))?;
        let g = exp(self.decay_rate.multiply(&softplus)?.negative()?)?;

        let mut ys = Vec::with_capacity(l as usize);
        for t in 0..l {
            let at = |x: &Array| x.index((.., t));
            let (q, k, v) = (at(&q), at(&k), at(&v)); // [n, hv, d]
            let k_row = k.reshape(&[n, hv, 1, dk])?;
            state = state.multiply(at(&g).reshape(&[n, hv, 1, 1])?)?;
            let remembered = sum_axis(&state.multiply(&k_row)?, -1, false)?; // [n, hv, dv]
            let delta = v
                .subtract(&remembered)?
                .multiply(at(&beta).reshape(&[n, hv, 1])?)?;
            state = state.add(k_row.multiply(delta.reshape(&[n, hv, dv, 1])?)?)?;
            ys.push(sum_axis(
                &state.multiply(q.reshape(&[n, hv, 1, dk])?)?,
                -1,
                false,
            )?);
        }
        let y = stack(&ys, 1)?.reshape(&[n, l, hv * dv])?;
        Ok((y, (new_conv, state)))
    }

    /// The stored weight arrays (to evaluate them at load).
    pub fn stored(&self) -> Vec<Array> {
        let mut out = self.proj.stored();
        out.extend([
            self.conv.clone(),
            self.decay_rate.clone(),
            self.dt_bias.clone(),
            self.norm.clone(),
            self.out.stored(),
        ]);
        out
    }
}

/// Qwen3-Next's projections, whose rows interleave the parts per key head,
/// as four projections whose rows run over all heads in order: qkv, z, b
/// and a.
fn regroup(qkvz: &Linear, ba: &Linear, d: &DeltaNetDims) -> Result<[Linear; 4]> {
    let (dk, r, dv) = (
        d.key_dim as i32,
        (d.value_heads / d.key_heads) as i32,
        d.value_dim as i32,
    );
    let heads = d.key_heads as i32;
    // Per key head: q (dk), k (dk), v (r * dv), z (r * dv).
    let per_head = 2 * dk + 2 * r * dv;
    let part = |from: i32, len: i32, stride: i32| -> Vec<i32> {
        (0..heads)
            .flat_map(|h| (h * stride + from)..(h * stride + from + len))
            .collect()
    };
    let mut qkv_rows = part(0, dk, per_head);
    qkv_rows.extend(part(dk, dk, per_head));
    qkv_rows.extend(part(2 * dk, r * dv, per_head));
    let z_rows = part(2 * dk + r * dv, r * dv, per_head);
    // Per key head: b (r), a (r).
    let b_rows = part(0, r, 2 * r);
    let a_rows = part(r, r, 2 * r);
    Ok([
        qkvz.rows(&qkv_rows)?,
        qkvz.rows(&z_rows)?,
        ba.rows(&b_rows)?,
        ba.rows(&a_rows)?,
    ])
}
