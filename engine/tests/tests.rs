//! afm-engine's integration tests, one binary (`--test integration`):
//! each module is one concern; filter by its name, e.g.
//! `cargo test -p afm-engine --test integration -- model_conformance::`.

mod conformance;
mod support;

mod batch_api;
mod batch_invariance;
mod cli_errors;
mod convert;
mod engine_batch;
mod eos_set;
mod gemma3_reference;
mod grammar;
mod hybrid_engine;
mod mlx_lm_reference;
mod model_conformance;
mod openai_client;
mod parsers_contract;
mod reasoning_and_tools;
mod reference_tokens;
mod safetensors_dir;
mod server_http;
mod server_soak;
mod step_ops;
mod tokenizer;
