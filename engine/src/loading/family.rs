//! What the file formats need to know about an architecture: how GGUF and
//! `config.json` spell it, what llama.cpp's converter did to its weights,
//! its hyper-parameters' GGUF names, and the turn format a file may leave
//! out. Each architecture's file under `models/` declares its [`Family`];
//! the readers here are handed the lookup ([`Families`]) and know none.

use crate::error::Result;
use crate::loading::config::{HyperParams, ModelConfig};

/// One architecture as its files describe it.
#[derive(Debug)]
pub struct Family {
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
}

/// The family any spelling names (afm's, GGUF's, HF's class, an alias),
/// or an error listing those the engine runs: the models registry's.
pub type Families = fn(&str) -> Result<&'static Family>;

impl Family {
    /// The fields of a llama-like architecture: no renamed tensors or keys,
    /// SiLU, nothing shifted, no template or turn-end of its own.
    pub const fn plain(
        name: &'static str,
        gguf_name: &'static str,
        hf_class: &'static str,
    ) -> Self {
        Family {
            name,
            gguf_name,
            hf_class,
            aliases: &[],
            gguf_permutes_qk: false,
            gguf_tensors: &[],
            hf_activation: ("hidden_act", "silu"),
            gguf_norm_shift: 0.0,
            default_chat_template: None,
            turn_end_tokens: &[],
            gguf_keys: &[],
        }
    }

    /// Whether `name` is one of its spellings.
    pub fn is_named(&self, name: &str) -> bool {
        name == self.name
            || name == self.gguf_name
            || name == self.hf_class
            || self.aliases.contains(&name)
    }

    /// `config` as read from a file, under afm's name and with the RoPE
    /// layout the file's weights are stored in.
    pub fn resolve(&self, mut config: ModelConfig, from_gguf: bool) -> ModelConfig {
        config.architecture = self.name.to_string();
        if from_gguf {
            config.rope_traditional = self.gguf_permutes_qk;
        }
        config
    }

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
