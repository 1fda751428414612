//! The three attention paths every architecture shares: the decode group
//! (one RoPE call for every one-token item), a prefill chunk, and the
//! fixed-shape path of batch-invariant mode. Each item attends over its own
//! cache only, so no sequence ever reads another's memory.

use mlx_rs::fast::{
    rms_norm, rope, rope_dynamic, scaled_dot_product_attention, ScaledDotProductAttentionMask,
};
use mlx_rs::ops::concatenate;
use mlx_rs::ops::indexing::IndexOp;
use mlx_rs::Array;

use super::batch_item::BatchItem;
use super::layout::DecodeGroup;
use super::linear::ROW_BLOCK;
use crate::error::Result;
use crate::loading::config::ModelConfig;
use crate::models::kv_layout::LayerKv;

/// One layer's attention shape, position encoding and reach.
#[derive(Debug, Clone)]
pub struct AttentionSpec {
    pub heads: usize,
    pub kv_heads: usize,
    pub head_dim: usize,
    /// Multiplies the query-key scores (`head_dim^-0.5` for most models).
    pub scale: f32,
    pub rope_base: f32,
    /// Interleaved ("traditional") RoPE instead of rotate-half.
    pub rope_traditional: bool,
    /// Per-head RMSNorm of queries and keys before RoPE (Qwen3, Gemma 3).
    pub qk_norm: Option<QkNorm>,
    /// Sliding-window attention: a query sees at most this many most
    /// recent positions, itself included (`None`: all of them).
    pub window: Option<usize>,
}

/// Per-head RMSNorm of queries and keys, both in one call over the joint
/// q-and-k heads: normalised without weight, then scaled by the query
/// weight on query heads and the key weight on key heads.
#[derive(Debug, Clone)]
pub struct QkNorm {
    /// `[heads + kv_heads, 1, head_dim]`.
    weight: Array,
    eps: f32,
}

impl QkNorm {
    /// `q`, `k`: the `[head_dim]` weights of the query and key norms.
    pub fn new(q: &Array, k: &Array, heads: usize, kv_heads: usize, eps: f32) -> Result<Self> {
        let d = q.dim(0);
        let per_head = |w: &Array, n: usize| -> Result<Array> {
            Ok(mlx_rs::ops::broadcast_to(
                w.reshape(&[1, 1, d])?,
                &[n as i32, 1, d],
            )?)
        };
        let weight = concatenate(&[per_head(q, heads)?, per_head(k, kv_heads)?], 0)?;
        weight.eval()?;
        Ok(QkNorm { weight, eps })
    }

    /// `qk`: `[n, heads + kv_heads, l, d]`.
    fn apply(&self, qk: &Array) -> Result<Array> {
        Ok(rms_norm(qk, None, self.eps)?.multiply(&self.weight)?)
    }
}

impl AttentionSpec {
    /// Plain grouped-query attention from the common hyper-parameters:
    /// `head_dim^-0.5` scale, the config's RoPE, no q/k norm, no window.
    /// Architectures change the fields that are their own.
    pub fn from_config(config: &ModelConfig) -> Self {
        AttentionSpec {
            heads: config.num_heads,
            kv_heads: config.num_kv_heads,
            head_dim: config.head_dim,
            scale: (config.head_dim as f32).powf(-0.5),
            rope_base: config.rope_theta,
            rope_traditional: config.rope_traditional,
            qk_norm: None,
            window: None,
        }
    }

    /// What this layer keeps per token: the model's KV layout is built
    /// from its layers' specs.
    pub fn layer_kv(&self) -> LayerKv {
        LayerKv {
            kv_heads: self.kv_heads,
            head_dim: self.head_dim,
            window: self.window,
        }
    }

    /// Rows `[1, rows, heads * d]` as `[n, heads, l, d]`.
    fn split_heads(&self, all: &Array, n: i32, l: i32, heads: usize) -> Result<Array> {
        Ok(all
            .reshape(&[n, l, heads as i32, self.head_dim as i32])?
            .transpose_axes(&[0, 2, 1, 3])?)
    }

    /// Joint q-and-k heads after the q/k norm, before RoPE.
    fn normed(&self, qk: Array) -> Result<Array> {
        match &self.qk_norm {
            Some(norm) => norm.apply(&qk),
            None => Ok(qk),
        }
    }

    /// The first key position the query at `query` sees (it sees every
    /// one from there to itself).
    fn first_visible(&self, query: usize) -> usize {
        self.window.map_or(0, |w| (query + 1).saturating_sub(w))
    }
}

/// Attention of the items that each add one token:
/// `[1, n, heads * head_dim]`, in `decode.items` order.
pub(super) fn decode_group(
    spec: &AttentionSpec,
    [qk, v]: [&Array; 2],
    decode: &DecodeGroup,
    items: &mut [BatchItem<'_>],
    layer: usize,
) -> Result<Array> {
    let n = decode.items.len() as i32;
    let pick = |all: &Array| -> Result<Array> {
        Ok(match &decode.rows {
            Some(rows) => all.take_axis(rows, 1)?,
            None => all.clone(),
        })
    };
    let qk = spec.normed(spec.split_heads(&pick(qk)?, n, 1, spec.heads + spec.kv_heads)?)?;
    let qk = rope_dynamic(
        qk,
        spec.head_dim as i32,
        spec.rope_traditional,
        spec.rope_base,
        1.0,
        &decode.offsets,
        None,
    )?;
    let h = spec.heads as i32;
    let (q, k) = (qk.index((.., ..h)), qk.index((.., h..)));
    let v = spec.split_heads(&pick(v)?, n, 1, spec.kv_heads)?;
    let mut outs = Vec::with_capacity(decode.items.len());
    for (j, &i) in decode.items.iter().enumerate() {
        let j = j as i32;
        let one = |t: &Array| t.index(j..j + 1);
        let (keys, values) = items[i].cache.update(layer, one(&k), one(&v))?;
        // A window sees only the most recent positions.
        let (keys, values) = match spec.window {
            Some(w) if keys.dim(2) as usize > w => {
                let recent = || (.., .., keys.dim(2) - w as i32.., ..);
                (keys.index(recent()), values.index(recent()))
            }
            _ => (keys, values),
        };
        outs.push(scaled_dot_product_attention(
            one(&q),
            keys,
            values,
            spec.scale,
            None,
            None,
        )?);
    }
    // [n, heads, 1, d] is laid out as [n, heads * d].
    Ok(concatenate(&outs, 0)?.reshape(&[1, n, -1])?)
}

/// Attention of one item's chunk of new tokens (batch rows `rows`):
/// `[1, len, heads * head_dim]`.
pub(super) fn chunk(
    spec: &AttentionSpec,
    [qk, v]: [&Array; 2],
    rows: std::ops::Range<i32>,
    item: &mut BatchItem<'_>,
    layer: usize,
) -> Result<Array> {
    let l = rows.end - rows.start;
    let take = |all: &Array| all.index((.., rows.clone(), ..));
    let offset = item.cache.offset() as i32;
    let qk = spec.normed(spec.split_heads(&take(qk), 1, l, spec.heads + spec.kv_heads)?)?;
    let qk = rope(
        qk,
        spec.head_dim as i32,
        spec.rope_traditional,
        spec.rope_base,
        1.0,
        offset,
        None,
    )?;
    let h = spec.heads as i32;
    let (q, k) = (qk.index((.., ..h)), qk.index((.., h..)));
    let v = spec.split_heads(&take(v), 1, l, spec.kv_heads)?;
    let fixed = item.cache.capacity().is_some();
    let (k, v) = item.cache.update(layer, k, v)?;
    let offset = offset as usize;
    let o = if fixed {
        fixed_shape(spec, &q, &k, &v, offset)?
    } else if spec.window.is_some_and(|w| offset + (l as usize) > w) {
        // Some key is out of some query's window: an explicit mask. Slot j
        // holds position `base + j` (the layer may have dropped old ones).
        let (keys, base) = (k.dim(2) as usize, item.cache.start(layer));
        let mut mask = Vec::with_capacity(l as usize * keys);
        for r in 0..l as usize {
            let query = offset + r;
            let first = spec.first_visible(query);
            mask.extend((base..base + keys).map(|p| first <= p && p <= query));
        }
        let mask = Array::from_slice(&mask, &[l, keys as i32]);
        scaled_dot_product_attention(q, k, v, spec.scale, &mask, None)?
    } else {
        let mask = (l > 1).then_some(ScaledDotProductAttentionMask::Causal);
        scaled_dot_product_attention(q, k, v, spec.scale, mask, None)?
    };
    Ok(o.transpose_axes(&[0, 2, 1, 3])?.reshape(&[1, l, -1])?)
}

/// Causal attention for one sequence over a fixed-capacity cache, with
/// shapes that depend only on the cache's capacity: queries (grouped by KV
/// head) go through the score and value matmuls in padded blocks of
/// [`ROW_BLOCK`] rows, and every query row sees all `capacity` key slots,
/// masked. So a token's result is the same whatever the chunking of its
/// prompt, the cached prefix, or the rest of the batch.
///
/// `q`: `[1, heads, l, d]`; `k`, `v`: `[1, kv_heads, capacity, d]`; the new
/// queries sit at positions `offset..offset + l`.
fn fixed_shape(
    spec: &AttentionSpec,
    q: &Array,
    k: &Array,
    v: &Array,
    offset: usize,
) -> Result<Array> {
    let scale = spec.scale;
    let (heads, l, d) = (q.dim(1), q.dim(2), q.dim(3));
    let (kv_heads, cap) = (k.dim(1), k.dim(2));
    let rep = heads / kv_heads;
    let rows = rep * l;
    let padded = (rows + ROW_BLOCK - 1) / ROW_BLOCK * ROW_BLOCK;
    let blocks = padded / ROW_BLOCK;

    // [kv_heads, rep * l, d], padded and split into row blocks.
    let qg = q.reshape(&[kv_heads, rows, d])?;
    let qg = if padded > rows {
        let zeros = Array::zeros::<f32>(&[kv_heads, padded - rows, d])?;
        concatenate(&[qg, zeros], 1)?
    } else {
        qg
    };
    let qb = qg.reshape(&[kv_heads * blocks, ROW_BLOCK, d])?;
    let per_block = |t: &Array| -> Result<Array> {
        Ok(mlx_rs::ops::broadcast_to(
            t.reshape(&[kv_heads, 1, cap, d])?,
            &[kv_heads, blocks, cap, d],
        )?
        .reshape(&[kv_heads * blocks, cap, d])?)
    };
    let (kb, vb) = (per_block(k)?, per_block(v)?);
    let scores = mlx_rs::ops::matmul(&qb, kb.transpose_axes(&[0, 2, 1])?)?
        .multiply(Array::from_f32(scale))?;

    // Row r of a head group is query r % l, at position offset + r % l.
    // Padding rows see key 0 only (their output is dropped).
    let mut mask = vec![f32::NEG_INFINITY; (padded * cap) as usize];
    for r in 0..padded as usize {
        let row = &mut mask[r * cap as usize..(r + 1) * cap as usize];
        if r >= rows as usize {
            row[0] = 0.0;
            continue;
        }
        let query = offset + r % l as usize;
        row[spec.first_visible(query)..=query].fill(0.0);
    }
    let mask = Array::from_slice(&mask, &[1, padded, cap]);
    let scores = scores.reshape(&[kv_heads, padded, cap])?.add(&mask)?;
    let probs = mlx_rs::ops::softmax_axis(&scores, -1, true)?.reshape(&[
        kv_heads * blocks,
        ROW_BLOCK,
        cap,
    ])?;
    let out = mlx_rs::ops::matmul(&probs, &vb)?.reshape(&[kv_heads, padded, d])?;
    Ok(out.index((.., 0..rows, ..)).reshape(&[1, heads, l, d])?)
}
