//! afm's harness: assertion suites and benchmarks that talk OpenAI wire JSON to
//! the in-process engine or to any server over HTTP.
//!
//! The suites, targets and reports arrive with the harness issue; for now the
//! crate only reserves its place in the workspace and its two binaries.
