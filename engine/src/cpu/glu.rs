//! The gated activation of an MLP, `act(gate) * up`, on the CPU: afm's
//! `AfmGatedActivation` MLX primitive (`cpu-kernels/glu*`).
//!
//! MLX compiles `silu(gate) * up` into a kernel that calls a scalar `exp`
//! and libm's `fmaf` per element on x86 (~9% of a decode step at 32
//! concurrent), after copying the strided halves of the fused gate-and-up
//! product. The primitive reads both halves in place, vectorizes the `exp`
//! and runs on the shared thread pool. Elementwise, so batch-invariant.
//! Available where [`qmm::path`] is; `AFM_GLU=off` turns it off alone.

use std::sync::OnceLock;

use mlx_rs::Array;

use super::qmm::{self, Path};
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
    PATH.get_or_init(|| {
        if std::env::var("AFM_GLU").is_ok_and(|v| v == "off" || v == "0") {
            return Path::Unavailable("AFM_GLU=off".into());
        }
        qmm::path().clone()
    })
}

/// `act(gate) * up` (f32, one shape), lazily; only where [`path`] is the
/// primitive.
pub fn gated(gate: &Array, up: &Array, act: Act) -> Result<Array> {
    ffi::gated(gate, up, act as i32)
}

#[cfg(not(target_os = "macos"))]
mod ffi {
    use std::ffi::{c_char, c_int, CStr};

    use mlx_rs::Array;
    use mlx_sys::{mlx_array, mlx_array_new, mlx_stream};

    use crate::error::{EngineError, Result};

    // cpu-kernels/primitive.h.
    extern "C" {
        fn afm_gated_activation(
            res: *mut mlx_array,
            gate: mlx_array,
            up: mlx_array,
            act: c_int,
            s: mlx_stream,
        ) -> c_int;
        fn afm_qmm_last_error() -> *const c_char;
    }

    pub(super) fn gated(gate: &Array, up: &Array, act: i32) -> Result<Array> {
        // SAFETY: both handles come from live mlx-rs Arrays; `res` starts
        // empty and on success holds a new array that `Array::from_ptr`
        // owns. A NULL stream is the default CPU stream.
        unsafe {
            let mut res = mlx_array_new();
            let status = afm_gated_activation(
                &mut res,
                gate.as_ptr(),
                up.as_ptr(),
                act,
                mlx_stream {
                    ctx: std::ptr::null_mut(),
                },
            );
            if status != 0 {
                mlx_sys::mlx_array_free(res);
                let msg = CStr::from_ptr(afm_qmm_last_error()).to_string_lossy();
                return Err(EngineError::Mlx(msg.into_owned()));
            }
            Ok(Array::from_ptr(res))
        }
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
                let diff = got
                    .subtract(&want)
                    .unwrap()
                    .abs()
                    .unwrap()
                    .max(None)
                    .unwrap()
                    .item_exact::<f32>();
                assert!(diff <= 1e-6 * scale, "{act:?} width {width}: {diff}");
                let row = |a: &Array| a.index((.., 3..4, ..));
                let alone = gated(&row(&gate), &row(&up), act).unwrap();
                let same = row(&got).subtract(&alone).unwrap().abs().unwrap();
                assert_eq!(same.max(None).unwrap().item_exact::<f32>(), 0.0);
            }
        }
    }
}
