//! Test-only servers for the harness's tests.

pub mod faulty_server;
