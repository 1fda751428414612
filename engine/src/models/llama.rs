//! The llama decoder (Llama 2/3, SmolLM, Mistral-style dense models):
//! RMSNorm, grouped-query attention with RoPE, SwiGLU MLP.

use mlx_rs::fast::{rms_norm, rope, scaled_dot_product_attention, ScaledDotProductAttentionMask};
use mlx_rs::ops::concatenate;
use mlx_rs::ops::indexing::IndexOp;
use mlx_rs::Array;

use super::{BatchItem, CausalLm, KvCache};
use crate::error::Result;
use crate::model_config::ModelConfig;
use crate::weights::{Embedding, Linear, TensorMap};

struct Layer {
    input_norm: Array,
    q_proj: Linear,
    k_proj: Linear,
    v_proj: Linear,
    o_proj: Linear,
    post_norm: Array,
    gate_proj: Linear,
    up_proj: Linear,
    down_proj: Linear,
}

/// A loaded llama model.
pub struct Llama {
    config: ModelConfig,
    embed: Embedding,
    layers: Vec<Layer>,
    norm: Array,
    lm_head: Linear,
}

impl Llama {
    pub fn load(config: ModelConfig, weights: &TensorMap) -> Result<Self> {
        let layers = (0..config.num_layers)
            .map(|i| {
                let p = format!("model.layers.{i}");
                Ok(Layer {
                    input_norm: weights.dense(&format!("{p}.input_layernorm.weight"))?,
                    q_proj: weights.linear(&format!("{p}.self_attn.q_proj"))?,
                    k_proj: weights.linear(&format!("{p}.self_attn.k_proj"))?,
                    v_proj: weights.linear(&format!("{p}.self_attn.v_proj"))?,
                    o_proj: weights.linear(&format!("{p}.self_attn.o_proj"))?,
                    post_norm: weights.dense(&format!("{p}.post_attention_layernorm.weight"))?,
                    gate_proj: weights.linear(&format!("{p}.mlp.gate_proj"))?,
                    up_proj: weights.linear(&format!("{p}.mlp.up_proj"))?,
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
            arrays.extend(
                [
                    &l.q_proj,
                    &l.k_proj,
                    &l.v_proj,
                    &l.o_proj,
                    &l.gate_proj,
                    &l.up_proj,
                    &l.down_proj,
                ]
                .map(Linear::stored),
            );
        }
        mlx_rs::transforms::eval(&arrays)?;
        Ok(())
    }

    /// Attention for every item: projections run once over all new tokens;
    /// RoPE, the cache and attention run per item, against its own cache only.
    fn attention(
        &self,
        layer: &Layer,
        x: &Array,
        items: &mut [BatchItem<'_>],
        idx: usize,
    ) -> Result<Array> {
        let c = &self.config;
        let (q_all, k_all, v_all) = (
            layer.q_proj.forward(x)?,
            layer.k_proj.forward(x)?,
            layer.v_proj.forward(x)?,
        );
        let dims = c.head_dim as i32;
        let scale = (c.head_dim as f32).powf(-0.5);
        let mut outs = Vec::with_capacity(items.len());
        let mut start = 0i32;
        for item in items.iter_mut() {
            let l = item.tokens.len() as i32;
            let heads = |all: &Array, n: usize| -> Result<Array> {
                Ok(all
                    .index((.., start..start + l, ..))
                    .reshape(&[1, l, n as i32, dims])?
                    .transpose_axes(&[0, 2, 1, 3])?)
            };
            let offset = item.cache.offset() as i32;
            let rotate =
                |t: Array| rope(t, dims, c.rope_traditional, c.rope_theta, 1.0, offset, None);
            let q = rotate(heads(&q_all, c.num_heads)?)?;
            let k = rotate(heads(&k_all, c.num_kv_heads)?)?;
            let v = heads(&v_all, c.num_kv_heads)?;
            let (k, v) = item.cache.update(idx, k, v)?;
            let mask = (l > 1).then_some(ScaledDotProductAttentionMask::Causal);
            outs.push(
                scaled_dot_product_attention(q, k, v, scale, mask, None)?
                    .transpose_axes(&[0, 2, 1, 3])?
                    .reshape(&[1, l, -1])?,
            );
            start += l;
        }
        let o = if outs.len() == 1 {
            outs.pop().expect("one output")
        } else {
            concatenate(&outs, 1)?
        };
        layer.o_proj.forward(&o)
    }

    fn mlp(layer: &Layer, x: &Array) -> Result<Array> {
        let gate = mlx_rs::nn::silu(layer.gate_proj.forward(x)?)?;
        let up = layer.up_proj.forward(x)?;
        layer.down_proj.forward(&gate.multiply(&up)?)
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
        for (i, layer) in self.layers.iter().enumerate() {
            let x = rms_norm(&h, Some(&layer.input_norm), eps)?;
            h = h.add(&self.attention(layer, &x, items, i)?)?;
            let x = rms_norm(&h, Some(&layer.post_norm), eps)?;
            h = h.add(&Self::mlp(layer, &x)?)?;
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
        Ok(self.lm_head.forward(&picked)?.reshape(&[n, -1])?)
    }

    fn new_cache(&self) -> KvCache {
        KvCache::new(self.config.num_layers)
    }
}
