//! Attention over keys and values where they lie in the batch KV store, on
//! the CPU: afm's `AfmAttention` MLX primitive (`cpu-kernels/attention*`).
//!
//! MLX's CPU attention on x86 is scalar where it costs: the softmax's `exp`
//! (prefill: heads x length² / 2 of them per layer), and a decode group whose
//! slots are not `0..n` first gathers every member's keys and values into a
//! new array with MLX's scalar `gather`. The primitive reads each query's own
//! slot in place, sees only that query's keys (causal, sliding window), and
//! vectorizes the softmax with AVX2 (with AVX-512, where the CPU has it,
//! rows that see the same keys go in tiles of 4 that share every key and
//! value load).
//!
//! Each output row is a fixed sequence of operations over its own query and
//! the keys it sees, so it is batch-invariant by construction: the same bits
//! in a decode group of 32 as alone, and in a prefill chunk as in decode.
//!
//! It rides on the quantized matmul's build and checks ([`qmm::path`]): where
//! that primitive is unavailable (Metal, another MLX, `AFM_QMM=off`) so is
//! this one, and `AFM_ATTENTION=off` turns it off alone. MLX's
//! `scaled_dot_product_attention` then runs instead.

use std::sync::OnceLock;

use mlx_rs::Array;

use super::qmm::Path;
use crate::error::Result;

/// Whether attention takes the primitive in this process (decided once).
pub fn path() -> &'static Path {
    static PATH: OnceLock<Path> = OnceLock::new();
    PATH.get_or_init(|| super::switched_path("AFM_ATTENTION"))
}

/// What the start-up log says of [`path`].
pub fn describe() -> String {
    match path() {
        Path::Primitive { kernel, threads } => format!(
            "afm attention ({} kernel, {threads} threads)",
            match *kernel {
                "portable" => kernel,
                "AVX-512" => "AVX-512 tiles (AVX2+FMA where a head is not 16 lanes)",
                _ => "AVX2+FMA",
            }
        ),
        Path::Unavailable(why) => format!("MLX's own ({why})"),
    }
}

/// `softmax(scale · q kᵀ) v` for each query over the keys it sees, lazily.
///
/// `q`: `[n, heads, l, d]`; `keys`, `values`: `[slots, kv_heads, capacity,
/// d]` f32 (a whole store buffer: nothing is copied). Item `i` reads slot
/// `slots[i]`; its query `j` sits at position `offsets[i] + j` and sees keys
/// `max(0, pos + 1 - window) ..= pos` (`window` `None`: from 0). Returns
/// `[n, l, heads, d]`. Only where [`path`] is the primitive.
pub fn attend(
    q: &Array,
    keys: &Array,
    values: &Array,
    slots: &[i32],
    offsets: &[i32],
    window: Option<usize>,
    scale: f32,
) -> Result<Array> {
    ffi::attend(
        q,
        keys,
        values,
        slots,
        offsets,
        window.unwrap_or(0) as i32,
        scale,
    )
}

#[cfg(not(target_os = "macos"))]
mod ffi {
    use std::ffi::{c_float, c_int};

    use mlx_rs::Array;
    use mlx_sys::{mlx_array, mlx_stream};

    use crate::error::{EngineError, Result};

    // cpu-kernels/primitive.h.
    extern "C" {
        fn afm_attention(
            res: *mut mlx_array,
            q: mlx_array,
            k: mlx_array,
            v: mlx_array,
            slots: *const i32,
            offsets: *const i32,
            n: c_int,
            window: c_int,
            scale: c_float,
            s: mlx_stream,
        ) -> c_int;
    }

    pub(super) fn attend(
        q: &Array,
        k: &Array,
        v: &Array,
        slots: &[i32],
        offsets: &[i32],
        window: i32,
        scale: f32,
    ) -> Result<Array> {
        if slots.len() != offsets.len() {
            return Err(EngineError::Internal(
                "attention: one offset per slot".into(),
            ));
        }
        // SAFETY: the handles come from live mlx-rs Arrays; `slots` and
        // `offsets` hold `n` values each and are copied before it returns.
        super::super::build_op(|res, s| unsafe {
            afm_attention(
                res,
                q.as_ptr(),
                k.as_ptr(),
                v.as_ptr(),
                slots.as_ptr(),
                offsets.as_ptr(),
                slots.len() as c_int,
                window,
                scale,
                s,
            )
        })
    }
}

#[cfg(target_os = "macos")]
mod ffi {
    use mlx_rs::Array;

    use crate::error::{EngineError, Result};

    pub(super) fn attend(
        _: &Array,
        _: &Array,
        _: &Array,
        _: &[i32],
        _: &[i32],
        _: i32,
        _: f32,
    ) -> Result<Array> {
        Err(EngineError::Unsupported(
            "afm's CPU attention on macOS".into(),
        ))
    }
}

#[cfg(all(test, not(target_os = "macos")))]
mod tests {
    use super::*;
    use crate::cpu::test_support::max_diff;
    use mlx_rs::fast::scaled_dot_product_attention;
    use mlx_rs::ops::indexing::IndexOp;
    use rand_core::{RngCore, SeedableRng};

    fn uniform(shape: &[i32], seed: u64) -> Array {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        let n: i32 = shape.iter().product();
        let v: Vec<f32> = (0..n)
            .map(|_| (rng.next_u32() >> 8) as f32 / (1u32 << 22) as f32 - 2.0)
            .collect();
        Array::from_slice(&v, shape)
    }

    /// MLX's attention of one item's queries `[1, heads, l, d]` at positions
    /// `offset..` over its slot, masked as the primitive sees:
    /// `[1, l, heads, d]`.
    fn reference(
        q: &Array,
        k: &Array,
        v: &Array,
        slot: i32,
        offset: usize,
        window: Option<usize>,
        scale: f32,
    ) -> Array {
        let l = q.dim(2) as usize;
        let end = offset + l;
        let ks = k.index((slot..slot + 1, .., 0..end as i32, ..));
        let vs = v.index((slot..slot + 1, .., 0..end as i32, ..));
        let mut mask = Vec::with_capacity(l * end);
        for pos in offset..end {
            let first = window.map_or(0, |w| (pos + 1).saturating_sub(w));
            mask.extend((0..end).map(|j| first <= j && j <= pos));
        }
        let mask = Array::from_slice(&mask, &[l as i32, end as i32]);
        scaled_dot_product_attention(q, ks, vs, scale, &mask, None)
            .unwrap()
            .transpose_axes(&[0, 2, 1, 3])
            .unwrap()
    }

    /// A decode group over slots out of order and a prefill chunk from an
    /// offset, with grouped heads, a sliding window or none, and head sizes
    /// on and off the SIMD paths' lanes, agree with MLX's attention; every
    /// item gives alone exactly what it gives in the group.
    #[test]
    fn matches_mlx_attention_and_each_item_is_independent_of_the_others() {
        assert!(path().is_primitive(), "{}", path());
        let (slots_n, kv_heads, heads, cap) = (5, 2, 6, 300);
        for d in [64, 12] {
            let k = uniform(&[slots_n, kv_heads, cap, d], 1);
            let v = uniform(&[slots_n, kv_heads, cap, d], 2);
            let scale = (d as f32).powf(-0.5);
            for window in [None, Some(37)] {
                // Decode: 3 items, slots 4, 0, 2 at positions 299, 0, 130.
                let (slots, offsets) = ([4, 0, 2], [299, 0, 130]);
                let q = uniform(&[3, heads, 1, d], 3);
                let got = attend(&q, &k, &v, &slots, &offsets, window, scale).unwrap();
                for i in 0..3 {
                    let qi = q.index(i as i32..i as i32 + 1);
                    let want = reference(&qi, &k, &v, slots[i], offsets[i] as usize, window, scale);
                    let gi = got.index(i as i32..i as i32 + 1);
                    let diff = max_diff(&gi, &want);
                    assert!(diff < 2e-5, "d {d} window {window:?} item {i}: {diff}");
                    let alone =
                        attend(&qi, &k, &v, &slots[i..=i], &offsets[i..=i], window, scale).unwrap();
                    assert_eq!(max_diff(&gi, &alone), 0.0, "item {i} alone differs");
                }
                // A prefill chunk of 45 queries from position 200 of slot 3.
                let q = uniform(&[1, heads, 45, d], 4);
                let got = attend(&q, &k, &v, &[3], &[200], window, scale).unwrap();
                let want = reference(&q, &k, &v, 3, 200, window, scale);
                let diff = max_diff(&got, &want);
                assert!(diff < 2e-5, "chunk d {d} window {window:?}: {diff}");
                // Its query 10 (position 210) as a decode step gives the same bits.
                let q10 = q.index((.., .., 10..11, ..));
                let step = attend(&q10, &k, &v, &[3], &[210], window, scale).unwrap();
                assert_eq!(max_diff(&got.index((.., 10..11)), &step), 0.0);
            }
        }
    }

    #[test]
    fn a_position_past_the_capacity_is_an_error() {
        let k = uniform(&[1, 1, 16, 8], 5);
        let q = uniform(&[1, 1, 1, 8], 6);
        let err = attend(&q, &k, &k, &[0], &[16], None, 1.0)
            .unwrap_err()
            .to_string();
        assert!(err.contains("capacity"), "{err}");
    }
}
