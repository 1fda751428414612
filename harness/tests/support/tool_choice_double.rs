//! A server with tools that refuses `tool_choice` "required" with 422, as
//! mistral.rs 0.8.1 does (its `ToolChoice` takes "auto", "none" and a
//! named function), and answers any other request carrying tools with a
//! call to the first tool. No engine behind it.

use axum::body::Bytes;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{json, Value};

const MODEL: &str = "tool-choice-double";

async fn models() -> Json<Value> {
    Json(json!({"object": "list", "data": [{"id": MODEL, "object": "model", "owned_by": "test"}]}))
}

async fn chat(body: Bytes) -> Response {
    let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    if request["tool_choice"] == "required" {
        // mistral.rs's words, which name the field.
        let message = "Failed to deserialize the JSON body into the target type: tool_choice: \
                       data did not match any variant of untagged enum ToolChoice";
        return (StatusCode::UNPROCESSABLE_ENTITY, message).into_response();
    }
    let message = match request.pointer("/tools/0/function/name") {
        Some(name) => json!({"role": "assistant", "content": null, "tool_calls": [{
            "id": "call-1", "type": "function",
            "function": {"name": name, "arguments": "{\"city\": \"Paris\"}"}}]}),
        None => json!({"role": "assistant", "content": "Hello there."}),
    };
    let finish = if message["tool_calls"].is_array() {
        "tool_calls"
    } else {
        "stop"
    };
    Json(json!({
        "id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": MODEL,
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 9, "completion_tokens": 3, "total_tokens": 12},
    }))
    .into_response()
}

/// Serves on an ephemeral port; returns its base address.
pub fn start() -> String {
    super::serve(
        Router::new()
            .route("/v1/models", get(models))
            .route("/v1/chat/completions", post(chat)),
    )
}
