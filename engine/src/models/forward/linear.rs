//! Linear layers inside a forward pass. In batch-invariant mode the rows go
//! through every matmul in zero-padded blocks of [`ROW_BLOCK`], each block
//! its own product of identical shape, so a row's result never depends on
//! how many other rows share the call: BLAS kernels pick their code path,
//! and so the rounding, by shape. (One product over rows padded to a
//! multiple of 16 held for SmolLM2's shapes under OpenBLAS and BLIS but not
//! for small ones, where OpenBLAS takes its small-matrix kernels: measured
//! by the conformance runner on the mlx-lm reference models. Invariance
//! must not rest on a BLAS's size thresholds.)

use mlx_rs::ops::concatenate;
use mlx_rs::ops::indexing::IndexOp;
use mlx_rs::Array;

use crate::error::Result;
use crate::layers::{FusedLinear, Linear};

/// Rows per matmul call in batch-invariant mode (also the query-row block
/// of fixed-shape attention). Each block reads the weights once, so a pass
/// of `n` rows reads them `n / ROW_BLOCK` times.
pub(super) const ROW_BLOCK: i32 = 8;

/// `lin` applied to `x` (`[1, rows, in]`).
pub(super) fn apply(lin: &Linear, x: &Array, batch_invariant: bool) -> Result<Array> {
    if !batch_invariant {
        return lin.forward(x);
    }
    if lin.rows_independent() {
        return lin.forward_rows_independent(x);
    }
    let (rows, width) = (x.dim(1), x.dim(2));
    let blocked = pad_rows(&x.reshape(&[rows, width])?, ROW_BLOCK)?;
    let padded = blocked.dim(0);
    let y = lin.forward_row_blocks(&blocked.reshape(&[padded / ROW_BLOCK, ROW_BLOCK, width])?)?;
    Ok(y.reshape(&[1, padded, -1])?.index((.., 0..rows, ..)))
}

/// The parts of a fused projection, each `[1, rows, width]`; `groups`
/// merges adjacent parts (`[2, 1]`: q and k together, then v).
pub(super) fn apply_fused(
    lin: &FusedLinear,
    x: &Array,
    groups: Option<&[usize]>,
    batch_invariant: bool,
) -> Result<Vec<Array>> {
    let run = |l: &Linear, x: &Array| apply(l, x, batch_invariant);
    match groups {
        Some(g) => lin.forward_grouped(x, run, g),
        None => lin.forward_with(x, run),
    }
}

/// `x` (`[rows, width]`) with zero rows appended up to a multiple of `block`.
pub(super) fn pad_rows(x: &Array, block: i32) -> Result<Array> {
    let rows = x.dim(0);
    let padded = (rows + block - 1) / block * block;
    if padded == rows {
        return Ok(x.clone());
    }
    let zeros = Array::zeros::<f32>(&[padded - rows, x.dim(1)])?;
    Ok(concatenate(&[x.clone(), zeros], 0)?)
}
