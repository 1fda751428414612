//! A server that routes by the request's `model` (as vLLM, mlx-lm and
//! AFM's multi-model mode do): it lists one model, answers a chat request
//! naming it with a canned reply (whole or streamed), and 404s a request
//! naming no model or another one. No engine behind it.

use axum::body::Bytes;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{json, Value};

/// The one model it serves.
pub const SERVED: &str = "served-name";

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

/// Serves on an ephemeral port; returns its base address.
pub fn start() -> String {
    super::serve(
        Router::new()
            .route("/v1/models", get(models))
            .route("/v1/chat/completions", post(chat)),
    )
}
