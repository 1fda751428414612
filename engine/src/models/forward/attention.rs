//! The attention paths every architecture shares: the decode group (every
//! one-token item: one RoPE call, one KV write, ONE attention call over the
//! batch KV store, each row masked to its own slot's positions), a prefill
//! chunk (one item's new tokens over its slot), and the fixed-shape path of
//! batch-invariant mode, which both use there. A row only ever reads its
//! own slot, so no sequence sees another's memory.
//!
//! On the CPU both reads go to afm's attention primitive (`cpu::attention`)
//! when it is available: it reads every slot in place (no gather of the
//! decode group's keys), sees only each query's own keys, and is
//! batch-invariant by construction, so batch-invariant mode takes it too.
//! MLX's `scaled_dot_product_attention` (and the fixed-shape path) is the
//! route elsewhere.

use mlx_rs::fast::{
    rms_norm, rope, rope_dynamic, scaled_dot_product_attention, ScaledDotProductAttentionMask,
};
use mlx_rs::ops::concatenate;
use mlx_rs::ops::indexing::{IndexOp, TryIndexMutOp};
use mlx_rs::Array;

use super::layout::{DecodeGroup, DecodeRead};
use super::linear::ROW_BLOCK;
use crate::cpu;
use crate::device::{Device, Kind};
use crate::error::Result;
use crate::loading::config::ModelConfig;
use crate::models::kv_layout::LayerKv;
use crate::models::kv_store::KvStore;

/// One layer's attention shape, position encoding and reach.
#[derive(Debug, Clone)]
pub struct AttentionSpec {
    pub heads: usize,
    pub kv_heads: usize,
    pub head_dim: usize,
    /// Multiplies the query-key scores (`head_dim^-0.5` for most models).
    pub scale: f32,
    pub rope_base: f32,
    /// Features of each head RoPE rotates, from the first (`head_dim`, or
    /// a fraction of it: Qwen3-Next's and Qwen3.5's partial RoPE); the
    /// rest pass through.
    pub rope_dims: usize,
    /// RoPE's wavelengths per feature pair instead of `rope_base`'s
    /// (Gemma 4's proportional RoPE: infinite for pairs left unrotated).
    pub rope_freqs: Option<Array>,
    /// Interleaved ("traditional") RoPE instead of rotate-half.
    pub rope_traditional: bool,
    /// Per-head RMSNorm of queries and keys before RoPE (Qwen3, Gemma 3).
    pub qk_norm: Option<QkNorm>,
    /// Sliding-window attention: a query sees at most this many most
    /// recent positions, itself included (`None`: all of them).
    pub window: Option<usize>,
    /// An output gate (Qwen3-Next, Qwen3.5): the query projection is twice
    /// as wide, each head's queries followed by as many gate values, and
    /// the output is `o_proj(attention * sigmoid(gate))`.
    pub output_gate: bool,
    /// A weightless RMSNorm of values, with this eps (Gemma 4).
    pub v_norm: Option<f32>,
    /// Values are the key projection's output before its norm and RoPE;
    /// there is no value projection (Gemma 4's `attention_k_eq_v`).
    pub k_eq_v: bool,
    /// The layer reads the keys and values of attention layer `j` and
    /// computes only queries (Gemma 4's KV-shared layers); its q/k norm
    /// then covers the query heads alone.
    pub shares_kv_of: Option<usize>,
}

/// Per-head RMSNorm of queries and keys, both in one call over the joint
/// q-and-k heads: normalised without weight, then scaled by the query
/// weight on query heads and the key weight on key heads.
#[derive(Debug, Clone)]
pub struct QkNorm {
    /// `[heads + kv_heads, 1, head_dim]`.
    weight: Array,
    /// The query and key weights, `[head_dim]` each.
    q: Array,
    k: Array,
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
        Ok(QkNorm {
            weight,
            q: q.clone(),
            k: k.clone(),
            eps,
        })
    }

    /// The query weight, the key weight (`[head_dim]` each) and the eps.
    pub fn parts(&self) -> (&Array, &Array, f32) {
        (&self.q, &self.k, self.eps)
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
            rope_dims: config.head_dim,
            rope_freqs: None,
            rope_traditional: config.rope_traditional,
            qk_norm: None,
            window: None,
            output_gate: false,
            v_norm: None,
            k_eq_v: false,
            shares_kv_of: None,
        }
    }

    /// What this layer keeps per token: the model's KV layout is built
    /// from its layers' specs.
    pub fn layer_kv(&self) -> LayerKv {
        LayerKv {
            kv_heads: self.kv_heads,
            head_dim: self.head_dim,
            window: self.window,
            shares: self.shares_kv_of,
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

/// Queries of new rows and, for a layer with keys and values of its own,
/// those keys and values; RoPE applied: `[n, heads, l, d]`, `[n, kv_heads,
/// l, d]` twice.
pub(super) struct NewRows {
    pub q: Array,
    pub kv: Option<(Array, Array)>,
}

impl AttentionSpec {
    /// Heads the joint q-and-k rows hold: the queries, then the layer's own
    /// keys (none for a layer that shares another's).
    fn qk_heads(&self) -> usize {
        match self.shares_kv_of {
            Some(_) => self.heads,
            None => self.heads + self.kv_heads,
        }
    }

    /// RoPE's base, unless explicit wavelengths replace it.
    fn rope_base(&self) -> Option<f32> {
        match self.rope_freqs {
            Some(_) => None,
            None => Some(self.rope_base),
        }
    }

    /// The rows' queries, and keys and values (`v`: `None` for a shared
    /// layer), from joint q-and-k heads already rotated.
    fn new_rows(&self, qk: Array, v: Option<Array>, n: i32, l: i32) -> Result<NewRows> {
        let h = self.heads as i32;
        let kv = match v {
            None => None,
            Some(v) => {
                let v = self.split_heads(&v, n, l, self.kv_heads)?;
                let v = match self.v_norm {
                    Some(eps) => rms_norm(v, None, eps)?,
                    None => v,
                };
                Some((qk.index((.., h..)), v))
            }
        };
        Ok(NewRows {
            q: qk.index((.., ..h)),
            kv,
        })
    }
}

/// The decode group's rows, rotated each at its own position (one call).
pub(super) fn decode_rows(
    spec: &AttentionSpec,
    qk: &Array,
    v: Option<&Array>,
    decode: &DecodeGroup,
) -> Result<NewRows> {
    let n = decode.items.len() as i32;
    let pick = |all: &Array| -> Result<Array> {
        Ok(match &decode.rows {
            Some(rows) => all.take_axis(rows, 1)?,
            None => all.clone(),
        })
    };
    let qk = spec.normed(spec.split_heads(&pick(qk)?, n, 1, spec.qk_heads())?)?;
    let qk = rope_dynamic(
        qk,
        spec.rope_dims as i32,
        spec.rope_traditional,
        spec.rope_base(),
        1.0,
        &decode.offsets,
        spec.rope_freqs.as_ref(),
    )?;
    spec.new_rows(qk, v.map(pick).transpose()?, n, 1)
}

/// One item's chunk (batch rows `rows`), rotated from position `offset`.
pub(super) fn chunk_rows(
    spec: &AttentionSpec,
    qk: &Array,
    v: Option<&Array>,
    rows: std::ops::Range<i32>,
    offset: usize,
) -> Result<NewRows> {
    let l = rows.end - rows.start;
    let take = |all: &Array| all.index((.., rows.clone(), ..));
    let qk = spec.normed(spec.split_heads(&take(qk), 1, l, spec.qk_heads())?)?;
    let qk = rope(
        qk,
        spec.rope_dims as i32,
        spec.rope_traditional,
        spec.rope_base(),
        1.0,
        offset as i32,
        spec.rope_freqs.as_ref(),
    )?;
    spec.new_rows(qk, v.map(take), 1, l)
}

/// Writes the decode group's new keys and values: one scatter each, row
/// `j` at (slot `j`, position `j`).
pub(super) fn write_decode(
    [keys, values]: [&mut Array; 2],
    decode: &DecodeGroup,
    (k, v): &(Array, Array),
) -> Result<()> {
    let (n, kv_heads, d) = (k.dim(0), k.dim(1), k.dim(3));
    let at = (decode.slots.index(), .., &decode.offsets, ..);
    keys.try_index_mut(at, k.reshape(&[n, kv_heads, d])?)?;
    values.try_index_mut(at, v.reshape(&[n, kv_heads, d])?)?;
    Ok(())
}

/// Writes one item's chunk into its slot from position `offset`.
pub(super) fn write_chunk(
    [keys, values]: [&mut Array; 2],
    slot: usize,
    offset: usize,
    (k, v): &(Array, Array),
) -> Result<()> {
    let (s, a) = (slot as i32, offset as i32);
    let at = || (s..s + 1, .., a..a + k.dim(2), ..);
    keys.try_index_mut(at(), k)?;
    values.try_index_mut(at(), v)?;
    Ok(())
}

/// Attention of one read of the decode group (its members' queries over
/// their slots, after this step's keys were written): `[m, heads, 1, d]`,
/// or `[m, 1, heads, d]` from the CPU primitive (the same `[m, heads * d]`
/// rows).
pub(super) fn decode_read(
    spec: &AttentionSpec,
    q: &Array,
    read: &DecodeRead,
    group: &DecodeGroup,
    kv: &KvStore,
    layer: usize,
) -> Result<Array> {
    let q = q.index(read.range.start as i32..read.range.end as i32);
    if cpu::attention::path().is_primitive() {
        let (k, v) = kv.buffers(layer);
        return cpu::attention::attend(
            &q,
            k,
            v,
            read.slots.as_slice(),
            &group.positions_i32[read.range.clone()],
            spec.window,
            spec.scale,
        );
    }
    if let Some(spread) = &read.spread {
        let q = q.take_axis(&spread.queries, 0)?;
        let (k, v) = kv.rows(layer, &spread.slots, read.keys)?;
        let o = attend_rows(spec, q, &k, &v, read, &spread.positions)?;
        return Ok(o.take_axis(&spread.rows, 0)?);
    }
    let positions = &group.positions[read.range.clone()];
    let (k, v) = kv.rows(layer, &read.slots, read.keys)?;
    if read.fixed {
        let mask = read.mask(spec.window, || {
            fixed_mask(spec, positions, 1, spec.heads / spec.kv_heads, read.keys)
        });
        return fixed_shape(spec, &q, &k, &v, &mask);
    }
    attend_rows(spec, q, &k, &v, read, positions)
}

/// Attention of decode rows at `positions` over `read.keys` positions of
/// their slots (`k`, `v`), masked where some row does not see them all.
fn attend_rows(
    spec: &AttentionSpec,
    q: Array,
    k: &Array,
    v: &Array,
    read: &DecodeRead,
    positions: &[usize],
) -> Result<Array> {
    // Row j sees its own positions first_visible..=position; a row that
    // sees every key read needs no mask.
    let sees_all = |&p: &usize| p + 1 == read.keys && spec.first_visible(p) == 0;
    let mask = (!positions.iter().all(sees_all)).then(|| {
        read.mask(spec.window, || {
            let mut mask = Vec::with_capacity(positions.len() * read.keys);
            for &p in positions {
                let first = spec.first_visible(p);
                mask.extend((0..read.keys).map(|key| first <= key && key <= p));
            }
            Array::from_slice(&mask, &[positions.len() as i32, 1, 1, read.keys as i32])
        })
    });
    if Device::current().kind == Kind::Cpu {
        return grouped_rows(spec, &q, k, v, mask.as_ref());
    }
    Ok(match &mask {
        Some(mask) => scaled_dot_product_attention(q, k, v, spec.scale, mask, None)?,
        None => scaled_dot_product_attention(q, k, v, spec.scale, None, None)?,
    })
}

/// [`attend_rows`] on the CPU, where MLX's `scaled_dot_product_attention`
/// is its op fallback: that broadcasts the keys and values over each
/// group's query heads, which costs a copy of both per call. Grouping the
/// queries instead reads them where they lie, with the same ops in the
/// same order otherwise (scale, scores, mask, precise softmax, values):
/// the same bits, in 71-77% of the time on a decode group's shapes (8
/// rows, 64 to 512 positions, `mlx.core` on this backend). A GPU keeps
/// the fused kernel. `q`: `[m, heads, 1, d]`; `k`, `v`: `[m, kv_heads,
/// keys, d]`; `mask`: `[m, 1, 1, keys]`.
fn grouped_rows(
    spec: &AttentionSpec,
    q: &Array,
    k: &Array,
    v: &Array,
    mask: Option<&Array>,
) -> Result<Array> {
    let (m, heads, d) = (q.dim(0), q.dim(1), q.dim(3));
    let kv_heads = k.dim(1);
    let q =
        q.multiply(Array::from_f32(spec.scale))?
            .reshape(&[m, kv_heads, heads / kv_heads, d])?;
    let scores = mlx_rs::ops::matmul(&q, k.transpose_axes(&[0, 1, 3, 2])?)?;
    let scores = match mask {
        Some(mask) => mlx_rs::ops::select(mask, &scores, Array::from_f32(f32::NEG_INFINITY))?,
        None => scores,
    };
    let probs = mlx_rs::ops::softmax_axis(&scores, -1, true)?;
    Ok(mlx_rs::ops::matmul(&probs, v)?.reshape(&[m, heads, 1, d])?)
}

/// Attention of one item's chunk of `l` new queries at `offset..` over its
/// slot (its keys already written): `[1, l, heads * head_dim]`.
pub(super) fn chunk_read(
    spec: &AttentionSpec,
    q: &Array,
    slot: usize,
    offset: usize,
    kv: &KvStore,
    layer: usize,
) -> Result<Array> {
    let l = q.dim(2) as usize;
    let end = offset + l;
    if cpu::attention::path().is_primitive() {
        let (k, v) = kv.buffers(layer);
        let (s, a) = ([slot as i32], [offset as i32]);
        let o = cpu::attention::attend(q, k, v, &s, &a, spec.window, spec.scale)?;
        return Ok(o.reshape(&[1, l as i32, -1])?);
    }
    let o = if let Some(fixed) = kv.fixed(slot) {
        let (k, v) = kv.slot(layer, slot, fixed);
        let mask = fixed_mask(spec, &[offset], l, spec.heads / spec.kv_heads, fixed);
        fixed_shape(spec, q, &k, &v, &mask)?
    } else {
        let (k, v) = kv.slot(layer, slot, end);
        if spec.window.is_some_and(|w| end > w) {
            // Some key is out of some query's window: an explicit mask.
            let mut mask = Vec::with_capacity(l * end);
            for query in offset..end {
                let first = spec.first_visible(query);
                mask.extend((0..end).map(|p| first <= p && p <= query));
            }
            let mask = Array::from_slice(&mask, &[l as i32, end as i32]);
            scaled_dot_product_attention(q, k, v, spec.scale, &mask, None)?
        } else {
            let mask = (l > 1).then_some(ScaledDotProductAttentionMask::Causal);
            scaled_dot_product_attention(q, k, v, spec.scale, mask, None)?
        }
    };
    Ok(o.transpose_axes(&[0, 2, 1, 3])?
        .reshape(&[1, l as i32, -1])?)
}

/// Causal attention over fixed-capacity slots, with shapes that depend
/// only on the capacity: queries (grouped by KV head) go through the score
/// and value matmuls in padded blocks of [`ROW_BLOCK`] rows, every block its
/// own product of one shape (`[8, d] x [d, capacity]`), and every query row
/// sees all `capacity` key slots, masked. So a token's result is the same
/// whatever the chunking of its prompt, the cached prefix, or the rest of
/// the batch (and whether it is attended alone or with the decode group).
///
/// `q`: `[n, heads, l, d]`; `k`, `v`: `[n, kv_heads, capacity, d]` (views of
/// the store are fine); `mask` from [`fixed_mask`].
fn fixed_shape(
    spec: &AttentionSpec,
    q: &Array,
    k: &Array,
    v: &Array,
    mask: &Array,
) -> Result<Array> {
    let (n, heads, l, d) = (q.dim(0), q.dim(1), q.dim(2), q.dim(3));
    let kv_heads = k.dim(1);
    let rows = heads / kv_heads * l;
    let padded = (rows + ROW_BLOCK - 1) / ROW_BLOCK * ROW_BLOCK;
    let blocks = padded / ROW_BLOCK;
    let groups = n * kv_heads;

    // [n * kv_heads, rep * l, d], padded to whole row blocks.
    let qg = q.reshape(&[groups, rows, d])?;
    let qg = if padded > rows {
        let zeros = Array::zeros::<f32>(&[groups, padded - rows, d])?;
        concatenate(&[qg, zeros], 1)?
    } else {
        qg
    };
    // Keys and values are read where they lie; each block is one product
    // per (sequence, KV head) of the same shape, never folded into a larger
    // one (a product per block costs an MLX operation; copying the keys per
    // block cost a copy of the slot per block).
    let qg = qg.reshape(&[n, kv_heads, padded, d])?;
    let kt = k.transpose_axes(&[0, 1, 3, 2])?;
    let scale = Array::from_f32(spec.scale);
    let mut outs = Vec::with_capacity(blocks as usize);
    for b in 0..blocks {
        let r = b * ROW_BLOCK..(b + 1) * ROW_BLOCK;
        let (qb, mb) = if blocks == 1 {
            (qg.clone(), mask.clone())
        } else {
            (
                qg.index((.., .., r.clone(), ..)),
                mask.index((.., .., r, ..)),
            )
        };
        let scores = mlx_rs::ops::matmul(&qb, &kt)?.multiply(&scale)?.add(&mb)?;
        let probs = mlx_rs::ops::softmax_axis(&scores, -1, true)?;
        outs.push(mlx_rs::ops::matmul(&probs, v)?);
    }
    let out = if outs.len() == 1 {
        outs.pop().expect("one block")
    } else {
        concatenate(&outs, 2)?
    };
    let out = out.reshape(&[groups, padded, d])?;
    Ok(out.index((.., 0..rows, ..)).reshape(&[n, heads, l, d])?)
}

/// The additive mask of [`fixed_shape`], `[n, 1, padded rows, capacity]`:
/// row r of a head group is query r % l of its sequence, at position
/// `offsets[i] + r % l`; padding rows see key 0 only (their output is
/// dropped).
fn fixed_mask(spec: &AttentionSpec, offsets: &[usize], l: usize, rep: usize, cap: usize) -> Array {
    let rows = rep * l;
    let padded = rows.div_ceil(ROW_BLOCK as usize) * ROW_BLOCK as usize;
    let mut mask = vec![f32::NEG_INFINITY; offsets.len() * padded * cap];
    for (i, &offset) in offsets.iter().enumerate() {
        for r in 0..padded {
            let at = (i * padded + r) * cap;
            let row = &mut mask[at..at + cap];
            if r >= rows {
                row[0] = 0.0;
                continue;
            }
            let query = offset + r % l;
            row[spec.first_visible(query)..=query].fill(0.0);
        }
    }
    Array::from_slice(&mask, &[offsets.len() as i32, 1, padded as i32, cap as i32])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::models::forward::layout::BatchLayout;
    use crate::models::forward::BatchItem;
    use crate::models::KvLayout;

    /// The CPU's grouped decode attention gives what MLX's own attention
    /// gives, with a mask (rows seeing 3, 5 and all 6 of the keys) and
    /// without, for grouped heads (6 query heads over 2 KV heads).
    #[test]
    fn grouped_rows_match_mlx_attention() {
        let (m, heads, kv_heads, keys, d) = (3, 6, 2, 6, 4);
        let values = |n: usize, salt: f32| -> Vec<f32> {
            (0..n)
                .map(|i| ((i as f32 * 0.37 + salt).sin() * 1.7).fract())
                .collect()
        };
        let q = Array::from_slice(
            &values(m * heads * d, 0.1),
            &[m, heads, 1, d].map(|x| x as i32),
        );
        let kv_shape = [m, kv_heads, keys, d].map(|x| x as i32);
        let k = Array::from_slice(&values(m * kv_heads * keys * d, 1.3), &kv_shape);
        let v = Array::from_slice(&values(m * kv_heads * keys * d, 2.9), &kv_shape);
        let sees = [3, 5, 6];
        let mask: Vec<bool> = sees
            .iter()
            .flat_map(|&n| (0..keys).map(move |key| key < n))
            .collect();
        let mask = Array::from_slice(&mask, &[m as i32, 1, 1, keys as i32]);
        let spec = AttentionSpec {
            heads,
            kv_heads,
            head_dim: d,
            scale: 0.5,
            rope_base: 1e4,
            rope_dims: d,
            rope_freqs: None,
            rope_traditional: false,
            qk_norm: None,
            window: None,
            output_gate: false,
            v_norm: None,
            k_eq_v: false,
            shares_kv_of: None,
        };
        for mask in [Some(&mask), None] {
            let got = grouped_rows(&spec, &q, &k, &v, mask).unwrap();
            let want = match mask {
                Some(mask) => scaled_dot_product_attention(&q, &k, &v, 0.5, mask, None),
                None => scaled_dot_product_attention(&q, &k, &v, 0.5, None, None),
            }
            .unwrap();
            assert_eq!(got.shape(), want.shape());
            let diff = got
                .as_slice::<f32>()
                .iter()
                .zip(want.as_slice::<f32>())
                .map(|(a, b)| (a - b).abs())
                .fold(0f32, f32::max);
            assert!(diff <= 1e-6, "masked: {}, off by {diff}", mask.is_some());
        }
    }

    /// The decode group's one scatter puts row j at (its slot, its
    /// position), and nowhere else.
    #[test]
    fn decode_writes_land_in_each_rows_slot_and_position() {
        let layout = KvLayout::uniform(1, 2, 3);
        let mut kv = KvStore::new(&layout);
        let slots: Vec<usize> = (0..3).map(|_| kv.open(None).unwrap()).collect();
        kv.advance(slots[0], 1);
        kv.advance(slots[2], 5);
        for &s in &slots {
            kv.reserve(s, kv.offset(s) + 1).unwrap();
        }
        // Items in slot order 2, 0: the group takes slot order (0, 2) and
        // reads by gather (not consecutive).
        let items = [
            BatchItem {
                tokens: &[7],
                slot: 2,
                sample: true,
            },
            BatchItem {
                tokens: &[8],
                slot: 0,
                sample: true,
            },
        ];
        let group = BatchLayout::new(&items, &kv).decode.unwrap();
        assert_eq!(group.positions, [1, 5]);
        let rows: Vec<f32> = (0..12).map(|x| x as f32 + 1.0).collect();
        let k = Array::from_slice(&rows, &[2, 2, 1, 3]);
        let new = (k.clone(), k.negative().unwrap());
        let (mut keys, mut values) = kv.take(0);
        write_decode([&mut keys, &mut values], &group, &new).unwrap();
        kv.put(0, (keys, values));
        let at = |slot: usize, pos: usize| {
            let (k, v) = kv.segment(slot, pos, pos + 1).unwrap().remove(0);
            (k.as_slice::<f32>().to_vec(), v.as_slice::<f32>().to_vec())
        };
        // Row j of the group's new keys is its j-th member's, in slot order.
        assert_eq!(at(0, 1).0, rows[..6]);
        assert_eq!(at(2, 5).0, rows[6..]);
        assert_eq!(at(0, 1).1, rows[..6].iter().map(|x| -x).collect::<Vec<_>>());
        assert_eq!(at(1, 0).0, [0.0; 6], "slot 1 untouched");
        assert_eq!(
            at(2, 1).0,
            [0.0; 6],
            "slot 2 written at its own position only"
        );
    }
}
