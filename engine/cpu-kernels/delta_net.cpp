// The recurrence of delta_net.h. Compiled without ISA flags. The formulas
// follow the MLX ops the engine builds otherwise (models/gated_delta_net.rs),
// in f32 and in the same order, except that sums over a head run in eight
// fixed lanes (as vectorized reductions do), so the two agree to rounding.
#include "delta_net.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "thread_pool.h"

namespace afm::delta_net {
namespace {

constexpr int kLanes = 8;

// Σ a[i] * b[i] over `n` in kLanes fixed lanes, then the lanes in order.
float dot(const float* a, const float* b, int64_t n) {
  float lane[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int j = 0; j < kLanes; ++j) lane[j] += a[i + j] * b[i + j];
  for (; i < n; ++i) lane[i % kLanes] += a[i] * b[i];
  float s = 0.0f;
  for (int j = 0; j < kLanes; ++j) s += lane[j];
  return s;
}

float sigmoid(float x) {
  return 1.0f / (1.0f + std::exp(-x));
}

// MLX's logaddexp(x, 0).
float softplus(float x) {
  const float hi = std::max(x, 0.0f), lo = std::min(x, 0.0f);
  if (std::isinf(hi)) return hi;
  return hi + std::log1p(std::exp(lo - hi));
}

// x * rsqrt(mean(x²) + eps) * scale over one head, in place.
void norm_head(float* x, int64_t d, float eps, float scale) {
  float ss = 0.0f;
  for (int64_t i = 0; i < d; ++i) ss += x[i] * x[i];
  const float r = 1.0f / std::sqrt(ss / float(d) + eps);
  for (int64_t i = 0; i < d; ++i) x[i] = (x[i] * r) * scale;
}

struct Job {
  const Problem* p;
  int64_t conv_dim, width;
  // Per (sequence, token) row: q and k (normed) and v; g and beta per value
  // head.
  float* qkv;
  float* gates;
  int tasks;
};

// Where sequence s's states are.
int64_t slot(const Problem& p, int64_t s) {
  return p.slots ? int64_t(p.slots[s]) : s;
}

// Input row j of sequence s's convolution window (0: the first kept input):
// the kernel - 1 kept ones, then the new rows' q, k, v.
const float* input(const Problem& p, const Job& job, int64_t s, int64_t j) {
  const int64_t keep = p.kernel - 1;
  if (j < keep) return p.conv_state + (slot(p, s) * keep + j) * job.conv_dim;
  return p.x + (s * p.l + j - keep) * job.width;
}

// Rows [r0, r1) of the (sequence, token) rows: the convolution, SiLU, the
// q/k norms and the gates.
void prepare(const Job& j, int64_t r0, int64_t r1) {
  const Problem& p = *j.p;
  const int64_t hv = p.value_heads, conv_dim = j.conv_dim;
  const int64_t kt = p.key_heads * p.key_dim;
  const float inv = 1.0f / std::sqrt(float(p.key_dim));
  const float eps = 1e-6f * inv * inv;
  for (int64_t row = r0; row < r1; ++row) {
    const int64_t s = row / p.l, t = row % p.l;
    float* out = j.qkv + row * conv_dim;
    const float* window[kMaxKernel];
    for (int64_t k = 0; k < p.kernel; ++k) window[k] = input(p, j, s, t + k);
    for (int64_t c = 0; c < conv_dim; ++c) {
      float acc = window[0][c] * p.conv_w[c];
      for (int64_t k = 1; k < p.kernel; ++k) acc = acc + window[k][c] * p.conv_w[k * conv_dim + c];
      out[c] = acc * sigmoid(acc);
    }
    for (int64_t h = 0; h < p.key_heads; ++h) {
      norm_head(out + h * p.key_dim, p.key_dim, eps, inv * inv);
      norm_head(out + kt + h * p.key_dim, p.key_dim, eps, inv);
    }
    const float* ba = p.x + row * j.width + conv_dim;
    float* g = j.gates + row * 2 * hv;
    for (int64_t h = 0; h < hv; ++h) {
      g[h] = std::exp(-(p.decay[h] * softplus(ba[hv + h] + p.dt_bias[h])));
      g[hv + h] = sigmoid(ba[h]);
    }
  }
}

void prepare_task(void* ctx, int task) {
  const Job& j = *static_cast<const Job*>(ctx);
  const int64_t rows = j.p->n * j.p->l;
  prepare(j, rows * task / j.tasks, rows * (task + 1) / j.tasks);
}

// The recurrence of (sequence, value head) pairs [t0, t1) of the task split.
void recur(void* ctx, int task) {
  const Job& j = *static_cast<const Job*>(ctx);
  const Problem& p = *j.p;
  const int64_t hv = p.value_heads, dk = p.key_dim, dv = p.value_dim;
  const int64_t pairs = p.n * hv;
  const int64_t r = hv / p.key_heads, kt = p.key_heads * dk;
  thread_local std::vector<float> delta;
  delta.resize(size_t(dv));
  for (int64_t q = pairs * task / j.tasks; q < pairs * (task + 1) / j.tasks; ++q) {
    const int64_t s = q / hv, h = q % hv, kh = h / r;
    const int64_t at = (slot(p, s) * hv + h) * dv * dk;
    float* S = p.state_out + at;
    if (p.state_out != p.state) std::memcpy(S, p.state + at, size_t(dv * dk) * sizeof(float));
    for (int64_t t = 0; t < p.l; ++t) {
      const float* row = j.qkv + (s * p.l + t) * j.conv_dim;
      const float* qh = row + kh * dk;
      const float* kh_ = row + kt + kh * dk;
      const float* vh = row + 2 * kt + h * dv;
      const float* g = j.gates + (s * p.l + t) * 2 * hv;
      const float decay = g[h], beta = g[hv + h];
      for (int64_t i = 0; i < dv * dk; ++i) S[i] *= decay;
      for (int64_t v = 0; v < dv; ++v) delta[size_t(v)] = (vh[v] - dot(S + v * dk, kh_, dk)) * beta;
      float* y = p.y + (s * p.l + t) * hv * dv + h * dv;
      for (int64_t v = 0; v < dv; ++v) {
        float* sv = S + v * dk;
        const float dvv = delta[size_t(v)];
        for (int64_t i = 0; i < dk; ++i) sv[i] = sv[i] + kh_[i] * dvv;
        y[v] = dot(sv, qh, dk);
      }
    }
  }
}

} // namespace

void run(const Problem& p) {
  if (p.n <= 0) return;
  const int64_t conv_dim = 2 * p.key_heads * p.key_dim + p.value_heads * p.value_dim;
  const int64_t width = conv_dim + 2 * p.value_heads;
  const int64_t keep = p.kernel - 1, rows = p.n * p.l;
  thread_local std::vector<float> qkv, gates;
  qkv.resize(size_t(rows * conv_dim));
  gates.resize(size_t(rows * 2 * p.value_heads));
  Job j{&p, conv_dim, width, qkv.data(), gates.data(), 1};
  auto pool = qmm::shared_pool();
  // Below ~32K multiply-adds a second thread's wake-up costs more than it
  // saves (one sequence's decode step).
  auto split = [&](int64_t units, int64_t work) {
    return work < (int64_t(1) << 15) ? 1 : int(std::min<int64_t>(units, 4 * pool->size()));
  };
  j.tasks = split(rows, rows * conv_dim * p.kernel);
  if (j.tasks == 1) prepare_task(&j, 0);
  else pool->run(j.tasks, prepare_task, &j);
  // The window's last kernel - 1 inputs are the next state. In place, row
  // i takes row l + i of the same window (l >= 1), not yet overwritten.
  for (int64_t s = 0; s < p.n; ++s)
    for (int64_t i = 0; i < keep; ++i)
      std::memcpy(p.conv_state_out + (slot(p, s) * keep + i) * conv_dim, input(p, j, s, p.l + i),
                  size_t(conv_dim) * sizeof(float));
  const int64_t pairs = p.n * p.value_heads;
  j.tasks = split(pairs, pairs * std::max<int64_t>(p.l, 1) * p.value_dim * p.key_dim);
  if (j.tasks == 1) recur(&j, 0);
  else pool->run(j.tasks, recur, &j);
}

} // namespace afm::delta_net
