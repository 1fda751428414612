//! Batches: their objects, and the runner that takes one from
//! `validating` through `in_progress` and `finalizing` to `completed`
//! (or `failed`, or `cancelling` to `cancelled`).
//!
//! Each line's body goes through the endpoint's own handler on
//! [`ApiContext`] (`chat_completions_as`, `completions_as`), so a line is
//! parsed, checked and answered exactly as the same body posted
//! interactively; only its engine sequences run at [`Priority::Batch`].
//! Batch work stays beneath interactive traffic in two places:
//!
//! - here, at most `--batch-concurrency` lines (over all batches) are in
//!   the engine at once, so a batch of 50,000 lines never fills the
//!   engine's queue, whose bound (`--max-queue`) is the interactive
//!   clients'; a line waits for a lane, not in the engine;
//! - in the scheduler, which admits every waiting interactive request
//!   before a batch sequence and keeps one decode slot out of the batch's
//!   reach (`runtime::scheduler`), so an interactive request never waits
//!   behind batch lines for a slot, only shares steps with them.
//!
//! Cancelling stops the dispatch of new lines; lines in the engine finish
//! and are written out, so `request_counts` stay true (`total` then
//! exceeds `completed + failed` by the lines never run, which appear in
//! neither file, as with OpenAI).
//!
//! Batch objects are kept for the server's lifetime (they are small; their
//! results are files, under the store's cap). Nothing expires: a batch runs
//! to its end however long its 24-hour window would have been.

use std::sync::{Arc, Mutex, MutexGuard};

use axum::body::Bytes;
use serde_json::{json, Map, Value};
use tokio::sync::{watch, Semaphore};
use tokio::task::JoinSet;

use crate::api::batch::files::{page, FileStore, BATCH, BATCH_OUTPUT};
use crate::api::batch::input::{read_lines, BatchLine, LineError};
use crate::api::batch::BatchConfig;
use crate::api::context::{ApiContext, ApiResponse};
use crate::api::error::{ApiError, Protocol};
use crate::api::ids::{new_id, unix_now};
use crate::api::wire::read_body;
use crate::runtime::Priority;

/// The endpoints a batch may run: those whose handler answers with one
/// JSON body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endpoint {
    Chat,
    Completions,
}

impl Endpoint {
    const ALL: [Endpoint; 2] = [Endpoint::Chat, Endpoint::Completions];

    pub fn path(self) -> &'static str {
        match self {
            Endpoint::Chat => "/v1/chat/completions",
            Endpoint::Completions => "/v1/completions",
        }
    }

    fn of(path: &str) -> Result<Self, ApiError> {
        Self::ALL
            .into_iter()
            .find(|e| e.path() == path)
            .ok_or_else(|| {
                ApiError::invalid_param(
                    "endpoint",
                    format!(
                        "'{path}' is not supported; this server runs batches of {} and {}",
                        Endpoint::Chat.path(),
                        Endpoint::Completions.path()
                    ),
                )
            })
    }

    /// The line's body through the endpoint's handler, at batch priority.
    async fn call(self, api: &ApiContext, body: &[u8]) -> Result<ApiResponse, ApiError> {
        match self {
            Endpoint::Chat => api.chat_completions_as(body, Priority::Batch).await,
            Endpoint::Completions => api.completions_as(body, Priority::Batch).await,
        }
    }
}

/// A batch's status, in OpenAI's names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    Validating,
    InProgress,
    Finalizing,
    Completed,
    Failed,
    Cancelling,
    Cancelled,
}

impl Status {
    fn as_str(self) -> &'static str {
        match self {
            Status::Validating => "validating",
            Status::InProgress => "in_progress",
            Status::Finalizing => "finalizing",
            Status::Completed => "completed",
            Status::Failed => "failed",
            Status::Cancelling => "cancelling",
            Status::Cancelled => "cancelled",
        }
    }

    fn is_final(self) -> bool {
        matches!(self, Status::Completed | Status::Failed | Status::Cancelled)
    }
}

/// What changes while a batch runs.
#[derive(Debug)]
struct Progress {
    status: Status,
    errors: Vec<Value>,
    output_file_id: Option<String>,
    error_file_id: Option<String>,
    in_progress_at: Option<u64>,
    finalizing_at: Option<u64>,
    completed_at: Option<u64>,
    failed_at: Option<u64>,
    cancelling_at: Option<u64>,
    cancelled_at: Option<u64>,
    total: usize,
    completed: usize,
    failed: usize,
    /// Summed from the successful lines' `usage`.
    input_tokens: u64,
    cached_tokens: u64,
    output_tokens: u64,
    reasoning_tokens: u64,
}

/// One batch.
pub struct Job {
    id: String,
    endpoint: Endpoint,
    input_file_id: String,
    created_at: u64,
    metadata: Option<Map<String, Value>>,
    progress: Mutex<Progress>,
    /// Set once, by a cancel; the runner stops dispatching.
    cancel: watch::Sender<bool>,
}

impl Job {
    fn progress(&self) -> MutexGuard<'_, Progress> {
        self.progress.lock().expect("batch lock")
    }

    /// OpenAI's batch object.
    fn object(&self, model: &str) -> Value {
        let p = self.progress();
        json!({
            "id": self.id,
            "object": "batch",
            "endpoint": self.endpoint.path(),
            "model": model,
            "errors": (!p.errors.is_empty()).then(|| json!({"object": "list", "data": p.errors})),
            "input_file_id": self.input_file_id,
            "completion_window": "24h",
            "status": p.status.as_str(),
            "output_file_id": p.output_file_id,
            "error_file_id": p.error_file_id,
            "created_at": self.created_at,
            "in_progress_at": p.in_progress_at,
            // Nothing expires here: batches run until done; the field
            // says when OpenAI's window would close.
            "expires_at": self.created_at + COMPLETION_WINDOW_S,
            "finalizing_at": p.finalizing_at,
            "completed_at": p.completed_at,
            "failed_at": p.failed_at,
            "expired_at": null,
            "cancelling_at": p.cancelling_at,
            "cancelled_at": p.cancelled_at,
            "request_counts": {"total": p.total, "completed": p.completed, "failed": p.failed},
            "usage": {
                "input_tokens": p.input_tokens,
                "input_tokens_details": {"cached_tokens": p.cached_tokens},
                "output_tokens": p.output_tokens,
                "output_tokens_details": {"reasoning_tokens": p.reasoning_tokens},
                "total_tokens": p.input_tokens + p.output_tokens,
            },
            "metadata": self.metadata,
        })
    }

    fn fail(&self, errors: Vec<Value>) {
        let mut p = self.progress();
        p.status = Status::Failed;
        p.failed_at = Some(unix_now());
        p.errors = errors;
    }

    /// Counts a finished line as it finishes, so polling shows progress.
    fn count(&self, outcome: &Result<Value, ApiError>) {
        let mut p = self.progress();
        match outcome {
            Ok(body) => {
                p.completed += 1;
                let n = |path: &str| body.pointer(path).and_then(Value::as_u64).unwrap_or(0);
                p.input_tokens += n("/usage/prompt_tokens");
                p.cached_tokens += n("/usage/prompt_tokens_details/cached_tokens");
                p.output_tokens += n("/usage/completion_tokens");
                p.reasoning_tokens += n("/usage/completion_tokens_details/reasoning_tokens");
            }
            Err(_) => p.failed += 1,
        }
    }
}

/// The only completion window OpenAI offers, and so the only one taken.
const COMPLETION_WINDOW: &str = "24h";
const COMPLETION_WINDOW_S: u64 = 24 * 3600;
/// OpenAI's bounds on `metadata`.
const METADATA_KEYS: usize = 16;
const METADATA_KEY_CHARS: usize = 64;
const METADATA_VALUE_CHARS: usize = 512;
/// `GET /v1/batches`'s default and largest `limit`.
const LIST_DEFAULT: usize = 20;
const LIST_MAX: usize = 100;

/// `POST /v1/batches`'s body.
#[derive(serde::Deserialize)]
struct CreateBatch {
    input_file_id: Option<String>,
    endpoint: Option<String>,
    completion_window: Option<String>,
    metadata: Option<Map<String, Value>>,
}

/// `GET /v1/batches`'s query.
#[derive(Debug, Default, serde::Deserialize)]
pub struct BatchListQuery {
    pub limit: Option<usize>,
    pub after: Option<String>,
}

/// Every batch of this server, the file store they read and write, and
/// the lanes their lines take into the engine.
pub struct Batches {
    api: Arc<ApiContext>,
    files: Arc<FileStore>,
    /// Newest last.
    jobs: Mutex<Vec<Arc<Job>>>,
    /// `--batch-concurrency` permits: one per line in the engine.
    lanes: Arc<Semaphore>,
}

impl Batches {
    pub fn new(api: Arc<ApiContext>, config: &BatchConfig) -> Self {
        Batches {
            api,
            files: Arc::new(FileStore::new(config.store_bytes)),
            jobs: Mutex::new(Vec::new()),
            lanes: Arc::new(Semaphore::new(config.concurrency.max(1))),
        }
    }

    pub fn files(&self) -> &FileStore {
        &self.files
    }

    /// `POST /v1/batches`: the batch, `validating`, with its runner
    /// started. The request's own fields are refused here (400); the input
    /// file's lines are the runner's to check (see `input`).
    pub fn create(self: &Arc<Self>, body: &[u8]) -> Result<Value, ApiError> {
        let request: CreateBatch = read_body(body)?;
        let required = |v: Option<String>, name: &str| {
            v.ok_or_else(|| ApiError::invalid_param(name, "is required"))
        };
        let input_file_id = required(request.input_file_id, "input_file_id")?;
        let endpoint = Endpoint::of(&required(request.endpoint, "endpoint")?)?;
        let window = required(request.completion_window, "completion_window")?;
        if window != COMPLETION_WINDOW {
            return Err(ApiError::invalid_param(
                "completion_window",
                format!("must be '{COMPLETION_WINDOW}', not '{window}'"),
            ));
        }
        check_metadata(request.metadata.as_ref())?;
        let input = self.files.get(&input_file_id).map_err(|e| ApiError {
            param: Some("input_file_id".into()),
            ..e
        })?;
        if input.purpose != BATCH {
            return Err(ApiError::invalid_param(
                "input_file_id",
                format!(
                    "the file {input_file_id} has purpose '{}', not '{BATCH}'",
                    input.purpose
                ),
            ));
        }
        let job = Arc::new(Job {
            id: new_id("batch_"),
            endpoint,
            input_file_id,
            created_at: unix_now(),
            metadata: request.metadata,
            progress: Mutex::new(Progress {
                status: Status::Validating,
                errors: Vec::new(),
                output_file_id: None,
                error_file_id: None,
                in_progress_at: None,
                finalizing_at: None,
                completed_at: None,
                failed_at: None,
                cancelling_at: None,
                cancelled_at: None,
                total: 0,
                completed: 0,
                failed: 0,
                input_tokens: 0,
                cached_tokens: 0,
                output_tokens: 0,
                reasoning_tokens: 0,
            }),
            cancel: watch::channel(false).0,
        });
        self.jobs().push(job.clone());
        let object = job.object(self.api.model());
        tokio::spawn(self.clone().run(job, input.content.clone()));
        Ok(object)
    }

    pub fn get(&self, id: &str) -> Result<Value, ApiError> {
        Ok(self.job(id)?.object(self.api.model()))
    }

    /// `POST /v1/batches/{id}/cancel`: `cancelling` until the lines in the
    /// engine finish, then `cancelled`. Cancelling a cancelled batch
    /// changes nothing; one finished or writing its files cannot be (409).
    pub fn cancel(&self, id: &str) -> Result<Value, ApiError> {
        let job = self.job(id)?;
        {
            let mut p = job.progress();
            match p.status {
                Status::Cancelling | Status::Cancelled => {}
                s if s.is_final() || s == Status::Finalizing => {
                    return Err(ApiError::new(
                        409,
                        "invalid_request_error",
                        format!("the batch {id} is {} and cannot be cancelled", s.as_str()),
                    ))
                }
                _ => {
                    p.status = Status::Cancelling;
                    p.cancelling_at = Some(unix_now());
                }
            }
        }
        job.cancel.send_replace(true);
        Ok(job.object(self.api.model()))
    }

    /// `GET /v1/batches`: newest first, `limit` of them after `after`.
    pub fn list(&self, query: &BatchListQuery) -> Result<Value, ApiError> {
        let limit = query.limit.unwrap_or(LIST_DEFAULT);
        if !(1..=LIST_MAX).contains(&limit) {
            return Err(ApiError::invalid_param(
                "limit",
                format!("must be from 1 to {LIST_MAX}"),
            ));
        }
        let mut jobs: Vec<Arc<Job>> = self.jobs().clone();
        jobs.reverse();
        let start = match &query.after {
            Some(after) => jobs
                .iter()
                .position(|j| &j.id == after)
                .map(|i| i + 1)
                .ok_or_else(|| ApiError::invalid_param("after", format!("no batch '{after}'")))?,
            None => 0,
        };
        let model = self.api.model();
        Ok(page(&jobs[start..], limit, |j| j.object(model), |j| &j.id))
    }

    fn job(&self, id: &str) -> Result<Arc<Job>, ApiError> {
        self.jobs()
            .iter()
            .find(|j| j.id == id)
            .cloned()
            .ok_or_else(|| ApiError {
                param: Some("batch_id".into()),
                ..ApiError::new(
                    404,
                    "invalid_request_error",
                    format!("No such Batch object: {id}"),
                )
            })
    }

    fn jobs(&self) -> MutexGuard<'_, Vec<Arc<Job>>> {
        self.jobs.lock().expect("batches lock")
    }

    /// The batch from validation to its end.
    async fn run(self: Arc<Self>, job: Arc<Job>, input: Bytes) {
        let lines = match read_lines(&input, job.endpoint.path()) {
            Ok(lines) => lines,
            Err(errors) => return job.fail(errors.iter().map(LineError::json).collect()),
        };
        drop(input);
        {
            let mut p = job.progress();
            p.total = lines.len();
            if p.status == Status::Validating {
                p.status = Status::InProgress;
                p.in_progress_at = Some(unix_now());
            }
        }
        let results = self.dispatch(&job, lines).await;
        self.finish(&job, results);
    }

    /// Runs the lines, at most `--batch-concurrency` at once over all
    /// batches, until all ran or the batch is cancelled; the results of
    /// those that ran, in input order.
    async fn dispatch(&self, job: &Arc<Job>, lines: Vec<BatchLine>) -> Vec<LineResult> {
        let mut cancelled = job.cancel.subscribe();
        let mut running = JoinSet::new();
        for (index, line) in lines.into_iter().enumerate() {
            if *cancelled.borrow_and_update() {
                break;
            }
            let lane = tokio::select! {
                // Only a cancel ever changes it.
                _ = cancelled.changed() => break,
                lane = self.lanes.clone().acquire_owned() => lane.expect("the lanes are never closed"),
            };
            let (api, job) = (self.api.clone(), job.clone());
            running.spawn(async move {
                let outcome = run_line(&api, job.endpoint, &line).await;
                drop(lane);
                job.count(&outcome);
                LineResult {
                    index,
                    custom_id: line.custom_id,
                    outcome,
                }
            });
        }
        let mut results = Vec::new();
        while let Some(done) = running.join_next().await {
            match done {
                Ok(r) => results.push(r),
                Err(e) => {
                    tracing::error!(batch = %job.id, error = %e, "a batch line's task ended abnormally")
                }
            }
        }
        results.sort_by_key(|r| r.index);
        results
    }

    /// Writes the output and error files and ends the batch: `completed`,
    /// or `cancelled` when it was cancelled; `failed` when the store cannot
    /// hold the results (nothing is then kept).
    fn finish(&self, job: &Job, results: Vec<LineResult>) {
        let cancelled = {
            let mut p = job.progress();
            let cancelled = p.status == Status::Cancelling;
            if !cancelled {
                p.status = Status::Finalizing;
                p.finalizing_at = Some(unix_now());
            }
            cancelled
        };
        let (mut output, mut errors) = (Vec::new(), Vec::new());
        for r in &results {
            let (file, line) = match &r.outcome {
                Ok(body) => (&mut output, success_line(&r.custom_id, body)),
                Err(e) => (&mut errors, error_line(&r.custom_id, e)),
            };
            file.extend_from_slice(line.to_string().as_bytes());
            file.push(b'\n');
        }
        let written = self.write(job, "output", output).and_then(|out| {
            self.write(job, "error", errors)
                .inspect_err(|_| {
                    if let Some(id) = &out {
                        let _ = self.files.delete(id);
                    }
                })
                .map(|err| (out, err))
        });
        match written {
            Ok((output_file_id, error_file_id)) => {
                let mut p = job.progress();
                p.output_file_id = output_file_id;
                p.error_file_id = error_file_id;
                let now = Some(unix_now());
                if cancelled {
                    p.status = Status::Cancelled;
                    p.cancelled_at = now;
                } else {
                    p.status = Status::Completed;
                    p.completed_at = now;
                }
            }
            Err(e) => job.fail(vec![json!({
                "code": e.code,
                "message": e.message,
                "param": null,
                "line": null,
            })]),
        }
    }

    /// Stores one result file unless it is empty (OpenAI then leaves its
    /// id null); its id.
    fn write(&self, job: &Job, kind: &str, content: Vec<u8>) -> Result<Option<String>, ApiError> {
        if content.is_empty() {
            return Ok(None);
        }
        let name = format!("{}_{kind}.jsonl", job.id);
        let file = self
            .files
            .insert(&name, BATCH_OUTPUT, Bytes::from(content))?;
        Ok(Some(file.id.clone()))
    }
}

/// One line's end.
struct LineResult {
    index: usize,
    custom_id: String,
    outcome: Result<Value, ApiError>,
}

/// A line through its endpoint's handler: the reply body, or the error
/// an interactive client would have got.
async fn run_line(
    api: &ApiContext,
    endpoint: Endpoint,
    line: &BatchLine,
) -> Result<Value, ApiError> {
    // A stream has no place in a file: refused before any generation.
    if line.body.get("stream").and_then(Value::as_bool) == Some(true) {
        return Err(stream_refused());
    }
    let body =
        serde_json::to_vec(&line.body).map_err(|e| ApiError::bad_request(e.to_string(), None))?;
    match endpoint.call(api, &body).await? {
        ApiResponse::Complete { body, .. } => Ok(body),
        ApiResponse::Stream { .. } => Err(stream_refused()),
    }
}

fn stream_refused() -> ApiError {
    ApiError::invalid_param("stream", "is not supported in a batch")
}

/// A line of the output file (OpenAI's batch request output).
fn success_line(custom_id: &str, body: &Value) -> Value {
    json!({
        "id": new_id("batch_req_"),
        "custom_id": custom_id,
        "response": {
            "status_code": 200,
            "request_id": new_id("req_"),
            "body": body,
        },
        "error": null,
    })
}

/// A line of the error file: the HTTP status and error body the request
/// got, as OpenAI writes a request that failed with an HTTP error (its
/// top-level `error` is only for failures without a response).
fn error_line(custom_id: &str, e: &ApiError) -> Value {
    json!({
        "id": new_id("batch_req_"),
        "custom_id": custom_id,
        "response": {
            "status_code": e.status,
            "request_id": new_id("req_"),
            "body": e.body(Protocol::OpenAi),
        },
        "error": null,
    })
}

/// `metadata`: at most 16 string values, keys of at most 64 characters
/// and values of at most 512, as OpenAI bounds it.
fn check_metadata(metadata: Option<&Map<String, Value>>) -> Result<(), ApiError> {
    let Some(m) = metadata else { return Ok(()) };
    let bad = |problem: String| Err(ApiError::invalid_param("metadata", problem));
    if m.len() > METADATA_KEYS {
        return bad(format!("at most {METADATA_KEYS} keys"));
    }
    for (k, v) in m {
        let Some(v) = v.as_str() else {
            return bad(format!("the value of '{k}' must be a string"));
        };
        if k.chars().count() > METADATA_KEY_CHARS || v.chars().count() > METADATA_VALUE_CHARS {
            return bad(format!(
                "keys have at most {METADATA_KEY_CHARS} characters and values at most {METADATA_VALUE_CHARS}"
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_are_named_when_refused() {
        assert_eq!(
            Endpoint::of("/v1/completions").unwrap(),
            Endpoint::Completions
        );
        let e = Endpoint::of("/v1/embeddings").unwrap_err();
        assert_eq!(e.param.as_deref(), Some("endpoint"));
        assert!(e.message.contains("/v1/chat/completions"), "{}", e.message);
    }

    #[test]
    fn result_lines_have_openais_shape() {
        let ok = success_line("a", &json!({"object": "chat.completion"}));
        assert_eq!(ok["custom_id"], "a");
        assert_eq!(ok["response"]["status_code"], 200);
        assert_eq!(ok["response"]["body"]["object"], "chat.completion");
        assert!(ok["id"].as_str().unwrap().starts_with("batch_req_"));
        assert!(ok["error"].is_null());
        let e = ApiError::invalid_param("max_tokens", "must be at least 1");
        let bad = error_line("b", &e);
        assert_eq!(bad["response"]["status_code"], 400);
        assert_eq!(bad["response"]["body"]["error"]["param"], "max_tokens");
    }

    #[test]
    fn metadata_is_bounded_as_openai_bounds_it() {
        let map = |v: Value| v.as_object().unwrap().clone();
        assert!(check_metadata(None).is_ok());
        assert!(check_metadata(Some(&map(json!({"a": "b"})))).is_ok());
        assert!(check_metadata(Some(&map(json!({"a": 1})))).is_err());
        let many: Map<String, Value> = (0..17).map(|i| (i.to_string(), json!("v"))).collect();
        assert!(check_metadata(Some(&many)).is_err());
        assert!(check_metadata(Some(&map(json!({"a": "x".repeat(513)})))).is_err());
    }
}
