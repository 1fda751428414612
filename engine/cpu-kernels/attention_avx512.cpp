// The AVX-512F attention rows, for heads whose size is a multiple of 16.
// Compiled with -mavx512f (and AVX2+FMA); entered only after the run-time
// CPU check.
//
// Why not attention_avx2.cpp in wider lanes: its rows each take their own
// pass over the keys, so per score it spends as many loads and horizontal
// sums as multiply-adds, and 16 lanes halved only the multiply-adds (69
// against 66 GFLOP/s, bench_attention at a depth of 8,000). Here the rows
// of a task that see the same first key (every row without a sliding
// window; a position's heads with one) go in tiles of up to 4, which share
// each key and value load:
//   scores  a tile's 4 rows x 4 keys at a time: one 16-lane accumulator per
//           (row, key) over d in order, then all 16 summed at once by one
//           shuffle tree that adds every accumulator's lanes in the same
//           association (lanes j + 8, then j + 4, then (0 + 2) + (1 + 3)),
//           times scale;
//   softmax per row: e_j = exp(s_j - max) by exp512, 16 at a time from its
//           first key, a partial tail masked to exp(-inf) = 0; their sum in
//           16 lanes, folded, summed by hsum8's tree;
//   values  a tile's rows over each key: one FMA chain per output lane in
//           key order, 64 or 16 lanes of d at a time.
// A tile runs to its longest row's last key: a shorter row's scores past
// its own keys land in the scratch's slack and its weights there are set to
// exactly 0, and acc + 0 * v is acc. So each row's bits depend on its own
// query, keys and values alone, whatever tile it is in: batch invariance as
// on the AVX2 path (with other bits than that path's).
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "attention_impl.h"
#include "simd_avx512.h"

namespace afm::attn::detail {

using simd::exp512;
using simd::hsum16;

namespace {

// Keys per block: every tile of the task runs over a block before the next,
// so the block's keys (16 KiB at d = 64) stay in L1 while they read it.
constexpr int64_t kKeyBlock = 64;
constexpr int kTileRows = 4;

struct Row {
  const float* q;
  int64_t first, n; // visible keys: absolute first, count
  float* sc; // scores of keys first.., then weights
  float* acc; // unnormalised output, d floats
  float inv;
};

// Rows [r0, r0 + rows) of a task, all seeing keys from `first`, the longest
// to `end` (absolute, exclusive).
struct Tile {
  int64_t r0, rows, first, end;
};

// Lanes j and j + 8 of x and of y added: [x's 8 sums, y's 8 sums].
inline __m512 fold_pair(__m512 x, __m512 y) {
  return _mm512_add_ps(_mm512_shuffle_f32x4(x, y, _MM_SHUFFLE(1, 0, 1, 0)),
                       _mm512_shuffle_f32x4(x, y, _MM_SHUFFLE(3, 2, 3, 2)));
}

// The four rows' accumulators of one key, each to 4 lanes (j + 4 added):
// block b holds row b's.
inline __m512 fold_key(const __m512* a) {
  const __m512 z0 = fold_pair(a[0], a[1]), z1 = fold_pair(a[2], a[3]);
  return _mm512_add_ps(_mm512_shuffle_f32x4(z0, z1, _MM_SHUFFLE(2, 0, 2, 0)),
                       _mm512_shuffle_f32x4(z0, z1, _MM_SHUFFLE(3, 1, 3, 1)));
}

// Scores of keys j..j+3 for the tile's R rows (keys past `last` read key
// `last` instead: their scores are slack). a[t][r]: key t, row r.
template <int R>
inline void score_group(Row* const* rows, const float* k0, int64_t ks, int64_t D, int64_t j,
                        int64_t last, int64_t first, __m512 scale) {
  const float* kp[4];
#pragma GCC unroll 4
  for (int t = 0; t < 4; ++t) kp[t] = k0 + std::min(j + t, last) * ks;
  __m512 a[4][kTileRows];
#pragma GCC unroll 4
  for (int t = 0; t < 4; ++t)
#pragma GCC unroll 4
    for (int r = 0; r < kTileRows; ++r) a[t][r] = _mm512_setzero_ps();
  for (int64_t e = 0; e < D; e += 16) {
    __m512 qv[R];
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) qv[r] = _mm512_loadu_ps(rows[r]->q + e);
#pragma GCC unroll 4
    for (int t = 0; t < 4; ++t) {
      const __m512 kv = _mm512_loadu_ps(kp[t] + e);
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) a[t][r] = _mm512_fmadd_ps(qv[r], kv, a[t][r]);
    }
  }
  // Z_t: block r = row r's 4 partial sums of key t; then per block, a 4x4
  // transpose-add: lane t of block r = row r's score of key t.
  const __m512 z0 = fold_key(a[0]), z1 = fold_key(a[1]), z2 = fold_key(a[2]),
               z3 = fold_key(a[3]);
  const __m512 u0 = _mm512_add_ps(_mm512_unpacklo_ps(z0, z1), _mm512_unpackhi_ps(z0, z1));
  const __m512 u1 = _mm512_add_ps(_mm512_unpacklo_ps(z2, z3), _mm512_unpackhi_ps(z2, z3));
  const __m512 s = _mm512_mul_ps(
      _mm512_add_ps(_mm512_shuffle_ps(u0, u1, _MM_SHUFFLE(1, 0, 1, 0)),
                    _mm512_shuffle_ps(u0, u1, _MM_SHUFFLE(3, 2, 3, 2))),
      scale);
  const int64_t at = j - first;
  _mm_storeu_ps(rows[0]->sc + at, _mm512_castps512_ps128(s));
  if constexpr (R > 1) _mm_storeu_ps(rows[1]->sc + at, _mm512_extractf32x4_ps(s, 1));
  if constexpr (R > 2) _mm_storeu_ps(rows[2]->sc + at, _mm512_extractf32x4_ps(s, 2));
  if constexpr (R > 3) _mm_storeu_ps(rows[3]->sc + at, _mm512_extractf32x4_ps(s, 3));
}

template <int R>
void scores_block(Row* const* rows, const float* k0, int64_t ks, int64_t D, int64_t j0,
                  int64_t j1, int64_t last, int64_t first, __m512 scale) {
  for (int64_t j = j0; j < j1; j += 4) score_group<R>(rows, k0, ks, D, j, last, first, scale);
}

// acc[0..16U) of each of the R rows += Σ_{j in [j0, j1)} w_j v_j[e..e+16U).
template <int R, int U>
void values_block(Row* const* rows, const float* v0, int64_t vs, int64_t e, int64_t j0,
                  int64_t j1, int64_t first) {
  __m512 a[R][U];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int u = 0; u < U; ++u) a[r][u] = _mm512_loadu_ps(rows[r]->acc + e + 16 * u);
  for (int64_t j = j0; j < j1; ++j) {
    const float* vj = v0 + j * vs + e;
    __m512 vv[U];
#pragma GCC unroll 4
    for (int u = 0; u < U; ++u) vv[u] = _mm512_loadu_ps(vj + 16 * u);
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const __m512 w = _mm512_set1_ps(rows[r]->sc[j - first]);
#pragma GCC unroll 4
      for (int u = 0; u < U; ++u) a[r][u] = _mm512_fmadd_ps(w, vv[u], a[r][u]);
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int u = 0; u < U; ++u) _mm512_storeu_ps(rows[r]->acc + e + 16 * u, a[r][u]);
}

template <int R>
void values_all(Row* const* rows, const float* v0, int64_t vs, int64_t D, int64_t j0, int64_t j1,
                int64_t first) {
  int64_t e = 0;
  for (; e + 64 <= D; e += 64) values_block<R, 4>(rows, v0, vs, e, j0, j1, first);
  for (; e < D; e += 16) values_block<R, 1>(rows, v0, vs, e, j0, j1, first);
}

// Turns r's scores into unnormalised softmax weights; keeps 1 / their sum.
void softmax(Row& r) {
  const int64_t n = r.n;
  float* sc = r.sc;
  __m512 m16 = _mm512_set1_ps(-INFINITY);
  int64_t j = 0;
  for (; j + 16 <= n; j += 16) m16 = _mm512_max_ps(m16, _mm512_loadu_ps(sc + j));
  if (j < n) {
    const __mmask16 tail = __mmask16((1u << (n - j)) - 1);
    m16 = _mm512_max_ps(m16, _mm512_mask_loadu_ps(_mm512_set1_ps(-INFINITY), tail, sc + j));
  }
  const __m512 mv = _mm512_set1_ps(_mm512_reduce_max_ps(m16));
  __m512 s16 = _mm512_setzero_ps();
  j = 0;
  for (; j + 16 <= n; j += 16) {
    const __m512 e = exp512(_mm512_sub_ps(_mm512_loadu_ps(sc + j), mv));
    _mm512_storeu_ps(sc + j, e);
    s16 = _mm512_add_ps(s16, e);
  }
  if (j < n) {
    const __mmask16 tail = __mmask16((1u << (n - j)) - 1);
    const __m512 x = _mm512_mask_loadu_ps(_mm512_set1_ps(-INFINITY), tail, sc + j);
    const __m512 e = exp512(_mm512_sub_ps(x, mv));
    _mm512_mask_storeu_ps(sc + j, tail, e);
    s16 = _mm512_add_ps(s16, e);
  }
  r.inv = 1.0f / hsum16(s16);
}

} // namespace

void rows_avx512(const Problem& p, int64_t i, int64_t l0, int64_t l1, int64_t g, float* scores,
                 float* acc) {
  const int64_t D = p.d;
  const int64_t rep = p.heads / p.kv_heads;
  const int64_t ks = p.k.s2, vs = p.v.s2;
  const int64_t stride = score_stride(p);
  const float* k0 = p.k.data + int64_t(p.slots[i]) * p.k.s0 + g * p.k.s1;
  const float* v0 = p.v.data + int64_t(p.slots[i]) * p.v.s0 + g * p.v.s1;
  thread_local std::vector<Row> rows;
  thread_local std::vector<Tile> tiles;
  rows.resize(size_t((l1 - l0) * rep));
  tiles.clear();
  int64_t nr = 0, lo = INT64_MAX, hi = 0;
  for (int64_t l = l0; l < l1; ++l) {
    const Visible vis = visible(p, i, l);
    for (int64_t h = g * rep; h < (g + 1) * rep; ++h, ++nr) {
      Row& r = rows[nr];
      r.q = p.q.data + i * p.q.s0 + h * p.q.s1 + l * p.q.s2;
      r.first = vis.first;
      r.n = vis.count;
      r.sc = scores + nr * stride;
      r.acc = acc + nr * D;
      for (int64_t e = 0; e < D; ++e) r.acc[e] = 0.0f;
      lo = std::min(lo, r.first);
      hi = std::max(hi, r.first + r.n);
      if (tiles.empty() || tiles.back().rows == kTileRows || tiles.back().first != r.first)
        tiles.push_back({nr, 0, r.first, 0});
      Tile& t = tiles.back();
      ++t.rows;
      t.end = std::max(t.end, r.first + r.n);
    }
  }
  Row* ptrs[kTileRows];
  auto rows_of = [&](const Tile& t) {
    for (int64_t r = 0; r < t.rows; ++r) ptrs[r] = &rows[size_t(t.r0 + r)];
    return static_cast<Row* const*>(ptrs);
  };
  const __m512 scale = _mm512_set1_ps(p.scale);
  const int64_t b_lo = lo / kKeyBlock * kKeyBlock;
  for (int64_t b = b_lo; b < hi; b += kKeyBlock)
    for (const Tile& t : tiles) {
      const int64_t j0 = std::max(b, t.first), j1 = std::min(b + kKeyBlock, t.end);
      if (j0 >= j1) continue;
      Row* const* rs = rows_of(t);
      const int64_t last = t.end - 1;
      switch (t.rows) {
        case 1: scores_block<1>(rs, k0, ks, D, j0, j1, last, t.first, scale); break;
        case 2: scores_block<2>(rs, k0, ks, D, j0, j1, last, t.first, scale); break;
        case 3: scores_block<3>(rs, k0, ks, D, j0, j1, last, t.first, scale); break;
        default: scores_block<4>(rs, k0, ks, D, j0, j1, last, t.first, scale); break;
      }
    }
  for (const Tile& t : tiles)
    for (int64_t x = t.r0; x < t.r0 + t.rows; ++x) {
      Row& r = rows[size_t(x)];
      softmax(r);
      // Weights 0 over the keys its tile reads past its own.
      std::fill(r.sc + r.n, r.sc + (t.end - t.first), 0.0f);
    }
  for (int64_t b = b_lo; b < hi; b += kKeyBlock)
    for (const Tile& t : tiles) {
      const int64_t j0 = std::max(b, t.first), j1 = std::min(b + kKeyBlock, t.end);
      if (j0 >= j1) continue;
      Row* const* rs = rows_of(t);
      switch (t.rows) {
        case 1: values_all<1>(rs, v0, vs, D, j0, j1, t.first); break;
        case 2: values_all<2>(rs, v0, vs, D, j0, j1, t.first); break;
        case 3: values_all<3>(rs, v0, vs, D, j0, j1, t.first); break;
        default: values_all<4>(rs, v0, vs, D, j0, j1, t.first); break;
      }
    }
  for (int64_t t = 0; t < nr; ++t) {
    const int64_t l = l0 + t / rep, h = g * rep + t % rep;
    float* o = p.out + ((i * p.l + l) * p.heads + h) * D;
    const __m512 s = _mm512_set1_ps(rows[size_t(t)].inv);
    for (int64_t e = 0; e < D; e += 16)
      _mm512_storeu_ps(o + e, _mm512_mul_ps(_mm512_loadu_ps(rows[size_t(t)].acc + e), s));
  }
}

} // namespace afm::attn::detail
