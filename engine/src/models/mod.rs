//! Decoder architectures behind one trait ([`CausalLm`]), one file each
//! (`llama.rs`), over what they share: the forward context (batch layout,
//! the attention paths, batch-invariant linear layers), the KV layout a
//! model declares, its KV cache, and the LM head. [`registry`] lists them.

mod causal_lm;
mod forward;
mod kv_cache;
mod kv_layout;
mod llama;
mod lm_head;
pub mod registry;

pub use causal_lm::CausalLm;
pub use forward::{AttentionSpec, BatchItem, ForwardContext};
pub use kv_cache::{KvCache, KvSegment};
pub use kv_layout::{KvLayout, LayerKv};
pub use llama::Llama;
pub use registry::{Architecture, ARCHITECTURES};
