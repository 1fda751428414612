//! Linear layers inside a forward pass. In batch-invariant mode the rows are
//! zero-padded to a multiple of [`ROW_MULTIPLE`] so a row's result never
//! depends on how many other rows share the call: BLAS kernels pick their
//! code path, and so the rounding, by shape (a row that falls in a partial
//! tile of the kernel is computed by other code), and an f32 GEMM whose row
//! count is a multiple of 16 computes each row alike whatever that count.
//! Measured, not assumed: with OpenBLAS a multiple of 8 differed at 32 rows,
//! 16 held at every batch the conformance runner tries (8 to 32); the
//! runner and `tests/batch_invariance.rs` fail where a BLAS breaks it. One
//! product reads the weights once, where a call per block of 8 rows read
//! them once per block. Quantized weights (Metal) keep one product per
//! block of [`ROW_BLOCK`] rows.

use mlx_rs::ops::concatenate;
use mlx_rs::ops::indexing::IndexOp;
use mlx_rs::Array;

use crate::error::Result;
use crate::loading::weights::{FusedLinear, Linear};

/// Rows per product of a quantized linear layer in batch-invariant mode,
/// and the query-row block of fixed-shape attention.
pub(super) const ROW_BLOCK: i32 = 8;

/// What batch-invariant mode pads a dense linear layer's rows to a
/// multiple of.
const ROW_MULTIPLE: i32 = 16;

/// `lin` applied to `x` (`[1, rows, in]`).
pub(super) fn apply(lin: &Linear, x: &Array, batch_invariant: bool) -> Result<Array> {
    if !batch_invariant {
        return lin.forward(x);
    }
    let (rows, width) = (x.dim(1), x.dim(2));
    let blocked = pad_rows(&x.reshape(&[rows, width])?, ROW_MULTIPLE)?;
    let padded = blocked.dim(0);
    let y = match lin {
        Linear::Dense(_) => lin.forward(&blocked.reshape(&[1, padded, width])?)?,
        Linear::Quantized(_) => lin
            .forward_row_blocks(&blocked.reshape(&[padded / ROW_BLOCK, ROW_BLOCK, width])?)?
            .reshape(&[1, padded, -1])?,
    };
    Ok(y.index((.., 0..rows, ..)))
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
