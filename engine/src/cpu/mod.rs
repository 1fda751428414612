//! What the engine adds under MLX's CPU backend (Linux): the BLAS library's
//! thread count, and [`qmm`], a quantized matmul primitive that keeps
//! quantized weights packed (MLX's own is a scalar loop on x86). Depends on
//! nothing in the engine but its error type; `loading` calls it.

pub(crate) mod blas;
pub mod qmm;
