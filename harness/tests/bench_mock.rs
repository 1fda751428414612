//! afm-bench against its mock, whose timing and faults are known: its
//! latencies agree with the mock's own record of the same requests; a
//! server that keeps generating for dropped clients is told from one that
//! stops; a usage that over-reports output tokens is counted per request;
//! two clients' records merge into one report. No engine needed.

use std::path::PathBuf;
use std::sync::Arc;

use crate::support::mock::{self, bench_args};
use afm_harness::bench::results::merge;
use afm_harness::bench::results::BenchReport;
use afm_harness::mock::record::MockTiming;
use afm_harness::run::{bench, Quiet};
use afm_harness::server::Target;

fn scratch(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("afm-bench-mock-{}-{name}", std::process::id()))
}

fn run(url: &str, name: &str, extra: &[&str]) -> BenchReport {
    let out = scratch(name);
    let _ = std::fs::remove_dir_all(&out);
    bench::run(&bench_args(url, &out, extra), Arc::new(Quiet)).unwrap()
}

fn with_fault(mut args: afm_harness::mock::MockArgs, fault: &str) -> String {
    args.fault = vec![fault.parse().unwrap()];
    mock::start(args)
}

/// The mock's own timing (`GET /mock/timing`), read without the
/// caller's runtime (the runs build their own).
fn own_timing(url: &str) -> MockTiming {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let ex = rt.block_on(Target::http(url, None).get("/mock/timing"));
    serde_json::from_value(ex.body).unwrap()
}

#[test]
fn latencies_are_the_mocks_own_plus_the_way_there() {
    let url = mock::start(afm_harness::mock::MockArgs::timed(20.0, 5.0, 16));
    let flags = [
        "--concurrency",
        "4",
        "--keep-alive",
        "--verify-alone",
        "0",
        "--schema-share",
        "0",
    ];
    let report = run(&url, "timing", &flags);
    let level = &report.variants[0].levels[0];
    let own = own_timing(&url);
    assert_eq!(own.streams, 16);
    // The client's figures hold the mock's plus the way there and back:
    // never less. How much more is a measurement (scripts/speed/mock_timing.sh:
    // within 1 ms at one stream on a quiet machine), not a test's bound;
    // this one only catches a clock started at the wrong moment (from the
    // level's start, a request's TTFT would hold those before it).
    for (what, client, mock) in [
        ("ttft", &level.ttft, &own.ttft),
        ("e2e", &level.e2e, &own.e2e),
    ] {
        let (c, m) = (client.as_ref().unwrap().p50, mock.as_ref().unwrap().p50);
        assert!(
            (-0.5..50.0).contains(&(c - m)),
            "{what} p50: client {c:.2} ms, mock {m:.2} ms"
        );
    }
    // Gaps a busy client reads late bunch up (one shorter, the next
    // longer); their mean moves only by the first and last token's delay.
    let (c, m) = (
        level.itl.as_ref().unwrap().mean,
        own.itl.as_ref().unwrap().mean,
    );
    assert!(
        (c - m).abs() < 5.0,
        "itl mean: client {c:.2} ms, mock {m:.2} ms"
    );
    let cpu = level.client_cpu.as_ref().unwrap();
    assert!(cpu.chunks >= 16 * 16 && cpu.us_per_chunk > 0.0, "{cpu:?}");
    // Every stream is read on one thread, whose clock the figure is; the
    // process's counts that thread and the rest.
    if cfg!(target_os = "linux") {
        assert_eq!(cpu.clock, "reading thread", "{cpu:?}");
        assert!(cpu.process_cpu_s + 0.002 >= cpu.cpu_s, "{cpu:?}");
    }
}

#[test]
fn a_server_that_keeps_generating_for_dropped_clients_is_told_apart() {
    let slow = afm_harness::mock::MockArgs::timed(5.0, 5.0, 200);
    let stops = mock::start(slow.clone());
    let keeps = with_fault(slow, "ignore-cancel");
    let flags = [
        "--concurrency",
        "4",
        "--requests",
        "12",
        "--request-cancellation-rate",
        "50",
        "--request-cancellation-delay",
        "0.1",
        "--verify-alone",
        "0",
    ];
    for (url, kept) in [(&stops, false), (&keeps, true)] {
        let report = run(url, &format!("cancel-{kept}"), &flags);
        let level = &report.variants[0].levels[0];
        let c = level.cancellation.clone().unwrap();
        assert!(c.cancelled >= 3, "{c:?}");
        assert_eq!(level.errors, 0, "a cancel is not an error");
        assert_eq!(c.kept_generating(), Some(kept), "{}", c.describe());
        assert!(c.probe_ttft_after_ms.is_some());
    }
}

#[test]
fn output_tokens_the_usage_over_reports_are_counted_per_request() {
    let honest = mock::start(mock::fast());
    let lying = with_fault(mock::fast(), "miscount");
    let flags = ["--concurrency", "2", "--verify-alone", "0"];
    let ok = run(&honest, "tokens-ok", &flags).variants[0].levels[0]
        .tokens
        .clone()
        .unwrap();
    assert!(ok.compared >= 12 && ok.equal == ok.compared, "{ok:?}");
    let bad = run(&lying, "tokens-bad", &flags).variants[0].levels[0]
        .tokens
        .clone()
        .unwrap();
    assert!(bad.compared >= 12 && bad.differ == bad.compared, "{bad:?}");
    assert_eq!(bad.examples[0][0], bad.examples[0][1] + 3);
}

#[test]
fn two_clients_records_merge_into_one_report() {
    let url = mock::start(mock::fast());
    let flags = ["--concurrency", "2", "--requests", "8", "--save-requests"];
    run(&url, "merge-a", &flags);
    run(&url, "merge-b", &flags);
    let merged = merge::merge(&[scratch("merge-a"), scratch("merge-b")]).unwrap();
    let level = &merged.variants[0].levels[0];
    assert_eq!((level.requests, level.errors, level.corrupted), (16, 0, 0));
    assert!(level.ttft.as_ref().unwrap().n == 16);
    assert!(merged.run.target.contains("2 clients merged"));
}

#[test]
fn a_client_that_leaves_on_purpose_stops_reading_and_says_so() {
    use afm_harness::server::{Leave, Outgoing};
    use std::time::Duration;
    // 200 ms to the first token, then 50 ms apart: 30 tokens take 1.65 s.
    let url = mock::start(afm_harness::mock::MockArgs::timed(200.0, 50.0, 30));
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let target = Target::http(&url, None);
    let body = |stream: bool| {
        serde_json::to_vec(
            &serde_json::json!({"model": "mock", "max_tokens": 30, "stream": stream,
            "messages": [{"role": "user", "content": "Count."}]}),
        )
        .unwrap()
    };
    let send = |leave: Leave, stream: bool| {
        let mut out = Outgoing::post("/v1/chat/completions", body(stream));
        out.leave = leave;
        rt.block_on(target.send(out))
    };

    let whole = send(Leave::Never, true);
    assert!(
        !whole.left && whole.chunks.len() >= 30,
        "{}",
        whole.chunks.len()
    );

    let first = send(Leave::AfterFirstEvent, true);
    assert!(first.left, "left after the first event");
    assert_eq!(first.chunks.len(), 1);
    assert!(first.millis < 1000.0, "{} ms", first.millis);

    let gave_up = send(Leave::After(Duration::from_millis(60)), false);
    assert!(gave_up.left, "{gave_up:?}");
    assert!(
        (60.0..1000.0).contains(&gave_up.millis),
        "{} ms",
        gave_up.millis
    );
}

/// Agent sessions grow turn by turn by a shell call and its output, each
/// turn expects the one before cached, and the background streams' gaps
/// are told apart by whether a long prompt was being read.
#[test]
fn agent_sessions_grow_per_turn_and_streams_are_timed_beside_their_prefills() {
    // TTFT 400 ms: the "prefill" each long prompt holds the streams for.
    let url = mock::start(afm_harness::mock::MockArgs::timed(400.0, 5.0, 8));
    let flags = [
        "--prompts",
        "agents",
        "--turns",
        "3",
        "--concurrency",
        "3",
        "--requests",
        "9",
        "--background-streams",
        "2",
        "--background-tokens",
        "8",
        "--verify-alone",
        "0",
        "--schema-share",
        "0",
    ];
    let report = run(&url, "agents", &flags);
    let level = &report.variants[0].levels[0];
    assert_eq!(
        (level.requests, level.errors),
        (9, 0),
        "{:?}",
        level.error_examples
    );
    let turns: Vec<usize> = level.turns.iter().map(|t| t.turn).collect();
    assert_eq!(turns, [1, 2, 3]);
    let prompt = |t: usize| level.turns[t].prompt_tokens.as_ref().unwrap().p50;
    // The mock counts the messages' words: the instructions are long.
    assert!(
        prompt(0) > 2_000.0,
        "the agents' instructions, whole: {}",
        prompt(0)
    );
    assert!(prompt(1) > prompt(0) && prompt(2) > prompt(1));
    assert_eq!(level.turns[0].expected_cached, None);
    for t in &level.turns[1..] {
        assert_eq!(t.requests, 3);
        assert!(t.expected_cached.unwrap() > 2_000 * 3);
    }
    assert_eq!(level.turn_points.len(), 9);
    let stall = level
        .prefill_stall
        .as_ref()
        .expect("long prompts were read");
    assert_eq!(stall.long_prefills, 9);
    assert!(stall.beside_prefill.is_some() && stall.alone.is_some());
}
