//! What the engine adds under MLX's CPU backend (Linux): the BLAS library's
//! thread count; [`qmm`], a quantized matmul primitive that keeps quantized
//! weights packed (MLX's own is a scalar loop on x86); [`attention`],
//! which reads the batch KV store in place with a vectorized softmax; and
//! [`glu`], the MLP's gated activation with a vectorized `exp`.
//! Depends on nothing in the engine but its error type; `loading` and
//! `models::forward` call it.

pub mod attention;
pub mod blas;
pub mod glu;
pub mod qmm;
