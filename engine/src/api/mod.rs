//! The API layer: OpenAI's chat and text completions over the engine
//! (`openai`), the HTTP server that routes to them (`http_server`), and
//! the Prometheus rendering of the engine's counters (`metrics`).

mod http_server;
mod metrics;
mod openai;

pub use http_server::{router, serve, shutdown_signal, ServerConfig, GRAMMAR_HEADER};
pub use metrics::{render as render_metrics, RejectedRequests};
pub use openai::{ApiContext, ApiError, ApiResponse, ChunkStream};
