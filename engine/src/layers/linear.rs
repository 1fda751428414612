//! The linear layer: `y = x W^T` over a dense or quantized matrix, with
//! the row-independent and row-block products batch-invariant mode needs.

use mlx_rs::ops::indexing::IndexOp;
use mlx_rs::ops::{broadcast_to, matmul, quantized_matmul};
use mlx_rs::Array;

use super::quantized_weight::QuantizedWeight;
use crate::cpu::qmm;
use crate::error::Result;

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

    /// The packed matrix, when afm's CPU primitive multiplies it.
    pub fn packed(&self) -> Option<&QuantizedWeight> {
        match self {
            Linear::Quantized(q) if q.runs_on_primitive() => Some(q),
            _ => None,
        }
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
