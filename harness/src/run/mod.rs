//! The two runs the binaries start, as library functions that return
//! their reports: a conformance run (suites against one target, or a
//! matrix of targets) and a bench run (load levels, every reply checked).
//! Each chooses its target through [`crate::server::flags`], the one place that knows
//! url / server command / in-process; the binaries parse flags, print
//! and pick exit codes.

pub mod agents;
pub mod bench;
pub mod compare;
pub mod conformance;
pub mod matrix;
pub mod plan;
pub mod progress;
pub mod regrade;

use crate::report::CaseResult;

/// What a run tells its caller as it goes (the binaries print it; tests
/// stay quiet).
pub trait Observer: Send + Sync {
    /// A line of news: a server started, a level measured.
    fn note(&self, _line: &str) {}
    /// The conformance run is about to play this many cases.
    fn cases_planned(&self, _cases: usize) {}
    /// One case ended.
    fn case_done(&self, _result: &CaseResult) {}
}

/// An observer that ignores everything.
pub struct Quiet;

impl Observer for Quiet {}
