// The decoder layer of layer.h. Compiled without ISA flags: the per-row
// steps here are a small share of a step's time next to the products, which
// dispatch to their own SIMD kernels. Every formula follows the MLX op it
// replaces (mlx/fast.cpp's CPU fallbacks of rms_norm and rope), in f32 and
// in the same order, so the layer agrees with the op graph to rounding.
#include "layer.h"

#include <cmath>
#include <cstring>
#include <vector>

#include "attention.h"
#include "glu.h"

namespace afm::layer {
namespace {

// y = x * rsqrt(mean(x²) + eps) * w over one row of `width` (MLX's
// fallback: the mean, the reciprocal root, then two products).
void rms_norm_row(const float* x, const float* w, int64_t width, float eps, float* y) {
  float ss = 0.0f;
  for (int64_t i = 0; i < width; ++i) ss += x[i] * x[i];
  const float r = 1.0f / std::sqrt(ss / float(width) + eps);
  for (int64_t i = 0; i < width; ++i) y[i] = (x[i] * r) * w[i];
}

// RoPE's angles as mlx's fallback computes them: inv_freq_j = exp(-j ·
// log(base) / (d/2)), theta = pos · inv_freq_j, in f32. One row's cosines
// and sines serve all its heads (computing them per head cost a tenth of a
// prefill in exp, cos and sin).
void rope_angles(const float* inv_freq, int64_t half, float pos, float* cos_out, float* sin_out) {
  for (int64_t j = 0; j < half; ++j) {
    const float theta = pos * inv_freq[j];
    cos_out[j] = std::cos(theta);
    sin_out[j] = std::sin(theta);
  }
}

// RoPE over one head of `d` features: rotate-half (the first half against
// the second) or interleaved pairs.
void rope_head(float* x, int64_t d, const float* cos_j, const float* sin_j, bool traditional) {
  const int64_t half = d / 2;
  for (int64_t j = 0; j < half; ++j) {
    const float c = cos_j[j], s = sin_j[j];
    float* a = traditional ? x + 2 * j : x + j;
    float* b = traditional ? x + 2 * j + 1 : x + j + half;
    const float x1 = *a, x2 = *b;
    *a = x1 * c - x2 * s;
    *b = x1 * s + x2 * c;
  }
}

// Scratch of the calling (stream) thread, grown once and reused.
struct Scratch {
  std::vector<float> normed, qkv, attn, proj, gate_up, act, inv_freq, cos, sin;
};

Scratch& scratch() {
  thread_local Scratch s;
  return s;
}

void product(const float* x, int64_t rows, const qmm::AffineMatrix& w, float* y, int64_t blas_min_rows) {
  if (blas_min_rows > 0 && rows >= blas_min_rows && qmm::sgemm_available())
    qmm::matmul_dequant_sgemm(x, rows, w, y);
  else
    qmm::matmul(x, rows, w, y);
}

// Attention of items [from, to), whose rows start at row r0: one call for a
// run of decoding items (one query each), one per prefill chunk.
void attend_items(const Problem& p, const float* qkv, int64_t qkv_w, float* out, int64_t from, int64_t to,
                  int64_t r0) {
  const int64_t d = p.head_dim;
  const int64_t head_stride = p.capacity * d, slot_stride = p.kv_heads * head_stride;
  attn::Problem a{};
  const int64_t l = p.lens[from];
  // q read in place from the product's rows: (item, head, token, feature).
  a.q = {qkv + r0 * qkv_w, l * qkv_w, d, qkv_w};
  a.k = {p.keys, slot_stride, head_stride, d};
  a.v = {p.values, slot_stride, head_stride, d};
  a.slots = p.slots + from;
  a.offsets = p.offsets + from;
  a.n = to - from;
  a.heads = p.heads;
  a.kv_heads = p.kv_heads;
  a.l = l;
  a.d = d;
  a.capacity = p.capacity;
  a.window = p.window;
  a.scale = p.scale;
  a.out = out + r0 * p.heads * d;
  attn::attend(a);
}

} // namespace

void run(const Problem& p) {
  int64_t rows = 0;
  for (int64_t i = 0; i < p.n; ++i) rows += p.lens[i];
  if (rows == 0) return;
  const int64_t d = p.head_dim;
  const int64_t qw = p.heads * d, kvw = p.kv_heads * d;
  const int64_t qkv_w = qw + 2 * kvw;
  Scratch& s = scratch();
  s.normed.resize(size_t(rows * p.dim));
  s.qkv.resize(size_t(rows * qkv_w));
  s.attn.resize(size_t(rows * qw));
  s.proj.resize(size_t(rows * p.dim));
  s.gate_up.resize(size_t(rows * 2 * p.hidden));
  s.act.resize(size_t(rows * p.hidden));

  // Attention block.
  for (int64_t r = 0; r < rows; ++r)
    rms_norm_row(p.h + r * p.dim, p.attn_norm, p.dim, p.eps, s.normed.data() + r * p.dim);
  product(s.normed.data(), rows, p.qkv, s.qkv.data(), p.blas_min_rows);
  const int64_t head_stride = p.capacity * d, slot_stride = p.kv_heads * head_stride;
  const int64_t half = d / 2;
  s.inv_freq.resize(size_t(half));
  s.cos.resize(size_t(half));
  s.sin.resize(size_t(half));
  const float step = std::log(p.rope_base) / float(half);
  for (int64_t j = 0; j < half; ++j) s.inv_freq[size_t(j)] = std::exp(float(-j) * step);
  for (int64_t i = 0, r = 0; i < p.n; ++i)
    for (int64_t t = 0; t < p.lens[i]; ++t, ++r) {
      const int64_t pos = int64_t(p.offsets[i]) + t;
      float* row = s.qkv.data() + r * qkv_w;
      rope_angles(s.inv_freq.data(), half, float(pos), s.cos.data(), s.sin.data());
      // q heads then k heads: normed per head, then rotated.
      for (int64_t hh = 0; hh < p.heads + p.kv_heads; ++hh) {
        float* x = row + hh * d;
        if (p.q_norm) rms_norm_row(x, hh < p.heads ? p.q_norm : p.k_norm, d, p.qk_eps, x);
        rope_head(x, d, s.cos.data(), s.sin.data(), p.rope_traditional);
      }
      const float* k = row + qw;
      const float* v = row + qw + kvw;
      float* kd = p.keys + int64_t(p.slots[i]) * slot_stride + pos * d;
      float* vd = p.values + int64_t(p.slots[i]) * slot_stride + pos * d;
      for (int64_t g = 0; g < p.kv_heads; ++g) {
        std::memcpy(kd + g * head_stride, k + g * d, size_t(d) * sizeof(float));
        std::memcpy(vd + g * head_stride, v + g * d, size_t(d) * sizeof(float));
      }
    }
  // Every key is written before any query reads (a chunk's own keys).
  for (int64_t i = 0, r = 0; i < p.n;) {
    int64_t j = i + 1, len = p.lens[i];
    if (len == 1)
      while (j < p.n && p.lens[j] == 1) ++j;
    attend_items(p, s.qkv.data(), qkv_w, s.attn.data(), i, j, r);
    for (int64_t k = i; k < j; ++k) r += p.lens[k];
    i = j;
  }
  product(s.attn.data(), rows, p.o, s.proj.data(), p.blas_min_rows);
  for (int64_t r = 0; r < rows; ++r) {
    float* o = s.proj.data() + r * p.dim;
    if (p.attn_out_norm) rms_norm_row(o, p.attn_out_norm, p.dim, p.eps, o);
    const float* h = p.h + r * p.dim;
    float* out = p.h_out + r * p.dim;
    for (int64_t e = 0; e < p.dim; ++e) out[e] = h[e] + o[e];
  }

  // Feed-forward block.
  for (int64_t r = 0; r < rows; ++r)
    rms_norm_row(p.h_out + r * p.dim, p.ffn_norm, p.dim, p.eps, s.normed.data() + r * p.dim);
  product(s.normed.data(), rows, p.gate_up, s.gate_up.data(), p.blas_min_rows);
  glu::gated(glu::Act(p.act), s.gate_up.data(), 2 * p.hidden, s.gate_up.data() + p.hidden, 2 * p.hidden,
             rows, p.hidden, s.act.data());
  product(s.act.data(), rows, p.down, s.proj.data(), p.blas_min_rows);
  for (int64_t r = 0; r < rows; ++r) {
    float* o = s.proj.data() + r * p.dim;
    if (p.ffn_out_norm) rms_norm_row(o, p.ffn_out_norm, p.dim, p.eps, o);
    float* out = p.h_out + r * p.dim;
    for (int64_t e = 0; e < p.dim; ++e) out[e] += o[e];
  }
}

} // namespace afm::layer
