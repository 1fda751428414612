// The whole-layer primitives of primitive.h: DecoderLayer (a layer as one op,
// its store or recurrent states donated) and DeltaNet (a chunk's Gated
// DeltaNet recurrence).
#include "primitive.h"

#include <array>
#include <cstring>
#include <stdexcept>
#include <string>

#include "mlx/allocator.h"
#include "mlx/backend/cpu/encoder.h"
#include "mlx/ops.h"
#include "mlx/transforms.h"
#include "delta_net.h"
#include "glu.h"
#include "layer.h"
#include "qmm_affine.h"
#include "qmm_gather.h"
#include "primitive_support.h"

namespace afm {

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
  if (c.experts > 0) return c.shared_expert ? 9 : (c.gemma_moe ? 8 : 6);
  return c.per_layer_dim > 0 ? 6 : 4;
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
  if (c.experts > 0 && c.gemma_moe)
    return {&p.qkv,          &p.o,      &p.router, &p.expert_gate.first, &p.expert_up.first, &p.expert_down.first,
            &p.gate_up, &p.down};
  if (c.experts > 0) return {&p.qkv, &p.o, &p.router, &p.expert_gate.first, &p.expert_up.first, &p.expert_down.first};
  if (c.per_layer_dim > 0) return {&p.qkv, &p.o, &p.gate_up, &p.down, &p.pl_gate, &p.pl_proj};
  return {&p.qkv, &p.o, &p.gate_up, &p.down};
}

// A recurrent layer's inputs after the products: conv_w, decay, dt_bias
// and the gated norm.
constexpr int kRecurrentInputs = 4;

// Gemma 4's MoE inputs after the RoPE wavelengths: router norm, expert
// scales, experts' norm, experts' output norm, dense output norm.
constexpr int kGemmaMoeInputs = 5;

// Where the inputs after the norms start: the RoPE wavelengths, Gemma 4's
// MoE inputs, the per-layer inputs and norm, the layer scalar.
int tail_inputs(const afm_layer_config& c) {
  return optional_inputs(c) + kRecurrentInputs * (c.recurrent != 0) + 2 * (c.has_qk_norm != 0) +
      (c.has_attn_out_norm != 0) + (c.has_ffn_out_norm != 0);
}

int layer_inputs(const afm_layer_config& c) {
  return tail_inputs(c) + (c.rope_freqs != 0) + kGemmaMoeInputs * (c.gemma_moe != 0) + 2 * (c.per_layer_dim > 0) +
      (c.layer_scalar != 0);
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
  const int64_t kv_rows = c.kv_shared ? 0 : (c.k_eq_v ? 1 : 2) * int64_t(c.kv_heads) * d;
  const int64_t qkv_n = q_w + kv_rows + (c.output_gate ? q_w : 0);
  std::vector<std::array<int64_t, 2>> shapes = {{dim, qkv_n}, {q_w, dim}};
  if (recurrent) {
    if (c.rope_freqs || c.v_norm || c.k_eq_v || c.kv_shared)
      throw std::invalid_argument(at + "a recurrent layer has no RoPE, values or store of another layer");
    const auto mixer = check_recurrent(in, c, dim, at);
    shapes = {mixer[0], mixer[1]};
  }
  if (c.shared_expert && !routed) throw std::invalid_argument(at + "a shared expert needs routed experts");
  if (c.per_layer_dim < 0 || (c.per_layer_dim > 0 && routed))
    throw std::invalid_argument(at + "a per-layer input goes with a dense feed-forward only");
  if (routed) shapes.insert(shapes.end(), {{dim, c.experts}, {dim, hidden}, {dim, hidden}, {hidden, dim}});
  else shapes.insert(shapes.end(), {{dim, 2 * hidden}, {hidden, dim}});
  if (c.per_layer_dim > 0) shapes.insert(shapes.end(), {{dim, c.per_layer_dim}, {c.per_layer_dim, dim}});
  if (c.gemma_moe && (!routed || c.shared_expert))
    throw std::invalid_argument(at + "Gemma 4's MoE block has routed experts and no shared one");
  if (c.gemma_moe) {
    const int64_t dh = in[product_input(6)].shape(0) / 2;
    shapes.insert(shapes.end(), {{dim, 2 * dh}, {dh, dim}});
  }
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
  const size_t tail = size_t(tail_inputs(c));
  for (size_t i = 0; i < in.size(); ++i) {
    const bool norm = i == kAttnNorm || i == kFfnNorm || (i >= size_t(opt) + own && i < tail);
    if (norm) {
      const int64_t want = i >= size_t(opt) && c.has_qk_norm && i < size_t(opt) + 2 ? d : dim;
      if (in[i].size() != size_t(want)) throw std::invalid_argument(at + "a norm weight has the wrong size");
    }
    const bool f32 = i == kH || norm || i >= tail || (i >= size_t(opt) && i < size_t(opt) + own);
    inputs.push_back(f32 ? as_f32(in[i], stream) : in[i]);
  }
  size_t next = tail;
  if (c.rope_freqs) {
    const int64_t rope_dims = c.rope_dims > 0 ? c.rope_dims : d;
    if (in[next++].size() != size_t(rope_dims / 2))
      throw std::invalid_argument(at + "RoPE's wavelengths must be rope_dims / 2 values");
  }
  if (c.gemma_moe)
    for (int j = 0; j < kGemmaMoeInputs; ++j)
      if (in[next++].size() != size_t(j == 1 ? c.experts : dim))
        throw std::invalid_argument(at + "Gemma 4's MoE norms need dim values, its expert scales one per expert");
  if (c.per_layer_dim > 0) {
    const auto& per_layer = in[next++];
    const int64_t stride = rows ? int64_t(per_layer.size()) / rows : 0;
    if (per_layer.ndim() < 2 || per_layer.shape(-1) != c.per_layer_dim || int64_t(per_layer.size()) != rows * stride ||
        c.per_layer_index < 0 || int64_t(c.per_layer_index + 1) * c.per_layer_dim > stride)
      throw std::invalid_argument(at + "the per-layer inputs must be [..., rows, layers, per_layer_dim]");
    if (in[next++].size() != size_t(dim)) throw std::invalid_argument(at + "a norm weight has the wrong size");
  }
  if (c.layer_scalar && in[next++].size() != 1)
    throw std::invalid_argument(at + "the layer scalar must be one value");
  // A KV-shared layer only reads the store: its store outputs are empty.
  const auto store_shape = [&](const mx::array& a) { return c.kv_shared ? mx::Shape{0} : a.shape(); };
  auto outs = mx::array::make_arrays(
      {inputs[kH].shape(), store_shape(keys), store_shape(in[kValues])},
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
  // A store read from another layer was written by that layer earlier in
  // this pass, which h depends on: it is always scheduled before this op.
  // (It is read in place, not donated: the writer's task still holds its
  // buffer when this op is encoded, so a donation would copy it.)
  const auto pending = [](const mx::array& a) { return a.status() == mx::array::Status::unscheduled; };
  if (!c.kv_shared && (pending(inputs[kKeys]) || pending(inputs[kValues])))
    mx::eval({inputs[kKeys], inputs[kValues]});
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
  // A copied store must outlive the dispatched task that reads it: MLX
  // keeps the buffers of the inputs of the output it evaluates through,
  // and the store outputs' inputs were trimmed (decoder_layer), so
  // through them a store nothing else held (a view left by the store
  // shrinking after a long request) was freed before the copy read it.
  auto& encoder = mx::cpu::get_command_encoder(stream());
  bool copy[2] = {false, false};
  for (int j = 0; j < 2; ++j) {
    const auto& in = inputs[kKeys + j];
    auto& out = outputs[1 + j];
    if (cfg_.kv_shared) {
      out.set_data(mx::allocator::malloc(0));
      continue;
    }
    copy[j] = !(in.is_donatable() && in.flags().row_contiguous && in.data_size() == in.size());
    if (copy[j]) {
      out.set_data(mx::allocator::malloc(out.nbytes()));
      encoder.add_temporary(in);
    } else {
      out.copy_shared_buffer(in);
    }
  }
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
  p.v_norm = c.v_norm != 0;
  p.v_eps = c.v_eps;
  p.k_eq_v = c.k_eq_v != 0;
  p.kv_shared = c.kv_shared != 0;
  p.per_layer_dim = c.per_layer_dim;
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
  p.gemma_moe = c.gemma_moe != 0;
  if (p.gemma_moe) p.dense_hidden = inputs[product_input(6)].shape(0) / 2;
  const auto mats = matrices(p, c);
  const int n_products = products(c);
  // K of product j: o's and the down products' inputs are not the width.
  const auto k_of = [&](int j) {
    if (j == 1) return o_k;
    if (j == (routed ? 5 : 3)) return p.hidden;
    if (routed && j == 7) return c.gemma_moe ? p.dense_hidden : p.shared_hidden;
    if (!routed && j == 5) return p.per_layer_dim;
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
  if (c.per_layer_dim > 0) {
    const int64_t rows = inputs[kH].size() / size_t(p.dim);
    const int at = tail_inputs(c) + (c.rope_freqs != 0) + kGemmaMoeInputs * (c.gemma_moe != 0);
    p.per_layer_stride = rows ? int64_t(inputs[size_t(at)].size()) / rows : 0;
  }
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
    if (c.kv_shared) {
      // Read only (layer.h's kv_shared writes nothing).
      p.keys = const_cast<float*>(f32(kKeys));
      p.values = const_cast<float*>(f32(kValues));
    }
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
    if (c.rope_freqs) p.rope_freqs = f32(next++);
    if (c.gemma_moe) {
      p.router_norm = f32(next++);
      p.expert_scale = f32(next++);
      p.experts_norm = f32(next++);
      p.experts_out_norm = f32(next++);
      p.dense_out_norm = f32(next++);
    }
    if (c.per_layer_dim > 0) {
      p.per_layer_in = f32(next++) + int64_t(c.per_layer_index) * c.per_layer_dim;
      p.pl_norm = f32(next++);
    }
    if (c.layer_scalar) p.layer_scalar = f32(next++);
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
