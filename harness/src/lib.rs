//! afm's harness: assertion suites that talk OpenAI wire JSON to the
//! in-process engine or to any server over HTTP, their reports, and the
//! diff of two reports that CI gates on.
//!
//! Data flow of `afm-test run`: [`suite`] files are loaded and selected,
//! [`capabilities`] are probed on the [`target`], the [`runner`] plays each
//! case's scenario and evaluates its [`checks`] on the [`reply`]s (each
//! protocol's [`dialect`] prepares requests and reads replies), and the
//! results become a [`report`] (JSON, [`html`], [`junit`]). [`diff`]
//! compares two reports, with [`known_failures`] attributing old failures.
//!
//! [`spec_schemas`] holds the vendors' published reply schemas that the
//! `schema` check validates against.
//!
//! [`profile`] declares what probes should not decide, [`server_process`]
//! starts and stops a server for a run, and [`matrix`] runs several
//! targets into one report with a column per target.
//!
//! [`bench`] is `afm-bench`: load runs over the same targets, measured per
//! request (TTFT, ITL, end-to-end) and per concurrency level.

pub mod bench;
pub mod capabilities;
pub mod checks;
pub mod dialect;
pub mod diff;
pub mod filler;
pub mod html;
pub mod junit;
pub mod known_failures;
pub mod matrix;
pub mod outcome;
pub mod profile;
pub mod reply;
pub mod report;
pub mod run_info;
pub mod runner;
pub mod server_process;
pub mod spec_schemas;
pub mod suite;
pub mod target;
pub mod toml_input;
