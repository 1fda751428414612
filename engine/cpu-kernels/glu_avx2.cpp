// The AVX2+FMA row of glu.h: act(x) = x / (1 + e^-z), z = x (SiLU) or
// 2 sqrt(2/pi) (x + 0.044715 x^3) (GELU's tanh form, since 1 + tanh(u) =
// 2 / (1 + e^-2u)), times up. A partial last vector is padded, so every
// element takes the same arithmetic.
#include <immintrin.h>

#include "glu.h"
#include "simd_avx2.h"

namespace afm::glu::detail {
namespace {

template <int ACT>
inline __m256 gated8(__m256 x, __m256 u) {
  __m256 z = x;
  if constexpr (ACT == int(Act::GeluTanh)) {
    const __m256 x3 = _mm256_mul_ps(_mm256_mul_ps(x, x), x);
    z = _mm256_mul_ps(_mm256_set1_ps(2.0f * 0.7978845608028654f),
                      _mm256_add_ps(x, _mm256_mul_ps(_mm256_set1_ps(0.044715f), x3)));
  }
  const __m256 e = simd::exp256(_mm256_sub_ps(_mm256_setzero_ps(), z));
  return _mm256_mul_ps(_mm256_div_ps(x, _mm256_add_ps(_mm256_set1_ps(1.0f), e)), u);
}

template <int ACT>
void row(const float* gate, const float* up, int64_t width, float* out) {
  int64_t i = 0;
  for (; i + 8 <= width; i += 8)
    _mm256_storeu_ps(out + i, gated8<ACT>(_mm256_loadu_ps(gate + i), _mm256_loadu_ps(up + i)));
  if (i < width) {
    alignas(32) float g[8] = {}, u[8] = {}, o[8];
    for (int64_t t = 0; i + t < width; ++t) {
      g[t] = gate[i + t];
      u[t] = up[i + t];
    }
    _mm256_store_ps(o, gated8<ACT>(_mm256_load_ps(g), _mm256_load_ps(u)));
    for (int64_t t = 0; i + t < width; ++t) out[i + t] = o[t];
  }
}

} // namespace

void row_avx2(Act act, const float* gate, const float* up, int64_t width, float* out) {
  if (act == Act::Silu) row<int(Act::Silu)>(gate, up, width, out);
  else row<int(Act::GeluTanh)>(gate, up, width, out);
}

} // namespace afm::glu::detail
