//! afm-harness's integration tests, one binary (`--test integration`):
//! each module is one concern; filter by its name, e.g.
//! `cargo test -p afm-harness --test integration -- seed_bugs::`. The
//! modules that drive afm's engine in-process need the `engine` feature.

mod support;

mod afm_parity_map;
#[cfg(feature = "engine")]
mod bench_load;
mod bench_mock;
mod bench_verify;
mod client_grades;
mod disconnect;
#[cfg(feature = "engine")]
mod gemma4_planted;
mod grading;
#[cfg(feature = "engine")]
mod hostile_clients;
mod hostile_servers;
mod html_screenshot;
mod layering;
mod model_routing;
mod runs;
#[cfg(feature = "engine")]
mod seed_bugs;
mod shutdown;
#[cfg(feature = "engine")]
mod silent_failures;
