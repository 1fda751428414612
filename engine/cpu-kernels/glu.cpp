// Dispatcher, task split and the portable row of glu.h. Compiled without ISA
// flags; glu_avx2.cpp holds the AVX2 row.
#include "glu.h"

#include <algorithm>
#include <cmath>

#include "thread_pool.h"

namespace afm::glu {
namespace detail {

void row_scalar(Act act, const float* gate, const float* up, int64_t width, float* out) {
  for (int64_t i = 0; i < width; ++i) {
    const float x = gate[i];
    const float z = act == Act::Silu ? x : 2.0f * 0.7978845608028654f * (x + 0.044715f * x * x * x);
    out[i] = x / (1.0f + std::exp(-z)) * up[i];
  }
}

} // namespace detail

namespace {

struct Job {
  Act act;
  const float* gate;
  int64_t gate_stride;
  const float* up;
  int64_t up_stride;
  int64_t rows, width;
  float* out;
  bool avx2;
  int tasks;
};

void run_task(void* ctx, int t) {
  const Job& j = *static_cast<const Job*>(ctx);
  const int64_t r0 = j.rows * t / j.tasks, r1 = j.rows * (t + 1) / j.tasks;
  for (int64_t r = r0; r < r1; ++r) {
    const float* g = j.gate + r * j.gate_stride;
    const float* u = j.up + r * j.up_stride;
    float* o = j.out + r * j.width;
#if defined(__x86_64__)
    if (j.avx2) {
      detail::row_avx2(j.act, g, u, j.width, o);
      continue;
    }
#endif
    detail::row_scalar(j.act, g, u, j.width, o);
  }
}

} // namespace

void gated(Act act, const float* gate, int64_t gate_stride, const float* up, int64_t up_stride,
           int64_t rows, int64_t width, float* out, qmm::Path path) {
  if (rows <= 0 || width <= 0) return;
  Job j{act, gate, gate_stride, up, up_stride, rows, width, out,
        qmm::simd(path), 1};
  // Below ~32K elements a second thread's wake-up costs more than it saves.
  if (rows * width < (int64_t(1) << 15) || rows == 1) {
    run_task(&j, 0);
    return;
  }
  auto pool = qmm::shared_pool();
  j.tasks = int(std::min<int64_t>(rows, 4 * pool->size()));
  pool->run(j.tasks, run_task, &j);
}

} // namespace afm::glu
