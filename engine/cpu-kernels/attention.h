// Scaled dot-product attention of query rows over keys and values that stay
// where they lie in a batch KV store, for MLX's CPU backend.
//
// Why: on x86 the mlx-cpu wheel vectorizes nothing (`simd<float, 1>`), so
// MLX's attention spends prefill in a scalar softmax `exp`, and a decode
// group whose slots are not 0..n first gathers every member's keys and
// values into a new array (MLX's scalar `gather`). Here each query row reads
// its own slot in place and the softmax is vectorized.
//
// Each output row is one fixed sequence of operations over its own query,
// its visible keys and values, and nothing else: the same bits whatever the
// other rows of the call, the split into tasks, or how a prompt was chunked
// (batch invariance by construction).
#pragma once

#include <cstdint>

#include "qmm_affine.h"

namespace afm::attn {

// A 4-D f32 array whose last dimension is contiguous: element (a, b, c, e)
// at data[a * s0 + b * s1 + c * s2 + e].
struct Strided4 {
  const float* data;
  int64_t s0, s1, s2;
};

struct Problem {
  Strided4 q; // [n, heads, l, d]
  Strided4 k; // [slots, kv_heads, capacity, d]
  Strided4 v; // same shape as k
  const int32_t* slots; // [n]: the k/v row (dim 0) of each query item
  const int32_t* offsets; // [n]: the position of each item's query 0
  int64_t n, heads, kv_heads, l, d, capacity;
  // Sliding window: a query at position p sees keys max(0, p + 1 - window)
  // ..= p; 0: it sees 0 ..= p.
  int64_t window;
  float scale; // multiplies q · k
  float* out; // [n, l, heads, d], contiguous
};

// out = softmax(scale * q kᵀ over each query's visible keys) v, on the
// process's thread pool. Path::Avx512 needs d % 16 == 0 (else AVX2 runs),
// Path::Avx2 d % 8 == 0 (else the portable path runs). Blocks until done. The caller has checked shapes and positions
// (afm::attention does).
void attend(const Problem& p, qmm::Path path = qmm::Path::Auto);

} // namespace afm::attn
