// AVX-512 kernels. This file alone is compiled with -mavx512f -mfma -mf16c;
// the dispatcher only calls in after checking the CPU at run time.
//
// Per output, in k order: two 16-lane chains (even and odd elements of each
// 32-element chunk for 4 bits, first and second half for 8) of
// acc += (s_g * q) * x, then y = bias + hsum16(acc0 + acc1), where the bias
// term is taken from the per-row group sums of x as in the AVX2 file.
//
// Unlike the AVX2 kernel, the group's scale goes onto the unpacked weights
// (one multiply per weight vector, shared by the tile's rows of x) instead
// of scaling a per-group partial dot: with 512-bit vectors only two ports
// take vector arithmetic, and the per-group add and multiply-add of every
// output cost as much as its multiply-adds for groups of 32. s_g * q is exact
// for f16 and bf16 scales (11 or 8 significant bits times an 8-bit integer).
// Measured on an AVX-512 Xeon (`benches/qmm.rs` with an 8192 x 640 matrix,
// Gemma 3's head): -14% at 8 and 32 rows for 8 bits, -16% for 4, the same at
// one row; with eight rows of x per tile where they fit in L1 (K <= 1024).
//
// Every tile shape repeats the same per-output sequence, so M, the tile
// shape and the thread split cannot change a result bit; results differ from
// the AVX2 path's by rounding (another summation order), and one process
// always takes one path.
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "qmm_affine_impl.h"
#include "simd_avx512.h"

namespace afm::qmm::detail {

using simd::hsum16;
namespace {

template <int ST>
inline float load_scale(const void* p, int64_t i) {
  if constexpr (ST == int(ScaleType::F32)) {
    return static_cast<const float*>(p)[i];
  } else if constexpr (ST == int(ScaleType::F16)) {
    return _cvtsh_ss(static_cast<const uint16_t*>(p)[i]);
  } else {
    uint32_t bits = uint32_t(static_cast<const uint16_t*>(p)[i]) << 16;
    float f;
    std::memcpy(&f, &bits, sizeof f);
    return f;
  }
}


// Sixteen consecutive scales/biases from index i, widened to f32.
template <int ST>
inline __m512 load16(const void* p, int64_t i) {
  if constexpr (ST == int(ScaleType::F32)) {
    return _mm512_loadu_ps(static_cast<const float*>(p) + i);
  } else {
    const __m256i h =
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(static_cast<const uint16_t*>(p) + i));
    if constexpr (ST == int(ScaleType::F16)) return _mm512_cvtph_ps(h);
    else return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
}

// One 32-element chunk of a W row as two f32 vectors: for 4 bits the even
// and the odd elements (16 bytes widened to 16 lanes, low and high nibbles;
// prepare_avx512 stores x per 32-chunk as evens then odds to match), for 8
// bits the two halves.
template <int BITS>
inline void unpack32(const uint8_t* p, __m512& w0, __m512& w1) {
  if constexpr (BITS == 4) {
    const __m512i v = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    w0 = _mm512_cvtepi32_ps(_mm512_and_si512(v, _mm512_set1_epi32(0xF)));
    w1 = _mm512_cvtepi32_ps(_mm512_srli_epi32(v, 4));
  } else {
    w0 = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
    w1 = _mm512_cvtepi32_ps(
        _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16))));
  }
}

constexpr int64_t kPrefetchBytes = 6144;

// An MT x NT tile of outputs from (m0, n0); see the AVX2 file for the shape
// of the loops. 32 zmm registers hold 3 accumulators for up to 8 outputs.
template <int BITS, int G, int ST, int MT, int NT>
inline void tile(const Job& j, int64_t m0, int64_t n0) {
  constexpr int kChunks = G / 32;
  constexpr int kChunkBytes = 32 * BITS / 8;
  const AffineMatrix& W = *j.w;
  const int64_t K = W.k;
  const int64_t ng = K / G;
  const int64_t row_bytes = K * BITS / 8;
  const uint8_t* wbase = reinterpret_cast<const uint8_t*>(W.w);
  const int64_t prefetch = (kPrefetchBytes + row_bytes - 1) / row_bytes * row_bytes;

  const uint8_t* wr[NT];
  for (int t = 0; t < NT; ++t) wr[t] = wbase + (n0 + t) * row_bytes;
  const float* xr[MT];
  for (int r = 0; r < MT; ++r) xr[r] = j.xp + (m0 + r) * K;

  // Two chains per output (the two vectors of each chunk) over the whole
  // row: the group's scale goes onto the unpacked weights (one multiply per
  // vector, shared by the MT rows of x), so a group costs the tile no
  // per-output work beyond its multiply-adds.
  __m512 acc0[MT][NT], acc1[MT][NT];
#pragma GCC unroll 8
  for (int r = 0; r < MT; ++r)
#pragma GCC unroll 8
    for (int t = 0; t < NT; ++t) {
      acc0[r][t] = _mm512_setzero_ps();
      acc1[r][t] = _mm512_setzero_ps();
    }

  for (int64_t g = 0; g < ng; ++g) {
#pragma GCC unroll 8
    for (int t = 0; t < NT; ++t)
      for (int b = 0; b < G * BITS / 8; b += 64)
        _mm_prefetch(reinterpret_cast<const char*>(wr[t] + prefetch + g * (G * BITS / 8) + b),
                     _MM_HINT_T0);
#pragma GCC unroll 8
    for (int t = 0; t < NT; ++t) {
      const __m512 s = _mm512_set1_ps(load_scale<ST>(W.scales, (n0 + t) * ng + g));
#pragma GCC unroll 8
      for (int c = 0; c < kChunks; ++c) {
        const int64_t k0 = g * G + c * 32;
        __m512 w0, w1;
        unpack32<BITS>(wr[t] + g * (G * BITS / 8) + c * kChunkBytes, w0, w1);
        w0 = _mm512_mul_ps(w0, s);
        w1 = _mm512_mul_ps(w1, s);
#pragma GCC unroll 8
        for (int r = 0; r < MT; ++r) {
          acc0[r][t] = _mm512_fmadd_ps(w0, _mm512_loadu_ps(xr[r] + k0), acc0[r][t]);
          acc1[r][t] = _mm512_fmadd_ps(w1, _mm512_loadu_ps(xr[r] + k0 + 16), acc1[r][t]);
        }
      }
    }
  }

  // Bias term: 16 groups at a time, then one by one.
  const int64_t xstride = xs_stride(ng);
  const int64_t ng16 = ng / 16 * 16;
  __m512 bv[MT][NT];
#pragma GCC unroll 8
  for (int r = 0; r < MT; ++r)
#pragma GCC unroll 8
    for (int t = 0; t < NT; ++t) bv[r][t] = _mm512_setzero_ps();
  for (int64_t g = 0; g < ng16; g += 16) {
#pragma GCC unroll 8
    for (int t = 0; t < NT; ++t) {
      const __m512 b = load16<ST>(W.biases, (n0 + t) * ng + g);
#pragma GCC unroll 8
      for (int r = 0; r < MT; ++r)
        bv[r][t] = _mm512_fmadd_ps(b, _mm512_loadu_ps(j.xs + (m0 + r) * xstride + g), bv[r][t]);
    }
  }
  __m128 bs[MT][NT];
#pragma GCC unroll 8
  for (int r = 0; r < MT; ++r)
#pragma GCC unroll 8
    for (int t = 0; t < NT; ++t) bs[r][t] = _mm_set_ss(hsum16(bv[r][t]));
  for (int64_t g = ng16; g < ng; ++g) {
#pragma GCC unroll 8
    for (int t = 0; t < NT; ++t) {
      const __m128 b = _mm_set_ss(load_scale<ST>(W.biases, (n0 + t) * ng + g));
#pragma GCC unroll 8
      for (int r = 0; r < MT; ++r)
        bs[r][t] = _mm_fmadd_ss(b, _mm_set_ss(j.xs[(m0 + r) * xstride + g]), bs[r][t]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < MT; ++r)
#pragma GCC unroll 8
    for (int t = 0; t < NT; ++t)
      j.y[(m0 + r) * W.n + n0 + t] = _mm_cvtss_f32(bs[r][t]) + hsum16(_mm512_add_ps(acc0[r][t], acc1[r][t]));
}

template <int BITS, int G, int ST, int MT, int NT>
inline void tile_row(const Job& j, int64_t m, int64_t nb, int64_t ne) {
  int64_t n = nb;
  for (; n + NT <= ne; n += NT) tile<BITS, G, ST, MT, NT>(j, m, n);
  for (; n < ne; ++n) tile<BITS, G, ST, MT, 1>(j, m, n);
}

template <int BITS, int G, int ST>
void rows(const Job& j, int64_t n0, int64_t n1) {
  const int64_t M = j.m;
  // A block of W rows (~96 KB, in L2) passes under each tile of x rows in
  // turn, so a tile of x stays in L1 for the whole block; with blocks of a
  // few rows the tiles of x evicted each other and came from L2 at every
  // multiply-add.
  const int64_t row_bytes = j.w->k * BITS / 8;
  const int64_t block = std::max<int64_t>(kRowBlock, std::min<int64_t>(512, (int64_t(96) << 10) / row_bytes));
  for (int64_t nb = n0; nb < n1; nb += block) {
    const int64_t ne = nb + block < n1 ? nb + block : n1;
    int64_t m = 0;
    // Eight rows of x share each unpacked chunk of W where their 8 * K
    // floats stay in L1 (otherwise four).
    if (j.w->k <= 1024)
      for (; m + 8 <= M; m += 8) tile_row<BITS, G, ST, 8, 1>(j, m, nb, ne);
    for (; m + 4 <= M; m += 4) tile_row<BITS, G, ST, 4, 1>(j, m, nb, ne);
    switch (M - m) {
      case 3: tile_row<BITS, G, ST, 3, 1>(j, m, nb, ne); break;
      case 2: tile_row<BITS, G, ST, 2, 2>(j, m, nb, ne); break;
      case 1: tile_row<BITS, G, ST, 1, 4>(j, m, nb, ne); break;
      default: break;
    }
  }
}

template <int BITS, int G>
void rows_st(const Job& j, int64_t n0, int64_t n1) {
  switch (j.w->scale_type) {
    case ScaleType::F32: return rows<BITS, G, int(ScaleType::F32)>(j, n0, n1);
    case ScaleType::F16: return rows<BITS, G, int(ScaleType::F16)>(j, n0, n1);
    case ScaleType::BF16: return rows<BITS, G, int(ScaleType::BF16)>(j, n0, n1);
  }
}

template <int BITS>
void rows_g(const Job& j, int64_t n0, int64_t n1) {
  switch (j.w->group_size) {
    case 32: return rows_st<BITS, 32>(j, n0, n1);
    case 64: return rows_st<BITS, 64>(j, n0, n1);
    case 128: return rows_st<BITS, 128>(j, n0, n1);
  }
}

} // namespace

const float* prepare_avx512(const float* x, int64_t m, const AffineMatrix& w, float* xp_scratch,
                            float* xs) {
  const int64_t K = w.k;
  const int G = w.group_size;
  const int64_t ng = K / G, stride = xs_stride(ng);
  for (int64_t r = 0; r < m; ++r) {
    const float* xr = x + r * K;
    for (int64_t g = 0; g < ng; ++g) {
      __m512 s = _mm512_loadu_ps(xr + g * G);
      for (int i = 16; i < G; i += 16) s = _mm512_add_ps(s, _mm512_loadu_ps(xr + g * G + i));
      xs[r * stride + g] = hsum16(s);
    }
    for (int64_t g = ng; g < stride; ++g) xs[r * stride + g] = 0.0f;
  }
  if (w.bits != 4) {
    std::memcpy(xp_scratch, x, size_t(m * K) * sizeof(float));
    return xp_scratch;
  }
  for (int64_t r = 0; r < m; ++r) {
    const float* xr = x + r * K;
    float* pr = xp_scratch + r * K;
    for (int64_t c = 0; c < K; c += 32)
      for (int i = 0; i < 16; ++i) {
        pr[c + i] = xr[c + 2 * i];
        pr[c + 16 + i] = xr[c + 2 * i + 1];
      }
  }
  return xp_scratch;
}

void rows_avx512(const Job& j, int64_t n0, int64_t n1) {
  if (j.w->bits == 4) rows_g<4>(j, n0, n1);
  else rows_g<8>(j, n0, n1);
}

} // namespace afm::qmm::detail
