//! Test-only servers for the harness's tests.

// Each test binary uses a part of it.
#[allow(dead_code)]
pub mod faulty_server;
