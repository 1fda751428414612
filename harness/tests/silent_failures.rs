//! A server that accepts a feature and silently ignores it (seed 002: C
//! logprobs, D response_format; a cache that always reports 0) is caught:
//! the probes see "accepted and ignored", the cases that need the feature
//! run and FAIL (none skips), and `afm-test diff` of the clean run and the
//! faulty run exits 1. The faulty server is the real engine behind a
//! front that drops the feature.

use std::path::{Path, PathBuf};
use std::process::Command;

use afm_harness::report::{CaseResult, Report, RunInfo, Status};
use afm_harness::run::conformance::cases::{self, RunOptions};
use afm_harness::server::Target;
use afm_harness::suite::capabilities::{Capabilities, State};
use afm_harness::suite::{Section, Selection, Tier};

use crate::support::faulty_server;

struct Expectation {
    fault: &'static str,
    capability: &'static str,
    section: &'static str,
    /// Cases of the section that must fail against the fault.
    failing: &'static [&'static str],
}

const EXPECTATIONS: [Expectation; 3] = [
    Expectation {
        fault: "missing_logprobs",
        capability: "logprobs",
        section: "logprobs",
        failing: &["logprobs.top_three", "logprobs.top_zero"],
    },
    Expectation {
        fault: "zero_cached_tokens",
        capability: "prefix_cache",
        section: "prefix_cache",
        // isolation checks content only, which the fault leaves alone.
        failing: &[
            "prefix_cache.warm_hit",
            "prefix_cache.changed_suffix",
            "prefix_cache.concurrent_shared_prefix",
        ],
    },
    Expectation {
        fault: "ignored_response_format",
        capability: "grammar",
        section: "grammar",
        failing: &[
            "grammar.json_object",
            "grammar.json_schema_strict",
            "grammar.complex_schema",
            "grammar.concurrent_strict",
            "grammar.length_mid_json",
        ],
    },
];

/// Probes `base` as `afm-test run` does, then runs one section.
async fn run(base: &str, sections: &[Section], section: &str) -> (Capabilities, Vec<CaseResult>) {
    let target = Target::http(base, None);
    let nonce = cases::run_nonce();
    let caps = Capabilities::detect(&target, &format!("{nonce:x}")).await;
    let options = RunOptions {
        selection: Selection {
            tier: Tier::Full,
            sections: vec![section.to_string()],
            cases: Vec::new(),
        },
        concurrency: 1,
        strict: false,
        seed: 5,
        nonce,
        clients: None,
        repeat: 1,
        rerun_failures: 0,
    };
    let results = cases::run(&target, sections, &caps, &options, |_| {}).await;
    (caps, results)
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("afm-silent-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn write(dir: &Path, name: &str, caps: &Capabilities, results: Vec<CaseResult>) -> PathBuf {
    let info = RunInfo {
        capabilities: caps.clone(),
        ..Default::default()
    };
    let path = dir.join(name);
    Report::new(info, results).write(&path).unwrap();
    path
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn features_accepted_and_ignored_fail_their_sections_and_the_diff() {
    let sections = faulty_server::suites();
    let base = faulty_server::start_with_engine(false).await;
    let dir = scratch("reports");

    for e in &EXPECTATIONS {
        assert!(faulty_server::SILENT_FAULTS.contains(&e.fault));
        let (clean_caps, clean) = run(&format!("{base}/clean"), &sections, e.section).await;
        let (caps, faulty) = run(&format!("{base}/{}", e.fault), &sections, e.section).await;

        let seen = |c: &Capabilities| c.found[e.capability].clone();
        assert_eq!(
            seen(&clean_caps).state,
            State::Present,
            "{:?}",
            seen(&clean_caps)
        );
        assert_eq!(seen(&caps).state, State::Ignored, "{:?}", seen(&caps));
        assert!(
            clean.iter().all(|c| c.status == Status::Pass),
            "{}: the clean server fails: {:#?}",
            e.fault,
            clean
        );
        for id in e.failing {
            let c = faulty.iter().find(|c| c.id == *id).expect("case ran");
            assert_eq!(c.status, Status::Fail, "{id}: {c:#?}");
            let reason = c.reason.as_deref().unwrap_or_default();
            assert!(
                reason.contains("accepted and ignored"),
                "{id}: the reason does not say it: {reason:?}"
            );
        }
        assert!(
            faulty.iter().all(|c| c.status != Status::Skip),
            "{}: a case skipped",
            e.fault
        );

        // The gate, as CI runs it: the binary's diff exits 1.
        let before = write(&dir, &format!("{}-clean.json", e.fault), &clean_caps, clean);
        let after = write(&dir, &format!("{}-faulty.json", e.fault), &caps, faulty);
        let out = Command::new(env!("CARGO_BIN_EXE_afm-test"))
            .arg("diff")
            .arg(&before)
            .arg(&after)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert_eq!(
            out.status.code(),
            Some(1),
            "{}: diff did not fail:\n{text}",
            e.fault
        );
        for id in e.failing {
            assert!(text.contains(id), "{id} not in the diff:\n{text}");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}
