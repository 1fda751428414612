// The AVX2+FMA attention rows. Compiled with -mavx2 -mfma; entered only
// after the run-time CPU check.
//
// Each output row (a query of one head) is computed in three passes over its
// visible keys, each in a fixed order that depends on nothing but the number
// of keys it sees:
//   scores  s_j = scale * (q · k_j): one 8-lane accumulator per key over d
//           in order, keys 8 at a time (8 independent chains), then each
//           accumulator summed by the same tree (hsum8), the tail too;
//   softmax e_j = exp(s_j - max), a vectorized exp (Cephes' polynomial), a
//           partial tail padded with -inf so every key takes the same exp;
//           their sum in 8 lanes, then hsum8;
//   values  o = (Σ_j e_j v_j) * (1 / sum), one FMA chain per output lane in
//           key order, 64, 32 or 8 lanes of d at a time.
//
// The rows of one call share their keys and values (one item, one KV head:
// the query heads of a group, at several positions), so the scores and
// values passes walk the keys in blocks of kKeyBlock and run every row over
// a block before the next: the block stays in L1 while the rows read it,
// where a row on its own would stream the whole range from L3 (at 6,700
// keys that streaming held attention to ~86% of a prefill chunk's time).
// Blocking reorders work between rows, never within one: a row's
// accumulators are stored and reloaded between blocks (exact), so each row
// gets the same bits as alone.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "attention_impl.h"
#include "simd_avx2.h"

namespace afm::attn::detail {

using simd::exp256;
using simd::hmax8;
using simd::hsum8;
using simd::hsum8x4;

namespace {

constexpr int64_t kKeyBlock = 64;

// One row's part of a rows_avx2 call.
struct Row {
  const float* q;
  const float* k; // its first visible key
  const float* v;
  int64_t first, n; // visible keys: absolute first, count
  float* sc; // its scores, then weights
  float* acc; // its unnormalised output, d floats
  int64_t j; // cursor: the next key of the pass under way
  float inv;
};

// Scores of r's keys from its cursor up to `end` (relative): whole groups of
// 8 (the last may run past `end`), then single keys past the last group.
inline void scores_upto(Row& r, int64_t D, int64_t ks, __m128 scale4, float scale, int64_t end) {
  const int64_t whole = r.n / 8 * 8;
  for (; r.j < whole && r.j < end; r.j += 8) {
    __m256 a[8];
#pragma GCC unroll 8
    for (int t = 0; t < 8; ++t) a[t] = _mm256_setzero_ps();
    for (int64_t e = 0; e < D; e += 8) {
      const __m256 qv = _mm256_loadu_ps(r.q + e);
#pragma GCC unroll 8
      for (int t = 0; t < 8; ++t)
        a[t] = _mm256_fmadd_ps(qv, _mm256_loadu_ps(r.k + (r.j + t) * ks + e), a[t]);
    }
    _mm_storeu_ps(r.sc + r.j, _mm_mul_ps(hsum8x4(a[0], a[1], a[2], a[3]), scale4));
    _mm_storeu_ps(r.sc + r.j + 4, _mm_mul_ps(hsum8x4(a[4], a[5], a[6], a[7]), scale4));
  }
  for (; r.j < end; ++r.j) {
    __m256 a = _mm256_setzero_ps();
    for (int64_t e = 0; e < D; e += 8)
      a = _mm256_fmadd_ps(_mm256_loadu_ps(r.q + e), _mm256_loadu_ps(r.k + r.j * ks + e), a);
    r.sc[r.j] = hsum8(a) * scale;
  }
}

// Turns r's scores into unnormalised softmax weights; keeps 1 / their sum.
inline void softmax(Row& r) {
  const int64_t n = r.n;
  float* sc = r.sc;
  __m256 m8 = _mm256_set1_ps(-INFINITY);
  int64_t j = 0;
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
  r.inv = 1.0f / hsum8(s8);
}

// acc[0..8U) += Σ_{j in [j0, j1)} w_j v_j[0..8U), U accumulators, key order.
template <int U>
inline void weighted_sum(const float* w, int64_t j0, int64_t j1, const float* v, int64_t vstride,
                         float* acc) {
  __m256 a[U];
#pragma GCC unroll 8
  for (int u = 0; u < U; ++u) a[u] = _mm256_loadu_ps(acc + 8 * u);
  for (int64_t j = j0; j < j1; ++j) {
    const __m256 wj = _mm256_set1_ps(w[j]);
    const float* vj = v + j * vstride;
#pragma GCC unroll 8
    for (int u = 0; u < U; ++u) a[u] = _mm256_fmadd_ps(wj, _mm256_loadu_ps(vj + 8 * u), a[u]);
  }
#pragma GCC unroll 8
  for (int u = 0; u < U; ++u) _mm256_storeu_ps(acc + 8 * u, a[u]);
}

// r's values from its cursor up to `end` (relative), every lane of d.
inline void values_upto(Row& r, int64_t D, int64_t vs, int64_t end) {
  int64_t e = 0;
  for (; e + 64 <= D; e += 64) weighted_sum<8>(r.sc, r.j, end, r.v + e, vs, r.acc + e);
  for (; e + 32 <= D; e += 32) weighted_sum<4>(r.sc, r.j, end, r.v + e, vs, r.acc + e);
  for (; e + 8 <= D; e += 8) weighted_sum<1>(r.sc, r.j, end, r.v + e, vs, r.acc + e);
  r.j = end;
}

} // namespace

void rows_avx2(const Problem& p, int64_t i, int64_t l0, int64_t l1, int64_t g, float* scores,
               float* acc) {
  const int64_t D = p.d;
  const int64_t rep = p.heads / p.kv_heads;
  const int64_t ks = p.k.s2, vs = p.v.s2;
  const float* k0 = p.k.data + int64_t(p.slots[i]) * p.k.s0 + g * p.k.s1;
  const float* v0 = p.v.data + int64_t(p.slots[i]) * p.v.s0 + g * p.v.s1;
  thread_local std::vector<Row> rows;
  rows.resize(size_t((l1 - l0) * rep));
  int64_t nr = 0, lo = INT64_MAX, hi = 0;
  for (int64_t l = l0; l < l1; ++l) {
    const Visible vis = visible(p, i, l);
    for (int64_t h = g * rep; h < (g + 1) * rep; ++h, ++nr) {
      Row& r = rows[nr];
      r.q = p.q.data + i * p.q.s0 + h * p.q.s1 + l * p.q.s2;
      r.k = k0 + vis.first * ks;
      r.v = v0 + vis.first * vs;
      r.first = vis.first;
      r.n = vis.count;
      r.sc = scores + nr * p.capacity;
      r.acc = acc + nr * D;
      r.j = 0;
      for (int64_t e = 0; e < D; ++e) r.acc[e] = 0.0f;
      lo = std::min(lo, r.first);
      hi = std::max(hi, r.first + r.n);
    }
  }
  // Relative end of block [.., b1) for r.
  auto end_in = [](const Row& r, int64_t b1) { return std::clamp(b1 - r.first, int64_t(0), r.n); };

  const __m128 scale4 = _mm_set1_ps(p.scale);
  for (int64_t b = lo / kKeyBlock * kKeyBlock; b < hi; b += kKeyBlock)
    for (int64_t t = 0; t < nr; ++t)
      scores_upto(rows[t], D, ks, scale4, p.scale, end_in(rows[t], b + kKeyBlock));
  for (int64_t t = 0; t < nr; ++t) {
    softmax(rows[t]);
    rows[t].j = 0;
  }
  for (int64_t b = lo / kKeyBlock * kKeyBlock; b < hi; b += kKeyBlock)
    for (int64_t t = 0; t < nr; ++t) values_upto(rows[t], D, vs, end_in(rows[t], b + kKeyBlock));

  for (int64_t t = 0; t < nr; ++t) {
    const int64_t l = l0 + t / rep, h = g * rep + t % rep;
    float* o = p.out + ((i * p.l + l) * p.heads + h) * D;
    const __m256 s = _mm256_set1_ps(rows[t].inv);
    for (int64_t e = 0; e < D; e += 8)
      _mm256_storeu_ps(o + e, _mm256_mul_ps(_mm256_loadu_ps(rows[t].acc + e), s));
  }
}

} // namespace afm::attn::detail
