//! `afm-bench`: a target under load, with the metrics the field uses
//! (vLLM's `bench serve`, GuideLLM, AIPerf) and every reply checked with
//! afm-test's own checks, so a wrong reply is never a fast success.
//!
//! Data flow: a [`dataset`] gives conversations (built-in sets, files,
//! [`dataset::synthetic`] token-sized prompts counted with the served
//! model's [`tokens`], [`dataset::trace`] replay); [`load`] plays them at a
//! level's [`arrivals`] shape, each turn sent in its endpoint's
//! [`request`] shape; each exchange becomes a [`sample`] and is checked by
//! [`verify`] (after a level, [`replay`] compares replies with their
//! replays alone; [`schema_probe`] decides before a run whether nonce
//! schemas can check isolation; [`coverage`] says which checks covered
//! how many replies); [`results`] turns a level's samples into distributions
//! ([`stats`]), [`goodput`] and cache figures, shown as a table, JSON and
//! an HTML [`page`] with [`charts`]; [`search`] finds the highest load
//! meeting an SLO; [`records`] keeps every request; [`compare`] sets two
//! runs side by side; [`server_metrics`] reads the server's own counters;
//! [`merge`] joins several clients' records into one report.

pub mod arrivals;
pub mod cancel;
pub mod charts;
pub mod client_cpu;
pub mod compare;
pub mod coverage;
pub mod dataset;
pub mod goodput;
pub mod load;
pub mod merge;
pub mod page;
pub mod records;
pub mod recount;
pub mod replay;
pub mod request;
pub mod results;
pub mod sample;
pub mod schema_probe;
pub mod search;
pub mod server_metrics;
pub mod stats;
pub mod tokens;
pub mod verify;
