//! Where requests go: the in-process engine (through the same OpenAI layer
//! the server uses, without a socket) or any OpenAI-compatible server over
//! HTTP. Both give back an [`Exchange`]: status, headers, and either a
//! whole body or the stream's chunks, so every check runs unchanged
//! against either.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use afm_engine::api::GRAMMAR_HEADER;
use afm_engine::api::{render_metrics, RejectedRequests};
use afm_engine::api::{ApiContext, ApiResponse};
use afm_engine::runtime::GrammarMode;
use serde::Serialize;
use serde_json::Value;

/// One request and what came back.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Exchange {
    pub path: String,
    pub request: Value,
    pub status: u16,
    /// Lower-case names.
    pub headers: BTreeMap<String, String>,
    /// The whole JSON body (non-streamed responses and errors).
    pub body: Value,
    /// Chunk objects of a stream, in order.
    pub chunks: Vec<Value>,
    /// When each chunk arrived, in ms after the request was sent.
    #[serde(skip)]
    pub chunk_millis: Vec<f64>,
    /// The stream ended with `data: [DONE]`.
    pub done_marker: bool,
    /// Lines of the stream that were not `data: <json>` / `data: [DONE]`
    /// / blank / comments.
    pub malformed_lines: Vec<String>,
    /// The request never completed (connection refused, reset, timeout).
    pub transport_error: Option<String>,
    pub streamed: bool,
    pub millis: f64,
}

/// A target of a run.
#[derive(Clone)]
pub enum Target {
    InProcess(Arc<ApiContext>),
    Http {
        client: reqwest::Client,
        base: String,
        api_key: Option<String>,
        /// Sent as `model` in every request body that names none: servers
        /// that route by it (vLLM, AFM's multi-model mode, mlx-lm) refuse
        /// or misroute requests without it.
        model: Option<String>,
    },
}

impl Target {
    pub fn http(base: &str, api_key: Option<String>) -> Self {
        // A fresh connection per request: servers differ in how they end
        // keep-alive after a stream (llama.cpp's closes it without saying
        // so), and a pooled connection the server just closed fails the
        // next request before it is sent. Connecting costs a few tens of
        // microseconds locally, the same for every server.
        let client = reqwest::Client::builder()
            .timeout(std::time::Duration::from_secs(600))
            .pool_max_idle_per_host(0)
            .build()
            .expect("an HTTP client");
        Target::Http {
            client,
            base: base.trim_end_matches('/').to_string(),
            api_key,
            model: None,
        }
    }

    /// The same target, naming `model` in every request (HTTP only: the
    /// in-process engine serves one model).
    pub fn with_model(mut self, name: Option<String>) -> Self {
        if let Target::Http { model, .. } = &mut self {
            *model = name;
        }
        self
    }

    /// The model requests name: the one given, else none.
    pub fn model(&self) -> Option<&str> {
        match self {
            Target::InProcess(api) => api.model_ids.first().map(String::as_str),
            Target::Http { model, .. } => model.as_deref(),
        }
    }

    /// The first id of `GET /v1/models` (None when the list is empty).
    /// Fails when the server cannot be reached at all.
    pub async fn listed_model(&self) -> anyhow::Result<Option<String>> {
        let ex = self.get("/v1/models").await;
        if let Some(e) = ex.transport_error {
            anyhow::bail!("cannot reach {}: {e}", self.describe());
        }
        Ok(ex.body["data"][0]["id"].as_str().map(str::to_string))
    }

    pub fn describe(&self) -> String {
        match self {
            Target::InProcess(api) => format!("in-process engine ({})", api.model_ids[0]),
            Target::Http { base, .. } => base.clone(),
        }
    }

    /// `GET path`.
    pub async fn get(&self, path: &str) -> Exchange {
        let start = Instant::now();
        let mut ex = Exchange {
            path: path.to_string(),
            ..Default::default()
        };
        match self {
            Target::InProcess(api) => match path {
                "/v1/models" => {
                    ex.status = 200;
                    ex.body = api.models();
                }
                "/health" => {
                    ex.status = 200;
                    ex.body = serde_json::json!({"status": "ok"});
                }
                "/metrics" => {
                    ex.status = 200;
                    let text = render_metrics(&api.engine.stats(), RejectedRequests::default());
                    ex.body = Value::String(text);
                }
                _ => ex.status = 404,
            },
            Target::Http {
                client,
                base,
                api_key,
                ..
            } => {
                let mut req = client.get(format!("{base}{path}"));
                if let Some(k) = api_key {
                    req = req.bearer_auth(k);
                }
                match req.send().await {
                    Ok(r) => {
                        ex.status = r.status().as_u16();
                        ex.headers = headers_of(r.headers());
                        let text = r.text().await.unwrap_or_default();
                        ex.body = serde_json::from_str(&text).unwrap_or(Value::String(text));
                    }
                    Err(e) => ex.transport_error = Some(error_chain(&e)),
                }
            }
        }
        ex.millis = millis_since(start);
        ex
    }

    /// `POST path` with a JSON request (streamed when it says so).
    pub async fn post(&self, path: &str, request: &Value) -> Exchange {
        let body = serde_json::to_vec(request).expect("JSON");
        self.post_raw(path, body).await
    }

    /// `POST path` with bytes as they are (for malformed-input cases).
    pub async fn post_raw(&self, path: &str, body: Vec<u8>) -> Exchange {
        let body = self.name_model(body);
        let start = Instant::now();
        let streamed = serde_json::from_slice::<Value>(&body)
            .ok()
            .and_then(|v| v.get("stream").and_then(Value::as_bool))
            .unwrap_or(false);
        let mut ex = Exchange {
            path: path.to_string(),
            request: serde_json::from_slice(&body)
                .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&body).into())),
            streamed,
            ..Default::default()
        };
        match self {
            Target::InProcess(api) => in_process(api, path, &body, start, &mut ex).await,
            Target::Http {
                client,
                base,
                api_key,
                ..
            } => {
                let mut req = client
                    .post(format!("{base}{path}"))
                    .header("content-type", "application/json")
                    .body(body);
                if let Some(k) = api_key {
                    req = req.bearer_auth(k);
                }
                match req.send().await {
                    Ok(r) => read_http(r, start, &mut ex).await,
                    Err(e) => ex.transport_error = Some(error_chain(&e)),
                }
            }
        }
        ex.millis = millis_since(start);
        ex
    }
}

impl Target {
    /// Adds `"model"` to a JSON-object body that names none; other bodies
    /// (malformed ones, for validation cases) go as they are.
    fn name_model(&self, body: Vec<u8>) -> Vec<u8> {
        let Target::Http {
            model: Some(name), ..
        } = self
        else {
            return body;
        };
        match serde_json::from_slice::<Value>(&body) {
            Ok(Value::Object(mut map)) if !map.contains_key("model") => {
                map.insert("model".into(), Value::String(name.clone()));
                serde_json::to_vec(&map).unwrap_or(body)
            }
            _ => body,
        }
    }
}

async fn in_process(api: &ApiContext, path: &str, body: &[u8], start: Instant, ex: &mut Exchange) {
    let result = match path {
        "/v1/chat/completions" => api.chat_completions(body).await,
        "/v1/completions" => api.completions(body).await,
        _ => {
            ex.status = 404;
            return;
        }
    };
    match result {
        Err(e) => {
            ex.status = e.status;
            ex.body = e.body();
        }
        Ok(ApiResponse::Complete { body, grammar }) => {
            ex.status = 200;
            grammar_header(ex, grammar);
            ex.body = body;
        }
        Ok(ApiResponse::Stream {
            mut chunks,
            grammar,
        }) => {
            ex.status = 200;
            grammar_header(ex, grammar);
            while let Some(c) = chunks.next().await {
                ex.chunks.push(c);
                ex.chunk_millis.push(millis_since(start));
            }
            // What the HTTP layer writes after the last chunk.
            ex.done_marker = true;
        }
    }
}

fn grammar_header(ex: &mut Exchange, mode: GrammarMode) {
    if mode != GrammarMode::None {
        ex.headers
            .insert(GRAMMAR_HEADER.into(), mode.as_str().to_string());
    }
}

fn headers_of(h: &reqwest::header::HeaderMap) -> BTreeMap<String, String> {
    h.iter()
        .map(|(k, v)| {
            (
                k.as_str().to_ascii_lowercase(),
                v.to_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

async fn read_http(mut r: reqwest::Response, start: Instant, ex: &mut Exchange) {
    ex.status = r.status().as_u16();
    ex.headers = headers_of(r.headers());
    let is_sse = ex
        .headers
        .get("content-type")
        .is_some_and(|c| c.starts_with("text/event-stream"));
    if !is_sse {
        let text = match r.text().await {
            Ok(t) => t,
            Err(e) => {
                ex.transport_error = Some(error_chain(&e));
                return;
            }
        };
        ex.body = serde_json::from_str(&text).unwrap_or(Value::String(text));
        return;
    }
    let mut pending = String::new();
    loop {
        match r.chunk().await {
            Ok(Some(bytes)) => {
                pending.push_str(&String::from_utf8_lossy(&bytes));
                while let Some(at) = pending.find('\n') {
                    let line = pending[..at].trim_end_matches('\r').to_string();
                    pending.drain(..=at);
                    sse_line(&line, millis_since(start), ex);
                }
            }
            Ok(None) => break,
            Err(e) => {
                ex.transport_error = Some(error_chain(&e));
                break;
            }
        }
    }
    if !pending.trim().is_empty() {
        sse_line(pending.trim_end(), millis_since(start), ex);
    }
}

fn sse_line(line: &str, at_millis: f64, ex: &mut Exchange) {
    if line.is_empty() || line.starts_with(':') {
        return;
    }
    let Some(data) = line.strip_prefix("data:") else {
        // `event:` / `id:` / `retry:` fields are legal SSE.
        if !(line.starts_with("event:") || line.starts_with("id:") || line.starts_with("retry:")) {
            ex.malformed_lines.push(line.to_string());
        }
        return;
    };
    let data = data.trim_start();
    if data == "[DONE]" {
        ex.done_marker = true;
        return;
    }
    if ex.done_marker {
        ex.malformed_lines.push(format!("after [DONE]: {data}"));
    }
    match serde_json::from_str(data) {
        Ok(v) => {
            ex.chunks.push(v);
            ex.chunk_millis.push(at_millis);
        }
        Err(_) => ex.malformed_lines.push(line.to_string()),
    }
}

fn millis_since(start: Instant) -> f64 {
    start.elapsed().as_secs_f64() * 1000.0
}

/// An error with its causes ("error sending request: connection closed
/// before message completed"), since the top level alone rarely says why.
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}
