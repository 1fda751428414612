//! Where requests go: the in-process engine (afm-serve's own router,
//! called without a socket through tower's `oneshot`; only with the
//! `engine` feature) or any server over HTTP. Both give back an
//! [`Exchange`]: status, headers, and either a whole body or the stream's
//! events, read by the same code, so every check runs unchanged against
//! either and SSE framing and routing are tested in-process too.

pub mod flags;
#[cfg(feature = "engine")]
mod in_process;
pub mod process;
mod unanswered;
pub mod watch;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use serde::Serialize;
use serde_json::Value;

#[cfg(feature = "engine")]
pub use in_process::InProcess;
pub use unanswered::Unanswered;

use crate::protocol::dialect::token_budget;
use crate::protocol::endpoint::MODELS_PATH;
use crate::protocol::exchange::Exchange;

/// A target of a run.
#[derive(Clone)]
pub enum Target {
    #[cfg(feature = "engine")]
    InProcess(InProcess),
    Http {
        client: reqwest::Client,
        base: String,
        api_key: Option<String>,
        /// Sent as `model` in every request body that names none: servers
        /// that route by it (vLLM, AFM's multi-model mode, mlx-lm) refuse
        /// or misroute requests without it.
        model: Option<String>,
        /// Path prefixes the suites use -> where this server serves them
        /// (a profile's `[routes]`), longest first.
        routes: Vec<(String, String)>,
        /// Endpoints that went unanswered in this run, not asked again
        /// (conformance runs; None: every request is sent).
        unanswered: Option<Arc<Unanswered>>,
        /// Replies keep their bytes (`Target::keeping_bytes`).
        keep_bytes: bool,
        /// The process group of a server this run started (`--server`):
        /// the shutdown case signals it.
        owned: Option<u32>,
    },
}

/// How a request carries the target's API key (security cases send it
/// wrong or not at all).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Auth {
    #[default]
    Given,
    Missing,
    Wrong,
}

/// When a client walks away from its request on purpose, as real ones do
/// (a closed tab, a user who gave up): the soak's dropped streams and
/// abandoned requests. The exchange then says it `left`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Leave {
    /// Reads the reply to its end.
    #[default]
    Never,
    /// Drops the connection after the stream's first event.
    AfterFirstEvent,
    /// Drops it after this long, whatever has come by then.
    After(std::time::Duration),
}

/// One request as sent.
#[derive(Debug, Clone)]
pub struct Outgoing {
    pub method: String,
    pub path: String,
    pub body: Option<Vec<u8>>,
    /// Extra headers (lower-case names).
    pub headers: Vec<(String, String)>,
    pub auth: Auth,
    pub leave: Leave,
    /// Told when the reply's first stream event has come (the shutdown
    /// case signals the server then); reading goes on.
    pub first_event: Option<Arc<tokio::sync::Notify>>,
}

impl Outgoing {
    pub fn get(path: &str) -> Self {
        Outgoing {
            method: "GET".into(),
            path: path.into(),
            body: None,
            headers: Vec::new(),
            auth: Auth::Given,
            leave: Leave::Never,
            first_event: None,
        }
    }

    pub fn post(path: &str, body: Vec<u8>) -> Self {
        Outgoing {
            method: "POST".into(),
            body: Some(body),
            ..Outgoing::get(path)
        }
    }
}

/// Without the `engine` feature there is no engine to start: the
/// in-process target is refused by name.
#[cfg(not(feature = "engine"))]
impl Target {
    pub fn start_in_process(
        _model: &str,
        _flags: &[String],
        _api_key: Option<String>,
    ) -> anyhow::Result<(Target, Vec<String>, Option<String>)> {
        anyhow::bail!(
            "this build has no in-process engine (afm-harness was built without its \
             `engine` feature): test a server with --url URL (afm-test also takes --server \"COMMAND\")"
        )
    }
}

impl Target {
    /// The key requests carry, if any.
    pub fn api_key(&self) -> Option<&str> {
        match self {
            #[cfg(feature = "engine")]
            Target::InProcess(t) => t.api_key.as_deref(),
            Target::Http { api_key, .. } => api_key.as_deref(),
        }
    }

    pub fn http(base: &str, api_key: Option<String>) -> Self {
        // A fresh connection per request: servers differ in how they end
        // keep-alive after a stream (llama.cpp's closes it without saying
        // so), and a pooled connection the server just closed fails the
        // next request before it is sent. Connecting costs a few tens of
        // microseconds locally, the same for every server.
        let client = http_client(0, REQUEST_TIME_LIMIT);
        Target::Http {
            client,
            base: base.trim_end_matches('/').to_string(),
            api_key,
            model: None,
            routes: Vec::new(),
            unanswered: None,
            keep_bytes: false,
            owned: None,
        }
    }

    /// The same target, owning the server whose process group is `pid`
    /// (HTTP only).
    pub fn owning(mut self, pid: u32) -> Self {
        #[allow(irrefutable_let_patterns)]
        if let Target::Http { owned, .. } = &mut self {
            *owned = Some(pid);
        }
        self
    }

    /// The process group of the server this run started, if it did.
    pub fn owned(&self) -> Option<u32> {
        match self {
            #[cfg(feature = "engine")]
            Target::InProcess(_) => None,
            Target::Http { owned, .. } => *owned,
        }
    }

    /// The same target, each reply keeping its bytes as they came
    /// (`Exchange::raw`) for a report that `afm-test regrade` reads
    /// again; a benchmark's replies do not pay for the copy.
    pub fn keeping_bytes(mut self) -> Self {
        match &mut self {
            #[cfg(feature = "engine")]
            Target::InProcess(t) => t.keep_bytes = true,
            Target::Http { keep_bytes, .. } => *keep_bytes = true,
        }
        self
    }

    fn keeps_bytes(&self) -> bool {
        match self {
            #[cfg(feature = "engine")]
            Target::InProcess(t) => t.keep_bytes,
            Target::Http { keep_bytes, .. } => *keep_bytes,
        }
    }

    /// The same target, sending no more requests to an endpoint that
    /// went unanswered ([`Unanswered`]): each such request is an error
    /// "not run" at once (HTTP only; the in-process engine has no
    /// transport to fail).
    pub fn skip_unanswered(mut self) -> Self {
        #[allow(irrefutable_let_patterns)]
        if let Target::Http { unanswered, .. } = &mut self {
            *unanswered = Some(Arc::default());
        }
        self
    }

    fn unanswered(&self) -> Option<&Unanswered> {
        match self {
            #[cfg(feature = "engine")]
            Target::InProcess(_) => None,
            Target::Http { unanswered, .. } => unanswered.as_deref(),
        }
    }

    /// The same target with each request cut after `limit`
    /// (`--request-timeout`), and its connections kept alive between
    /// requests or not (`afm-bench --keep-alive`, as AIPerf and GuideLLM
    /// keep theirs: a burst then pays no connection each, at the risk
    /// named in [`Target::http`]).
    pub fn time_limit(mut self, limit: std::time::Duration, keep_alive: bool) -> Self {
        #[allow(irrefutable_let_patterns)]
        if let Target::Http { client, .. } = &mut self {
            *client = http_client(if keep_alive { usize::MAX } else { 0 }, limit);
        }
        self
    }

    /// The same target, sending a request whose path starts with a key of
    /// `routes` to that key's value instead (HTTP only). Reports keep the
    /// suites' own paths, so checks read every protocol the same way.
    pub fn with_routes(mut self, given: &BTreeMap<String, String>) -> Self {
        #[allow(irrefutable_let_patterns)]
        if let Target::Http { routes, .. } = &mut self {
            *routes = given.iter().map(|(a, b)| (a.clone(), b.clone())).collect();
            routes.sort_by_key(|(from, _)| std::cmp::Reverse(from.len()));
        }
        self
    }

    /// The same target, naming `model` in every request (HTTP only: the
    /// in-process engine serves one model).
    pub fn with_model(mut self, name: Option<String>) -> Self {
        // Refutable only with the `engine` feature's in-process variant.
        #[allow(irrefutable_let_patterns)]
        if let Target::Http { model, .. } = &mut self {
            *model = name;
        }
        self
    }

    /// The model requests name: the one given, else none.
    pub fn model(&self) -> Option<&str> {
        match self {
            #[cfg(feature = "engine")]
            Target::InProcess(t) => Some(t.model()),
            Target::Http { model, .. } => model.as_deref(),
        }
    }

    /// The first id of `GET /v1/models` (None when the list is empty).
    /// Fails when the list cannot be read (no server, or a reply that
    /// breaks off or never ends).
    pub async fn listed_model(&self) -> anyhow::Result<Option<String>> {
        let ex = self.get(MODELS_PATH).await;
        if let Some(e) = ex.transport_error {
            anyhow::bail!("GET {}{MODELS_PATH}: {e}", self.describe());
        }
        Ok(ex.body["data"][0]["id"].as_str().map(str::to_string))
    }

    pub fn describe(&self) -> String {
        match self {
            #[cfg(feature = "engine")]
            Target::InProcess(t) => format!("in-process engine ({})", t.model()),
            Target::Http { base, .. } => base.clone(),
        }
    }

    /// `GET path`.
    pub async fn get(&self, path: &str) -> Exchange {
        self.send(Outgoing::get(path)).await
    }

    /// `POST path` with a JSON request (streamed when it says so).
    pub async fn post(&self, path: &str, request: &Value) -> Exchange {
        let body = serde_json::to_vec(request).expect("JSON");
        self.post_raw(path, body).await
    }

    /// `POST path` with bytes as they are (for malformed-input cases).
    pub async fn post_raw(&self, path: &str, body: Vec<u8>) -> Exchange {
        self.send(Outgoing::post(path, body)).await
    }

    /// Sends one request and reads its reply.
    pub async fn send(&self, mut out: Outgoing) -> Exchange {
        out.body = out.body.map(|b| self.name_model(b));
        let start = Instant::now();
        let body = out.body.clone().unwrap_or_default();
        let streamed = serde_json::from_slice::<Value>(&body)
            .ok()
            .and_then(|v| v.get("stream").and_then(Value::as_bool))
            .unwrap_or(false);
        let mut ex = Exchange {
            path: out.path.clone(),
            request: if out.body.is_none() {
                Value::Null
            } else {
                serde_json::from_slice(&body)
                    .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&body).into()))
            },
            streamed,
            keep_bytes: self.keeps_bytes(),
            ..Default::default()
        };
        let skipped = self
            .unanswered()
            .and_then(|u| u.earlier(&out.method, &out.path, streamed));
        if let Some(why) = skipped {
            ex.transport_error = Some(why);
            ex.not_sent = true;
            return ex;
        }
        let key = match out.auth {
            Auth::Given => self.api_key().map(str::to_string),
            Auth::Missing => None,
            Auth::Wrong => Some("afm-test-wrong-key".to_string()),
        };
        let exchange = self.exchange(&out, key, body, start, &mut ex);
        match out.leave {
            Leave::After(after) => {
                let at = tokio::time::Instant::from_std(start + after);
                if tokio::time::timeout_at(at, exchange).await.is_err() {
                    ex.left = true;
                }
            }
            _ => exchange.await,
        }
        ex.millis = millis_since(start);
        if let Some(u) = self.unanswered().filter(|_| !ex.left) {
            let why = ex.transport_error.as_deref().filter(|_| ex.unanswered);
            u.record(&out.method, &out.path, streamed, why);
        }
        ex
    }

    /// Sends `out` and reads its reply into `ex`.
    async fn exchange(
        &self,
        out: &Outgoing,
        key: Option<String>,
        body: Vec<u8>,
        start: Instant,
        ex: &mut Exchange,
    ) {
        match self {
            #[cfg(feature = "engine")]
            Target::InProcess(t) => t.send(out, key.as_deref(), body, start, ex).await,
            Target::Http {
                client,
                base,
                routes,
                ..
            } => {
                let method = reqwest::Method::from_bytes(out.method.as_bytes())
                    .unwrap_or(reqwest::Method::POST);
                let path = routes
                    .iter()
                    .find_map(|(from, to)| {
                        out.path
                            .strip_prefix(from.as_str())
                            .map(|rest| format!("{to}{rest}"))
                    })
                    .unwrap_or_else(|| out.path.clone());
                let mut req = client.request(method, format!("{base}{path}"));
                if out.body.is_some() {
                    if !out.headers.iter().any(|(n, _)| n == "content-type") {
                        req = req.header("content-type", "application/json");
                    }
                    req = req.body(body);
                }
                if let Some(k) = &key {
                    req = req.bearer_auth(k);
                }
                for (name, value) in &out.headers {
                    req = req.header(name.as_str(), value.as_str());
                }
                match req.send().await {
                    Ok(r) => read_http(r, out, start, ex).await,
                    Err(e) => {
                        ex.unanswered = e.is_timeout() || e.is_connect();
                        ex.transport_error = Some(timeout_named(&e, "no reply headers came"));
                    }
                }
            }
        }
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

/// How long a request may take, headers to last byte, by default: a
/// stream that never ends is an error after it, never a hang.
pub const REQUEST_TIME_LIMIT: std::time::Duration = std::time::Duration::from_secs(600);

/// The most reply bytes read from one request: a larger reply is cut
/// and named, so a broken server cannot exhaust the harness's memory.
pub const REPLY_CAP: usize = 64 << 20;

/// What the harness reads of one reply at most: a reply past either is
/// an error that names it (a broken server never hangs or exhausts the
/// harness). In both tools' reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ReplyLimits {
    /// Bytes of one reply, in MiB.
    pub cap_mib: usize,
    /// Headers to last byte, in seconds.
    pub request_timeout_s: u64,
}

fn http_client(idle_per_host: usize, limit: std::time::Duration) -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(limit)
        .pool_max_idle_per_host(idle_per_host)
        .build()
        .expect("an HTTP client")
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

async fn read_http(mut r: reqwest::Response, out: &Outgoing, start: Instant, ex: &mut Exchange) {
    let leave = out.leave;
    ex.status = r.status().as_u16();
    ex.headers = headers_of(r.headers());
    if let Some(declared) = r.content_length().filter(|&n| n > REPLY_CAP as u64) {
        // Reading it would only end at the cap, at the server's pace.
        ex.transport_error = Some(format!(
            "the reply declares {declared} bytes (Content-Length), past the harness's cap of \
             {} MiB: not read",
            REPLY_CAP >> 20
        ));
        ex.unanswered = true;
        return;
    }
    let mut reader = BodyReader::new(ex, leave);
    let mut read = 0usize;
    loop {
        match r.chunk().await {
            Ok(Some(bytes)) => {
                read += bytes.len();
                if read > REPLY_CAP {
                    ex.transport_error = Some(format!(
                        "the reply passed {} MiB, the harness's cap: reading stopped",
                        REPLY_CAP >> 20
                    ));
                    ex.unanswered = true;
                    break;
                }
                reader.feed(&bytes, millis_since(start), ex);
                if let Some(first) = out.first_event.as_ref().filter(|_| !ex.chunks.is_empty()) {
                    first.notify_one();
                }
                if reader.stops(ex) {
                    break;
                }
            }
            Ok(None) => break,
            Err(e) => {
                ex.unanswered = e.is_timeout();
                ex.transport_error = Some(timeout_named(&e, "the reply did not end"));
                break;
            }
        }
    }
    reader.finish(millis_since(start), ex);
}

/// Reads a stored reply again (`afm-test regrade`): `ex` has its request,
/// status and headers; `raw` the bytes as they came, `pieces` each
/// piece's end in them and the ms it arrived. The same reader as a live
/// reply's, fed the same pieces at the same times, gives the same
/// exchange (body or events, their times, malformed lines, overrun).
pub fn reread(ex: &mut Exchange, raw: &[u8], pieces: &[(usize, f64)]) {
    let mut reader = BodyReader::new(ex, Leave::Never);
    let mut from = 0;
    let mut last = 0.0;
    for &(end, at) in pieces {
        let end = end.min(raw.len());
        if end > from {
            reader.feed(&raw[from..end], at, ex);
            from = end;
        }
        last = at;
        if reader.stops(ex) {
            break;
        }
    }
    let end = if ex.millis > 0.0 { ex.millis } else { last };
    reader.finish(end, ex);
}

/// Stream events a request may get: each token at most one event of its
/// own, twice over (a server may send reasoning and content, or a call's
/// name and arguments, apart), plus the protocol's own events (role,
/// block starts and stops, finish, usage, pings: Responses sends about a
/// dozen).
fn event_cap(request: &Value) -> Option<usize> {
    token_budget(request).map(|n| 2 * n as usize + 32)
}

/// Reads a reply body as it arrives: a whole JSON (or text) body, or an
/// SSE stream split into events.
struct BodyReader {
    sse: bool,
    leave: Leave,
    /// Stream events the request's token budget allows at most (None: it
    /// sets none).
    event_cap: Option<usize>,
    pending: Vec<u8>,
    /// The `event:` field of the event being read.
    event: String,
    /// Its `data:` lines, joined by newlines as SSE joins them (one
    /// buffer, reused: an event costs no allocation of its own here).
    data: String,
    /// Whether the event has a `data:` line (it may be empty).
    has_data: bool,
}

impl BodyReader {
    fn new(ex: &Exchange, leave: Leave) -> Self {
        let sse = ex
            .headers
            .get("content-type")
            .is_some_and(|c| c.starts_with("text/event-stream"));
        BodyReader {
            sse,
            leave,
            event_cap: event_cap(&ex.request),
            pending: Vec::new(),
            event: String::new(),
            data: String::new(),
            has_data: false,
        }
    }

    /// Whether reading stops here: the client leaves after the first
    /// event, or the stream overran.
    fn stops(&self, ex: &mut Exchange) -> bool {
        if self.leave == Leave::AfterFirstEvent && !ex.chunks.is_empty() {
            ex.left = true;
            return true;
        }
        self.overran(ex)
    }

    /// Whether the stream has gone past what its request's `max_tokens`
    /// allows; then it is named in `ex.overran` and the caller stops
    /// reading (a stream that never ends fails its case at once instead of
    /// running to the request timeout).
    fn overran(&self, ex: &mut Exchange) -> bool {
        let Some(cap) = self.event_cap.filter(|&c| self.sse && ex.chunks.len() > c) else {
            return false;
        };
        let budget = token_budget(&ex.request).unwrap_or_default();
        ex.overran = Some(format!(
            "the stream sent {} events for a budget of {budget} tokens (at most {cap}: every \
             event but a few carries at least one token) and went on; reading stopped after {:.1} s",
            ex.chunks.len(),
            ex.chunk_millis.last().copied().unwrap_or_default() / 1000.0
        ));
        true
    }

    fn feed(&mut self, bytes: &[u8], at_millis: f64, ex: &mut Exchange) {
        ex.keep_raw(bytes, at_millis);
        self.pending.extend_from_slice(bytes);
        if !self.sse {
            return;
        }
        // Lines are split on bytes: a multi-byte character cut between
        // two network chunks is whole again before it is decoded. Whole
        // lines are read in place and dropped from the buffer at once.
        let pending = std::mem::take(&mut self.pending);
        let mut start = 0;
        while let Some(len) = pending[start..].iter().position(|&b| b == b'\n') {
            let line = &pending[start..start + len];
            start += len + 1;
            match std::str::from_utf8(line) {
                Ok(text) => self.line(text.trim_end_matches('\r'), at_millis, ex),
                Err(_) => {
                    // Read on as decoded, but a stream rule fails on it.
                    let text = String::from_utf8_lossy(line);
                    ex.malformed_lines
                        .push(format!("invalid UTF-8: {}", text.trim_end()));
                    self.line(text.trim_end_matches('\r'), at_millis, ex);
                }
            }
        }
        self.pending = pending;
        self.pending.drain(..start);
    }

    fn finish(mut self, at_millis: f64, ex: &mut Exchange) {
        let rest = String::from_utf8_lossy(&self.pending).into_owned();
        if !self.sse {
            ex.body = serde_json::from_str(&rest).unwrap_or(Value::String(rest));
            return;
        }
        if !rest.trim().is_empty() {
            self.line(rest.trim_end(), at_millis, ex);
        }
        // A last event without its blank line still counts.
        self.dispatch(at_millis, ex);
    }

    /// One line of the stream. An event is complete at a blank line (its
    /// fields may come in any order), and then dispatched.
    fn line(&mut self, line: &str, at_millis: f64, ex: &mut Exchange) {
        if line.is_empty() {
            self.dispatch(at_millis, ex);
            return;
        }
        if line.starts_with(':') {
            return;
        }
        if let Some(name) = line.strip_prefix("event:") {
            self.event = name.trim().to_string();
            return;
        }
        match line.strip_prefix("data:") {
            Some(data) => {
                if self.has_data {
                    self.data.push('\n');
                }
                self.data.push_str(data.strip_prefix(' ').unwrap_or(data));
                self.has_data = true;
            }
            // `id:` / `retry:` fields are legal SSE.
            None if line.starts_with("id:") || line.starts_with("retry:") => {}
            None => ex.malformed_lines.push(line.to_string()),
        }
    }

    fn dispatch(&mut self, at_millis: f64, ex: &mut Exchange) {
        let event = std::mem::take(&mut self.event);
        if !std::mem::take(&mut self.has_data) {
            return;
        }
        let data = self.data.as_str();
        if data == "[DONE]" {
            ex.done_marker = true;
        } else {
            if ex.done_marker {
                ex.malformed_lines.push(format!("after [DONE]: {data}"));
            }
            match serde_json::from_str(data) {
                Ok(v) => {
                    ex.chunks.push(v);
                    ex.events.push(event);
                    ex.chunk_millis.push(at_millis);
                }
                Err(_) => ex.malformed_lines.push(format!("data: {data}")),
            }
        }
        self.data.clear();
    }
}

fn millis_since(start: Instant) -> f64 {
    start.elapsed().as_secs_f64() * 1000.0
}

/// A transport error, a timeout named as the time limit it hit.
fn timeout_named(e: &reqwest::Error, what: &str) -> String {
    match e.is_timeout() {
        true => format!("{what} within the request time limit ({})", error_chain(e)),
        false => error_chain(e),
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn read_sse(text: &str, pieces: usize) -> Exchange {
        let mut ex = Exchange::default();
        ex.headers
            .insert("content-type".into(), "text/event-stream".into());
        let mut reader = BodyReader::new(&ex, Leave::Never);
        let bytes = text.as_bytes();
        let step = bytes.len().div_ceil(pieces);
        for chunk in bytes.chunks(step) {
            reader.feed(chunk, 0.0, &mut ex);
        }
        reader.finish(0.0, &mut ex);
        ex
    }

    #[test]
    fn sse_events_are_whole_at_the_blank_line_whatever_the_field_order() {
        let text = "data: {\"type\":\"a\"}\nevent: a\n\nevent: b\ndata: {\"type\":\"b\",\n";
        let text = format!("{text}data: \"x\":\"🎉\"}}\n\n: comment\ndata: [DONE]\n\n");
        // Split everywhere, even inside the emoji's bytes.
        for pieces in [1, 3, 7, text.len()] {
            let ex = read_sse(&text, pieces);
            assert_eq!(ex.events, ["a", "b"], "{pieces} pieces");
            assert_eq!(ex.chunks[1]["x"], "🎉");
            assert!(ex.done_marker && ex.malformed_lines.is_empty());
        }
    }
}
