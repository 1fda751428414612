#include "qmm_gather.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <vector>

namespace afm::qmm {
namespace {

size_t scale_bytes(ScaleType t) {
  return t == ScaleType::F32 ? 4 : 2;
}

} // namespace

AffineMatrix expert(const AffineStack& w, int64_t e) {
  const AffineMatrix& m0 = w.first;
  const int64_t words = m0.n * m0.k * m0.bits / 32;
  const size_t sbytes = size_t(m0.n * (m0.k / m0.group_size)) * scale_bytes(m0.scale_type);
  AffineMatrix m = m0;
  m.w = m0.w + e * words;
  m.scales = static_cast<const char*>(m0.scales) + size_t(e) * sbytes;
  m.biases = static_cast<const char*>(m0.biases) + size_t(e) * sbytes;
  return m;
}

void gather_matmul(const float* x, int64_t rows, const uint32_t* experts, int64_t per_row,
                   const AffineStack& w, float* y, int64_t blas_min_rows, Path path) {
  const AffineMatrix& m0 = w.first;
  if (!supported(m0.bits, m0.group_size, m0.k))
    throw std::invalid_argument("gather qmm: unsupported format");
  const int64_t pairs = rows * per_row;
  if (pairs <= 0 || m0.n <= 0) return;

  // Pairs grouped by expert (counting sort, stable: rows keep their order
  // inside a group).
  std::vector<int64_t> start(size_t(w.experts) + 1, 0);
  for (int64_t p = 0; p < pairs; ++p) {
    const int64_t e = experts[p];
    if (e < w.experts) ++start[size_t(e) + 1];
    else std::fill(y + p * m0.n, y + (p + 1) * m0.n, std::numeric_limits<float>::quiet_NaN());
  }
  int64_t largest = 0;
  for (int64_t e = 0; e < w.experts; ++e) {
    largest = std::max(largest, start[size_t(e) + 1]);
    start[size_t(e) + 1] += start[size_t(e)];
  }
  std::vector<int64_t> order(size_t(start[size_t(w.experts)]));
  {
    std::vector<int64_t> next(start.begin(), start.end() - 1);
    for (int64_t p = 0; p < pairs; ++p)
      if (experts[p] < uint64_t(w.experts)) order[size_t(next[experts[p]]++)] = p;
  }

  thread_local std::vector<float> xg, yg;
  if (xg.size() < size_t(largest * m0.k)) xg.resize(size_t(largest * m0.k));
  if (yg.size() < size_t(largest * m0.n)) yg.resize(size_t(largest * m0.n));
  for (int64_t e = 0; e < w.experts; ++e) {
    const int64_t b = start[size_t(e)], c = start[size_t(e) + 1] - b;
    if (c == 0) continue;
    for (int64_t i = 0; i < c; ++i)
      std::memcpy(&xg[size_t(i * m0.k)], x + (order[size_t(b + i)] / per_row) * m0.k,
                  size_t(m0.k) * sizeof(float));
    const AffineMatrix m = expert(w, e);
    if (blas_min_rows > 0 && c >= blas_min_rows && sgemm_available())
      matmul_dequant_sgemm(xg.data(), c, m, yg.data(), path);
    else matmul(xg.data(), c, m, yg.data(), path);
    for (int64_t i = 0; i < c; ++i)
      std::memcpy(y + order[size_t(b + i)] * m0.n, &yg[size_t(i * m0.n)], size_t(m0.n) * sizeof(float));
  }
}

} // namespace afm::qmm
