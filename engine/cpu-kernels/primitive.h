// afm's MLX CPU primitives (MLX's documented custom-extension route), one
// class per operation with the function that builds it into a graph:
//   AffineQmm, GatherAffineQmm  x · Wᵀ for affine-quantized W (and per routed
//                               expert), kernels of qmm_affine.h: weights stay
//                               packed on the CPU backend, not dequantized at load
//   EmbeddingRows               a packed embedding's rows for the given ids
//   Attention                   attention over the batch KV store in place
//   GatedActivation             SwiGLU/GeGLU over the fused gate-and-up product
//   DeltaNet                    a chunk's Gated DeltaNet recurrence
//   DecoderLayer                a whole layer over the above: one op per layer
//
// Built against the MLX headers and libmlx of one exact MLX version: the
// Primitive ABI (vtable layout, array internals) is not stable across MLX
// releases, so this must be compiled against the same MLX the engine's
// mlx-c links.
#pragma once

#include <cstdint>
#include <vector>

#include "mlx/array.h"
#include "mlx/primitives.h"
#include "mlx/utils.h"

namespace afm {

namespace mx = mlx::core;

// With blas_min_rows > 0, calls with at least that many rows of x take the
// dequantize-then-sgemm path (qmm::matmul_dequant_sgemm: faster for
// prefill, but rounding by BLAS shape, so rows are no longer independent of
// their batch); 0 keeps every call on the batch-invariant kernel.
//
// y[..., N] = x[..., K] · dequantize(w, scales, biases)ᵀ, as
// mx::quantized_matmul(x, w, scales, biases, /*transpose=*/true, group_size,
// bits, "affine") but always f32 out (x is cast to f32 when it is not).
// w: uint32 [N, K*bits/32]; scales, biases: [N, K/group_size] in f32, f16
// or bf16. CPU streams only. Throws std::invalid_argument on bad shapes.
mx::array affine_qmm(
    const mx::array& x,
    const mx::array& w,
    const mx::array& scales,
    const mx::array& biases,
    int group_size,
    int bits,
    int blas_min_rows = 0,
    mx::StreamOrDevice s = {});

class AffineQmm : public mx::Primitive {
 public:
  AffineQmm(mx::Stream stream, int group_size, int bits, int blas_min_rows)
      : mx::Primitive(stream), group_size_(group_size), bits_(bits), blas_min_rows_(blas_min_rows) {}

  void eval_cpu(const std::vector<mx::array>& inputs, std::vector<mx::array>& outputs) override;
  void eval_gpu(const std::vector<mx::array>& inputs, std::vector<mx::array>& outputs) override;

  std::vector<mx::Shape> output_shapes(const std::vector<mx::array>& inputs) override;

  const char* name() const override {
    return "AffineQmm";
  }

  bool is_equivalent(const mx::Primitive& other) const override;

  int group_size() const {
    return group_size_;
  }
  int bits() const {
    return bits_;
  }

 private:
  int group_size_;
  int bits_;
  int blas_min_rows_;
};

// y[r, j, :] = x[r, :] · dequantize(w[indices[r, j]])ᵀ: routed experts, as
// mx::gather_qmm(x, w, scales, biases, {}, indices, /*transpose=*/true, ...)
// with x [R, 1, 1, K] against indices [R, J], but always f32 out and the
// expert's rows grouped (qmm_gather.h). x: [R, K]; indices: uint32 or int32
// [R, J]; w: uint32 [E, N, K*bits/32]; scales, biases: [E, N, K/group_size].
// Result [R, J, N]. blas_min_rows as for affine_qmm, per expert group. CPU
// streams only; throws std::invalid_argument on bad shapes (an id outside
// [0, E) gives a row of NaN: ids are only known when the task runs).
mx::array gather_affine_qmm(
    const mx::array& x,
    const mx::array& w,
    const mx::array& scales,
    const mx::array& biases,
    const mx::array& indices,
    int group_size,
    int bits,
    int blas_min_rows = 0,
    mx::StreamOrDevice s = {});

class GatherAffineQmm : public mx::Primitive {
 public:
  GatherAffineQmm(mx::Stream stream, int group_size, int bits, int blas_min_rows)
      : mx::Primitive(stream), group_size_(group_size), bits_(bits), blas_min_rows_(blas_min_rows) {}

  void eval_cpu(const std::vector<mx::array>& inputs, std::vector<mx::array>& outputs) override;
  void eval_gpu(const std::vector<mx::array>& inputs, std::vector<mx::array>& outputs) override;

  std::vector<mx::Shape> output_shapes(const std::vector<mx::array>& inputs) override;

  const char* name() const override {
    return "AfmGatherAffineQmm";
  }

  bool is_equivalent(const mx::Primitive& other) const override;

 private:
  int group_size_;
  int bits_;
  int blas_min_rows_;
};

// Rows `ids` (uint32 or int32, any shape) of a quantized table (a token
// embedding), dequantized (qmm::dequantize_rows): [..., K] f32. w: uint32
// [V, K*bits/32]; scales, biases: [V, K/group_size]. One op where MLX's
// take and dequantize are ~45 on the CPU. An id outside [0, V) gives a row
// of NaN. CPU streams only; throws std::invalid_argument on bad shapes.
mx::array embedding_rows(const mx::array& ids, const mx::array& w, const mx::array& scales,
                         const mx::array& biases, int group_size, int bits, mx::StreamOrDevice s = {});

class EmbeddingRows : public mx::Primitive {
 public:
  EmbeddingRows(mx::Stream stream, int group_size, int bits)
      : mx::Primitive(stream), group_size_(group_size), bits_(bits) {}

  void eval_cpu(const std::vector<mx::array>& inputs, std::vector<mx::array>& outputs) override;
  void eval_gpu(const std::vector<mx::array>& inputs, std::vector<mx::array>& outputs) override;

  std::vector<mx::Shape> output_shapes(const std::vector<mx::array>& inputs) override;

  const char* name() const override {
    return "AfmEmbeddingRows";
  }

  bool is_equivalent(const mx::Primitive& other) const override;

 private:
  int group_size_;
  int bits_;
};

// softmax(scale · q kᵀ) v for each query over the keys it sees, reading k and
// v where they lie (attention.h). q: [n, heads, l, d] f32; k, v: [slots,
// kv_heads, capacity, d] f32, last dimension contiguous (a whole batch KV
// store); item i reads row slots[i] of k and v, its query l sits at position
// offsets[i] + l and sees keys max(0, pos + 1 - window) ..= pos (window 0:
// from 0). Result: [n, l, heads, d]. CPU streams only; throws
// std::invalid_argument on bad shapes or positions.
mx::array attention(
    const mx::array& q,
    const mx::array& k,
    const mx::array& v,
    std::vector<int32_t> slots,
    std::vector<int32_t> offsets,
    int window,
    float scale,
    mx::StreamOrDevice s = {});

class Attention : public mx::Primitive {
 public:
  Attention(mx::Stream stream, std::vector<int32_t> slots, std::vector<int32_t> offsets, int window,
            float scale)
      : mx::Primitive(stream), slots_(std::move(slots)), offsets_(std::move(offsets)), window_(window),
        scale_(scale) {}

  void eval_cpu(const std::vector<mx::array>& inputs, std::vector<mx::array>& outputs) override;
  void eval_gpu(const std::vector<mx::array>& inputs, std::vector<mx::array>& outputs) override;

  std::vector<mx::Shape> output_shapes(const std::vector<mx::array>& inputs) override;

  const char* name() const override {
    return "AfmAttention";
  }

  bool is_equivalent(const mx::Primitive& other) const override;

 private:
  std::vector<int32_t> slots_;
  std::vector<int32_t> offsets_;
  int window_;
  float scale_;
};

// act(gate) * up elementwise (glu.h; act 0: SiLU, 1: GELU, tanh form), reading
// gate and up where they lie (halves of a fused product are fine). Both f32
// of one shape; result contiguous, same shape. CPU streams only.
mx::array gated_activation(const mx::array& gate, const mx::array& up, int act, mx::StreamOrDevice s = {});

class GatedActivation : public mx::Primitive {
 public:
  GatedActivation(mx::Stream stream, int act) : mx::Primitive(stream), act_(act) {}

  void eval_cpu(const std::vector<mx::array>& inputs, std::vector<mx::array>& outputs) override;
  void eval_gpu(const std::vector<mx::array>& inputs, std::vector<mx::array>& outputs) override;

  std::vector<mx::Shape> output_shapes(const std::vector<mx::array>& inputs) override {
    return {inputs[0].shape()};
  }

  const char* name() const override {
    return "AfmGatedActivation";
  }

  bool is_equivalent(const mx::Primitive& other) const override;

 private:
  int act_;
};

// The Gated DeltaNet recurrence over a chunk (delta_net.h): inputs x [n, l,
// conv_dim + 2 * value_heads] (q, k, v, then b and a), conv_state [n,
// kernel - 1, conv_dim], state [n, value_heads, value_dim, key_dim],
// conv_w [kernel, conv_dim], decay and dt_bias [value_heads], all f32;
// returns {y [n, l, value_heads * value_dim], conv_state, state}, the new
// states. CPU streams only; throws std::invalid_argument on bad shapes.
std::vector<mx::array> gated_delta_net(const std::vector<mx::array>& inputs, int key_heads, int value_heads,
                                 int key_dim, int value_dim, mx::StreamOrDevice s = {});

class DeltaNet : public mx::Primitive {
 public:
  DeltaNet(mx::Stream stream, int key_heads, int value_heads, int key_dim, int value_dim)
      : mx::Primitive(stream), key_heads_(key_heads), value_heads_(value_heads), key_dim_(key_dim),
        value_dim_(value_dim) {}

  void eval_cpu(const std::vector<mx::array>& inputs, std::vector<mx::array>& outputs) override;
  void eval_gpu(const std::vector<mx::array>& inputs, std::vector<mx::array>& outputs) override;

  std::vector<mx::Shape> output_shapes(const std::vector<mx::array>& inputs) override;

  const char* name() const override {
    return "AfmDeltaNet";
  }

  bool is_equivalent(const mx::Primitive& other) const override;

 private:
  int key_heads_, value_heads_, key_dim_, value_dim_;
};

} // namespace afm

// The C form of a decoder layer's fixed parameters (afm_decoder_layer); the
// C++ op takes it as it is.
extern "C" {
typedef struct afm_layer_config_ {
  int heads, kv_heads, head_dim;
  // Per product, in the inputs' order: bits and group size. q/k/v and o,
  // then the feed-forward's: gate_up and down; or with experts the router,
  // the experts' gate, up and down (and with a shared expert its gate_up,
  // down and gate).
  int bits[9];
  int group_size[9];
  float eps; // the layer norms'
  float qk_eps; // the per-head q/k norms' (with has_qk_norm)
  int has_qk_norm, has_attn_out_norm, has_ffn_out_norm;
  float rope_base;
  int rope_dims; // 0: the whole head
  int rope_traditional;
  int output_gate; // gate values after q, k, v in the q/k/v product
  float scale;
  int window; // 0: none
  int act; // 0 SiLU, 1 GELU (tanh form)
  int experts; // routed experts instead of a gated MLP (0: none)
  int top_k; // experts per row
  int norm_topk; // the chosen weights renormalised over the k
  int blas_min_rows; // as for affine_qmm; 0 keeps rows independent
  // A Gated DeltaNet mixer instead of attention (layer.h's Recurrent): the
  // attention fields above are then unused.
  int recurrent;
  int delta_key_heads, delta_value_heads, delta_key_dim, delta_value_dim;
  // With experts: a shared expert every row goes through, scaled by the
  // sigmoid of its one-row gate product (Qwen3-Next, Qwen3.5-MoE).
  int shared_expert;
  // Gemma 4's attention (layer.h): RoPE's wavelengths given as an input
  // (rope_dims / 2 of them) instead of rope_base; a weightless value norm
  // (eps v_eps); values taken from the key product (no value product); the
  // store of another layer read and left as it is (q/k/v holds the queries
  // alone).
  int rope_freqs;
  int v_norm;
  float v_eps;
  int k_eq_v;
  int kv_shared;
  // Gemma 4's per-layer input (dense feed-forward only): per_layer_dim
  // values per row, at per_layer_index of the rows' per-layer inputs; two
  // more products (its gate and projection) and a norm. 0: none.
  int per_layer_dim;
  int per_layer_index;
  // A one-value input multiplying the layer's output, last.
  int layer_scalar;
  // Gemma 4's MoE block (layer.h's gemma_moe), with experts: the dense
  // MLP's gate_up and down as products 6 and 7, and five inputs after the
  // RoPE wavelengths (router norm, expert scales, experts' norm, experts'
  // output norm, dense output norm).
  int gemma_moe;
} afm_layer_config;
}

namespace afm {

// One pre-norm decoder layer over n items of lens[i] new tokens each, end
// to end in h (layer.h):
// returns {h_out, keys_out, values_out}, the keys and values being the
// store with this step's rows written (the input store's buffer itself when
// nothing else holds it, else a copy); with kv_shared, two empty arrays (the
// store is read where it lies and left as it is). inputs: h [..., rows, dim], keys,
// values [slots, kv_heads, capacity, head_dim] f32, attn_norm [dim],
// qkv w/scales/biases, o w/scales/biases, ffn_norm [dim], gate_up
// w/scales/biases, down w/scales/biases (with experts: router
// [experts, dim], the experts' gate and up [experts, hidden, dim] and down
// [experts, dim, hidden], each w/scales/biases; with shared_expert then its
// gate_up [2 * shared_hidden, dim], down [dim, shared_hidden] and gate
// [1, dim]), then q_norm and k_norm
// [head_dim] (has_qk_norm), attn_out_norm (has_attn_out_norm),
// ffn_out_norm (has_ffn_out_norm). With recurrent: keys and values are the
// layer's conv and delta states ([slots, kernel - 1, conv_dim] and [slots,
// value_heads, value_dim, key_dim] f32), q/k/v is the recurrence's input
// product (q, k, v, z, b, a rows), o its output product, and after the
// feed-forward's products come conv_w [kernel, conv_dim], decay and dt_bias
// [value_heads] and the gated norm [value_dim] (no q/k norms). With
// per_layer_dim, the per-layer gate [per_layer_dim, dim] and projection
// [dim, per_layer_dim] follow down as products 4 and 5; with gemma_moe the
// dense MLP's gate_up [2 * dense_hidden, dim] and down [dim, dense_hidden]
// follow the experts as products 6 and 7. Last, where the config has them:
// the RoPE wavelengths [rope_dims / 2], Gemma 4's MoE norms and scales
// ([dim], [experts], [dim], [dim], [dim]), the per-layer
// inputs [..., rows, layers, per_layer_dim] and the per-layer norm [dim],
// the layer scalar [1]. CPU streams only; throws std::invalid_argument on
// bad shapes or positions.
std::vector<mx::array> decoder_layer(const std::vector<mx::array>& inputs, const afm_layer_config& cfg,
                                     std::vector<int32_t> slots, std::vector<int32_t> offsets,
                                     std::vector<int32_t> lens, mx::StreamOrDevice s = {});

class DecoderLayer : public mx::Primitive {
 public:
  DecoderLayer(mx::Stream stream, const afm_layer_config& cfg, std::vector<int32_t> slots,
               std::vector<int32_t> offsets, std::vector<int32_t> lens)
      : mx::Primitive(stream), cfg_(cfg), slots_(std::move(slots)), offsets_(std::move(offsets)),
        lens_(std::move(lens)) {}

  void eval_cpu(const std::vector<mx::array>& inputs, std::vector<mx::array>& outputs) override;
  void eval_gpu(const std::vector<mx::array>& inputs, std::vector<mx::array>& outputs) override;

  std::vector<mx::Shape> output_shapes(const std::vector<mx::array>& inputs) override {
    if (cfg_.kv_shared) return {inputs[0].shape(), {0}, {0}};
    return {inputs[0].shape(), inputs[1].shape(), inputs[2].shape()};
  }

  const char* name() const override {
    return "AfmDecoderLayer";
  }

  bool is_equivalent(const mx::Primitive& other) const override;

 private:
  afm_layer_config cfg_;
  std::vector<int32_t> slots_;
  std::vector<int32_t> offsets_;
  std::vector<int32_t> lens_;
};

} // namespace afm

// C entry points for a caller holding mlx-c handles (the Rust engine through
// mlx-sys). afm_mlx_array / afm_mlx_stream have the exact layout of mlx-c's
// mlx_array / mlx_stream (one pointer to a heap mlx::core::array / Stream),
// so those handles can be passed as they are.
extern "C" {

typedef struct afm_mlx_array_ {
  void* ctx;
} afm_mlx_array;

typedef struct afm_mlx_stream_ {
  void* ctx;
} afm_mlx_stream;

// Builds the lazy product (nothing is computed until the result is
// evaluated). *res follows mlx-c's convention for outputs: an empty handle
// (ctx == NULL, as from mlx_array_new) gets a new array, a non-empty one is
// overwritten. A stream with ctx == NULL means the default CPU stream.
// Returns 0 on success; on failure 1, with the message available from
// afm_qmm_last_error() on the calling thread.
int afm_affine_qmm(
    afm_mlx_array* res,
    afm_mlx_array x,
    afm_mlx_array w,
    afm_mlx_array scales,
    afm_mlx_array biases,
    int group_size,
    int bits,
    int blas_min_rows,
    afm_mlx_stream s);

// afm::gather_affine_qmm over mlx-c handles; same conventions as
// afm_affine_qmm.
int afm_gather_affine_qmm(
    afm_mlx_array* res,
    afm_mlx_array x,
    afm_mlx_array w,
    afm_mlx_array scales,
    afm_mlx_array biases,
    afm_mlx_array indices,
    int group_size,
    int bits,
    int blas_min_rows,
    afm_mlx_stream s);

// afm::attention over mlx-c handles: `slots` and `offsets` hold n values
// each (copied). Same result and error conventions as afm_affine_qmm.
int afm_attention(
    afm_mlx_array* res,
    afm_mlx_array q,
    afm_mlx_array k,
    afm_mlx_array v,
    const int32_t* slots,
    const int32_t* offsets,
    int n,
    int window,
    float scale,
    afm_mlx_stream s);

// afm::gated_activation over mlx-c handles; same conventions as
// afm_affine_qmm.
int afm_gated_activation(afm_mlx_array* res, afm_mlx_array gate, afm_mlx_array up, int act,
                         afm_mlx_stream s);

// afm::decoder_layer over mlx-c handles: `inputs` holds n_inputs handles in
// the order decoder_layer takes; `res` three result handles (h, keys,
// values), each by mlx-c's output convention; `slots`, `offsets` and `lens`
// n values each (copied). Same error conventions as afm_affine_qmm.
int afm_decoder_layer(
    afm_mlx_array* res,
    const afm_mlx_array* inputs,
    int n_inputs,
    const afm_layer_config* cfg,
    const int32_t* slots,
    const int32_t* offsets,
    const int32_t* lens,
    int n,
    afm_mlx_stream s);

// afm::embedding_rows over mlx-c handles; same conventions as
// afm_affine_qmm.
int afm_embedding_rows(
    afm_mlx_array* res,
    afm_mlx_array ids,
    afm_mlx_array w,
    afm_mlx_array scales,
    afm_mlx_array biases,
    int group_size,
    int bits,
    afm_mlx_stream s);

// afm::gated_delta_net over mlx-c handles: `inputs` the six arrays in the
// order gated_delta_net takes; `res` three result handles (y, conv_state, state). Same
// error conventions as afm_affine_qmm.
int afm_delta_net(
    afm_mlx_array* res,
    const afm_mlx_array* inputs,
    int n_inputs,
    int key_heads,
    int value_heads,
    int key_dim,
    int value_dim,
    afm_mlx_stream s);

// The operations an evaluation of `a` would run: the distinct primitives of
// its graph not yet computed (the outputs of a multi-output op counted
// once), only those whose name() is `name` unless it is NULL. What a step
// costs in MLX dispatches; -1 for an empty handle.
long afm_graph_ops(afm_mlx_array a, const char* name);
/* Bytes the not-yet-computed ops named `name` in a's graph will write. */
long afm_graph_bytes(afm_mlx_array a, const char* name);

// The message of this thread's last failed call ("" if none).
const char* afm_qmm_last_error(void);

// Threads per product (caller included), from the next product on; n <= 0
// only queries. Returns the count now configured.
int afm_qmm_set_threads(int n);

// The quantized matmul kernel in use on this CPU: 1 portable, 2 AVX2+FMA,
// 3 AVX-512 (afm::qmm::Path).
int afm_qmm_kernel(void);

// The MLX version these sources were compiled against ("major.minor.patch")
// and the version of the libmlx loaded in the process. The primitive may
// only be used when the two are equal: Primitive's ABI and the array
// internals it touches change between MLX releases.
const char* afm_qmm_mlx_version_built(void);
const char* afm_qmm_mlx_version_loaded(void);

} // extern "C"
