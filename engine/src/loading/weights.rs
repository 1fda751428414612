//! Model tensors under one naming scheme (Hugging Face's), whatever the file
//! format, read into the layers that hold them ([`crate::layers`]):
//! [`Linear`] and [`Embedding`], each dense or MLX-quantized.
//!
//! Quantized matrices stay packed where a fast kernel multiplies them: on
//! Metal always (MLX's own), on the CPU where afm's primitive
//! ([`crate::cpu::qmm`]) takes their format. Everything else is
//! dequantized to f32 at load, since MLX's CPU quantized kernels on x86 are
//! several times slower than an f32 matmul with BLAS.

use std::collections::HashMap;
use std::path::Path;

use mlx_rs::Array;

use crate::cpu::qmm;
use crate::error::{EngineError, Result};
use crate::layers::{Embedding, Linear, QuantizedWeight};
use crate::loading::config::QuantizationConfig;
use crate::loading::gguf::GgufModelFile;

/// GGUF always quantizes in blocks of 32 values.
const GGUF_GROUP_SIZE: i32 = 32;

/// How quantized tensors are stored and used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WeightMode {
    /// Dequantize every quantized weight to f32 at load (`--dtype f32`).
    Dequantize,
    /// Keep every quantized weight as stored and multiply with MLX's
    /// quantized ops (the Metal path).
    KeepQuantized,
    /// Keep packed the matrices afm's CPU primitive multiplies
    /// ([`qmm::supports`]), routed experts included (its gather form);
    /// dequantize the rest (MLX's CPU `quantized_matmul` and `gather_qmm`
    /// are scalar loops). The CPU path.
    PackedForCpu,
}

impl WeightMode {
    /// The right mode for the device MLX runs on in this build.
    pub fn for_platform() -> Self {
        if cfg!(target_os = "macos") {
            WeightMode::KeepQuantized
        } else if qmm::path().is_primitive() {
            WeightMode::PackedForCpu
        } else {
            WeightMode::Dequantize
        }
    }
}

/// A named set of tensors, with the quantization group size that applies.
pub struct TensorMap {
    tensors: HashMap<String, Array>,
    group_size: i32,
    /// Quantization of single modules where it differs from the map's
    /// (`prefix` -> group size and bits), from an MLX folder's config.
    overrides: HashMap<String, QuantizationConfig>,
    mode: WeightMode,
    origin: String,
}

impl TensorMap {
    /// Takes every tensor of a GGUF file, renamed to HF names
    /// (`renames`: the architecture's own meanings of layer tensor names).
    pub fn from_gguf(
        file: &GgufModelFile,
        mode: WeightMode,
        renames: &[(&str, &str)],
    ) -> Result<Self> {
        let mut tensors = HashMap::new();
        let mut overrides = HashMap::new();
        for name in file.tensor_names() {
            if let Some(t) = file.tensor(name)? {
                let hf = gguf_to_hf_name(name, renames);
                if let (Some(stem), Some(prefix)) =
                    (name.strip_suffix(".scales"), hf.strip_suffix(".scales"))
                {
                    if let Some((bits, group_size)) = file.odd_group(stem) {
                        overrides
                            .insert(prefix.to_string(), QuantizationConfig { group_size, bits });
                    }
                }
                tensors.insert(hf, t);
            }
        }
        Ok(TensorMap {
            tensors,
            group_size: GGUF_GROUP_SIZE,
            overrides,
            mode,
            origin: file.path().display().to_string(),
        })
    }

    /// Loads every `*.safetensors` file of a folder.
    pub fn from_safetensors_dir(dir: &Path, group_size: i32, mode: WeightMode) -> Result<Self> {
        let mut files: Vec<_> = std::fs::read_dir(dir)
            .map_err(|e| EngineError::io(format!("reading {}", dir.display()), e))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|e| e == "safetensors"))
            .collect();
        files.sort();
        if files.is_empty() {
            return Err(EngineError::invalid_model(dir, "no .safetensors files"));
        }
        let mut tensors = HashMap::new();
        for f in &files {
            let loaded =
                Array::load_safetensors(f).map_err(|e| EngineError::invalid_model(f, e))?;
            tensors.extend(loaded);
        }
        Ok(TensorMap {
            tensors,
            group_size,
            overrides: HashMap::new(),
            mode,
            origin: dir.display().to_string(),
        })
    }

    /// Modules quantized otherwise than the map's default (by prefix).
    pub fn with_overrides(self, overrides: HashMap<String, QuantizationConfig>) -> Self {
        TensorMap { overrides, ..self }
    }

    /// Builds a map from tensors already in memory (tests, conversions).
    pub fn from_tensors(
        tensors: HashMap<String, Array>,
        group_size: i32,
        mode: WeightMode,
    ) -> Self {
        TensorMap {
            tensors,
            group_size,
            overrides: HashMap::new(),
            mode,
            origin: "in-memory tensors".into(),
        }
    }

    /// A multimodal checkpoint's language model under the text model's
    /// names (`language_model.model.*` or `model.language_model.*` become
    /// `model.*`, `language_model.lm_head.*` `lm_head.*`); the vision tower
    /// and projector are dropped.
    pub fn text_part(self) -> Self {
        const RENAMES: [(&str, &str); 4] = [
            ("language_model.model.", "model."),
            ("model.language_model.", "model."),
            ("language_model.lm_head.", "lm_head."),
            ("lm_head.", "lm_head."),
        ];
        fn rename<T: Clone>(map: HashMap<String, T>) -> HashMap<String, T> {
            map.into_iter()
                .filter_map(|(name, t)| {
                    RENAMES.iter().find_map(|(from, to)| {
                        name.strip_prefix(from)
                            .map(|rest| (format!("{to}{rest}"), t.clone()))
                    })
                })
                .collect()
        }
        TensorMap {
            tensors: rename(self.tensors),
            overrides: rename(self.overrides),
            ..self
        }
    }

    /// Where the tensors came from (for error messages).
    pub fn origin(&self) -> &str {
        &self.origin
    }

    pub fn contains(&self, name: &str) -> bool {
        self.tensors.contains_key(name)
    }

    /// Every tensor as stored, by HF name, in no particular order. A
    /// quantized matrix appears as its `<p>.weight` (packed u32),
    /// `<p>.scales` and `<p>.biases` parts; see [`TensorMap::quantized`].
    pub fn tensors(&self) -> impl Iterator<Item = (&str, &Array)> {
        self.tensors.iter().map(|(name, t)| (name.as_str(), t))
    }

    /// The group size of every quantized matrix in the map.
    pub fn group_size(&self) -> i32 {
        self.group_size
    }

    /// A plain tensor (norm weights), as f32.
    pub fn dense(&self, name: &str) -> Result<Array> {
        let t = self.get(name)?;
        Ok(t.as_type::<f32>()?)
    }

    /// The linear layer whose weight is `<prefix>.weight` (`[out, in]`).
    pub fn linear(&self, prefix: &str) -> Result<Linear> {
        match self.quantized(prefix)? {
            Some(q) if self.keeps_packed(&q) => Ok(Linear::Quantized(q)),
            Some(q) => Ok(Linear::Dense(q.dequantize()?)),
            None => Ok(Linear::Dense(self.dense(&format!("{prefix}.weight"))?)),
        }
    }

    /// Stacked routed experts `<prefix>.weight` (`[experts, out, in]`),
    /// multiplied through a gather: kept packed by the same rule as any
    /// matrix (afm's CPU primitive has a gather form).
    pub fn expert_stack(&self, prefix: &str) -> Result<Linear> {
        match self.quantized(prefix)? {
            Some(q) if self.keeps_packed(&q) => Ok(Linear::Quantized(q)),
            Some(q) => Ok(Linear::Dense(q.dequantize()?)),
            None => Ok(Linear::Dense(self.dense(&format!("{prefix}.weight"))?)),
        }
    }

    fn keeps_packed(&self, q: &QuantizedWeight) -> bool {
        match self.mode {
            WeightMode::Dequantize => false,
            WeightMode::KeepQuantized => true,
            WeightMode::PackedForCpu => q.runs_on_primitive(),
        }
    }

    /// The embedding table `<prefix>.weight` (`[vocab, dim]`).
    pub fn embedding(&self, prefix: &str) -> Result<Embedding> {
        Ok(Embedding(self.linear(prefix)?))
    }

    fn get(&self, name: &str) -> Result<&Array> {
        self.tensors
            .get(name)
            .ok_or_else(|| EngineError::InvalidModel {
                path: self.origin.clone().into(),
                reason: format!("missing tensor '{name}'"),
            })
    }

    /// The matrix `<prefix>.weight` as stored, if it is quantized (has
    /// `<prefix>.scales`); its bits follow from the packed shape.
    pub fn quantized(&self, prefix: &str) -> Result<Option<QuantizedWeight>> {
        let Some(scales) = self.tensors.get(&format!("{prefix}.scales")) else {
            return Ok(None);
        };
        let weight = self.get(&format!("{prefix}.weight"))?.clone();
        let biases = self.tensors.get(&format!("{prefix}.biases")).cloned();
        let group_size = self
            .overrides
            .get(prefix)
            .map_or(self.group_size, |q| q.group_size);
        // weight packs `bits` per value into u32 columns: [out, in * bits / 32];
        // scales hold one value per group: [out, in / group_size].
        let in_features = scales.dim(-1) * group_size;
        let bits = weight.dim(-1) * 32 / in_features.max(1);
        if ![2, 3, 4, 5, 6, 8].contains(&bits) {
            return Err(EngineError::InvalidModel {
                path: self.origin.clone().into(),
                reason: format!("tensor '{prefix}' has an unsupported quantization ({bits} bits)"),
            });
        }
        Ok(Some(QuantizedWeight {
            weight,
            scales: scales.clone(),
            biases,
            group_size,
            bits,
        }))
    }
}

/// Maps a GGUF tensor name (`blk.3.attn_q.weight`) to the HF one
/// (`model.layers.3.self_attn.q_proj.weight`). Unknown names pass through.
pub fn gguf_to_hf_name(name: &str, renames: &[(&str, &str)]) -> String {
    const TOP: &[(&str, &str)] = &[
        ("token_embd", "model.embed_tokens"),
        ("output_norm", "model.norm"),
        ("output", "lm_head"),
    ];
    const LAYER: &[(&str, &str)] = &[
        ("attn_q", "self_attn.q_proj"),
        ("attn_k", "self_attn.k_proj"),
        ("attn_v", "self_attn.v_proj"),
        ("attn_output", "self_attn.o_proj"),
        ("attn_norm", "input_layernorm"),
        ("ffn_norm", "post_attention_layernorm"),
        ("ffn_gate", "mlp.gate_proj"),
        ("ffn_up", "mlp.up_proj"),
        ("ffn_down", "mlp.down_proj"),
        ("attn_q_norm", "self_attn.q_norm"),
        ("attn_k_norm", "self_attn.k_norm"),
    ];
    let (stem, suffix) = name.rsplit_once('.').unwrap_or((name, ""));
    let mapped = if let Some(rest) = stem.strip_prefix("blk.") {
        match rest.split_once('.') {
            Some((layer, part)) => renames
                .iter()
                .chain(LAYER)
                .find(|(g, _)| *g == part)
                .map(|(_, hf)| format!("model.layers.{layer}.{hf}")),
            None => None,
        }
    } else {
        TOP.iter()
            .find(|(g, _)| *g == stem)
            .map(|(_, hf)| (*hf).to_string())
    };
    match mapped {
        Some(m) if suffix.is_empty() => m,
        Some(m) => format!("{m}.{suffix}"),
        None => name.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::gguf_to_hf_name;

    #[test]
    fn gguf_names_map_to_hf_names() {
        assert_eq!(
            gguf_to_hf_name("blk.12.attn_q.weight", &[]),
            "model.layers.12.self_attn.q_proj.weight"
        );
        assert_eq!(
            gguf_to_hf_name("blk.0.ffn_down.scales", &[]),
            "model.layers.0.mlp.down_proj.scales"
        );
        assert_eq!(
            gguf_to_hf_name("token_embd.biases", &[]),
            "model.embed_tokens.biases"
        );
        assert_eq!(gguf_to_hf_name("output.weight", &[]), "lm_head.weight");
        assert_eq!(gguf_to_hf_name("rope_freqs", &[]), "rope_freqs");
    }
}
