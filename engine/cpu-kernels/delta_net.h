// The Gated DeltaNet recurrence of Qwen3-Next and Qwen3.5 (linear attention
// over a fixed state per sequence) in one call, for MLX's CPU backend.
//
// Why: as MLX ops the recurrence is a set of ~10 ops per token of a chunk
// (the state's decay, the remembered value, the delta, the update, the
// read-out) after ~50 for the convolution, norms and gates: a decode step of
// a hybrid model pays them per layer, and a prefill chunk of l tokens l times
// over. Here the chunk is one call: the convolution, SiLU, the q/k norms and
// the gates per row, then each (sequence, value head) pair's recurrence over
// the chunk's tokens on the shared pool.
//
// A sequence reads only its own rows and its own states, in a fixed order of
// operations, so its result does not depend on the batch.
#pragma once

#include <cstdint>

namespace afm::delta_net {

// The widest convolution run (Qwen3-Next and Qwen3.5 use 4).
constexpr int64_t kMaxKernel = 8;

struct Problem {
  int64_t n, l; // sequences, tokens per sequence
  int64_t key_heads, value_heads, key_dim, value_dim;
  int64_t kernel; // the convolution's width (2..kMaxKernel); kernel - 1 inputs are state

  // [n, l, conv_dim + 2 * value_heads]: q, k, v (conv_dim = 2 * key_heads *
  // key_dim + value_heads * value_dim), then b and a per value head.
  const float* x;
  // Sequence s's states are at index slots[s] of the state arrays (s
  // itself when slots is null), so a caller can step some slots of a whole
  // store. The outputs may be the inputs themselves (updated in place).
  const int32_t* slots;
  const float* conv_state; // [slots, kernel - 1, conv_dim]
  const float* state; // [slots, value_heads, value_dim, key_dim]
  const float* conv_w; // [kernel, conv_dim]
  const float* decay; // [value_heads]: exp(A_log)
  const float* dt_bias; // [value_heads]

  float* y; // [n, l, value_heads * value_dim]
  float* conv_state_out; // as conv_state
  float* state_out; // as state
};

// Per token: the causal depthwise convolution over the kept inputs and the
// new ones, SiLU; q and k RMS-normed per head (q scaled by 1/key_dim, k by
// key_dim^-0.5, an eps of 1e-6 on the sum of squares); per value head, with
// g = exp(-decay * softplus(a + dt_bias)) and beta = sigmoid(b):
// S <- g S; S <- S + k (x) ((v - S k) beta); y = S q. Blocks until done.
void run(const Problem& p);

} // namespace afm::delta_net
