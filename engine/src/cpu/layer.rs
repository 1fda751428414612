//! A whole pre-norm decoder layer as one MLX primitive on the CPU:
//! `AfmDecoderLayer` (`cpu-kernels/layer*`).
//!
//! As MLX ops a layer is ~13 operations a step (MLX's `rms_norm` and `rope`
//! fall back to several plain ops each on CPU streams, plus the KV writes,
//! residual adds and copies of reshaped views), and each one is a graph
//! node, a push to MLX's stream thread and usually a thread wake: ~390
//! context switches a token on SmolLM2. The primitive runs the layer's small
//! steps inline on the stream thread and its products, attention and
//! activation on the shared pool, whose workers stay hot between them.
//!
//! Each row is computed from its own input row and its own KV slot in a
//! fixed order, so the layer is batch-invariant by construction (with
//! `blas_min_rows` 0). It rides on the quantized matmul's build and checks
//! ([`qmm::path`](super::qmm::path)); `AFM_LAYER=off` turns it off alone,
//! and the engine then builds the layer from MLX ops, as on Metal.

use std::sync::OnceLock;

use mlx_rs::Array;

use super::glu::Act;
use super::qmm::Path;
use crate::error::Result;

/// Whether decoder layers take the primitive in this process (decided
/// once).
pub fn path() -> &'static Path {
    static PATH: OnceLock<Path> = OnceLock::new();
    PATH.get_or_init(|| super::switched_path("AFM_LAYER"))
}

/// What the start-up log says of [`path`].
pub fn describe() -> String {
    match path() {
        Path::Primitive { threads, .. } => {
            format!("afm decoder layer (one op per layer, {threads} threads)")
        }
        Path::Unavailable(why) => format!("MLX ops ({why})"),
    }
}

/// A product's packed format: bits and group size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Format {
    pub bits: i32,
    pub group_size: i32,
}

/// A layer's fixed parameters.
#[derive(Debug, Clone)]
pub struct Config {
    pub heads: usize,
    pub kv_heads: usize,
    pub head_dim: usize,
    /// The formats of the q/k/v, output, gate/up and down products.
    pub formats: [Format; 4],
    /// The layer norms' eps.
    pub eps: f32,
    /// The per-head q/k norms' eps, when the layer has them.
    pub qk_norm: Option<f32>,
    /// A norm of the attention output before its residual add (Gemma).
    pub attn_out_norm: bool,
    /// A norm of the MLP output before its residual add (Gemma).
    pub ffn_out_norm: bool,
    pub rope_base: f32,
    pub rope_traditional: bool,
    pub scale: f32,
    pub window: Option<usize>,
    pub act: Act,
}

/// The rows of one call: `slots.len()` items of `l` new tokens each; item
/// `i` sits in KV slot `slots[i]`, its first new token at `offsets[i]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rows {
    pub slots: Vec<i32>,
    pub offsets: Vec<i32>,
    pub l: usize,
}

/// The layer over `h` (`[..., n * l, dim]`), lazily: `(h_out, keys,
/// values)`, the store with this call's keys and values written (in place
/// when the caller holds no other reference to it). `inputs` after `h`,
/// `keys`, `values`: the attention norm, q/k/v packed weight, scales,
/// biases, the output projection's three, the MLP norm, gate/up's three,
/// down's three, then the q and k norms (with `qk_norm`), the attention
/// output norm and the MLP output norm (when the config has them).
/// `blas_min_rows` as for [`qmm::affine_qmm_blas_from`](super::qmm::affine_qmm_blas_from).
/// Only where [`path`] is the primitive.
pub fn decoder_layer(
    inputs: &[&Array],
    config: &Config,
    rows: &Rows,
    blas_min_rows: i32,
) -> Result<(Array, Array, Array)> {
    ffi::decoder_layer(inputs, config, rows, blas_min_rows)
}

#[cfg(not(target_os = "macos"))]
mod ffi {
    use std::ffi::{c_char, c_float, c_int, CStr};

    use mlx_rs::Array;
    use mlx_sys::{mlx_array, mlx_stream};

    use super::{Config, Rows};
    use crate::cpu::glu::Act;
    use crate::error::{EngineError, Result};

    /// `afm_layer_config` of `cpu-kernels/primitive.h`, field for field.
    #[repr(C)]
    struct LayerConfig {
        heads: c_int,
        kv_heads: c_int,
        head_dim: c_int,
        bits: [c_int; 4],
        group_size: [c_int; 4],
        eps: c_float,
        qk_eps: c_float,
        has_qk_norm: c_int,
        has_attn_out_norm: c_int,
        has_ffn_out_norm: c_int,
        rope_base: c_float,
        rope_traditional: c_int,
        scale: c_float,
        window: c_int,
        act: c_int,
        blas_min_rows: c_int,
    }

    extern "C" {
        fn afm_decoder_layer(
            res: *mut mlx_array,
            inputs: *const mlx_array,
            n_inputs: c_int,
            cfg: *const LayerConfig,
            slots: *const i32,
            offsets: *const i32,
            n: c_int,
            l: c_int,
            s: mlx_stream,
        ) -> c_int;
        fn afm_qmm_last_error() -> *const c_char;
    }

    pub(super) fn decoder_layer(
        inputs: &[&Array],
        c: &Config,
        rows: &Rows,
        blas_min_rows: i32,
    ) -> Result<(Array, Array, Array)> {
        if rows.slots.len() != rows.offsets.len() {
            return Err(EngineError::Internal(
                "decoder layer: one offset per slot".into(),
            ));
        }
        let cfg = LayerConfig {
            heads: c.heads as c_int,
            kv_heads: c.kv_heads as c_int,
            head_dim: c.head_dim as c_int,
            bits: c.formats.map(|f| f.bits),
            group_size: c.formats.map(|f| f.group_size),
            eps: c.eps,
            qk_eps: c.qk_norm.unwrap_or(0.0),
            has_qk_norm: c.qk_norm.is_some() as c_int,
            has_attn_out_norm: c.attn_out_norm as c_int,
            has_ffn_out_norm: c.ffn_out_norm as c_int,
            rope_base: c.rope_base,
            rope_traditional: c.rope_traditional as c_int,
            scale: c.scale,
            window: c.window.unwrap_or(0) as c_int,
            act: match c.act {
                Act::Silu => 0,
                Act::GeluTanh => 1,
            },
            blas_min_rows,
        };
        let handles: Vec<mlx_array> = inputs.iter().map(|a| a.as_ptr()).collect();
        // SAFETY: the handles come from live mlx-rs Arrays that outlive the
        // call; `slots` and `offsets` hold `n` values each and are copied.
        // `res` starts as three empty handles; on success each holds a new
        // array that `Array::from_ptr` takes ownership of, on failure they
        // are freed. The error text lives until this thread's next call.
        unsafe {
            let mut res = [
                mlx_sys::mlx_array_new(),
                mlx_sys::mlx_array_new(),
                mlx_sys::mlx_array_new(),
            ];
            let stream = mlx_stream {
                ctx: std::ptr::null_mut(),
            };
            let status = afm_decoder_layer(
                res.as_mut_ptr(),
                handles.as_ptr(),
                handles.len() as c_int,
                &cfg,
                rows.slots.as_ptr(),
                rows.offsets.as_ptr(),
                rows.slots.len() as c_int,
                rows.l as c_int,
                stream,
            );
            if status != 0 {
                res.into_iter().for_each(|r| {
                    mlx_sys::mlx_array_free(r);
                });
                let why = CStr::from_ptr(afm_qmm_last_error()).to_string_lossy();
                return Err(EngineError::Mlx(why.into_owned()));
            }
            let [h, k, v] = res.map(|r| Array::from_ptr(r));
            Ok((h, k, v))
        }
    }
}

#[cfg(target_os = "macos")]
mod ffi {
    use mlx_rs::Array;

    use super::{Config, Rows};
    use crate::error::{EngineError, Result};

    pub(super) fn decoder_layer(
        _: &[&Array],
        _: &Config,
        _: &Rows,
        _: i32,
    ) -> Result<(Array, Array, Array)> {
        Err(EngineError::Unsupported(
            "afm's CPU decoder layer on macOS".into(),
        ))
    }
}
