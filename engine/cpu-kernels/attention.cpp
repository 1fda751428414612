// Dispatcher, task split and the portable kernel of attention.h. Compiled
// without ISA flags; the AVX2 and AVX-512 kernels (attention_avx2.cpp,
// attention_avx512.cpp) are entered only after the run-time CPU check qmm's
// dispatcher already makes.
#include "attention.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "attention_impl.h"
#include "thread_pool.h"

namespace afm::attn {
namespace detail {

// One output row in plain loops: the reference the AVX2 path is tested
// against, and the path where d is not a multiple of 8.
void row_scalar(const Problem& p, int64_t i, int64_t l, int64_t h, float* scores) {
  const int64_t g = h / (p.heads / p.kv_heads);
  const float* q = p.q.data + i * p.q.s0 + h * p.q.s1 + l * p.q.s2;
  const float* k = p.k.data + int64_t(p.slots[i]) * p.k.s0 + g * p.k.s1;
  const float* v = p.v.data + int64_t(p.slots[i]) * p.v.s0 + g * p.v.s1;
  const Visible vis = visible(p, i, l);
  float max = -INFINITY;
  for (int64_t j = 0; j < vis.count; ++j) {
    const float* kj = k + (vis.first + j) * p.k.s2;
    float dot = 0.0f;
    for (int64_t e = 0; e < p.d; ++e) dot += q[e] * kj[e];
    scores[j] = dot * p.scale;
    max = std::max(max, scores[j]);
  }
  float sum = 0.0f;
  for (int64_t j = 0; j < vis.count; ++j) {
    scores[j] = std::exp(scores[j] - max);
    sum += scores[j];
  }
  float* o = p.out + ((i * p.l + l) * p.heads + h) * p.d;
  for (int64_t e = 0; e < p.d; ++e) o[e] = 0.0f;
  for (int64_t j = 0; j < vis.count; ++j) {
    const float* vj = v + (vis.first + j) * p.v.s2;
    for (int64_t e = 0; e < p.d; ++e) o[e] += scores[j] * vj[e];
  }
  const float inv = 1.0f / sum;
  for (int64_t e = 0; e < p.d; ++e) o[e] *= inv;
}

} // namespace detail

namespace {

// Queries of one item and KV head per task: a task's rows share their keys
// in cache, and several tasks per thread balance the causal triangle.
constexpr int64_t kQueryBlock = 8;

enum class Kernel { Portable, Avx2, Avx512 };

struct Split {
  const Problem* p;
  Kernel kernel;
  int64_t blocks; // query blocks per (item, KV head)
};

void run_task(void* ctx, int t) {
  const Split& s = *static_cast<const Split*>(ctx);
  const Problem& p = *s.p;
  const int64_t rep = p.heads / p.kv_heads;
  thread_local std::vector<float> scores, acc;
  const size_t rows = s.kernel != Kernel::Portable ? size_t(kQueryBlock * rep) : 1;
  const size_t per_row = size_t(detail::score_stride(p));
  if (scores.size() < rows * per_row) scores.resize(rows * per_row);
  if (acc.size() < rows * size_t(p.d)) acc.resize(rows * size_t(p.d));
  // The last query blocks see the most keys: hand them out first.
  const int64_t b = s.blocks - 1 - t % s.blocks;
  const int64_t ig = t / s.blocks;
  const int64_t i = ig / p.kv_heads, g = ig % p.kv_heads;
  const int64_t l0 = b * kQueryBlock, l1 = std::min(p.l, (b + 1) * kQueryBlock);
#if defined(__x86_64__)
  if (s.kernel == Kernel::Avx512) {
    detail::rows_avx512(p, i, l0, l1, g, scores.data(), acc.data());
    return;
  }
  if (s.kernel == Kernel::Avx2) {
    detail::rows_avx2(p, i, l0, l1, g, scores.data(), acc.data());
    return;
  }
#endif
  for (int64_t l = l0; l < l1; ++l)
    for (int64_t h = g * rep; h < (g + 1) * rep; ++h) detail::row_scalar(p, i, l, h, scores.data());
}

} // namespace

void attend(const Problem& p, qmm::Path path) {
  if (p.n == 0 || p.l == 0) return;
  const qmm::Path resolved = qmm::resolve_path(path);
  const Kernel kernel = resolved == qmm::Path::Avx512 && p.d % 16 == 0 ? Kernel::Avx512
      : resolved != qmm::Path::Scalar && p.d % 8 == 0                  ? Kernel::Avx2
                                                                        : Kernel::Portable;
  const int64_t blocks = (p.l + kQueryBlock - 1) / kQueryBlock;
  Split split{&p, kernel, blocks};
  const int64_t tasks = p.n * p.kv_heads * blocks;
  // Keys read in all, times d, times 2 products: below ~64K multiply-adds a
  // second thread's wake-up costs more than it saves.
  int64_t keys = 0;
  for (int64_t i = 0; i < p.n; ++i) keys += int64_t(p.offsets[i]) * p.l + p.l * (p.l + 1) / 2;
  if (keys * p.heads * p.d * 2 < (int64_t(1) << 16)) {
    for (int64_t t = 0; t < tasks; ++t) run_task(&split, int(t));
    return;
  }
  auto pool = qmm::shared_pool();
  pool->run(int(tasks), run_task, &split);
}

} // namespace afm::attn
