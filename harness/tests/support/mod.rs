//! Test-only servers for the harness's tests.

// Each test binary uses a part of it.
#[allow(dead_code)]
#[cfg(feature = "engine")]
pub mod faulty_server;

#[allow(dead_code)]
pub mod mock;

#[allow(dead_code)]
pub mod routing_double;
