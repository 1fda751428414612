//! The two runs as library calls, against test doubles (no engine, no
//! server process): a conformance run writes its report files and tells
//! a served model from a wrong one; a matrix sets two runs side by side;
//! a bench run counts cross-talk as corrupted and writes its results.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use crate::support::mock::bench_args;
use crate::support::{mock, routing_double};
use afm_harness::report::{CaseResult, Status};
use afm_harness::run::conformance::{self, ConformanceArgs};
use afm_harness::run::regrade::{self, RegradeArgs};
use afm_harness::run::{bench, matrix, Observer, Quiet};
use afm_harness::server::flags::TargetArgs;
use afm_harness::suite::Tier;

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("afm-runs-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// Remembers what a run told it.
#[derive(Default)]
struct Seen {
    planned: Mutex<usize>,
    done: Mutex<Vec<String>>,
}

impl Observer for Seen {
    fn cases_planned(&self, cases: usize) {
        *self.planned.lock().unwrap() = cases;
    }
    fn case_done(&self, r: &CaseResult) {
        self.done.lock().unwrap().push(r.id.clone());
    }
}

fn preflight(url: &str, model: Option<&str>, out: PathBuf) -> ConformanceArgs {
    let target = TargetArgs {
        url: Some(url.into()),
        model: model.map(str::to_string),
        ..TargetArgs::default()
    };
    ConformanceArgs {
        sections: vec!["preflight".into()],
        ..ConformanceArgs::new(Tier::Smoke, target, out)
    }
}

#[test]
fn a_conformance_run_returns_its_report_and_writes_every_file() {
    let url = routing_double::start();
    let out = scratch("conformance");
    let args = ConformanceArgs {
        junit: Some(out.join("junit.xml")),
        summary: Some(out.join("summary.md")),
        ..preflight(&url, None, out.clone())
    };
    let seen = Arc::new(Seen::default());
    let report = conformance::run(&args, seen.clone()).unwrap();
    assert_eq!(report.cases.len(), 3);
    assert!(report.cases.iter().all(|c| c.status == Status::Pass));
    assert_eq!(report.run.model, routing_double::SERVED);
    assert_eq!(report.run.target, url);
    assert_eq!(*seen.planned.lock().unwrap(), 3);
    assert_eq!(seen.done.lock().unwrap().len(), 3);
    for file in ["report.json", "report.html", "junit.xml", "summary.md"] {
        assert!(out.join(file).is_file(), "{file}");
    }
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn a_profile_route_sends_a_suite_path_where_the_server_serves_it() {
    let url = routing_double::start();
    let out = scratch("routes");
    std::fs::create_dir_all(&out).unwrap();
    let run = |routes: &str| {
        let profile = out.join("profile.toml");
        std::fs::write(&profile, format!("[routes]\n{routes}\n")).unwrap();
        let args = ConformanceArgs {
            profile: Some(profile),
            ..preflight(&url, None, out.join("run"))
        };
        conformance::run(&args, Arc::new(Quiet)).unwrap()
    };
    let chat = |r: &afm_harness::report::Report| {
        r.cases
            .iter()
            .find(|c| c.id == "preflight.chat")
            .unwrap()
            .clone()
    };
    // Chat sent elsewhere: the double has nothing there, so the case fails,
    // and the report still names the suites' path.
    let moved = chat(&run("\"/v1/chat\" = \"/elsewhere/chat\""));
    assert_eq!(moved.status, Status::Fail);
    assert_eq!(moved.steps[0].status, 404);
    assert_eq!(moved.steps[0].path, "/v1/chat/completions");
    // A route to where it is served changes nothing.
    let same = chat(&run("\"/v1/chat\" = \"/v1/chat\""));
    assert_eq!(same.status, Status::Pass);
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn a_wrong_model_fails_the_cases_and_a_matrix_shows_both_columns() {
    let url = routing_double::start();
    let out = scratch("wrong");
    let report = conformance::run(
        &preflight(&url, Some("other"), out.clone()),
        Arc::new(Quiet),
    );
    let report = report.unwrap();
    assert!(report.unexplained_failures() >= 2, "{:?}", report.summary);

    let file = out.join("matrix.toml");
    let plan = |url: &str, known: &str| {
        format!(
            "tier = \"smoke\"\nsections = [\"preflight\"]\n\
             [[target]]\nname = \"right\"\nurl = \"{url}\"\n\
             [[target]]\nname = \"wrong\"\nversion = \"1.2\"\nurl = \"{url}\"\nmodel = \"other\"\n{known}\
             [[unavailable]]\nname = \"far\"\nwhy = \"needs a GPU\"\n"
        )
    };
    std::fs::write(&file, plan(&url, "")).unwrap();
    let m = matrix::run(&file, &out.join("matrix"), false, None, Arc::new(Quiet)).unwrap();
    let names: Vec<&str> = m.columns.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["right", "wrong"]);
    assert_eq!(m.columns[0].1.unexplained_failures(), 0);
    assert!(m.columns[1].1.unexplained_failures() >= 2);
    assert_eq!(m.matrix.columns[1].label, "wrong@1.2");
    assert!(out.join("matrix/matrix.html").is_file());
    let page = std::fs::read_to_string(out.join("matrix/matrix.md")).unwrap();
    assert!(page.contains("| `preflight.chat` "), "{page}");
    assert!(page.contains("`wrong@1.2`"), "{page}");
    assert!(page.contains("| `far` | needs a GPU |"), "{page}");
    assert!(out.join("matrix/wrong@1.2/report.json").is_file());

    // Attributing the failures afterwards needs no server: --reuse reads
    // the reports back (the url now points nowhere) and grades them anew.
    let failing: Vec<String> = m.columns[1]
        .1
        .cases
        .iter()
        .filter(|c| c.status.failed())
        .map(|c| {
            format!(
                "[[known]]\nid = \"{}\"\nissue = \"served under another name\"\n",
                c.id
            )
        })
        .collect();
    std::fs::write(out.join("wrong.known.toml"), failing.concat()).unwrap();
    std::fs::write(
        &file,
        plan(
            "http://127.0.0.1:1",
            "known_failures = \"wrong.known.toml\"\n",
        ),
    )
    .unwrap();
    let again = matrix::run(&file, &out.join("matrix"), true, None, Arc::new(Quiet)).unwrap();
    assert_eq!(again.columns[1].1.unexplained_failures(), 0);
    assert_eq!(
        again.columns[1].1.summary.fail, m.columns[1].1.summary.fail,
        "the same results, only attributed"
    );
    let page = std::fs::read_to_string(out.join("matrix/matrix.md")).unwrap();
    assert!(page.contains("served under another name"), "{page}");
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn a_bench_run_counts_cross_talk_as_corrupted_and_writes_its_results() {
    let base = mock::start(mock::fast());
    let mut crossing = mock::fast();
    crossing.fault = vec!["cross-talk".parse().unwrap()];
    let crossing = mock::start(crossing);
    let out = scratch("bench");
    let levels = ["--concurrency", "1,4", "--save-requests"];
    let clean = bench::run(&bench_args(&base, &out, &levels), Arc::new(Quiet));
    let clean = clean.unwrap();
    let got: Vec<(usize, usize)> = clean.variants[0]
        .levels
        .iter()
        .map(|l| (l.requests, l.corrupted))
        .collect();
    assert_eq!(got, [(16, 0), (16, 0)]);
    assert_eq!(clean.run.target, base);
    for file in ["bench.json", "bench.html", "requests.jsonl"] {
        assert!(out.join(file).is_file(), "{file}");
    }
    let args = bench_args(&crossing, &out, &["--concurrency", "4"]);
    let crossed = bench::run(&args, Arc::new(Quiet)).unwrap();
    let level = &crossed.variants[0].levels[0];
    assert_eq!(level.errors, 0);
    assert!(level.corrupted >= 4, "{} corrupted", level.corrupted);
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn a_bench_run_refuses_impossible_settings_before_it_sends() {
    let out = scratch("refused");
    // Nothing listens there: the refusal comes first.
    for (extra, flag) in [
        (vec!["--schema-share", "2"], "--schema-share"),
        (vec!["--slo-search", "90"], "--goodput"),
        (vec!["--scenario", "prefix-cache"], "in-process only"),
    ] {
        let args = bench_args("http://127.0.0.1:9", &out, &extra);
        let err = bench::run(&args, Arc::new(Quiet)).unwrap_err().to_string();
        assert!(err.contains(flag), "{extra:?}: {err}");
    }
    assert!(!out.join("bench.json").exists());
}

#[test]
fn a_stream_that_never_ends_fails_its_case_at_once() {
    let mut args = mock::fast();
    args.fault = vec!["endless".parse().unwrap()];
    let url = mock::start(args);
    let out = scratch("endless");
    // The request timeout bounds this test if the guard breaks (and the
    // probes' whole replies, which never end either, wait it out once).
    let target = TargetArgs {
        url: Some(url),
        request_timeout: Some(5),
        ..TargetArgs::default()
    };
    let args = ConformanceArgs {
        sections: vec!["streaming".into()],
        ..ConformanceArgs::new(Tier::Smoke, target, out.clone())
    };
    let started = std::time::Instant::now();
    let report = conformance::run(&args, Arc::new(Quiet)).unwrap();
    // A token every 2 ms: the case is past its budget within a second,
    // not at the request timeout (5 s for the probes, then ~1 s).
    assert!(started.elapsed().as_secs() < 8, "{:?}", started.elapsed());
    let case = &report.cases[0];
    assert_eq!(case.status, Status::Fail, "{case:?}");
    let past = case.failures.iter().find(|f| f.check == "max_tokens");
    assert!(
        past.is_some_and(|f| f.actual.contains("events for a budget of")),
        "{:?}",
        case.failures
    );
    let _ = std::fs::remove_dir_all(&out);
}

/// A server whose every reply never ends (streams and whole bodies):
/// the probes wait one request time limit for the three protocols'
/// endpoints at once, those never answered, and every later case that
/// needs one is not run, naming the first failure, at once; streamed
/// cases fail at their token budget. The whole smoke tier ends in about
/// one time limit, not one per case (with the tier's 20 s, under 60 s).
#[test]
fn a_server_that_never_ends_a_reply_ends_the_smoke_tier_in_one_time_limit() {
    let mut args = mock::fast();
    args.fault = vec!["endless".parse().unwrap()];
    let url = mock::start(args);
    let out = scratch("endless-smoke");
    let target = TargetArgs {
        url: Some(url),
        request_timeout: Some(3),
        ..TargetArgs::default()
    };
    let started = std::time::Instant::now();
    let report = conformance::run(
        &ConformanceArgs::new(Tier::Smoke, target, out.clone()),
        Arc::new(Quiet),
    )
    .unwrap();
    let wall = started.elapsed().as_secs_f64();
    assert!(out.join("report.json").is_file());
    let not_run = |path: &str| {
        report
            .cases
            .iter()
            .filter(|c| {
                c.status == Status::Error
                    && c.reason.as_deref().is_some_and(|r| {
                        r.starts_with(&format!("not run: POST {path} went unanswered"))
                            && r.contains("did not end within the request time limit")
                    })
            })
            .count()
    };
    let chat = not_run("/v1/chat/completions");
    assert!(chat >= 10, "{chat} chat cases not run: {:#?}", report.cases);
    assert_eq!(not_run("/v1/messages"), 1);
    assert_eq!(not_run("/v1/responses"), 1);
    assert!(report.cases.iter().all(|c| c.status != Status::Pass
        || c.id == "preflight.models"
        || c.id == "validation.malformed_json"));
    // One time limit (3 s) for the probes, then nothing waits.
    assert!(wall < 8.0, "{wall:.1} s");
    let _ = std::fs::remove_dir_all(&out);
}

/// A report keeps each reply's bytes: `regrade` grades every case that
/// ran again from them alone, with no server, and comes to the same
/// grades; an edited stored reply changes its case's grade (it is the
/// bytes that are graded, not the stored verdict).
#[test]
fn a_report_is_graded_again_from_its_stored_bytes_alone() {
    let mut args = mock::fast();
    args.fault = vec!["miscount".parse().unwrap()];
    let url = mock::start(args);
    let out = scratch("regrade");
    let target = TargetArgs {
        url: Some(url),
        ..TargetArgs::default()
    };
    let report = conformance::run(
        &ConformanceArgs::new(Tier::Smoke, target, out.clone()),
        Arc::new(Quiet),
    )
    .unwrap();
    let ran = report
        .cases
        .iter()
        .filter(|c| c.status != Status::Skip)
        .count();
    assert!(report.summary.fail > 0, "the miscount fails some case");
    let path = out.join("report.json");
    let again = regrade::run(&RegradeArgs::new(&path)).unwrap();
    assert_eq!(again.regraded, ran, "{}", again.text());
    assert!(again.changes.is_empty(), "{}", again.text());
    // The passing plain chat's stored reply, edited to carry no choice.
    let mut stored: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let case = stored["cases"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .find(|c| c["id"] == "preflight.chat")
        .unwrap();
    assert_eq!(case["status"], "pass");
    case["steps"][0]["raw"]["text"] = serde_json::json!("{\"choices\": []}");
    case["steps"][0]["raw"]["pieces"] = serde_json::json!([[15, 1.0]]);
    std::fs::write(&path, stored.to_string()).unwrap();
    let edited = regrade::run(&RegradeArgs::new(&path)).unwrap();
    let changed: Vec<&str> = edited.changes.iter().map(|c| c.id.as_str()).collect();
    assert_eq!(changed, ["preflight.chat"], "{}", edited.text());
    assert!(
        edited.changes[0].after.starts_with("fail"),
        "{}",
        edited.text()
    );
    let _ = std::fs::remove_dir_all(&out);
}

/// `limits.serving_after_refusals` starts with `limits.max_tokens_zero`'s
/// request: a server that answers it (the mock answers everything) is
/// graded lenient for that status in both cases, while the answer after
/// it is still checked (the mock's text has no "Paris": a failure).
#[test]
fn a_refusal_another_case_grades_lenient_is_lenient_in_each() {
    let url = mock::start(mock::fast());
    let out = scratch("lenient-twice");
    let target = TargetArgs {
        url: Some(url),
        ..TargetArgs::default()
    };
    let args = ConformanceArgs {
        cases: vec![
            "limits.max_tokens_zero".into(),
            "limits.serving_after_refusals".into(),
        ],
        ..ConformanceArgs::new(Tier::Standard, target, out.clone())
    };
    let report = conformance::run(&args, Arc::new(Quiet)).unwrap();
    let grade = |id: &str, check: &str| {
        let case = report.cases.iter().find(|c| c.id == id).unwrap();
        let f = case.failures.iter().find(|f| f.check == check);
        f.map(|f| f.grade.as_str()).unwrap_or("passed")
    };
    assert_eq!(grade("limits.max_tokens_zero", "status"), "lenient");
    assert_eq!(grade("limits.serving_after_refusals", "status"), "lenient");
    assert_eq!(
        grade("limits.serving_after_refusals", "content_matches"),
        "fail"
    );
    let _ = std::fs::remove_dir_all(&out);
}

/// A server that breaks a stream's end (no `[DONE]`) with a fixed chance
/// from a seeded generator: run 30 times, the case is graded flaky, every
/// attempt kept, at about that rate.
#[test]
fn a_case_failing_one_time_in_three_is_graded_flaky_at_its_rate() {
    let mut args = mock::fast();
    args.fault = vec!["no-done".parse().unwrap()];
    args.fault_chance = Some(1.0 / 3.0);
    args.seed = 7;
    let url = mock::start(args);
    let out = scratch("flaky");
    let target = TargetArgs {
        url: Some(url),
        ..TargetArgs::default()
    };
    let args = ConformanceArgs {
        cases: vec!["preflight.stream".into()],
        repeat: 30,
        ..ConformanceArgs::new(Tier::Smoke, target, out.clone())
    };
    let report = conformance::run(&args, Arc::new(Quiet)).unwrap();
    let case = &report.cases[0];
    assert_eq!(case.status, Status::Flaky, "{case:?}");
    assert_eq!(case.attempts.len(), 30);
    let (failed, n) = case.failure_counts();
    // A third of 30 is 10; the seeded draw gives one number, and a rate
    // far from a third would mean the attempts are not independent.
    assert!((5..=15).contains(&failed), "{failed} of {n}");
    let reason = case.reason.as_deref().unwrap();
    assert!(
        reason.starts_with(&format!(
            "flaky: failed {failed} of 30 attempts (first at attempt "
        )),
        "{reason}"
    );
    assert!(
        reason.contains("[DONE]"),
        "the first differing evidence: {reason}"
    );
    assert_eq!(report.summary.flaky, 1);
    let _ = std::fs::remove_dir_all(&out);
}

/// `--rerun-failures N` runs again only what failed: a case that passed
/// keeps one attempt; one that failed has 1 + N, the first failed.
#[test]
fn rerun_failures_runs_again_only_the_cases_that_failed() {
    let mut args = mock::fast();
    args.fault = vec!["no-done".parse().unwrap()];
    args.fault_chance = Some(0.6);
    args.seed = 3;
    let url = mock::start(args);
    let out = scratch("rerun");
    let target = TargetArgs {
        url: Some(url),
        ..TargetArgs::default()
    };
    let args = ConformanceArgs {
        sections: vec!["streaming".into(), "preflight".into()],
        rerun_failures: 4,
        ..ConformanceArgs::new(Tier::Standard, target, out.clone())
    };
    let report = conformance::run(&args, Arc::new(Quiet)).unwrap();
    let rerun: Vec<&CaseResult> = report
        .cases
        .iter()
        .filter(|c| !c.attempts.is_empty())
        .collect();
    assert!(!rerun.is_empty(), "a fault at 0.6 fails some case");
    for c in &rerun {
        assert_eq!(c.attempts.len(), 5, "{}", c.id);
        assert!(c.attempts[0].status.failed(), "{}", c.id);
    }
    for c in report.cases.iter().filter(|c| c.attempts.is_empty()) {
        assert!(!c.status.failed(), "{} failed once and ran once", c.id);
    }
    let _ = std::fs::remove_dir_all(&out);
}

/// A reply that declares a body past the harness's cap fails at once,
/// unread, whatever the time limit.
#[test]
fn a_declared_length_past_the_cap_fails_at_once() {
    let mut args = mock::fast();
    args.fault = vec!["huge-length".parse().unwrap()];
    let url = mock::start(args);
    let out = scratch("huge-length");
    let target = TargetArgs {
        url: Some(url),
        ..TargetArgs::default()
    };
    let args = ConformanceArgs {
        cases: vec!["preflight.chat".into()],
        ..ConformanceArgs::new(Tier::Smoke, target, out.clone())
    };
    let started = std::time::Instant::now();
    let report = conformance::run(&args, Arc::new(Quiet)).unwrap();
    assert!(started.elapsed().as_secs() < 5, "{:?}", started.elapsed());
    let case = &report.cases[0];
    assert_eq!(case.status, Status::Error, "{case:?}");
    let why = case.reason.as_deref().unwrap_or_default();
    assert!(
        why.contains("declares 1073741824 bytes (Content-Length), past the harness's cap"),
        "{why}"
    );
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn a_run_past_its_time_limit_reports_what_ran_and_the_rest_as_not_run() {
    // 300 ms between tokens: a smoke tier takes minutes.
    let url = mock::start(afm_harness::mock::MockArgs::timed(5.0, 300.0, 32));
    let out = scratch("run-timeout");
    let target = TargetArgs {
        url: Some(url),
        ..TargetArgs::default()
    };
    let args = ConformanceArgs {
        run_timeout: 3,
        ..ConformanceArgs::new(Tier::Smoke, target, out.clone())
    };
    let started = std::time::Instant::now();
    let seen = Arc::new(Seen::default());
    let report = conformance::run(&args, seen.clone()).unwrap();
    assert!(started.elapsed().as_secs() < 10, "{:?}", started.elapsed());
    let not_run: Vec<&CaseResult> = report
        .cases
        .iter()
        .filter(|c| c.reason.as_deref() == Some("not run: --run-timeout 3 s reached"))
        .collect();
    assert!(!not_run.is_empty());
    assert!(not_run.iter().all(|c| c.status == Status::Error));
    // Every selected case is in the report, and the report was written.
    assert_eq!(report.cases.len(), *seen.planned.lock().unwrap());
    assert!(out.join("report.json").is_file());
    let _ = std::fs::remove_dir_all(&out);
}
