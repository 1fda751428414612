//! A server that routes by the request's `model` (as vLLM, mlx-lm and
//! AFM's multi-model mode do) answers 404 to a request naming no model or
//! another one. afm-test passes its preflight against it with `--url`
//! alone (it names the first model of `GET /v1/models`) and with
//! `--model`, and fails with a wrong `--model`; the report shows the model
//! the server served.

use std::path::PathBuf;
use std::process::Command;

use axum::body::Bytes;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{json, Value};

const SERVED: &str = "served-name";

async fn models() -> Json<Value> {
    Json(json!({"object": "list", "data": [{"id": SERVED, "object": "model", "owned_by": "test"}]}))
}

/// A canned reply, whole or streamed, to a request naming `SERVED`.
async fn chat(body: Bytes) -> Response {
    let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    if request["model"] != SERVED {
        let message = format!("The model `{}` does not exist.", request["model"]);
        let error = json!({"error": {"message": message, "type": "NotFoundError", "param": "model", "code": 404}});
        return (StatusCode::NOT_FOUND, Json(error)).into_response();
    }
    let usage = json!({"prompt_tokens": 9, "completion_tokens": 3, "total_tokens": 12});
    if request["stream"] != true {
        return Json(json!({
            "id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": SERVED,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "Hello there."},
                         "finish_reason": "stop"}],
            "usage": usage,
        }))
        .into_response();
    }
    let chunk = |delta: Value, finish: Value| {
        json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 0, "model": SERVED,
               "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
    };
    let mut events = vec![
        chunk(json!({"role": "assistant", "content": ""}), Value::Null),
        chunk(json!({"content": "Hello there."}), Value::Null),
        chunk(json!({}), json!("stop")),
    ];
    if request.pointer("/stream_options/include_usage") == Some(&json!(true)) {
        events.push(
            json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 0,
                           "model": SERVED, "choices": [], "usage": usage}),
        );
    }
    let mut text: String = events.iter().map(|e| format!("data: {e}\n\n")).collect();
    text.push_str("data: [DONE]\n\n");
    ([("content-type", "text/event-stream")], text).into_response()
}

fn start_server() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let app = Router::new()
                .route("/v1/models", get(models))
                .route("/v1/chat/completions", post(chat));
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            axum::serve(listener, app).await.unwrap();
        });
    });
    format!("http://{addr}")
}

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
    let url = start_server();
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
