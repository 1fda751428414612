//! afm-bench's measurements end to end: requests to the in-process engine
//! are timed from their chunks and counted from the engine's usage, the
//! engine's counters come through `/metrics`, and requests that fail are
//! errors with no latency and no tokens, never fast requests.

use std::sync::Arc;

use afm_engine::api::ApiContext;
use afm_engine::{Engine, EngineConfig};
use afm_harness::bench::load;
use afm_harness::bench::report::LevelResult;
use afm_harness::bench::server_metrics;
use afm_harness::bench::workload::{Prompts, Workload};
use afm_harness::target::Target;
use serde_json::{json, Value};

fn requests(n: usize, salt: &str) -> Vec<Value> {
    Workload::new(Prompts::Short)
        .unwrap()
        .messages(n, salt)
        .into_iter()
        .map(|m| {
            json!({
                "model": "smollm2", "messages": m, "max_tokens": 8, "temperature": 0.0,
                "stream": true, "stream_options": {"include_usage": true}
            })
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn engine_requests_are_timed_counted_and_seen_in_its_counters() {
    let engine = Engine::start(
        "smollm2",
        EngineConfig {
            prefix_caching: true,
            concurrent: 4,
            ..Default::default()
        },
    )
    .expect("run scripts/setup.sh first");
    let target = Target::in_process(Arc::new(ApiContext::new(engine, "smollm2")), None);
    let before = server_metrics::scrape(&target)
        .await
        .expect("in-process /metrics");
    let run = load::run(&target, requests(4, "bench-test"), 2).await;
    let after = server_metrics::scrape(&target).await.unwrap();

    assert_eq!(run.samples.len(), 4);
    for s in &run.samples {
        assert!(s.ok(), "{:?}", s.error);
        assert!(s.usage_reported);
        assert!(s.output_tokens >= 1 && s.output_tokens <= 8);
        assert!(s.prompt_tokens > 10);
        let ttft = s.ttft_ms.unwrap();
        assert!(ttft > 0.0 && ttft <= s.e2e_ms);
        assert_eq!(s.itl_ms.len() as u64 + 1, s.output_tokens);
    }
    let server = server_metrics::delta(&before, &after);
    let computed = server.prefill_computed_tokens.expect("afm counter");
    let prompt: u64 = run.samples.iter().map(|s| s.prompt_tokens).sum();
    let cached: u64 = run.samples.iter().filter_map(|s| s.cached_tokens).sum();
    assert_eq!(computed as u64 + cached, prompt);

    let level = LevelResult::of(2, &[run], Some(server));
    assert_eq!((level.requests, level.errors), (4, 0));
    assert!(level.output_tokens_per_s > 0.0);
}

#[tokio::test]
async fn a_server_that_is_not_there_gives_errors_not_speed() {
    // A port nothing listens on: bind, note it, close.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let target = Target::http(&format!("http://127.0.0.1:{port}"), None);
    assert!(server_metrics::scrape(&target).await.is_none());
    let run = load::run(&target, requests(6, "absent"), 3).await;
    assert_eq!(run.samples.len(), 6);
    assert!(run.samples.iter().all(|s| s.error.is_some()));
    let level = LevelResult::of(3, &[run], None);
    assert_eq!((level.requests, level.errors), (6, 6));
    assert_eq!((level.ttft, level.e2e, level.itl), (None, None, None));
    assert_eq!(level.output_tokens_per_s, 0.0);
    assert_eq!(level.requests_per_s, 0.0);
    assert!(
        level.error_examples[0].starts_with("transport"),
        "{:?}",
        level.error_examples
    );
}
