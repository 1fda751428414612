//! afm-serve's HTTP front: axum routes over the protocols of `api`.
//!
//! Everything protocol-specific (validation, reply and event shapes) lives
//! in `api::openai`, `api::anthropic` and `api::responses`; this module
//! only maps it to HTTP: status codes, error bodies by the path's protocol,
//! SSE framing, CORS, body limits and read time, the queue's bound, the
//! optional key (`Authorization: Bearer` or Anthropic's `x-api-key`).
//! Connections (their cap, header timeouts, graceful shutdown) are
//! `listener`'s; the Batch API's routes (`/v1/files`, `/v1/batches`) are
//! `batch`'s, merged here under the same key, CORS and error counting.

use std::convert::Infallible;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, FromRequest, Path, Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::{self, Next};
use axum::response::sse::{Event, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use futures_util::StreamExt;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tower_http::cors::CorsLayer;

use crate::api::batch::{self, BatchConfig};
use crate::api::context::{ApiContext, ApiResponse};
use crate::api::error::{ApiError, Protocol};
use crate::api::listener::{serve_connections, ConnectionLimits};
use crate::api::metrics::{self, RejectedRequests};
use crate::runtime::GrammarMode;

/// Header telling clients whether a requested constraint was enforced.
pub const GRAMMAR_HEADER: &str = "x-grammar-constraints";

#[derive(Debug, Clone)]
pub struct ServerConfig {
    pub host: String,
    pub port: u16,
    /// Required as `Authorization: Bearer <key>` on `/v1/*` when set.
    pub api_key: Option<String>,
    /// Larger request bodies get 413.
    pub max_body_bytes: usize,
    /// Generation requests that may wait for a decode slot; past
    /// `concurrent + max_queue` in the engine, a request gets 503.
    pub max_queue: usize,
    /// Connections open at once and the time to send a request.
    pub limits: ConnectionLimits,
    /// The Batch API's file store and engine lanes.
    pub batch: BatchConfig,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            host: "127.0.0.1".into(),
            port: 9999,
            api_key: None,
            max_body_bytes: 4 << 20,
            max_queue: 256,
            limits: ConnectionLimits::default(),
            batch: BatchConfig::default(),
        }
    }
}

#[derive(Clone)]
struct AppState {
    api: Arc<ApiContext>,
    rejected: Arc<AtomicU64>,
    api_key: Option<Arc<str>>,
    /// One permit per generation request in the engine (running or
    /// waiting); none left means the queue is full.
    in_engine: Arc<Semaphore>,
    max_queue: usize,
    read_timeout: Option<Duration>,
}

/// Binds and serves until `shutdown` resolves; in-flight requests (streams
/// included) are allowed to finish before it returns.
pub async fn serve(
    api: Arc<ApiContext>,
    config: ServerConfig,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let listener = tokio::net::TcpListener::bind((config.host.as_str(), config.port)).await?;
    serve_on(listener, api, config, shutdown).await
}

/// [`serve`] on a listener already bound (tests bind port 0).
pub async fn serve_on(
    listener: tokio::net::TcpListener,
    api: Arc<ApiContext>,
    config: ServerConfig,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    tracing::info!(
        "serving {} on http://{}",
        api.model_ids[0],
        listener.local_addr()?
    );
    let app = router(api, &config);
    serve_connections(listener, app, config.limits, shutdown).await
}

/// The application's routes (also usable without a socket, in tests).
pub fn router(api: Arc<ApiContext>, config: &ServerConfig) -> Router {
    let slots = api.engine.config().concurrent.max(1) + config.max_queue;
    let rejected = Arc::new(AtomicU64::new(0));
    let batch = batch::router(
        api.clone(),
        &config.batch,
        rejected.clone(),
        config.limits.read_timeout,
    );
    let state = AppState {
        api,
        rejected,
        api_key: config.api_key.as_deref().map(Arc::from),
        in_engine: Arc::new(Semaphore::new(slots)),
        max_queue: config.max_queue,
        read_timeout: config.limits.read_timeout,
    };
    Router::new()
        .route("/health", get(health))
        .route("/metrics", get(metrics_text))
        .route("/v1/models", get(models))
        // Model ids may hold slashes (HF repo ids, folders).
        .route("/v1/models/{*id}", get(model))
        .route("/v1/chat/completions", post(chat_completions))
        .route("/v1/completions", post(completions))
        .route("/v1/messages", post(messages))
        .route("/v1/messages/count_tokens", post(count_tokens))
        .route("/v1/responses", post(responses))
        .merge(batch)
        .fallback(not_found)
        .layer(middleware::from_fn_with_state(state.clone(), require_key))
        .layer(DefaultBodyLimit::max(config.max_body_bytes))
        .layer(CorsLayer::permissive())
        .with_state(state)
}

async fn health() -> Json<serde_json::Value> {
    Json(serde_json::json!({"status": "ok"}))
}

async fn metrics_text(State(state): State<AppState>) -> Response {
    let rejected = RejectedRequests {
        client_errors: state.rejected.load(Ordering::Relaxed),
    };
    let body = metrics::render(&state.api.engine.stats(), rejected);
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], body).into_response()
}

async fn models(State(state): State<AppState>) -> Json<serde_json::Value> {
    Json(state.api.models())
}

async fn model(State(state): State<AppState>, Path(id): Path<String>) -> Response {
    match state.api.retrieve_model(&id) {
        Ok(m) => Json(m).into_response(),
        Err(e) => error_response(&state, e, Protocol::OpenAi),
    }
}

async fn not_found(State(state): State<AppState>, request: Request) -> Response {
    let e = ApiError::new(
        404,
        "invalid_request_error",
        format!("no route for {} {}", request.method(), request.uri().path()),
    );
    error_response(&state, e, protocol_of(request.uri().path()))
}

/// Anthropic's paths answer errors in its shape; the rest in OpenAI's.
fn protocol_of(path: &str) -> Protocol {
    if path.starts_with("/v1/messages") {
        Protocol::Anthropic
    } else {
        Protocol::OpenAi
    }
}

async fn chat_completions(State(state): State<AppState>, request: Request) -> Response {
    generate(&state, request, Endpoint::Chat).await
}

async fn completions(State(state): State<AppState>, request: Request) -> Response {
    generate(&state, request, Endpoint::Completions).await
}

async fn messages(State(state): State<AppState>, request: Request) -> Response {
    generate(&state, request, Endpoint::Messages).await
}

async fn count_tokens(State(state): State<AppState>, request: Request) -> Response {
    generate(&state, request, Endpoint::CountTokens).await
}

async fn responses(State(state): State<AppState>, request: Request) -> Response {
    generate(&state, request, Endpoint::Responses).await
}

#[derive(Clone, Copy)]
enum Endpoint {
    Chat,
    Completions,
    Messages,
    CountTokens,
    Responses,
}

impl Endpoint {
    fn protocol(self) -> Protocol {
        match self {
            Endpoint::Messages | Endpoint::CountTokens => Protocol::Anthropic,
            _ => Protocol::OpenAi,
        }
    }
}

async fn generate(state: &AppState, request: Request, endpoint: Endpoint) -> Response {
    let protocol = endpoint.protocol();
    let body = match read_body(state, request).await {
        Ok(b) => b,
        Err(e) => return error_response(state, e, protocol),
    };
    // Counting tokens never reaches the engine's queue.
    let permit = match endpoint {
        Endpoint::CountTokens => None,
        _ => match state.in_engine.clone().try_acquire_owned() {
            Ok(p) => Some(p),
            Err(_) => return busy(state, protocol),
        },
    };
    let result = match endpoint {
        Endpoint::Chat => state.api.chat_completions(&body).await,
        Endpoint::Completions => state.api.completions(&body).await,
        Endpoint::Messages => state.api.messages(&body).await,
        Endpoint::CountTokens => state.api.count_tokens(&body).await,
        Endpoint::Responses => state.api.responses(&body).await,
    };
    respond(state, result, protocol, permit)
}

/// The body, read within the read timeout and the size limit: a client
/// that sends it slowly gets 408 instead of holding its handler forever.
async fn read_body(state: &AppState, request: Request) -> Result<Bytes, ApiError> {
    let read = Bytes::from_request(request, &());
    let read = match state.read_timeout {
        Some(limit) => tokio::time::timeout(limit, read)
            .await
            .map_err(|_| ApiError::body_too_slow(limit))?,
        None => read.await,
    };
    read.map_err(|rejection| {
        let status = rejection.status();
        let message = if status == StatusCode::PAYLOAD_TOO_LARGE {
            "request body too large (--max-body-mb)".to_string()
        } else {
            rejection.body_text()
        };
        ApiError::new(status.as_u16(), "invalid_request_error", message)
    })
}

/// The queue is full: 503 with `Retry-After`, which the official SDKs
/// honour when they retry.
fn busy(state: &AppState, protocol: Protocol) -> Response {
    let e = ApiError {
        code: Some("server_busy".into()),
        ..ApiError::new(
            503,
            "server_error",
            format!(
                "the server is busy: every decode slot is taken and {} requests are waiting (--max-queue); retry",
                state.max_queue
            ),
        )
    };
    let mut response = error_response(state, e, protocol);
    response
        .headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    response
}

/// The reply; `permit` (the request's place in the engine) is held until
/// a stream's last event is sent or the client drops it.
fn respond(
    state: &AppState,
    result: Result<ApiResponse, ApiError>,
    protocol: Protocol,
    permit: Option<OwnedSemaphorePermit>,
) -> Response {
    match result {
        Err(e) => error_response(state, e, protocol),
        Ok(ApiResponse::Complete { body, grammar }) => {
            with_grammar(Json(body).into_response(), grammar)
        }
        Ok(ApiResponse::Stream { events, grammar }) => {
            let frames = events.map(move |e| {
                let _held = &permit;
                let frame = match e.event {
                    Some(name) => Event::default().event(name),
                    None => Event::default(),
                };
                Ok::<_, Infallible>(frame.data(e.data))
            });
            with_grammar(Sse::new(frames).into_response(), grammar)
        }
    }
}

fn with_grammar(mut response: Response, grammar: GrammarMode) -> Response {
    if grammar != GrammarMode::None {
        response
            .headers_mut()
            .insert(GRAMMAR_HEADER, HeaderValue::from_static(grammar.as_str()));
    }
    response
}

fn error_response(state: &AppState, e: ApiError, protocol: Protocol) -> Response {
    if (400..500).contains(&e.status) {
        state.rejected.fetch_add(1, Ordering::Relaxed);
    }
    let status = StatusCode::from_u16(e.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (status, Json(e.body(protocol))).into_response()
}

/// Checks the key on `/v1/*` when one is configured: OpenAI clients send
/// it as a bearer token, Anthropic's as `x-api-key`.
async fn require_key(State(state): State<AppState>, request: Request, next: Next) -> Response {
    if let Some(key) = &state.api_key {
        if request.uri().path().starts_with("/v1/")
            && request.method() != axum::http::Method::OPTIONS
        {
            let headers = request.headers();
            let bearer = headers
                .get(header::AUTHORIZATION)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.strip_prefix("Bearer "));
            let x_api_key = headers.get("x-api-key").and_then(|v| v.to_str().ok());
            if bearer != Some(key.as_ref()) && x_api_key != Some(key.as_ref()) {
                let e = ApiError {
                    code: Some("invalid_api_key".into()),
                    ..ApiError::new(401, "authentication_error", "invalid or missing API key")
                };
                return error_response(&state, e, protocol_of(request.uri().path()));
            }
        }
    }
    next.run(request).await
}

/// Resolves on SIGINT or SIGTERM.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {},
        _ = term => {},
    }
    tracing::info!("shutting down: finishing in-flight requests");
}
