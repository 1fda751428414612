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

// Output row (item i, query l, head h); `scores` has room for `capacity`
// floats.
void row_scalar(const Problem& p, int64_t i, int64_t l, int64_t h, float* scores);

// Output rows of item i's queries [l0, l1) in every head of KV group g,
// each with the same bits as computed alone; `scores` has room for
// `capacity` floats per row, `acc` for `d` per row.
void rows_avx2(const Problem& p, int64_t i, int64_t l0, int64_t l1, int64_t g, float* scores,
               float* acc);

} // namespace afm::attn::detail
