// The C entry points of primitive.h, for the Rust engine through mlx-c's
// handles.
#include "primitive.h"

#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <unordered_set>

#include "mlx/version.h"
#include "qmm_affine.h"
#include "thread_pool.h"

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

namespace {

// Visits each op of a's graph not yet computed once (a multi-output op
// once, as its first output met), with `name` (MLX's Primitive::name)
// matching, or every op when `name` is NULL.
template <typename F>
void each_pending_op(const mx::array& a, const char* name, F visit) {
  std::unordered_set<std::uintptr_t> seen;
  std::vector<mx::array> stack{a};
  while (!stack.empty()) {
    mx::array x = std::move(stack.back());
    stack.pop_back();
    if (!x.has_primitive() || x.status() != mx::array::Status::unscheduled) continue;
    if (!seen.insert(x.id()).second) continue;
    for (auto& s : x.siblings()) seen.insert(s.id());
    if (!name || std::strcmp(x.primitive().name(), name) == 0) visit(x);
    for (auto& in : x.inputs()) stack.push_back(in);
    // A trimmed output's store input lives on its first sibling.
    for (auto& s : x.siblings())
      for (auto& in : s.inputs()) stack.push_back(in);
  }
}

}  // namespace

extern "C" long afm_graph_ops(afm_mlx_array a, const char* name) {
  if (!a.ctx) return -1;
  long ops = 0;
  each_pending_op(*static_cast<mx::array*>(a.ctx), name, [&](const mx::array&) { ++ops; });
  return ops;
}

extern "C" long afm_graph_bytes(afm_mlx_array a, const char* name) {
  if (!a.ctx || !name) return -1;
  long bytes = 0;
  each_pending_op(*static_cast<mx::array*>(a.ctx), name, [&](const mx::array& x) {
    bytes += long(x.nbytes());
    for (auto& s : x.siblings()) bytes += long(s.nbytes());
  });
  return bytes;
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
