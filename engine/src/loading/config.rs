//! A decoder's hyper-parameters, read from GGUF metadata or `config.json`.

use serde::Deserialize;
use std::path::Path;

use crate::error::{EngineError, Result};
use crate::loading::gguf::GgufModelFile;

/// The hyper-parameters every decoder has. What an architecture has beyond
/// them it reads itself from [`HyperParams`].
#[derive(Debug, Clone, PartialEq)]
pub struct ModelConfig {
    /// As the models registry names it (HF's `model_type`); the file's own
    /// spelling until the registry has resolved it.
    pub architecture: String,
    pub vocab_size: usize,
    pub hidden_size: usize,
    pub intermediate_size: usize,
    pub num_layers: usize,
    pub num_heads: usize,
    pub num_kv_heads: usize,
    pub head_dim: usize,
    pub rms_norm_eps: f32,
    pub rope_theta: f32,
    /// GGUF stores Q/K rows permuted for interleaved ("traditional") RoPE;
    /// HF checkpoints use the rotate-half layout.
    pub rope_traditional: bool,
    pub max_position_embeddings: usize,
    pub tie_word_embeddings: bool,
}

impl ModelConfig {
    /// Reads a GGUF file's `<arch>.*` keys. `vocab_size` falls back to the
    /// token list's length, `head_dim` to `hidden / heads`. RoPE is taken as
    /// rotate-half; the registry knows which architectures GGUF permutes.
    pub fn from_gguf(file: &GgufModelFile) -> Result<Self> {
        let arch_name = file.require_string("general.architecture")?;
        let key = |k: &str| format!("{arch_name}.{k}");
        let hidden_size = file.require_usize(&key("embedding_length"))?;
        let num_heads = file.require_usize(&key("attention.head_count"))?;
        let vocab_size = match file.usize(&key("vocab_size"))? {
            Some(v) => v,
            None => file
                .strings("tokenizer.ggml.tokens")?
                .map(|t| t.len())
                .ok_or_else(|| file.missing("tokenizer.ggml.tokens"))?,
        };
        Ok(ModelConfig {
            architecture: arch_name.clone(),
            vocab_size,
            hidden_size,
            intermediate_size: file.require_usize(&key("feed_forward_length"))?,
            num_layers: file.require_usize(&key("block_count"))?,
            num_heads,
            num_kv_heads: file
                .usize(&key("attention.head_count_kv"))?
                .unwrap_or(num_heads),
            head_dim: file
                .usize(&key("attention.key_length"))?
                .unwrap_or(hidden_size / num_heads),
            rms_norm_eps: file
                .f32(&key("attention.layer_norm_rms_epsilon"))?
                .unwrap_or(1e-5),
            rope_theta: file.f32(&key("rope.freq_base"))?.unwrap_or(10_000.0),
            rope_traditional: false,
            max_position_embeddings: file.usize(&key("context_length"))?.unwrap_or(2048),
            tie_word_embeddings: !file.has_tensor("output.weight"),
        })
    }

    /// Reads an HF/MLX `config.json` (a multimodal one's text part).
    pub fn from_config_json(path: &Path) -> Result<Self> {
        let raw: RawConfig = serde_json::from_value(read_config_json(path)?)
            .map_err(|e| EngineError::invalid_model(path, e))?;
        let arch_name = raw
            .model_type
            .clone()
            .or_else(|| raw.architectures.as_ref().and_then(|a| a.first().cloned()))
            .ok_or_else(|| EngineError::invalid_model(path, "config.json has no model_type"))?;
        let need = |v: Option<usize>, name: &str| {
            v.ok_or_else(|| EngineError::invalid_model(path, format!("config.json lacks {name}")))
        };
        let hidden_size = need(raw.hidden_size, "hidden_size")?;
        let num_heads = need(raw.num_attention_heads, "num_attention_heads")?;
        Ok(ModelConfig {
            architecture: arch_name,
            vocab_size: need(raw.vocab_size, "vocab_size")?,
            hidden_size,
            // MoE-only configs (Qwen3.5-MoE) give the experts' size alone.
            intermediate_size: need(
                raw.intermediate_size.or(raw.moe_intermediate_size),
                "intermediate_size",
            )?,
            num_layers: need(raw.num_hidden_layers, "num_hidden_layers")?,
            num_heads,
            num_kv_heads: raw.num_key_value_heads.unwrap_or(num_heads),
            head_dim: raw.head_dim.unwrap_or(hidden_size / num_heads),
            rms_norm_eps: raw.rms_norm_eps.unwrap_or(1e-5),
            rope_theta: raw.rope_theta.unwrap_or(10_000.0),
            rope_traditional: false,
            max_position_embeddings: raw.max_position_embeddings.unwrap_or(2048),
            tie_word_embeddings: raw.tie_word_embeddings.unwrap_or(false),
        })
    }
}

/// Every hyper-parameter the model's file holds, for an architecture to
/// read what is its own: `config.json` as is, or a GGUF file's `<arch>.*`
/// keys without the prefix. The two spell keys differently, so readers
/// name both.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HyperParams {
    pub values: serde_json::Map<String, serde_json::Value>,
    /// GGUF spellings (`expert_count`), not config.json's (`num_experts`).
    pub from_gguf: bool,
}

impl HyperParams {
    /// The architecture a `config.json` names (`model_type`, else the first
    /// of `architectures`).
    pub fn architecture_name(&self) -> Option<&str> {
        self.values
            .get("model_type")
            .and_then(|v| v.as_str())
            .or_else(|| self.values.get("architectures")?.get(0)?.as_str())
    }

    /// The first of `keys` that is present.
    pub fn get(&self, keys: &[&str]) -> Option<&serde_json::Value> {
        keys.iter().find_map(|k| self.values.get(*k))
    }

    pub fn usize(&self, keys: &[&str]) -> Option<usize> {
        self.get(keys)?.as_u64().map(|v| v as usize)
    }

    pub fn f32(&self, keys: &[&str]) -> Option<f32> {
        self.get(keys)?.as_f64().map(|v| v as f32)
    }

    /// A GGUF file's `<arch>.*` keys, without the prefix.
    pub fn from_gguf(file: &GgufModelFile, arch: &str) -> Result<Self> {
        let prefix = format!("{arch}.");
        let values = file
            .metadata_keys()
            .filter_map(|key| {
                let name = key.strip_prefix(&prefix)?;
                Some((name.to_string(), file.json(key)?))
            })
            .collect();
        Ok(HyperParams {
            values,
            from_gguf: true,
        })
    }

    /// Reads `config.json` whole (a multimodal one's text part).
    pub fn from_config_json(path: &Path) -> Result<Self> {
        let values = match read_config_json(path)? {
            serde_json::Value::Object(map) => map,
            _ => {
                return Err(EngineError::invalid_model(
                    path,
                    "config.json is not an object",
                ))
            }
        };
        Ok(HyperParams {
            values,
            from_gguf: false,
        })
    }
}

/// MLX quantization parameters from `config.json` (`quantization` key).
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
pub struct QuantizationConfig {
    pub group_size: i32,
    pub bits: i32,
}

/// Reads `config.json`'s `quantization` (or `quantization_config`) entry.
pub fn quantization_of(path: &Path) -> Result<Option<QuantizationConfig>> {
    let raw = read_json::<RawConfig>(path)?;
    Ok(raw.quantization.or(raw.quantization_config))
}

/// Per-tensor quantization of an MLX folder: `config.json`'s
/// `quantization` entries that name a module (`"...mlp.gate": {"group_size":
/// 64, "bits": 8}`, mlx-lm's predicates keep routers at 8 bits while the rest
/// is 4), by module path. The packed shapes alone cannot tell 4 bits in
/// groups of 64 from 8 in groups of 32.
pub fn quantization_overrides(
    path: &Path,
) -> Result<std::collections::HashMap<String, QuantizationConfig>> {
    let top: serde_json::Map<String, serde_json::Value> = read_json(path)?;
    let entries = top
        .get("quantization")
        .or_else(|| top.get("quantization_config"))
        .and_then(|q| q.as_object());
    Ok(entries
        .into_iter()
        .flatten()
        .filter_map(|(name, v)| {
            let q = serde_json::from_value::<QuantizationConfig>(v.clone()).ok()?;
            Some((name.clone(), q))
        })
        .collect())
}

#[derive(Debug, Deserialize)]
struct RawConfig {
    model_type: Option<String>,
    architectures: Option<Vec<String>>,
    vocab_size: Option<usize>,
    hidden_size: Option<usize>,
    intermediate_size: Option<usize>,
    moe_intermediate_size: Option<usize>,
    num_hidden_layers: Option<usize>,
    num_attention_heads: Option<usize>,
    num_key_value_heads: Option<usize>,
    head_dim: Option<usize>,
    rms_norm_eps: Option<f32>,
    rope_theta: Option<f32>,
    max_position_embeddings: Option<usize>,
    tie_word_embeddings: Option<bool>,
    quantization: Option<QuantizationConfig>,
    quantization_config: Option<QuantizationConfig>,
}

/// A `config.json` as the text model reads it. A multimodal checkpoint
/// (Gemma 3's `model_type: gemma3`) keeps its language model's settings in
/// `text_config`: those win over the top level, whose vision settings are
/// dropped.
pub fn read_config_json(path: &Path) -> Result<serde_json::Value> {
    let mut top: serde_json::Map<String, serde_json::Value> = read_json(path)?;
    let Some(serde_json::Value::Object(text)) = top.remove("text_config") else {
        return Ok(serde_json::Value::Object(top));
    };
    top.remove("vision_config");
    top.extend(text);
    Ok(serde_json::Value::Object(top))
}

/// Whether a `config.json` describes a multimodal checkpoint whose text
/// part is what afm runs (its tensors sit under `language_model`).
pub fn is_multimodal(path: &Path) -> Result<bool> {
    let top: serde_json::Map<String, serde_json::Value> = read_json(path)?;
    Ok(top.get("text_config").is_some_and(|v| v.is_object()))
}

/// Parses a JSON file into `T`, naming the file in any error.
pub(crate) fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| EngineError::io(format!("reading {}", path.display()), e))?;
    serde_json::from_str(&text).map_err(|e| EngineError::invalid_model(path, e))
}
