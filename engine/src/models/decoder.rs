//! The pre-norm decoder stack that llama, Qwen3, Qwen3-MoE, Qwen3-Next and
//! Qwen3.5 share: embedding; per layer `h += mix(norm(h))`,
//! `h += ffn(norm(h))`; final norm and LM head on the sampled rows. An
//! architecture supplies each layer's token mixer (attention with its spec,
//! or a recurrent Gated DeltaNet) and feed-forward block.

use mlx_rs::fast::rms_norm;
use mlx_rs::Array;

use super::causal_lm::CausalLm;
use super::feed_forward::FeedForward;
use super::forward::{BatchItem, ForwardContext, Overlap};
use super::gated_delta_net::GatedDeltaNet;
use super::gated_mlp::{Activation, GatedMlp};
use super::kv_layout::KvLayout;
use super::kv_store::KvStore;
use super::layer_op::{self, LayerNorms, LayerOp};
use super::lm_head;
use super::self_attention::SelfAttention;
use super::sparse_moe::experts_refuse_batch_invariance;
use crate::error::Result;
use crate::layers::{Embedding, Linear};
use crate::loading::config::ModelConfig;
use crate::loading::weights::TensorMap;

/// What mixes information across a layer's tokens.
pub enum Mixer {
    /// Softmax attention over KV per token.
    Attention(SelfAttention),
    /// Linear attention over a fixed recurrent state.
    Recurrent(GatedDeltaNet),
}

/// One decoder layer as an architecture builds it.
pub struct DecoderLayer {
    pub mixer: Mixer,
    pub ffn: Box<dyn FeedForward>,
}

struct Layer {
    input_norm: Array,
    mixer: Mixer,
    /// The layer's index among the layers of its mixer's kind (where its
    /// KV or state sits in the store).
    kind_index: usize,
    post_norm: Array,
    ffn: Box<dyn FeedForward>,
    /// The layer as one op, where the CPU primitive runs it.
    one_op: Option<LayerOp>,
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
                mixer: Mixer::Attention(attention(p)?),
                ffn: Box::new(GatedMlp::load(
                    weights,
                    &format!("{p}.mlp"),
                    Activation::Silu,
                )?),
            })
        })
    }

    /// Builds the stack from HF-named weights; `layer(i, prefix)` builds
    /// layer `i`'s mixer and feed-forward under `model.layers.{i}`.
    pub fn load(
        config: ModelConfig,
        weights: &TensorMap,
        layer: impl FnMut(usize, &str) -> Result<DecoderLayer>,
    ) -> Result<Self> {
        Decoder::load_with_norm_offset(config, weights, 0.0, layer)
    }

    /// Like [`Decoder::load`], adding `norm_offset` to the stack's own
    /// RMSNorm weights (1 for HF checkpoints that store them zero-centred,
    /// Qwen3-Next's and Qwen3.5's).
    pub fn load_with_norm_offset(
        config: ModelConfig,
        weights: &TensorMap,
        norm_offset: f32,
        mut layer: impl FnMut(usize, &str) -> Result<DecoderLayer>,
    ) -> Result<Self> {
        let norm = |name: &str| -> Result<Array> {
            let w = weights.dense(name)?;
            Ok(match norm_offset {
                0.0 => w,
                o => w.add(Array::from_f32(o))?,
            })
        };
        let (mut attention_layers, mut recurrent_layers) = (0, 0);
        let mut kv_layout = KvLayout::default();
        let layers = (0..config.num_layers)
            .map(|i| {
                let p = format!("model.layers.{i}");
                let DecoderLayer { mixer, ffn } = layer(i, &p)?;
                let kind_index = match &mixer {
                    Mixer::Attention(a) => {
                        kv_layout.layers.push(a.spec().layer_kv());
                        attention_layers += 1;
                        attention_layers - 1
                    }
                    Mixer::Recurrent(r) => {
                        kv_layout.recurrent.push(r.state());
                        recurrent_layers += 1;
                        recurrent_layers - 1
                    }
                };
                let input_norm = norm(&format!("{p}.input_layernorm.weight"))?;
                let post_norm = norm(&format!("{p}.post_attention_layernorm.weight"))?;
                let norms = LayerNorms {
                    attn: &input_norm,
                    attn_out: None,
                    ffn: &post_norm,
                    ffn_out: None,
                    eps: config.rms_norm_eps,
                };
                let one_op = match &mixer {
                    Mixer::Attention(a) => LayerOp::new(norms, a, ffn.as_ref()),
                    Mixer::Recurrent(r) => LayerOp::recurrent(norms, r, ffn.as_ref()),
                };
                Ok(Layer {
                    input_norm,
                    mixer,
                    kind_index,
                    post_norm,
                    ffn,
                    one_op,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        layer_op::log_coverage(
            layers.iter().filter(|l| l.one_op.is_some()).count(),
            layers.len(),
        );
        let embed = weights.embedding("model.embed_tokens")?;
        let model = Decoder {
            lm_head: lm_head::load(weights, &embed, &config)?,
            norm: norm("model.norm.weight")?,
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
            arrays.extend(match &l.mixer {
                Mixer::Attention(a) => a.stored(),
                Mixer::Recurrent(r) => r.stored(),
            });
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

    fn forward_pass(
        &self,
        kv: &mut KvStore,
        items: &[BatchItem<'_>],
        overlap: Overlap,
    ) -> Result<Array> {
        let eps = self.config.rms_norm_eps;
        let mut ctx = ForwardContext::new(items, kv, self.batch_invariant, overlap)?;
        let mut h = self.embed.lookup(&ctx.token_ids())?;
        let rows = ctx.layer_rows();
        for layer in &self.layers {
            ctx.hand_over(&h)?;
            if let Some(one_op) = &layer.one_op {
                h = one_op.forward(&mut ctx, layer.kind_index, &h, &rows, None)?;
                continue;
            }
            let x = rms_norm(&h, Some(&layer.input_norm), eps)?;
            let mixed = match &layer.mixer {
                Mixer::Attention(a) => a.forward(&mut ctx, layer.kind_index, &x)?,
                Mixer::Recurrent(r) => r.forward(&mut ctx, layer.kind_index, &x)?,
            };
            h = h.add(&mixed)?;
            let x = rms_norm(&h, Some(&layer.post_norm), eps)?;
            h = h.add(&layer.ffn.forward(&ctx, &x)?)?;
        }
        let final_norm = |x: &Array| Ok(rms_norm(x, Some(&self.norm), eps)?);
        lm_head::sampled_logits(&mut ctx, &h, final_norm, &self.lm_head, &self.config)
    }

    fn set_batch_invariant(&mut self, on: bool) -> Result<()> {
        if on && !self.layers.iter().all(|l| l.ffn.batch_invariant()) {
            return Err(experts_refuse_batch_invariance(&self.config.architecture));
        }
        self.batch_invariant = on;
        Ok(())
    }
}
