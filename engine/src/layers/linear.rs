//! The linear layer: `y = x W^T` over a dense or quantized matrix, with
//! the row-independent and row-block products batch-invariant mode needs.

use mlx_rs::ops::indexing::IndexOp;
use mlx_rs::ops::{broadcast_to, matmul, pad, quantized_matmul};
use mlx_rs::{Array, Dtype};

use super::quantized_weight::QuantizedWeight;
use crate::cpu::qmm;
use crate::device::{Device, Kind};
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
            Linear::Dense(w) => dense_product(x, w, Device::current().kind)?,
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

/// The rows of a float32 batch that MLX's CPU backend multiplies fastest:
/// OpenBLAS's kernel works in blocks of 16 rows, and a batch of 4 to 64
/// rows that is not a multiple of 16 costs more than the next multiple
/// (SmolLM2's gate/up product: 8 rows 747 us, 12 rows 1,281 us, 16 rows
/// 571 us; `scripts/speed/reference/blas_rows.py`). 1 to 3 rows are faster
/// as they are, and large prefills were not measured.
fn blas_rows(rows: i32) -> i32 {
    if (4..=64).contains(&rows) {
        (rows + 15) / 16 * 16
    } else {
        rows
    }
}

/// `x W^T` for a dense `W`. On the CPU a float32 batch is padded with zero
/// rows to [`blas_rows`] and cut back after: rows are independent in the
/// product, so the real rows are what they are in a batch of that size.
/// GPUs take the product as it is.
fn dense_product(x: &Array, w: &Array, device: Kind) -> Result<Array> {
    let shape = x.shape().to_vec();
    let rows: i32 = shape[..shape.len() - 1].iter().product();
    let padded = blas_rows(rows);
    if device != Kind::Cpu || w.dtype() != Dtype::Float32 || padded == rows {
        return Ok(matmul(x, w.t())?);
    }
    let inp = shape[shape.len() - 1];
    let flat = x.reshape(&[rows, inp])?;
    let y = matmul(
        pad(&flat, &[(0, padded - rows), (0, 0)], None, None)?,
        w.t(),
    )?;
    let mut out = shape;
    *out.last_mut().expect("x has a row axis") = w.dim(0);
    Ok(y.index(0..rows).reshape(&out)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use mlx_rs::ops::{abs, max};

    #[test]
    fn rows_go_to_the_next_multiple_of_16_from_4_to_64() {
        let got: Vec<i32> = [1, 3, 4, 8, 12, 16, 17, 31, 64, 65, 512]
            .iter()
            .map(|&r| blas_rows(r))
            .collect();
        assert_eq!(got, [1, 3, 16, 16, 16, 16, 32, 32, 64, 65, 512]);
    }

    #[test]
    fn a_padded_product_is_the_product_of_the_real_rows() {
        // Fixed pseudo-random values (MLX's random ops seed from a clock
        // this platform lacks).
        let values =
            |n: usize, k: f32| -> Vec<f32> { (0..n).map(|i| (i as f32 * k).sin() * 2.0).collect() };
        let w = Array::from_slice(&values(48 * 32, 0.37), &[48, 32]);
        let x = Array::from_slice(&values(2 * 5 * 32, 0.11), &[2, 5, 32]);
        let padded = dense_product(&x, &w, Kind::Cpu).unwrap();
        assert_eq!(padded.shape(), &[2, 5, 48]);
        let plain = matmul(&x, w.t()).unwrap();
        let diff = max(abs(padded.subtract(&plain).unwrap()).unwrap(), None)
            .unwrap()
            .item_exact::<f32>();
        assert!(diff < 1e-4, "padded and plain differ by {diff}");
    }
}
