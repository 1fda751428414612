//! A forwarding recorder between a coding agent and the server under test:
//! every request is passed on as it came and its reply streamed back as it
//! comes, and both ends are kept (the request's body; the reply's status,
//! the head of an error body, the cached-token count a reply reports), so
//! a broken agent is named with the request that broke it.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use anyhow::{Context, Result};
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::Response;
use axum::Router;
use serde::Serialize;
use serde_json::Value;

/// One request an agent sent, and how the server answered it.
#[derive(Debug, Clone, Serialize)]
pub struct Recorded {
    pub method: String,
    /// Path and query, as sent.
    pub path: String,
    pub body: Value,
    pub status: u16,
    /// The head of a 4xx/5xx body, or of a stream's error event.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The prompt tokens the reply says came from the cache
    /// (`cached_tokens`, `cache_read_input_tokens`), when it says.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cached_tokens: Option<u64>,
    /// Milliseconds from the request to its reply's last byte.
    pub millis: f64,
}

struct Shared {
    upstream: String,
    client: reqwest::Client,
    log: Mutex<Vec<Arc<Mutex<Recorded>>>>,
}

/// A running recorder; dropping it stops listening.
pub struct Recorder {
    pub base: String,
    shared: Arc<Shared>,
    task: tokio::task::JoinHandle<()>,
}

impl Recorder {
    /// Listens on a free loopback port and forwards to `upstream`.
    pub async fn start(upstream: &str) -> Result<Recorder> {
        let shared = Arc::new(Shared {
            upstream: upstream.trim_end_matches('/').to_string(),
            client: reqwest::Client::builder().build()?,
            log: Mutex::new(Vec::new()),
        });
        let app = Router::new().fallback(forward).with_state(shared.clone());
        let listener = tokio::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0)))
            .await
            .context("binding the recorder")?;
        let base = format!("http://{}", listener.local_addr()?);
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(Recorder { base, shared, task })
    }

    /// What was recorded so far, in order.
    pub fn requests(&self) -> Vec<Recorded> {
        let log = self.shared.log.lock().expect("log");
        log.iter()
            .map(|r| r.lock().expect("entry").clone())
            .collect()
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Headers not passed on: hop-by-hop ones, and the encodings, so the
/// recorder reads what the server sends.
const DROPPED: &[&str] = &[
    "host",
    "content-length",
    "connection",
    "accept-encoding",
    "transfer-encoding",
];

async fn forward(
    State(shared): State<Arc<Shared>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let path = uri
        .path_and_query()
        .map_or(uri.path().to_string(), |p| p.as_str().to_string());
    let entry = Arc::new(Mutex::new(Recorded {
        method: method.to_string(),
        path: path.clone(),
        body: serde_json::from_slice(&body)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&body).into_owned())),
        status: 0,
        error: None,
        cached_tokens: None,
        millis: 0.0,
    }));
    let started = std::time::Instant::now();
    shared.log.lock().expect("log").push(entry.clone());
    let mut out = shared
        .client
        .request(method, format!("{}{path}", shared.upstream))
        .body(body);
    for (name, value) in &headers {
        if !DROPPED.contains(&name.as_str()) {
            out = out.header(name, value);
        }
    }
    let reply = match out.send().await {
        Ok(r) => r,
        Err(e) => {
            let mut r = entry.lock().expect("entry");
            r.status = 502;
            r.millis = started.elapsed().as_secs_f64() * 1e3;
            r.error = Some(format!("the server did not answer: {e}"));
            return Response::builder()
                .status(StatusCode::BAD_GATEWAY)
                .body(Body::from(r.error.clone().unwrap_or_default()))
                .expect("a response");
        }
    };
    let status = reply.status();
    entry.lock().expect("entry").status = status.as_u16();
    let mut response = Response::builder().status(status.as_u16());
    for (name, value) in reply.headers() {
        if !DROPPED.contains(&name.as_str()) {
            response = response.header(name, value);
        }
    }
    // Pass each piece on as it comes, noting errors and cache reads.
    let failed = !status.is_success();
    let stream = futures_util::stream::unfold(Some((reply, Seen::default())), move |state| {
        let entry = entry.clone();
        async move {
            let (mut reply, mut seen) = state?;
            match reply.chunk().await {
                Ok(Some(piece)) => {
                    let mut e = entry.lock().expect("entry");
                    seen.read(&piece, failed, &mut e);
                    e.millis = started.elapsed().as_secs_f64() * 1e3;
                    drop(e);
                    Some((Ok::<Bytes, std::io::Error>(piece), Some((reply, seen))))
                }
                Ok(None) => None,
                Err(e) => Some((Err(std::io::Error::other(e)), None)),
            }
        }
    });
    response
        .body(Body::from_stream(stream))
        .expect("a response")
}

/// What the reply's bytes said so far (a window across piece borders).
#[derive(Default)]
struct Seen {
    tail: String,
}

impl Seen {
    fn read(&mut self, piece: &[u8], failed: bool, entry: &mut Recorded) {
        let text = String::from_utf8_lossy(piece);
        let window = format!("{}{text}", self.tail);
        if failed && entry.error.as_ref().is_none_or(|e| e.len() < 2000) {
            let e = entry.error.get_or_insert_with(String::new);
            e.push_str(&text);
            e.truncate(2000);
        }
        if !failed && entry.error.is_none() {
            if let Some(at) = window
                .find("\"type\":\"error\"")
                .or_else(|| window.find("event: error"))
            {
                entry.error = Some(window[at..].chars().take(600).collect());
            }
        }
        for key in ["\"cached_tokens\":", "\"cache_read_input_tokens\":"] {
            let mut from = 0;
            while let Some(at) = window[from..].find(key) {
                let start = from + at + key.len();
                let digits: String = window[start..]
                    .trim_start()
                    .chars()
                    .take_while(char::is_ascii_digit)
                    .collect();
                if let Ok(n) = digits.parse::<u64>() {
                    entry.cached_tokens = Some(entry.cached_tokens.unwrap_or(0).max(n));
                }
                from = start;
            }
        }
        let keep = window.len().saturating_sub(64);
        let keep = (keep..=window.len())
            .find(|&i| window.is_char_boundary(i))
            .unwrap_or(window.len());
        self.tail = window[keep..].to_string();
    }
}
