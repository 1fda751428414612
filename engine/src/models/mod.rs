//! Decoder architectures behind one trait ([`CausalLm`]), one file each
//! (`llama.rs`, `qwen3.rs`, `qwen3_moe.rs`, `gemma3.rs`), over what they share: the forward context (batch layout,
//! the attention paths, batch-invariant linear layers), the blocks HF
//! checkpoints have in common (self-attention, gated MLP, LM head), the KV
//! layout a model declares and the batch KV store. [`registry`] lists them.

mod causal_lm;
mod decoder;
mod feed_forward;
mod forward;
mod gated_mlp;
mod gemma3;
mod kv_layout;
mod kv_store;
mod llama;
mod lm_head;
mod qwen3;
mod qwen3_moe;
pub mod registry;
mod self_attention;

pub use causal_lm::CausalLm;
pub use forward::{AttentionSpec, BatchItem, ForwardContext, QkNorm};
pub use kv_layout::{KvLayout, LayerKv};
pub use kv_store::{KvCache, KvSegment, KvStore};
pub use registry::{Architecture, ARCHITECTURES};
