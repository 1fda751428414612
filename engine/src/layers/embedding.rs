//! The token embedding table: a lookup of rows, dequantizing only those.

use mlx_rs::ops::dequantize;
use mlx_rs::Array;

use super::linear::Linear;
use crate::cpu::qmm;
use crate::error::Result;

/// A token embedding table; doubles as the LM head when embeddings are tied.
#[derive(Clone)]
pub struct Embedding(pub Linear);

impl Embedding {
    /// Rows of the table for `ids` (any shape of u32/i32 ids).
    pub fn lookup(&self, ids: &Array) -> Result<Array> {
        Ok(match &self.0 {
            Linear::Dense(w) => w.take_axis(ids, 0)?,
            // One op on the CPU (MLX's take and dequantize are ~45 there),
            // the same values.
            Linear::Quantized(q) if q.runs_on_primitive() => qmm::embedding_rows(
                ids,
                &q.weight,
                &q.scales,
                q.biases.as_ref().expect("checked by runs_on_primitive"),
                q.group_size,
                q.bits,
            )?,
            Linear::Quantized(q) => {
                // The rows only, dequantized exactly as QuantizedWeight does.
                let rows = |a: &Array| a.take_axis(ids, 0);
                let f32_rows = |a: &Array| -> Result<Array> { Ok(rows(a)?.as_type::<f32>()?) };
                dequantize(
                    rows(&q.weight)?,
                    f32_rows(&q.scales)?,
                    q.biases.as_ref().map(f32_rows).transpose()?.as_ref(),
                    q.group_size,
                    q.bits,
                )?
            }
        })
    }

    /// Number of rows (the vocabulary size).
    pub fn rows(&self) -> i32 {
        match &self.0 {
            Linear::Dense(w) => w.dim(0),
            Linear::Quantized(q) => q.weight.dim(0),
        }
    }
}
