//! Every reply checked under load: against a double that hands one
//! request's reply to another under concurrency (cross-talk), and one
//! that empties strict-schema replies when requests overlap, afm-bench's
//! throughput looks normal while its correct goodput drops and the report
//! names the corrupted requests; the same run against the clean double
//! reports none. No engine needed.

mod support;

use std::sync::Arc;

use afm_harness::bench::arrivals::{Bound, Shape};
use afm_harness::bench::dataset::builtin::{Prompts, Workload};
use afm_harness::bench::dataset::{Dataset, Source};
use afm_harness::bench::goodput::Slo;
use afm_harness::bench::load::Player;
use afm_harness::bench::request::{Endpoint, RequestSettings};
use afm_harness::bench::results::LevelResult;
use afm_harness::server::Target;
use serde_json::json;

async fn level(base: &str, mode: &str, schema_share: f64) -> LevelResult {
    let target = Target::http(&format!("{base}/{mode}"), None);
    let player = Arc::new(Player {
        target,
        dataset: Arc::new(Dataset {
            source: Source::Builtin(Workload::new(Prompts::Short).unwrap()),
            turns: 1,
            output_len: None,
            range_ratio: 0.0,
            seed: 0,
        }),
        settings: RequestSettings {
            endpoint: Endpoint::Chat,
            model: "double".into(),
            temperature: 0.0,
            ignore_eos: false,
            extra: json!({}),
        },
        max_tokens: 32,
        verify: true,
        tolerate: Vec::new(),
        schema_share,
        think_s: 0.0,
        seed: 0,
    });
    let shape = Shape::Closed { concurrency: 4 };
    let bound = Bound {
        requests: Some(16),
        duration_s: None,
    };
    let run = player.play(shape, bound, mode).await;
    let slo = Slo::parse(&["e2el:10000".into()]).unwrap();
    LevelResult::of(shape, &[run], None, &slo, &[])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cross_talk_looks_fast_but_loses_correct_goodput_and_is_named() {
    let base = support::load_double::start().await;
    let clean = level(&base, "clean", 0.0).await;
    assert_eq!(
        (clean.errors, clean.corrupted),
        (0, 0),
        "{:?}",
        clean.corrupted_requests
    );
    assert_eq!(clean.goodput.unwrap().correct_good_share, 1.0);
    assert_eq!(clean.markers_echoed, 16);

    let crossed = level(&base, "cross_talk", 0.0).await;
    assert_eq!(crossed.errors, 0, "every request is a 200");
    let ratio = crossed.output_tokens_per_s / clean.output_tokens_per_s;
    assert!(
        (0.5..2.0).contains(&ratio),
        "throughput looks normal: {ratio:.2}x"
    );
    assert!(crossed.corrupted >= 8, "{} corrupted", crossed.corrupted);
    let g = crossed.goodput.unwrap();
    assert!(g.good_share == 1.0 && g.correct_good_share < 0.5, "{g:?}");
    let named = &crossed.corrupted_requests[0];
    assert_eq!(named.check, "isolation");
    assert!(
        named.detail.contains("another request's reply"),
        "{}",
        named.detail
    );
    assert_eq!(crossed.failures["isolation"], crossed.corrupted);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn strict_schema_replies_emptied_under_overlap_are_corrupted() {
    let base = support::load_double::start().await;
    let clean = level(&base, "clean", 0.5).await;
    assert_eq!(
        (clean.errors, clean.corrupted),
        (0, 0),
        "{:?}",
        clean.corrupted_requests
    );

    let emptied = level(&base, "empty_strict", 0.5).await;
    assert_eq!(emptied.errors, 0);
    assert!(emptied.corrupted >= 4, "{} corrupted", emptied.corrupted);
    assert!(emptied
        .corrupted_requests
        .iter()
        .all(|c| c.check == "schema"));
    assert!(
        emptied.goodput.unwrap().correct_good_share < clean.goodput.unwrap().correct_good_share
    );
}
