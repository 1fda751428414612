//! The three attention paths every architecture shares: the decode group
//! (one RoPE call for every one-token item), a prefill chunk, and the
//! fixed-shape path of batch-invariant mode. Each item attends over its own
//! cache only, so no sequence ever reads another's memory.

use mlx_rs::fast::{
    rope, rope_dynamic, scaled_dot_product_attention, ScaledDotProductAttentionMask,
};
use mlx_rs::ops::concatenate;
use mlx_rs::ops::indexing::IndexOp;
use mlx_rs::Array;

use super::batch_item::BatchItem;
use super::layout::DecodeGroup;
use super::linear::ROW_BLOCK;
use crate::error::Result;

/// One layer's attention shape and position encoding.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AttentionSpec {
    pub heads: usize,
    pub kv_heads: usize,
    pub head_dim: usize,
    /// Multiplies the query-key scores (`head_dim^-0.5` for most models).
    pub scale: f32,
    pub rope_base: f32,
    /// Interleaved ("traditional") RoPE instead of rotate-half.
    pub rope_traditional: bool,
}

impl AttentionSpec {
    /// Rows `[1, rows, heads * d]` as `[n, heads, l, d]`.
    fn split_heads(&self, all: &Array, n: i32, l: i32, heads: usize) -> Result<Array> {
        Ok(all
            .reshape(&[n, l, heads as i32, self.head_dim as i32])?
            .transpose_axes(&[0, 2, 1, 3])?)
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
    let qk = spec.split_heads(&pick(qk)?, n, 1, spec.heads + spec.kv_heads)?;
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
    let qk = spec.split_heads(&take(qk), 1, l, spec.heads + spec.kv_heads)?;
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
    let o = if fixed {
        fixed_shape(&q, &k, &v, spec.scale, offset as usize)?
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
fn fixed_shape(q: &Array, k: &Array, v: &Array, scale: f32, offset: usize) -> Result<Array> {
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

    // Row r of a head group is query r % l; it sees keys 0..=offset + r % l.
    // Padding rows see key 0 only (their output is dropped).
    let mut mask = vec![f32::NEG_INFINITY; (padded * cap) as usize];
    for r in 0..padded as usize {
        let visible = if r < rows as usize {
            offset + r % l as usize + 1
        } else {
            1
        };
        mask[r * cap as usize..r * cap as usize + visible].fill(0.0);
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
