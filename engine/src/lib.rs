//! afm's inference engine: loads a model (GGUF or MLX/HF safetensors), its
//! tokenizer, chat template and EOS set, and generates with MLX.
//!
//! Folders by concern, dependencies one way (see `docs/architecture.md`):
//! `layers` (linear and embedding arithmetic, dense or quantized) <-
//! `loading` (files -> model parts) <- `models` (architectures, the shared
//! forward context, KV layout; the registry of architectures, whose
//! families `loading`'s readers are handed) <- `runtime` (engine thread,
//! scheduler, per-sequence pipeline) <- `api` (the protocols, HTTP).
//! `parsers` turn model text into messages and depend on nothing else
//! here. `device` is MLX's default device (kind, memory, MLX's buffer
//! cache) and depends on nothing else here; `cpu` is what the engine adds
//! under MLX's CPU backend (BLAS threads, afm's primitives), stepping aside
//! on a GPU, and depends on `device` and the error type alone.

pub mod api;
pub mod cpu;
pub mod device;
mod error;
pub mod layers;
pub mod loading;
pub mod models;
pub mod parsers;
pub mod runtime;

pub use error::{EngineError, Result};
pub use models::LoadedModel;
pub use runtime::{
    generate, Completion, Engine, EngineConfig, EngineEvent, FinishReason, Generation,
    GenerationRequest, GenerationSettings, Priority, Prompt, RequestStream, SamplingParams, Usage,
};
