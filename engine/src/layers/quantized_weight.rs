//! An MLX affine-quantized matrix as stored (packed values, per-group
//! scales and biases), and where it is multiplied: afm's CPU primitive
//! when it takes the format, else MLX.

use mlx_rs::ops::dequantize;
use mlx_rs::Array;

use crate::cpu::qmm;
use crate::error::Result;

/// An MLX affine-quantized matrix.
#[derive(Clone)]
pub struct QuantizedWeight {
    pub weight: Array,
    pub scales: Array,
    pub biases: Option<Array>,
    pub group_size: i32,
    pub bits: i32,
}

impl QuantizedWeight {
    /// Input size (columns of the dequantized matrix).
    pub fn in_features(&self) -> i32 {
        self.scales.dim(-1) * self.group_size
    }

    /// Whether afm's CPU primitive multiplies this matrix (else MLX's
    /// `quantized_matmul` does).
    pub(crate) fn runs_on_primitive(&self) -> bool {
        self.biases.is_some() && qmm::supports(self.bits, self.group_size, self.in_features())
    }

    /// The matrix as f32, exactly: `scale · q + bias` in f32. (MLX's
    /// `dequantize` computes in the scales' dtype, so f16 scales, as GGUF
    /// blocks and most checkpoints have, would round every weight to f16:
    /// up to 1.4e-3 off for 8-bit values.)
    pub fn dequantize(&self) -> Result<Array> {
        let biases = self
            .biases
            .as_ref()
            .map(|b| b.as_type::<f32>())
            .transpose()?;
        Ok(dequantize(
            &self.weight,
            &self.scales.as_type::<f32>()?,
            biases.as_ref(),
            self.group_size,
            self.bits,
        )?)
    }
}
