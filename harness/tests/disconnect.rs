//! The disconnect case against afm-bench's mock: a mock that frees a
//! dropped client's slot passes; one whose generation runs on for nobody
//! (`ignore-cancel`, its running gauge held until the planned end) fails
//! `slots_freed`, and nothing else.

use afm_harness::mock::faults::Fault;
use afm_harness::report::Status;
use afm_harness::run::conformance::cases::{self, RunOptions};
use afm_harness::server::Target;
use afm_harness::suite::capabilities::{self, Capabilities};
use afm_harness::suite::{Selection, Tier};

use crate::support::mock;

async fn disconnect_case(ignore_cancel: bool) -> afm_harness::report::CaseResult {
    // 30 s of tokens each: far past the 15 s a server has to notice.
    let mut args = mock::fast();
    args.itl = afm_harness::mock::delay::Spread::Const(15.0);
    args.output_tokens = afm_harness::mock::delay::Spread::Const(2000.0);
    if ignore_cancel {
        args.fault = vec![Fault::IgnoreCancel];
    }
    let url = mock::start(args);
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../suites");
    let sections = afm_harness::suite::load_dir(&dir).unwrap();
    let mut caps = Capabilities::default();
    for c in capabilities::ALL {
        caps.assume(c);
    }
    let options = RunOptions {
        selection: Selection {
            tier: Tier::Full,
            sections: vec!["concurrency".into()],
            cases: vec!["concurrency.disconnect_frees_slots".into()],
        },
        concurrency: 1,
        strict: false,
        seed: 1,
        nonce: cases::run_nonce(),
        clients: None,
        repeat: 1,
        rerun_failures: 0,
    };
    let target = Target::http(&url, None);
    let mut results = cases::run(&target, &sections, &caps, &options, |_| {}).await;
    assert_eq!(results.len(), 1);
    results.remove(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_generation_that_runs_on_for_a_client_that_left_fails_slots_freed() {
    let freed = disconnect_case(false).await;
    assert_eq!(freed.status, Status::Pass, "{:?}", freed.failures);
    let held = disconnect_case(true).await;
    assert_eq!(held.status, Status::Fail, "{:?}", held.failures);
    let checks: Vec<&str> = held.failures.iter().map(|f| f.check.as_str()).collect();
    assert_eq!(checks, ["slots_freed"], "{:?}", held.failures);
    assert!(held.failures[0]
        .expected
        .contains("afm_mock_requests_running"));
}
