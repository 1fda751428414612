//! Gemma 3 (text): sliding-window layers (their own window and RoPE base)
//! between global ones, queries scaled by `query_pre_attn_scalar^-0.5`,
//! q/k norms, Gemma's RMSNorm (`x * (1 + w)`), a norm after attention and
//! around the GeGLU MLP, the embedding scaled by `sqrt(hidden)`, a tied
//! head.

use mlx_rs::fast::rms_norm;
use mlx_rs::Array;

use super::causal_lm::CausalLm;
use super::feed_forward::FeedForward;
use super::forward::{AttentionSpec, BatchItem, ForwardContext, Overlap, QkNorm};
use super::gated_mlp::{Activation, GatedMlp};
use super::kv_layout::KvLayout;
use super::kv_store::KvStore;
use super::layer_op::{self, LayerNorms, LayerOp};
use super::lm_head;
use super::self_attention::SelfAttention;
use crate::error::{EngineError, Result};
use crate::layers::{Embedding, Linear};
use crate::loading::config::{HyperParams, ModelConfig};
use crate::loading::family::Family;
use crate::loading::weights::TensorMap;

/// What Gemma 3 reads beyond the common hyper-parameters, in config.json
/// and GGUF spellings (llama.cpp fixes what GGUF files do not carry).
struct GemmaParams {
    window: usize,
    /// Which layers slide.
    sliding: Vec<bool>,
    local_rope_base: f32,
    query_scale: f32,
}

impl GemmaParams {
    fn read(config: &ModelConfig, hyper: &HyperParams, origin: &str) -> Result<Self> {
        let window = hyper
            .usize(&["sliding_window", "attention.sliding_window"])
            .ok_or_else(|| EngineError::invalid_model(origin, "gemma3 needs sliding_window"))?;
        let sliding: Vec<bool> = match hyper.get(&["layer_types"]).and_then(|v| v.as_array()) {
            Some(types) => types
                .iter()
                .map(|t| t.as_str() == Some("sliding_attention"))
                .collect(),
            None => {
                // Every `pattern`-th layer is global (6 in the GGUF files
                // llama.cpp writes, which do not record it).
                let pattern = hyper.usize(&["sliding_window_pattern"]).unwrap_or(6).max(1);
                (0..config.num_layers)
                    .map(|i| (i + 1) % pattern != 0)
                    .collect()
            }
        };
        if sliding.len() != config.num_layers {
            return Err(EngineError::invalid_model(
                origin,
                format!(
                    "layer_types has {} entries for {} layers",
                    sliding.len(),
                    config.num_layers
                ),
            ));
        }
        if let Some(scaling) = hyper.get(&["rope_scaling"]).filter(|v| !v.is_null()) {
            return Err(EngineError::invalid_model(
                origin,
                format!("gemma3 rope_scaling {scaling} is not supported"),
            ));
        }
        let query_pre_attn_scalar = hyper
            .f32(&["query_pre_attn_scalar"])
            .unwrap_or(config.head_dim as f32);
        Ok(GemmaParams {
            window,
            sliding,
            local_rope_base: hyper.f32(&["rope_local_base_freq"]).unwrap_or(10_000.0),
            query_scale: query_pre_attn_scalar.powf(-0.5),
        })
    }
}

/// How Gemma 3's files describe it: GGUF renames its extra norms and
/// shifts every norm weight by 1; a base model's file may carry no
/// template, and `<end_of_turn>` ends a turn whatever the file's EOS.
pub const FAMILY: Family = Family {
    gguf_keys: &[("attention.sliding_window", "sliding_window")],
    gguf_tensors: &[
        ("ffn_norm", "pre_feedforward_layernorm"),
        ("post_attention_norm", "post_attention_layernorm"),
        ("post_ffw_norm", "post_feedforward_layernorm"),
    ],
    hf_activation: ("hidden_activation", "gelu_pytorch_tanh"),
    gguf_norm_shift: 1.0,
    default_chat_template: Some(include_str!("templates/gemma3.jinja")),
    turn_end_tokens: &["<end_of_turn>"],
    ..Family::plain("gemma3_text", "gemma3", "Gemma3ForCausalLM")
};

/// The registry's loader.
pub fn load(
    config: ModelConfig,
    hyper: &HyperParams,
    weights: &TensorMap,
) -> Result<Box<dyn CausalLm>> {
    Ok(Box::new(Gemma3::load(config, hyper, weights)?))
}

struct Layer {
    input_norm: Array,
    attention: SelfAttention,
    post_attention_norm: Array,
    pre_feedforward_norm: Array,
    mlp: GatedMlp,
    post_feedforward_norm: Array,
    /// The layer as one op, where the CPU primitive runs it.
    one_op: Option<LayerOp>,
}

pub struct Gemma3 {
    config: ModelConfig,
    kv_layout: KvLayout,
    embed: Embedding,
    /// `sqrt(hidden_size)`, applied to the embedding.
    embed_scale: Array,
    layers: Vec<Layer>,
    norm: Array,
    lm_head: Linear,
    batch_invariant: bool,
}

/// Gemma's RMSNorm weight as `rms_norm` takes it: `1 + w`. GGUF files
/// store `1 + w` already (llama.cpp's converter adds the one; the
/// registry's `gguf_norm_shift`).
fn gemma_norm(weights: &TensorMap, name: &str, stored_plus_one: bool) -> Result<Array> {
    let w = weights.dense(name)?;
    if stored_plus_one {
        return Ok(w);
    }
    Ok(w.add(Array::from_f32(1.0))?)
}

impl Gemma3 {
    fn load(config: ModelConfig, hyper: &HyperParams, weights: &TensorMap) -> Result<Self> {
        let params = GemmaParams::read(&config, hyper, weights.origin())?;
        let plus_one = hyper.from_gguf;
        let layers = (0..config.num_layers)
            .map(|i| {
                let p = format!("model.layers.{i}");
                let norm =
                    |name: &str| gemma_norm(weights, &format!("{p}.{name}.weight"), plus_one);
                let sliding = params.sliding[i];
                let spec = AttentionSpec {
                    scale: params.query_scale,
                    rope_base: if sliding {
                        params.local_rope_base
                    } else {
                        config.rope_theta
                    },
                    qk_norm: Some(QkNorm::new(
                        &norm("self_attn.q_norm")?,
                        &norm("self_attn.k_norm")?,
                        config.num_heads,
                        config.num_kv_heads,
                        config.rms_norm_eps,
                    )?),
                    window: sliding.then_some(params.window),
                    ..AttentionSpec::from_config(&config)
                };
                let mut layer = Layer {
                    input_norm: norm("input_layernorm")?,
                    attention: SelfAttention::load(weights, &format!("{p}.self_attn"), spec)?,
                    post_attention_norm: norm("post_attention_layernorm")?,
                    pre_feedforward_norm: norm("pre_feedforward_layernorm")?,
                    mlp: GatedMlp::load(weights, &format!("{p}.mlp"), Activation::GeluTanh)?,
                    post_feedforward_norm: norm("post_feedforward_layernorm")?,
                    one_op: None,
                };
                let norms = LayerNorms {
                    attn: &layer.input_norm,
                    attn_out: Some(&layer.post_attention_norm),
                    ffn: &layer.pre_feedforward_norm,
                    ffn_out: Some(&layer.post_feedforward_norm),
                    eps: config.rms_norm_eps,
                };
                layer.one_op = LayerOp::new(norms, &layer.attention, &layer.mlp);
                Ok(layer)
            })
            .collect::<Result<Vec<_>>>()?;
        layer_op::log_coverage(
            layers.iter().filter(|l| l.one_op.is_some()).count(),
            layers.len(),
        );
        let embed = weights.embedding("model.embed_tokens")?;
        let model = Gemma3 {
            lm_head: lm_head::load(weights, &embed, &config)?,
            norm: gemma_norm(weights, "model.norm.weight", plus_one)?,
            embed_scale: Array::from_f32((config.hidden_size as f32).sqrt()),
            kv_layout: KvLayout::attention(
                layers
                    .iter()
                    .map(|l| l.attention.spec().layer_kv())
                    .collect(),
            ),
            config,
            embed,
            layers,
            batch_invariant: false,
        };
        let mut arrays = vec![
            model.norm.clone(),
            model.embed.0.stored(),
            model.lm_head.stored(),
        ];
        for l in &model.layers {
            arrays.extend([
                l.input_norm.clone(),
                l.post_attention_norm.clone(),
                l.pre_feedforward_norm.clone(),
                l.post_feedforward_norm.clone(),
            ]);
            arrays.extend(l.attention.stored());
            arrays.extend(l.mlp.stored());
        }
        mlx_rs::transforms::eval(&arrays)?;
        Ok(model)
    }
}

impl CausalLm for Gemma3 {
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
        let norm = |x: &Array, w: &Array| rms_norm(x, Some(w), eps);
        let mut ctx = ForwardContext::new(items, kv, self.batch_invariant, overlap)?;
        let mut h = self
            .embed
            .lookup(&ctx.token_ids())?
            .multiply(&self.embed_scale)?;
        let rows = ctx.layer_rows();
        for (i, l) in self.layers.iter().enumerate() {
            ctx.hand_over(&h)?;
            if let Some(one_op) = &l.one_op {
                h = one_op.forward(&mut ctx, i, &h, &rows, None)?;
                continue;
            }
            let a = l
                .attention
                .forward(&mut ctx, i, &norm(&h, &l.input_norm)?)?;
            h = h.add(&norm(&a, &l.post_attention_norm)?)?;
            let m = l.mlp.forward(&ctx, &norm(&h, &l.pre_feedforward_norm)?)?;
            h = h.add(&norm(&m, &l.post_feedforward_norm)?)?;
        }
        let final_norm = |x: &Array| Ok(norm(x, &self.norm)?);
        lm_head::sampled_logits(&mut ctx, &h, final_norm, &self.lm_head, &self.config)
    }

    fn set_batch_invariant(&mut self, on: bool) -> Result<()> {
        self.batch_invariant = on;
        Ok(())
    }
}
