#include "primitive.h"

#include <array>
#include <cstring>
#include <stdexcept>
#include <string>
#include <unordered_set>

#include "mlx/allocator.h"
#include "mlx/backend/cpu/encoder.h"
#include "mlx/ops.h"
#include "mlx/transforms.h"
#include "mlx/version.h"
#include "attention.h"
#include "delta_net.h"
#include "glu.h"
#include "layer.h"
#include "qmm_affine.h"
#include "qmm_gather.h"
#include "thread_pool.h"

namespace afm {
namespace {

qmm::ScaleType scale_type(mx::Dtype d) {
  if (d == mx::float32) return qmm::ScaleType::F32;
  if (d == mx::float16) return qmm::ScaleType::F16;
  if (d == mx::bfloat16) return qmm::ScaleType::BF16;
  throw std::invalid_argument("[affine_qmm] scales and biases must be float32, float16 or bfloat16");
}

// A dense row-major copy of an array viewed through arbitrary strides
// (transposes, slices, broadcasts). MLX's own contiguous-copy helper is not
// exported from libmlx, and the data is only valid once earlier tasks on the
// stream have run, so this runs inside the dispatched task.
struct View {
  const char* data;
  size_t itemsize;
  bool contiguous;
  mx::Shape shape;
  mx::Strides strides;
};

View view_of(const mx::array& a) {
  return View{
      a.data<char>(),
      a.itemsize(),
      static_cast<bool>(a.flags().row_contiguous),
      a.shape(),
      a.strides()};
}

const void* dense(const View& v, std::vector<char>& buf) {
  if (v.contiguous) return v.data;
  size_t total = 1;
  for (auto d : v.shape) total *= size_t(d);
  buf.resize(total * v.itemsize);
  const int nd = int(v.shape.size());
  std::vector<int64_t> idx(nd, 0);
  char* out = buf.data();
  for (size_t e = 0; e < total; ++e) {
    int64_t off = 0;
    for (int d = 0; d < nd; ++d) off += idx[d] * v.strides[d];
    std::memcpy(out + e * v.itemsize, v.data + off * int64_t(v.itemsize), v.itemsize);
    for (int d = nd - 1; d >= 0; --d) {
      if (++idx[d] < v.shape[d]) break;
      idx[d] = 0;
    }
  }
  return buf.data();
}

// The stream of an op: a CPU one (the kernels have no GPU form), or an
// error naming the op.
mx::Stream cpu_stream(const char* op, mx::StreamOrDevice s) {
  auto stream = mx::to_stream(s);
  if (!(stream.device == mx::Device::cpu))
    throw std::invalid_argument(std::string("[") + op + "] only CPU streams are supported");
  return stream;
}

// x as the kernels read it: f32 (other float types are cast lazily).
mx::array as_f32(const mx::array& x, const mx::Stream& stream) {
  return x.dtype() == mx::float32 ? x : mx::astype(x, mx::float32, stream);
}

// How every eval_cpu here starts: the output allocated, the arrays
// registered with the stream's encoder (which keeps them alive until the
// dispatched task has run).
mx::cpu::CommandEncoder& start_eval(const mx::Stream& stream, const std::vector<mx::array>& inputs,
                                    mx::array& out) {
  out.set_data(mx::allocator::malloc(out.nbytes()));
  auto& encoder = mx::cpu::get_command_encoder(stream);
  for (auto& in : inputs) encoder.set_input_array(in);
  encoder.set_output_array(out);
  return encoder;
}

// The checks shared by the matmul and its gather form: w holds `bits`-bit
// rows of K values (its last axis), scales and biases one value per group of
// each row, same leading axes as w.
void check_format(const char* op, int64_t K, const mx::array& w, const mx::array& scales,
                  const mx::array& biases, int group_size, int bits) {
  const std::string at = std::string("[") + op + "] ";
  if (w.dtype() != mx::uint32) throw std::invalid_argument(at + "w must be uint32");
  if (!qmm::supported(bits, group_size, K))
    throw std::invalid_argument(at + "bits must be 4 or 8 and group_size 16, 32, 64 or 128 dividing K");
  if (int64_t(w.shape(-1)) * 32 / bits != K)
    throw std::invalid_argument(at + "w's packed width does not match x's last dimension");
  auto gshape = w.shape();
  gshape.back() = int(K / group_size);
  if (scales.shape() != gshape || biases.shape() != gshape)
    throw std::invalid_argument(at + "scales and biases must be w's shape with K / group_size last");
  if (scales.dtype() != biases.dtype())
    throw std::invalid_argument(at + "scales and biases must share a dtype");
  scale_type(scales.dtype());
}

} // namespace

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

mx::array attention(
    const mx::array& q_in,
    const mx::array& k,
    const mx::array& v,
    std::vector<int32_t> slots,
    std::vector<int32_t> offsets,
    int window,
    float scale,
    mx::StreamOrDevice s) {
  const auto stream = cpu_stream("attention", s);
  if (q_in.ndim() != 4 || k.ndim() != 4 || v.ndim() != 4)
    throw std::invalid_argument("[attention] q, k and v must be 4-D");
  if (k.shape() != v.shape()) throw std::invalid_argument("[attention] k and v must have one shape");
  if (k.dtype() != mx::float32 || v.dtype() != mx::float32)
    throw std::invalid_argument("[attention] k and v must be float32");
  if (q_in.shape(3) != k.shape(3)) throw std::invalid_argument("[attention] q and k head sizes differ");
  if (int64_t(slots.size()) != q_in.shape(0) || offsets.size() != slots.size())
    throw std::invalid_argument("[attention] one slot and one offset per query item");
  if (q_in.shape(1) % k.shape(1) != 0)
    throw std::invalid_argument("[attention] query heads must be a multiple of KV heads");
  for (size_t i = 0; i < slots.size(); ++i) {
    if (slots[i] < 0 || slots[i] >= k.shape(0))
      throw std::invalid_argument("[attention] a slot is outside the KV store");
    if (offsets[i] < 0 || int64_t(offsets[i]) + q_in.shape(2) > k.shape(2))
      throw std::invalid_argument("[attention] a query's position is past the keys' capacity");
  }
  if (window < 0) throw std::invalid_argument("[attention] negative window");
  auto q = as_f32(q_in, stream);
  mx::Shape out_shape{q.shape(0), q.shape(2), q.shape(1), q.shape(3)};
  return mx::array(
      std::move(out_shape),
      mx::float32,
      std::make_shared<Attention>(stream, std::move(slots), std::move(offsets), window, scale),
      {q, k, v});
}

namespace {

// The strides of a 4-D view for the kernel, or a dense copy into `buf` when
// its last dimension is not contiguous.
attn::Strided4 strided4(const View& v, std::vector<char>& buf) {
  if (v.strides[3] == 1) return {reinterpret_cast<const float*>(v.data), v.strides[0], v.strides[1], v.strides[2]};
  const float* d = static_cast<const float*>(dense(v, buf));
  const int64_t s2 = v.shape[3], s1 = s2 * v.shape[2], s0 = s1 * v.shape[1];
  return {d, s0, s1, s2};
}

} // namespace

void Attention::eval_cpu(const std::vector<mx::array>& inputs, std::vector<mx::array>& outputs) {
  auto& out = outputs[0];
  auto& encoder = start_eval(stream(), inputs, out);

  const auto& q = inputs[0];
  const auto& k = inputs[1];
  attn::Problem p{};
  p.n = q.shape(0);
  p.heads = q.shape(1);
  p.l = q.shape(2);
  p.d = q.shape(3);
  p.kv_heads = k.shape(1);
  p.capacity = k.shape(2);
  p.window = window_;
  p.scale = scale_;
  p.out = out.data<float>();
  encoder.dispatch([p,
                    q = view_of(inputs[0]),
                    k = view_of(inputs[1]),
                    v = view_of(inputs[2]),
                    slots = slots_,
                    offsets = offsets_]() mutable {
    std::vector<char> qb, kb, vb;
    p.q = strided4(q, qb);
    p.k = strided4(k, kb);
    p.v = strided4(v, vb);
    p.slots = slots.data();
    p.offsets = offsets.data();
    attn::attend(p);
  });
}

void Attention::eval_gpu(const std::vector<mx::array>&, std::vector<mx::array>&) {
  throw std::runtime_error("[AfmAttention] has no GPU implementation; use mx::fast::scaled_dot_product_attention on Metal");
}

std::vector<mx::Shape> Attention::output_shapes(const std::vector<mx::array>& inputs) {
  const auto& q = inputs[0];
  return {mx::Shape{q.shape(0), q.shape(2), q.shape(1), q.shape(3)}};
}

bool Attention::is_equivalent(const mx::Primitive& other) const {
  auto* o = dynamic_cast<const Attention*>(&other);
  return o && o->slots_ == slots_ && o->offsets_ == offsets_ && o->window_ == window_ &&
      o->scale_ == scale_;
}

mx::array gated_activation(const mx::array& gate, const mx::array& up, int act, mx::StreamOrDevice s) {
  const auto stream = cpu_stream("gated_activation", s);
  if (act != int(glu::Act::Silu) && act != int(glu::Act::GeluTanh))
    throw std::invalid_argument("[gated_activation] act must be 0 (SiLU) or 1 (GELU, tanh form)");
  if (gate.shape() != up.shape() || gate.ndim() < 1)
    throw std::invalid_argument("[gated_activation] gate and up must have one shape");
  if (gate.dtype() != mx::float32 || up.dtype() != mx::float32)
    throw std::invalid_argument("[gated_activation] gate and up must be float32");
  return mx::array(gate.shape(), mx::float32, std::make_shared<GatedActivation>(stream, act), {gate, up});
}

namespace {

// A view as rows of its last dimension at one stride (the stride between
// rows), or -1 when its rows are not evenly spaced or not contiguous.
int64_t row_stride(const View& v) {
  const int nd = int(v.shape.size());
  if (v.strides[nd - 1] != 1) return -1;
  if (nd == 1) return v.shape[0];
  for (int d = 0; d < nd - 2; ++d)
    if (v.shape[d] > 1 && v.strides[d] != v.strides[d + 1] * v.shape[d + 1]) return -1;
  return v.strides[nd - 2];
}

} // namespace

void GatedActivation::eval_cpu(const std::vector<mx::array>& inputs, std::vector<mx::array>& outputs) {
  auto& out = outputs[0];
  auto& encoder = start_eval(stream(), inputs, out);
  const int64_t width = out.shape(-1);
  const int64_t rows = width ? int64_t(out.size()) / width : 0;
  encoder.dispatch([g = view_of(inputs[0]), u = view_of(inputs[1]), o = out.data<float>(), width, rows,
                    act = glu::Act(act_)]() {
    std::vector<char> gb, ub;
    int64_t gs = row_stride(g), us = row_stride(u);
    const float* gd = reinterpret_cast<const float*>(g.data);
    const float* ud = reinterpret_cast<const float*>(u.data);
    if (gs < 0) gd = static_cast<const float*>(dense(g, gb)), gs = width;
    if (us < 0) ud = static_cast<const float*>(dense(u, ub)), us = width;
    glu::gated(act, gd, gs, ud, us, rows, width, o);
  });
}

void GatedActivation::eval_gpu(const std::vector<mx::array>&, std::vector<mx::array>&) {
  throw std::runtime_error("[AfmGatedActivation] has no GPU implementation");
}

bool GatedActivation::is_equivalent(const mx::Primitive& other) const {
  auto* o = dynamic_cast<const GatedActivation*>(&other);
  return o && o->act_ == act_;
}

namespace {

// Indices of decoder_layer's inputs: the fixed ones, then the
// feed-forward's products from kFfn.
enum LayerInput : int { kH = 0, kKeys, kValues, kAttnNorm, kQkv, kO = kQkv + 3, kFfnNorm = kO + 3, kFfn };

// The layer's products: q/k/v, o, then the feed-forward's two (gate/up,
// down) or, with experts, four (router, the experts' gate, up, down).
int products(const afm_layer_config& c) {
  return c.experts > 0 ? (c.shared_expert ? 9 : 6) : 4;
}

// The first input (packed weights; scales and biases follow) of product j,
// in afm_layer_config's order.
int product_input(int j) {
  return j < 2 ? kQkv + 3 * j : kFfn + 3 * (j - 2);
}

// Where the optional norms start.
int optional_inputs(const afm_layer_config& c) {
  return product_input(products(c));
}

// The problem's matrices, in product order (an expert stack's first).
std::vector<qmm::AffineMatrix*> matrices(layer::Problem& p, const afm_layer_config& c) {
  if (c.experts > 0 && c.shared_expert)
    return {&p.qkv,           &p.o,           &p.router,         &p.expert_gate.first, &p.expert_up.first,
            &p.expert_down.first, &p.shared_gate_up, &p.shared_down, &p.shared_gate};
  if (c.experts > 0) return {&p.qkv, &p.o, &p.router, &p.expert_gate.first, &p.expert_up.first, &p.expert_down.first};
  return {&p.qkv, &p.o, &p.gate_up, &p.down};
}

// A recurrent layer's inputs after the products: conv_w, decay, dt_bias
// and the gated norm.
constexpr int kRecurrentInputs = 4;

int layer_inputs(const afm_layer_config& c) {
  return optional_inputs(c) + kRecurrentInputs * (c.recurrent != 0) + 2 * (c.has_qk_norm != 0) +
      (c.has_attn_out_norm != 0) + (c.has_ffn_out_norm != 0);
}

// The conv_dim of a recurrent layer's convolution (q, k and v side by side).
int64_t conv_dim(const afm_layer_config& c) {
  return 2 * int64_t(c.delta_key_heads) * c.delta_key_dim + int64_t(c.delta_value_heads) * c.delta_value_dim;
}

// A recurrent layer's checks of its store and its own inputs; returns the
// (K, N) of its input and output products.
std::array<std::array<int64_t, 2>, 2> check_recurrent(const std::vector<mx::array>& in, const afm_layer_config& c,
                                                     int64_t dim, const std::string& at) {
  const int64_t hk = c.delta_key_heads, hv = c.delta_value_heads, dk = c.delta_key_dim, dv = c.delta_value_dim;
  if (hk <= 0 || hv <= 0 || dk <= 0 || dv <= 0 || hv % hk != 0)
    throw std::invalid_argument(at + "value heads must be a multiple of the key heads");
  if (c.has_qk_norm) throw std::invalid_argument(at + "a recurrent layer has no q/k norms");
  const int first = optional_inputs(c);
  const auto& conv_w = in[size_t(first)];
  const int64_t cd = conv_dim(c);
  if (conv_w.ndim() != 2 || conv_w.shape(1) != cd || conv_w.shape(0) < 2 || conv_w.shape(0) > delta_net::kMaxKernel)
    throw std::invalid_argument(at + "conv_w must be [kernel, conv_dim], kernel 2 to 8");
  const int kernel = conv_w.shape(0);
  const auto& conv = in[kKeys];
  const auto& delta = in[kValues];
  if (conv.ndim() != 3 || conv.shape(1) != kernel - 1 || conv.shape(2) != cd)
    throw std::invalid_argument(at + "the conv states must be [slots, kernel - 1, conv_dim]");
  if (delta.shape() != mx::Shape{conv.shape(0), int(hv), int(dv), int(dk)})
    throw std::invalid_argument(at + "the delta states must be [slots, value_heads, value_dim, key_dim]");
  if (conv.dtype() != mx::float32 || delta.dtype() != mx::float32)
    throw std::invalid_argument(at + "the states must be float32");
  if (in[size_t(first) + 1].size() != size_t(hv) || in[size_t(first) + 2].size() != size_t(hv) ||
      in[size_t(first) + 3].size() != size_t(dv))
    throw std::invalid_argument(at + "decay and dt_bias need one value per value head, the gated norm value_dim");
  return {{{dim, cd + hv * dv + 2 * hv}, {hv * dv, dim}}};
}

} // namespace

std::vector<mx::array> decoder_layer(const std::vector<mx::array>& in, const afm_layer_config& c,
                                     std::vector<int32_t> slots, std::vector<int32_t> offsets,
                                     std::vector<int32_t> lens, mx::StreamOrDevice s) {
  const auto stream = cpu_stream("decoder_layer", s);
  const std::string at = "[decoder_layer] ";
  if (int(in.size()) != layer_inputs(c)) throw std::invalid_argument(at + "wrong number of inputs for the config");
  const auto& keys = in[kKeys];
  const bool recurrent = c.recurrent != 0;
  const int64_t dim = in[kH].shape(-1);
  if (!recurrent) {
    if (keys.ndim() != 4 || keys.shape() != in[kValues].shape())
      throw std::invalid_argument(at + "keys and values must be one 4-D shape");
    if (keys.dtype() != mx::float32 || in[kValues].dtype() != mx::float32)
      throw std::invalid_argument(at + "keys and values must be float32");
    if (c.heads <= 0 || c.kv_heads <= 0 || c.heads % c.kv_heads != 0 || keys.shape(1) != c.kv_heads ||
        keys.shape(3) != c.head_dim || c.head_dim % 2 != 0)
      throw std::invalid_argument(at + "heads must be a multiple of the store's KV heads, head_dim even");
  }
  const int64_t rows = dim ? int64_t(in[kH].size()) / dim : 0;
  if (offsets.size() != slots.size() || lens.size() != slots.size())
    throw std::invalid_argument(at + "one offset and one length per slot");
  int64_t total = 0;
  for (size_t i = 0; i < slots.size(); ++i) {
    if (lens[i] <= 0) throw std::invalid_argument(at + "an item without tokens");
    total += lens[i];
    if (slots[i] < 0 || slots[i] >= keys.shape(0))
      throw std::invalid_argument(at + "a slot is outside the KV store");
    if (!recurrent && (offsets[i] < 0 || int64_t(offsets[i]) + lens[i] > keys.shape(2)))
      throw std::invalid_argument(at + "a token's position is past the store's capacity");
  }
  if (total != rows) throw std::invalid_argument(at + "h must hold the items' tokens, end to end");
  if (c.window < 0 || (c.act != int(glu::Act::Silu) && c.act != int(glu::Act::GeluTanh)))
    throw std::invalid_argument(at + "bad window or activation");
  const bool routed = c.experts > 0;
  if (c.experts < 0 || (routed && (c.top_k <= 0 || c.top_k > c.experts)))
    throw std::invalid_argument(at + "top_k must be between 1 and the number of experts");
  const int64_t d = c.head_dim, q_w = int64_t(c.heads) * d;
  const int64_t hidden = routed ? in[product_input(3)].shape(-2) : in[kFfn].shape(0) / 2;
  // (K, N) of each product; an expert stack's leading axis is the experts.
  if (c.rope_dims < 0 || c.rope_dims > c.head_dim || c.rope_dims % 2 != 0)
    throw std::invalid_argument(at + "rope_dims must be even and at most head_dim");
  const int64_t qkv_n = q_w + 2 * int64_t(c.kv_heads) * d + (c.output_gate ? q_w : 0);
  std::vector<std::array<int64_t, 2>> shapes = {{dim, qkv_n}, {q_w, dim}};
  if (recurrent) {
    const auto mixer = check_recurrent(in, c, dim, at);
    shapes = {mixer[0], mixer[1]};
  }
  if (c.shared_expert && !routed) throw std::invalid_argument(at + "a shared expert needs routed experts");
  if (routed) shapes.insert(shapes.end(), {{dim, c.experts}, {dim, hidden}, {dim, hidden}, {hidden, dim}});
  else shapes.insert(shapes.end(), {{dim, 2 * hidden}, {hidden, dim}});
  if (c.shared_expert) {
    const int64_t sh = in[product_input(6)].shape(0) / 2;
    shapes.insert(shapes.end(), {{dim, 2 * sh}, {sh, dim}, {dim, 1}});
  }
  for (int j = 0; j < products(c); ++j) {
    const int first = product_input(j);
    const auto& w = in[first];
    const bool stack = routed && j > 2 && j < 6;
    if (w.ndim() != (stack ? 3 : 2) || w.shape(-2) != shapes[size_t(j)][1] || (stack && w.shape(0) != c.experts))
      throw std::invalid_argument(at + "a product's weight has the wrong shape");
    check_format("decoder_layer", shapes[size_t(j)][0], w, in[first + 1], in[first + 2], c.group_size[j], c.bits[j]);
  }
  const int opt = optional_inputs(c);
  std::vector<mx::array> inputs;
  inputs.reserve(in.size());
  // The recurrent layer's own inputs (checked above) come first among the
  // optional ones, f32 like the norms.
  const size_t own = recurrent ? kRecurrentInputs : 0;
  for (size_t i = 0; i < in.size(); ++i) {
    const bool norm = i == kAttnNorm || i == kFfnNorm || i >= size_t(opt) + own;
    if (norm) {
      const int64_t want = i >= size_t(opt) && c.has_qk_norm && i < size_t(opt) + 2 ? d : dim;
      if (in[i].size() != size_t(want)) throw std::invalid_argument(at + "a norm weight has the wrong size");
    }
    const bool f32 = i == kH || norm || (i >= size_t(opt) && i < size_t(opt) + own);
    inputs.push_back(f32 ? as_f32(in[i], stream) : in[i]);
  }
  auto outs = mx::array::make_arrays(
      {inputs[kH].shape(), keys.shape(), in[kValues].shape()},
      {mx::float32, mx::float32, mx::float32},
      std::make_shared<DecoderLayer>(stream, c, std::move(slots), std::move(offsets), std::move(lens)),
      inputs);
  // make_arrays gives every output its own copy of the inputs, so the store
  // would be referenced three times and never donatable (updated in place).
  // Only h_out keeps the store among its inputs; the other two keep the
  // rest (so evaluating one of them alone still schedules h and the
  // weights), and eval_cpu reads the inputs from h_out. That is only sound
  // for a store already computed or scheduled (an evaluation reaching the
  // op through a trimmed output would not schedule it), so a store still to
  // be computed (just grown, or a prefix just restored into it) is
  // evaluated here, once for the pass: keeping its three references
  // instead would copy the whole store in every layer of that pass.
  const auto pending = [](const mx::array& a) { return a.status() == mx::array::Status::unscheduled; };
  if (pending(inputs[kKeys]) || pending(inputs[kValues])) mx::eval({inputs[kKeys], inputs[kValues]});
  for (int j = 1; j < 3; ++j) {
    auto& ins = outs[size_t(j)].inputs();
    ins.erase(ins.begin() + kKeys, ins.begin() + kValues + 1);
  }
  return outs;
}

void DecoderLayer::eval_cpu(const std::vector<mx::array>&, std::vector<mx::array>& outputs) {
  // Whichever output MLX evaluates through, h_out holds all the inputs
  // (decoder_layer trimmed the others').
  const std::vector<mx::array>& inputs = outputs[0].inputs();
  auto& h_out = outputs[0];
  h_out.set_data(mx::allocator::malloc(h_out.nbytes()));
  // The store is updated in place when this op holds its only reference
  // (the engine takes it out of its store for the call); else copied.
  bool copy[2];
  for (int j = 0; j < 2; ++j) {
    const auto& in = inputs[kKeys + j];
    auto& out = outputs[1 + j];
    copy[j] = !(in.is_donatable() && in.flags().row_contiguous && in.data_size() == in.size());
    if (copy[j]) out.set_data(mx::allocator::malloc(out.nbytes()));
    else out.copy_shared_buffer(in);
  }
  auto& encoder = mx::cpu::get_command_encoder(stream());
  for (auto& in : inputs) encoder.set_input_array(in);
  for (auto& out : outputs) encoder.set_output_array(out);

  const auto& c = cfg_;
  layer::Problem p{};
  p.n = int64_t(slots_.size());
  p.dim = inputs[kH].shape(-1);
  p.heads = c.heads;
  p.kv_heads = c.kv_heads;
  p.head_dim = c.head_dim;
  const bool routed = c.experts > 0;
  p.hidden = routed ? inputs[product_input(3)].shape(-2) : inputs[kFfn].shape(0) / 2;
  p.experts = c.experts;
  p.top_k = c.top_k;
  p.norm_topk = c.norm_topk != 0;
  p.expert_gate.experts = p.expert_up.experts = p.expert_down.experts = c.experts;
  p.eps = c.eps;
  p.qk_eps = c.qk_eps;
  p.blas_min_rows = c.blas_min_rows;
  p.rope_base = c.rope_base;
  p.rope_dims = c.rope_dims;
  p.rope_traditional = c.rope_traditional != 0;
  p.output_gate = c.output_gate != 0;
  p.scale = c.scale;
  p.window = c.window;
  p.act = c.act;
  p.h_out = h_out.data<float>();
  layer::Recurrent rec{};
  if (c.recurrent) {
    rec.key_heads = c.delta_key_heads;
    rec.value_heads = c.delta_value_heads;
    rec.key_dim = c.delta_key_dim;
    rec.value_dim = c.delta_value_dim;
    rec.kernel = inputs[size_t(optional_inputs(c))].shape(0);
    rec.conv_states = outputs[1].data<float>();
    rec.delta_states = outputs[2].data<float>();
  } else {
    p.store_slots = inputs[kKeys].shape(0);
    p.capacity = inputs[kKeys].shape(2);
    p.keys = outputs[1].data<float>();
    p.values = outputs[2].data<float>();
  }
  // o's K: the attention heads' width, or a recurrent layer's value heads'.
  const int64_t o_k = c.recurrent ? int64_t(c.delta_value_heads) * c.delta_value_dim : int64_t(c.heads) * c.head_dim;
  p.shared = c.shared_expert != 0;
  if (p.shared) p.shared_hidden = inputs[product_input(6)].shape(0) / 2;
  const auto mats = matrices(p, c);
  const int n_products = products(c);
  // K of product j: o's and the down products' inputs are not the width.
  const auto k_of = [&](int j) {
    if (j == 1) return o_k;
    if (j == (routed ? 5 : 3)) return p.hidden;
    if (routed && j == 7) return p.shared_hidden;
    return p.dim;
  };
  for (int j = 0; j < n_products; ++j) {
    const int at = product_input(j);
    mats[j]->scale_type = scale_type(inputs[at + 1].dtype());
    mats[j]->n = inputs[at].shape(-2);
    mats[j]->k = k_of(j);
    mats[j]->bits = c.bits[j];
    mats[j]->group_size = c.group_size[j];
  }
  std::vector<View> views;
  for (auto& in : inputs) views.push_back(view_of(in));
  float* store[2] = {outputs[1].data<float>(), outputs[2].data<float>()};
  encoder.dispatch([p, c, rec, views = std::move(views), copy0 = copy[0], copy1 = copy[1], slots = slots_,
                    offsets = offsets_, lens = lens_, store, bytes0 = outputs[1].nbytes(),
                    bytes1 = outputs[2].nbytes()]() mutable {
    std::vector<std::vector<char>> bufs(views.size());
    auto ptr = [&](int i) { return dense(views[i], bufs[i]); };
    auto f32 = [&](int i) { return static_cast<const float*>(ptr(i)); };
    if (copy0) std::memcpy(store[0], ptr(kKeys), bytes0);
    if (copy1) std::memcpy(store[1], ptr(kValues), bytes1);
    p.slots = slots.data();
    p.offsets = offsets.data();
    p.lens = lens.data();
    p.h = f32(kH);
    p.attn_norm = f32(kAttnNorm);
    p.ffn_norm = f32(kFfnNorm);
    int next = optional_inputs(c);
    if (c.recurrent) {
      rec.conv_w = f32(next++);
      rec.decay = f32(next++);
      rec.dt_bias = f32(next++);
      rec.gate_norm = f32(next++);
      p.recurrent = &rec;
    }
    if (c.has_qk_norm) p.q_norm = f32(next++), p.k_norm = f32(next++);
    if (c.has_attn_out_norm) p.attn_out_norm = f32(next++);
    if (c.has_ffn_out_norm) p.ffn_out_norm = f32(next++);
    const auto mats = matrices(p, c);
    for (int j = 0; j < products(c); ++j) {
      mats[j]->w = static_cast<const uint32_t*>(ptr(product_input(j)));
      mats[j]->scales = ptr(product_input(j) + 1);
      mats[j]->biases = ptr(product_input(j) + 2);
    }
    layer::run(p);
  });
}

void DecoderLayer::eval_gpu(const std::vector<mx::array>&, std::vector<mx::array>&) {
  throw std::runtime_error("[AfmDecoderLayer] has no GPU implementation; the engine builds the layer from MLX ops there");
}

bool DecoderLayer::is_equivalent(const mx::Primitive& other) const {
  auto* o = dynamic_cast<const DecoderLayer*>(&other);
  return o && std::memcmp(&o->cfg_, &cfg_, sizeof cfg_) == 0 && o->slots_ == slots_ && o->offsets_ == offsets_ &&
      o->lens_ == lens_;
}

std::vector<mx::array> gated_delta_net(const std::vector<mx::array>& in, int key_heads, int value_heads, int key_dim,
                                 int value_dim, mx::StreamOrDevice s) {
  const auto stream = cpu_stream("gated_delta_net", s);
  const std::string at = "[gated_delta_net] ";
  if (in.size() != 6) throw std::invalid_argument(at + "takes x, conv_state, state, conv_w, decay and dt_bias");
  if (key_heads <= 0 || value_heads <= 0 || key_dim <= 0 || value_dim <= 0 || value_heads % key_heads != 0)
    throw std::invalid_argument(at + "value heads must be a multiple of the key heads");
  const int64_t conv_dim = 2 * int64_t(key_heads) * key_dim + int64_t(value_heads) * value_dim;
  const auto& x = in[0];
  const auto& conv_w = in[3];
  if (conv_w.ndim() != 2 || conv_w.shape(1) != conv_dim || conv_w.shape(0) < 2 ||
      conv_w.shape(0) > delta_net::kMaxKernel)
    throw std::invalid_argument(at + "conv_w must be [kernel, conv_dim], kernel 2 to 8");
  const int kernel = conv_w.shape(0);
  if (x.ndim() != 3 || x.shape(2) != conv_dim + 2 * value_heads)
    throw std::invalid_argument(at + "x must be [n, l, conv_dim + 2 * value_heads]");
  const int n = x.shape(0);
  if (in[1].shape() != mx::Shape{n, kernel - 1, int(conv_dim)})
    throw std::invalid_argument(at + "conv_state must be [n, kernel - 1, conv_dim]");
  if (in[2].shape() != mx::Shape{n, value_heads, value_dim, key_dim})
    throw std::invalid_argument(at + "state must be [n, value_heads, value_dim, key_dim]");
  if (in[4].size() != size_t(value_heads) || in[5].size() != size_t(value_heads))
    throw std::invalid_argument(at + "decay and dt_bias must hold one value per value head");
  std::vector<mx::array> inputs;
  for (auto& a : in) inputs.push_back(as_f32(a, stream));
  auto prim = std::make_shared<DeltaNet>(stream, key_heads, value_heads, key_dim, value_dim);
  auto shapes = prim->output_shapes(inputs);
  return mx::array::make_arrays(std::move(shapes), {mx::float32, mx::float32, mx::float32}, prim, inputs);
}

std::vector<mx::Shape> DeltaNet::output_shapes(const std::vector<mx::array>& inputs) {
  return {{inputs[0].shape(0), inputs[0].shape(1), value_heads_ * value_dim_}, inputs[1].shape(), inputs[2].shape()};
}

void DeltaNet::eval_cpu(const std::vector<mx::array>& inputs, std::vector<mx::array>& outputs) {
  for (auto& out : outputs) out.set_data(mx::allocator::malloc(out.nbytes()));
  auto& encoder = mx::cpu::get_command_encoder(stream());
  for (auto& in : inputs) encoder.set_input_array(in);
  for (auto& out : outputs) encoder.set_output_array(out);
  delta_net::Problem p{};
  p.n = inputs[0].shape(0);
  p.l = inputs[0].shape(1);
  p.key_heads = key_heads_;
  p.value_heads = value_heads_;
  p.key_dim = key_dim_;
  p.value_dim = value_dim_;
  p.kernel = inputs[3].shape(0);
  p.y = outputs[0].data<float>();
  p.conv_state_out = outputs[1].data<float>();
  p.state_out = outputs[2].data<float>();
  std::vector<View> views;
  for (auto& in : inputs) views.push_back(view_of(in));
  encoder.dispatch([p, views = std::move(views)]() mutable {
    std::vector<std::vector<char>> bufs(views.size());
    auto f32 = [&](int i) { return static_cast<const float*>(dense(views[size_t(i)], bufs[size_t(i)])); };
    p.x = f32(0);
    p.conv_state = f32(1);
    p.state = f32(2);
    p.conv_w = f32(3);
    p.decay = f32(4);
    p.dt_bias = f32(5);
    delta_net::run(p);
  });
}

void DeltaNet::eval_gpu(const std::vector<mx::array>&, std::vector<mx::array>&) {
  throw std::runtime_error("[AfmDeltaNet] has no GPU implementation; the engine builds it from MLX ops there");
}

bool DeltaNet::is_equivalent(const mx::Primitive& other) const {
  auto* o = dynamic_cast<const DeltaNet*>(&other);
  return o && o->key_heads_ == key_heads_ && o->value_heads_ == value_heads_ && o->key_dim_ == key_dim_ &&
      o->value_dim_ == value_dim_;
}

} // namespace afm

// ---------------------------------------------------------------------------
// C entry points

namespace {

namespace mx = mlx::core;

thread_local std::string g_last_error;

// Errors go to the caller through the status and afm_qmm_last_error() only:
// mlx-c's own error handler, until a binding installs another, exits the
// process.
int fail(const char* msg) {
  g_last_error = msg;
  return 1;
}

mx::array& get(afm_mlx_array a) {
  if (!a.ctx) throw std::invalid_argument("[afm] empty array handle");
  return *static_cast<mx::array*>(a.ctx);
}

// Every entry point: builds the op's outputs on the given stream (NULL: the
// default CPU one) into res[0..n) by mlx-c's convention, or records why it
// could not.
template <class Build>
int entry_n(const char* name, afm_mlx_array* res, size_t n, afm_mlx_stream s, Build build) {
  try {
    if (!res) throw std::invalid_argument(std::string("[") + name + "] res is NULL");
    mx::StreamOrDevice sd = mx::Device(mx::Device::cpu);
    if (s.ctx) sd = *static_cast<mx::Stream*>(s.ctx);
    std::vector<mx::array> outs = build(sd);
    for (size_t j = 0; j < n; ++j) {
      if (res[j].ctx) *static_cast<mx::array*>(res[j].ctx) = std::move(outs[j]);
      else res[j].ctx = new mx::array(std::move(outs[j]));
    }
    g_last_error.clear();
    return 0;
  } catch (const std::exception& e) {
    return fail(e.what());
  }
}

// An entry point of a one-output op.
template <class Build>
int entry(const char* name, afm_mlx_array* res, afm_mlx_stream s, Build build) {
  return entry_n(name, res, 1, s, [&](mx::StreamOrDevice sd) { return std::vector<mx::array>{build(sd)}; });
}

// The n arrays behind `handles`.
std::vector<mx::array> arrays(const afm_mlx_array* handles, int n) {
  if (n < 0 || (n > 0 && !handles)) throw std::invalid_argument("[afm] inputs must be given");
  std::vector<mx::array> in;
  in.reserve(size_t(n));
  for (int i = 0; i < n; ++i) in.push_back(get(handles[i]));
  return in;
}

} // namespace

extern "C" int afm_affine_qmm(
    afm_mlx_array* res,
    afm_mlx_array x,
    afm_mlx_array w,
    afm_mlx_array scales,
    afm_mlx_array biases,
    int group_size,
    int bits,
    int blas_min_rows,
    afm_mlx_stream s) {
  return entry("afm_affine_qmm", res, s, [&](mx::StreamOrDevice sd) {
    return afm::affine_qmm(get(x), get(w), get(scales), get(biases), group_size, bits, blas_min_rows, sd);
  });
}

extern "C" int afm_gather_affine_qmm(
    afm_mlx_array* res,
    afm_mlx_array x,
    afm_mlx_array w,
    afm_mlx_array scales,
    afm_mlx_array biases,
    afm_mlx_array indices,
    int group_size,
    int bits,
    int blas_min_rows,
    afm_mlx_stream s) {
  return entry("afm_gather_affine_qmm", res, s, [&](mx::StreamOrDevice sd) {
    return afm::gather_affine_qmm(get(x), get(w), get(scales), get(biases), get(indices), group_size, bits,
                                  blas_min_rows, sd);
  });
}

extern "C" int afm_embedding_rows(
    afm_mlx_array* res,
    afm_mlx_array ids,
    afm_mlx_array w,
    afm_mlx_array scales,
    afm_mlx_array biases,
    int group_size,
    int bits,
    afm_mlx_stream s) {
  return entry("afm_embedding_rows", res, s, [&](mx::StreamOrDevice sd) {
    return afm::embedding_rows(get(ids), get(w), get(scales), get(biases), group_size, bits, sd);
  });
}

extern "C" int afm_attention(
    afm_mlx_array* res,
    afm_mlx_array q,
    afm_mlx_array k,
    afm_mlx_array v,
    const int32_t* slots,
    const int32_t* offsets,
    int n,
    int window,
    float scale,
    afm_mlx_stream s) {
  return entry("afm_attention", res, s, [&](mx::StreamOrDevice sd) {
    if (n < 0 || (n > 0 && (!slots || !offsets)))
      throw std::invalid_argument("[afm_attention] slots and offsets must hold n values");
    return afm::attention(get(q), get(k), get(v), std::vector<int32_t>(slots, slots + n),
                          std::vector<int32_t>(offsets, offsets + n), window, scale, sd);
  });
}

extern "C" int afm_gated_activation(afm_mlx_array* res, afm_mlx_array gate, afm_mlx_array up, int act,
                                    afm_mlx_stream s) {
  return entry("afm_gated_activation", res, s,
               [&](mx::StreamOrDevice sd) { return afm::gated_activation(get(gate), get(up), act, sd); });
}

extern "C" int afm_decoder_layer(
    afm_mlx_array* res,
    const afm_mlx_array* inputs,
    int n_inputs,
    const afm_layer_config* cfg,
    const int32_t* slots,
    const int32_t* offsets,
    const int32_t* lens,
    int n,
    afm_mlx_stream s) {
  return entry_n("afm_decoder_layer", res, 3, s, [&](mx::StreamOrDevice sd) {
    if (!cfg) throw std::invalid_argument("[afm_decoder_layer] cfg must be given");
    if (n < 0 || (n > 0 && (!slots || !offsets || !lens)))
      throw std::invalid_argument("[afm_decoder_layer] slots, offsets and lens must hold n values");
    return afm::decoder_layer(arrays(inputs, n_inputs), *cfg, std::vector<int32_t>(slots, slots + n),
                              std::vector<int32_t>(offsets, offsets + n), std::vector<int32_t>(lens, lens + n),
                              sd);
  });
}

extern "C" int afm_delta_net(
    afm_mlx_array* res,
    const afm_mlx_array* inputs,
    int n_inputs,
    int key_heads,
    int value_heads,
    int key_dim,
    int value_dim,
    afm_mlx_stream s) {
  return entry_n("afm_delta_net", res, 3, s, [&](mx::StreamOrDevice sd) {
    return afm::gated_delta_net(arrays(inputs, n_inputs), key_heads, value_heads, key_dim, value_dim, sd);
  });
}

extern "C" long afm_graph_ops(afm_mlx_array a, const char* name) {
  if (!a.ctx) return -1;
  std::unordered_set<std::uintptr_t> seen;
  std::vector<mx::array> stack{*static_cast<mx::array*>(a.ctx)};
  long ops = 0;
  while (!stack.empty()) {
    mx::array x = std::move(stack.back());
    stack.pop_back();
    if (!x.has_primitive() || x.status() != mx::array::Status::unscheduled) continue;
    if (!seen.insert(x.id()).second) continue;
    for (auto& s : x.siblings()) seen.insert(s.id());
    if (!name || std::strcmp(x.primitive().name(), name) == 0) ++ops;
    for (auto& in : x.inputs()) stack.push_back(in);
    // A trimmed output's store input lives on its first sibling.
    for (auto& s : x.siblings())
      for (auto& in : s.inputs()) stack.push_back(in);
  }
  return ops;
}

extern "C" const char* afm_qmm_last_error(void) {
  return g_last_error.c_str();
}

extern "C" int afm_qmm_set_threads(int n) {
  if (n > 0) afm::qmm::set_num_threads(n);
  return afm::qmm::num_threads();
}

extern "C" int afm_qmm_kernel(void) {
  return int(afm::qmm::resolve_path(afm::qmm::Path::Auto));
}

#define AFM_STR_(x) #x
#define AFM_STR(x) AFM_STR_(x)

extern "C" const char* afm_qmm_mlx_version_built(void) {
  return AFM_STR(MLX_VERSION_MAJOR) "." AFM_STR(MLX_VERSION_MINOR) "." AFM_STR(MLX_VERSION_PATCH);
}

extern "C" const char* afm_qmm_mlx_version_loaded(void) {
  return mx::version();
}
