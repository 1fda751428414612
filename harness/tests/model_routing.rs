//! A server that routes by the request's `model` (as vLLM, mlx-lm and
//! AFM's multi-model mode do) answers 404 to a request naming no model or
//! another one. afm-test passes its preflight against it with `--url`
//! alone (it names the first model of `GET /v1/models`) and with
//! `--model`, and fails with a wrong `--model`; the report shows the model
//! the server served.

use std::path::PathBuf;
use std::process::Command;

use crate::support::routing_double::{self, SERVED};
use serde_json::Value;

/// `afm-test run --tier smoke --section preflight --url URL ARGS...`:
/// its exit code and report.
fn afm_test(url: &str, name: &str, extra: &[&str]) -> (Option<i32>, Value, String) {
    let out_dir: PathBuf =
        std::env::temp_dir().join(format!("afm-routing-{}-{name}", std::process::id()));
    let out = Command::new(env!("CARGO_BIN_EXE_afm-test"))
        .args([
            "run",
            "--tier",
            "smoke",
            "--section",
            "preflight",
            "--url",
            url,
        ])
        .arg("--out")
        .arg(&out_dir)
        .args(extra)
        .output()
        .unwrap();
    let log = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let report = std::fs::read_to_string(out_dir.join("report.json"))
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or(Value::Null);
    let _ = std::fs::remove_dir_all(&out_dir);
    (out.status.code(), report, log)
}

fn statuses(report: &Value) -> Vec<(String, String)> {
    report["cases"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| {
            (
                c["id"].as_str().unwrap_or_default().to_string(),
                c["status"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

#[test]
fn a_server_that_routes_by_model_passes_preflight_with_url_alone_and_with_model() {
    let url = routing_double::start();
    for (name, extra) in [("listed", vec![]), ("named", vec!["--model", SERVED])] {
        let (code, report, log) = afm_test(&url, name, &extra);
        assert_eq!(code, Some(0), "{name}: {log}");
        let cases = statuses(&report);
        assert_eq!(cases.len(), 3, "{name}: {log}");
        assert!(
            cases.iter().all(|(_, s)| s == "pass"),
            "{name}: {cases:?}\n{log}"
        );
        assert_eq!(report["run"]["model"], SERVED, "{name}");
        assert_eq!(report["run"]["requested_model"], SERVED, "{name}");
    }
    // The same server with a model it does not serve: every case runs and
    // fails (none hides as a skip).
    let (code, report, log) = afm_test(&url, "wrong", &["--model", "other"]);
    assert_eq!(code, Some(1), "{log}");
    let cases = statuses(&report);
    assert!(
        cases
            .iter()
            .filter(|(id, _)| id != "preflight.models")
            .all(|(_, s)| s == "fail"),
        "{cases:?}\n{log}"
    );
}
