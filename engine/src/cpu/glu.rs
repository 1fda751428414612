//! The gated activation of an MLP, `act(gate) * up`, on the CPU: afm's
//! `AfmGatedActivation` MLX primitive (`cpu-kernels/glu*`).
//!
//! MLX compiles `silu(gate) * up` into a kernel that calls a scalar `exp`
//! and libm's `fmaf` per element on x86 (~9% of a decode step at 32
//! concurrent), after copying the strided halves of the fused gate-and-up
//! product. The primitive reads both halves in place, vectorizes the `exp`
//! and runs on the shared thread pool. Elementwise, so batch-invariant.
//! Available where [`super::qmm::path`] is; `AFM_GLU=off` turns it off
//! alone.

use std::sync::OnceLock;

use mlx_rs::Array;

use super::qmm::Path;
use crate::error::Result;

/// The activation applied to the gate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Act {
    Silu,
    /// GELU, tanh approximation.
    GeluTanh,
}

/// Whether gated activations take the primitive in this process.
pub fn path() -> &'static Path {
    static PATH: OnceLock<Path> = OnceLock::new();
    PATH.get_or_init(|| super::switched_path("AFM_GLU"))
}

/// `act(gate) * up` (f32, one shape), lazily; only where [`path`] is the
/// primitive.
pub fn gated(gate: &Array, up: &Array, act: Act) -> Result<Array> {
    ffi::gated(gate, up, act as i32)
}

#[cfg(not(target_os = "macos"))]
mod ffi {
    use std::ffi::c_int;

    use mlx_rs::Array;
    use mlx_sys::{mlx_array, mlx_stream};

    use crate::error::Result;

    // cpu-kernels/primitive.h.
    extern "C" {
        fn afm_gated_activation(
            res: *mut mlx_array,
            gate: mlx_array,
            up: mlx_array,
            act: c_int,
            s: mlx_stream,
        ) -> c_int;
    }

    pub(super) fn gated(gate: &Array, up: &Array, act: i32) -> Result<Array> {
        // SAFETY: both handles come from live mlx-rs Arrays.
        super::super::build_op(|res, s| unsafe {
            afm_gated_activation(res, gate.as_ptr(), up.as_ptr(), act, s)
        })
    }
}

#[cfg(target_os = "macos")]
mod ffi {
    use mlx_rs::Array;

    use crate::error::{EngineError, Result};

    pub(super) fn gated(_: &Array, _: &Array, _: i32) -> Result<Array> {
        Err(EngineError::Unsupported(
            "afm's CPU gated activation on macOS".into(),
        ))
    }
}

#[cfg(all(test, not(target_os = "macos")))]
mod tests {
    use super::*;
    use crate::cpu::test_support::max_diff;
    use mlx_rs::ops::indexing::IndexOp;

    /// Both activations agree with MLX's own over halves of a fused product
    /// (strided views), widths on and off the 8 lanes, with inputs that
    /// reach exp's clamps; a row gives alone what it gives among others.
    #[test]
    fn matches_mlx_on_strided_halves_and_rows_are_independent() {
        assert!(path().is_primitive(), "{}", path());
        for width in [64, 13] {
            let v: Vec<f32> = (0..7 * 2 * width)
                .map(|i| ((i * 37 % 101) as f32 - 50.0) * if i % 9 == 0 { 3.0 } else { 0.15 })
                .collect();
            let fused = Array::from_slice(&v, &[1, 7, 2 * width]);
            let (gate, up) = (
                fused.index((.., .., ..width)),
                fused.index((.., .., width..)),
            );
            for (act, want) in [
                (Act::Silu, mlx_rs::nn::silu(&gate).unwrap()),
                (Act::GeluTanh, mlx_rs::nn::gelu_approximate(&gate).unwrap()),
            ] {
                let want = want.multiply(&up).unwrap();
                let got = gated(&gate, &up, act).unwrap();
                let scale = want.abs().unwrap().max(None).unwrap().item_exact::<f32>();
                let diff = max_diff(&got, &want);
                assert!(diff <= 1e-6 * scale, "{act:?} width {width}: {diff}");
                let row = |a: &Array| a.index((.., 3..4, ..));
                let alone = gated(&row(&gate), &row(&up), act).unwrap();
                assert_eq!(max_diff(&row(&got), &alone), 0.0, "{act:?} row 3 alone");
            }
        }
    }
}
