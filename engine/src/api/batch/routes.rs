//! `/v1/files` and `/v1/batches` over axum, in OpenAI's shapes as
//! openai-python's `client.files` and `client.batches` call them. Errors
//! are OpenAI's bodies, counted with the server's other client errors.

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::multipart::{Multipart, MultipartError, MultipartRejection};
use axum::extract::rejection::QueryRejection;
use axum::extract::{DefaultBodyLimit, FromRequest, Path, Query, Request, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::Value;

use crate::api::batch::files::{FileListQuery, BATCH};
use crate::api::batch::jobs::{BatchListQuery, Batches};
use crate::api::batch::BatchConfig;
use crate::api::context::ApiContext;
use crate::api::error::{ApiError, Protocol};

/// Room for a multipart upload's boundaries and part headers beyond the
/// file itself.
const MULTIPART_OVERHEAD: usize = 64 << 10;

#[derive(Clone)]
struct BatchState {
    batches: Arc<Batches>,
    /// The server's count of client errors (`/metrics`).
    rejected: Arc<AtomicU64>,
    /// `--read-timeout`: an upload must arrive within it.
    read_timeout: Option<Duration>,
}

/// The Batch API's routes, for the server's router to merge. Uploads may
/// be as large as the store (not `--max-body-mb`, which bounds bodies held
/// whole): an upload is counted against the store as it arrives.
pub fn router<S: Clone + Send + Sync + 'static>(
    api: Arc<ApiContext>,
    config: &BatchConfig,
    rejected: Arc<AtomicU64>,
    read_timeout: Option<Duration>,
) -> Router<S> {
    let state = BatchState {
        batches: Arc::new(Batches::new(api, config)),
        rejected,
        read_timeout,
    };
    let upload_limit = config.store_bytes.saturating_add(MULTIPART_OVERHEAD);
    Router::new()
        .route(
            "/v1/files",
            get(list_files)
                .post(upload)
                .layer(DefaultBodyLimit::max(upload_limit)),
        )
        .route("/v1/files/{id}", get(file).delete(delete_file))
        .route("/v1/files/{id}/content", get(file_content))
        .route("/v1/batches", get(list_batches).post(create_batch))
        .route("/v1/batches/{id}", get(batch))
        .route("/v1/batches/{id}/cancel", post(cancel_batch))
        .with_state(state)
}

impl BatchState {
    fn reply(&self, result: Result<Value, ApiError>) -> Response {
        match result {
            Ok(v) => Json(v).into_response(),
            Err(e) => self.error(e),
        }
    }

    fn error(&self, e: ApiError) -> Response {
        if (400..500).contains(&e.status) {
            self.rejected.fetch_add(1, Ordering::Relaxed);
        }
        let status = StatusCode::from_u16(e.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        (status, Json(e.body(Protocol::OpenAi))).into_response()
    }

    /// `read` within `--read-timeout` (408 past it).
    async fn in_time<T>(
        &self,
        read: impl Future<Output = Result<T, ApiError>>,
    ) -> Result<T, ApiError> {
        match self.read_timeout {
            Some(limit) => tokio::time::timeout(limit, read)
                .await
                .map_err(|_| ApiError::body_too_slow(limit))?,
            None => read.await,
        }
    }
}

/// `POST /v1/files`: multipart `file` and `purpose` (`batch`).
async fn upload(
    State(state): State<BatchState>,
    multipart: Result<Multipart, MultipartRejection>,
) -> Response {
    let result = match multipart {
        Ok(m) => state.in_time(read_upload(&state, m)).await,
        Err(rejection) => Err(ApiError::new(
            rejection.status().as_u16(),
            "invalid_request_error",
            rejection.body_text(),
        )),
    };
    state.reply(result.and_then(|(filename, purpose, content)| {
        let file = state.batches.files().insert(&filename, &purpose, content)?;
        Ok(file.object())
    }))
}

/// The upload's filename, purpose and content. The file is refused (413)
/// as soon as it passes the store's room, before the rest is read.
async fn read_upload(
    state: &BatchState,
    mut multipart: Multipart,
) -> Result<(String, String, Bytes), ApiError> {
    let (mut file, mut purpose) = (None, None);
    while let Some(mut field) = multipart.next_field().await.map_err(multipart_error)? {
        match field.name() {
            Some("file") => {
                let filename = field.file_name().unwrap_or("upload.jsonl").to_string();
                let room = state.batches.files().room();
                let mut content = Vec::new();
                while let Some(chunk) = field.chunk().await.map_err(multipart_error)? {
                    content.extend_from_slice(&chunk);
                    if content.len() > room {
                        return Err(state.batches.files().refuse(content.len()));
                    }
                }
                file = Some((filename, Bytes::from(content)));
            }
            Some("purpose") => purpose = Some(field.text().await.map_err(multipart_error)?),
            // OpenAI's other fields (`expires_after`) have no use here.
            _ => {}
        }
    }
    let (filename, content) =
        file.ok_or_else(|| ApiError::invalid_param("file", "is required (a multipart file part)"))?;
    let purpose = purpose.ok_or_else(|| ApiError::invalid_param("purpose", "is required"))?;
    if purpose != BATCH {
        return Err(ApiError::invalid_param(
            "purpose",
            format!("'{purpose}' is not supported; this server stores files for '{BATCH}'"),
        ));
    }
    Ok((filename, purpose, content))
}

fn multipart_error(e: MultipartError) -> ApiError {
    let message = match e.status() {
        StatusCode::PAYLOAD_TOO_LARGE => {
            "the upload is larger than the file store (--batch-store-mb)".to_string()
        }
        _ => e.body_text(),
    };
    ApiError::new(e.status().as_u16(), "invalid_request_error", message)
}

/// A list's query string; a malformed one is a 400.
fn query<T>(q: Result<Query<T>, QueryRejection>) -> Result<T, ApiError> {
    q.map(|Query(q)| q)
        .map_err(|r| ApiError::bad_request(r.body_text(), None))
}

async fn list_files(
    State(state): State<BatchState>,
    q: Result<Query<FileListQuery>, QueryRejection>,
) -> Response {
    state.reply(query(q).and_then(|q| state.batches.files().list(&q)))
}

async fn file(State(state): State<BatchState>, Path(id): Path<String>) -> Response {
    state.reply(state.batches.files().get(&id).map(|f| f.object()))
}

async fn file_content(State(state): State<BatchState>, Path(id): Path<String>) -> Response {
    match state.batches.files().get(&id) {
        Ok(f) => (
            [(header::CONTENT_TYPE, "application/octet-stream")],
            f.content.clone(),
        )
            .into_response(),
        Err(e) => state.error(e),
    }
}

async fn delete_file(State(state): State<BatchState>, Path(id): Path<String>) -> Response {
    state.reply(state.batches.files().delete(&id))
}

async fn create_batch(State(state): State<BatchState>, request: Request) -> Response {
    let read = async {
        Bytes::from_request(request, &())
            .await
            .map_err(|r| ApiError::new(r.status().as_u16(), "invalid_request_error", r.body_text()))
    };
    let result = state.in_time(read).await;
    state.reply(result.and_then(|body| state.batches.create(&body)))
}

async fn batch(State(state): State<BatchState>, Path(id): Path<String>) -> Response {
    state.reply(state.batches.get(&id))
}

async fn cancel_batch(State(state): State<BatchState>, Path(id): Path<String>) -> Response {
    state.reply(state.batches.cancel(&id))
}

async fn list_batches(
    State(state): State<BatchState>,
    q: Result<Query<BatchListQuery>, QueryRejection>,
) -> Response {
    state.reply(query(q).and_then(|q| state.batches.list(&q)))
}
