//! The pre-norm decoder stack that llama, Qwen3 and Qwen3-MoE share:
//! embedding; per layer `h += attn(norm(h))`, `h += ffn(norm(h))`; final
//! norm and LM head on the sampled rows. An architecture supplies each
//! layer's attention (its spec: q/k norm, RoPE) and feed-forward block.

use mlx_rs::fast::rms_norm;
use mlx_rs::Array;

use super::causal_lm::CausalLm;
use super::feed_forward::FeedForward;
use super::forward::{BatchItem, ForwardContext};
use super::gated_mlp::{Activation, GatedMlp};
use super::kv_layout::KvLayout;
use super::kv_store::KvStore;
use super::lm_head;
use super::self_attention::SelfAttention;
use crate::error::{EngineError, Result};
use crate::loading::config::ModelConfig;
use crate::loading::weights::{Embedding, Linear, TensorMap};

/// One decoder layer as an architecture builds it.
pub struct DecoderLayer {
    pub attention: SelfAttention,
    pub ffn: Box<dyn FeedForward>,
}

struct Layer {
    input_norm: Array,
    attention: SelfAttention,
    post_norm: Array,
    ffn: Box<dyn FeedForward>,
}

pub struct Decoder {
    config: ModelConfig,
    kv_layout: KvLayout,
    embed: Embedding,
    layers: Vec<Layer>,
    norm: Array,
    lm_head: Linear,
    batch_invariant: bool,
}

impl Decoder {
    /// The stack with a SwiGLU MLP in every layer (llama, Qwen3), each
    /// layer's attention built by `attention(prefix)`.
    pub fn swiglu(
        config: ModelConfig,
        weights: &TensorMap,
        attention: impl Fn(&str) -> Result<SelfAttention>,
    ) -> Result<Self> {
        Decoder::load(config, weights, |_, p| {
            Ok(DecoderLayer {
                attention: attention(p)?,
                ffn: Box::new(GatedMlp::load(
                    weights,
                    &format!("{p}.mlp"),
                    Activation::Silu,
                )?),
            })
        })
    }

    /// Builds the stack from HF-named weights; `layer(i, prefix)` builds
    /// layer `i`'s attention and feed-forward under `model.layers.{i}`.
    pub fn load(
        config: ModelConfig,
        weights: &TensorMap,
        mut layer: impl FnMut(usize, &str) -> Result<DecoderLayer>,
    ) -> Result<Self> {
        let layers = (0..config.num_layers)
            .map(|i| {
                let p = format!("model.layers.{i}");
                let DecoderLayer { attention, ffn } = layer(i, &p)?;
                Ok(Layer {
                    input_norm: weights.dense(&format!("{p}.input_layernorm.weight"))?,
                    attention,
                    post_norm: weights.dense(&format!("{p}.post_attention_layernorm.weight"))?,
                    ffn,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let embed = weights.embedding("model.embed_tokens")?;
        let kv_layout = KvLayout {
            layers: layers
                .iter()
                .map(|l| l.attention.spec().layer_kv())
                .collect(),
        };
        let model = Decoder {
            lm_head: lm_head::load(weights, &embed, &config)?,
            norm: weights.dense("model.norm.weight")?,
            kv_layout,
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
            arrays.extend(l.attention.stored());
            arrays.extend(l.ffn.stored());
        }
        mlx_rs::transforms::eval(&arrays)?;
        Ok(())
    }
}

impl CausalLm for Decoder {
    fn config(&self) -> &ModelConfig {
        &self.config
    }

    fn kv_layout(&self) -> &KvLayout {
        &self.kv_layout
    }

    fn forward_batch(&self, kv: &mut KvStore, items: &[BatchItem<'_>]) -> Result<Array> {
        let eps = self.config.rms_norm_eps;
        let mut ctx = ForwardContext::new(items, kv, self.batch_invariant)?;
        let mut h = self.embed.lookup(&ctx.token_ids())?;
        for (i, layer) in self.layers.iter().enumerate() {
            let x = rms_norm(&h, Some(&layer.input_norm), eps)?;
            h = h.add(&layer.attention.forward(&mut ctx, i, &x)?)?;
            let x = rms_norm(&h, Some(&layer.post_norm), eps)?;
            h = h.add(&layer.ffn.forward(&ctx, &x)?)?;
        }
        let final_norm = |x: &Array| Ok(rms_norm(x, Some(&self.norm), eps)?);
        lm_head::sampled_logits(&mut ctx, &h, final_norm, &self.lm_head, &self.config)
    }

    fn set_batch_invariant(&mut self, on: bool) -> Result<()> {
        if on && !self.layers.iter().all(|l| l.ffn.batch_invariant()) {
            return Err(EngineError::Unsupported(format!(
                "architecture '{}' routes tokens to experts in groups that depend on the \
                 batch, so it cannot run batch-invariant (--deterministic)",
                self.config.architecture
            )));
        }
        self.batch_invariant = on;
        Ok(())
    }
}
