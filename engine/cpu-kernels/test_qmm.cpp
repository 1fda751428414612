// Correctness and batch-invariance checks for AffineQmm against MLX's own
// quantized_matmul and a dequantize-then-matmul, all through MLX's lazy
// graph on the CPU stream. Exits non-zero on any failure.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "mlx/mlx.h"
#include "primitive.h"
#include "qmm_affine.h"
#include "thread_pool.h"

namespace mx = mlx::core;
using afm::qmm::Path;

namespace {

int g_failures = 0;

void check(bool ok, const std::string& what) {
  if (!ok) {
    ++g_failures;
    std::printf("FAIL: %s\n", what.c_str());
  }
}

std::vector<float> host(const mx::array& a_in) {
  auto a = mx::contiguous(mx::astype(a_in, mx::float32));
  mx::eval(a);
  const float* p = a.data<float>();
  return std::vector<float>(p, p + a.size());
}

float max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  float m = 0.0f;
  for (size_t i = 0; i < a.size(); ++i) m = std::fmax(m, std::fabs(a[i] - b[i]));
  return m;
}

float max_abs(const std::vector<float>& a) {
  float m = 0.0f;
  for (float v : a) m = std::fmax(m, std::fabs(v));
  return m;
}

bool bit_equal(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

const char* path_name(Path p) {
  return p == Path::Avx512 ? "avx512" : p == Path::Avx2 ? "avx2" : "scalar";
}

struct Quantized {
  mx::array w, scales, biases;
};

Quantized make_weights(int N, int K, int group, int bits) {
  auto wf = mx::random::normal({N, K}, mx::float32, 0.0f, 0.05f);
  auto q = mx::quantize(wf, group, bits, "affine");
  mx::eval(q);
  return {q[0], q[1], q[2]};
}

// Row i of an M-row product must equal the 1-row product of that row, bit
// for bit, whatever M (tiles of 4, 2+2, 1x4 and the thread split differ).
bool batch_invariant(const mx::array& X, const Quantized& q, int group, int bits, int M, int K) {
  auto xm = mx::slice(X, {0, 0}, {M, K});
  auto ym = host(afm::affine_qmm(xm, q.w, q.scales, q.biases, group, bits));
  const int N = q.w.shape(0);
  for (int i = 0; i < M; ++i) {
    auto y1 = host(afm::affine_qmm(mx::slice(X, {i, 0}, {i + 1, K}), q.w, q.scales, q.biases, group, bits));
    if (std::memcmp(y1.data(), ym.data() + size_t(i) * N, N * sizeof(float)) != 0) return false;
  }
  return true;
}

} // namespace

int main() {
  mx::random::seed(7);
  const bool avx2 = afm::qmm::avx2_available();
  std::printf("MLX %s, AVX2+FMA kernel %s, %d threads\n", mx::version(),
              avx2 ? "available" : "unavailable", afm::qmm::num_threads());

  // K divisible by 128 so every group size applies; N not a multiple of 4
  // or 16 so the row tails are exercised.
  const int K = 640, N = 389;
  auto X = mx::random::normal({32, K}, mx::float32, 0.0f, 1.0f);
  mx::eval(X);

  std::vector<Path> paths{Path::Scalar};
  if (avx2) paths.push_back(Path::Avx2);
  if (afm::qmm::avx512_available()) paths.push_back(Path::Avx512);

  std::printf("\n%-6s %-4s %-5s %-3s %12s %14s %14s %10s\n", "path", "bits", "group", "M", "max|y|",
              "vs qmm", "vs deq+matmul", "invariant");
  for (Path path : paths) {
    afm::qmm::set_default_path(path);
    for (int bits : {4, 8}) {
      for (int group : {32, 64, 128}) {
        auto q = make_weights(N, K, group, bits);
        auto deq_t = mx::transpose(mx::dequantize(q.w, q.scales, q.biases, group, bits, "affine"));
        for (int M : {1, 8, 32}) {
          auto x = mx::slice(X, {0, 0}, {M, K});
          auto ours = host(afm::affine_qmm(x, q.w, q.scales, q.biases, group, bits));
          auto ref_q = host(mx::quantized_matmul(x, q.w, q.scales, q.biases, true, group, bits, "affine"));
          auto ref_d = host(mx::matmul(x, deq_t));
          float scale = max_abs(ref_d);
          float dq = max_abs_diff(ours, ref_q), dd = max_abs_diff(ours, ref_d);
          // f32 sums of K=640 terms in different orders: a few ulps of the
          // largest partial sums.
          float tol = 2e-5f * std::fmax(1.0f, scale);
          bool inv = batch_invariant(X, q, group, bits, M, K);
          std::printf("%-6s %-4d %-5d %-3d %12.4f %14.3e %14.3e %10s\n", path_name(path), bits, group, M,
                      scale, dq, dd, inv ? "bitwise" : "NO");
          check(dq <= tol && dd <= tol, std::string(path_name(path)) + " accuracy bits=" +
                    std::to_string(bits) + " group=" + std::to_string(group) + " M=" + std::to_string(M));
          check(inv, std::string(path_name(path)) + " batch invariance bits=" + std::to_string(bits) +
                    " group=" + std::to_string(group) + " M=" + std::to_string(M));
        }
        // Odd M hits the 2x2, 3x1 and 1x4 remainder tiles after the 4x1 ones.
        for (int M : {2, 3, 5, 6, 7}) {
          check(batch_invariant(X, q, group, bits, M, K),
                std::string(path_name(path)) + " batch invariance (remainder tiles) bits=" +
                    std::to_string(bits) + " group=" + std::to_string(group) + " M=" + std::to_string(M));
        }
      }
    }
  }
  afm::qmm::set_default_path(Path::Auto);

  std::printf("\nother checks (bits 4, group 64 unless stated)\n");
  auto q = make_weights(N, K, 64, 4);
  auto x8 = mx::slice(X, {0, 0}, {8, K});
  auto base = host(afm::affine_qmm(x8, q.w, q.scales, q.biases, 64, 4));

  // f16/bf16 scales and biases: the kernel widens them exactly, so the
  // result must match f32 copies of the same values bit for bit.
  for (auto dt : {mx::float16, mx::bfloat16}) {
    auto s16 = mx::astype(q.scales, dt), b16 = mx::astype(q.biases, dt);
    auto y16 = host(afm::affine_qmm(x8, q.w, s16, b16, 64, 4));
    auto y32 = host(afm::affine_qmm(x8, q.w, mx::astype(s16, mx::float32), mx::astype(b16, mx::float32), 64, 4));
    bool eq = bit_equal(y16, y32);
    std::printf("  %s scales/biases == their f32 widening: %s\n", dt == mx::float16 ? "f16 " : "bf16",
                eq ? "bitwise" : "NO");
    check(eq, "half-precision scales");
  }

  // Non-contiguous x (a transposed view) and batched x [2, 4, K].
  {
    auto xt = mx::transpose(mx::contiguous(mx::transpose(x8)));
    mx::eval(xt);
    bool noncontig = !xt.flags().row_contiguous;
    auto y = host(afm::affine_qmm(xt, q.w, q.scales, q.biases, 64, 4));
    std::printf("  transposed-view x (row_contiguous=%d): %s\n", int(!noncontig),
                bit_equal(y, base) ? "bitwise" : "NO");
    check(noncontig && bit_equal(y, base), "non-contiguous x");
    auto yb = afm::affine_qmm(mx::reshape(x8, {2, 4, K}), q.w, q.scales, q.biases, 64, 4);
    bool shape_ok = yb.shape() == mx::Shape{2, 4, N};
    bool eq = bit_equal(host(yb), base);
    std::printf("  batched x [2,4,K] -> [2,4,N]: shape %s, values %s\n", shape_ok ? "ok" : "WRONG",
                eq ? "bitwise" : "NO");
    check(shape_ok && eq, "batched x");
    // f16 activations are widened to f32 first.
    auto yh = host(afm::affine_qmm(mx::astype(x8, mx::float16), q.w, q.scales, q.biases, 64, 4));
    auto yh_ref = host(afm::affine_qmm(mx::astype(mx::astype(x8, mx::float16), mx::float32), q.w, q.scales,
                                       q.biases, 64, 4));
    check(bit_equal(yh, yh_ref), "f16 x");
  }

  // Thread count changes which thread computes a row, never its value.
  {
    afm::qmm::set_num_threads(1);
    auto y1 = host(afm::affine_qmm(x8, q.w, q.scales, q.biases, 64, 4));
    afm::qmm::set_num_threads(2);
    auto y2 = host(afm::affine_qmm(x8, q.w, q.scales, q.biases, 64, 4));
    std::printf("  1 thread vs 2 threads: %s\n", bit_equal(y1, y2) ? "bitwise" : "NO");
    check(bit_equal(y1, y2) && bit_equal(y1, base), "thread-count invariance");
  }

  // Inside a larger graph, fused with other ops, evaluated once.
  {
    auto y = mx::add(afm::affine_qmm(mx::multiply(x8, mx::array(2.0f)), q.w, q.scales, q.biases, 64, 4),
                     mx::array(1.0f));
    auto ref = mx::add(mx::quantized_matmul(mx::multiply(x8, mx::array(2.0f)), q.w, q.scales, q.biases, true,
                                            64, 4, "affine"),
                       mx::array(1.0f));
    float d = max_abs_diff(host(y), host(ref));
    std::printf("  inside a graph (2x -> qmm -> +1) vs MLX: %.3e\n", d);
    check(d < 1e-3f, "graph composition");
  }

  // The C entry point with mlx-c-layout handles.
  {
    afm_mlx_array x{new mx::array(x8)}, w{new mx::array(q.w)}, s{new mx::array(q.scales)},
        b{new mx::array(q.biases)}, res{nullptr};
    int rc = afm_affine_qmm(&res, x, w, s, b, 64, 4, 0, afm_mlx_stream{nullptr});
    bool ok = rc == 0 && res.ctx && bit_equal(host(*static_cast<mx::array*>(res.ctx)), base);
    // Reusing a non-empty result handle overwrites it in place.
    int rc2 = afm_affine_qmm(&res, x, w, s, b, 64, 4, 0, afm_mlx_stream{nullptr});
    ok = ok && rc2 == 0 && bit_equal(host(*static_cast<mx::array*>(res.ctx)), base);
    afm_mlx_array bad{nullptr};
    int rc3 = afm_affine_qmm(&bad, x, w, s, b, 64, 3, 0, afm_mlx_stream{nullptr});
    std::printf("  C API: ok=%d, bad bits -> rc=%d \"%s\"\n", int(ok), rc3, afm_qmm_last_error());
    check(ok && rc3 == 1 && bad.ctx == nullptr && std::strlen(afm_qmm_last_error()) > 0, "C API");
    for (auto* h : {&x, &w, &s, &b, &res}) delete static_cast<mx::array*>(h->ctx);
  }

  // The scalar and AVX2 paths agree to rounding (their orders differ).
  if (avx2) {
    afm::qmm::set_default_path(Path::Scalar);
    auto ys = host(afm::affine_qmm(x8, q.w, q.scales, q.biases, 64, 4));
    afm::qmm::set_default_path(Path::Auto);
    float d = max_abs_diff(ys, base);
    std::printf("  scalar vs avx2: %.3e\n", d);
    check(d <= 2e-5f * std::fmax(1.0f, max_abs(base)), "scalar vs avx2");
  }

  std::printf("\n%s (%d failure%s)\n", g_failures ? "FAILED" : "PASSED", g_failures, g_failures == 1 ? "" : "s");
  return g_failures ? 1 : 0;
}
