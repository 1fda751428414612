//! A scripted OpenAI-style chat server, no model behind it, for
//! afm-bench's checks under load. Each reply echoes the request's
//! isolation marker (or, for a strict-schema request, a JSON object
//! holding it) over a few timed chunks, so requests overlap under
//! concurrency. The mode is the first path segment (`/{mode}/v1/...`):
//! - `clean`: every reply is its own request's;
//! - `cross_talk`: a request that overlaps another gets the other's reply;
//! - `empty_strict`: a strict-schema request that overlaps another gets
//!   an empty object.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{Path, State};
use axum::http::header;
use axum::response::Response;
use axum::routing::post;
use axum::Router;
use futures_util::StreamExt;
use regex::Regex;
use serde_json::{json, Value};

#[derive(Default)]
struct Double {
    /// Markers of the requests in flight.
    in_flight: Mutex<Vec<String>>,
}

/// Serves on an ephemeral port; returns its base address.
pub async fn start() -> String {
    let app = Router::new()
        .route("/{mode}/v1/chat/completions", post(chat))
        .with_state(Arc::new(Double::default()));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        axum::serve(listener, app).await.unwrap();
    });
    format!("http://{addr}")
}

async fn chat(State(d): State<Arc<Double>>, Path(mode): Path<String>, body: Bytes) -> Response {
    let request: Value = serde_json::from_slice(&body).unwrap_or_default();
    let last = request["messages"]
        .as_array()
        .and_then(|m| m.last())
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default()
        .to_string();
    let own = Regex::new(r"AFM-[0-9a-f]{6}")
        .unwrap()
        .find(&last)
        .map(|m| m.as_str().to_string())
        .unwrap_or_default();
    let strict = request.get("response_format").is_some();
    let others: Vec<String> = {
        let mut f = d.in_flight.lock().unwrap();
        let others = f.clone();
        f.push(own.clone());
        others
    };
    // Let the requests of a level overlap.
    tokio::time::sleep(Duration::from_millis(30)).await;
    let marker = match (mode.as_str(), others.first()) {
        ("cross_talk", Some(other)) => other.clone(),
        _ => own.clone(),
    };
    let content = if strict {
        if mode == "empty_strict" && !others.is_empty() {
            "{}".to_string()
        } else {
            json!({"tag": marker, "mood": "calm"}).to_string()
        }
    } else {
        format!("{marker} Once upon a time a fox learned to sail.")
    };
    let pieces: Vec<String> = content.split_inclusive(' ').map(str::to_string).collect();
    let n = pieces.len() as u64;
    let mut events = vec![json!({"choices": [{"index": 0, "delta": {"role": "assistant"}}]})];
    for p in pieces {
        events.push(json!({"choices": [{"index": 0, "delta": {"content": p}}]}));
    }
    events.push(json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}));
    events.push(json!({"choices": [], "usage": {"prompt_tokens": 20, "completion_tokens": n, "total_tokens": 20 + n}}));
    let id = format!("chatcmpl-{own}");
    for e in &mut events {
        e["id"] = id.clone().into();
        e["object"] = "chat.completion.chunk".into();
    }
    let stream = futures_util::stream::iter(events.into_iter().map(Some).chain([None])).then(
        move |e| async move {
            tokio::time::sleep(Duration::from_millis(5)).await;
            Ok::<_, std::convert::Infallible>(Bytes::from(match e {
                Some(e) => format!("data: {e}\n\n"),
                None => "data: [DONE]\n\n".to_string(),
            }))
        },
    );
    let d2 = d.clone();
    let done = futures_util::StreamExt::chain(
        stream,
        futures_util::stream::once(async move {
            let mut f = d2.in_flight.lock().unwrap();
            if let Some(k) = f.iter().position(|m| *m == own) {
                f.remove(k);
            }
            Ok(Bytes::new())
        }),
    );
    Response::builder()
        .header(header::CONTENT_TYPE, "text/event-stream")
        .body(Body::from_stream(done))
        .unwrap()
}

/// [`start`] from a thread of its own, for tests without a runtime (the
/// runs build theirs); the double serves until the process ends.
pub fn start_in_thread() -> String {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            tx.send(start().await).unwrap();
            std::future::pending::<()>().await
        });
    });
    rx.recv().unwrap()
}
