//! The one list of architectures the engine runs: how GGUF and
//! `config.json` spell each, what GGUF did to its weights, and its loader.
//! Adding an architecture is one file under `models/` and one entry here.

use crate::error::{EngineError, Result};
use crate::loading::config::{HyperParams, ModelConfig};
use crate::loading::weights::TensorMap;

use super::causal_lm::CausalLm;
use super::{gemma3, gemma4, llama, qwen3, qwen3_5, qwen3_moe, qwen3_next};

/// One architecture.
pub struct Architecture {
    /// afm's name, also HF's `model_type` (what `convert` writes).
    pub name: &'static str,
    /// GGUF's `general.architecture`.
    pub gguf_name: &'static str,
    /// HF's class name (`config.json` `architectures`).
    pub hf_class: &'static str,
    /// Other `model_type` spellings (a multimodal checkpoint's text part:
    /// `qwen3_5_text` inside `qwen3_5`'s `text_config`).
    pub aliases: &'static [&'static str],
    /// llama.cpp's converter permutes this architecture's Q/K rows for
    /// interleaved RoPE, so GGUF files of it run with "traditional" RoPE
    /// (and `convert` puts the rows back).
    pub gguf_permutes_qk: bool,
    /// GGUF tensor names (after `blk.N.`) that mean something else in
    /// this architecture than in llama's naming.
    pub gguf_tensors: &'static [(&'static str, &'static str)],
    /// The MLP activation as HF's config.json names it (key, value).
    pub hf_activation: (&'static str, &'static str),
    /// What llama.cpp's converter added to every `*norm.weight` (Gemma:
    /// 1, its norms scale by `1 + w`).
    pub gguf_norm_shift: f32,
    /// The chat template of a GGUF file that carries none (base models).
    pub default_chat_template: Option<&'static str>,
    /// Tokens that end a turn whatever the file declares as EOS.
    pub turn_end_tokens: &'static [&'static str],
    /// The architecture's own hyper-parameters as GGUF and config.json
    /// spell them (`convert` writes a GGUF's under config.json's names).
    pub gguf_keys: &'static [(&'static str, &'static str)],
    /// Builds the network. `hyper` holds what the architecture reads
    /// beyond the common hyper-parameters.
    pub load: fn(ModelConfig, &HyperParams, &TensorMap) -> Result<Box<dyn CausalLm>>,
}

/// Every architecture, in the order errors list them.
pub static ARCHITECTURES: &[Architecture] = &[
    Architecture {
        name: "llama",
        gguf_name: "llama",
        hf_class: "LlamaForCausalLM",
        aliases: &[],
        gguf_permutes_qk: true,
        gguf_keys: &[],
        gguf_tensors: &[],
        hf_activation: ("hidden_act", "silu"),
        gguf_norm_shift: 0.0,
        default_chat_template: None,
        turn_end_tokens: &[],
        load: llama::load,
    },
    Architecture {
        name: "qwen3",
        gguf_name: "qwen3",
        hf_class: "Qwen3ForCausalLM",
        aliases: &[],
        gguf_permutes_qk: false,
        gguf_keys: &[],
        gguf_tensors: &[],
        hf_activation: ("hidden_act", "silu"),
        gguf_norm_shift: 0.0,
        default_chat_template: None,
        turn_end_tokens: &[],
        load: qwen3::load,
    },
    Architecture {
        name: "qwen3_moe",
        gguf_name: "qwen3moe",
        hf_class: "Qwen3MoeForCausalLM",
        aliases: &[],
        gguf_permutes_qk: false,
        gguf_keys: &[
            ("expert_count", "num_experts"),
            ("expert_used_count", "num_experts_per_tok"),
            ("expert_feed_forward_length", "moe_intermediate_size"),
        ],
        gguf_tensors: &[
            ("ffn_gate_inp", "mlp.gate"),
            ("ffn_gate_exps", "mlp.switch_mlp.gate_proj"),
            ("ffn_up_exps", "mlp.switch_mlp.up_proj"),
            ("ffn_down_exps", "mlp.switch_mlp.down_proj"),
        ],
        hf_activation: ("hidden_act", "silu"),
        gguf_norm_shift: 0.0,
        default_chat_template: None,
        turn_end_tokens: &[],
        load: qwen3_moe::load,
    },
    // The hybrid Qwen models load from HF/MLX folders; their GGUF names
    // are llama.cpp's, whose recurrent tensors the GGUF path does not map.
    Architecture {
        name: "qwen3_next",
        gguf_name: "qwen3next",
        hf_class: "Qwen3NextForCausalLM",
        aliases: &[],
        gguf_permutes_qk: false,
        gguf_keys: &[],
        gguf_tensors: &[],
        hf_activation: ("hidden_act", "silu"),
        gguf_norm_shift: 0.0,
        default_chat_template: None,
        turn_end_tokens: &[],
        load: qwen3_next::load,
    },
    Architecture {
        name: "qwen3_5",
        gguf_name: "qwen35",
        hf_class: "Qwen3_5ForConditionalGeneration",
        aliases: &["qwen3_5_text"],
        gguf_permutes_qk: false,
        gguf_keys: &[],
        gguf_tensors: &[],
        hf_activation: ("hidden_act", "silu"),
        gguf_norm_shift: 0.0,
        default_chat_template: None,
        turn_end_tokens: &[],
        load: qwen3_5::load,
    },
    Architecture {
        name: "qwen3_5_moe",
        gguf_name: "qwen35moe",
        hf_class: "Qwen3_5MoeForConditionalGeneration",
        aliases: &["qwen3_5_moe_text"],
        gguf_permutes_qk: false,
        gguf_keys: &[],
        gguf_tensors: &[],
        hf_activation: ("hidden_act", "silu"),
        gguf_norm_shift: 0.0,
        default_chat_template: None,
        turn_end_tokens: &[],
        load: qwen3_5::load,
    },
    Architecture {
        name: "gemma3_text",
        gguf_name: "gemma3",
        hf_class: "Gemma3ForCausalLM",
        aliases: &[],
        gguf_permutes_qk: false,
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
        load: gemma3::load,
    },
    // Gemma 4 loads from HF/MLX folders (a multimodal one's `text_config`
    // names `gemma4_text`); its GGUF tensors are not mapped.
    Architecture {
        name: "gemma4_text",
        gguf_name: "gemma4",
        hf_class: "Gemma4ForCausalLM",
        aliases: &[],
        gguf_permutes_qk: false,
        gguf_keys: &[],
        gguf_tensors: &[],
        hf_activation: ("hidden_activation", "gelu_pytorch_tanh"),
        gguf_norm_shift: 0.0,
        default_chat_template: None,
        turn_end_tokens: &["<turn|>", "<|tool_response>"],
        load: gemma4::load,
    },
];

/// The architecture any of its spellings names.
pub fn find(name: &str) -> Result<&'static Architecture> {
    ARCHITECTURES
        .iter()
        .find(|a| {
            name == a.name || name == a.gguf_name || name == a.hf_class || a.aliases.contains(&name)
        })
        .ok_or_else(|| EngineError::UnsupportedArchitecture {
            name: name.to_string(),
            supported: ARCHITECTURES
                .iter()
                .map(|a| a.name)
                .collect::<Vec<_>>()
                .join(", "),
        })
}

impl Architecture {
    /// The architecture's own hyper-parameters under config.json's names:
    /// a config.json's keys as they are, a GGUF's known keys renamed.
    pub fn hf_hyper_params(
        &self,
        hyper: &HyperParams,
    ) -> serde_json::Map<String, serde_json::Value> {
        if !hyper.from_gguf {
            return hyper.values.clone();
        }
        self.gguf_keys
            .iter()
            .filter_map(|(gguf, hf)| Some((hf.to_string(), hyper.values.get(*gguf)?.clone())))
            .collect()
    }
}

/// Resolves a config read from a file: the architecture under its afm
/// name, and the RoPE layout the file's weights are stored in.
pub fn resolve(mut config: ModelConfig, from_gguf: bool) -> Result<ModelConfig> {
    let arch = find(&config.architecture)?;
    config.architecture = arch.name.to_string();
    if from_gguf {
        config.rope_traditional = arch.gguf_permutes_qk;
    }
    Ok(config)
}

/// Builds the network `config` names.
pub fn load(
    config: ModelConfig,
    hyper: &HyperParams,
    weights: &TensorMap,
) -> Result<Box<dyn CausalLm>> {
    (find(&config.architecture)?.load)(config, hyper, weights)
}
