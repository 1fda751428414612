// The quantized-matmul primitives of primitive.h: AffineQmm, GatherAffineQmm
// (routed experts) and EmbeddingRows (a packed embedding's rows).
#include "primitive.h"

#include <array>
#include <cstring>
#include <stdexcept>
#include <string>

#include "mlx/allocator.h"
#include "mlx/backend/cpu/encoder.h"
#include "mlx/ops.h"
#include "mlx/transforms.h"
#include "qmm_affine.h"
#include "qmm_gather.h"
#include "primitive_support.h"

namespace afm {

mx::array affine_qmm(
    const mx::array& x_in,
    const mx::array& w,
    const mx::array& scales,
    const mx::array& biases,
    int group_size,
    int bits,
    int blas_min_rows,
    mx::StreamOrDevice s) {
  const auto stream = cpu_stream("affine_qmm", s);
  if (x_in.ndim() < 1) throw std::invalid_argument("[affine_qmm] x must have at least one dimension");
  if (w.ndim() != 2) throw std::invalid_argument("[affine_qmm] w must be 2-D");
  check_format("affine_qmm", x_in.shape(-1), w, scales, biases, group_size, bits);
  const int64_t N = w.shape(0);

  auto x = as_f32(x_in, stream);
  auto out_shape = x.shape();
  out_shape.back() = int(N);
  return mx::array(
      std::move(out_shape),
      mx::float32,
      std::make_shared<AffineQmm>(stream, group_size, bits, blas_min_rows),
      {x, w, scales, biases});
}

void AffineQmm::eval_cpu(const std::vector<mx::array>& inputs, std::vector<mx::array>& outputs) {
  auto& out = outputs[0];
  auto& encoder = start_eval(stream(), inputs, out);

  const int64_t K = inputs[0].shape(-1);
  const int64_t M = K ? int64_t(inputs[0].size()) / K : 0;
  qmm::AffineMatrix mat{};
  mat.scale_type = scale_type(inputs[2].dtype());
  mat.n = inputs[1].shape(0);
  mat.k = K;
  mat.bits = bits_;
  mat.group_size = group_size_;

  // Pointers and strides are fixed now; the contents are written by earlier
  // tasks on this stream, so everything that reads them runs in the task.
  // MLX's eval keeps the input buffers alive until the task has run.
  encoder.dispatch([x = view_of(inputs[0]),
                    w = view_of(inputs[1]),
                    sc = view_of(inputs[2]),
                    bi = view_of(inputs[3]),
                    y = out.data<float>(),
                    mat,
                    M,
                    blas = blas_min_rows_ > 0 && M >= blas_min_rows_ && qmm::sgemm_available()]() mutable {
    std::vector<char> xb, wb, sb, bb;
    mat.w = static_cast<const uint32_t*>(dense(w, wb));
    mat.scales = dense(sc, sb);
    mat.biases = dense(bi, bb);
    const float* xd = static_cast<const float*>(dense(x, xb));
    if (blas) qmm::matmul_dequant_sgemm(xd, M, mat, y);
    else qmm::matmul(xd, M, mat, y);
  });
}

void AffineQmm::eval_gpu(const std::vector<mx::array>&, std::vector<mx::array>&) {
  throw std::runtime_error("[AffineQmm] has no GPU implementation; use mx::quantized_matmul on Metal");
}

std::vector<mx::Shape> AffineQmm::output_shapes(const std::vector<mx::array>& inputs) {
  auto shape = inputs[0].shape();
  shape.back() = inputs[1].shape(0);
  return {shape};
}

bool AffineQmm::is_equivalent(const mx::Primitive& other) const {
  auto* o = dynamic_cast<const AffineQmm*>(&other);
  return o && o->group_size_ == group_size_ && o->bits_ == bits_ &&
      o->blas_min_rows_ == blas_min_rows_;
}

mx::array gather_affine_qmm(
    const mx::array& x_in,
    const mx::array& w,
    const mx::array& scales,
    const mx::array& biases,
    const mx::array& indices,
    int group_size,
    int bits,
    int blas_min_rows,
    mx::StreamOrDevice s) {
  const auto stream = cpu_stream("gather_affine_qmm", s);
  if (x_in.ndim() != 2) throw std::invalid_argument("[gather_affine_qmm] x must be [R, K]");
  if (w.ndim() != 3) throw std::invalid_argument("[gather_affine_qmm] w must be [E, N, K * bits / 32]");
  if (indices.ndim() != 2 || indices.shape(0) != x_in.shape(0))
    throw std::invalid_argument("[gather_affine_qmm] indices must be [R, J] for x's R rows");
  if (indices.dtype() != mx::uint32 && indices.dtype() != mx::int32)
    throw std::invalid_argument("[gather_affine_qmm] indices must be uint32 or int32");
  check_format("gather_affine_qmm", x_in.shape(-1), w, scales, biases, group_size, bits);
  auto x = as_f32(x_in, stream);
  return mx::array(
      mx::Shape{x.shape(0), indices.shape(1), w.shape(1)},
      mx::float32,
      std::make_shared<GatherAffineQmm>(stream, group_size, bits, blas_min_rows),
      {x, w, scales, biases, indices});
}

void GatherAffineQmm::eval_cpu(const std::vector<mx::array>& inputs, std::vector<mx::array>& outputs) {
  auto& out = outputs[0];
  auto& encoder = start_eval(stream(), inputs, out);

  qmm::AffineStack stack{};
  stack.first.scale_type = scale_type(inputs[2].dtype());
  stack.first.n = inputs[1].shape(1);
  stack.first.k = inputs[0].shape(1);
  stack.first.bits = bits_;
  stack.first.group_size = group_size_;
  stack.experts = inputs[1].shape(0);
  encoder.dispatch([x = view_of(inputs[0]),
                    w = view_of(inputs[1]),
                    sc = view_of(inputs[2]),
                    bi = view_of(inputs[3]),
                    ids = view_of(inputs[4]),
                    y = out.data<float>(),
                    stack,
                    blas_min_rows = blas_min_rows_]() mutable {
    std::vector<char> xb, wb, sb, bb, ib;
    stack.first.w = static_cast<const uint32_t*>(dense(w, wb));
    stack.first.scales = dense(sc, sb);
    stack.first.biases = dense(bi, bb);
    // int32 ids are read as uint32: a negative one is out of range either way.
    const auto* e = static_cast<const uint32_t*>(dense(ids, ib));
    qmm::gather_matmul(static_cast<const float*>(dense(x, xb)), x.shape[0], e, ids.shape[1], stack, y,
                       blas_min_rows);
  });
}

mx::array embedding_rows(const mx::array& ids, const mx::array& w, const mx::array& scales,
                         const mx::array& biases, int group_size, int bits, mx::StreamOrDevice s) {
  const auto stream = cpu_stream("embedding_rows", s);
  if (ids.dtype() != mx::uint32 && ids.dtype() != mx::int32)
    throw std::invalid_argument("[embedding_rows] ids must be uint32 or int32");
  if (w.ndim() != 2) throw std::invalid_argument("[embedding_rows] w must be [V, K * bits / 32]");
  const int64_t k = int64_t(w.shape(1)) * 32 / (bits > 0 ? bits : 32);
  check_format("embedding_rows", k, w, scales, biases, group_size, bits);
  auto shape = ids.shape();
  shape.push_back(int(k));
  return mx::array(std::move(shape), mx::float32, std::make_shared<EmbeddingRows>(stream, group_size, bits),
                   {ids, w, scales, biases});
}

void EmbeddingRows::eval_cpu(const std::vector<mx::array>& inputs, std::vector<mx::array>& outputs) {
  auto& out = outputs[0];
  auto& encoder = start_eval(stream(), inputs, out);
  qmm::AffineMatrix m{};
  m.scale_type = scale_type(inputs[2].dtype());
  m.n = inputs[1].shape(0);
  m.k = out.shape(-1);
  m.bits = bits_;
  m.group_size = group_size_;
  encoder.dispatch([ids = view_of(inputs[0]), w = view_of(inputs[1]), sc = view_of(inputs[2]),
                    bi = view_of(inputs[3]), y = out.data<float>(), n = int64_t(inputs[0].size()), m]() mutable {
    std::vector<char> ib, wb, sb, bb;
    m.w = static_cast<const uint32_t*>(dense(w, wb));
    m.scales = dense(sc, sb);
    m.biases = dense(bi, bb);
    // int32 ids are read as uint32: a negative one is out of range either way.
    qmm::dequantize_rows(m, static_cast<const uint32_t*>(dense(ids, ib)), n, y);
  });
}

void EmbeddingRows::eval_gpu(const std::vector<mx::array>&, std::vector<mx::array>&) {
  throw std::runtime_error("[AfmEmbeddingRows] has no GPU implementation; the engine takes and dequantizes on Metal");
}

std::vector<mx::Shape> EmbeddingRows::output_shapes(const std::vector<mx::array>& inputs) {
  auto shape = inputs[0].shape();
  shape.push_back(int(int64_t(inputs[1].shape(1)) * 32 / bits_));
  return {shape};
}

bool EmbeddingRows::is_equivalent(const mx::Primitive& other) const {
  auto* o = dynamic_cast<const EmbeddingRows*>(&other);
  return o && o->group_size_ == group_size_ && o->bits_ == bits_;
}

void GatherAffineQmm::eval_gpu(const std::vector<mx::array>&, std::vector<mx::array>&) {
  throw std::runtime_error("[AfmGatherAffineQmm] has no GPU implementation; use mx::gather_qmm on Metal");
}

std::vector<mx::Shape> GatherAffineQmm::output_shapes(const std::vector<mx::array>& inputs) {
  return {mx::Shape{inputs[0].shape(0), inputs[4].shape(1), inputs[1].shape(1)}};
}

bool GatherAffineQmm::is_equivalent(const mx::Primitive& other) const {
  auto* o = dynamic_cast<const GatherAffineQmm*>(&other);
  return o && o->group_size_ == group_size_ && o->bits_ == bits_ &&
      o->blas_min_rows_ == blas_min_rows_;
}

} // namespace afm
