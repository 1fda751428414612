//! Decoder architectures behind one trait ([`CausalLm`]), one file each
//! (`llama.rs`, `qwen3.rs`, `qwen3_moe.rs`, `qwen3_next.rs`, `qwen3_5.rs`,
//! `gemma3.rs`, `gemma4.rs`), over what they share: the forward context (batch layout,
//! the attention and recurrent paths, batch-invariant linear layers), the
//! blocks HF checkpoints have in common (self-attention, the Gated DeltaNet
//! mixer, gated MLP, routed experts, LM head), the KV layout a model
//! declares and the batch KV store. [`registry`] lists them.

mod causal_lm;
mod decoder;
mod feed_forward;
mod forward;
mod gated_delta_net;
mod gated_mlp;
mod gemma3;
mod gemma4;
mod kv_layout;
mod kv_store;
mod layer_op;
mod llama;
mod lm_head;
mod loaded;
mod qwen3;
mod qwen3_5;
mod qwen3_moe;
mod qwen3_next;
pub mod registry;
mod self_attention;
mod sparse_moe;

pub use causal_lm::CausalLm;
pub use forward::{AttentionSpec, BatchItem, ForwardContext, Overlap, QkNorm};
pub use kv_layout::{KvLayout, LayerKv, RecurrentLayer};
pub use kv_store::{KvCache, KvSegment, KvStore, StateSnapshot};
pub use loaded::LoadedModel;
pub use registry::{Architecture, ARCHITECTURES};
