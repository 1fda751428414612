// The decoder layer of layer.h. Compiled without ISA flags: the per-row
// steps here are a small share of a step's time next to the products, which
// dispatch to their own SIMD kernels. Every formula follows the MLX op it
// replaces (mlx/fast.cpp's CPU fallbacks of rms_norm and rope), in f32 and
// in the same order, so the layer agrees with the op graph to rounding.
#include "layer.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <vector>

#include "attention.h"
#include "delta_net.h"
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

// The same without a weight (Gemma 4's value norm): y = x * rsqrt(...).
void rms_norm_row(float* x, int64_t width, float eps) {
  float ss = 0.0f;
  for (int64_t i = 0; i < width; ++i) ss += x[i] * x[i];
  const float r = 1.0f / std::sqrt(ss / float(width) + eps);
  for (int64_t i = 0; i < width; ++i) x[i] = x[i] * r;
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

// RoPE over the first `d` features of a head: rotate-half (the first half against
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
  // K = V: one row's values, copied from its keys before their norm.
  std::vector<float> values;
  // The recurrence's input rows (q, k, v, b, a).
  std::vector<float> recur_in;
  // Routed experts: the router's logits and probabilities, each (row,
  // choice) pair's weight and output, one expert's gathered rows and their
  // gate, up and down.
  std::vector<float> logits, probs, weights, pair_out, xg, gate, up, down;
  // The shared expert's gate values, one per row.
  std::vector<float> shared_gate;
  // Gemma 4's MoE: the dense MLP's normed output.
  std::vector<float> dense;
  std::vector<uint32_t> chosen;
  std::vector<int64_t> start, next, order;
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

// The gated MLP (gate_up, down; `hidden` wide) over `rows` normed rows
// into s.proj.
void gated_mlp(const Problem& p, Scratch& s, int64_t rows, int64_t hidden) {
  s.gate_up.resize(size_t(rows * 2 * hidden));
  s.act.resize(size_t(rows * hidden));
  product(s.normed.data(), rows, p.gate_up, s.gate_up.data(), p.blas_min_rows);
  glu::gated(glu::Act(p.act), s.gate_up.data(), 2 * hidden, s.gate_up.data() + hidden, 2 * hidden, rows, hidden,
             s.act.data());
  product(s.act.data(), rows, p.down, s.proj.data(), p.blas_min_rows);
}

// One row's choice of experts from its router logits (`experts` of them):
// softmax as MLX's precise CPU softmax (exp(x - max), times 1 / sum), the
// top_k by probability (ties to the lower id), their weights optionally
// renormalised over the k.
void route_row(const float* logits, int64_t experts, int64_t top_k, bool norm_topk, float* probs,
               uint32_t* chosen, float* weights) {
  float top = logits[0];
  for (int64_t e = 1; e < experts; ++e) top = std::max(top, logits[e]);
  float sum = 0.0f;
  for (int64_t e = 0; e < experts; ++e) sum += probs[e] = std::exp(logits[e] - top);
  const float inv = 1.0f / sum;
  for (int64_t e = 0; e < experts; ++e) probs[e] *= inv;
  thread_local std::vector<uint32_t> ids;
  ids.resize(size_t(experts));
  std::iota(ids.begin(), ids.end(), 0u);
  std::partial_sort(ids.begin(), ids.begin() + top_k, ids.end(),
                    [&](uint32_t a, uint32_t b) { return probs[a] > probs[b] || (probs[a] == probs[b] && a < b); });
  float total = 0.0f;
  for (int64_t j = 0; j < top_k; ++j) {
    chosen[j] = ids[size_t(j)];
    total += weights[j] = probs[ids[size_t(j)]];
  }
  if (norm_topk)
    for (int64_t j = 0; j < top_k; ++j) weights[j] /= total;
}

// Gemma 4's choice for one row from its router scores: the top_k scores
// (ties to the lower id), weighed by the softmax over those k (MLX's
// precise softmax, as route_row) times each chosen expert's scale.
void gemma_route_row(const float* logits, int64_t experts, int64_t top_k, const float* scale, uint32_t* chosen,
                     float* weights) {
  thread_local std::vector<uint32_t> ids;
  ids.resize(size_t(experts));
  std::iota(ids.begin(), ids.end(), 0u);
  std::partial_sort(ids.begin(), ids.begin() + top_k, ids.end(), [&](uint32_t a, uint32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  });
  const float top = logits[ids[0]];
  float sum = 0.0f;
  for (int64_t j = 0; j < top_k; ++j) {
    chosen[j] = ids[size_t(j)];
    sum += weights[j] = std::exp(logits[chosen[j]] - top);
  }
  const float inv = 1.0f / sum;
  for (int64_t j = 0; j < top_k; ++j) weights[j] = (weights[j] * inv) * scale[chosen[j]];
}

// The shared expert over `rows` normed rows, added to the routed sum in
// s.proj: routed + down(act(gate) * up) * sigmoid(g), in the engine's op
// graph's order (models/sparse_moe.rs).
void shared_expert(const Problem& p, Scratch& s, int64_t rows) {
  const int64_t sh = p.shared_hidden;
  s.gate_up.resize(size_t(rows * 2 * sh));
  s.act.resize(size_t(rows * sh));
  s.down.resize(size_t(rows * p.dim));
  s.shared_gate.resize(size_t(rows));
  product(s.normed.data(), rows, p.shared_gate_up, s.gate_up.data(), p.blas_min_rows);
  glu::gated(glu::Act(p.act), s.gate_up.data(), 2 * sh, s.gate_up.data() + sh, 2 * sh, rows, sh, s.act.data());
  product(s.act.data(), rows, p.shared_down, s.down.data(), p.blas_min_rows);
  product(s.normed.data(), rows, p.shared_gate, s.shared_gate.data(), p.blas_min_rows);
  for (int64_t r = 0; r < rows; ++r) {
    const float g = 1.0f / (1.0f + std::exp(-s.shared_gate[size_t(r)]));
    float* o = s.proj.data() + r * p.dim;
    const float* y = s.down.data() + r * p.dim;
    for (int64_t x = 0; x < p.dim; ++x) o[x] = o[x] + y[x] * g;
  }
}

// The chosen experts (s.chosen, s.weights: top_k per row) over `rows`
// normed rows into s.proj: the (row, choice) pairs grouped by expert, a
// row's output its choices' outputs weighted and summed in choice order.
void expert_sum(const Problem& p, Scratch& s, int64_t rows) {
  const int64_t e_n = p.experts, k = p.top_k, pairs = rows * k;
  // Counting sort of the pairs by expert (stable: rows keep their order).
  s.start.assign(size_t(e_n) + 1, 0);
  for (int64_t q = 0; q < pairs; ++q) ++s.start[size_t(s.chosen[size_t(q)]) + 1];
  int64_t largest = 0;
  for (int64_t e = 0; e < e_n; ++e) {
    largest = std::max(largest, s.start[size_t(e) + 1]);
    s.start[size_t(e) + 1] += s.start[size_t(e)];
  }
  s.order.resize(size_t(pairs));
  s.next.assign(s.start.begin(), s.start.end() - 1);
  for (int64_t q = 0; q < pairs; ++q) s.order[size_t(s.next[s.chosen[size_t(q)]]++)] = q;
  const int64_t hid = p.hidden;
  s.xg.resize(size_t(largest * p.dim));
  s.gate.resize(size_t(largest * hid));
  s.up.resize(size_t(largest * hid));
  s.act.resize(size_t(largest * hid));
  s.pair_out.resize(size_t(pairs * p.dim));
  s.down.resize(size_t(largest * p.dim));
  for (int64_t e = 0; e < e_n; ++e) {
    const int64_t b = s.start[size_t(e)], c = s.start[size_t(e) + 1] - b;
    if (c == 0) continue;
    for (int64_t i = 0; i < c; ++i)
      std::memcpy(s.xg.data() + i * p.dim, s.normed.data() + (s.order[size_t(b + i)] / k) * p.dim,
                  size_t(p.dim) * sizeof(float));
    product(s.xg.data(), c, qmm::expert(p.expert_gate, e), s.gate.data(), p.blas_min_rows);
    product(s.xg.data(), c, qmm::expert(p.expert_up, e), s.up.data(), p.blas_min_rows);
    glu::gated(glu::Act(p.act), s.gate.data(), hid, s.up.data(), hid, c, hid, s.act.data());
    product(s.act.data(), c, qmm::expert(p.expert_down, e), s.down.data(), p.blas_min_rows);
    for (int64_t i = 0; i < c; ++i)
      std::memcpy(s.pair_out.data() + s.order[size_t(b + i)] * p.dim, s.down.data() + i * p.dim,
                  size_t(p.dim) * sizeof(float));
  }
  for (int64_t r = 0; r < rows; ++r) {
    float* o = s.proj.data() + r * p.dim;
    for (int64_t x = 0; x < p.dim; ++x) o[x] = 0.0f;
    for (int64_t j = 0; j < k; ++j) {
      const float w = s.weights[size_t(r * k + j)];
      const float* y = s.pair_out.data() + (r * k + j) * p.dim;
      for (int64_t x = 0; x < p.dim; ++x) o[x] += y[x] * w;
    }
  }
}

// Routed experts over `rows` normed rows into s.proj: each row's top_k
// experts, the (row, choice) pairs grouped by expert so an expert's weights
// are read once for all the rows that chose it; a row's output is its
// choices' outputs weighted and summed in choice order. A pair's product is
// the kernel's for its own row alone (its reduction order fixed by the
// format), so a row's result does not depend on its batch.
void routed_experts(const Problem& p, Scratch& s, int64_t rows) {
  const int64_t e_n = p.experts, k = p.top_k, pairs = rows * k;
  s.logits.resize(size_t(rows * e_n));
  s.probs.resize(size_t(rows * e_n));
  s.chosen.resize(size_t(pairs));
  s.weights.resize(size_t(pairs));
  product(s.normed.data(), rows, p.router, s.logits.data(), p.blas_min_rows);
  for (int64_t r = 0; r < rows; ++r)
    route_row(s.logits.data() + r * e_n, e_n, k, p.norm_topk, s.probs.data() + r * e_n,
              s.chosen.data() + r * k, s.weights.data() + r * k);
  expert_sum(p, s, rows);
  if (p.shared) shared_expert(p, s, rows);
}

// Gemma 4's MoE block over h_out into s.proj (layer.h), in the op graph's
// order (models/gemma4.rs): norm(dense) + norm(routed).
void gemma_moe(const Problem& p, Scratch& s, int64_t rows) {
  const int64_t e_n = p.experts, k = p.top_k, dim = p.dim;
  const auto norm_rows = [&](const float* w) {
    for (int64_t r = 0; r < rows; ++r) rms_norm_row(p.h_out + r * dim, w, dim, p.eps, s.normed.data() + r * dim);
  };
  norm_rows(p.ffn_norm);
  gated_mlp(p, s, rows, p.dense_hidden);
  s.dense.resize(size_t(rows * dim));
  for (int64_t r = 0; r < rows; ++r) rms_norm_row(s.proj.data() + r * dim, p.dense_out_norm, dim, p.eps, s.dense.data() + r * dim);
  norm_rows(p.router_norm);
  s.logits.resize(size_t(rows * e_n));
  s.chosen.resize(size_t(rows * k));
  s.weights.resize(size_t(rows * k));
  product(s.normed.data(), rows, p.router, s.logits.data(), p.blas_min_rows);
  for (int64_t r = 0; r < rows; ++r)
    gemma_route_row(s.logits.data() + r * e_n, e_n, k, p.expert_scale, s.chosen.data() + r * k, s.weights.data() + r * k);
  norm_rows(p.experts_norm);
  expert_sum(p, s, rows);
  for (int64_t r = 0; r < rows; ++r) {
    float* o = s.proj.data() + r * dim;
    rms_norm_row(o, p.experts_out_norm, dim, p.eps, o);
    const float* d = s.dense.data() + r * dim;
    for (int64_t x = 0; x < dim; ++x) o[x] = d[x] + o[x];
  }
}

// The attention block's mix over `rows` normed rows into s.proj: q/k/v,
// per-head norms and RoPE, the KV write, attention, the output gate and the
// output product.
void attention_block(const Problem& p, Scratch& s, int64_t rows) {
  const int64_t d = p.head_dim;
  const int64_t qw = p.heads * d, kvw = p.kv_heads * d;
  // The product's rows: q, then (unless the store is another layer's) k,
  // then v (unless K = V), then the output gate.
  const int64_t kv_rows = p.kv_shared ? 0 : (p.k_eq_v ? kvw : 2 * kvw);
  const int64_t qkv_w = qw + kv_rows + (p.output_gate ? qw : 0);
  s.qkv.resize(size_t(rows * qkv_w));
  s.attn.resize(size_t(rows * qw));
  s.values.resize(size_t(kvw));
  product(s.normed.data(), rows, p.qkv, s.qkv.data(), p.blas_min_rows);
  const int64_t head_stride = p.capacity * d, slot_stride = p.kv_heads * head_stride;
  const int64_t rope_dims = p.rope_dims > 0 ? p.rope_dims : d, half = rope_dims / 2;
  s.inv_freq.resize(size_t(half));
  s.cos.resize(size_t(half));
  s.sin.resize(size_t(half));
  // MLX's fallback: reciprocal(freqs), or exp(-j * log(base) / half).
  const float step = std::log(p.rope_base) / float(half);
  for (int64_t j = 0; j < half; ++j)
    s.inv_freq[size_t(j)] = p.rope_freqs ? 1.0f / p.rope_freqs[j] : std::exp(float(-j) * step);
  const int64_t qk_heads = p.heads + (p.kv_shared ? 0 : p.kv_heads);
  for (int64_t i = 0, r = 0; i < p.n; ++i)
    for (int64_t t = 0; t < p.lens[i]; ++t, ++r) {
      const int64_t pos = int64_t(p.offsets[i]) + t;
      float* row = s.qkv.data() + r * qkv_w;
      // This row's values (none for a layer reading another's store).
      float* v = nullptr;
      if (!p.kv_shared) {
        v = p.k_eq_v ? s.values.data() : row + qw + kvw;
        if (p.k_eq_v) std::memcpy(v, row + qw, size_t(kvw) * sizeof(float));
      }
      rope_angles(s.inv_freq.data(), half, float(pos), s.cos.data(), s.sin.data());
      // q heads then k heads: normed per head, then rotated.
      for (int64_t hh = 0; hh < qk_heads; ++hh) {
        float* x = row + hh * d;
        if (p.q_norm) rms_norm_row(x, hh < p.heads ? p.q_norm : p.k_norm, d, p.qk_eps, x);
        rope_head(x, rope_dims, s.cos.data(), s.sin.data(), p.rope_traditional);
      }
      if (p.kv_shared) continue;
      if (p.v_norm)
        for (int64_t g = 0; g < p.kv_heads; ++g) rms_norm_row(v + g * d, d, p.v_eps);
      const float* k = row + qw;
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
  if (p.output_gate)
    for (int64_t r = 0; r < rows; ++r) {
      float* a = s.attn.data() + r * qw;
      const float* gate = s.qkv.data() + r * qkv_w + qw + kv_rows;
      for (int64_t e = 0; e < qw; ++e) a[e] = a[e] * (1.0f / (1.0f + std::exp(-gate[e])));
    }
  product(s.attn.data(), rows, p.o, s.proj.data(), p.blas_min_rows);
}

// The Gated DeltaNet block's mix over `rows` normed rows into s.proj: the
// input product, the recurrence (one call for a run of decoding items, one
// per prefill chunk, each item from and into its own slot's states), the
// gated norm and the output product. Formulas and order as the engine's op
// graph (models/gated_delta_net.rs): rms_norm(y) * w, then times silu(z).
void recurrent_block(const Problem& p, Scratch& s, int64_t rows) {
  const Recurrent& m = *p.recurrent;
  const int64_t hv = m.value_heads, dv = m.value_dim, vt = hv * dv;
  const int64_t conv_dim = 2 * m.key_heads * m.key_dim + vt;
  const int64_t in_w = conv_dim + vt + 2 * hv; // q, k, v, z, b, a
  const int64_t width = conv_dim + 2 * hv; // q, k, v, b, a
  s.qkv.resize(size_t(rows * in_w));
  s.recur_in.resize(size_t(rows * width));
  s.attn.resize(size_t(rows * vt));
  product(s.normed.data(), rows, p.qkv, s.qkv.data(), p.blas_min_rows);
  for (int64_t r = 0; r < rows; ++r) {
    const float* in = s.qkv.data() + r * in_w;
    float* x = s.recur_in.data() + r * width;
    std::memcpy(x, in, size_t(conv_dim) * sizeof(float));
    std::memcpy(x + conv_dim, in + conv_dim + vt, size_t(2 * hv) * sizeof(float));
  }
  delta_net::Problem d{};
  d.key_heads = m.key_heads;
  d.value_heads = hv;
  d.key_dim = m.key_dim;
  d.value_dim = dv;
  d.kernel = m.kernel;
  d.conv_w = m.conv_w;
  d.decay = m.decay;
  d.dt_bias = m.dt_bias;
  d.conv_state = d.conv_state_out = m.conv_states;
  d.state = d.state_out = m.delta_states;
  for (int64_t i = 0, r = 0; i < p.n;) {
    int64_t j = i + 1;
    const int64_t len = p.lens[i];
    if (len == 1)
      while (j < p.n && p.lens[j] == 1) ++j;
    d.n = j - i;
    d.l = len;
    d.slots = p.slots + i;
    d.x = s.recur_in.data() + r * width;
    d.y = s.attn.data() + r * vt;
    delta_net::run(d);
    r += d.n * len;
    i = j;
  }
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t h = 0; h < hv; ++h) {
      float* y = s.attn.data() + r * vt + h * dv;
      const float* z = s.qkv.data() + r * in_w + conv_dim + h * dv;
      rms_norm_row(y, m.gate_norm, dv, p.eps, y);
      for (int64_t e = 0; e < dv; ++e) y[e] = (z[e] * (1.0f / (1.0f + std::exp(-z[e])))) * y[e];
    }
  product(s.attn.data(), rows, p.o, s.proj.data(), p.blas_min_rows);
}

// Gemma 4's per-layer input over h_out, in the op graph's order
// (models/gemma4.rs): gelu(gate product) * the row's input, the
// projection, its norm, the residual add.
void per_layer_input(const Problem& p, Scratch& s, int64_t rows) {
  const int64_t d = p.per_layer_dim;
  s.gate_up.resize(size_t(rows * d));
  s.act.resize(size_t(rows * d));
  product(p.h_out, rows, p.pl_gate, s.gate_up.data(), p.blas_min_rows);
  glu::gated(glu::Act::GeluTanh, s.gate_up.data(), d, p.per_layer_in, p.per_layer_stride, rows, d, s.act.data());
  product(s.act.data(), rows, p.pl_proj, s.proj.data(), p.blas_min_rows);
  for (int64_t r = 0; r < rows; ++r) {
    float* o = s.proj.data() + r * p.dim;
    rms_norm_row(o, p.pl_norm, p.dim, p.eps, o);
    float* out = p.h_out + r * p.dim;
    for (int64_t e = 0; e < p.dim; ++e) out[e] += o[e];
  }
}

} // namespace

void run(const Problem& p) {
  int64_t rows = 0;
  for (int64_t i = 0; i < p.n; ++i) rows += p.lens[i];
  if (rows == 0) return;
  Scratch& s = scratch();
  s.normed.resize(size_t(rows * p.dim));
  s.proj.resize(size_t(rows * p.dim));

  // Mixer block.
  for (int64_t r = 0; r < rows; ++r)
    rms_norm_row(p.h + r * p.dim, p.attn_norm, p.dim, p.eps, s.normed.data() + r * p.dim);
  if (p.recurrent) recurrent_block(p, s, rows);
  else attention_block(p, s, rows);
  for (int64_t r = 0; r < rows; ++r) {
    float* o = s.proj.data() + r * p.dim;
    if (p.attn_out_norm) rms_norm_row(o, p.attn_out_norm, p.dim, p.eps, o);
    const float* h = p.h + r * p.dim;
    float* out = p.h_out + r * p.dim;
    for (int64_t e = 0; e < p.dim; ++e) out[e] = h[e] + o[e];
  }

  // Feed-forward block.
  if (p.gemma_moe) {
    gemma_moe(p, s, rows);
  } else {
    for (int64_t r = 0; r < rows; ++r)
      rms_norm_row(p.h_out + r * p.dim, p.ffn_norm, p.dim, p.eps, s.normed.data() + r * p.dim);
    if (p.experts > 0) routed_experts(p, s, rows);
    else gated_mlp(p, s, rows, p.hidden);
  }
  for (int64_t r = 0; r < rows; ++r) {
    float* o = s.proj.data() + r * p.dim;
    if (p.ffn_out_norm) rms_norm_row(o, p.ffn_out_norm, p.dim, p.eps, o);
    float* out = p.h_out + r * p.dim;
    for (int64_t e = 0; e < p.dim; ++e) out[e] += o[e];
  }

  if (p.per_layer_dim > 0) per_layer_input(p, s, rows);
  if (p.layer_scalar) {
    const float c = p.layer_scalar[0];
    for (int64_t e = 0; e < rows * p.dim; ++e) p.h_out[e] = p.h_out[e] * c;
  }
}

} // namespace afm::layer
