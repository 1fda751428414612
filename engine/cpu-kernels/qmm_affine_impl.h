// Shared between the dispatcher (qmm_affine.cpp) and the per-ISA kernel
// files, which are compiled with different target flags and so must not
// share inline code that depends on them.
#pragma once

#include <cstdint>

#include "qmm_affine.h"

namespace afm::qmm::detail {

// Rows of W are processed in blocks of this many so a block's packed weights
// stay in L1 while every row of x passes over them.
constexpr int64_t kRowBlock = 16;

struct Job {
  const float* xp; // x as the path wants it (see prepare_*), [m, k]
  const float* xs; // per-row, per-group sums of x, [m, xs_stride(k / group_size)]
  int64_t m;
  const AffineMatrix* w;
  float* y; // [m, n]
};

// Rows of xs are padded with zeros to a multiple of 8 groups so the bias
// term can be taken 8 groups at a time.
inline int64_t xs_stride(int64_t groups) {
  return (groups + 7) / 8 * 8;
}

// Fill xs (and xp when the path reorders x; returns the x to use).
const float* prepare_scalar(const float* x, int64_t m, const AffineMatrix& w,
                            float* xp_scratch, float* xs);
const float* prepare_avx2(const float* x, int64_t m, const AffineMatrix& w,
                          float* xp_scratch, float* xs);
const float* prepare_avx512(const float* x, int64_t m, const AffineMatrix& w,
                            float* xp_scratch, float* xs);

// Compute y[:, n0:n1].
void rows_scalar(const Job& job, int64_t n0, int64_t n1);
void rows_avx2(const Job& job, int64_t n0, int64_t n1);
void rows_avx512(const Job& job, int64_t n0, int64_t n1);

// Rows n0..n1 of W dequantized to f32 into out ([n1 - n0, k]), s * q + b.
void dequant_rows_scalar(const AffineMatrix& w, int64_t n0, int64_t n1, float* out);
void dequant_rows_avx2(const AffineMatrix& w, int64_t n0, int64_t n1, float* out);

} // namespace afm::qmm::detail
