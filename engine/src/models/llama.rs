//! The llama decoder (Llama 2/3, SmolLM, Mistral-style dense models):
//! RMSNorm, grouped-query attention with RoPE, SwiGLU MLP.

use mlx_rs::fast::rms_norm;
use mlx_rs::Array;

use super::causal_lm::CausalLm;
use super::forward::{AttentionSpec, BatchItem, ForwardContext};
use super::kv_layout::KvLayout;
use super::lm_head;
use crate::error::Result;
use crate::loading::config::{HyperParams, ModelConfig};
use crate::loading::weights::{Embedding, FusedLinear, Linear, TensorMap};

/// The registry's loader: llama reads nothing beyond the common
/// hyper-parameters.
pub fn load(
    config: ModelConfig,
    _hyper: &HyperParams,
    weights: &TensorMap,
) -> Result<Box<dyn CausalLm>> {
    Ok(Box::new(Llama::load(config, weights)?))
}

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
    kv_layout: KvLayout,
    attention: AttentionSpec,
    embed: Embedding,
    layers: Vec<Layer>,
    norm: Array,
    lm_head: Linear,
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
        let model = Llama {
            lm_head: lm_head::load(weights, &embed, &config)?,
            norm: weights.dense("model.norm.weight")?,
            kv_layout: KvLayout::uniform(config.num_layers, config.num_kv_heads, config.head_dim),
            attention: AttentionSpec {
                heads: config.num_heads,
                kv_heads: config.num_kv_heads,
                head_dim: config.head_dim,
                scale: (config.head_dim as f32).powf(-0.5),
                rope_base: config.rope_theta,
                rope_traditional: config.rope_traditional,
            },
            config,
            embed,
            layers,
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

    fn attention(&self, ctx: &mut ForwardContext, i: usize, x: &Array) -> Result<Array> {
        let layer = &self.layers[i];
        // q and k side by side, so one RoPE call rotates both.
        let [qk, v]: [Array; 2] = ctx
            .fused_grouped(&layer.qkv_proj, x, &[2, 1])?
            .try_into()
            .expect("q and k, then v");
        let o = ctx.attention(i, &qk, &v, &self.attention)?;
        ctx.linear(&layer.o_proj, &o)
    }

    fn mlp(&self, ctx: &ForwardContext, layer: &Layer, x: &Array) -> Result<Array> {
        let [gate, up]: [Array; 2] = ctx
            .fused(&layer.gate_up_proj, x)?
            .try_into()
            .expect("gate and up");
        let gate = mlx_rs::nn::silu(gate)?;
        ctx.linear(&layer.down_proj, &gate.multiply(&up)?)
    }
}

impl CausalLm for Llama {
    fn config(&self) -> &ModelConfig {
        &self.config
    }

    fn kv_layout(&self) -> &KvLayout {
        &self.kv_layout
    }

    fn forward_batch(&self, items: &mut [BatchItem<'_>]) -> Result<Array> {
        let eps = self.config.rms_norm_eps;
        let mut ctx = ForwardContext::new(items, self.batch_invariant);
        let mut h = self.embed.lookup(&ctx.token_ids())?;
        for (i, layer) in self.layers.iter().enumerate() {
            let x = rms_norm(&h, Some(&layer.input_norm), eps)?;
            h = h.add(&self.attention(&mut ctx, i, &x)?)?;
            let x = rms_norm(&h, Some(&layer.post_norm), eps)?;
            h = h.add(&self.mlp(&ctx, layer, &x)?)?;
        }
        // The LM head runs only on the positions that are sampled.
        let Some(last) = ctx.sampled_rows(&h)? else {
            return lm_head::no_logits(&self.config);
        };
        let n = last.dim(1);
        let last = rms_norm(&last, Some(&self.norm), eps)?;
        Ok(ctx.linear(&self.lm_head, &last)?.reshape(&[n, -1])?)
    }

    fn set_batch_invariant(&mut self, on: bool) -> Result<()> {
        self.batch_invariant = on;
        Ok(())
    }
}
