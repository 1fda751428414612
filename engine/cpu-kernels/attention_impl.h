// Shared between the attention dispatcher (attention.cpp) and its per-ISA
// kernel files, which are compiled with different target flags.
#pragma once

#include <cstdint>

#include "attention.h"

namespace afm::attn::detail {

// The keys query (item i, position offsets[i] + l) sees: [first, first + count).
struct Visible {
  int64_t first, count;
};

inline Visible visible(const Problem& p, int64_t i, int64_t l) {
  const int64_t pos = int64_t(p.offsets[i]) + l;
  const int64_t first = p.window > 0 && pos + 1 > p.window ? pos + 1 - p.window : 0;
  return {first, pos + 1 - first};
}

// Floats of score scratch per row: its visible keys (at most `capacity`),
// and slack for the AVX-512 tiles, which run every row of a tile to the
// tile's longest (a query block's positions) in whole groups of 4 keys.
inline int64_t score_stride(const Problem& p) {
  return p.capacity + 16;
}

// Output row (item i, query l, head h); `scores` has room for `capacity`
// floats.
void row_scalar(const Problem& p, int64_t i, int64_t l, int64_t h, float* scores);

// Output rows of item i's queries [l0, l1) in every head of KV group g,
// each with the same bits as computed alone; `scores` has room for
// `capacity` floats per row, `acc` for `d` per row.
void rows_avx2(const Problem& p, int64_t i, int64_t l0, int64_t l1, int64_t g, float* scores,
               float* acc);

// rows_avx2's outputs by AVX-512 tiles of rows (d % 16 == 0): other bits
// than rows_avx2's, with the same guarantees; `scores` has room for
// score_stride(p) floats per row.
void rows_avx512(const Problem& p, int64_t i, int64_t l0, int64_t l1, int64_t g, float* scores,
                 float* acc);

} // namespace afm::attn::detail
