//! The shutdown case against a server that stops at once on SIGTERM
//! (afm-bench's mock has no graceful stop): its stream in flight is cut,
//! so the case fails on the finish reason, and only there. (afm-serve,
//! which drains, passes it: `afm-test run --tier full --case
//! lifecycle.graceful_shutdown --server "afm-serve ..."`.)

use serde_json::Value;

#[test]
fn a_server_that_dies_on_sigterm_fails_graceful_shutdown() {
    let out = std::env::temp_dir().join(format!("afm-shutdown-{}", std::process::id()));
    let mock = format!(
        "{} mock --port {{port}} --itl 20 --output-tokens 100",
        env!("CARGO_BIN_EXE_afm-bench")
    );
    let suites = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../suites");
    let status = std::process::Command::new(env!("CARGO_BIN_EXE_afm-test"))
        .args([
            "run",
            "--tier",
            "full",
            "--case",
            "lifecycle.graceful_shutdown",
        ])
        .args(["--server", &mock, "--out"])
        .arg(&out)
        .arg("--suites")
        .arg(&suites)
        .status()
        .unwrap();
    assert_eq!(status.code(), Some(1), "a failing case exits 1");
    let report: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap();
    let case = &report["cases"][0];
    assert_eq!(case["id"], "lifecycle.graceful_shutdown");
    assert_eq!(case["status"], "fail", "{case}");
    let checks: Vec<&str> = case["failures"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["check"].as_str().unwrap())
        .collect();
    assert_eq!(checks, ["finish_reason"], "{case}");
}
