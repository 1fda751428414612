//! Model tensors under one naming scheme (Hugging Face's), whatever the file
//! format, plus the two layer kinds that hold them: [`Linear`] and
//! [`Embedding`], each dense or MLX-quantized.
//!
//! Quantized matrices stay packed where a fast kernel multiplies them: on
//! Metal always (MLX's own), on the CPU where afm's primitive
//! ([`crate::cpu::qmm`]) takes their format. Everything else is
//! dequantized to f32 at load, since MLX's CPU quantized kernels on x86 are
//! several times slower than an f32 matmul with BLAS.

use std::collections::HashMap;
use std::path::Path;

use mlx_rs::ops::indexing::IndexOp;
use mlx_rs::ops::{broadcast_to, concatenate, dequantize, matmul, quantized_matmul};
use mlx_rs::Array;

use crate::cpu::qmm;
use crate::error::{EngineError, Result};
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

/// An MLX affine-quantized matrix.
#[derive(Clone)]
pub struct QuantizedWeight {
    pub weight: Array,
    pub scales: Array,
    pub biases: Option<Array>,
    pub group_size: i32,
    pub bits: i32,
}

impl QuantizedWeight {
    /// Input size (columns of the dequantized matrix).
    pub fn in_features(&self) -> i32 {
        self.scales.dim(-1) * self.group_size
    }

    /// Whether afm's CPU primitive multiplies this matrix (else MLX's
    /// `quantized_matmul` does).
    pub(crate) fn runs_on_primitive(&self) -> bool {
        self.biases.is_some() && qmm::supports(self.bits, self.group_size, self.in_features())
    }

    /// The matrix as f32, exactly: `scale · q + bias` in f32. (MLX's
    /// `dequantize` computes in the scales' dtype, so f16 scales, as GGUF
    /// blocks and most checkpoints have, would round every weight to f16:
    /// up to 1.4e-3 off for 8-bit values.)
    pub fn dequantize(&self) -> Result<Array> {
        let biases = self
            .biases
            .as_ref()
            .map(|b| b.as_type::<f32>())
            .transpose()?;
        Ok(dequantize(
            &self.weight,
            &self.scales.as_type::<f32>()?,
            biases.as_ref(),
            self.group_size,
            self.bits,
        )?)
    }
}

/// `y = x W^T`, with `W` dense (`[out, in]`) or quantized.
#[derive(Clone)]
pub enum Linear {
    Dense(Array),
    Quantized(QuantizedWeight),
}

impl Linear {
    pub fn forward(&self, x: &Array) -> Result<Array> {
        self.product(x, false)
    }

    /// [`forward`](Self::forward) with every output row computed from its
    /// own input row alone, bit for bit whatever the row count; only for a
    /// layer whose [`rows_independent`](Self::rows_independent) holds.
    pub fn forward_rows_independent(&self, x: &Array) -> Result<Array> {
        debug_assert!(self.rows_independent());
        self.product(x, true)
    }

    fn product(&self, x: &Array, rows_independent: bool) -> Result<Array> {
        Ok(match self {
            Linear::Dense(w) => matmul(x, w.t())?,
            Linear::Quantized(q) if q.runs_on_primitive() => qmm::affine_qmm(
                x,
                &q.weight,
                &q.scales,
                q.biases.as_ref().expect("checked by runs_on_primitive"),
                q.group_size,
                q.bits,
                rows_independent,
            )?,
            Linear::Quantized(q) => quantized_matmul(
                x,
                &q.weight,
                &q.scales,
                q.biases.as_ref(),
                true,
                q.group_size,
                q.bits,
            )?,
        })
    }

    /// Whether each row of the output can be computed from its own input
    /// row alone, bit for bit, whatever the number of rows (afm's CPU
    /// primitive: a fixed reduction order per output), through
    /// [`forward_rows_independent`](Self::forward_rows_independent).
    /// Batch-invariant mode then needs no fixed-shape row blocks.
    pub fn rows_independent(&self) -> bool {
        matches!(self, Linear::Quantized(q) if q.runs_on_primitive())
    }

    /// `x` given as row blocks (`[blocks, rows, in]`), each block through its
    /// own matrix product of identical shape. (A plain batched matmul lets
    /// MLX fold the blocks into one large product, whose rounding depends on
    /// the total row count.)
    pub fn forward_row_blocks(&self, x: &Array) -> Result<Array> {
        let blocks = x.dim(0);
        match self {
            Linear::Dense(w) => {
                let (out, inp) = (w.dim(0), w.dim(1));
                let wt = broadcast_to(w.t().reshape(&[1, inp, out])?, &[blocks, inp, out])?;
                Ok(matmul(x, wt)?)
            }
            Linear::Quantized(_) => {
                let parts = (0..blocks)
                    .map(|b| self.forward(&x.index(b)))
                    .collect::<Result<Vec<_>>>()?;
                Ok(mlx_rs::ops::stack(&parts, 0)?)
            }
        }
    }

    /// The layer restricted to the output rows `rows`, in that order (a
    /// packed checkpoint's interleaved parts split apart at load).
    pub fn rows(&self, rows: &[i32]) -> Result<Linear> {
        let idx = Array::from_slice(rows, &[rows.len() as i32]);
        let pick = |a: &Array| -> Result<Array> { Ok(a.take_axis(&idx, 0)?.contiguous()?) };
        Ok(match self {
            Linear::Dense(w) => Linear::Dense(pick(w)?),
            Linear::Quantized(q) => Linear::Quantized(QuantizedWeight {
                weight: pick(&q.weight)?,
                scales: pick(&q.scales)?,
                biases: q.biases.as_ref().map(pick).transpose()?,
                group_size: q.group_size,
                bits: q.bits,
            }),
        })
    }

    /// Output size (rows of the weight).
    pub fn out_features(&self) -> i32 {
        match self {
            Linear::Dense(w) => w.dim(0),
            Linear::Quantized(q) => q.weight.dim(0),
        }
    }

    /// The array holding the weight as stored (dense or packed).
    pub fn stored(&self) -> Array {
        match self {
            Linear::Dense(w) => w.clone(),
            Linear::Quantized(q) => q.weight.clone(),
        }
    }

    /// The dense matrix, materialized (dequantized if needed).
    pub fn to_dense(&self) -> Result<Array> {
        match self {
            Linear::Dense(w) => Ok(w.clone()),
            Linear::Quantized(q) => q.dequantize(),
        }
    }
}

/// Linear layers that read the same input (q/k/v, gate/up), run as one
/// matmul over weights concatenated along the output axis at load: one large
/// product instead of several small ones, each of which pays MLX's dispatch
/// and the BLAS call's fixed cost.
pub struct FusedLinear {
    layout: Fused,
}

enum Fused {
    /// One matrix; `widths` are the parts' output sizes, in order.
    One { linear: Linear, widths: Vec<i32> },
    /// Quantized parts of different formats (mixed GGUF quantizations on
    /// Metal) cannot share one matrix; they stay separate.
    Separate(Vec<Linear>),
}

impl FusedLinear {
    pub fn new(parts: Vec<Linear>) -> Result<Self> {
        let widths: Vec<i32> = parts.iter().map(Linear::out_features).collect();
        let layout = match parts.first() {
            Some(Linear::Dense(_)) if parts.iter().all(|p| matches!(p, Linear::Dense(_))) => {
                let ws: Vec<&Array> = parts
                    .iter()
                    .map(|p| match p {
                        Linear::Dense(w) => w,
                        Linear::Quantized(_) => unreachable!("all dense"),
                    })
                    .collect();
                Fused::One {
                    linear: Linear::Dense(concatenate(&ws, 0)?),
                    widths,
                }
            }
            Some(Linear::Quantized(first))
                if parts.iter().all(|p| {
                    matches!(p, Linear::Quantized(q) if q.bits == first.bits
                    && q.group_size == first.group_size
                    && q.biases.is_some() == first.biases.is_some())
                }) =>
            {
                let quantized: Vec<&QuantizedWeight> = parts
                    .iter()
                    .map(|p| match p {
                        Linear::Quantized(q) => q,
                        Linear::Dense(_) => unreachable!("all quantized"),
                    })
                    .collect();
                let cat = |f: &dyn Fn(&QuantizedWeight) -> &Array| -> Result<Array> {
                    let arrays: Vec<&Array> = quantized.iter().map(|q| f(q)).collect();
                    Ok(concatenate(&arrays, 0)?)
                };
                let biases = match first.biases {
                    Some(_) => Some(cat(&|q| q.biases.as_ref().expect("checked above"))?),
                    None => None,
                };
                let linear = Linear::Quantized(QuantizedWeight {
                    weight: cat(&|q| &q.weight)?,
                    scales: cat(&|q| &q.scales)?,
                    biases,
                    group_size: first.group_size,
                    bits: first.bits,
                });
                Fused::One { linear, widths }
            }
            _ => Fused::Separate(parts),
        };
        Ok(FusedLinear { layout })
    }

    /// Every part's output for `x`, in order; `apply` runs one matrix.
    pub fn forward_with(
        &self,
        x: &Array,
        apply: impl Fn(&Linear, &Array) -> Result<Array>,
    ) -> Result<Vec<Array>> {
        let ones = vec![1; self.parts()];
        self.forward_grouped(x, apply, &ones)
    }

    /// Like [`forward_with`](Self::forward_with), with consecutive parts
    /// joined: `groups` gives how many parts each output holds (`[2, 1]` on
    /// q/k/v gives q and k side by side, then v). A fused matrix joins them
    /// for free (a view of its output).
    pub fn forward_grouped(
        &self,
        x: &Array,
        apply: impl Fn(&Linear, &Array) -> Result<Array>,
        groups: &[usize],
    ) -> Result<Vec<Array>> {
        assert_eq!(
            groups.iter().sum::<usize>(),
            self.parts(),
            "groups cover every part"
        );
        match &self.layout {
            Fused::One { linear, widths } => {
                let y = apply(linear, x)?;
                let (mut part, mut col) = (0, 0);
                Ok(groups
                    .iter()
                    .map(|&n| {
                        let w: i32 = widths[part..part + n].iter().sum();
                        let out = y.index((.., .., col..col + w));
                        (part, col) = (part + n, col + w);
                        out
                    })
                    .collect())
            }
            Fused::Separate(parts) => {
                let mut rest = parts.iter();
                groups
                    .iter()
                    .map(|&n| {
                        let outs = rest
                            .by_ref()
                            .take(n)
                            .map(|p| apply(p, x))
                            .collect::<Result<Vec<_>>>()?;
                        Ok(if n == 1 {
                            outs.into_iter().next().expect("one part")
                        } else {
                            concatenate(&outs, -1)?
                        })
                    })
                    .collect()
            }
        }
    }

    fn parts(&self) -> usize {
        match &self.layout {
            Fused::One { widths, .. } => widths.len(),
            Fused::Separate(parts) => parts.len(),
        }
    }

    /// The stored weight arrays (to evaluate them at load).
    pub fn stored(&self) -> Vec<Array> {
        match &self.layout {
            Fused::One { linear, .. } => vec![linear.stored()],
            Fused::Separate(parts) => parts.iter().map(Linear::stored).collect(),
        }
    }
}

/// A token embedding table; doubles as the LM head when embeddings are tied.
#[derive(Clone)]
pub struct Embedding(pub Linear);

impl Embedding {
    /// Rows of the table for `ids` (any shape of u32/i32 ids).
    pub fn lookup(&self, ids: &Array) -> Result<Array> {
        Ok(match &self.0 {
            Linear::Dense(w) => w.take_axis(ids, 0)?,
            Linear::Quantized(q) => {
                // The rows only, dequantized exactly as QuantizedWeight does.
                let rows = |a: &Array| a.take_axis(ids, 0);
                let f32_rows = |a: &Array| -> Result<Array> { Ok(rows(a)?.as_type::<f32>()?) };
                dequantize(
                    rows(&q.weight)?,
                    f32_rows(&q.scales)?,
                    q.biases.as_ref().map(f32_rows).transpose()?.as_ref(),
                    q.group_size,
                    q.bits,
                )?
            }
        })
    }

    /// Number of rows (the vocabulary size).
    pub fn rows(&self) -> i32 {
        match &self.0 {
            Linear::Dense(w) => w.dim(0),
            Linear::Quantized(q) => q.weight.dim(0),
        }
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
