//! afm-bench's measurements end to end: requests to the in-process engine
//! are timed from their events and counted from the engine's usage, the
//! engine's counters come through `/metrics`, a multi-turn run's cached
//! tokens match the history the client sent before, every protocol is
//! loaded, and requests that fail are errors with no latency and no
//! tokens, never fast requests.

use std::sync::Arc;

use afm_engine::api::ApiContext;
use afm_engine::{Engine, EngineConfig};
use afm_harness::bench::dataset::builtin::{Prompts, Workload};
use afm_harness::bench::dataset::synthetic::Vocabulary;
use afm_harness::bench::dataset::tokens::TokenCounter;
use afm_harness::bench::dataset::{Dataset, Source};
use afm_harness::bench::load::arrivals::{Bound, Shape};
use afm_harness::bench::load::server_metrics;
use afm_harness::bench::load::Player;
use afm_harness::bench::request::RequestSettings;
use afm_harness::bench::results::goodput::Slo;
use afm_harness::bench::results::LevelResult;
use afm_harness::protocol::endpoint::Endpoint;
use afm_harness::server::Target;
use serde_json::json;

fn player(target: &Target, endpoint: Endpoint, turns: usize) -> Arc<Player> {
    Arc::new(Player {
        target: target.clone(),
        dataset: Arc::new(Dataset {
            source: Source::Builtin(Workload::new(Prompts::Short).unwrap()),
            turns,
            output_len: None,
            range_ratio: 0.0,
            seed: 0,
        }),
        settings: RequestSettings {
            endpoint,
            model: "smollm2".into(),
            temperature: 0.0,
            ignore_eos: false,
            extra: json!({}),
        },
        max_tokens: 8,
        verify: true,
        tolerate: Vec::new(),
        schema_share: 0.0,
        cancel_share: 0.0,
        cancel_after: std::time::Duration::ZERO,
        think_s: 0.0,
        seed: 0,
        background_streams: 0,
        background_tokens: 0,
    })
}

fn requests(n: usize) -> Bound {
    Bound {
        requests: Some(n),
        duration_s: None,
    }
}

fn engine(prefix_caching: bool) -> Target {
    let engine = Engine::start(
        "smollm2",
        EngineConfig {
            prefix_caching,
            concurrent: 4,
            ..Default::default()
        },
    )
    .expect("run scripts/setup.sh first");
    Target::in_process(Arc::new(ApiContext::new(engine, "smollm2")), None)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn engine_requests_are_timed_counted_checked_and_seen_in_its_counters() {
    let target = engine(true);
    let before = server_metrics::scrape(&target)
        .await
        .expect("in-process /metrics");
    let p = player(&target, Endpoint::Chat, 1);
    let run = p
        .play(Shape::Closed { concurrency: 2 }, requests(4), "bench-test")
        .await;
    let after = server_metrics::scrape(&target).await.unwrap();

    assert_eq!(run.samples.len(), 4);
    for s in &run.samples {
        assert!(s.correct(), "{:?} {:?}", s.error, s.failed_checks);
        assert!(s.usage_reported);
        assert!(s.output_tokens >= 1 && s.output_tokens <= 8);
        assert!(s.prompt_tokens > 10);
        let ttft = s.ttft_ms.unwrap();
        assert!(ttft > 0.0 && ttft <= s.e2e_ms);
        assert_eq!(s.token_ms.len() as u64, s.output_tokens);
        assert!(s.marker.is_some());
    }
    let server = server_metrics::delta(&before, &after);
    let computed = server.prefill_computed_tokens.expect("afm counter");
    let prompt: u64 = run.samples.iter().map(|s| s.prompt_tokens).sum();
    let cached: u64 = run.samples.iter().filter_map(|s| s.cached_tokens).sum();
    assert_eq!(computed as u64 + cached, prompt);

    let shape = Shape::Closed { concurrency: 2 };
    let level = LevelResult::of(shape, &[run], Some(server), &Slo::default(), &[50.0]);
    assert_eq!((level.requests, level.errors, level.corrupted), (4, 0, 0));
    assert!(level.output_tokens_per_s > 0.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_multi_turn_run_is_served_its_history_from_the_prefix_cache() {
    let target = engine(true);
    let p = player(&target, Endpoint::Chat, 3);
    let run = p
        .play(Shape::Closed { concurrency: 2 }, requests(6), "turns")
        .await;
    assert_eq!(run.samples.len(), 6);
    let level_turns_after_first = run.samples.iter().filter(|s| s.turn > 0).count();
    let shape = Shape::Closed { concurrency: 2 };
    let level = LevelResult::of(shape, &[run], None, &Slo::default(), &[]);
    assert_eq!((level.errors, level.corrupted), (0, 0));
    let cache = level
        .cache
        .expect("later turns expect their history cached");
    // Two users, 6 requests: turns 2 and 3 of two conversations, or of
    // three when one user is a turn ahead and starts another.
    let later = level_turns_after_first;
    assert_eq!(
        cache.requests, later,
        "every later turn expects its history"
    );
    assert!(later >= 3, "{later} later turns");
    let reported = cache.reported_tokens.expect("cached_tokens reported");
    assert!(
        reported as f64 >= 0.9 * cache.expected_tokens as f64,
        "{reported} cached of {} expected",
        cache.expected_tokens
    );
    assert_eq!(cache.requests_at_90, later);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_responses_and_completions_are_loaded_in_their_own_protocols() {
    let target = engine(false);
    for endpoint in [
        Endpoint::Messages,
        Endpoint::Responses,
        Endpoint::Completions,
    ] {
        let p = player(&target, endpoint, 1);
        let run = p
            .play(Shape::Closed { concurrency: 2 }, requests(2), "protocols")
            .await;
        for s in &run.samples {
            assert!(
                s.correct(),
                "{endpoint:?}: {:?} {:?}",
                s.error,
                s.failed_checks
            );
            assert!(s.usage_reported && s.prompt_tokens > 5, "{endpoint:?}");
            assert!(s.ttft_ms.is_some() && s.ttfa_ms.is_some(), "{endpoint:?}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn synthetic_prompts_are_the_asked_length_in_the_served_models_tokens() {
    let target = engine(false);
    let counter = TokenCounter::probe(&target, "smollm2", None).await.unwrap();
    assert!(
        counter.describe().contains("count_tokens"),
        "{}",
        counter.describe()
    );
    let vocabulary = Vocabulary::probe(&counter).await.unwrap();
    let dataset = Dataset {
        source: Source::Synthetic {
            vocabulary,
            input_len: 200,
            prefix_len: 50,
        },
        turns: 1,
        output_len: Some(4),
        range_ratio: 0.0,
        seed: 0,
    };
    for i in 0..3 {
        let c = dataset.conversation(i, "synthetic");
        let text = c.turns[0]["content"].as_str().unwrap();
        let n = counter.count(text).await.unwrap();
        // The prefix, its line break and the request's own 200 tokens.
        assert!((245..=256).contains(&n), "request {i}: {n} tokens");
        assert_eq!(c.max_tokens, Some(4));
        assert_eq!(c.prefixes, vec![("synthetic/prefix".to_string(), 50)]);
    }
    let a = dataset.conversation(0, "synthetic");
    let b = dataset.conversation(1, "synthetic");
    let (a, b) = (
        a.turns[0]["content"].as_str().unwrap(),
        b.turns[0]["content"].as_str().unwrap(),
    );
    let shared = a.chars().zip(b.chars()).take_while(|(x, y)| x == y).count();
    assert!(
        a[..shared].contains('\n') && shared < a.len(),
        "they share the prefix line only"
    );
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
    let run = player(&target, Endpoint::Chat, 1)
        .play(Shape::Closed { concurrency: 3 }, requests(6), "absent")
        .await;
    assert_eq!(run.samples.len(), 6);
    assert!(run.samples.iter().all(|s| s.error.is_some()));
    let shape = Shape::Closed { concurrency: 3 };
    let level = LevelResult::of(shape, &[run], None, &Slo::default(), &[]);
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
