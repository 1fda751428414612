//! The llama decoder (Llama 2/3, SmolLM, Mistral-style dense models):
//! RMSNorm, grouped-query attention with RoPE, SwiGLU MLP.

use mlx_rs::fast::{rms_norm, rope, scaled_dot_product_attention, ScaledDotProductAttentionMask};
use mlx_rs::ops::indexing::IndexOp;
use mlx_rs::Array;

use super::{CausalLm, KvCache};
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

    fn attention(
        &self,
        layer: &Layer,
        x: &Array,
        cache: &mut KvCache,
        idx: usize,
    ) -> Result<Array> {
        let c = &self.config;
        let (b, l) = (x.dim(0), x.dim(1));
        let heads = |proj: &Linear, n: usize| -> Result<Array> {
            Ok(proj
                .forward(x)?
                .reshape(&[b, l, n as i32, c.head_dim as i32])?
                .transpose_axes(&[0, 2, 1, 3])?)
        };
        let offset = cache.offset() as i32;
        let dims = c.head_dim as i32;
        let q = rope(
            heads(&layer.q_proj, c.num_heads)?,
            dims,
            c.rope_traditional,
            c.rope_theta,
            1.0,
            offset,
            None,
        )?;
        let k = rope(
            heads(&layer.k_proj, c.num_kv_heads)?,
            dims,
            c.rope_traditional,
            c.rope_theta,
            1.0,
            offset,
            None,
        )?;
        let v = heads(&layer.v_proj, c.num_kv_heads)?;
        let (k, v) = cache.update(idx, k, v)?;
        let mask = (l > 1).then_some(ScaledDotProductAttentionMask::Causal);
        let scale = (c.head_dim as f32).powf(-0.5);
        let o = scaled_dot_product_attention(q, k, v, scale, mask, None)?
            .transpose_axes(&[0, 2, 1, 3])?
            .reshape(&[b, l, -1])?;
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

    fn forward(&self, tokens: &[u32], cache: &mut KvCache) -> Result<Array> {
        let eps = self.config.rms_norm_eps;
        let ids = Array::from_slice(tokens, &[1, tokens.len() as i32]);
        let mut h = self.embed.lookup(&ids)?;
        for (i, layer) in self.layers.iter().enumerate() {
            let a = self.attention(
                layer,
                &rms_norm(&h, Some(&layer.input_norm), eps)?,
                cache,
                i,
            )?;
            h = h.add(&a)?;
            let m = Self::mlp(layer, &rms_norm(&h, Some(&layer.post_norm), eps)?)?;
            h = h.add(&m)?;
        }
        cache.advance(tokens.len());
        // Only the last position is sampled: apply the LM head to it alone.
        let last = h.index((.., -1, ..));
        let last = rms_norm(&last, Some(&self.norm), eps)?;
        Ok(self.lm_head.forward(&last)?.reshape(&[-1])?)
    }

    fn new_cache(&self) -> KvCache {
        KvCache::new(self.config.num_layers)
    }
}
