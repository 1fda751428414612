//! The layers that hold a model's matrices and do their arithmetic:
//! [`Linear`] (dense or [`QuantizedWeight`]), [`FusedLinear`] and
//! [`Embedding`].
//!
//! A folder of its own, under both its users: `loading` builds these layers
//! from tensors (`TensorMap`) and `models` runs them in the forward pass.
//! Inside `models` they would make `loading`'s readers import upward, into
//! the folder that imports them; here both import downward. They depend on
//! nothing but `cpu` (afm's quantized-matmul primitive) and `error`.

mod embedding;
mod fused_linear;
mod linear;
mod quantized_weight;

pub use embedding::Embedding;
pub use fused_linear::FusedLinear;
pub use linear::Linear;
pub use quantized_weight::QuantizedWeight;
