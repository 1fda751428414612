//! afm's harness: assertion suites that talk OpenAI (and Anthropic) wire
//! JSON to any server over HTTP or to the in-process engine, their
//! reports, the diff of two reports that CI gates on, and load benchmarks
//! whose every reply is checked.
//!
//! A run reads one way down: [`run`] (a conformance or bench run, its
//! target chosen once) -> [`server`] and the capability probes of
//! [`suite`] -> [`run::conformance::cases`] or [`bench`] -> the checks -> [`report`]. The
//! folders and what each holds: `docs/architecture.md`.

pub mod bench;
pub mod clients;
pub mod hostile;
pub mod mock;
pub mod outcome;
pub mod protocol;
pub mod report;
pub mod run;
pub mod run_info;
pub mod server;
pub mod soak;
pub mod suite;
pub mod toml_input;
