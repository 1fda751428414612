//! `afm-bench`: a target under load, with the metrics the field uses
//! (vLLM's `bench serve`, GuideLLM, AIPerf) and every reply checked with
//! afm-test's own checks, so a wrong reply is never a fast success.
//!
//! Four rooms, each using only those before it, and three shared leaves:
//! - [`dataset`]: the conversations (built-in sets, files,
//!   [`dataset::synthetic`] token-sized prompts counted with the served
//!   model's [`dataset::tokens`], [`dataset::trace`] replay);
//! - [`verify`]: each reply checked with afm-test's checks;
//!   [`verify::schema_probe`] decides before a run whether nonce schemas
//!   can check isolation, [`verify::coverage`] says which checks covered
//!   how many replies, [`verify::recount`] counts output tokens with the
//!   served tokenizer;
//! - [`load`]: a level played at its [`load::arrivals`] shape (requests
//!   dropped on purpose: [`load::cancel`]), the server's own counters
//!   ([`load::server_metrics`]) and the client's CPU
//!   ([`load::client_cpu`]) watched, then [`load::replay`] compares
//!   replies with their replays alone;
//! - [`results`]: a level's samples as distributions, [`results::goodput`]
//!   and cache figures, shown as a table, JSON and an HTML
//!   [`results::page`] with [`results::charts`]; [`results::search`] finds
//!   the highest load meeting an SLO, [`results::records`] keeps every
//!   request, [`results::merge`] joins several clients' records,
//!   [`results::compare`] sets two runs side by side.
//!
//! The leaves: [`request`] (each endpoint's request shape), [`sample`]
//! (what one exchange became) and [`stats`] (distributions).

pub mod dataset;
pub mod load;
pub mod request;
pub mod results;
pub mod sample;
pub mod stats;
pub mod verify;
