//! afm's inference engine: loads a model (GGUF or MLX/HF safetensors), its
//! tokenizer, chat template and EOS set, and generates with MLX.
//!
//! One module per concern; see `docs/architecture.md` for the data flow.

pub mod chat_template;
pub mod convert;
pub mod cpu_blas;
pub mod engine;
pub mod eos;
pub mod error;
pub mod generate;
pub mod gguf;
pub mod grammar;
pub mod http_server;
pub mod loaded_model;
pub mod metrics;
pub mod model_config;
pub mod model_source;
pub mod models;
pub mod openai_api;
pub mod parsers;
pub mod prefix_cache;
pub mod request;
pub mod sampler;
mod scheduler;
pub mod stop;
pub mod tokenizer;
pub mod weights;

pub use engine::{Completion, Engine, EngineConfig, EngineEvent, RequestStream, Usage};
pub use error::{EngineError, Result};
pub use generate::{generate, FinishReason, Generation, GenerationParams};
pub use loaded_model::LoadedModel;
pub use request::ChatRequest;
pub use sampler::SamplingParams;
