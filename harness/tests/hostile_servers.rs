//! afm-bench against broken servers (the mock's breaking faults): each
//! run ends within the request time limit, every request is an error or a
//! corrupted reply that names what the server did, and a body of
//! gigabytes is cut at the harness's cap. No engine needed.

use std::sync::Arc;
use std::time::Instant;

use crate::support::mock::{self, bench_args};
use afm_harness::run::{bench, Quiet};

/// A run of 2 requests against the mock broken by `fault`, cut after 2 s:
/// what it said of them, the kinds it counted them under, and how long it
/// took.
fn against(fault: &str) -> (Vec<String>, Vec<String>, f64) {
    let mut args = mock::fast();
    args.fault = vec![fault.parse().unwrap()];
    let url = mock::start(args);
    let out = std::env::temp_dir().join(format!("afm-hostile-{}-{fault}", std::process::id()));
    let flags = [
        "--concurrency",
        "2",
        "--requests",
        "2",
        "--request-timeout",
        "2",
        "--verify-alone",
        "0",
        "--schema-share",
        "0",
    ];
    let started = Instant::now();
    let report = bench::run(&bench_args(&url, &out, &flags), Arc::new(Quiet)).unwrap();
    let wall = started.elapsed().as_secs_f64();
    let _ = std::fs::remove_dir_all(&out);
    let l = &report.variants[0].levels[0];
    assert_eq!(l.errors + l.corrupted, 2, "{fault}: {:?}", l.failures);
    let mut said = l.error_examples.clone();
    said.extend(
        l.corrupted_requests
            .iter()
            .map(|c| format!("[{}] {}", c.check, c.detail)),
    );
    (said, l.failures.keys().cloned().collect(), wall)
}

#[test]
fn each_broken_server_ends_in_named_errors_within_the_time_limit() {
    for (fault, named, kind) in [
        // Stopped at what max_tokens allows, not at the time limit.
        ("endless", "events for a budget of", "past-max-tokens"),
        (
            "slow-bytes",
            "did not end within the request time limit",
            "timeout",
        ),
        ("huge-body", "the harness's cap", "too-large"),
        ("no-done", "[DONE]", "stream"),
        ("malformed-sse", "this is not SSE", "stream"),
        ("html-200", "not a stream: a text/html body", "not-a-stream"),
        ("invalid-utf8", "invalid UTF-8", "stream"),
        ("redirect-loop", "redirect", "redirects"),
        (
            "lying-length",
            "did not end within the request time limit",
            "timeout",
        ),
        (
            "json-bomb",
            "not a stream: a application/json body",
            "not-a-stream",
        ),
    ] {
        let (said, kinds, wall) = against(fault);
        assert!(
            kinds.iter().any(|k| k == kind),
            "{fault}: {kinds:?} {said:?}"
        );
        assert!(
            said.iter().any(|s| s.contains(named)),
            "{fault}: {said:?} does not name {named:?}"
        );
        // Two requests of 2 s at most each, a probe, and the re-count.
        assert!(wall < 15.0, "{fault}: {wall:.1} s");
    }
}

#[test]
fn a_model_list_that_never_ends_stops_the_run_with_its_reason() {
    let mut args = mock::fast();
    args.fault = vec!["endless-models".parse().unwrap()];
    let url = mock::start(args);
    let out = std::env::temp_dir().join(format!("afm-hostile-{}-models", std::process::id()));
    let started = Instant::now();
    let err = bench::run(
        &bench_args(&url, &out, &["--request-timeout", "2"]),
        Arc::new(Quiet),
    )
    .unwrap_err();
    let text = format!("{err:#}");
    assert!(started.elapsed().as_secs_f64() < 10.0, "{text}");
    assert!(
        text.contains("/v1/models") && text.contains("did not end within the request time limit"),
        "{text}"
    );
}

/// A server that generates one request at a time and refuses another in
/// flight with 503 (vllm-mlx's fail-fast admission) is not called broken
/// for refusing the capability probes afm-test sends together: each
/// refused probe is asked again alone, and all three protocols are found.
#[test]
fn a_server_busy_with_one_probe_is_probed_again_not_called_broken() {
    use afm_harness::server::Target;
    use afm_harness::suite::capabilities::{Capabilities, State};
    // 300 ms to the first token: the probes sent together overlap.
    let mut args = afm_harness::mock::MockArgs::timed(300.0, 1.0, 4);
    args.fault = vec!["busy".parse().unwrap()];
    let url = mock::start(args);
    let rt = tokio::runtime::Runtime::new().unwrap();
    let caps = rt.block_on(Capabilities::detect(&Target::http(&url, None), "busy"));
    for name in ["messages", "responses", "streaming"] {
        let d = caps
            .found
            .get(name)
            .unwrap_or_else(|| panic!("{name} not probed"));
        assert_eq!(d.state, State::Present, "{name}: {}", d.evidence);
    }
}

/// A server that refuses `tool_choice` "required" but calls tools under
/// "auto" (mistral.rs 0.8.1) has tools: calling them absent would skip
/// every tools case and hide its failures, the "required" one among them.
#[test]
fn a_server_refusing_only_required_tool_choice_is_found_with_tools() {
    use afm_harness::server::Target;
    use afm_harness::suite::capabilities::{Capabilities, State};
    let url = crate::support::tool_choice_double::start();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let caps = rt.block_on(Capabilities::detect(&Target::http(&url, None), "tools"));
    let tools = caps.found.get("tools").expect("tools probed");
    assert_eq!(tools.state, State::Present, "{}", tools.evidence);
    assert!(
        tools.evidence.contains("422"),
        "the refusal is kept as evidence: {}",
        tools.evidence
    );
}
