//! A deliberately faulty OpenAI-style server: the real engine behind an
//! HTTP front that injects one of the bug classes of the shared seed
//! reports, chosen by the first path segment (`/{fault}/v1/...`).
//! `/clean/...` injects nothing; `/reasoning/...` simulates a reasoning
//! model correctly (the clean counterpart of `markers_in_content` and
//! `thinking_eats_max_tokens`). Two more break what clients send:
//! `ignored_logit_bias` drops `logit_bias`, and `cross_talk` answers a
//! request that arrives while another runs with the prompt of the one that
//! arrived before it (a shared buffer between requests).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use afm_engine::api::GRAMMAR_HEADER;
use afm_engine::api::{ApiContext, ApiResponse, Protocol};
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get, post};
use axum::{Json, Router};
use futures_util::StreamExt;
use serde_json::{json, Value};

/// Every fault and the clean modes.
pub const FAULTS: [&str; 11] = [
    "cache_miss_together",
    "empty_strict_together",
    "duplicated_stream_args",
    "string_numbers",
    "seed_batch_drift",
    "markers_in_content",
    "thinking_eats_max_tokens",
    "turn_end_runaway",
    "missing_logprobs",
    "ignored_logit_bias",
    "cross_talk",
];

/// The bug classes of AFM's own harness (`docs/afm-parity.md`): stops
/// matched only on whole words, fired by a word that only begins them,
/// trimmed (a newline stop lost), or an empty list read as an empty stop
/// that fires at once; `logprobs: false` answered with logprobs anyway;
/// sampling parameters dropped; every seed replaced by one; a stop that
/// turns off reasoning extraction (markers left in content).
/// Then: a cache that misses on prompts over 3,000 tokens (AFM #94) or
/// once the history holds an assistant turn; logprobs lost and text
/// garbled past 1,500 prompt tokens (a NaN in long attention); a chat
/// template that crashes on a nullable parameter once a call is in the
/// history (AFM #32).
/// And two of the Batch API, on the engine's own batch routes: an output
/// file that loses its last line, and duplicate custom_ids made unique
/// so the batch runs (a server that never checks them).
/// Last: a server that refuses `strict: false` tools; one that thinks only
/// when `enable_thinking` is given; one that loses the kwargs under a long
/// prompt (reasoning simulated as `reasoning` does); and a cache that
/// reports no hit at all.
pub const PARITY_FAULTS: [&str; 18] = [
    "stop_whole_words",
    "stop_partial_fires",
    "stops_trimmed",
    "stop_empty_at_once",
    "logprobs_always",
    "ignored_sampling",
    "fixed_seed",
    "stop_breaks_reasoning",
    "cache_miss_long",
    "cache_miss_with_history",
    "nan_long_prompt",
    "nullable_history_crash",
    "batch_drops_a_line",
    "batch_accepts_duplicates",
    "strict_false_refused",
    "thinking_needs_kwargs",
    "kwargs_lost_long_prompt",
    "zero_cached_tokens",
];

/// Faults that accept a feature and silently drop it: the capability
/// probes must see them as "accepted and ignored", so the cases run and
/// fail instead of skipping.
pub const SILENT_FAULTS: [&str; 3] = [
    "missing_logprobs",
    "zero_cached_tokens",
    "ignored_response_format",
];

struct Front {
    api: Arc<ApiContext>,
    /// The engine's own routes, for the Batch API's.
    routes: Router,
    in_flight: AtomicUsize,
    /// `cross_talk`: the body of the request that arrived last.
    last_body: std::sync::Mutex<Vec<u8>>,
}

/// The project's suites, as the tests run them.
pub fn suites() -> Vec<afm_harness::suite::Section> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../suites");
    afm_harness::suite::load_dir(&dir).unwrap()
}

/// The bundled model's engine as afm-test runs it (prefix cache, grammar,
/// 8 slots; `deterministic` for exact determinism cases) behind the
/// front; returns its base address.
pub async fn start_with_engine(deterministic: bool) -> String {
    let config = afm_engine::EngineConfig {
        prefix_caching: true,
        grammar_constraints: true,
        concurrent: 8,
        deterministic,
        ..Default::default()
    };
    let engine = afm_engine::Engine::start("smollm2", config).expect("run scripts/setup.sh first");
    start(Arc::new(ApiContext::new(engine, "smollm2"))).await
}

/// Serves on an ephemeral port; returns its base address.
pub async fn start(api: Arc<ApiContext>) -> String {
    let routes = afm_engine::api::router(api.clone(), &afm_engine::api::ServerConfig::default());
    let front = Arc::new(Front {
        routes,
        api,
        in_flight: AtomicUsize::new(0),
        last_body: std::sync::Mutex::new(Vec::new()),
    });
    let app = Router::new()
        .route("/{fault}/v1/models", get(models))
        .route("/{fault}/v1/chat/completions", post(chat))
        .route("/{fault}/v1/files", any(batch_api))
        .route("/{fault}/v1/files/{*rest}", any(batch_api))
        .route("/{fault}/v1/batches", any(batch_api))
        .route("/{fault}/v1/batches/{*rest}", any(batch_api))
        // The engine's gauges, so a disconnect is judged by them as on
        // afm-serve, not by the wait a server without them is given.
        .route("/{fault}/metrics", get(batch_api))
        .with_state(front);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        axum::serve(listener, app).await.unwrap();
    });
    format!("http://{addr}")
}

/// The Batch API (and `/metrics`) through the engine's routes, the fault
/// applied to what goes in (`batch_accepts_duplicates`) or comes out
/// (`batch_drops_a_line`).
async fn batch_api(State(front): State<Arc<Front>>, request: axum::extract::Request) -> Response {
    use tower::ServiceExt;
    let (mut parts, body) = request.into_parts();
    let path = parts.uri.path().to_string();
    let (fault, rest) = path[1..].split_once('/').unwrap_or(("clean", ""));
    let fault = fault.to_string();
    let query = parts.uri.query().map_or(String::new(), |q| format!("?{q}"));
    parts.uri = format!("/{rest}{query}").parse().expect("a path");
    let mut bytes = axum::body::to_bytes(body, usize::MAX)
        .await
        .unwrap_or_default();
    if fault == "batch_accepts_duplicates" && rest == "v1/files" {
        bytes = Bytes::from(unique_custom_ids(&String::from_utf8_lossy(&bytes)));
        parts.headers.remove("content-length");
    }
    // A fresh request: the front's own path parameters (in the
    // extensions) would confuse the engine's routes.
    let mut inner = axum::extract::Request::new(axum::body::Body::from(bytes));
    *inner.method_mut() = parts.method;
    *inner.uri_mut() = parts.uri;
    *inner.headers_mut() = parts.headers;
    let reply = front
        .routes
        .clone()
        .oneshot(inner)
        .await
        .expect("infallible");
    if fault == "batch_drops_a_line" && rest.ends_with("/content") {
        let (mut parts, body) = reply.into_parts();
        let text = axum::body::to_bytes(body, usize::MAX)
            .await
            .unwrap_or_default();
        let text = String::from_utf8_lossy(&text);
        let mut lines: Vec<&str> = text.lines().filter(|l| !l.is_empty()).collect();
        lines.pop();
        let kept: String = lines.iter().map(|l| format!("{l}\n")).collect();
        parts.headers.remove("content-length");
        return Response::from_parts(parts, axum::body::Body::from(kept));
    }
    reply
}

/// Every repeated `"custom_id":"X"` made `X-2`, `X-3`, ...
fn unique_custom_ids(text: &str) -> String {
    let mut seen: std::collections::HashMap<String, usize> = Default::default();
    // Split on LF alone: the multipart framing's CRLFs stay as they are.
    text.split('\n')
        .map(|line| match serde_json::from_str::<Value>(line) {
            Ok(mut v) if v["custom_id"].is_string() => {
                let id = v["custom_id"].as_str().unwrap_or_default().to_string();
                let n = seen.entry(id.clone()).or_default();
                *n += 1;
                if *n > 1 {
                    v["custom_id"] = json!(format!("{id}-{n}"));
                }
                v.to_string()
            }
            _ => line.to_string(),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

async fn models(State(front): State<Arc<Front>>) -> Json<Value> {
    Json(front.api.models())
}

async fn chat(State(front): State<Arc<Front>>, Path(fault): Path<String>, body: Bytes) -> Response {
    // Requests already running when this one arrived.
    let others = front.in_flight.fetch_add(1, Ordering::SeqCst);
    let body = match fault.as_str() {
        "cross_talk" => {
            let before = std::mem::replace(&mut *front.last_body.lock().unwrap(), body.to_vec());
            match others > 0 && !before.is_empty() {
                true => Bytes::from(before),
                false => body,
            }
        }
        _ => body,
    };
    let response = serve(&front, &fault, &body, others > 0).await;
    front.in_flight.fetch_sub(1, Ordering::SeqCst);
    response
}

async fn serve(front: &Front, fault: &str, body: &[u8], together: bool) -> Response {
    let request: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    // A server that treats response_format (or logit_bias) as a hint: the
    // engine never sees it. Stop faults match stops themselves, after.
    let stripped;
    let mut front_stops = None;
    let body = match (&request, fault) {
        (Value::Object(map), _) if rewrites_request(fault) => {
            let mut map = map.clone();
            match fault {
                "ignored_response_format" | "ignored_logit_bias" => {
                    map.remove(fault.strip_prefix("ignored_").expect("named so"));
                }
                "ignored_sampling" => {
                    for k in ["top_k", "top_p", "min_p", "repetition_penalty"] {
                        map.remove(k);
                    }
                }
                "fixed_seed" => {
                    map.insert("seed".into(), json!(0));
                }
                "logprobs_always" if map.get("logprobs") == Some(&json!(false)) => {
                    map.insert("logprobs".into(), json!(true));
                }
                _ => front_stops = map.remove("stop").map(|s| stop_list(&s)),
            }
            stripped = serde_json::to_vec(&map).expect("JSON");
            &stripped[..]
        }
        _ => body,
    };
    let strict_false = request["tools"]
        .as_array()
        .is_some_and(|t| t.iter().any(|t| t["function"]["strict"] == false));
    if fault == "strict_false_refused" && strict_false {
        let error = json!({"error": {"message": "tools[0].function.strict must be true", "type": "invalid_request_error", "param": "tools", "code": null}});
        return (StatusCode::BAD_REQUEST, Json(error)).into_response();
    }
    if fault == "nullable_history_crash" && nullable_in_history(&request) {
        let error = json!({"error": {"message": "Error rendering prompt with jinja template: \"Cannot apply filter \"tojson\" to type: UndefinedValue\" (in chat: 42)", "type": "server_error", "code": 500}});
        return (StatusCode::INTERNAL_SERVER_ERROR, Json(error)).into_response();
    }
    let (streamed, mut chunks, mut whole, grammar) = match front.api.chat_completions(body).await {
        Err(e) => {
            let status = StatusCode::from_u16(e.status).unwrap_or(StatusCode::BAD_REQUEST);
            return (status, Json(e.body(Protocol::OpenAi))).into_response();
        }
        Ok(ApiResponse::Complete { body, grammar }) => (false, Vec::new(), body, grammar),
        Ok(ApiResponse::Stream { events, grammar }) => {
            let events: Vec<_> = events.collect().await;
            let all = events
                .iter()
                .filter(|e| e.data != "[DONE]")
                .map(|e| serde_json::from_str(&e.data).expect("JSON chunks"))
                .collect();
            (true, all, Value::Null, grammar)
        }
    };
    let ctx = Ctx {
        request: &request,
        together,
    };
    if streamed {
        inject_stream(fault, &ctx, &mut chunks);
    } else {
        inject_whole(fault, &ctx, &mut whole);
    }
    if let Some(stops) = front_stops {
        apply_faulty_stops(fault, &stops, streamed, &mut chunks, &mut whole);
    }
    let mut response = if streamed {
        let mut text = String::new();
        for c in &chunks {
            text.push_str(&format!("data: {c}\n\n"));
        }
        text.push_str("data: [DONE]\n\n");
        ([("content-type", "text/event-stream")], text).into_response()
    } else {
        Json(whole).into_response()
    };
    if grammar != afm_engine::runtime::GrammarMode::None {
        response
            .headers_mut()
            .insert(GRAMMAR_HEADER, HeaderValue::from_static(grammar.as_str()));
    }
    response
}

/// A tool message in the history and a tool with an `anyOf` parameter.
fn nullable_in_history(request: &Value) -> bool {
    let tool_turn = request["messages"]
        .as_array()
        .is_some_and(|m| m.iter().any(|m| m["role"] == "tool"));
    let nullable = request["tools"].as_array().is_some_and(|tools| {
        tools.iter().any(|t| {
            t["function"]["parameters"]["properties"]
                .as_object()
                .is_some_and(|p| p.values().any(|v| v.get("anyOf").is_some()))
        })
    });
    tool_turn && nullable
}

fn rewrites_request(fault: &str) -> bool {
    matches!(
        fault,
        "ignored_response_format"
            | "ignored_logit_bias"
            | "ignored_sampling"
            | "fixed_seed"
            | "logprobs_always"
            | "stop_whole_words"
            | "stop_partial_fires"
            | "stops_trimmed"
            | "stop_empty_at_once"
    )
}

fn stop_list(v: &Value) -> Vec<String> {
    match v {
        Value::String(s) => vec![s.clone()],
        Value::Array(items) => items
            .iter()
            .filter_map(|s| s.as_str().map(str::to_string))
            .collect(),
        _ => Vec::new(),
    }
}

/// Where a stop fault's matcher ends `text`, if it does.
fn faulty_cut(fault: &str, stops: &[String], text: &str) -> Option<usize> {
    let earliest = |stops: &[String]| {
        stops
            .iter()
            .filter(|s| !s.is_empty())
            .filter_map(|s| text.find(s.as_str()))
            .min()
    };
    let word_char = |c: Option<char>| c.is_some_and(char::is_alphanumeric);
    match fault {
        // Only where the stop stands as a word of its own.
        "stop_whole_words" => stops
            .iter()
            .filter(|s| !s.is_empty())
            .flat_map(|s| text.match_indices(s.as_str()).map(|(at, m)| (at, m.len())))
            .filter(|&(at, len)| {
                !word_char(text[..at].chars().last()) && !word_char(text[at + len..].chars().next())
            })
            .map(|(at, _)| at)
            .min(),
        // All but the stop's last character is taken as the stop.
        "stop_partial_fires" => {
            let shortened: Vec<String> = stops
                .iter()
                .map(|s| match s.char_indices().last() {
                    Some((at, _)) if at > 0 => s[..at].to_string(),
                    _ => s.clone(),
                })
                .collect();
            earliest(&shortened)
        }
        "stops_trimmed" => {
            let trimmed: Vec<String> = stops.iter().map(|s| s.trim().to_string()).collect();
            earliest(&trimmed)
        }
        // `text.find("")` of an empty list read as one empty stop.
        "stop_empty_at_once" if stops.is_empty() => Some(0),
        _ => earliest(stops),
    }
}

/// Cuts the content where the fault's matcher ends it.
fn apply_faulty_stops(
    fault: &str,
    stops: &[String],
    streamed: bool,
    chunks: &mut [Value],
    whole: &mut Value,
) {
    if !streamed {
        let text = whole["choices"][0]["message"]["content"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        if let Some(at) = faulty_cut(fault, stops, &text) {
            whole["choices"][0]["message"]["content"] = json!(text[..at]);
            whole["choices"][0]["finish_reason"] = json!("stop");
        }
        return;
    }
    let text: String = chunks
        .iter()
        .filter_map(|c| {
            c.pointer("/choices/0/delta/content")
                .and_then(Value::as_str)
        })
        .collect();
    let Some(at) = faulty_cut(fault, stops, &text) else {
        return;
    };
    let mut seen = 0;
    for c in chunks.iter_mut() {
        if let Some(d) = c.pointer_mut("/choices/0/delta/content") {
            let piece = d.as_str().unwrap_or_default().to_string();
            let keep = at.saturating_sub(seen).min(piece.len());
            seen += piece.len();
            *d = json!(piece[..keep]);
        }
        if let Some(f) = c.pointer_mut("/choices/0/finish_reason") {
            if !f.is_null() {
                *f = json!("stop");
            }
        }
    }
}

struct Ctx<'a> {
    request: &'a Value,
    together: bool,
}

impl Ctx<'_> {
    fn strict_schema(&self) -> bool {
        self.request.pointer("/response_format/type") == Some(&json!("json_schema"))
    }

    fn sampled(&self) -> bool {
        self.request["temperature"].as_f64().unwrap_or(1.0) > 0.0
    }

    /// `stop_breaks_reasoning`: a request with a stop is served with its
    /// reasoning left in content, markers and all.
    fn stop_breaks(&self, fault: &str) -> bool {
        fault == "stop_breaks_reasoning" && self.request.get("stop").is_some()
    }

    fn prompt_over(&self, usage: &Value, tokens: u64) -> bool {
        usage["prompt_tokens"].as_u64().is_some_and(|p| p > tokens)
    }

    fn has_history(&self) -> bool {
        self.request["messages"]
            .as_array()
            .is_some_and(|m| m.iter().any(|m| m["role"] == "assistant"))
    }

    /// Whether the simulated thinking model reasons: unless the request
    /// turns it off; `thinking_needs_kwargs` only when it turns it on;
    /// `kwargs_lost_long_prompt` also when off, past 1,500 prompt tokens.
    fn thinks(&self, fault: &str, usage: &Value) -> bool {
        match fault {
            "thinking_needs_kwargs" => {
                self.request
                    .pointer("/chat_template_kwargs/enable_thinking")
                    == Some(&json!(true))
            }
            "kwargs_lost_long_prompt" => !self.thinking_off() || self.prompt_over(usage, 1500),
            _ => !self.thinking_off(),
        }
    }

    fn thinking_off(&self) -> bool {
        self.request
            .pointer("/chat_template_kwargs/enable_thinking")
            == Some(&json!(false))
    }

    /// Seed 002's server: thinking counted against `max_tokens` with no
    /// share kept for the answer, and `thinking_budget` ignored. Its
    /// model thinks for LONG_THOUGHT_TOKENS, so a smaller `max_tokens`
    /// ends inside the reasoning: no content, finish "length".
    fn thought_ate_the_answer(&self) -> bool {
        !self.thinking_off()
            && self.request["max_tokens"]
                .as_u64()
                .is_some_and(|m| m < LONG_THOUGHT_TOKENS)
    }
}

/// The length of the thought of `thinking_eats_max_tokens`' model.
const LONG_THOUGHT_TOKENS: u64 = 100;

const THOUGHT: &str = "I should answer briefly.";
const RUNAWAY: &str = "<|im_end|>\n<|im_start|>user\nAnd then";

fn inject_whole(fault: &str, ctx: &Ctx, body: &mut Value) {
    let usage = body["usage"].clone();
    let choice = &mut body["choices"][0];
    let message = &mut choice["message"];
    match fault {
        "cache_miss_together" if ctx.together => {
            body["usage"]["prompt_tokens_details"]["cached_tokens"] = json!(0)
        }
        "empty_strict_together" if ctx.together && ctx.strict_schema() => {
            message["content"] = json!("")
        }
        "string_numbers" => {
            // get_mut, not indexing: indexing a message without calls would
            // add "tool_calls": null, a deviation of its own.
            let calls = message.get_mut("tool_calls").and_then(Value::as_array_mut);
            for call in calls.into_iter().flatten() {
                stringify_arguments(&mut call["function"]["arguments"]);
            }
        }
        "seed_batch_drift" if ctx.together && ctx.sampled() => {
            let drifted = format!(
                "{} Indeed.",
                message["content"].as_str().unwrap_or_default()
            );
            message["content"] = json!(drifted);
        }
        "reasoning"
        | "stop_breaks_reasoning"
        | "thinking_needs_kwargs"
        | "kwargs_lost_long_prompt"
            if ctx.thinks(fault, &usage) && !ctx.stop_breaks(fault) =>
        {
            message["reasoning_content"] = json!(THOUGHT);
            body["usage"]["completion_tokens_details"] = json!({"reasoning_tokens": 5});
        }
        "thinking_eats_max_tokens" if !ctx.thinking_off() => {
            message["reasoning_content"] = json!(THOUGHT.repeat(20));
            let ate = ctx.thought_ate_the_answer();
            if ate {
                message["content"] = json!("");
                choice["finish_reason"] = json!("length");
            }
            let max = ctx.request["max_tokens"].clone();
            let usage = &mut body["usage"];
            let reasoning = if ate {
                max.clone()
            } else {
                json!(LONG_THOUGHT_TOKENS)
            };
            if ate {
                usage["completion_tokens"] = max;
            }
            usage["completion_tokens_details"] = json!({"reasoning_tokens": reasoning});
        }
        "markers_in_content" | "stop_breaks_reasoning"
            if fault == "markers_in_content" || ctx.stop_breaks(fault) =>
        {
            let leaked = format!(
                "<think>{THOUGHT}</think>\n{}",
                message["content"].as_str().unwrap_or_default()
            );
            message["content"] = json!(leaked);
            if !ctx.thinking_off() {
                body["usage"]["completion_tokens_details"] = json!({"reasoning_tokens": 5});
            }
        }
        "turn_end_runaway" if choice["finish_reason"] == "stop" => {
            let message = &mut choice["message"];
            let ran_on = format!(
                "{}{RUNAWAY}",
                message["content"].as_str().unwrap_or_default()
            );
            message["content"] = json!(ran_on);
            choice["finish_reason"] = json!("length");
        }
        "cache_miss_long" if ctx.prompt_over(&usage, 3000) => {
            body["usage"]["prompt_tokens_details"]["cached_tokens"] = json!(0)
        }
        "cache_miss_with_history" if ctx.has_history() => {
            body["usage"]["prompt_tokens_details"]["cached_tokens"] = json!(0)
        }
        "nan_long_prompt" if ctx.prompt_over(&usage, 1500) => {
            let choice = &mut body["choices"][0];
            choice["message"]["content"] = json!("!!!!!!!!");
            for t in choice["logprobs"]["content"]
                .as_array_mut()
                .into_iter()
                .flatten()
            {
                t["logprob"] = Value::Null;
            }
        }
        "missing_logprobs" => choice["logprobs"] = Value::Null,
        "zero_cached_tokens" => body["usage"]["prompt_tokens_details"]["cached_tokens"] = json!(0),
        _ => {}
    }
}

fn inject_stream(fault: &str, ctx: &Ctx, chunks: &mut Vec<Value>) {
    let delta_chunk = |like: &Value, delta: Value| {
        let mut c = like.clone();
        c["choices"] =
            json!([{"index": 0, "delta": delta, "logprobs": null, "finish_reason": null}]);
        c.as_object_mut().map(|m| m.remove("usage"));
        c
    };
    match fault {
        "zero_cached_tokens" => {
            for c in chunks.iter_mut().filter(|c| c["usage"].is_object()) {
                c["usage"]["prompt_tokens_details"]["cached_tokens"] = json!(0);
            }
        }
        "cache_miss_together" if ctx.together => {
            for c in chunks.iter_mut().filter(|c| c["usage"].is_object()) {
                c["usage"]["prompt_tokens_details"]["cached_tokens"] = json!(0);
            }
        }
        "empty_strict_together" if ctx.together && ctx.strict_schema() => {
            for c in chunks.iter_mut() {
                if let Some(d) = c.pointer_mut("/choices/0/delta/content") {
                    *d = json!("");
                }
            }
        }
        "duplicated_stream_args" => {
            // After a call's last fragment, its arguments again: `{..}{..}`.
            let whole = streamed_calls(chunks);
            let mut inserts: Vec<(usize, Value)> = whole
                .iter()
                .map(|(index, args, at)| {
                    let at = *at;
                    let piece =
                        json!({"tool_calls": [{"index": index, "function": {"arguments": args}}]});
                    (at + 1, delta_chunk(&chunks[at], piece))
                })
                .collect();
            inserts.sort_by_key(|(at, _)| std::cmp::Reverse(*at));
            for (at, c) in inserts {
                chunks.insert(at, c);
            }
        }
        "string_numbers" => {
            // Streamed fragments are rewritten as one: the whole object with
            // its numbers and booleans quoted.
            let calls = streamed_calls(chunks);
            chunks.retain(|c| {
                c.pointer("/choices/0/delta/tool_calls")
                    .and_then(Value::as_array)
                    .is_none_or(|p| p.iter().any(|p| p.get("id").is_some()))
            });
            for (index, args, _) in calls.iter().rev() {
                let mut v = json!(args);
                stringify_arguments(&mut v);
                let at = chunks
                    .iter()
                    .position(|c| {
                        c.pointer("/choices/0/delta/tool_calls/0/index") == Some(&json!(index))
                    })
                    .map_or(1, |p| p + 1);
                let piece = json!({"tool_calls": [{"index": index, "function": {"arguments": v}}]});
                let c = delta_chunk(&chunks[0], piece);
                chunks.insert(at, c);
            }
        }
        "seed_batch_drift" if ctx.together && ctx.sampled() => {
            let at = finish_chunk(chunks);
            let c = delta_chunk(&chunks[0], json!({"content": " Indeed."}));
            chunks.insert(at, c);
        }
        "reasoning"
        | "stop_breaks_reasoning"
        | "thinking_needs_kwargs"
        | "kwargs_lost_long_prompt"
            if ctx.thinks(fault, &stream_usage(chunks)) && !ctx.stop_breaks(fault) =>
        {
            let c = delta_chunk(&chunks[0], json!({"reasoning_content": THOUGHT}));
            chunks.insert(1, c);
            set_reasoning_usage(chunks);
        }
        "thinking_eats_max_tokens" if !ctx.thinking_off() => {
            let ate = ctx.thought_ate_the_answer();
            if ate {
                for c in chunks.iter_mut() {
                    if let Some(d) = c.pointer_mut("/choices/0/delta/content") {
                        *d = json!("");
                    }
                }
                let at = finish_chunk(chunks);
                if at < chunks.len() {
                    chunks[at]["choices"][0]["finish_reason"] = json!("length");
                }
            }
            let c = delta_chunk(&chunks[0], json!({"reasoning_content": THOUGHT.repeat(20)}));
            chunks.insert(1, c);
            let max = ctx.request["max_tokens"].clone();
            for c in chunks.iter_mut().filter(|c| c["usage"].is_object()) {
                let reasoning = if ate {
                    max.clone()
                } else {
                    json!(LONG_THOUGHT_TOKENS)
                };
                if ate {
                    c["usage"]["completion_tokens"] = max.clone();
                }
                c["usage"]["completion_tokens_details"] = json!({"reasoning_tokens": reasoning});
            }
        }
        "markers_in_content" | "stop_breaks_reasoning"
            if fault == "markers_in_content" || ctx.stop_breaks(fault) =>
        {
            let c = delta_chunk(
                &chunks[0],
                json!({"content": format!("<think>{THOUGHT}</think>\n")}),
            );
            chunks.insert(1, c);
            if !ctx.thinking_off() {
                set_reasoning_usage(chunks);
            }
        }
        "turn_end_runaway" => {
            let at = finish_chunk(chunks);
            if chunks[at].pointer("/choices/0/finish_reason") == Some(&json!("stop")) {
                chunks[at]["choices"][0]["finish_reason"] = json!("length");
                let c = delta_chunk(&chunks[0], json!({"content": RUNAWAY}));
                chunks.insert(at, c);
            }
        }
        "cache_miss_long" | "cache_miss_with_history" | "nan_long_prompt" => {
            let usage = chunks
                .iter()
                .find(|c| c["usage"].is_object())
                .map(|c| c["usage"].clone())
                .unwrap_or(Value::Null);
            let hit = match fault {
                "cache_miss_long" => ctx.prompt_over(&usage, 3000),
                "cache_miss_with_history" => ctx.has_history(),
                _ => ctx.prompt_over(&usage, 1500),
            };
            for c in chunks.iter_mut().filter(|_| hit) {
                if fault != "nan_long_prompt" {
                    if c["usage"].is_object() {
                        c["usage"]["prompt_tokens_details"]["cached_tokens"] = json!(0);
                    }
                    continue;
                }
                if let Some(d) = c.pointer_mut("/choices/0/delta/content") {
                    *d = json!("!");
                }
                for t in c
                    .pointer_mut("/choices/0/logprobs/content")
                    .and_then(Value::as_array_mut)
                    .into_iter()
                    .flatten()
                {
                    t["logprob"] = Value::Null;
                }
            }
        }
        "missing_logprobs" => {
            for c in chunks.iter_mut() {
                if let Some(lp) = c.pointer_mut("/choices/0/logprobs") {
                    *lp = Value::Null;
                }
            }
        }
        _ => {}
    }
}

/// The usage a stream's last chunk carries (Null without one).
fn stream_usage(chunks: &[Value]) -> Value {
    chunks
        .iter()
        .find(|c| c["usage"].is_object())
        .map_or(Value::Null, |c| c["usage"].clone())
}

fn finish_chunk(chunks: &[Value]) -> usize {
    chunks
        .iter()
        .position(|c| {
            c.pointer("/choices/0/finish_reason")
                .is_some_and(|f| !f.is_null())
        })
        .unwrap_or(chunks.len())
}

fn set_reasoning_usage(chunks: &mut [Value]) {
    for c in chunks.iter_mut().filter(|c| c["usage"].is_object()) {
        c["usage"]["completion_tokens_details"] = json!({"reasoning_tokens": 5});
    }
}

/// `{"n": 3, "ok": true}` -> `{"n": "3", "ok": "True"}` (seed 000's drift).
fn stringify_arguments(arguments: &mut Value) {
    let Some(text) = arguments.as_str() else {
        return;
    };
    let Ok(Value::Object(mut map)) = serde_json::from_str::<Value>(text) else {
        return;
    };
    for v in map.values_mut() {
        match v {
            Value::Number(n) => *v = json!(n.to_string()),
            Value::Bool(b) => *v = json!(if *b { "True" } else { "False" }),
            _ => {}
        }
    }
    *arguments = json!(Value::Object(map).to_string());
}

/// Each streamed tool call's index, its arguments joined from the
/// fragments, and the chunk that carried its last fragment.
fn streamed_calls(chunks: &[Value]) -> Vec<(u64, String, usize)> {
    let mut calls: Vec<(u64, String, usize)> = Vec::new();
    for (i, c) in chunks.iter().enumerate() {
        for p in c
            .pointer("/choices/0/delta/tool_calls")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let index = p["index"].as_u64().unwrap_or(0);
            let frag = p["function"]["arguments"].as_str().unwrap_or_default();
            match calls.iter_mut().find(|(k, _, _)| *k == index) {
                Some((_, s, last)) => {
                    s.push_str(frag);
                    *last = i;
                }
                None => calls.push((index, frag.to_string(), i)),
            }
        }
    }
    calls
}
