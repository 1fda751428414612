//! Writes a model (GGUF included) as an MLX/HF safetensors folder
//! (`afm-serve convert`).
//!
//! Why: a GGUF file is read by afm and llama.cpp but not by mlx-lm or
//! transformers. Exported, the very same weights load in each of them, so
//! engines can be compared on identical numbers. GGUF's Q4_1 is MLX's affine
//! quantization (groups of 32), so `--dtype keep` copies the packed tensors
//! unchanged; the other dtypes dequantize.
//!
//! One thing is undone rather than copied: llama.cpp's converter permutes the
//! rows of `q_proj` and `k_proj` for its interleaved ("traditional") RoPE.
//! The export puts them back in HF order, so the folder is a standard llama
//! checkpoint with rotate-half RoPE, like every HF llama.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use mlx_rs::{Array, Dtype};
use serde_json::{json, Value};

use crate::error::{EngineError, Result};
use crate::loading::config::ModelConfig;
use crate::loading::family::{Families, Family};
use crate::loading::parts::ModelParts;
use crate::loading::source::ModelSource;
use crate::loading::weights::WeightMode;

/// The element type of the exported weights.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExportDtype {
    /// As stored: quantized matrices stay quantized (MLX format).
    Keep,
    F32,
    F16,
    Bf16,
}

impl ExportDtype {
    pub fn from_name(name: &str) -> Result<Self> {
        match name {
            "keep" => Ok(ExportDtype::Keep),
            "f32" | "float32" => Ok(ExportDtype::F32),
            "f16" | "float16" => Ok(ExportDtype::F16),
            "bf16" | "bfloat16" => Ok(ExportDtype::Bf16),
            other => Err(EngineError::Convert(format!(
                "unknown dtype '{other}' (keep, f32, f16 or bf16)"
            ))),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            ExportDtype::Keep => "keep",
            ExportDtype::F32 => "f32",
            ExportDtype::F16 => "f16",
            ExportDtype::Bf16 => "bf16",
        }
    }

    fn target(self) -> Option<Dtype> {
        match self {
            ExportDtype::Keep => None,
            ExportDtype::F32 => Some(Dtype::Float32),
            ExportDtype::F16 => Some(Dtype::Float16),
            ExportDtype::Bf16 => Some(Dtype::Bfloat16),
        }
    }
}

/// What [`convert`] wrote.
#[derive(Debug, Clone)]
pub struct ConvertReport {
    pub out_dir: PathBuf,
    /// Files written, with their sizes in bytes.
    pub files: Vec<(String, u64)>,
    /// Tensors in `model.safetensors`.
    pub tensors: usize,
    /// `config.json`'s `torch_dtype`.
    pub torch_dtype: String,
    /// Kept quantization: group size and the bits of most matrices (the
    /// others are listed per layer in `config.json`).
    pub quantization: Option<(i32, i32)>,
    /// Matrices whose bits differ from the common ones, with their bits.
    pub quantization_overrides: Vec<(String, i32)>,
    /// Whether q_proj/k_proj rows were put back from GGUF's RoPE order.
    pub rope_unpermuted: bool,
    /// Source tensors left out (not part of an HF llama checkpoint).
    pub skipped: Vec<String>,
}

impl ConvertReport {
    pub fn total_bytes(&self) -> u64 {
        self.files.iter().map(|(_, n)| n).sum()
    }
}

/// Exports the model `spec` names (alias, .gguf, MLX/HF folder, cached HF
/// repo id) into `out`, which must not exist or be an empty folder;
/// `families` (the models registry's lookup) names its architecture.
/// Tensors are read as stored ([`WeightMode::KeepQuantized`]); no network
/// is built.
pub fn convert(
    spec: &str,
    out: &Path,
    dtype: ExportDtype,
    families: Families,
) -> Result<ConvertReport> {
    check_out_dir(out)?;
    let parts = ModelParts::read(
        &ModelSource::resolve(spec)?,
        WeightMode::KeepQuantized,
        families,
    )?;
    let tensors = export_tensors(&parts, dtype)?;
    let created = !out.exists();
    std::fs::create_dir_all(out)
        .map_err(|e| EngineError::io(format!("creating {}", out.display()), e))?;
    let written = write_folder(&parts, &tensors, dtype, out);
    if written.is_err() && created {
        // Best effort: do not leave a half-written folder behind.
        let _ = std::fs::remove_dir_all(out);
    }
    written
}

/// Refuses an output path that is a file or a non-empty folder.
fn check_out_dir(out: &Path) -> Result<()> {
    if out.is_file() {
        return Err(EngineError::Convert(format!(
            "output path {} is a file, not a folder",
            out.display()
        )));
    }
    if out.is_dir() {
        let mut entries = std::fs::read_dir(out)
            .map_err(|e| EngineError::io(format!("reading {}", out.display()), e))?;
        if entries.next().is_some() {
            return Err(EngineError::Convert(format!(
                "output folder {} exists and is not empty",
                out.display()
            )));
        }
    }
    Ok(())
}

/// The tensors to write, under HF names.
struct ExportedTensors {
    tensors: HashMap<String, Array>,
    /// Bits of each matrix kept quantized, by prefix (`model.layers.0.mlp.up_proj`).
    bits: BTreeMap<String, i32>,
    group_size: i32,
    rope_unpermuted: bool,
    skipped: Vec<String>,
}

fn export_tensors(parts: &ModelParts, dtype: ExportDtype) -> Result<ExportedTensors> {
    let config = &parts.config;
    let weights = &parts.weights;
    let mut stored: Vec<(&str, &Array)> = weights.tensors().collect();
    stored.sort_unstable_by_key(|(name, _)| *name);
    let quantized: BTreeSet<&str> = stored
        .iter()
        .filter_map(|(name, _)| name.strip_suffix(".scales"))
        .collect();
    let rope_unpermuted = config.rope_traditional;
    let norm_shift = if parts.hyper.from_gguf {
        parts.family.gguf_norm_shift
    } else {
        0.0
    };
    let unpermute = |prefix: &str, a: Array| -> Result<Array> {
        match rope_heads(config, prefix) {
            Some(heads) if rope_unpermuted => hf_rope_rows(prefix, &a, heads, config.head_dim),
            _ => Ok(a),
        }
    };
    let cast = |a: Array| -> Result<Array> {
        match dtype.target() {
            Some(t) if a.dtype().is_float() && a.dtype() != t => Ok(a.as_dtype(t)?),
            _ => Ok(a),
        }
    };

    let mut out = ExportedTensors {
        tensors: HashMap::new(),
        bits: BTreeMap::new(),
        group_size: weights.group_size(),
        rope_unpermuted,
        skipped: Vec::new(),
    };
    for (name, array) in stored {
        let (prefix, part) = name.rsplit_once('.').unwrap_or((name, ""));
        let hf_tensor = name.starts_with("model.") || name.starts_with("lm_head.");
        if !hf_tensor || (config.tie_word_embeddings && prefix == "lm_head") {
            out.skipped.push(name.to_string());
            continue;
        }
        if !quantized.contains(prefix) {
            let mut a = unpermute(prefix, array.clone())?;
            // llama.cpp stores some architectures' norm weights shifted
            // (Gemma's `1 + w`); an HF folder holds them unshifted.
            if norm_shift != 0.0 && name.ends_with("norm.weight") {
                a = a.subtract(Array::from_f32(norm_shift))?;
            }
            out.tensors.insert(name.to_string(), cast(a)?);
            continue;
        }
        if part != "weight" {
            continue; // scales and biases go with their weight
        }
        let q = weights
            .quantized(prefix)?
            .ok_or_else(|| EngineError::Convert(format!("'{prefix}' is not quantized")))?;
        // A folder holds one group size (config.json's `quantization`), and
        // MLX's quantized ops take no groups below 32: GGUF's Q6_K (groups
        // of 16) is written as floats.
        if dtype == ExportDtype::Keep && q.group_size == out.group_size {
            let mut pieces = vec![("weight", q.weight), ("scales", q.scales)];
            pieces.extend(q.biases.map(|b| ("biases", b)));
            for (suffix, a) in pieces {
                out.tensors
                    .insert(format!("{prefix}.{suffix}"), unpermute(prefix, a)?);
            }
            out.bits.insert(prefix.to_string(), q.bits);
        } else {
            let w = unpermute(prefix, q.dequantize()?)?;
            out.tensors.insert(name.to_string(), cast(w)?);
        }
    }
    for required in ["model.embed_tokens.weight", "model.norm.weight"] {
        if !out.tensors.contains_key(required) {
            return Err(EngineError::Convert(format!(
                "the model has no '{required}' tensor"
            )));
        }
    }
    Ok(out)
}

/// Heads of the projection `prefix` whose rows GGUF permutes for RoPE:
/// `num_heads` for q_proj, `num_kv_heads` for k_proj.
fn rope_heads(config: &ModelConfig, prefix: &str) -> Option<usize> {
    let rest = prefix.strip_prefix("model.layers.")?;
    let (_, proj) = rest.split_once('.')?;
    match proj {
        "self_attn.q_proj" => Some(config.num_heads),
        "self_attn.k_proj" => Some(config.num_kv_heads),
        _ => None,
    }
}

/// Puts the rows of a GGUF q/k projection (or of its scales and biases)
/// back in HF order. llama.cpp stored `hf.reshape(heads, 2, d/2, ..)
/// .swapaxes(1, 2)`, which interleaves each head's two halves; this is the
/// inverse.
fn hf_rope_rows(prefix: &str, a: &Array, heads: usize, head_dim: usize) -> Result<Array> {
    let shape = a.shape().to_vec();
    let rows = shape.first().copied().unwrap_or(0) as usize;
    if rows != heads * head_dim || !head_dim.is_multiple_of(2) {
        return Err(EngineError::Convert(format!(
            "'{prefix}' has {rows} rows, expected {heads} heads x {head_dim} (even) per head"
        )));
    }
    let mut split = vec![heads as i32, (head_dim / 2) as i32, 2];
    split.extend_from_slice(&shape[1..]);
    Ok(a.reshape(&split)?.swap_axes(1, 2)?.reshape(&shape)?)
}

fn write_folder(
    parts: &ModelParts,
    exported: &ExportedTensors,
    dtype: ExportDtype,
    out: &Path,
) -> Result<ConvertReport> {
    let torch_dtype = torch_dtype(exported, dtype);
    let (quantization, overrides) = quantization(exported);
    let bos_id = parts
        .bos_token
        .as_deref()
        .and_then(|t| parts.tokenizer.token_to_id(t));
    let mut eos_ids: Vec<u32> = parts.eos.ids().collect();
    // The tokenizer's own eos_token first: readers taking one id take it.
    if let Some(id) = parts
        .eos_token
        .as_deref()
        .and_then(|t| parts.tokenizer.token_to_id(t))
    {
        eos_ids.retain(|&e| e != id);
        eos_ids.insert(0, id);
    }

    let weights_path = out.join("model.safetensors");
    let metadata = HashMap::from([("format".to_string(), "mlx".to_string())]);
    Array::save_safetensors(&exported.tensors, &metadata, &weights_path)
        .map_err(|e| EngineError::Convert(format!("writing {}: {e}", weights_path.display())))?;

    let mut model_config = parts.config.clone();
    // Without an lm_head the embedding is the head, whatever the source said.
    model_config.tie_word_embeddings |= !exported.tensors.contains_key("lm_head.weight");
    let mut config = config_json(&model_config, parts.family, &torch_dtype, bos_id, &eos_ids)?;
    // What the architecture reads beyond the common keys goes along, so
    // the folder loads as the same network (the common keys written above
    // win; quantization is the export's own).
    let object = config.as_object_mut().expect("config.json is an object");
    for (key, value) in parts.family.hf_hyper_params(&parts.hyper) {
        if !object.contains_key(&key) && !key.starts_with("quantization") {
            object.insert(key, value);
        }
    }
    if let Some(q) = &quantization {
        config["quantization"] = q.clone();
    }
    write_json(&out.join("config.json"), &config)?;

    parts.tokenizer.save(&out.join("tokenizer.json"))?;

    let mut tok_cfg = json!({
        "tokenizer_class": "PreTrainedTokenizerFast",
        "clean_up_tokenization_spaces": false,
        "model_max_length": parts.config.max_position_embeddings,
    });
    if let Some(t) = &parts.bos_token {
        tok_cfg["bos_token"] = json!(t);
    }
    if let Some(t) = &parts.eos_token {
        tok_cfg["eos_token"] = json!(t);
    }
    tok_cfg["chat_template"] = json!(parts.template.source());
    write_json(&out.join("tokenizer_config.json"), &tok_cfg)?;

    let mut gen_cfg = json!({});
    if let Some(id) = bos_id {
        gen_cfg["bos_token_id"] = json!(id);
    }
    gen_cfg["eos_token_id"] = json!(eos_ids);
    write_json(&out.join("generation_config.json"), &gen_cfg)?;

    let mut files = Vec::new();
    for name in [
        "model.safetensors",
        "config.json",
        "tokenizer.json",
        "tokenizer_config.json",
        "generation_config.json",
    ] {
        let path = out.join(name);
        let len = std::fs::metadata(&path)
            .map_err(|e| EngineError::io(format!("reading {}", path.display()), e))?
            .len();
        files.push((name.to_string(), len));
    }
    Ok(ConvertReport {
        out_dir: out.to_path_buf(),
        files,
        tensors: exported.tensors.len(),
        torch_dtype,
        quantization: quantization.as_ref().map(|q| {
            let field = |k: &str| q[k].as_i64().unwrap_or(0) as i32;
            (field("group_size"), field("bits"))
        }),
        quantization_overrides: overrides,
        rope_unpermuted: exported.rope_unpermuted,
        skipped: exported.skipped.clone(),
    })
}

/// `torch_dtype`: the requested dtype, or for `keep` the dtype of the
/// quantization scales (else of the embedding table).
fn torch_dtype(exported: &ExportedTensors, dtype: ExportDtype) -> String {
    let stored = || {
        let probe = exported
            .bits
            .keys()
            .next()
            .map(|p| format!("{p}.scales"))
            .unwrap_or_else(|| "model.embed_tokens.weight".into());
        exported
            .tensors
            .get(&probe)
            .map_or(Dtype::Float32, Array::dtype)
    };
    let name = match dtype.target().unwrap_or_else(stored) {
        Dtype::Float16 => "float16",
        Dtype::Bfloat16 => "bfloat16",
        Dtype::Float64 => "float64",
        _ => "float32",
    };
    name.to_string()
}

/// `config.json`'s `quantization` for kept quantized matrices: the group
/// size, the most common bits, and an entry per matrix that differs (GGUF
/// files mix types, e.g. a Q8_0 embedding beside Q4_1 layers; mlx-lm reads
/// such per-layer entries, afm reads each matrix's bits from its shape).
fn quantization(exported: &ExportedTensors) -> (Option<Value>, Vec<(String, i32)>) {
    let mut counts: BTreeMap<i32, usize> = BTreeMap::new();
    for &bits in exported.bits.values() {
        *counts.entry(bits).or_default() += 1;
    }
    let Some((&common, _)) = counts.iter().max_by_key(|(_, &n)| n) else {
        return (None, Vec::new());
    };
    let group_size = exported.group_size;
    let mut q = json!({"group_size": group_size, "bits": common});
    let mut overrides = Vec::new();
    for (prefix, &bits) in &exported.bits {
        if bits != common {
            q[prefix.as_str()] = json!({"group_size": group_size, "bits": bits});
            overrides.push((prefix.clone(), bits));
        }
    }
    (Some(q), overrides)
}

fn config_json(
    c: &ModelConfig,
    family: &Family,
    torch_dtype: &str,
    bos_id: Option<u32>,
    eos: &[u32],
) -> Result<Value> {
    let (model_type, class) = (family.name, family.hf_class);
    let (activation_key, activation) = family.hf_activation;
    let mut v = json!({
        "architectures": [class],
        "model_type": model_type,
        "vocab_size": c.vocab_size,
        "hidden_size": c.hidden_size,
        "intermediate_size": c.intermediate_size,
        "num_hidden_layers": c.num_layers,
        "num_attention_heads": c.num_heads,
        "num_key_value_heads": c.num_kv_heads,
        "head_dim": c.head_dim,
        "rms_norm_eps": shortest(c.rms_norm_eps),
        "rope_theta": shortest(c.rope_theta),
        "max_position_embeddings": c.max_position_embeddings,
        "tie_word_embeddings": c.tie_word_embeddings,
        "attention_bias": false,
        "mlp_bias": false,
        "torch_dtype": torch_dtype,
    });
    v[activation_key] = json!(activation);
    if let Some(id) = bos_id {
        v["bos_token_id"] = json!(id);
    }
    match eos {
        [] => {}
        [one] => v["eos_token_id"] = json!(one),
        many => v["eos_token_id"] = json!(many),
    }
    Ok(v)
}

/// An f32 as the shortest decimal that reads back as it (`1e-5`, not
/// `9.999999747378752e-6`).
fn shortest(x: f32) -> Value {
    x.to_string()
        .parse::<f64>()
        .ok()
        .and_then(serde_json::Number::from_f64)
        .map_or(Value::Null, Value::Number)
}

fn write_json(path: &Path, value: &Value) -> Result<()> {
    let mut text = serde_json::to_string_pretty(value)
        .map_err(|e| EngineError::Convert(format!("{}: {e}", path.display())))?;
    text.push('\n');
    std::fs::write(path, text)
        .map_err(|e| EngineError::io(format!("writing {}", path.display()), e))
}
