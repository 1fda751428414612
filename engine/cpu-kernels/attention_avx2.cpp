// The AVX2+FMA attention row. Compiled with -mavx2 -mfma; entered only
// after the run-time CPU check.
//
// One output row (a query of one head) in three passes over its visible
// keys, each in a fixed order that depends on nothing but the number of
// keys it sees:
//   scores  s_j = scale * (q · k_j): one 8-lane accumulator per key over d
//           in order, keys 8 at a time (8 independent chains), then each
//           accumulator summed by the same tree (hsum8), the tail too;
//   softmax e_j = exp(s_j - max), a vectorized exp (Cephes' polynomial), a
//           partial tail padded with -inf so every key takes the same exp;
//           their sum in 8 lanes, then hsum8;
//   values  o = (Σ_j e_j v_j) * (1 / sum), one FMA chain per output lane in
//           key order, 64, 32 or 8 lanes of d at a time.
#include <immintrin.h>

#include <cmath>

#include "attention_impl.h"
#include "simd_avx2.h"

namespace afm::attn::detail {
namespace {

using simd::exp256;
using simd::hmax8;
using simd::hsum8;
using simd::hsum8x4;

// o[0..8U) = (Σ_j w_j v_j[0..8U)) * inv, U accumulators.
template <int U>
inline void weighted_sum(const float* w, int64_t n, const float* v, int64_t vstride, float inv,
                         float* o) {
  __m256 a[U];
#pragma GCC unroll 8
  for (int u = 0; u < U; ++u) a[u] = _mm256_setzero_ps();
  for (int64_t j = 0; j < n; ++j) {
    const __m256 wj = _mm256_set1_ps(w[j]);
    const float* vj = v + j * vstride;
#pragma GCC unroll 8
    for (int u = 0; u < U; ++u) a[u] = _mm256_fmadd_ps(wj, _mm256_loadu_ps(vj + 8 * u), a[u]);
  }
  const __m256 s = _mm256_set1_ps(inv);
#pragma GCC unroll 8
  for (int u = 0; u < U; ++u) _mm256_storeu_ps(o + 8 * u, _mm256_mul_ps(a[u], s));
}

} // namespace

void row_avx2(const Problem& p, int64_t i, int64_t l, int64_t h, float* sc) {
  const int64_t D = p.d;
  const int64_t g = h / (p.heads / p.kv_heads);
  const float* q = p.q.data + i * p.q.s0 + h * p.q.s1 + l * p.q.s2;
  const Visible vis = visible(p, i, l);
  const int64_t n = vis.count;
  const float* k = p.k.data + int64_t(p.slots[i]) * p.k.s0 + g * p.k.s1 + vis.first * p.k.s2;
  const float* v = p.v.data + int64_t(p.slots[i]) * p.v.s0 + g * p.v.s1 + vis.first * p.v.s2;
  const int64_t ks = p.k.s2;

  // Scores.
  const __m128 scale4 = _mm_set1_ps(p.scale);
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    __m256 a[8];
#pragma GCC unroll 8
    for (int t = 0; t < 8; ++t) a[t] = _mm256_setzero_ps();
    for (int64_t e = 0; e < D; e += 8) {
      const __m256 qv = _mm256_loadu_ps(q + e);
#pragma GCC unroll 8
      for (int t = 0; t < 8; ++t)
        a[t] = _mm256_fmadd_ps(qv, _mm256_loadu_ps(k + (j + t) * ks + e), a[t]);
    }
    _mm_storeu_ps(sc + j, _mm_mul_ps(hsum8x4(a[0], a[1], a[2], a[3]), scale4));
    _mm_storeu_ps(sc + j + 4, _mm_mul_ps(hsum8x4(a[4], a[5], a[6], a[7]), scale4));
  }
  for (; j < n; ++j) {
    __m256 a = _mm256_setzero_ps();
    for (int64_t e = 0; e < D; e += 8)
      a = _mm256_fmadd_ps(_mm256_loadu_ps(q + e), _mm256_loadu_ps(k + j * ks + e), a);
    sc[j] = hsum8(a) * p.scale;
  }

  // Softmax weights, unnormalised.
  __m256 m8 = _mm256_set1_ps(-INFINITY);
  j = 0;
  for (; j + 8 <= n; j += 8) m8 = _mm256_max_ps(m8, _mm256_loadu_ps(sc + j));
  float max = hmax8(m8);
  for (; j < n; ++j) max = sc[j] > max ? sc[j] : max;
  const __m256 mv = _mm256_set1_ps(max);
  __m256 s8 = _mm256_setzero_ps();
  j = 0;
  for (; j + 8 <= n; j += 8) {
    const __m256 e = exp256(_mm256_sub_ps(_mm256_loadu_ps(sc + j), mv));
    _mm256_storeu_ps(sc + j, e);
    s8 = _mm256_add_ps(s8, e);
  }
  if (j < n) {
    alignas(32) float tail[8];
    for (int t = 0; t < 8; ++t) tail[t] = j + t < n ? sc[j + t] : -INFINITY;
    const __m256 e = exp256(_mm256_sub_ps(_mm256_load_ps(tail), mv));
    _mm256_store_ps(tail, e);
    for (int64_t t = 0; j + t < n; ++t) sc[j + t] = tail[t];
    s8 = _mm256_add_ps(s8, e);
  }
  const float inv = 1.0f / hsum8(s8);

  // Values.
  float* o = p.out + ((i * p.l + l) * p.heads + h) * D;
  const int64_t vs = p.v.s2;
  int64_t e = 0;
  for (; e + 64 <= D; e += 64) weighted_sum<8>(sc, n, v + e, vs, inv, o + e);
  for (; e + 32 <= D; e += 32) weighted_sum<4>(sc, n, v + e, vs, inv, o + e);
  for (; e + 8 <= D; e += 8) weighted_sum<1>(sc, n, v + e, vs, inv, o + e);
}

} // namespace afm::attn::detail
