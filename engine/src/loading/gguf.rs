//! GGUF files: a structural check of the header, the metadata and tensor
//! directory read with candle's GGUF reader, and the tensors read by MLX
//! where it can, by candle where it cannot.
//!
//! MLX's GGUF reader memory-maps the file and trusts its offsets, so a
//! truncated download would fail deep inside it (or read past the end).
//! [`check_header`] walks the header first and proves that every tensor's
//! bytes are inside the file, which turns such files into a one-line error.
//!
//! MLX reads F32/F16 and Q4_0/Q4_1/Q8_0 (the latter as its own affine
//! triples, which stay packed and are exported as they are), turns the
//! K-quants into f16 matrices (rounded, and four times the bytes), and
//! refuses a whole file that holds some other types (Q5_0:
//! `gguf_tensor_to_f16 failed`). Files with any type but those five are
//! read by candle, a
//! well-kept reader of every ggml block type; the block types with an exact
//! affine form are repacked into the same triples as MLX's (see
//! `gguf_affine`; Q6_K's groups of 16 only where afm's CPU primitive runs),
//! the rest (Q2_K, Q3_K) dequantized to f32.

use std::cell::RefCell;
use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};

use candle_core::quantized::gguf_file::{Content, Value};
use mlx_rs::io::GgufFile;
use mlx_rs::Array;

use crate::cpu::qmm;
use crate::error::{EngineError, Result};
use crate::loading::gguf_affine;

/// Whether a tensor is a matrix whose blocks have an exact affine form that
/// something here multiplies: groups of 32 (MLX's quantized ops and afm's
/// primitive), or of 16 where the primitive runs (Q6_K).
fn repackable(info: &candle_core::quantized::gguf_file::TensorInfo) -> bool {
    let dims = info.shape.dims();
    dims.len() == 2
        && gguf_affine::supports(info.ggml_dtype, dims[1])
        && gguf_affine::format(info.ggml_dtype).is_some_and(|(bits, group)| {
            group == gguf_affine::GROUP || qmm::supports(bits, group as i32, dims[1] as i32)
        })
}

/// An opened GGUF model.
pub struct GgufModelFile {
    path: PathBuf,
    /// Metadata and the tensor directory.
    content: Content,
    /// MLX's reader, when it can read every tensor of the file.
    mlx: Option<GgufFile>,
    tensor_names: Vec<String>,
    /// The last tensor candle read and repacked, by its stem: the reader
    /// asks for its weight, scales and biases one after the other.
    repacked: RefCell<Option<(String, [Array; 3])>>,
}

/// The three parts of an affine triple, in the order they are listed.
const TRIPLE: [&str; 3] = ["weight", "scales", "biases"];

impl GgufModelFile {
    /// Checks the header, reads the metadata, then opens the tensors with
    /// MLX if it reads them all (quantized ones come back as MLX
    /// `weight`/`scales`/`biases` triples), else with candle.
    pub fn open(path: &Path) -> Result<Self> {
        check_header(path)?;
        let content = {
            let file = std::fs::File::open(path)
                .map_err(|e| EngineError::io(format!("opening {}", path.display()), e))?;
            Content::read(&mut BufReader::new(file))
                .map_err(|e| EngineError::invalid_model(path, e))?
        };
        // MLX's reader keeps Q4_0/Q4_1/Q8_0 as affine triples but turns the
        // other types it knows (K-quants) into f16 matrices: only files of
        // those types and floats go to it.
        let mlx_keeps_all = content.tensor_infos.values().all(|info| {
            use candle_core::quantized::GgmlDType as T;
            matches!(
                info.ggml_dtype,
                T::F32 | T::F16 | T::Q4_0 | T::Q4_1 | T::Q8_0
            )
        });
        let mlx = mlx_keeps_all.then(|| GgufFile::load(path).ok()).flatten();
        let tensor_names = match &mlx {
            Some(f) => f
                .array_keys()
                .map_err(|e| EngineError::invalid_model(path, e))?,
            None => {
                let mut names = Vec::new();
                for (name, info) in &content.tensor_infos {
                    match name.strip_suffix(".weight") {
                        Some(stem) if repackable(info) => {
                            names.extend(TRIPLE.map(|part| format!("{stem}.{part}")))
                        }
                        _ => names.push(name.clone()),
                    }
                }
                names
            }
        };
        Ok(GgufModelFile {
            path: path.to_path_buf(),
            content,
            mlx,
            tensor_names,
            repacked: RefCell::new(None),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Every metadata key.
    pub fn metadata_keys(&self) -> impl Iterator<Item = &str> {
        self.content.metadata.keys().map(String::as_str)
    }

    /// Tensor names as the tensor reader gives them (MLX's include the
    /// `scales`/`biases` of quantized tensors).
    pub fn tensor_names(&self) -> &[String] {
        &self.tensor_names
    }

    pub fn has_tensor(&self, name: &str) -> bool {
        self.content.tensor_infos.contains_key(name)
    }

    /// The (bits, group size) of the affine triple `<stem>.*` when this
    /// reader repacks it in groups other than [`gguf_affine::GROUP`]
    /// (Q6_K's 16): the only triples whose format the shapes do not tell.
    pub fn odd_group(&self, stem: &str) -> Option<(i32, i32)> {
        if self.mlx.is_some() {
            return None;
        }
        let info = self.content.tensor_infos.get(&format!("{stem}.weight"))?;
        let (bits, group) = gguf_affine::format(info.ggml_dtype)?;
        (repackable(info) && group != gguf_affine::GROUP).then_some((bits, group as i32))
    }

    /// A tensor by the reader's name: as MLX stores it, or read by candle,
    /// as an affine triple part or dequantized to f32.
    pub fn tensor(&self, name: &str) -> Result<Option<Array>> {
        if let Some(f) = &self.mlx {
            return f.get_array(name).map_err(|e| self.bad(e));
        }
        if let Some((stem, part)) = name.rsplit_once('.') {
            let weight = format!("{stem}.weight");
            if let (Some(i), Some(info)) = (
                TRIPLE.iter().position(|p| *p == part),
                self.content.tensor_infos.get(&weight),
            ) {
                if repackable(info) {
                    return self.repacked_part(stem, &weight, i).map(Some);
                }
            }
        }
        if !self.content.tensor_infos.contains_key(name) {
            return Ok(None);
        }
        let file = std::fs::File::open(&self.path)
            .map_err(|e| EngineError::io(format!("opening {}", self.path.display()), e))?;
        let cpu = candle_core::Device::Cpu;
        let q = self
            .content
            .tensor(&mut BufReader::new(file), name, &cpu)
            .map_err(|e| self.bad(format!("tensor '{name}': {e}")))?;
        let dims: Vec<i32> = q.shape().dims().iter().map(|&d| d as i32).collect();
        let values = q
            .dequantize(&cpu)
            .and_then(|t| t.flatten_all()?.to_vec1::<f32>())
            .map_err(|e| self.bad(format!("tensor '{name}': {e}")))?;
        Ok(Some(Array::from_slice(&values, &dims)))
    }

    /// Part `i` of [`TRIPLE`] of the repacked matrix `weight`.
    fn repacked_part(&self, stem: &str, weight: &str, i: usize) -> Result<Array> {
        let mut cache = self.repacked.borrow_mut();
        if let Some((cached, parts)) = cache.as_ref() {
            if cached == stem {
                return Ok(parts[i].clone());
            }
        }
        let file = std::fs::File::open(&self.path)
            .map_err(|e| EngineError::io(format!("opening {}", self.path.display()), e))?;
        let q = self
            .content
            .tensor(&mut BufReader::new(file), weight, &candle_core::Device::Cpu)
            .map_err(|e| self.bad(format!("tensor '{weight}': {e}")))?;
        let dims = q.shape().dims();
        let (rows, cols) = (dims[0], dims[1]);
        let raw = q
            .data()
            .map_err(|e| self.bad(format!("tensor '{weight}': {e}")))?;
        let a = gguf_affine::repack(q.dtype(), &raw, cols)
            .ok_or_else(|| self.bad(format!("tensor '{weight}' cannot be repacked")))?;
        let (r, c, g) = (rows as i32, cols as i32, (cols / a.group) as i32);
        let exact = |v: &[f32]| -> Result<Array> {
            let t = Array::from_slice(v, &[r, g]);
            Ok(if a.half_exact {
                t.as_dtype(mlx_rs::Dtype::Float16)?
            } else {
                t
            })
        };
        let parts = [
            Array::from_slice(&a.packed, &[r, c * a.bits / 32]),
            exact(&a.scales)?,
            exact(&a.biases)?,
        ];
        let part = parts[i].clone();
        *cache = Some((stem.to_string(), parts));
        Ok(part)
    }

    fn value(&self, key: &str) -> Option<&Value> {
        self.content.metadata.get(key)
    }

    pub fn string(&self, key: &str) -> Result<Option<String>> {
        match self.value(key) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err(self.bad(format!("metadata '{key}' is not a string"))),
        }
    }

    pub fn strings(&self, key: &str) -> Result<Option<Vec<String>>> {
        match self.value(key) {
            None => Ok(None),
            Some(Value::Array(items)) => items
                .iter()
                .map(|v| match v {
                    Value::String(s) => Ok(s.clone()),
                    _ => Err(self.bad(format!("metadata '{key}' is not a list of strings"))),
                })
                .collect::<Result<Vec<_>>>()
                .map(Some),
            Some(_) => Err(self.bad(format!("metadata '{key}' is not a list"))),
        }
    }

    /// A metadata value as JSON (numbers, strings, booleans, lists).
    pub fn json(&self, key: &str) -> Option<serde_json::Value> {
        self.value(key).map(to_json)
    }

    pub fn usize(&self, key: &str) -> Result<Option<usize>> {
        Ok(self.i64s(key)?.and_then(|v| v.first().map(|&x| x as usize)))
    }

    pub fn f32(&self, key: &str) -> Result<Option<f32>> {
        match self.json(key) {
            None => Ok(None),
            Some(v) => v
                .as_f64()
                .map(|f| Some(f as f32))
                .ok_or_else(|| self.bad(format!("metadata '{key}' is not a number"))),
        }
    }

    /// A numeric metadata value or list as i64 (token types, eos id lists).
    pub fn i64s(&self, key: &str) -> Result<Option<Vec<i64>>> {
        let Some(v) = self.json(key) else {
            return Ok(None);
        };
        let items = match v {
            serde_json::Value::Array(items) => items,
            one => vec![one],
        };
        items
            .iter()
            .map(|x| {
                x.as_i64()
                    .or_else(|| x.as_bool().map(i64::from))
                    .ok_or_else(|| self.bad(format!("metadata '{key}' is not an integer")))
            })
            .collect::<Result<Vec<_>>>()
            .map(Some)
    }

    pub fn require_string(&self, key: &str) -> Result<String> {
        self.string(key)?.ok_or_else(|| self.missing(key))
    }

    pub fn require_usize(&self, key: &str) -> Result<usize> {
        self.usize(key)?.ok_or_else(|| self.missing(key))
    }

    pub fn missing(&self, key: &str) -> EngineError {
        EngineError::invalid_model(&self.path, format!("missing GGUF metadata '{key}'"))
    }

    fn bad(&self, e: impl std::fmt::Display) -> EngineError {
        EngineError::invalid_model(&self.path, e)
    }
}

fn to_json(v: &Value) -> serde_json::Value {
    use serde_json::Value as J;
    match v {
        Value::U8(x) => J::from(*x),
        Value::I8(x) => J::from(*x),
        Value::U16(x) => J::from(*x),
        Value::I16(x) => J::from(*x),
        Value::U32(x) => J::from(*x),
        Value::I32(x) => J::from(*x),
        Value::U64(x) => J::from(*x),
        Value::I64(x) => J::from(*x),
        Value::F32(x) => J::from(*x),
        Value::F64(x) => J::from(*x),
        Value::Bool(x) => J::from(*x),
        Value::String(x) => J::from(x.clone()),
        Value::Array(items) => J::Array(items.iter().map(to_json).collect()),
    }
}

/// Validates magic, version and that all tensor data lies within the file.
pub fn check_header(path: &Path) -> Result<()> {
    let meta = std::fs::metadata(path)
        .map_err(|e| EngineError::io(format!("reading {}", path.display()), e))?;
    let file = std::fs::File::open(path)
        .map_err(|e| EngineError::io(format!("opening {}", path.display()), e))?;
    let mut r = HeaderReader {
        inner: BufReader::new(file),
        pos: 0,
    };
    let bad = |reason: String| EngineError::invalid_model(path, reason);
    let truncated = |_| bad("truncated GGUF: the file ends inside its header".into());

    let mut magic = [0u8; 4];
    r.read_exact(&mut magic).map_err(truncated)?;
    if &magic != b"GGUF" {
        return Err(bad("not a GGUF file (bad magic)".into()));
    }
    let version = r.u32().map_err(truncated)?;
    if !(2..=3).contains(&version) {
        return Err(bad(format!("unsupported GGUF version {version}")));
    }
    let n_tensors = r.u64().map_err(truncated)?;
    let n_kv = r.u64().map_err(truncated)?;
    if n_tensors > 1 << 20 || n_kv > 1 << 20 {
        return Err(bad("corrupt GGUF header (absurd counts)".into()));
    }
    let mut alignment = 32u64;
    for _ in 0..n_kv {
        let key = r.string().map_err(truncated)?;
        let ty = r.u32().map_err(truncated)?;
        if key == "general.alignment" && ty == 4 {
            alignment = u64::from(r.u32().map_err(truncated)?).max(1);
        } else {
            r.skip_value(ty).map_err(|e| bad(e.to_string()))?;
        }
    }
    let mut data_end = 0u64;
    for _ in 0..n_tensors {
        let name = r.string().map_err(truncated)?;
        let n_dims = r.u32().map_err(truncated)?;
        if n_dims > 8 {
            return Err(bad(format!("tensor '{name}' has {n_dims} dimensions")));
        }
        let mut elements = 1u64;
        for _ in 0..n_dims {
            elements = elements.saturating_mul(r.u64().map_err(truncated)?);
        }
        let ggml_type = r.u32().map_err(truncated)?;
        let offset = r.u64().map_err(truncated)?;
        let size = ggml_type_size(ggml_type, elements).unwrap_or(0);
        data_end = data_end.max(offset.saturating_add(size));
    }
    let data_start = r.pos.div_ceil(alignment) * alignment;
    let needed = data_start.saturating_add(data_end);
    if meta.len() < needed {
        return Err(bad(format!(
            "truncated GGUF: the file has {} bytes but its tensors need {needed}",
            meta.len()
        )));
    }
    Ok(())
}

/// Bytes taken by `n` elements of a ggml type; `None` for types this check
/// does not know (their extent is then not verified).
fn ggml_type_size(ty: u32, n: u64) -> Option<u64> {
    // (block elements, block bytes) per ggml type id.
    let (block, bytes) = match ty {
        0 => (1, 4),     // F32
        1 => (1, 2),     // F16
        2 => (32, 18),   // Q4_0
        3 => (32, 20),   // Q4_1
        6 => (32, 22),   // Q5_0
        7 => (32, 24),   // Q5_1
        8 => (32, 34),   // Q8_0
        9 => (32, 36),   // Q8_1
        10 => (256, 84), // Q2_K
        11 => (256, 110),
        12 => (256, 144),
        13 => (256, 176),
        14 => (256, 210),
        15 => (256, 292),
        24 => (1, 1), // I8
        25 => (1, 2), // I16
        26 => (1, 4), // I32
        27 => (1, 8), // I64
        28 => (1, 8), // F64
        30 => (1, 2), // BF16
        _ => return None,
    };
    Some(n.div_ceil(block) * bytes)
}

struct HeaderReader<R> {
    inner: R,
    pos: u64,
}

impl<R: Read> HeaderReader<R> {
    fn read_exact(&mut self, buf: &mut [u8]) -> std::io::Result<()> {
        self.inner.read_exact(buf)?;
        self.pos += buf.len() as u64;
        Ok(())
    }

    fn u32(&mut self) -> std::io::Result<u32> {
        let mut b = [0u8; 4];
        self.read_exact(&mut b)?;
        Ok(u32::from_le_bytes(b))
    }

    fn u64(&mut self) -> std::io::Result<u64> {
        let mut b = [0u8; 8];
        self.read_exact(&mut b)?;
        Ok(u64::from_le_bytes(b))
    }

    fn skip(&mut self, n: u64) -> std::io::Result<()> {
        let copied = std::io::copy(&mut (&mut self.inner).take(n), &mut std::io::sink())?;
        self.pos += copied;
        if copied < n {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        Ok(())
    }

    fn string(&mut self) -> std::io::Result<String> {
        let len = self.u64()?;
        if len > 1 << 24 {
            return Err(std::io::Error::other("string longer than 16 MiB"));
        }
        let mut b = vec![0u8; len as usize];
        self.read_exact(&mut b)?;
        Ok(String::from_utf8_lossy(&b).into_owned())
    }

    /// Skips one metadata value of GGUF value type `ty`.
    fn skip_value(&mut self, ty: u32) -> std::io::Result<()> {
        match ty {
            0 | 1 | 7 => self.skip(1), // u8, i8, bool
            2 | 3 => self.skip(2),
            4..=6 => self.skip(4),
            10..=12 => self.skip(8),
            8 => {
                let len = self.u64()?;
                self.skip(len)
            }
            9 => {
                let elem = self.u32()?;
                let count = self.u64()?;
                match elem {
                    0 | 1 | 7 => self.skip(count),
                    2 | 3 => self.skip(count * 2),
                    4..=6 => self.skip(count * 4),
                    10..=12 => self.skip(count * 8),
                    _ => (0..count).try_for_each(|_| self.skip_value(elem)),
                }
            }
            other => Err(std::io::Error::other(format!(
                "corrupt GGUF header (unknown value type {other})"
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A one-tensor (F32, `tensor_bytes` long) GGUF header with one string key.
    fn header(tensor_bytes: u64) -> Vec<u8> {
        let mut b = b"GGUF".to_vec();
        b.extend(3u32.to_le_bytes());
        b.extend(1u64.to_le_bytes()); // tensors
        b.extend(1u64.to_le_bytes()); // kv
        b.extend(4u64.to_le_bytes());
        b.extend(b"name");
        b.extend(8u32.to_le_bytes());
        b.extend(3u64.to_le_bytes());
        b.extend(b"abc");
        b.extend(1u64.to_le_bytes());
        b.extend(b"w");
        b.extend(1u32.to_le_bytes());
        b.extend((tensor_bytes / 4).to_le_bytes());
        b.extend(0u32.to_le_bytes()); // F32
        b.extend(0u64.to_le_bytes());
        b
    }

    /// The header, padded to the data alignment, then `data_len` data bytes.
    fn file(tensor_bytes: u64, data_len: usize) -> Vec<u8> {
        let mut b = header(tensor_bytes);
        b.resize(b.len().div_ceil(32) * 32 + data_len, 0);
        b
    }

    fn check(bytes: &[u8]) -> Result<()> {
        let path = std::env::temp_dir().join(format!(
            "afm-gguf-{}-{}.gguf",
            std::process::id(),
            bytes.len()
        ));
        std::fs::write(&path, bytes).unwrap();
        let r = check_header(&path);
        std::fs::remove_file(&path).unwrap();
        r
    }

    #[test]
    fn complete_file_passes() {
        check(&file(64, 64)).unwrap();
    }

    #[test]
    fn missing_tensor_bytes_are_reported_as_truncation() {
        let err = check(&file(64, 10)).unwrap_err().to_string();
        assert!(err.contains("truncated GGUF"), "{err}");
    }

    #[test]
    fn cut_header_and_bad_magic_are_named() {
        let err = check(&header(64)[..20]).unwrap_err().to_string();
        assert!(err.contains("truncated GGUF"), "{err}");
        let err = check(b"NOPE0000").unwrap_err().to_string();
        assert!(err.contains("bad magic"), "{err}");
    }
}
