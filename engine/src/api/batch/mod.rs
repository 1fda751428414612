//! OpenAI's Batch API: files uploaded with `/v1/files`, batches of their
//! lines run by `/v1/batches` through the same handlers as interactive
//! requests but beneath them, results written back as files. Everything
//! is held in memory: a restart forgets files and batches.
//!
//! ```text
//! files   the file store: uploads and batch results under one size cap
//! input   a batch input file's lines checked as OpenAI checks them
//! jobs    batches: their state, the runner that dispatches lines and
//!         writes the output and error files
//! routes  /v1/files and /v1/batches over axum
//! ```

mod files;
mod input;
mod jobs;
mod routes;

pub use routes::router;

/// The Batch API's bounds (afm-serve's `--batch-*` flags).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchConfig {
    /// Bytes the file store holds at most, uploads and results together
    /// (`--batch-store-mb`): what a client can make the server keep.
    pub store_bytes: usize,
    /// Batch lines in the engine at once, over all batches
    /// (`--batch-concurrency`).
    pub concurrency: usize,
}

impl Default for BatchConfig {
    fn default() -> Self {
        BatchConfig {
            store_bytes: 512 << 20,
            concurrency: 2,
        }
    }
}
