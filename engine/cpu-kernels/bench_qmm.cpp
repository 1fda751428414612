// Times y = x · Wᵀ for the projection shapes of SmolLM2-135M and Gemma 3 270M:
//   kernel   afm::qmm::matmul called directly on the packed weights
//   afm      the AffineQmm primitive through MLX's graph (build + eval)
//   mlx-qmm  mlx::core::quantized_matmul (MLX's CPU path: scalar, 1 thread)
//   blas     mlx::core::matmul on the dequantized f32 weights (the engine's
//            current CPU path; BLAS is whatever libmlx loads)
// and reports GB/s of weight bytes read next to the machine's streaming read
// bandwidth measured in the same run. Unless --hot, each call reads a
// different copy of the weights (copies totalling >= 4x the L3 size), so
// weights come from DRAM as in a real decode step where the whole model does
// not fit in cache.
//
// Usage: bench_qmm [--shapes a,b] [--formats 4:64,8:32] [--m 1,8,32]
//                  [--methods kernel,afm,mlx-qmm,blas] [--min-time S]
//                  [--hot] [--scales f32|f16|bf16] [--bw-mb MB]
//                  [--stat median|min]
// Shapes are indices into the table in main (0-2 SmolLM2, 3-4 Gemma 3);
// AFM_QMM_THREADS sets the kernel's threads, OPENBLAS_NUM_THREADS BLAS's.
#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "mlx/mlx.h"
#include "primitive.h"
#include "qmm_affine.h"
#include "thread_pool.h"

namespace mx = mlx::core;

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

std::string loadavg() {
  // The machine may be shared; the load average says how much.
  std::FILE* f = std::fopen("/proc/loadavg", "r");
  if (!f) return "?";
  char buf[64] = {};
  if (!std::fgets(buf, sizeof buf, f)) buf[0] = 0;
  std::fclose(f);
  std::string s(buf);
  return s.substr(0, s.find(' ', s.find(' ', s.find(' ') + 1) + 1));
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, sep))
    if (!item.empty()) out.push_back(item);
  return out;
}

// Streaming read: sum of 64-bit words (integer adds vectorise without
// -ffast-math), each thread over its own contiguous slice.
uint64_t sum_words(const uint64_t* p, size_t n) {
  uint64_t a = 0, b = 0, c = 0, d = 0;
  size_t i = 0;
  for (; i + 4 <= n; i += 4) {
    a += p[i];
    b += p[i + 1];
    c += p[i + 2];
    d += p[i + 3];
  }
  for (; i < n; ++i) a += p[i];
  return a + b + c + d;
}

double read_bandwidth(const std::vector<uint64_t>& buf, int threads, int reps) {
  double best = 0;
  volatile uint64_t sink = 0;
  for (int r = 0; r < reps; ++r) {
    std::vector<uint64_t> sums(threads);
    auto t0 = Clock::now();
    std::vector<std::thread> ts;
    const size_t n = buf.size();
    for (int t = 0; t < threads; ++t)
      ts.emplace_back([&, t] {
        size_t a = n * t / threads, b = n * (t + 1) / threads;
        sums[t] = sum_words(buf.data() + a, b - a);
      });
    for (auto& th : ts) th.join();
    double s = seconds_since(t0);
    for (auto v : sums) sink = sink + v;
    best = std::max(best, double(n * sizeof(uint64_t)) / s / 1e9);
  }
  (void)sink;
  return best;
}

struct Shape {
  std::string name;
  int k, n;
};

bool g_use_min = false;

// Median (or, with --stat min, fastest) seconds per call, calling f(i) with
// i counting calls (to rotate weight copies). At least 3 calls (1 when the
// first takes over 2 s) and until min_time has passed. The minimum filters
// out preemption on a shared machine; the median is what a steady stream of
// calls sees.
double time_calls(const std::function<void(int)>& f, double min_time) {
  f(0); // warm-up: page in, pool threads up
  std::vector<double> ts;
  auto start = Clock::now();
  for (int i = 1;; ++i) {
    auto t0 = Clock::now();
    f(i);
    ts.push_back(seconds_since(t0));
    if (ts.size() == 1 && ts[0] > 2.0) break;
    if (ts.size() >= 3 && seconds_since(start) >= min_time) break;
    if (ts.size() >= 200000) break;
  }
  std::sort(ts.begin(), ts.end());
  return g_use_min ? ts.front() : ts[ts.size() / 2];
}

mx::array host_copy(const mx::array& a) {
  // Fresh buffer with the same bytes (mx::copy may share the buffer).
  auto c = mx::contiguous(a);
  mx::eval(c);
  switch (a.dtype()) {
    case mx::uint32: return mx::array(c.data<uint32_t>(), a.shape(), a.dtype());
    case mx::float32: return mx::array(c.data<float>(), a.shape(), a.dtype());
    case mx::float16: return mx::array(c.data<mx::float16_t>(), a.shape(), a.dtype());
    case mx::bfloat16: return mx::array(c.data<mx::bfloat16_t>(), a.shape(), a.dtype());
    default: throw std::runtime_error("host_copy: dtype");
  }
}

} // namespace

int main(int argc, char** argv) {
  std::vector<Shape> all_shapes{
      {"smollm2-135m gate/up", 576, 1536},
      {"smollm2-135m down", 1536, 576},
      {"smollm2-135m lm_head", 576, 49152},
      {"gemma3-270m gate/up", 640, 2048},
      {"gemma3-270m down", 2048, 640},
  };
  std::string shapes_arg, formats_arg = "4:32,4:64,4:128,8:32,8:64,8:128", m_arg = "1,8,32",
                          methods_arg = "kernel,afm,mlx-qmm,blas", scales_arg = "f32";
  double min_time = 0.25;
  bool hot = false;
  size_t bw_mb = 512;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--shapes") shapes_arg = next();
    else if (a == "--formats") formats_arg = next();
    else if (a == "--m") m_arg = next();
    else if (a == "--methods") methods_arg = next();
    else if (a == "--min-time") min_time = std::atof(next().c_str());
    else if (a == "--hot") hot = true;
    else if (a == "--scales") scales_arg = next();
    else if (a == "--stat") g_use_min = next() == "min";
    else if (a == "--bw-mb") bw_mb = std::strtoul(next().c_str(), nullptr, 10);
    else {
      std::fprintf(stderr, "unknown argument %s (see the header of bench_qmm.cpp)\n", a.c_str());
      return 2;
    }
  }
  std::vector<Shape> shapes;
  if (shapes_arg.empty()) shapes = all_shapes;
  else
    for (auto& idx : split(shapes_arg, ',')) shapes.push_back(all_shapes.at(std::stoul(idx)));
  std::vector<std::pair<int, int>> formats;
  for (auto& f : split(formats_arg, ',')) {
    auto p = split(f, ':');
    formats.emplace_back(std::stoi(p.at(0)), std::stoi(p.at(1)));
  }
  std::vector<int> ms;
  for (auto& m : split(m_arg, ',')) ms.push_back(std::stoi(m));
  auto methods = split(methods_arg, ',');
  auto has = [&](const char* m) { return std::find(methods.begin(), methods.end(), m) != methods.end(); };
  mx::Dtype sdt = scales_arg == "f16" ? mx::float16 : scales_arg == "bf16" ? mx::bfloat16 : mx::float32;

  const int threads = afm::qmm::num_threads();
  std::printf("MLX %s; afm kernel: %s, %d thread(s); weights %s; scales %s; %s per call\n",
              mx::version(), afm::qmm::avx2_available() ? "avx2+fma" : "scalar", threads,
              hot ? "hot (one copy, cache-resident where it fits)" : "cold (rotating copies, >= 128 MB)",
              scales_arg.c_str(), g_use_min ? "fastest" : "median");

  // Memory read bandwidth, same process, same moment.
  double bw1 = 0, bwT = 0;
  if (bw_mb > 0) {
    std::vector<uint64_t> buf(bw_mb * (1 << 20) / sizeof(uint64_t), 1);
    bw1 = read_bandwidth(buf, 1, 3);
    bwT = threads > 1 ? read_bandwidth(buf, threads, 3) : bw1;
    std::printf("memory read bandwidth (%zu MB streaming sum): %.1f GB/s 1 thread, %.1f GB/s %d threads\n",
                bw_mb, bw1, bwT, threads);
  }

  // What any one-op graph costs to build and evaluate, for scale against
  // the "afm" (primitive through MLX) rows.
  {
    auto a = mx::random::normal({1, 64}, mx::float32, 0.0f, 1.0f);
    mx::eval(a);
    double s = time_calls(
        [&](int) {
          auto r = mx::add(a, mx::array(1.0f));
          mx::eval(r);
        },
        min_time);
    std::printf("MLX one-op graph (add on [1,64]) build+eval: %.1f us\n", s * 1e6);
  }
  std::printf("load average (1/5/15 min) at start: %s\n", loadavg().c_str());

  std::printf("\n%-22s %-6s %-3s | %-9s %9s %8s %8s\n", "shape (K->N)", "format", "M", "method", "us/call",
              "GB/s", "GMAC/s");
  const size_t cold_bytes = size_t(128) << 20;
  mx::random::seed(1);
  for (auto& sh : shapes) {
    char shape_name[64];
    std::snprintf(shape_name, sizeof shape_name, "%d->%d", sh.k, sh.n);
    // f32 BLAS on dense weights: its speed does not depend on the values,
    // so it is timed once per shape rather than per quantized format.
    if (has("blas")) {
      const size_t fbytes = size_t(sh.n) * sh.k * 4;
      const int fcopies = hot ? 1 : int(std::max<size_t>(1, (cold_bytes + fbytes - 1) / fbytes));
      std::vector<mx::array> wd;
      for (int c = 0; c < fcopies; ++c) {
        wd.push_back(mx::random::normal({sh.n, sh.k}, mx::float32, 0.0f, 0.02f));
        mx::eval(wd.back());
      }
      for (int M : ms) {
        auto x = mx::random::normal({M, sh.k}, mx::float32, 0.0f, 1.0f);
        mx::eval(x);
        double s = time_calls(
            [&](int i) {
              auto r = mx::matmul(x, mx::transpose(wd[i % wd.size()]));
              mx::eval(r);
            },
            min_time);
        std::printf("%-22s %-6s %-3d | %-9s %9.1f %8.2f %8.2f\n", shape_name, "f32", M, "blas-f32", s * 1e6,
                    double(fbytes) / s / 1e9, double(M) * sh.n * sh.k / s / 1e9);
        std::fflush(stdout);
      }
    }
    for (auto [bits, group] : formats) {
      if (sh.k % group) continue;
      auto wf = mx::random::normal({sh.n, sh.k}, mx::float32, 0.0f, 0.02f);
      auto q = mx::quantize(wf, group, bits, "affine");
      q[1] = mx::astype(q[1], sdt);
      q[2] = mx::astype(q[2], sdt);
      mx::eval(q);
      const size_t qbytes = q[0].nbytes() + q[1].nbytes() + q[2].nbytes();
      const int copies = hot ? 1 : int(std::min<size_t>(512, (cold_bytes + qbytes - 1) / qbytes));
      std::vector<std::array<mx::array, 3>> qc;
      for (int c = 0; c < copies; ++c)
        qc.push_back({c == 0 ? q[0] : host_copy(q[0]), c == 0 ? q[1] : host_copy(q[1]),
                      c == 0 ? q[2] : host_copy(q[2])});
      std::vector<afm::qmm::AffineMatrix> mats;
      for (auto& c : qc)
        mats.push_back({c[0].data<uint32_t>(), c[1].data<char>(), c[2].data<char>(),
                        sdt == mx::float32   ? afm::qmm::ScaleType::F32
                            : sdt == mx::float16 ? afm::qmm::ScaleType::F16
                                                 : afm::qmm::ScaleType::BF16,
                        sh.n, sh.k, bits, group});

      // MLX's quantized_matmul wants scales in x's dtype.
      std::vector<std::array<mx::array, 2>> qc32;
      if (has("mlx-qmm"))
        for (auto& c : qc) {
          auto s32 = mx::astype(c[1], mx::float32), b32 = mx::astype(c[2], mx::float32);
          mx::eval(s32, b32);
          qc32.push_back({s32, b32});
        }

      char fmt[16];
      std::snprintf(fmt, sizeof fmt, "q%d/g%d", bits, group);
      for (int M : ms) {
        auto x = mx::random::normal({M, sh.k}, mx::float32, 0.0f, 1.0f);
        mx::eval(x);
        std::vector<float> y(size_t(M) * sh.n);
        auto report = [&](const char* method, double s, size_t bytes) {
          std::printf("%-22s %-6s %-3d | %-9s %9.1f %8.2f %8.2f\n", shape_name, fmt, M, method, s * 1e6,
                      double(bytes) / s / 1e9, double(M) * sh.n * sh.k / s / 1e9);
          std::fflush(stdout);
        };
        if (has("kernel"))
          report("kernel",
                 time_calls([&](int i) { afm::qmm::matmul(x.data<float>(), M, mats[i % copies], y.data()); },
                            min_time),
                 qbytes);
        if (has("afm"))
          report("afm",
                 time_calls(
                     [&](int i) {
                       auto& c = qc[i % copies];
                       auto r = afm::affine_qmm(x, c[0], c[1], c[2], group, bits);
                       mx::eval(r);
                     },
                     min_time),
                 qbytes);
        if (has("mlx-qmm"))
          report("mlx-qmm",
                 time_calls(
                     [&](int i) {
                       auto& c = qc[i % copies];
                       auto& s = qc32[i % copies];
                       auto r = mx::quantized_matmul(x, c[0], s[0], s[1], true, group, bits, "affine");
                       mx::eval(r);
                     },
                     min_time),
                 qbytes);
      }
    }
  }
  std::printf("\nload average (1/5/15 min) at end: %s\n", loadavg().c_str());
  return 0;
}
