//! Test-only servers for the harness's tests.

// Built without the `engine` feature, some helpers go unused.
#[allow(dead_code)]
#[cfg(feature = "engine")]
pub mod faulty_server;

#[allow(dead_code)]
pub mod mock;

#[allow(dead_code)]
pub mod routing_double;
