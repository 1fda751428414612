//! Gemma 3 (text): sliding-window layers (their own window and RoPE base)
//! between global ones, queries scaled by `query_pre_attn_scalar^-0.5`,
//! q/k norms, Gemma's RMSNorm (`x * (1 + w)`), a norm after attention and
//! around the GeGLU MLP, the embedding scaled by `sqrt(hidden)`, a tied
//! head. The shared decoder runs it (`decoder::Style`).

use super::causal_lm::CausalLm;
use super::decoder::{norm_weight, Decoder, DecoderLayer, Mixer, Style};
use super::forward::{AttentionSpec, QkNorm};
use super::gated_mlp::{Activation, GatedMlp};
use super::self_attention::SelfAttention;
use crate::error::{EngineError, Result};
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

/// The registry's loader: the shared decoder in Gemma's style. Gemma's
/// RMSNorm scales by `1 + w`; HF files store `w`, GGUF files `1 + w`
/// (llama.cpp's converter adds the one; the registry's `gguf_norm_shift`).
pub fn load(
    config: ModelConfig,
    hyper: &HyperParams,
    weights: &TensorMap,
) -> Result<Box<dyn CausalLm>> {
    let params = GemmaParams::read(&config, hyper, weights.origin())?;
    let style = Style {
        norm_offset: if hyper.from_gguf { 0.0 } else { 1.0 },
        block_output_norms: true,
        scaled_embedding: true,
    };
    let c = config.clone();
    let decoder = Decoder::load_styled(config, weights, style, |i, p| {
        let norm =
            |name: &str| norm_weight(weights, &format!("{p}.{name}.weight"), style.norm_offset);
        let sliding = params.sliding[i];
        let spec = AttentionSpec {
            scale: params.query_scale,
            rope_base: if sliding {
                params.local_rope_base
            } else {
                c.rope_theta
            },
            qk_norm: Some(QkNorm::new(
                &norm("self_attn.q_norm")?,
                &norm("self_attn.k_norm")?,
                c.num_heads,
                c.num_kv_heads,
                c.rms_norm_eps,
            )?),
            window: sliding.then_some(params.window),
            ..AttentionSpec::from_config(&c)
        };
        Ok(DecoderLayer {
            mixer: Mixer::Attention(SelfAttention::load(
                weights,
                &format!("{p}.self_attn"),
                spec,
            )?),
            ffn: Box::new(GatedMlp::load(
                weights,
                &format!("{p}.mlp"),
                Activation::GeluTanh,
            )?),
        })
    })?;
    Ok(Box::new(decoder))
}
