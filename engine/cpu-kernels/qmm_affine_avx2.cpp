// AVX2+FMA kernels. This file alone is compiled with -mavx2 -mfma -mf16c;
// the dispatcher only calls in after checking the CPU at run time.
//
// Per output (row m of x, row n of W) and group g, in k order:
//   d_g  = dot(x_g, q_g)         two 8-lane partial sums (even/odd elements)
//   acc += s_g * d_g             8 lanes, one FMA per group
// then y = bias + hsum(acc), where bias = Σ_g b_g * sum(x_g) uses the
// per-row group sums of x computed once per call: biases cost nothing in
// the inner loop, and the integer weights meet x unscaled.
//
// Measured on Zen 3 against the alternative of dequantizing each chunk
// (w = s*q + b, then FMA): the same speed from 4 rows of x up, ~20% faster
// for one row (decode), where the per-chunk dequantize is pure overhead.
//
// Every step is an explicit intrinsic in a fixed order; tiles over several
// rows of x or W repeat the same per-output sequence, so M, the tile shape
// and the thread split cannot change a result bit.
#include <immintrin.h>

#include <cstring>

#include "qmm_affine_impl.h"
#include "simd_avx2.h"

namespace afm::qmm::detail {
namespace {

template <int ST>
inline float load_scale(const void* p, int64_t i) {
  if constexpr (ST == int(ScaleType::F32)) {
    return static_cast<const float*>(p)[i];
  } else if constexpr (ST == int(ScaleType::F16)) {
    return _cvtsh_ss(static_cast<const uint16_t*>(p)[i]);
  } else {
    // bf16 is the top half of an f32.
    uint32_t bits = uint32_t(static_cast<const uint16_t*>(p)[i]) << 16;
    float f;
    std::memcpy(&f, &bits, sizeof f);
    return f;
  }
}

using simd::hsum8;

// Eight consecutive scales/biases from index i, widened to f32.
template <int ST>
inline __m256 load8(const void* p, int64_t i) {
  if constexpr (ST == int(ScaleType::F32)) {
    return _mm256_loadu_ps(static_cast<const float*>(p) + i);
  } else {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const uint16_t*>(p) + i));
    if constexpr (ST == int(ScaleType::F16)) return _mm256_cvtph_ps(h);
    else return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
}

// One 16-element chunk of a W row as two f32 vectors. For 4 bits, byte i
// holds elements 2i (low nibble) and 2i+1 (high nibble): widening 8 bytes to
// 8 int32 lanes and masking/shifting gives the even and the odd elements,
// which is why prepare_avx2 stores each 16-chunk of x as evens then odds.
template <int BITS>
inline void unpack16(const uint8_t* p, __m256& w0, __m256& w1) {
  if constexpr (BITS == 4) {
    __m256i v = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
    w0 = _mm256_cvtepi32_ps(_mm256_and_si256(v, _mm256_set1_epi32(0xF)));
    w1 = _mm256_cvtepi32_ps(_mm256_srli_epi32(v, 4));
  } else {
    w0 = _mm256_cvtepi32_ps(
        _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
    w1 = _mm256_cvtepi32_ps(
        _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + 8))));
  }
}

// How far ahead tiles prefetch their weights: whole rows, at least this
// many bytes. 4-8 KB all did about equally on a Zen 3 VM (coarse: the
// machine was shared); distances of a few rows did worse.
constexpr int64_t kPrefetchBytes = 6144;

// An MT x NT tile of outputs starting at (m0, n0). Three accumulators per
// output (two partial dots and the scaled sum) keep MT*NT <= 4 within the
// 16 ymm registers with the unpacked weights and the nibble mask; that
// gives 8 independent FMA chains, enough to cover the FMA latency.
template <int BITS, int G, int ST, int MT, int NT>
inline void tile(const Job& j, int64_t m0, int64_t n0) {
  constexpr int kChunks = G / 16;
  constexpr int kChunkBytes = 16 * BITS / 8;
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

  // Every loop over r, t and c is unrolled so the accumulators live in
  // registers; GCC otherwise keeps them in stack arrays.
  __m256 acc[MT][NT];
#pragma GCC unroll 8
  for (int r = 0; r < MT; ++r)
#pragma GCC unroll 8
    for (int t = 0; t < NT; ++t) acc[r][t] = _mm256_setzero_ps();

  for (int64_t g = 0; g < ng; ++g) {
    __m256 a0[MT][NT], a1[MT][NT];
#pragma GCC unroll 8
    for (int r = 0; r < MT; ++r)
#pragma GCC unroll 8
      for (int t = 0; t < NT; ++t) {
        a0[r][t] = _mm256_setzero_ps();
        a1[r][t] = _mm256_setzero_ps();
      }
    // Software prefetch of the same group some rows ahead: with several
    // short W rows read in lockstep (decode's 1x4 tile) the hardware
    // prefetchers see no long stream and DRAM latency is exposed (one
    // thread, 8-bit lm_head from DRAM: 3.8 GB/s without, ~8 with).
#pragma GCC unroll 8
    for (int t = 0; t < NT; ++t)
      for (int b = 0; b < G * BITS / 8; b += 64)
        _mm_prefetch(reinterpret_cast<const char*>(wr[t] + prefetch + g * (G * BITS / 8) + b),
                     _MM_HINT_T0);
#pragma GCC unroll 8
    for (int c = 0; c < kChunks; ++c) {
      const int64_t k0 = g * G + c * 16;
#pragma GCC unroll 8
      for (int t = 0; t < NT; ++t) {
        __m256 w0, w1;
        unpack16<BITS>(wr[t] + g * (G * BITS / 8) + c * kChunkBytes, w0, w1);
#pragma GCC unroll 8
        for (int r = 0; r < MT; ++r) {
          a0[r][t] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(xr[r] + k0), a0[r][t]);
          a1[r][t] = _mm256_fmadd_ps(w1, _mm256_loadu_ps(xr[r] + k0 + 8), a1[r][t]);
        }
      }
    }
#pragma GCC unroll 8
    for (int t = 0; t < NT; ++t) {
      const __m256 s = _mm256_set1_ps(load_scale<ST>(W.scales, (n0 + t) * ng + g));
#pragma GCC unroll 8
      for (int r = 0; r < MT; ++r)
        acc[r][t] = _mm256_fmadd_ps(s, _mm256_add_ps(a0[r][t], a1[r][t]), acc[r][t]);
    }
  }

  // Bias term: 8 groups at a time, then the remaining groups one by one,
  // every output's chain independent of the others.
  const int64_t xstride = xs_stride(ng);
  const int64_t ng8 = ng / 8 * 8;
  __m256 bv[MT][NT];
#pragma GCC unroll 8
  for (int r = 0; r < MT; ++r)
#pragma GCC unroll 8
    for (int t = 0; t < NT; ++t) bv[r][t] = _mm256_setzero_ps();
  for (int64_t g = 0; g < ng8; g += 8) {
#pragma GCC unroll 8
    for (int t = 0; t < NT; ++t) {
      const __m256 b = load8<ST>(W.biases, (n0 + t) * ng + g);
#pragma GCC unroll 8
      for (int r = 0; r < MT; ++r)
        bv[r][t] = _mm256_fmadd_ps(b, _mm256_loadu_ps(j.xs + (m0 + r) * xstride + g), bv[r][t]);
    }
  }
  __m128 bs[MT][NT];
#pragma GCC unroll 8
  for (int r = 0; r < MT; ++r)
#pragma GCC unroll 8
    for (int t = 0; t < NT; ++t) bs[r][t] = _mm_set_ss(hsum8(bv[r][t]));
  for (int64_t g = ng8; g < ng; ++g) {
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
      j.y[(m0 + r) * W.n + n0 + t] = _mm_cvtss_f32(bs[r][t]) + hsum8(acc[r][t]);
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
  for (int64_t nb = n0; nb < n1; nb += kRowBlock) {
    const int64_t ne = nb + kRowBlock < n1 ? nb + kRowBlock : n1;
    int64_t m = 0;
    // Four rows of x share each unpacked chunk of W.
    for (; m + 4 <= M; m += 4) tile_row<BITS, G, ST, 4, 1>(j, m, nb, ne);
    // The remaining rows take several W rows per tile instead, so even a
    // single row of x (decode) keeps 8 FMA chains in flight.
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
    case 16: return rows_st<BITS, 16>(j, n0, n1);
    case 32: return rows_st<BITS, 32>(j, n0, n1);
    case 64: return rows_st<BITS, 64>(j, n0, n1);
    case 128: return rows_st<BITS, 128>(j, n0, n1);
  }
}

} // namespace

const float* prepare_avx2(const float* x, int64_t m, const AffineMatrix& w,
                          float* xp_scratch, float* xs) {
  const int64_t K = w.k;
  const int G = w.group_size;
  const int64_t ng = K / G, stride = xs_stride(ng);
  for (int64_t r = 0; r < m; ++r) {
    const float* xr = x + r * K;
    for (int64_t g = 0; g < ng; ++g) {
      __m256 s = _mm256_loadu_ps(xr + g * G);
      for (int i = 8; i < G; i += 8) s = _mm256_add_ps(s, _mm256_loadu_ps(xr + g * G + i));
      xs[r * stride + g] = hsum8(s);
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
    for (int64_t c = 0; c < K; c += 16)
      for (int i = 0; i < 8; ++i) {
        pr[c + i] = xr[c + 2 * i];
        pr[c + 8 + i] = xr[c + 2 * i + 1];
      }
  }
  return xp_scratch;
}

void rows_avx2(const Job& j, int64_t n0, int64_t n1) {
  if (j.w->bits == 4) rows_g<4>(j, n0, n1);
  else rows_g<8>(j, n0, n1);
}

namespace {

// Rows n0..n1 of W as f32 (out: [n1 - n0, k]); w = s * q + b per group,
// one multiply and one add per value (no FMA: the same rounding as the
// portable path and as MLX's dequantize in f32).
template <int BITS, int ST>
void dequant(const AffineMatrix& W, int64_t n0, int64_t n1, float* out) {
  const int64_t k = W.k, ng = k / W.group_size;
  const int64_t row_bytes = k * BITS / 8;
  const uint8_t* base = reinterpret_cast<const uint8_t*>(W.w);
  for (int64_t n = n0; n < n1; ++n) {
    const uint8_t* row = base + n * row_bytes;
    float* o = out + (n - n0) * k;
    for (int64_t g = 0; g < ng; ++g) {
      const __m256 s = _mm256_set1_ps(load_scale<ST>(W.scales, n * ng + g));
      const __m256 b = _mm256_set1_ps(load_scale<ST>(W.biases, n * ng + g));
      for (int64_t c = g * W.group_size; c < (g + 1) * W.group_size; c += 16) {
        __m256 w0, w1;
        unpack16<BITS>(row + c * BITS / 8, w0, w1);
        if constexpr (BITS == 4) {
          // w0 holds the even elements, w1 the odd ones: interleave back.
          const __m256 lo = _mm256_unpacklo_ps(w0, w1), hi = _mm256_unpackhi_ps(w0, w1);
          w0 = _mm256_permute2f128_ps(lo, hi, 0x20);
          w1 = _mm256_permute2f128_ps(lo, hi, 0x31);
        }
        _mm256_storeu_ps(o + c, _mm256_add_ps(_mm256_mul_ps(s, w0), b));
        _mm256_storeu_ps(o + c + 8, _mm256_add_ps(_mm256_mul_ps(s, w1), b));
      }
    }
  }
}

template <int BITS>
void dequant_st(const AffineMatrix& W, int64_t n0, int64_t n1, float* out) {
  switch (W.scale_type) {
    case ScaleType::F32: return dequant<BITS, int(ScaleType::F32)>(W, n0, n1, out);
    case ScaleType::F16: return dequant<BITS, int(ScaleType::F16)>(W, n0, n1, out);
    case ScaleType::BF16: return dequant<BITS, int(ScaleType::BF16)>(W, n0, n1, out);
  }
}

} // namespace

void dequant_rows_avx2(const AffineMatrix& W, int64_t n0, int64_t n1, float* out) {
  if (W.bits == 4) dequant_st<4>(W, n0, n1, out);
  else dequant_st<8>(W, n0, n1, out);
}

} // namespace afm::qmm::detail
