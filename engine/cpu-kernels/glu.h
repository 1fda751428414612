// The gated activations of an MLP, act(gate) * up, for MLX's CPU backend.
//
// Why: MLX compiles this chain into a kernel that calls a scalar exp and
// libm's fmaf per element on x86 (the mlx-cpu wheel has no SIMD), ~9% of a
// decode step at 32 concurrent; its inputs are strided halves of the fused
// gate-and-up product, which MLX copies first. Here both halves are read
// where they lie, with a vectorized exp, on the shared thread pool. Every
// element is computed alone, so the result is batch-invariant.
#pragma once

#include <cstdint>

#include "qmm_affine.h"

namespace afm::glu {

enum class Act : int {
  Silu = 0, // x * sigmoid(x)
  GeluTanh = 1, // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
};

// out[r][i] = act(gate[r * gate_stride + i]) * up[r * up_stride + i] for
// r < rows, i < width; out is [rows, width] contiguous. Blocks until done.
void gated(Act act, const float* gate, int64_t gate_stride, const float* up, int64_t up_stride,
           int64_t rows, int64_t width, float* out, qmm::Path path = qmm::Path::Auto);

namespace detail {
// One row, width elements.
void row_scalar(Act act, const float* gate, const float* up, int64_t width, float* out);
void row_avx2(Act act, const float* gate, const float* up, int64_t width, float* out);
} // namespace detail

} // namespace afm::glu
