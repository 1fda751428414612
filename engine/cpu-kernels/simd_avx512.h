// AVX-512F helpers the kernel files built with -mavx512f share (over
// simd_avx2.h's). Include only
// from those files: everything here is inline code for that ISA, with
// internal linkage (no copy of it can be linked into another path).
#pragma once

#include <immintrin.h>

#include "simd_avx2.h"

namespace afm::simd {
namespace {

// The two 8-lane halves of v added, lane by lane.
inline __m256 fold16(__m512 v) {
  return _mm256_add_ps(_mm512_castps512_ps256(v),
                       _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
}

// hsum8's tree over fold16: every 16-lane sum of the AVX-512 files.
inline float hsum16(__m512 v) {
  return hsum8(fold16(v));
}

// e^x by exp256's steps and constants (simd_avx2.h), 16 lanes: the same
// values lane for lane.
inline __m512 exp512(__m512 x) {
  using namespace exp_poly;
  const __m512 lo = _mm512_set1_ps(kLo);
  const __mmask16 keep = _mm512_cmp_ps_mask(x, lo, _CMP_GE_OQ);
  x = _mm512_min_ps(_mm512_max_ps(x, lo), _mm512_set1_ps(kHi));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(kLog2e)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(kLn2Hi), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(kLn2Lo), r);
  __m512 y = _mm512_set1_ps(kP[0]);
  for (int c = 1; c < 6; ++c) y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(kP[c]));
  y = _mm512_fmadd_ps(y, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
  const __m512i e =
      _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23);
  return _mm512_maskz_mul_ps(keep, y, _mm512_castsi512_ps(e));
}

} // namespace
} // namespace afm::simd
