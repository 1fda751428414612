// Routed experts of a mixture: y[r, j] = x[r] · dequantize(W[experts[r, j]])ᵀ
// for a stack of affine-quantized matrices (MLX's gather_qmm with the
// indices on the right-hand side), so the experts of a MoE stay packed on
// the CPU too (MLX's own CPU gather_qmm is the scalar loop).
//
// The (row, expert) pairs are grouped by expert so each expert's weights are
// read once per call for all the rows that chose it, then every group goes
// through qmm::matmul. A row's result for an expert is that kernel's, whose
// reduction order depends only on (bits, group_size, K): independent of which
// or how many other rows chose the same expert, unless a group of at least
// blas_min_rows (> 0) rows takes the dequantize-and-sgemm path.
#pragma once

#include <cstdint>

#include "qmm_affine.h"

namespace afm::qmm {

// `experts` matrices of one format laid end to end (MLX's [E, N, K*bits/32]
// weight and [E, N, K/group_size] scales and biases, row-major): `first`
// describes expert 0, and expert e starts e * n * k * bits / 32 words into
// w and e * n * (k / group_size) elements into scales and biases.
struct AffineStack {
  AffineMatrix first;
  int64_t experts;
};

// Expert e's matrix of the stack.
AffineMatrix expert(const AffineStack& w, int64_t e);

// x: [rows, k] f32; experts: [rows, per_row] expert ids; y: [rows, per_row,
// n] f32. An id outside [0, experts) gives a row of NaN (a kernel running in
// the stream's task cannot throw; the op's callers check ids where they
// can). Blocks until done.
void gather_matmul(const float* x, int64_t rows, const uint32_t* experts, int64_t per_row,
                   const AffineStack& w, float* y, int64_t blas_min_rows = 0, Path path = Path::Auto);

} // namespace afm::qmm
