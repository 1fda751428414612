// y = x · Wᵀ for W in MLX's affine-quantized layout (the output of
// mlx::core::quantize with mode "affine"), computed straight from the packed
// weights so the CPU backend never holds an f32 copy of them.
//
// Layout (MLX's, bits 4 or 8):
//   w       uint32 [N, K * bits / 32]; element k of a row sits at bit
//           (k * bits) % 32 of word (k * bits) / 32, i.e. in memory order the
//           low nibble of a byte comes first for 4 bits.
//   scales  [N, K / group_size] f32, f16 or bf16.
//   biases  same shape and dtype as scales.
//   value   w[n][k] = scales[n][g] * q[n][k] + biases[n][g], g = k / group_size.
//
// Each output is reduced in an order fixed by (bits, group_size, K) and the
// code path alone, never by M or the thread count, so a row of x gives the
// same bits whatever else is in the batch.
#pragma once

#include <cstdint>

namespace afm::qmm {

enum class ScaleType : int { F32 = 0, F16 = 1, BF16 = 2 };

// Kernel selection; Auto takes the widest the CPU has: AVX-512 (F, with FMA
// and F16C), else AVX2+FMA, else the portable one. AFM_QMM_KERNEL=avx2 (or
// scalar) caps Auto. Kernels that exist only for AVX2 (the gated
// activation, the dequantizing prefill path) run it on both SIMD paths;
// attention has both forms.
enum class Path : int { Auto = 0, Scalar = 1, Avx2 = 2, Avx512 = 3 };

struct AffineMatrix {
  const uint32_t* w;
  const void* scales;
  const void* biases;
  ScaleType scale_type;
  int64_t n; // output features (rows of W)
  int64_t k; // input features
  int bits; // 4 or 8
  int group_size; // 16 (GGUF's Q6_K; no AVX-512 form), 32, 64 or 128
};

// True when (bits, group_size, k) is a combination the kernels handle.
bool supported(int bits, int group_size, int64_t k);

// True when this CPU can run the AVX2+FMA(+F16C) path.
bool avx2_available();

// True when this CPU can run the AVX-512 path (AVX-512F with FMA, F16C).
bool avx512_available();

// Whether `p` resolves to a SIMD path (AVX2 or AVX-512) on this CPU: the
// test of the kernels that only have an AVX2 form.
bool simd(Path p);

// The path a call with `requested` would take on this CPU.
Path resolve_path(Path requested);

// Process-wide default for Path::Auto callers (tests force one path).
void set_default_path(Path p);
Path default_path();

// x: [m, k] f32 row-major; y: [m, n] f32 row-major. Blocks until done.
// Throws std::invalid_argument for unsupported shapes.
void matmul(
    const float* x,
    int64_t m,
    const AffineMatrix& w,
    float* y,
    Path path = Path::Auto);

// Rows `ids[0..n)` of W dequantized into out ([n, k] f32): scale · q + bias
// in f32, as MLX's dequantize computes it with f32 scales (a token
// embedding's lookup). An id outside [0, n) of W gives a row of NaN.
void dequantize_rows(const AffineMatrix& w, const uint32_t* ids, int64_t n, float* out);

// Whether the process has a CBLAS sgemm (the BLAS libmlx uses is loaded
// with it; looked up once with dlsym).
bool sgemm_available();

// y = x · Wᵀ by dequantizing tiles of W to f32 and multiplying them with
// the BLAS sgemm: faster than matmul() for many rows of x (prefill), where
// the product is compute-bound. Rounding follows BLAS, which picks its
// kernels by shape, so a row's result may depend on the other rows: never
// for batch-invariant callers. Requires sgemm_available().
void matmul_dequant_sgemm(const float* x, int64_t m, const AffineMatrix& w, float* y,
                          Path path = Path::Auto);

} // namespace afm::qmm
