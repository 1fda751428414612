// AVX2+FMA helpers the kernel files built with -mavx2 -mfma share. Include
// only from those files: everything here is inline code for that ISA, with
// internal linkage (the AVX-512 files include it too, and their copies must
// not be linked into the AVX2 path).
#pragma once

#include <immintrin.h>

namespace afm::simd {
namespace {

// Fixed-order horizontal sum: halves, then pairs, then the last two lanes.
inline float hsum8(__m256 v) {
  __m128 lo = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  lo = _mm_add_ps(lo, _mm_movehl_ps(lo, lo));
  lo = _mm_add_ss(lo, _mm_shuffle_ps(lo, lo, 1));
  return _mm_cvtss_f32(lo);
}

// hsum8 of four vectors at once, each by exactly hsum8's tree.
inline __m128 hsum8x4(__m256 a0, __m256 a1, __m256 a2, __m256 a3) {
  __m128 b0 = _mm_add_ps(_mm256_castps256_ps128(a0), _mm256_extractf128_ps(a0, 1));
  __m128 b1 = _mm_add_ps(_mm256_castps256_ps128(a1), _mm256_extractf128_ps(a1, 1));
  __m128 b2 = _mm_add_ps(_mm256_castps256_ps128(a2), _mm256_extractf128_ps(a2, 1));
  __m128 b3 = _mm_add_ps(_mm256_castps256_ps128(a3), _mm256_extractf128_ps(a3, 1));
  _MM_TRANSPOSE4_PS(b0, b1, b2, b3); // b_e: lane e of every vector
  return _mm_add_ps(_mm_add_ps(b0, b2), _mm_add_ps(b1, b3));
}

inline float hmax8(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_shuffle_ps(m, m, 1));
  return _mm_cvtss_f32(m);
}

// exp256's and exp512's constants (one place: both must give the same
// values lane for lane): the clamp, log2(e), ln 2 split in two, and Cephes'
// degree-6 polynomial from the highest coefficient.
namespace exp_poly {
constexpr float kLo = -87.33654475f, kHi = 88.0f, kLog2e = 1.44269504088896341f;
constexpr float kLn2Hi = 0.693359375f, kLn2Lo = -2.12194440e-4f;
constexpr float kP[6] = {1.9875691500e-4f, 1.3981999507e-3f, 8.3334519073e-3f,
                         4.1665795894e-2f, 1.6666665459e-1f, 5.0000001201e-1f};
} // namespace exp_poly

// e^x within ~2 ulp: x = n ln2 + r, |r| <= ln2 / 2, Cephes' degree-6
// polynomial for e^r, times 2^n. Below ln(FLT_MIN) the result is 0 (as is
// exp(-inf), the padding of a partial vector); above 88 it is e^88.
inline __m256 exp256(__m256 x) {
  using namespace exp_poly;
  const __m256 lo = _mm256_set1_ps(kLo);
  const __m256 keep = _mm256_cmp_ps(x, lo, _CMP_GE_OQ);
  x = _mm256_min_ps(_mm256_max_ps(x, lo), _mm256_set1_ps(kHi));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(kLog2e)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(kLn2Hi), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(kLn2Lo), r);
  __m256 y = _mm256_set1_ps(kP[0]);
  for (int c = 1; c < 6; ++c) y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(kP[c]));
  y = _mm256_fmadd_ps(y, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
  const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_and_ps(_mm256_mul_ps(y, _mm256_castsi256_ps(e)), keep);
}

} // namespace
} // namespace afm::simd
