//! Every reply checked under load by default, on a model that echoes
//! nothing. Against afm-bench's mock with its cross-talk fault (a request
//! that arrives while another is in flight streams the other's reply; the
//! mock, like a small model, never repeats its isolation marker),
//! afm-bench's default run finds corrupted replies on each of the four
//! protocols while throughput looks normal, and the clean mock gives none.
//! Each isolation check catches it on its own; with both off, nothing
//! does: the checks, not luck, catch it. No engine needed.

use std::sync::Arc;

use crate::support::mock::{self, bench_args};
use afm_harness::bench::results::LevelResult;
use afm_harness::run::{bench, Quiet};

/// The concurrency-4 level of a default run against `url` on `endpoint`,
/// with `extra` flags.
fn level(url: &str, endpoint: &str, extra: &[&str]) -> LevelResult {
    let out = std::env::temp_dir().join(format!(
        "afm-bench-verify-{}-{endpoint}-{}",
        std::process::id(),
        extra.join("")
    ));
    let mut flags = vec!["--endpoint", endpoint, "--concurrency", "4"];
    flags.extend(extra);
    let report = bench::run(&bench_args(url, &out, &flags), Arc::new(Quiet)).unwrap();
    let _ = std::fs::remove_dir_all(&out);
    report.variants[0].levels[0].clone()
}

fn faulty(fault: &str) -> String {
    let mut args = mock::fast();
    args.fault = vec![fault.parse().unwrap()];
    mock::start(args)
}

#[test]
fn cross_talk_is_caught_by_default_on_every_protocol() {
    let clean = mock::start(mock::fast());
    let crossing = faulty("cross-talk");
    for endpoint in ["chat", "completions", "messages", "responses"] {
        let ok = level(&clean, endpoint, &[]);
        assert_eq!(
            (ok.errors, ok.corrupted),
            (0, 0),
            "{endpoint}: {:?}",
            ok.corrupted_requests
        );
        assert!(ok.coverage.checked >= 8, "{endpoint}: {:?}", ok.coverage);
        assert_eq!(ok.coverage.marker, ok.coverage.schema_nonce, "no echo");

        let bad = level(&crossing, endpoint, &[]);
        assert_eq!(bad.errors, 0, "{endpoint}: every request is a 200");
        let ratio = bad.output_tokens_per_s / ok.output_tokens_per_s;
        assert!((0.5..2.0).contains(&ratio), "{endpoint}: {ratio:.2}x");
        assert!(
            bad.corrupted >= 4,
            "{endpoint}: {} corrupted ({})",
            bad.corrupted,
            bad.coverage.describe()
        );
        assert!(
            bad.failures.get("replay").is_some_and(|n| *n >= 2),
            "{endpoint}: {:?} {:?}",
            bad.failures,
            bad.replay
        );
    }
}

#[test]
fn each_isolation_check_catches_cross_talk_alone_and_none_when_both_are_off() {
    let crossing = faulty("cross-talk");
    let replay_only = level(&crossing, "chat", &["--schema-share", "0"]);
    assert!(replay_only.failures.contains_key("replay"));
    assert!(!replay_only.failures.contains_key("schema"));
    assert_eq!(replay_only.coverage.schema_nonce, 0);

    let nonce_only = level(&crossing, "messages", &["--verify-alone", "0"]);
    assert!(
        nonce_only.failures.contains_key("schema"),
        "{:?}",
        nonce_only.failures
    );
    assert!(!nonce_only.failures.contains_key("replay"));
    assert_eq!(nonce_only.replay, None);

    let blind = level(
        &crossing,
        "chat",
        &["--schema-share", "0", "--verify-alone", "0"],
    );
    assert_eq!(blind.corrupted, 0, "nothing left to catch it");
    assert_eq!(blind.coverage.checked, 0);
    assert!(blind.coverage.describe().contains("NOT checked"));
}

#[test]
fn strict_replies_emptied_under_overlap_are_errors_not_successes() {
    let emptying = faulty("empty-strict");
    let l = level(&emptying, "responses", &["--schema-share", "0.5"]);
    assert!(l.errors >= 2, "{} errors", l.errors);
    assert!(
        l.error_examples.iter().any(|e| e == "no output"),
        "{:?}",
        l.error_examples
    );
}
