//! The Gated DeltaNet recurrence (Qwen3-Next, Qwen3.5) over a chunk as one
//! MLX primitive on the CPU: `AfmDeltaNet` (`cpu-kernels/delta_net*`).
//!
//! As MLX ops the recurrence is ~50 ops for the convolution, norms and
//! gates and ~10 more per token of the chunk, so a hybrid model's decode
//! step pays ~60 dispatches per recurrent layer and a prefill chunk of `l`
//! tokens ~10·l. The primitive runs the chunk in one call: the per-row
//! steps, then each (sequence, value head) pair's recurrence on the shared
//! pool. A sequence reads only its own rows and states in a fixed order,
//! so its result does not depend on the batch. It is part of the one-op
//! layer path ([`layer::path`](super::layer::path)): `AFM_LAYER=off`, or
//! Metal, keeps the op graph.

use mlx_rs::Array;

use crate::error::Result;

/// The recurrence's sizes.
#[derive(Debug, Clone, Copy)]
pub struct Dims {
    pub key_heads: usize,
    pub value_heads: usize,
    pub key_dim: usize,
    pub value_dim: usize,
}

/// The chunk `x` (`[n, l, conv_dim + 2 * value_heads]`: q, k, v, then b
/// and a) from the states `conv_state` (`[n, kernel - 1, conv_dim]`) and
/// `state` (`[n, value_heads, value_dim, key_dim]`), with the convolution
/// `conv_w` (`[kernel, conv_dim]`), `decay` (`exp(A_log)`) and `dt_bias`
/// (`[value_heads]`): `(y, conv_state, state)`, lazily, `y` being `[n, l,
/// value_heads * value_dim]`. Only where [`layer::path`](super::layer::path)
/// is the primitive.
pub fn delta_net(
    x: &Array,
    (conv_state, state): (&Array, &Array),
    conv_w: &Array,
    decay: &Array,
    dt_bias: &Array,
    dims: Dims,
) -> Result<(Array, Array, Array)> {
    ffi::delta_net(&[x, conv_state, state, conv_w, decay, dt_bias], dims)
}

#[cfg(not(target_os = "macos"))]
mod ffi {
    use std::ffi::c_int;

    use mlx_rs::Array;
    use mlx_sys::{mlx_array, mlx_stream};

    use super::Dims;
    use crate::error::Result;

    extern "C" {
        fn afm_delta_net(
            res: *mut mlx_array,
            inputs: *const mlx_array,
            n_inputs: c_int,
            key_heads: c_int,
            value_heads: c_int,
            key_dim: c_int,
            value_dim: c_int,
            s: mlx_stream,
        ) -> c_int;
    }

    pub(super) fn delta_net(inputs: &[&Array], d: Dims) -> Result<(Array, Array, Array)> {
        let handles: Vec<mlx_array> = inputs.iter().map(|a| a.as_ptr()).collect();
        // SAFETY: the handles come from live mlx-rs Arrays that outlive the
        // call; `res` holds three handles.
        let [y, conv, state] = crate::cpu::build_ops(|res, s| unsafe {
            afm_delta_net(
                res,
                handles.as_ptr(),
                handles.len() as c_int,
                d.key_heads as c_int,
                d.value_heads as c_int,
                d.key_dim as c_int,
                d.value_dim as c_int,
                s,
            )
        })?;
        Ok((y, conv, state))
    }
}

#[cfg(target_os = "macos")]
mod ffi {
    use mlx_rs::Array;

    use super::Dims;
    use crate::error::{EngineError, Result};

    pub(super) fn delta_net(_: &[&Array], _: Dims) -> Result<(Array, Array, Array)> {
        Err(EngineError::Unsupported(
            "afm's CPU Gated DeltaNet on macOS".into(),
        ))
    }
}

#[cfg(all(test, not(target_os = "macos")))]
mod tests {
    use super::*;
    use crate::cpu::layer::path;
    use crate::cpu::test_support::{max_diff, uniform};
    use mlx_rs::ops::indexing::IndexOp;

    const DIMS: Dims = Dims {
        key_heads: 2,
        value_heads: 4,
        key_dim: 16,
        value_dim: 8,
    };
    const KERNEL: usize = 4;
    const CONV: usize = 2 * 2 * 16 + 4 * 8;
    const WIDTH: usize = CONV + 2 * 4;

    /// A chunk's inputs: x, the two states and the weights.
    struct Case {
        x: Array,
        conv_state: Array,
        state: Array,
        conv_w: Array,
        decay: Array,
        dt_bias: Array,
    }

    impl Case {
        fn new(n: i32, l: i32) -> Case {
            let hv = DIMS.value_heads as i32;
            let (dv, dk) = (DIMS.value_dim as i32, DIMS.key_dim as i32);
            Case {
                x: uniform(&[n, l, WIDTH as i32], 2.0, 1),
                conv_state: uniform(&[n, KERNEL as i32 - 1, CONV as i32], 1.0, 2),
                state: uniform(&[n, hv, dv, dk], 0.5, 3),
                conv_w: uniform(&[KERNEL as i32, CONV as i32], 0.7, 4),
                decay: uniform(&[hv], 0.5, 5).add(Array::from_f32(0.6)).unwrap(),
                dt_bias: uniform(&[hv], 1.0, 6),
            }
        }

        fn run(&self) -> (Array, Array, Array) {
            let out = delta_net(
                &self.x,
                (&self.conv_state, &self.state),
                &self.conv_w,
                &self.decay,
                &self.dt_bias,
                DIMS,
            )
            .unwrap();
            mlx_rs::transforms::eval([&out.0, &out.1, &out.2]).unwrap();
            out
        }

        /// Sequence `s`'s chunk as plain f64 loops over the formulas of
        /// `models::gated_delta_net`: (y, conv state, state), flat.
        fn reference(&self, s: usize) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
            let f =
                |a: &Array| -> Vec<f64> { a.as_slice::<f32>().iter().map(|&v| v as f64).collect() };
            let l = self.x.dim(1) as usize;
            let (x, cs, st) = (f(&self.x), f(&self.conv_state), f(&self.state));
            let (w, decay, dt) = (f(&self.conv_w), f(&self.decay), f(&self.dt_bias));
            let Dims {
                key_heads: hk,
                value_heads: hv,
                key_dim: dk,
                value_dim: dv,
            } = DIMS;
            let keep = KERNEL - 1;
            let mut window: Vec<Vec<f64>> = (0..keep)
                .map(|j| cs[(s * keep + j) * CONV..][..CONV].to_vec())
                .collect();
            let mut state = st[s * hv * dv * dk..][..hv * dv * dk].to_vec();
            let mut y = Vec::new();
            let sig = |v: f64| 1.0 / (1.0 + (-v).exp());
            for t in 0..l {
                let row = &x[(s * l + t) * WIDTH..][..WIDTH];
                window.push(row[..CONV].to_vec());
                let w0 = window.len() - KERNEL;
                let mut c: Vec<f64> = (0..CONV)
                    .map(|ch| {
                        (0..KERNEL)
                            .map(|j| window[w0 + j][ch] * w[j * CONV + ch])
                            .sum()
                    })
                    .map(|v: f64| v * sig(v))
                    .collect();
                let norm = |v: &mut [f64], scale: f64| {
                    let r = 1.0
                        / (v.iter().map(|a| a * a).sum::<f64>() / dk as f64 + 1e-6 / dk as f64)
                            .sqrt();
                    v.iter_mut().for_each(|a| *a *= r * scale);
                };
                let inv = (dk as f64).powf(-0.5);
                for h in 0..hk {
                    norm(&mut c[h * dk..(h + 1) * dk], inv * inv);
                    norm(&mut c[(hk + h) * dk..(hk + h + 1) * dk], inv);
                }
                for h in 0..hv {
                    let kh = h / (hv / hk);
                    let q = &c[kh * dk..][..dk];
                    let k = &c[(hk + kh) * dk..][..dk];
                    let v = &c[2 * hk * dk + h * dv..][..dv];
                    let sp = (row[CONV + hv + h] + dt[h]).exp().ln_1p();
                    let g = (-decay[h] * sp).exp();
                    let beta = sig(row[CONV + h]);
                    let sh = &mut state[h * dv * dk..][..dv * dk];
                    sh.iter_mut().for_each(|a| *a *= g);
                    for i in 0..dv {
                        let srow = &mut sh[i * dk..][..dk];
                        let kv: f64 = srow.iter().zip(k).map(|(a, b)| a * b).sum();
                        let delta = (v[i] - kv) * beta;
                        srow.iter_mut().zip(k).for_each(|(a, b)| *a += b * delta);
                        y.push(srow.iter().zip(q).map(|(a, b)| a * b).sum());
                    }
                }
            }
            let conv: Vec<f64> = window[window.len() - keep..].concat();
            (y, conv, state)
        }
    }

    fn max_rel(got: &[f32], want: &[f64]) -> f64 {
        assert_eq!(got.len(), want.len());
        got.iter()
            .zip(want)
            .map(|(&a, &b)| (a as f64 - b).abs() / (1.0 + b.abs()))
            .fold(0.0, f64::max)
    }

    /// A decode group of three sequences and a prefill chunk of nine
    /// tokens against plain f64 loops: outputs and both new states agree
    /// to f32 rounding.
    #[test]
    fn matches_the_formulas() {
        assert!(path().is_primitive(), "{}", path());
        for (n, l) in [(3, 1), (1, 9), (2, 4)] {
            let case = Case::new(n, l);
            let (y, conv, state) = case.run();
            for s in 0..n as usize {
                let (want_y, want_conv, want_state) = case.reference(s);
                let si = s as i32;
                let slot = |a: &Array| a.index(si..si + 1).as_slice::<f32>().to_vec();
                let what = format!("n {n}, l {l}, sequence {s}");
                assert!(max_rel(&slot(&y), &want_y) < 1e-5, "{what}: y");
                assert!(
                    max_rel(&slot(&conv), &want_conv) < 1e-6,
                    "{what}: conv state"
                );
                assert!(max_rel(&slot(&state), &want_state) < 1e-5, "{what}: state");
            }
        }
    }

    /// Each sequence of a group is bit for bit what it gives alone.
    #[test]
    fn a_sequence_is_what_it_gives_alone() {
        let case = Case::new(3, 2);
        let (y, conv, state) = case.run();
        for s in 0..3 {
            let one = |a: &Array| a.index(s..s + 1);
            let alone = Case {
                x: one(&case.x),
                conv_state: one(&case.conv_state),
                state: one(&case.state),
                conv_w: case.conv_w.clone(),
                decay: case.decay.clone(),
                dt_bias: case.dt_bias.clone(),
            };
            let (y1, conv1, state1) = alone.run();
            assert_eq!(max_diff(&one(&y), &y1), 0.0, "sequence {s}: y");
            assert_eq!(max_diff(&one(&conv), &conv1), 0.0, "sequence {s}: conv");
            assert_eq!(max_diff(&one(&state), &state1), 0.0, "sequence {s}: state");
        }
    }

    /// Inputs of the wrong shape are an error naming what is wrong.
    #[test]
    fn a_bad_call_is_an_error_naming_it() {
        let case = Case::new(2, 1);
        let short = case.conv_state.index((.., 1.., ..));
        let err = delta_net(
            &case.x,
            (&short, &case.state),
            &case.conv_w,
            &case.decay,
            &case.dt_bias,
            DIMS,
        )
        .map(|_| ())
        .expect_err("refused")
        .to_string();
        assert!(err.contains("conv_state must be"), "{err}");
    }
}
