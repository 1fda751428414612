// Dispatcher, thread split and the portable scalar kernel. Compiled without
// ISA flags so it runs on any x86-64 (and other) CPU; the AVX2 kernel lives
// in qmm_affine_avx2.cpp and is only entered after a run-time CPU check.
#include "qmm_affine.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include <dlfcn.h>
#include <limits>

#include "qmm_affine_impl.h"
#include "thread_pool.h"

namespace afm::qmm {
namespace detail {
namespace {

float half_to_float(uint16_t h) {
  // IEEE binary16 -> binary32 without relying on F16C.
  const uint32_t sign = uint32_t(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1F;
  uint32_t man = h & 0x3FF;
  uint32_t bits;
  if (exp == 0) {
    if (man == 0) {
      bits = sign;
    } else {
      // Subnormal: normalise the mantissa.
      int e = -1;
      do {
        ++e;
        man <<= 1;
      } while ((man & 0x400) == 0);
      bits = sign | uint32_t(127 - 15 - e) << 23 | (man & 0x3FF) << 13;
    }
  } else if (exp == 0x1F) {
    bits = sign | 0x7F800000u | man << 13;
  } else {
    bits = sign | (exp + 127 - 15) << 23 | man << 13;
  }
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

inline float load_scale(const void* p, ScaleType st, int64_t i) {
  switch (st) {
    case ScaleType::F32:
      return static_cast<const float*>(p)[i];
    case ScaleType::F16:
      return half_to_float(static_cast<const uint16_t*>(p)[i]);
    case ScaleType::BF16: {
      uint32_t bits = uint32_t(static_cast<const uint16_t*>(p)[i]) << 16;
      float f;
      std::memcpy(&f, &bits, sizeof f);
      return f;
    }
  }
  return 0.0f;
}

inline uint32_t q_at(const uint8_t* row, int bits, int64_t k) {
  if (bits == 8) return row[k];
  const uint8_t b = row[k >> 1];
  return (k & 1) ? (b >> 4) : (b & 0xF);
}

} // namespace

const float* prepare_scalar(const float* x, int64_t m, const AffineMatrix& w,
                            float* /*xp_scratch*/, float* xs) {
  const int64_t ng = w.k / w.group_size, stride = xs_stride(ng);
  for (int64_t r = 0; r < m; ++r)
    for (int64_t g = 0; g < stride; ++g) {
      float s = 0.0f;
      if (g < ng) {
        const float* xg = x + r * w.k + g * w.group_size;
        for (int i = 0; i < w.group_size; ++i) s += xg[i];
      }
      xs[r * stride + g] = s;
    }
  return x;
}

// The fallback: one output at a time, sequential sums. Slow but exact in
// its own fixed order, and the reference the AVX2 path is tested against.
void rows_scalar(const Job& j, int64_t n0, int64_t n1) {
  const AffineMatrix& W = *j.w;
  const int64_t K = W.k;
  const int G = W.group_size;
  const int64_t ng = K / G;
  const int64_t row_bytes = K * W.bits / 8;
  const uint8_t* wbase = reinterpret_cast<const uint8_t*>(W.w);
  for (int64_t nb = n0; nb < n1; nb += kRowBlock) {
    const int64_t ne = std::min(nb + kRowBlock, n1);
    for (int64_t m = 0; m < j.m; ++m) {
      const float* xr = j.xp + m * K;
      const float* xs = j.xs + m * xs_stride(ng);
      for (int64_t n = nb; n < ne; ++n) {
        const uint8_t* wr = wbase + n * row_bytes;
        float acc = 0.0f;
        for (int64_t g = 0; g < ng; ++g) {
          float d = 0.0f;
          for (int i = 0; i < G; ++i) {
            const int64_t k = g * G + i;
            d += xr[k] * static_cast<float>(q_at(wr, W.bits, k));
          }
          acc += load_scale(W.scales, W.scale_type, n * ng + g) * d;
        }
        float b = 0.0f;
        for (int64_t g = 0; g < ng; ++g)
          b += load_scale(W.biases, W.scale_type, n * ng + g) * xs[g];
        j.y[m * W.n + n] = acc + b;
      }
    }
  }
}

void dequant_rows_scalar(const AffineMatrix& W, int64_t n0, int64_t n1, float* out) {
  const int64_t k = W.k, ng = k / W.group_size;
  const int64_t row_bytes = k * W.bits / 8;
  const uint8_t* base = reinterpret_cast<const uint8_t*>(W.w);
  for (int64_t n = n0; n < n1; ++n) {
    const uint8_t* row = base + n * row_bytes;
    for (int64_t g = 0; g < ng; ++g) {
      const float s = load_scale(W.scales, W.scale_type, n * ng + g);
      const float b = load_scale(W.biases, W.scale_type, n * ng + g);
      for (int64_t e = g * W.group_size; e < (g + 1) * W.group_size; ++e)
        out[(n - n0) * k + e] = s * float(q_at(row, W.bits, e)) + b;
    }
  }
}

} // namespace detail

namespace {

// AFM_QMM_KERNEL caps what Auto takes (comparisons, and CPUs whose AVX-512
// clocks down).
Path initial_path() {
  const char* k = std::getenv("AFM_QMM_KERNEL");
  if (!k) return Path::Auto;
  const std::string v(k);
  if (v == "avx2") return Path::Avx2;
  if (v == "scalar" || v == "portable") return Path::Scalar;
  return Path::Auto;
}

std::atomic<int> g_default_path{int(initial_path())};
struct Split {
  const detail::Job* job;
  Path path; // resolved
  int tasks;
  int64_t n;
};

void run_task(void* ctx, int t) {
  const Split& s = *static_cast<const Split*>(ctx);
  // Contiguous row ranges on kRowBlock boundaries: the split never cuts a
  // block, and no output's arithmetic depends on which task computes it.
  const int64_t blocks = (s.n + detail::kRowBlock - 1) / detail::kRowBlock;
  const int64_t b0 = blocks * t / s.tasks;
  const int64_t b1 = blocks * (t + 1) / s.tasks;
  const int64_t n0 = b0 * detail::kRowBlock;
  const int64_t n1 = std::min(s.n, b1 * detail::kRowBlock);
  if (n0 >= n1) return;
#if defined(__x86_64__)
  if (s.path == Path::Avx512) return detail::rows_avx512(*s.job, n0, n1);
  if (s.path == Path::Avx2) return detail::rows_avx2(*s.job, n0, n1);
#endif
  detail::rows_scalar(*s.job, n0, n1);
}

} // namespace

bool supported(int bits, int group_size, int64_t k) {
  if (bits != 4 && bits != 8) return false;
  if (group_size != 16 && group_size != 32 && group_size != 64 && group_size != 128) return false;
  return k > 0 && k % group_size == 0;
}

bool avx2_available() {
#if defined(__x86_64__)
  static const bool ok = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
        __builtin_cpu_supports("f16c");
  }();
  return ok;
#else
  return false;
#endif
}

bool avx512_available() {
#if defined(__x86_64__)
  static const bool ok = [] {
    __builtin_cpu_init();
    return avx2_available() && __builtin_cpu_supports("avx512f");
  }();
  return ok;
#else
  return false;
#endif
}

Path resolve_path(Path requested) {
  if (requested == Path::Auto) requested = default_path();
  if (requested == Path::Auto) requested = Path::Avx512;
  if (requested == Path::Avx512 && !avx512_available()) requested = Path::Avx2;
  if (requested == Path::Avx2 && !avx2_available()) requested = Path::Scalar;
  return requested;
}

bool simd(Path p) {
  return resolve_path(p) != Path::Scalar;
}

void set_default_path(Path p) {
  g_default_path.store(int(p));
}

Path default_path() {
  return Path(g_default_path.load());
}

void matmul(const float* x, int64_t m, const AffineMatrix& w, float* y, Path path) {
  if (!supported(w.bits, w.group_size, w.k))
    throw std::invalid_argument(
        "affine qmm: bits must be 4 or 8, group size 16/32/64/128 dividing K (bits=" +
        std::to_string(w.bits) + ", group_size=" + std::to_string(w.group_size) +
        ", K=" + std::to_string(w.k) + ")");
  if (m <= 0 || w.n <= 0) return;
  Path kernel = resolve_path(path);
  // The AVX-512 kernel steps through groups 32 values at a time; groups of
  // 16 (GGUF's Q6_K) take the AVX2 one.
  if (kernel == Path::Avx512 && w.group_size < 32) kernel = Path::Avx2;

  // Per calling thread, reused across calls: the prepared x is M*K floats.
  thread_local std::vector<float> xp_scratch, xs_scratch;
  const int64_t ng = w.k / w.group_size;
  // The SIMD kernels always read x from the scratch, 64-byte aligned: the
  // AVX-512 one's 64-byte loads from a row that is not run at about 3/4 of
  // the speed (every one spans two cache lines).
  const bool xp_copy = kernel != Path::Scalar;
  if (xp_copy && xp_scratch.size() < size_t(m * w.k + 16)) xp_scratch.resize(m * w.k + 16);
  float* xp = reinterpret_cast<float*>((reinterpret_cast<uintptr_t>(xp_scratch.data()) + 63) & ~uintptr_t(63));
  const int64_t xs_len = m * detail::xs_stride(ng);
  if (xs_scratch.size() < size_t(xs_len)) xs_scratch.resize(xs_len);

  detail::Job job;
  job.m = m;
  job.w = &w;
  job.y = y;
  job.xs = xs_scratch.data();
#if defined(__x86_64__)
  job.xp = kernel == Path::Avx512 ? detail::prepare_avx512(x, m, w, xp, xs_scratch.data())
      : kernel == Path::Avx2      ? detail::prepare_avx2(x, m, w, xp, xs_scratch.data())
                             : detail::prepare_scalar(x, m, w, nullptr, xs_scratch.data());
#else
  job.xp = detail::prepare_scalar(x, m, w, nullptr, xs_scratch.data());
#endif

  auto pool_ref = shared_pool();
  ThreadPool& p = *pool_ref;
  // Below ~64K multiply-adds a second thread's wake-up costs more than it saves.
  const int64_t macs = m * w.n * w.k;
  const int64_t blocks = (w.n + detail::kRowBlock - 1) / detail::kRowBlock;
  // A few tasks per thread: a worker that wakes late (another process on
  // its core) leaves its share to the others instead of stalling the call.
  int tasks = macs < (int64_t(1) << 16) ? 1 : 4 * p.size();
  tasks = int(std::min<int64_t>(tasks, blocks));
  Split split{&job, kernel, tasks, w.n};
  p.run(tasks, run_task, &split);
}

namespace {

// cblas_sgemm's signature and the CBLAS enum values it takes.
using Sgemm = void (*)(int, int, int, int, int, int, float, const float*, int, const float*, int,
                       float, float*, int);
constexpr int kRowMajor = 101, kNoTrans = 111, kTrans = 112;

Sgemm sgemm() {
  static const Sgemm f = reinterpret_cast<Sgemm>(dlsym(RTLD_DEFAULT, "cblas_sgemm"));
  return f;
}

} // namespace

bool sgemm_available() {
  return sgemm() != nullptr;
}

void dequantize_rows(const AffineMatrix& w, const uint32_t* ids, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) {
    float* row = out + i * w.k;
    if (ids[i] >= uint64_t(w.n)) std::fill(row, row + w.k, std::numeric_limits<float>::quiet_NaN());
    else detail::dequant_rows_scalar(w, ids[i], ids[i] + 1, row);
  }
}

void matmul_dequant_sgemm(const float* x, int64_t m, const AffineMatrix& w, float* y, Path path) {
  if (!supported(w.bits, w.group_size, w.k))
    throw std::invalid_argument("affine qmm: unsupported format for the sgemm path");
  const Sgemm gemm = sgemm();
  if (!gemm) throw std::runtime_error("affine qmm: no cblas_sgemm in the process");
  if (m <= 0 || w.n <= 0) return;
  const bool avx2 = simd(path);
  // Tiles of W rows of about 1 MB of f32: they stay in cache between the
  // dequantization and the product that reads them.
  const int64_t tile = std::max<int64_t>(64, std::min<int64_t>(w.n, (int64_t(1) << 18) / w.k));
  thread_local std::vector<float> buf;
  if (buf.size() < size_t(tile * w.k)) buf.resize(tile * w.k);
  for (int64_t n0 = 0; n0 < w.n; n0 += tile) {
    const int64_t n1 = std::min(w.n, n0 + tile);
#if defined(__x86_64__)
    if (avx2) detail::dequant_rows_avx2(w, n0, n1, buf.data());
    else detail::dequant_rows_scalar(w, n0, n1, buf.data());
#else
    (void)avx2;
    detail::dequant_rows_scalar(w, n0, n1, buf.data());
#endif
    // y[:, n0:n1] = x · tileᵀ
    gemm(kRowMajor, kNoTrans, kTrans, int(m), int(n1 - n0), int(w.k), 1.0f, x, int(w.k),
         buf.data(), int(w.k), 0.0f, y + n0, int(w.n));
  }
}

} // namespace afm::qmm
