//! `y = x · Wᵀ` straight from MLX affine-quantized weights on the CPU.
//!
//! MLX's CPU `quantized_matmul` on x86 is a scalar loop on one thread (its
//! SIMD path exists only in Apple's Accelerate build), so without this the
//! engine had to dequantize every weight to f32 at load and read 4-8x the
//! bytes per token. `cpu-kernels/` (C++, built by `build.rs`) adds an MLX
//! primitive, `AffineQmm`, with AVX2+FMA kernels and a portable fallback; it
//! sits in MLX's lazy graph like any op and copies nothing. This module is
//! its Rust face: whether it can run here ([`path`]), which formats it takes
//! ([`supports`]) and the op itself ([`affine_qmm`]).
//!
//! Each output's arithmetic is a fixed sequence that depends only on the
//! weight's format and `K`, never on how many rows `x` has or how the rows
//! are split over threads, so the op is batch-invariant by construction.
//!
//! It goes away when MLX's CPU backend gets SIMD quantized kernels of its
//! own: [`path`] then reports it unused and `Linear` falls back to
//! `quantized_matmul`.

use std::sync::OnceLock;

use mlx_rs::Array;

use crate::error::Result;

/// How this process multiplies by quantized weights on the CPU, decided once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Path {
    /// afm's primitive with the widest kernel this CPU runs (`kernel`:
    /// "AVX-512", "AVX2+FMA" or "portable"; the gated activation takes
    /// its AVX2 form on either SIMD one, attention its AVX-512 form where
    /// a head is a multiple of 16 lanes), on `threads`
    /// threads (the caller's included).
    Primitive {
        kernel: &'static str,
        threads: usize,
    },
    /// Not used, and why (a Metal build, `AFM_QMM=off`, or an MLX other
    /// than the one the primitive was compiled against).
    Unavailable(String),
}

impl std::fmt::Display for Path {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Path::Primitive { kernel, threads } => {
                write!(f, "afm affine qmm ({kernel} kernel, {threads} threads)")
            }
            Path::Unavailable(why) => write!(f, "MLX's own ({why})"),
        }
    }
}

impl Path {
    pub fn is_primitive(&self) -> bool {
        matches!(self, Path::Primitive { .. })
    }
}

/// The path this process takes (checked on first use).
pub fn path() -> &'static Path {
    static PATH: OnceLock<Path> = OnceLock::new();
    PATH.get_or_init(|| on_device(crate::device::Device::current().kind))
}

/// The path on a GPU: the primitives run on MLX's CPU stream, so on a GPU
/// (MLX's CUDA build; Metal builds leave them out) they step aside and
/// every op stays on the device, with no environment switch needed.
fn on_device(kind: crate::device::Kind) -> Path {
    match kind {
        crate::device::Kind::Gpu => Path::Unavailable("MLX's default device is the GPU".into()),
        crate::device::Kind::Cpu => ffi::probe(),
    }
}

/// Whether the primitive runs a matrix of this format: affine `bits` 4 or
/// 8, groups of 16, 32, 64 or 128 along `in_features` (MLX 4/8-bit
/// checkpoints; the GGUF types `loading::gguf_affine` repacks, Q6_K's
/// groups of 16 among them, which MLX's own quantized ops do not take).
pub fn supports(bits: i32, group_size: i32, in_features: i32) -> bool {
    path().is_primitive()
        && matches!(bits, 4 | 8)
        && matches!(group_size, 16 | 32 | 64 | 128)
        && in_features > 0
        && in_features % group_size == 0
}

/// Rows of x from which a call that need not keep rows independent
/// dequantizes tiles of W and multiplies with BLAS instead: at 64 rows the
/// two take the same time, at 32 the kernel takes 0.63x, at 256 BLAS takes
/// 0.62x (`benches/qmm.rs`, 2048×2048, AVX-512), the kernel being
/// compute-bound from ~16 rows.
pub const BLAS_MIN_ROWS: i32 = 64;

/// `x[..., K] · dequantize(w, scales, biases)ᵀ` as f32 `[..., N]`: MLX's
/// `quantized_matmul(x, w, scales, biases, transpose = true, ..)`, lazily.
/// Only where [`supports`] says so. With `rows_independent`, every row of
/// the result is bit for bit what that row alone gives (batch-invariant
/// mode); otherwise calls of [`BLAS_MIN_ROWS`] rows or more (prefill) go
/// through BLAS, whose rounding depends on the shape.
pub fn affine_qmm(
    x: &Array,
    w: &Array,
    scales: &Array,
    biases: &Array,
    group_size: i32,
    bits: i32,
    rows_independent: bool,
) -> Result<Array> {
    let blas_min_rows = if rows_independent { 0 } else { BLAS_MIN_ROWS };
    affine_qmm_blas_from(x, w, scales, biases, group_size, bits, blas_min_rows)
}

/// [`affine_qmm`] with the row count from which the call dequantizes tiles
/// and multiplies with BLAS set explicitly (`0`: never), for benchmarks
/// that place [`BLAS_MIN_ROWS`].
pub fn affine_qmm_blas_from(
    x: &Array,
    w: &Array,
    scales: &Array,
    biases: &Array,
    group_size: i32,
    bits: i32,
    blas_min_rows: i32,
) -> Result<Array> {
    ffi::affine_qmm(x, w, scales, biases, group_size, bits, blas_min_rows)
}

/// Routed experts: `y[r, j] = x[r] · dequantize(w[indices[r, j]])ᵀ`, f32
/// `[R, J, N]`, for `x` `[R, K]`, `indices` `[R, J]` (u32 or i32) and a
/// stacked `w` `[E, N, K * bits / 32]` with its `[E, N, K / group_size]`
/// scales and biases: MLX's `gather_qmm` with the indices on the weights.
/// Each expert's weights are read once for all the rows that chose it. With
/// `rows_independent` every `(row, expert)` result is the kernel's alone
/// (what that row gives by itself); otherwise an expert chosen by
/// [`BLAS_MIN_ROWS`] rows or more (prefill) takes the BLAS path. Only where
/// [`supports`] says so; an expert id outside `[0, E)` gives NaN rows.
#[allow(clippy::too_many_arguments)]
pub fn gather_affine_qmm(
    x: &Array,
    w: &Array,
    scales: &Array,
    biases: &Array,
    indices: &Array,
    group_size: i32,
    bits: i32,
    rows_independent: bool,
) -> Result<Array> {
    let blas_min_rows = if rows_independent { 0 } else { BLAS_MIN_ROWS };
    ffi::gather_affine_qmm(
        x,
        w,
        scales,
        biases,
        indices,
        group_size,
        bits,
        blas_min_rows,
    )
}

/// Rows `ids` (u32 or i32, any shape) of a quantized table `w` `[V, K *
/// bits / 32]` (a token embedding), dequantized to f32 `[..., K]`: `scale ·
/// q + bias` in f32, as MLX's `dequantize` computes it with f32 scales, in
/// one op where MLX's take and dequantize are ~45 on the CPU. Only where
/// [`supports`] says so; an id outside `[0, V)` gives a row of NaN.
pub fn embedding_rows(
    ids: &Array,
    w: &Array,
    scales: &Array,
    biases: &Array,
    group_size: i32,
    bits: i32,
) -> Result<Array> {
    ffi::embedding_rows(ids, w, scales, biases, group_size, bits)
}

#[cfg(not(target_os = "macos"))]
mod ffi {
    use std::ffi::{c_char, c_int, CStr};

    use mlx_rs::Array;
    use mlx_sys::{mlx_array, mlx_stream};

    use super::Path;
    use crate::error::Result;

    // cpu-kernels/primitive.h; `mlx_array` and `mlx_stream` are mlx-c's
    // handles, which the C side reads as the same one-pointer structs.
    extern "C" {
        fn afm_affine_qmm(
            res: *mut mlx_array,
            x: mlx_array,
            w: mlx_array,
            scales: mlx_array,
            biases: mlx_array,
            group_size: c_int,
            bits: c_int,
            blas_min_rows: c_int,
            s: mlx_stream,
        ) -> c_int;
        fn afm_gather_affine_qmm(
            res: *mut mlx_array,
            x: mlx_array,
            w: mlx_array,
            scales: mlx_array,
            biases: mlx_array,
            indices: mlx_array,
            group_size: c_int,
            bits: c_int,
            blas_min_rows: c_int,
            s: mlx_stream,
        ) -> c_int;
        fn afm_embedding_rows(
            res: *mut mlx_array,
            ids: mlx_array,
            w: mlx_array,
            scales: mlx_array,
            biases: mlx_array,
            group_size: c_int,
            bits: c_int,
            s: mlx_stream,
        ) -> c_int;
        fn afm_qmm_set_threads(n: c_int) -> c_int;
        fn afm_qmm_kernel() -> c_int;
        fn afm_qmm_mlx_version_built() -> *const c_char;
        fn afm_qmm_mlx_version_loaded() -> *const c_char;
    }

    fn text(p: *const c_char) -> String {
        // SAFETY: the C side returns NUL-terminated strings that live as long
        // as the process (static) or until the thread's next call (errors).
        unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
    }

    pub(super) fn probe() -> Path {
        if let Some(why) = crate::cpu::switched_off("AFM_QMM") {
            return Path::Unavailable(why);
        }
        // SAFETY: plain C functions without arguments.
        let (built, loaded) = unsafe {
            (
                text(afm_qmm_mlx_version_built()),
                text(afm_qmm_mlx_version_loaded()),
            )
        };
        // The primitive subclasses mlx::core::Primitive and touches array
        // internals: neither is ABI-stable across MLX releases.
        if built != loaded {
            return Path::Unavailable(format!(
                "the primitive was compiled for MLX {built}, the process runs MLX {loaded}"
            ));
        }
        // SAFETY: plain C functions; n <= 0 only queries.
        let (kernel, threads) = unsafe { (afm_qmm_kernel(), afm_qmm_set_threads(0)) };
        Path::Primitive {
            kernel: match kernel {
                3 => "AVX-512",
                2 => "AVX2+FMA",
                _ => "portable",
            },
            threads: threads.max(1) as usize,
        }
    }

    pub(super) fn affine_qmm(
        x: &Array,
        w: &Array,
        scales: &Array,
        biases: &Array,
        group_size: i32,
        bits: i32,
        blas_min_rows: i32,
    ) -> Result<Array> {
        // SAFETY: every handle comes from a live mlx-rs Array.
        super::super::build_op(|res, s| unsafe {
            afm_affine_qmm(
                res,
                x.as_ptr(),
                w.as_ptr(),
                scales.as_ptr(),
                biases.as_ptr(),
                group_size,
                bits,
                blas_min_rows,
                s,
            )
        })
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn gather_affine_qmm(
        x: &Array,
        w: &Array,
        scales: &Array,
        biases: &Array,
        indices: &Array,
        group_size: i32,
        bits: i32,
        blas_min_rows: i32,
    ) -> Result<Array> {
        // SAFETY: every handle comes from a live mlx-rs Array.
        super::super::build_op(|res, s| unsafe {
            afm_gather_affine_qmm(
                res,
                x.as_ptr(),
                w.as_ptr(),
                scales.as_ptr(),
                biases.as_ptr(),
                indices.as_ptr(),
                group_size,
                bits,
                blas_min_rows,
                s,
            )
        })
    }

    pub(super) fn embedding_rows(
        ids: &Array,
        w: &Array,
        scales: &Array,
        biases: &Array,
        group_size: i32,
        bits: i32,
    ) -> Result<Array> {
        // SAFETY: every handle comes from a live mlx-rs Array.
        super::super::build_op(|res, s| unsafe {
            afm_embedding_rows(
                res,
                ids.as_ptr(),
                w.as_ptr(),
                scales.as_ptr(),
                biases.as_ptr(),
                group_size,
                bits,
                s,
            )
        })
    }
}

#[cfg(target_os = "macos")]
mod ffi {
    use mlx_rs::Array;

    use super::Path;
    use crate::error::{EngineError, Result};

    pub(super) fn probe() -> Path {
        Path::Unavailable("Metal runs MLX's quantized matmul".into())
    }

    pub(super) fn affine_qmm(
        _: &Array,
        _: &Array,
        _: &Array,
        _: &Array,
        _: i32,
        _: i32,
        _: i32,
    ) -> Result<Array> {
        Err(EngineError::Unsupported(
            "afm's CPU quantized matmul on macOS".into(),
        ))
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn gather_affine_qmm(
        _: &Array,
        _: &Array,
        _: &Array,
        _: &Array,
        _: &Array,
        _: i32,
        _: i32,
        _: i32,
    ) -> Result<Array> {
        Err(EngineError::Unsupported(
            "afm's CPU gather quantized matmul on macOS".into(),
        ))
    }

    pub(super) fn embedding_rows(
        _: &Array,
        _: &Array,
        _: &Array,
        _: &Array,
        _: i32,
        _: i32,
    ) -> Result<Array> {
        Err(EngineError::Unsupported(
            "afm's CPU embedding lookup on macOS".into(),
        ))
    }
}

#[cfg(all(test, not(target_os = "macos")))]
mod tests {
    #[test]
    fn a_gpu_default_device_takes_mlx_own_ops() {
        let path = super::on_device(crate::device::Kind::Gpu);
        assert!(!path.is_primitive());
        assert_eq!(
            path.to_string(),
            "MLX's own (MLX's default device is the GPU)"
        );
    }

    use super::*;
    use crate::cpu::test_support::max_diff;
    use mlx_rs::ops::indexing::IndexOp;
    use mlx_rs::ops::{dequantize, matmul, quantize};
    use mlx_rs::Dtype;
    use rand_core::{RngCore, SeedableRng};

    fn uniform(rows: i32, cols: i32, half: f32, seed: u64) -> Array {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        let v: Vec<f32> = (0..rows * cols)
            .map(|_| half * ((rng.next_u32() >> 8) as f32 / (1u32 << 23) as f32 - 1.0))
            .collect();
        Array::from_slice(&v, &[rows, cols])
    }

    /// Both paths (the kernel, and dequantize + BLAS for many rows) agree
    /// with `x · dequantize(w)ᵀ` to f32 rounding, for 4 and 8 bits; the
    /// rows-independent path gives each row exactly what it gives alone.
    #[test]
    fn both_paths_match_the_dequantized_product_and_rows_stay_independent() {
        assert!(path().is_primitive(), "{}", path());
        let (n, k, m) = (96, 256, BLAS_MIN_ROWS + 8);
        let x = uniform(m, k, 1.0, 1);
        for bits in [4, 8] {
            let (q, s, b) = quantize(uniform(n, k, 0.1, 2), 64, bits).unwrap();
            let (s, b) = (
                s.as_dtype(Dtype::Float16).unwrap(),
                b.as_dtype(Dtype::Float16).unwrap(),
            );
            let f32_of = |a: &Array| a.as_dtype(Dtype::Float32).unwrap();
            let w = dequantize(&q, f32_of(&s), Some(&f32_of(&b)), 64, bits).unwrap();
            let want = matmul(&x, w.t()).unwrap();
            let scale = want.abs().unwrap().max(None).unwrap().item_exact::<f32>();
            for independent in [true, false] {
                let got = affine_qmm(&x, &q, &s, &b, 64, bits, independent).unwrap();
                let d = max_diff(&got, &want);
                assert!(
                    d <= 2e-5 * scale,
                    "{bits}-bit, independent {independent}: {d}"
                );
            }
            let all = affine_qmm(&x, &q, &s, &b, 64, bits, true).unwrap();
            for row in [0, 7, m - 1] {
                let alone = affine_qmm(&x.index(row..row + 1), &q, &s, &b, 64, bits, true).unwrap();
                assert_eq!(
                    max_diff(&all.index(row..row + 1), &alone),
                    0.0,
                    "{bits}-bit row {row} differs from itself alone"
                );
            }
        }
    }

    /// Groups of 16 (GGUF's Q6_K; MLX quantizes in 32 or more but
    /// dequantizes 16): both paths against `x · dequantize(w)ᵀ` at 1, 5 and
    /// 72 rows, on the AVX2 kernel whatever the CPU (the AVX-512 one has no
    /// such groups).
    #[test]
    fn groups_of_16_match_the_dequantized_product() {
        let (n, k) = (40, 160);
        for bits in [4, 8] {
            let (q, _, _) = quantize(uniform(n, k, 0.1, 6), 32, bits).unwrap();
            let s = uniform(n, k / 16, 0.01, 7).abs().unwrap();
            let b = uniform(n, k / 16, 0.05, 8);
            let w = dequantize(&q, &s, Some(&b), 16, bits).unwrap();
            for m in [1, 5, BLAS_MIN_ROWS + 8] {
                let x = uniform(m, k, 1.0, 9);
                let want = matmul(&x, w.t()).unwrap();
                let scale = want.abs().unwrap().max(None).unwrap().item_exact::<f32>();
                for independent in [true, false] {
                    let got = affine_qmm(&x, &q, &s, &b, 16, bits, independent).unwrap();
                    let d = max_diff(&got, &want);
                    assert!(
                        d <= 2e-5 * scale,
                        "{bits}-bit, {m} rows, independent {independent}: {d}"
                    );
                }
            }
        }
    }

    /// The gather form against MLX's `gather_mm` over the dequantized
    /// stack: both paths within f32 rounding (150 rows over 4 experts puts
    /// more than [`BLAS_MIN_ROWS`] rows on some expert), each `(row,
    /// expert)` result bit for bit what that row gives alone, and an id
    /// past the stack a NaN row rather than a read out of bounds.
    #[test]
    fn gather_form_matches_gather_mm_and_rows_stay_independent() {
        use mlx_rs::ops::{expand_dims_axes, gather_mm, stack};
        let (experts, n, k, rows, per_row) = (4, 48, 128, 150, 2);
        let x = uniform(rows, k, 1.0, 4);
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(5);
        let ids: Vec<u32> = (0..rows * per_row)
            .map(|_| rng.next_u32() % experts as u32)
            .collect();
        let idx = Array::from_slice(&ids, &[rows, per_row]);
        for bits in [4, 8] {
            let parts: Vec<_> = (0..experts)
                .map(|e| quantize(uniform(n, k, 0.1, 10 + e as u64), 32, bits).unwrap())
                .collect();
            let st = |f: fn(&(Array, Array, Array)) -> &Array| {
                stack(&parts.iter().map(f).collect::<Vec<_>>(), 0).unwrap()
            };
            let (q, s, b) = (st(|p| &p.0), st(|p| &p.1), st(|p| &p.2));
            let w = dequantize(&q, &s, Some(&b), 32, bits).unwrap();
            let xr = expand_dims_axes(&x, &[-2, -3]).unwrap(); // [R, 1, 1, K]
            let want = gather_mm(
                &xr,
                w.transpose_axes(&[0, 2, 1]).unwrap(),
                None,
                &idx,
                false,
            )
            .unwrap()
            .squeeze_axes(&[-2])
            .unwrap();
            let scale = want.abs().unwrap().max(None).unwrap().item_exact::<f32>();
            for independent in [true, false] {
                let got = gather_affine_qmm(&x, &q, &s, &b, &idx, 32, bits, independent).unwrap();
                assert_eq!(got.shape(), &[rows, per_row, n]);
                let d = max_diff(&got, &want);
                assert!(
                    d <= 2e-5 * scale,
                    "{bits}-bit, independent {independent}: {d}"
                );
            }
            let all = gather_affine_qmm(&x, &q, &s, &b, &idx, 32, bits, true).unwrap();
            for row in [0, 9, rows - 1] {
                let r = row..row + 1;
                let alone = gather_affine_qmm(
                    &x.index(r.clone()),
                    &q,
                    &s,
                    &b,
                    &idx.index(r.clone()),
                    32,
                    bits,
                    true,
                )
                .unwrap();
                assert_eq!(
                    max_diff(&all.index(r), &alone),
                    0.0,
                    "{bits}-bit row {row} differs from itself alone"
                );
            }
            let past = Array::from_slice(&[1u32, experts as u32], &[1, 2]);
            let got = gather_affine_qmm(&x.index(0..1), &q, &s, &b, &past, 32, bits, true).unwrap();
            let got = got.as_slice::<f32>();
            assert!(got[..n as usize].iter().all(|v| v.is_finite()));
            assert!(
                got[n as usize..].iter().all(|v| v.is_nan()),
                "{bits}-bit: id past the stack"
            );
        }
    }

    #[test]
    fn a_bad_format_is_an_error_naming_it() {
        let x = Array::from_slice(&[0.0f32; 64], &[1, 64]);
        let (q, s, b) = quantize(uniform(8, 64, 0.1, 3), 64, 4).unwrap();
        let err = affine_qmm(&x, &q, &s, &b, 64, 3, true)
            .unwrap_err()
            .to_string();
        assert!(err.contains("bits"), "{err}");
    }
    /// The embedding lookup gives exactly the values MLX's take and
    /// dequantize (f32 scales) give, for 4 and 8 bits, bf16 scales, u32 and
    /// i32 ids in any order and repeated; an id past the table is a NaN row.
    #[test]
    fn embedding_rows_are_mlx_dequantize_exactly() {
        assert!(path().is_primitive(), "{}", path());
        let table = uniform(40, 128, 1.0, 7);
        for (bits, group_size) in [(4, 32), (8, 64), (4, 64)] {
            let (w, s, b) = quantize(&table, group_size, bits).unwrap();
            let bf16 = |a: &Array| a.as_dtype(Dtype::Bfloat16).unwrap();
            let (s, b) = (bf16(&s), bf16(&b));
            let picks = [3u32, 39, 0, 3, 17];
            let want = |ids: &Array| {
                let f32_rows = |a: &Array| a.take_axis(ids, 0).unwrap().as_type::<f32>().unwrap();
                dequantize(
                    w.take_axis(ids, 0).unwrap(),
                    f32_rows(&s),
                    Some(&f32_rows(&b)),
                    group_size,
                    bits,
                )
                .unwrap()
            };
            let u32_ids = Array::from_slice(&picks, &[1, 5]);
            let i32_ids = u32_ids.as_type::<i32>().unwrap();
            for ids in [&u32_ids, &i32_ids] {
                let got = embedding_rows(ids, &w, &s, &b, group_size, bits).unwrap();
                assert_eq!(got.shape(), &[1, 5, 128]);
                assert_eq!(
                    max_diff(&got, &want(&u32_ids)),
                    0.0,
                    "{bits}-bit, group {group_size}, {:?} ids",
                    ids.dtype()
                );
            }
            let past = Array::from_slice(&[2u32, 40], &[2]);
            let got = embedding_rows(&past, &w, &s, &b, group_size, bits).unwrap();
            let got = got.as_slice::<f32>();
            assert!(got[..128].iter().all(|v| v.is_finite()));
            assert!(
                got[128..].iter().all(|v| v.is_nan()),
                "an id past the table"
            );
        }
    }
}
