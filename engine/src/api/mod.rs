//! The API layer: each wire protocol read into the engine's protocol-free
//! request and its events written back in the protocol's shapes, and the
//! HTTP server that routes to them. Every module of this folder:
//!
//! ```text
//! context       the served model, ids, reply shapes (body or SSE events)
//! event_queue   the loop every streamed protocol shares: translated pieces
//!               handed out one at a time, the stream's open, error and end
//! ids           ids and timestamps of replies and errors, from one source
//! error         errors with each protocol's body
//! wire          reading request bodies and required fields (null = absent)
//! sampling      sampling fields and their ranges, as every protocol sends them
//! output_format a requested output format (text, JSON, a schema) as a constraint
//! tool_choice   tool_choice in the OpenAI family's shapes (chat, Responses)
//! thinking      each protocol's thinking switch as the chat template's
//! openai/       chat completions and completions (chat, request)
//! anthropic/    Messages and count_tokens (request)
//! responses/    OpenAI Responses (request)
//! batch/        the Batch API: files (the in-memory store), input (a batch
//!               file's lines checked), jobs (batches and their runner, lines
//!               run beneath interactive requests through openai/'s handlers),
//!               routes (/v1/files and /v1/batches)
//! http_server   routes, SSE framing, CORS, keys, body limits, the queue's bound
//! listener      the accept loop: connection cap, header and idle timeouts
//! metrics       Prometheus rendering of the engine's counters
//! serve_flags   afm-serve's flags: the one source of its engine and server settings
//! ```

mod anthropic;
mod batch;
mod context;
mod error;
mod event_queue;
mod http_server;
mod ids;
mod listener;
mod metrics;
pub mod openai;
mod output_format;
mod responses;
mod sampling;
mod serve_flags;
mod thinking;
mod tool_choice;
mod wire;

pub use batch::BatchConfig;
pub use context::{ApiContext, ApiResponse, EventStream, SseEvent};
pub use error::{ApiError, Protocol};
pub use http_server::{router, serve, serve_on, shutdown_signal, ServerConfig, GRAMMAR_HEADER};
pub use listener::ConnectionLimits;
pub use metrics::{render as render_metrics, RejectedRequests};
pub use openai::ChatRequest;
pub use serve_flags::ServeFlags;

#[cfg(test)]
mod tests {
    /// The map above names every module of this folder, as it says.
    #[test]
    fn the_module_map_names_every_module_of_the_folder() {
        let doc: Vec<&str> = include_str!("mod.rs")
            .lines()
            .filter_map(|l| l.strip_prefix("//! "))
            .collect();
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/src/api");
        let mut missing = Vec::new();
        for entry in std::fs::read_dir(dir).unwrap() {
            let entry = entry.unwrap();
            let name = entry.file_name().to_string_lossy().to_string();
            let module = match entry.path().is_dir() {
                true => format!("{name}/"),
                false => name.trim_end_matches(".rs").to_string(),
            };
            let named = doc
                .iter()
                .any(|l| l.split_whitespace().next() == Some(module.as_str()));
            if module != "mod" && !named {
                missing.push(module);
            }
        }
        assert!(missing.is_empty(), "not in api/mod.rs's map: {missing:?}");
    }
}
