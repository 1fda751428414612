//! Each bug class of the shared seed reports, and each of AFM's own
//! harness (`docs/afm-parity.md`), injected by a faulty server in front of
//! the real engine, is caught by its named case, and no other case fails; `afm-test diff` of the clean and faulty reports (real
//! reports of real runs) calls exactly those cases regressions, and the
//! reverse diff calls them fixed.

use std::collections::{BTreeSet, HashMap};

use afm_harness::report::diff::{Change, Diff, Options};
use afm_harness::report::known_failures::KnownFailures;
use afm_harness::report::{CaseResult, Report, RunInfo, Status};
use afm_harness::run::conformance::cases::{self, RunOptions};
use afm_harness::server::Target;
use afm_harness::suite::capabilities::{self, Capabilities};
use afm_harness::suite::{Section, Selection, Tier};

use crate::support::faulty_server;

/// A fault, the mode serving the same thing correctly, the sections run,
/// and the cases that must catch it.
struct Expectation {
    fault: &'static str,
    clean: &'static str,
    sections: &'static [&'static str],
    caught_by: &'static [&'static str],
}

const EXPECTATIONS: [Expectation; 11] = [
    Expectation {
        fault: "cache_miss_together",
        clean: "clean",
        sections: &["prefix_cache"],
        caught_by: &["prefix_cache.concurrent_shared_prefix"],
    },
    Expectation {
        fault: "empty_strict_together",
        clean: "clean",
        sections: &["grammar"],
        caught_by: &["grammar.concurrent_strict"],
    },
    Expectation {
        fault: "duplicated_stream_args",
        clean: "clean",
        sections: &["tools", "tool_coercion"],
        // Every case that streams a tool call and checks its arguments.
        caught_by: &[
            "tools.required_call",
            "tools.auto_call_from_history",
            "tools.strict_false",
            "tool_coercion.scalars",
            "tool_coercion.array_object_enum",
            "tool_coercion.nullable",
        ],
    },
    Expectation {
        fault: "string_numbers",
        clean: "clean",
        sections: &["tools", "tool_coercion"],
        caught_by: &["tool_coercion.scalars"],
    },
    Expectation {
        fault: "seed_batch_drift",
        clean: "clean",
        sections: &["determinism", "concurrency"],
        caught_by: &["determinism.batch_positions"],
    },
    Expectation {
        fault: "markers_in_content",
        clean: "reasoning",
        sections: &["reasoning", "thinking_budget"],
        caught_by: &[
            "reasoning.separated",
            "reasoning.disabled",
            "reasoning.with_stop",
        ],
    },
    Expectation {
        fault: "thinking_eats_max_tokens",
        clean: "reasoning",
        sections: &["reasoning", "thinking_budget"],
        // No answer left within max_tokens 50; the budget of 6 ignored.
        caught_by: &[
            "thinking_budget.small_max_tokens",
            "thinking_budget.request_budget",
        ],
    },
    Expectation {
        fault: "turn_end_runaway",
        clean: "clean",
        sections: &["eos"],
        caught_by: &["eos.turn_end_stops", "eos.no_runaway"],
    },
    Expectation {
        fault: "missing_logprobs",
        clean: "clean",
        sections: &["logprobs"],
        caught_by: &["logprobs.top_three", "logprobs.top_zero"],
    },
    Expectation {
        fault: "ignored_logit_bias",
        clean: "clean",
        sections: &["client_params"],
        // The forced token never comes; the banned one is written.
        caught_by: &[
            "client_params.logit_bias_forces",
            "client_params.logit_bias_bans",
        ],
    },
    Expectation {
        fault: "cross_talk",
        clean: "clean",
        sections: &["concurrency"],
        // Identical parallel requests cannot tell; different ones can.
        caught_by: &["concurrency.differing_requests"],
    },
];

/// The classes AFM's harness checks that the seeds do not.
const PARITY_EXPECTATIONS: [Expectation; 18] = [
    Expectation {
        fault: "stop_whole_words",
        clean: "clean",
        sections: &["stop"],
        caught_by: &["stop.inside_word", "stop.newline"],
    },
    Expectation {
        fault: "stop_partial_fires",
        clean: "clean",
        sections: &["stop"],
        caught_by: &["stop.near_miss"],
    },
    Expectation {
        fault: "stops_trimmed",
        clean: "clean",
        sections: &["stop"],
        caught_by: &["stop.newline"],
    },
    Expectation {
        fault: "stop_empty_at_once",
        clean: "clean",
        sections: &["stop"],
        caught_by: &["stop.empty_list"],
    },
    Expectation {
        fault: "logprobs_always",
        clean: "clean",
        sections: &["logprobs"],
        caught_by: &["logprobs.off_is_null"],
    },
    Expectation {
        fault: "ignored_sampling",
        clean: "clean",
        sections: &["sampling"],
        caught_by: &[
            "sampling.top_k_one_is_greedy",
            "sampling.min_p_one_is_greedy",
            "sampling.top_p_tiny_is_greedy",
            "sampling.repetition_penalty_changes",
        ],
    },
    Expectation {
        fault: "fixed_seed",
        clean: "clean",
        sections: &["sampling"],
        caught_by: &["sampling.seeds_differ"],
    },
    Expectation {
        fault: "stop_breaks_reasoning",
        clean: "reasoning",
        sections: &["reasoning"],
        caught_by: &["reasoning.with_stop"],
    },
    Expectation {
        fault: "cache_miss_long",
        clean: "clean",
        sections: &["prefix_cache"],
        caught_by: &["prefix_cache.long_prompt_hit"],
    },
    Expectation {
        fault: "cache_miss_with_history",
        clean: "clean",
        sections: &["prefix_cache"],
        caught_by: &["prefix_cache.growing_conversation"],
    },
    Expectation {
        fault: "nan_long_prompt",
        clean: "clean",
        sections: &["coherence"],
        caught_by: &["coherence.long_prompt_2k", "coherence.long_prompt_4k"],
    },
    Expectation {
        fault: "nullable_history_crash",
        clean: "clean",
        sections: &["tools"],
        caught_by: &["tools.nullable_history"],
    },
    Expectation {
        fault: "batch_drops_a_line",
        clean: "clean",
        sections: &["batch"],
        caught_by: &["batch.completed"],
    },
    Expectation {
        fault: "batch_accepts_duplicates",
        clean: "clean",
        sections: &["batch"],
        caught_by: &["batch.duplicate_custom_id"],
    },
    Expectation {
        fault: "strict_false_refused",
        clean: "clean",
        sections: &["tools"],
        caught_by: &["tools.strict_false"],
    },
    Expectation {
        fault: "thinking_needs_kwargs",
        clean: "reasoning",
        sections: &["template_kwargs"],
        caught_by: &["template_kwargs.default_thinks"],
    },
    Expectation {
        fault: "kwargs_lost_long_prompt",
        clean: "reasoning",
        sections: &["template_kwargs"],
        caught_by: &["template_kwargs.thinking_off_long_prompt"],
    },
    Expectation {
        fault: "zero_cached_tokens",
        clean: "clean",
        sections: &["prefix_cache"],
        caught_by: &[
            "prefix_cache.warm_hit",
            "prefix_cache.changed_suffix",
            "prefix_cache.concurrent_shared_prefix",
            "prefix_cache.long_prompt_hit",
            "prefix_cache.growing_conversation",
            "prefix_cache.mixed_sequence",
        ],
    },
];

fn all_capabilities() -> Capabilities {
    let mut caps = Capabilities::default();
    for c in capabilities::ALL {
        caps.assume(c);
    }
    caps
}

async fn run(
    base: &str,
    mode: &str,
    sections: &[Section],
    names: &[&str],
    seed: u64,
) -> Vec<CaseResult> {
    let target = Target::http(&format!("{base}/{mode}"), None);
    // The faulty front serves chat completions only: the sections' cases
    // on other endpoints (Messages, Responses) have nothing to run against.
    let cases = sections
        .iter()
        .filter(|s| names.contains(&s.section.as_str()))
        .flat_map(|s| &s.cases)
        .filter(|c| {
            c.path.as_deref() == Some("/v1/chat/completions")
                || matches!(c.scenario, afm_harness::suite::Scenario::Batch { .. })
        })
        .map(|c| c.id.clone())
        .collect();
    let options = RunOptions {
        selection: Selection {
            tier: Tier::Full,
            sections: names.iter().map(|s| s.to_string()).collect(),
            cases,
        },
        concurrency: 1,
        strict: false,
        seed,
        nonce: cases::run_nonce(),
        clients: None,
        repeat: 1,
        rerun_failures: 0,
    };
    cases::run(&target, sections, &all_capabilities(), &options, |_| {}).await
}

fn failing(results: &[CaseResult]) -> BTreeSet<String> {
    results
        .iter()
        .filter(|c| c.status.failed())
        .map(|c| c.id.clone())
        .collect()
}

fn explain(results: &[CaseResult]) -> String {
    results
        .iter()
        .filter(|c| c.status.failed())
        .map(|c| format!("{}: {:?} {:?}", c.id, c.reason, c.failures))
        .collect::<Vec<_>>()
        .join("\n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_seed_bug_is_caught_by_its_case_and_by_no_other() {
    assert_eq!(faulty_server::FAULTS.len(), EXPECTATIONS.len());
    each_caught(&EXPECTATIONS, 1000).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_afm_parity_bug_is_caught_by_its_case_and_by_no_other() {
    let named: Vec<&str> = PARITY_EXPECTATIONS.iter().map(|e| e.fault).collect();
    assert_eq!(faulty_server::PARITY_FAULTS.to_vec(), named);
    each_caught(&PARITY_EXPECTATIONS, 2000).await;
}

async fn each_caught(expectations: &[Expectation], first_seed: u64) {
    let sections = faulty_server::suites();
    // The determinism cases hold exactly only in batch-invariant mode.
    let base = faulty_server::start_with_engine(true).await;

    // Clean runs are shared by faults that use the same sections.
    let mut clean_runs: HashMap<(&str, &[&str]), Vec<CaseResult>> = HashMap::new();
    for (k, e) in expectations.iter().enumerate() {
        let seed = first_seed + 2 * k as u64;
        let clean = match clean_runs.get(&(e.clean, e.sections)) {
            Some(r) => r.clone(),
            None => {
                let r = run(&base, e.clean, &sections, e.sections, seed).await;
                clean_runs.insert((e.clean, e.sections), r.clone());
                r
            }
        };
        let faulty = run(&base, e.fault, &sections, e.sections, seed + 1).await;
        assert!(!clean.is_empty());
        assert!(
            clean.iter().all(|c| c.status == Status::Pass),
            "{}: the clean server fails:\n{}",
            e.fault,
            explain(&clean)
        );
        let expected: BTreeSet<String> = e.caught_by.iter().map(|s| s.to_string()).collect();
        assert_eq!(
            failing(&faulty),
            expected,
            "{}: the failing cases are not the expected ones:\n{}",
            e.fault,
            explain(&faulty)
        );

        // The reports of the two runs, compared as CI compares them.
        let before = Report::new(RunInfo::default(), clean);
        let after = Report::new(RunInfo::default(), faulty);
        let known = KnownFailures::default();
        let ids = |d: &Diff, change: Change| -> BTreeSet<String> {
            d.entries
                .iter()
                .filter(|x| x.change == change)
                .map(|x| x.id.clone())
                .collect()
        };
        let forward = Diff::compare(&before, &after, &known, Options::default());
        assert_eq!(
            ids(&forward, Change::Regression),
            expected,
            "{}",
            forward.text()
        );
        assert_eq!(
            forward.count(Change::Unchanged),
            before.cases.len() - expected.len(),
            "{}",
            forward.text()
        );
        assert!(forward.has_regressions());
        let backward = Diff::compare(&after, &before, &known, Options::default());
        assert_eq!(
            ids(&backward, Change::Fixed),
            expected,
            "{}",
            backward.text()
        );
        assert!(!backward.has_regressions());
    }
}
