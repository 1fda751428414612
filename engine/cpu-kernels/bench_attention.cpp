// Times afm::attn::attend on a prefill chunk read at a depth: one item of
// --chunk queries at positions --depth.. over its slot, the conformance
// model's attention shape by default (9 query heads over 3 KV heads of 64),
// on each kernel path this CPU has. Reports ms per call and GFLOP/s (the
// causal multiply-adds of q kᵀ and of the weighted values), and checks the
// paths agree with the portable one.
//
// Usage: bench_attention [--depth N] [--chunk N] [--heads H] [--kv-heads K]
//                        [--d D] [--reps N]
// AFM_QMM_THREADS sets the thread pool's size.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "attention.h"

using afm::qmm::Path;

int main(int argc, char** argv) {
  int64_t depth = 8000, chunk = 256, heads = 9, kv_heads = 3, d = 64, reps = 5;
  for (int a = 1; a + 1 < argc; a += 2) {
    const int64_t v = std::atoll(argv[a + 1]);
    if (!std::strcmp(argv[a], "--depth")) depth = v;
    else if (!std::strcmp(argv[a], "--chunk")) chunk = v;
    else if (!std::strcmp(argv[a], "--heads")) heads = v;
    else if (!std::strcmp(argv[a], "--kv-heads")) kv_heads = v;
    else if (!std::strcmp(argv[a], "--d")) d = v;
    else if (!std::strcmp(argv[a], "--reps")) reps = v;
    else {
      std::fprintf(stderr, "unknown flag %s\n", argv[a]);
      return 2;
    }
  }
  const int64_t cap = depth + chunk;
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-2.0f, 2.0f);
  std::vector<float> q(size_t(heads * chunk * d)), k(size_t(kv_heads * cap * d)),
      v(size_t(kv_heads * cap * d));
  for (auto* x : {&q, &k, &v})
    for (float& f : *x) f = u(rng);
  const int32_t slot = 0, offset = int32_t(depth);
  afm::attn::Problem p{};
  p.q = {q.data(), heads * chunk * d, chunk * d, d};
  p.k = {k.data(), kv_heads * cap * d, cap * d, d};
  p.v = {v.data(), kv_heads * cap * d, cap * d, d};
  p.slots = &slot;
  p.offsets = &offset;
  p.n = 1;
  p.heads = heads;
  p.kv_heads = kv_heads;
  p.l = chunk;
  p.d = d;
  p.capacity = cap;
  p.window = 0;
  p.scale = 1.0f / std::sqrt(float(d));
  // Causal pairs of the chunk, times d, times 2 products, times 2 flops.
  const double pairs = double(chunk) * double(depth) + double(chunk) * double(chunk + 1) / 2;
  const double flops = pairs * double(heads) * double(d) * 4;

  std::vector<float> want(size_t(chunk * heads * d));
  p.out = want.data();
  afm::attn::attend(p, Path::Scalar);
  std::printf("depth %lld, chunk %lld, heads %lld/%lld, d %lld\n", (long long)depth,
              (long long)chunk, (long long)heads, (long long)kv_heads, (long long)d);
  for (Path path : {Path::Scalar, Path::Avx2, Path::Avx512}) {
    if (afm::qmm::resolve_path(path) != path) continue;
    std::vector<float> out(want.size());
    p.out = out.data();
    std::vector<double> ms;
    for (int64_t r = 0; r < reps; ++r) {
      const auto t0 = std::chrono::steady_clock::now();
      afm::attn::attend(p, path);
      ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                       .count());
    }
    std::sort(ms.begin(), ms.end());
    float diff = 0.0f;
    for (size_t e = 0; e < out.size(); ++e) diff = std::max(diff, std::fabs(out[e] - want[e]));
    const char* name = path == Path::Avx512 ? "avx512" : path == Path::Avx2 ? "avx2" : "portable";
    std::printf("%-8s %9.2f ms  %6.1f GFLOP/s  max diff from portable %.2e\n", name,
                ms[ms.size() / 2], flops / (ms[ms.size() / 2] * 1e6), double(diff));
  }
}
