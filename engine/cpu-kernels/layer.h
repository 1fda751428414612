// A whole pre-norm decoder layer (attention or a Gated DeltaNet recurrence,
// then a gated MLP or routed experts) in one call, for MLX's CPU backend.
//
// Why: as MLX ops a decode step of a small model is ~13 ops per layer (norms
// and RoPE fall back to several plain ops each on the CPU, the KV writes,
// residual adds, copies of reshaped views), and every op is a graph node, a
// push to MLX's stream thread and usually a thread wake: ~390 context
// switches per token on SmolLM2, more time than its small matmuls. Here the
// layer is one function on the stream thread: the small steps (norms, RoPE,
// the KV write, residual adds) run inline on it, and the products,
// attention and the activation go to the shared pool, whose workers stay
// hot (spinning, then yielding) between the sub-steps, with the calling
// thread as worker 0.
//
// Every row is computed from its own input row, its own slot of the KV store
// and nothing else, in a fixed order of operations: the layer is
// batch-invariant by construction, as its kernels are (unless blas_min_rows
// lets a long prefill take the dequantizing BLAS path).
#pragma once

#include <cstdint>

#include "qmm_affine.h"
#include "qmm_gather.h"

namespace afm::layer {

// A Gated DeltaNet mixer in place of attention (the linear-attention layers
// of Qwen3-Next and Qwen3.5, delta_net.h): the input product gives each
// row's q, k, v, then z (value_heads * value_dim), b and a (value_heads
// each); the recurrence runs over them from each item's states in the
// store; its output, RMS-normed per value head (gate_norm, the layer's eps)
// times silu(z), goes through the output product.
struct Recurrent {
  int64_t key_heads, value_heads, key_dim, value_dim, kernel;
  const float* conv_w; // [kernel, conv_dim]
  const float* decay; // [value_heads]: exp(A_log)
  const float* dt_bias; // [value_heads]
  const float* gate_norm; // [value_dim]
  // The store, updated in place: [store_slots, kernel - 1, conv_dim] and
  // [store_slots, value_heads, value_dim, key_dim].
  float* conv_states;
  float* delta_states;
};

struct Problem {
  // Rows: n items, item i's lens[i] new tokens end to end after the
  // previous item's; item i sits in KV slot slots[i], its first new token
  // at position offsets[i]. Any mix: decoding items (one token each) and
  // prefill chunks, so every pass of a model takes the same arithmetic.
  int64_t n;
  const int32_t* lens;
  const int32_t* slots;
  const int32_t* offsets;

  int64_t dim; // hidden size
  int64_t heads, kv_heads, head_dim;
  int64_t hidden; // the MLP's (or each expert's) intermediate size

  // With recurrent set the mixer is that recurrence: qkv is its input
  // product, o its output product, and the attention fields, the KV store
  // and offsets are unused.
  const Recurrent* recurrent;

  const float* h; // [rows, dim], the residual stream in
  float* h_out; // [rows, dim]
  // The KV store of this layer, [slots, kv_heads, capacity, head_dim],
  // contiguous; the new keys and values are written into it.
  float* keys;
  float* values;
  int64_t store_slots, capacity;

  float eps; // the layer's RMSNorm eps
  const float* attn_norm; // [dim]
  const float* attn_out_norm; // [dim] or null (Gemma's post-attention norm)
  const float* ffn_norm; // [dim]
  const float* ffn_out_norm; // [dim] or null (Gemma's post-feed-forward norm)
  const float* q_norm; // [head_dim] or null (Qwen3, Gemma 3)
  const float* k_norm; // [head_dim], with q_norm
  float qk_eps;

  qmm::AffineMatrix qkv; // [heads + 2 kv_heads (+ heads)] * head_dim rows: q, k, v (, gate)
  qmm::AffineMatrix o; // dim rows
  // The feed-forward block: a gated MLP, or (experts > 0) routed experts.
  qmm::AffineMatrix gate_up; // 2 * hidden rows: gate, then up
  qmm::AffineMatrix down; // dim rows
  // Routed experts (Qwen3-MoE): a softmax router over `experts` picks each
  // row's top_k, their weights renormalised over the k when norm_topk; the
  // row's output is the weighted sum of its experts' gated MLPs.
  int64_t experts, top_k;
  bool norm_topk;
  qmm::AffineMatrix router; // experts rows
  qmm::AffineStack expert_gate, expert_up; // hidden rows each
  qmm::AffineStack expert_down; // dim rows each
  // A shared expert beside the routed ones (Qwen3-Next, Qwen3.5-MoE): a
  // gated MLP of shared_hidden every row goes through, times the sigmoid of
  // its gate's one value, added to the routed sum.
  bool shared;
  int64_t shared_hidden;
  qmm::AffineMatrix shared_gate_up; // 2 * shared_hidden rows
  qmm::AffineMatrix shared_down; // dim rows
  qmm::AffineMatrix shared_gate; // 1 row
  // Products of at least this many rows take the dequantizing BLAS path
  // (qmm::matmul_dequant_sgemm); 0: never.
  int64_t blas_min_rows;

  float rope_base;
  int64_t rope_dims; // RoPE over each head's first rope_dims features (even)
  bool rope_traditional; // interleaved pairs instead of rotate-half
  // Qwen3-Next's and Qwen3.5's output gate: the q/k/v product's rows end
  // with heads * head_dim gate values; attention's output is multiplied by
  // their sigmoid before the output product.
  bool output_gate;
  float scale; // multiplies q · k
  int64_t window; // sliding window (0: none)
  int act; // glu::Act: 0 SiLU, 1 GELU (tanh form)

  // Gemma 4's attention. RoPE's wavelengths per rotated pair instead of
  // rope_base's (rope_dims / 2 of them; infinite for a pair left as it is).
  const float* rope_freqs;
  // A weightless RMSNorm of each value head (eps v_eps).
  bool v_norm;
  float v_eps;
  // No value product: the values are the key product's rows as they come
  // out of it, before the key norm and RoPE.
  bool k_eq_v;
  // The layer reads another layer's store (keys and values here) and writes
  // nothing: qkv holds the queries alone (no k or v rows, no k norm).
  bool kv_shared;
  // Gemma 4's per-layer input, after the feed-forward block:
  // h_out += norm(pl_proj(gelu(pl_gate(h_out)) * in)), in = per_layer_in's
  // row r at r * per_layer_stride, per_layer_dim values (0: none).
  int64_t per_layer_dim, per_layer_stride;
  const float* per_layer_in;
  qmm::AffineMatrix pl_gate; // per_layer_dim rows
  qmm::AffineMatrix pl_proj; // dim rows
  const float* pl_norm; // [dim]
  // Multiplies the layer's output, last (Gemma 4's layer_scalar); or null.
  const float* layer_scalar;

  // Gemma 4's MoE block (26B-A4B), with experts: the gated MLP (gate_up,
  // down; dense_hidden wide) over norm(h, ffn_norm), normed by
  // dense_out_norm, plus the routed experts normed by experts_out_norm. The
  // router reads norm(h, router_norm), picks each row's top_k scores and
  // weighs them by the softmax over those k times expert_scale; the experts
  // read norm(h, experts_norm).
  bool gemma_moe;
  int64_t dense_hidden;
  const float* router_norm; // [dim]
  const float* expert_scale; // [experts]
  const float* experts_norm; // [dim]
  const float* experts_out_norm; // [dim]
  const float* dense_out_norm; // [dim]
};

// Runs the layer: h_out = h + mix(norm(h)), then h_out += ffn(norm(h_out)),
// with the optional output norms applied to each block's output before its
// residual add, and this step's keys and values written into the store;
// then the per-layer input and the layer scalar, where set.
// Blocks until done. The caller has checked shapes and positions.
void run(const Problem& p);

} // namespace afm::layer
