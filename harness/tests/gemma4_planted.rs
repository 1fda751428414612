//! Gemma 4 end to end (seeds 001 and 004): afm-test's reasoning,
//! thinking-budget and EOS sections, and the Messages and Responses
//! thinking cases, in-process on a Gemma 4 checkpoint with Google's chat
//! templates. Its weights are planted (fixtures/models/planted/make.py) so
//! that greedy replies follow a script: thinking on, a thought channel
//! then "Yes"; thinking off, "Yes" after the template's empty thought
//! (26B/31B template), or, with the E2B/E4B template, the model opens
//! `<|channel>thought\n<channel|>` itself (seed 004's reply). Every reply
//! ends in `<turn|>`. The capabilities are probed, not assumed, so a
//! thinking switch that never reaches the template shows as a skip, which
//! this test refuses too.

use afm_harness::report::{CaseResult, Status};
use afm_harness::run::conformance::cases::{self, RunOptions};
use afm_harness::server::Target;
use afm_harness::suite::capabilities::Capabilities;
use afm_harness::suite::{load_dir, Selection, Tier};

fn fixture(path: &str) -> String {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    root.join(path).to_string_lossy().into_owned()
}

/// Every selected case, run in-process with the model's own template or
/// the one given.
async fn run(template: Option<&str>, selection: Selection) -> Vec<CaseResult> {
    let flags: Vec<String> = template
        .map(|t| vec!["--chat-template".to_string(), fixture(t)])
        .unwrap_or_default();
    let (target, _, _) =
        Target::start_in_process(&fixture("fixtures/models/planted/gemma4"), &flags, None).unwrap();
    let sections =
        load_dir(&std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../suites")).unwrap();
    let nonce = cases::run_nonce();
    let capabilities = Capabilities::default()
        .probe(&target, &format!("{nonce:x}"))
        .await;
    let options = RunOptions {
        selection,
        concurrency: 1,
        strict: false,
        seed: 1,
        nonce,
        clients: None,
        repeat: 1,
        rerun_failures: 0,
    };
    cases::run(&target, &sections, &capabilities, &options, |_| {}).await
}

async fn all_pass(template: Option<&str>) {
    let strings = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let mut results = run(
        template,
        Selection {
            tier: Tier::Full,
            sections: strings(&["reasoning", "thinking_budget", "eos"]),
            cases: Vec::new(),
        },
    )
    .await;
    results.extend(
        run(
            template,
            Selection {
                tier: Tier::Full,
                sections: Vec::new(),
                cases: strings(&[
                    "messages.thinking",
                    "messages.thinking_disabled",
                    "responses.reasoning",
                ]),
            },
        )
        .await,
    );
    assert!(results.len() >= 15, "{} cases", results.len());
    let not_passed: Vec<String> = results
        .iter()
        .filter(|c| c.status != Status::Pass)
        .map(|c| format!("{} {:?}: {:?} {:?}", c.id, c.status, c.reason, c.failures))
        .collect();
    assert!(not_passed.is_empty(), "{}", not_passed.join("\n"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_26b_and_31b_template_passes_reasoning_and_eos_on_three_protocols() {
    all_pass(None).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_e2b_e4b_template_whose_reply_opens_a_thought_channel_passes_too() {
    all_pass(Some("fixtures/templates/gemma4-e2b-e4b.jinja")).await;
}
