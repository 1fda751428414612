//! The llama decoder (Llama 2/3, SmolLM, Mistral-style dense models):
//! RMSNorm, grouped-query attention with RoPE, SwiGLU MLP.

use mlx_rs::fast::{
    rms_norm, rope, rope_dynamic, scaled_dot_product_attention, ScaledDotProductAttentionMask,
};
use mlx_rs::ops::concatenate;
use mlx_rs::ops::indexing::IndexOp;
use mlx_rs::Array;

use super::{BatchItem, CausalLm, KvCache};
use crate::error::Result;
use crate::model_config::ModelConfig;
use crate::weights::{Embedding, FusedLinear, Linear, TensorMap};

struct Layer {
    input_norm: Array,
    /// q, k and v projections as one matmul.
    qkv_proj: FusedLinear,
    o_proj: Linear,
    post_norm: Array,
    /// gate and up projections as one matmul.
    gate_up_proj: FusedLinear,
    down_proj: Linear,
}

/// A loaded llama model.
pub struct Llama {
    config: ModelConfig,
    embed: Embedding,
    layers: Vec<Layer>,
    norm: Array,
    lm_head: Linear,
    /// Run every matmul with shapes that do not depend on the batch.
    batch_invariant: bool,
}

impl Llama {
    pub fn load(config: ModelConfig, weights: &TensorMap) -> Result<Self> {
        let layers = (0..config.num_layers)
            .map(|i| {
                let p = format!("model.layers.{i}");
                Ok(Layer {
                    input_norm: weights.dense(&format!("{p}.input_layernorm.weight"))?,
                    qkv_proj: FusedLinear::new(vec![
                        weights.linear(&format!("{p}.self_attn.q_proj"))?,
                        weights.linear(&format!("{p}.self_attn.k_proj"))?,
                        weights.linear(&format!("{p}.self_attn.v_proj"))?,
                    ])?,
                    o_proj: weights.linear(&format!("{p}.self_attn.o_proj"))?,
                    post_norm: weights.dense(&format!("{p}.post_attention_layernorm.weight"))?,
                    gate_up_proj: FusedLinear::new(vec![
                        weights.linear(&format!("{p}.mlp.gate_proj"))?,
                        weights.linear(&format!("{p}.mlp.up_proj"))?,
                    ])?,
                    down_proj: weights.linear(&format!("{p}.mlp.down_proj"))?,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let embed = weights.embedding("model.embed_tokens")?;
        let lm_head = if config.tie_word_embeddings || !weights.contains("lm_head.weight") {
            embed.0.clone()
        } else {
            weights.linear("lm_head")?
        };
        let model = Llama {
            norm: weights.dense("model.norm.weight")?,
            config,
            embed,
            layers,
            lm_head,
            batch_invariant: false,
        };
        model.materialize()?;
        Ok(model)
    }

    /// Evaluates every weight once so dequantization happens at load, not
    /// inside the first request.
    fn materialize(&self) -> Result<()> {
        let mut arrays = vec![
            self.norm.clone(),
            self.embed.0.stored(),
            self.lm_head.stored(),
        ];
        for l in &self.layers {
            arrays.extend([l.input_norm.clone(), l.post_norm.clone()]);
            arrays.extend([l.o_proj.stored(), l.down_proj.stored()]);
            arrays.extend(l.qkv_proj.stored());
            arrays.extend(l.gate_up_proj.stored());
        }
        mlx_rs::transforms::eval(&arrays)?;
        Ok(())
    }

    /// Attention for every item: the q/k/v projection runs once over all new
    /// tokens; each item then attends over its own cache only. Items that
    /// decode one token share one RoPE call (per-item offsets) and skip the
    /// per-item reshapes; prefill chunks go one by one.
    fn attention(
        &self,
        layer: &Layer,
        x: &Array,
        items: &mut [BatchItem<'_>],
        layout: &BatchLayout,
        idx: usize,
    ) -> Result<Array> {
        // q and k side by side, so one RoPE call rotates both.
        let [qk_all, v_all]: [Array; 2] = layer
            .qkv_proj
            .forward_grouped(x, |lin, x| self.dense(lin, x), &[2, 1])?
            .try_into()
            .expect("q and k, then v");
        // Outputs in this order: decoding items' rows, then the others'.
        let mut pieces = Vec::new();
        if let Some(decode) = &layout.decode {
            pieces.push(self.decode_attention([&qk_all, &v_all], decode, items, idx)?);
        }
        for (i, item) in items.iter_mut().enumerate() {
            if layout.decode.as_ref().is_some_and(|d| d.is_member[i]) {
                continue;
            }
            let start = layout.starts[i];
            let rows = start..start + item.tokens.len() as i32;
            pieces.push(self.chunk_attention([&qk_all, &v_all], rows, item, idx)?);
        }
        let o = if pieces.len() == 1 {
            pieces.pop().expect("one piece")
        } else {
            concatenate(&pieces, 1)?
        };
        let o = match &layout.to_item_order {
            Some(inverse) => o.take_axis(inverse, 1)?,
            None => o,
        };
        self.dense(&layer.o_proj, &o)
    }

    /// Attention of the items that each add one token:
    /// `[1, n, heads * head_dim]`, in `decode.items` order.
    fn decode_attention(
        &self,
        [qk, v]: [&Array; 2],
        decode: &DecodeGroup,
        items: &mut [BatchItem<'_>],
        idx: usize,
    ) -> Result<Array> {
        let c = &self.config;
        let (n, dims) = (decode.items.len() as i32, c.head_dim as i32);
        // [1, rows, heads * d] -> [n, heads, 1, d]
        let heads = |all: &Array, h: usize| -> Result<Array> {
            let all = match &decode.rows {
                Some(rows) => all.take_axis(rows, 1)?,
                None => all.clone(),
            };
            Ok(all
                .reshape(&[n, 1, h as i32, dims])?
                .transpose_axes(&[0, 2, 1, 3])?)
        };
        let rotate = |t: Array| {
            rope_dynamic(
                t,
                dims,
                c.rope_traditional,
                c.rope_theta,
                1.0,
                &decode.offsets,
                None,
            )
        };
        let qk = rotate(heads(qk, c.num_heads + c.num_kv_heads)?)?;
        let h = c.num_heads as i32;
        let (q, k) = (qk.index((.., ..h)), qk.index((.., h..)));
        let v = heads(v, c.num_kv_heads)?;
        let scale = (c.head_dim as f32).powf(-0.5);
        let mut outs = Vec::with_capacity(decode.items.len());
        for (j, &i) in decode.items.iter().enumerate() {
            let j = j as i32;
            let one = |t: &Array| t.index(j..j + 1);
            let (keys, values) = items[i].cache.update(idx, one(&k), one(&v))?;
            outs.push(scaled_dot_product_attention(
                one(&q),
                keys,
                values,
                scale,
                None,
                None,
            )?);
        }
        // [n, heads, 1, d] is laid out as [n, heads * d].
        Ok(concatenate(&outs, 0)?.reshape(&[1, n, -1])?)
    }

    /// Attention of one item's chunk of new tokens (rows `rows`):
    /// `[1, len, heads * head_dim]`.
    fn chunk_attention(
        &self,
        [qk, v]: [&Array; 2],
        rows: std::ops::Range<i32>,
        item: &mut BatchItem<'_>,
        idx: usize,
    ) -> Result<Array> {
        let c = &self.config;
        let dims = c.head_dim as i32;
        let l = rows.end - rows.start;
        let heads = |all: &Array, n: usize| -> Result<Array> {
            Ok(all
                .index((.., rows.clone(), ..))
                .reshape(&[1, l, n as i32, dims])?
                .transpose_axes(&[0, 2, 1, 3])?)
        };
        let offset = item.cache.offset() as i32;
        let rotate = |t: Array| rope(t, dims, c.rope_traditional, c.rope_theta, 1.0, offset, None);
        let qk = rotate(heads(qk, c.num_heads + c.num_kv_heads)?)?;
        let h = c.num_heads as i32;
        let (q, k) = (qk.index((.., ..h)), qk.index((.., h..)));
        let v = heads(v, c.num_kv_heads)?;
        let scale = (c.head_dim as f32).powf(-0.5);
        let fixed = item.cache.capacity().is_some();
        let (k, v) = item.cache.update(idx, k, v)?;
        let o = if fixed {
            fixed_shape_attention(&q, &k, &v, scale, offset as usize)?
        } else {
            let mask = (l > 1).then_some(ScaledDotProductAttentionMask::Causal);
            scaled_dot_product_attention(q, k, v, scale, mask, None)?
        };
        Ok(o.transpose_axes(&[0, 2, 1, 3])?.reshape(&[1, l, -1])?)
    }

    /// `lin` applied to `x` (`[1, rows, in]`). In batch-invariant mode the
    /// rows go through the matmul in zero-padded blocks of [`ROW_BLOCK`], so
    /// a row's result never depends on how many other rows share the call
    /// (BLAS kernels pick their blocking, and so the rounding, by shape).
    fn dense(&self, lin: &Linear, x: &Array) -> Result<Array> {
        if !self.batch_invariant {
            return lin.forward(x);
        }
        let (rows, width) = (x.dim(1), x.dim(2));
        let blocked = pad_rows(&x.reshape(&[rows, width])?, ROW_BLOCK)?;
        let padded = blocked.dim(0);
        let y =
            lin.forward_row_blocks(&blocked.reshape(&[padded / ROW_BLOCK, ROW_BLOCK, width])?)?;
        Ok(y.reshape(&[1, padded, -1])?.index((.., 0..rows, ..)))
    }

    fn mlp(&self, layer: &Layer, x: &Array) -> Result<Array> {
        let [gate, up]: [Array; 2] = layer
            .gate_up_proj
            .forward_with(x, |lin, x| self.dense(lin, x))?
            .try_into()
            .expect("gate and up");
        let gate = mlx_rs::nn::silu(gate)?;
        self.dense(&layer.down_proj, &gate.multiply(&up)?)
    }
}

impl CausalLm for Llama {
    fn config(&self) -> &ModelConfig {
        &self.config
    }

    fn forward_batch(&self, items: &mut [BatchItem<'_>]) -> Result<Array> {
        let eps = self.config.rms_norm_eps;
        let ids: Vec<u32> = items
            .iter()
            .flat_map(|i| i.tokens.iter().copied())
            .collect();
        let ids = Array::from_slice(&ids, &[1, ids.len() as i32]);
        let mut h = self.embed.lookup(&ids)?;
        let layout = BatchLayout::new(items, !self.batch_invariant);
        for (i, layer) in self.layers.iter().enumerate() {
            let x = rms_norm(&h, Some(&layer.input_norm), eps)?;
            h = h.add(&self.attention(layer, &x, items, &layout, i)?)?;
            let x = rms_norm(&h, Some(&layer.post_norm), eps)?;
            h = h.add(&self.mlp(layer, &x)?)?;
        }
        // The LM head runs only on the positions that are sampled.
        let mut rows = Vec::new();
        let mut end = 0i32;
        for item in items.iter_mut() {
            item.cache.advance(item.tokens.len());
            end += item.tokens.len() as i32;
            if item.sample {
                rows.push(end - 1);
            }
        }
        let n = rows.len() as i32;
        if n == 0 {
            // A pass of prefill chunks only: nothing to sample.
            return Ok(Array::zeros::<f32>(&[0, self.config.vocab_size as i32])?);
        }
        let picked = h.take_axis(Array::from_slice(&rows, &[n]), 1)?;
        let picked = rms_norm(&picked, Some(&self.norm), eps)?;
        Ok(self.dense(&self.lm_head, &picked)?.reshape(&[n, -1])?)
    }

    fn set_batch_invariant(&mut self, on: bool) {
        self.batch_invariant = on;
    }

    fn new_cache(&self) -> KvCache {
        KvCache::new(self.config.num_layers)
    }
}

/// Where each item's tokens sit in the batch row and how attention groups
/// them. The same for every layer of a pass, so it is built once per pass.
struct BatchLayout {
    /// First row of each item.
    starts: Vec<i32>,
    /// The items that decode one token, attended as one group.
    decode: Option<DecodeGroup>,
    /// Attention outputs come decode group first; this permutation puts the
    /// rows back in item order (`None`: already in order).
    to_item_order: Option<Array>,
}

struct DecodeGroup {
    /// Item indices, in the group's order.
    items: Vec<usize>,
    /// `is_member[i]`: item `i` is in the group.
    is_member: Vec<bool>,
    /// Their rows in the batch (`None`: every row is theirs, in order).
    rows: Option<Array>,
    /// Their cache offsets (RoPE positions of their new token).
    offsets: Array,
}

impl BatchLayout {
    /// `group_decoding`: whether one-token items form a decode group (not in
    /// batch-invariant mode, where every item keeps fixed-shape attention).
    fn new(items: &[BatchItem<'_>], group_decoding: bool) -> Self {
        let mut starts = Vec::with_capacity(items.len());
        let mut total = 0i32;
        for item in items {
            starts.push(total);
            total += item.tokens.len() as i32;
        }
        let is_member: Vec<bool> = items
            .iter()
            .map(|i| group_decoding && i.tokens.len() == 1)
            .collect();
        let members: Vec<usize> = (0..items.len()).filter(|&i| is_member[i]).collect();
        if members.is_empty() {
            return BatchLayout {
                starts,
                decode: None,
                to_item_order: None,
            };
        }
        // Row order of the attention output: the group, then the rest.
        let mut order: Vec<i32> = members.iter().map(|&i| starts[i]).collect();
        let n = order.len() as i32;
        let rows = (n != total).then(|| Array::from_slice(&order, &[n]));
        let offsets: Vec<i32> = members
            .iter()
            .map(|&i| items[i].cache.offset() as i32)
            .collect();
        for (i, item) in items.iter().enumerate() {
            if !is_member[i] {
                order.extend(starts[i]..starts[i] + item.tokens.len() as i32);
            }
        }
        let in_order = order.iter().enumerate().all(|(p, &r)| p as i32 == r);
        let to_item_order = (!in_order).then(|| {
            let mut inverse = vec![0i32; order.len()];
            for (p, &r) in order.iter().enumerate() {
                inverse[r as usize] = p as i32;
            }
            Array::from_slice(&inverse, &[total])
        });
        BatchLayout {
            starts,
            decode: Some(DecodeGroup {
                items: members,
                is_member,
                rows,
                offsets: Array::from_slice(&offsets, &[n]),
            }),
            to_item_order,
        }
    }
}

/// Rows per matmul call in batch-invariant mode.
const ROW_BLOCK: i32 = 8;

/// `x` (`[rows, width]`) with zero rows appended up to a multiple of `block`.
fn pad_rows(x: &Array, block: i32) -> Result<Array> {
    let rows = x.dim(0);
    let padded = (rows + block - 1) / block * block;
    if padded == rows {
        return Ok(x.clone());
    }
    let zeros = Array::zeros::<f32>(&[padded - rows, x.dim(1)])?;
    Ok(concatenate(&[x.clone(), zeros], 0)?)
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
fn fixed_shape_attention(
    q: &Array,
    k: &Array,
    v: &Array,
    scale: f32,
    offset: usize,
) -> Result<Array> {
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
