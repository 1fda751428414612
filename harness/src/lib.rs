//! afm's harness: assertion suites that talk OpenAI wire JSON to the
//! in-process engine or to any server over HTTP, their reports, the diff
//! of two reports that CI gates on, and load benchmarks.
//!
//! Folders by concern; dependencies run one way, top to bottom:
//! - [`bench`]: `afm-bench`, load runs whose every reply is checked with
//!   the suites' own checks;
//! - [`runner`]: `afm-test`'s run, each case's scenario played and its
//!   checks evaluated;
//! - [`report`]: a run's results (JSON, HTML, JUnit), the diff of two runs
//!   with known failures attributed, the matrix of several targets;
//! - [`suite`]: the TOML suites, their checks, the capabilities probed on
//!   a target, and the profile that overrides probes;
//! - [`server`]: the target requests go to (a server over HTTP, one
//!   started for the run, afm-serve's router in-process);
//! - [`protocol`]: one exchange as a target hands it back, each wire
//!   protocol's dialect that reads it into a reply, the vendors' schemas;
//! - leaves: [`outcome`] (what a check concludes), [`toml_input`],
//!   [`run_info`].

pub mod bench;
pub mod outcome;
pub mod protocol;
pub mod report;
pub mod run_info;
pub mod runner;
pub mod server;
pub mod suite;
pub mod toml_input;
