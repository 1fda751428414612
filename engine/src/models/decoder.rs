//! The pre-norm decoder stack that llama, Qwen3, Qwen3-MoE, Qwen3-Next,
//! Qwen3.5 and Gemma 3 share: embedding; per layer `h += mix(norm(h))`,
//! `h += ffn(norm(h))`; final norm and LM head on the sampled rows. An
//! architecture supplies each layer's token mixer (attention with its spec,
//! or a recurrent Gated DeltaNet) and feed-forward block, and its
//! [`Style`]: zero-centred norm weights, Gemma's norms after each block,
//! a scaled embedding.

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

/// What sets an architecture's stack apart from llama's.
#[derive(Debug, Clone, Copy, Default)]
pub struct Style {
    /// Added to every RMSNorm weight of the stack: 1 where checkpoints
    /// store them zero-centred (Qwen3-Next's, Qwen3.5's, Gemma 3's HF
    /// files; Gemma's GGUF files store `1 + w` already).
    pub norm_offset: f32,
    /// Gemma's four norms a layer: each block's output is normed too
    /// (`post_attention_layernorm` after attention, then
    /// `pre_feedforward_layernorm` and `post_feedforward_layernorm` around
    /// the feed-forward); else two (`input_layernorm`,
    /// `post_attention_layernorm` before the feed-forward).
    pub block_output_norms: bool,
    /// The embedding scaled by `sqrt(hidden_size)` (Gemma).
    pub scaled_embedding: bool,
}

struct Layer {
    input_norm: Array,
    mixer: Mixer,
    /// The layer's index among the layers of its mixer's kind (where its
    /// KV or state sits in the store).
    kind_index: usize,
    /// The mixer's output norm ([`Style::block_output_norms`]).
    mixer_out_norm: Option<Array>,
    /// The norm before the feed-forward.
    post_norm: Array,
    ffn: Box<dyn FeedForward>,
    ffn_out_norm: Option<Array>,
    /// The layer as one op, where the CPU primitive runs it.
    one_op: Option<LayerOp>,
}

pub struct Decoder {
    config: ModelConfig,
    kv_layout: KvLayout,
    embed: Embedding,
    /// `sqrt(hidden_size)` ([`Style::scaled_embedding`]).
    embed_scale: Option<Array>,
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
        Decoder::load_styled(config, weights, Style::default(), layer)
    }

    /// Like [`Decoder::load`], in an architecture's [`Style`].
    pub fn load_styled(
        config: ModelConfig,
        weights: &TensorMap,
        style: Style,
        mut layer: impl FnMut(usize, &str) -> Result<DecoderLayer>,
    ) -> Result<Self> {
        let norm = |name: &str| norm_weight(weights, name, style.norm_offset);
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
                let named = |name: &str| norm(&format!("{p}.{name}.weight"));
                let (mixer_out_norm, post_norm, ffn_out_norm) = match style.block_output_norms {
                    true => (
                        Some(named("post_attention_layernorm")?),
                        named("pre_feedforward_layernorm")?,
                        Some(named("post_feedforward_layernorm")?),
                    ),
                    false => (None, named("post_attention_layernorm")?, None),
                };
                let norms = LayerNorms {
                    attn: &input_norm,
                    attn_out: mixer_out_norm.as_ref(),
                    ffn: &post_norm,
                    ffn_out: ffn_out_norm.as_ref(),
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
                    mixer_out_norm,
                    post_norm,
                    ffn,
                    ffn_out_norm,
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
            embed_scale: style
                .scaled_embedding
                .then(|| Array::from_f32((config.hidden_size as f32).sqrt())),
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
            arrays.extend(l.mixer_out_norm.iter().chain(&l.ffn_out_norm).cloned());
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

/// An RMSNorm weight as `rms_norm` takes it: stored, plus `offset` where
/// the checkpoint stores it zero-centred.
pub fn norm_weight(weights: &TensorMap, name: &str, offset: f32) -> Result<Array> {
    let w = weights.dense(name)?;
    Ok(match offset {
        0.0 => w,
        o => w.add(Array::from_f32(o))?,
    })
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
        if let Some(scale) = &self.embed_scale {
            h = h.multiply(scale)?;
        }
        let rows = ctx.layer_rows();
        for layer in &self.layers {
            ctx.hand_over(&h)?;
            if let Some(one_op) = &layer.one_op {
                h = one_op.forward(&mut ctx, layer.kind_index, &h, &rows, None)?;
                continue;
            }
            let x = rms_norm(&h, Some(&layer.input_norm), eps)?;
            let mut mixed = match &layer.mixer {
                Mixer::Attention(a) => a.forward(&mut ctx, layer.kind_index, &x)?,
                Mixer::Recurrent(r) => r.forward(&mut ctx, layer.kind_index, &x)?,
            };
            if let Some(n) = &layer.mixer_out_norm {
                mixed = rms_norm(&mixed, Some(n), eps)?;
            }
            h = h.add(&mixed)?;
            let x = rms_norm(&h, Some(&layer.post_norm), eps)?;
            let mut fed = layer.ffn.forward(&ctx, &x)?;
            if let Some(n) = &layer.ffn_out_norm {
                fed = rms_norm(&fed, Some(n), eps)?;
            }
            h = h.add(&fed)?;
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
