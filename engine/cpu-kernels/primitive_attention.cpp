// The attention and gated-activation primitives of primitive.h: Attention
// (over the batch KV store in place) and GatedActivation.
#include "primitive.h"

#include <array>
#include <cstring>
#include <stdexcept>
#include <string>

#include "mlx/allocator.h"
#include "mlx/backend/cpu/encoder.h"
#include "mlx/ops.h"
#include "mlx/transforms.h"
#include "attention.h"
#include "glu.h"
#include "primitive_support.h"

namespace afm {

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

} // namespace afm
