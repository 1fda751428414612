//! `afm-bench`: throughput and latency of a target under load, with the
//! metrics the field uses (vllm's `bench serve`, GuideLLM): time to first
//! token, time per output token, inter-token latency, end-to-end latency,
//! tokens and requests per second, errors; and the server's own counters
//! (prefill work, cache hits) from `/metrics` when it has them.
//!
//! Data flow: a [`workload`] of chat requests per concurrency level is
//! played by [`load`] (closed loop: N workers, each sends its next request
//! when the previous one ended), every request streamed and timed chunk by
//! chunk; [`stats`] turns samples into distributions, [`report`] holds a
//! run (JSON, console table, HTML with [`charts`]) and [`compare`] sets
//! two runs side by side. A failed request is an error, never a fast one.

pub mod arrivals;
pub mod charts;
pub mod compare;
pub mod dataset;
pub mod goodput;
pub mod load;
pub mod page;
pub mod records;
pub mod report;
pub mod request;
pub mod sample;
pub mod server_metrics;
pub mod stats;
pub mod tokens;
pub mod verify;
