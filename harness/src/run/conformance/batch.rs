//! The `batch` scenario: OpenAI's Batch API as its SDK drives it. The
//! case's lines go up as a JSONL file (multipart, purpose "batch"), a
//! batch is created on it and polled until it ends, its list, output and
//! error files are read, then the input file's metadata, its deletion and
//! a read after it. Every step has its fixed index (`protocol::batch`)
//! so checks find each; one that could not be sent (its id never came)
//! is recorded as such, saying why.

use std::time::{Duration, Instant};

use serde_json::json;

use crate::protocol::batch::{not_sent, CREATE, FINAL, UPLOAD};
use crate::protocol::exchange::Exchange;
use crate::server::{Outgoing, Target};

/// How long a batch may take to end before the scenario stops polling.
const POLL_LIMIT: Duration = Duration::from_secs(300);
const POLL_EVERY: Duration = Duration::from_millis(200);

/// Statuses after which a batch changes no more.
const ENDED: [&str; 4] = ["completed", "failed", "cancelled", "expired"];

/// Plays the scenario; `jsonl` is the input file's text.
pub async fn play(target: &Target, jsonl: String, endpoint: &str, nonce: &str) -> Vec<Exchange> {
    let boundary = format!("afm-test-{nonce}");
    let body = format!(
        "--{boundary}\r\nContent-Disposition: form-data; name=\"purpose\"\r\n\r\nbatch\r\n\
         --{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"batch.jsonl\"\r\n\
         Content-Type: application/jsonl\r\n\r\n{jsonl}\r\n--{boundary}--\r\n"
    );
    let mut upload = Outgoing::post("/v1/files", body.into_bytes());
    upload.headers.push((
        "content-type".into(),
        format!("multipart/form-data; boundary={boundary}"),
    ));
    let mut out = vec![target.send(upload).await];
    let file_id = id_of(&out[UPLOAD]);
    let create = match &file_id {
        Some(id) => {
            let request =
                json!({"input_file_id": id, "endpoint": endpoint, "completion_window": "24h"});
            target.post("/v1/batches", &request).await
        }
        None => not_sent("/v1/batches", "the upload gave no file id"),
    };
    out.push(create);
    let batch_id = id_of(&out[CREATE]);
    let last = match &batch_id {
        Some(id) => poll(target, id).await,
        None => not_sent("/v1/batches/{id}", "no batch was created"),
    };
    out.push(last);
    out.push(match &batch_id {
        Some(_) => target.get("/v1/batches?limit=100").await,
        None => not_sent("/v1/batches", "no batch was created"),
    });
    for field in ["output_file_id", "error_file_id"] {
        let file = out[FINAL].body[field].as_str().map(str::to_string);
        out.push(match file {
            Some(f) => target.get(&format!("/v1/files/{f}/content")).await,
            None => not_sent(
                "/v1/files/{id}/content",
                &format!("the batch has no {field}"),
            ),
        });
    }
    match &file_id {
        Some(id) => {
            let path = format!("/v1/files/{id}");
            out.push(target.get(&path).await);
            let mut delete = Outgoing::get(&path);
            delete.method = "DELETE".into();
            out.push(target.send(delete).await);
            out.push(target.get(&path).await);
        }
        None => {
            for path in [
                "GET /v1/files/{id}",
                "DELETE /v1/files/{id}",
                "GET /v1/files/{id}",
            ] {
                out.push(not_sent(path, "the upload gave no file id"));
            }
        }
    }
    out
}

/// `GET /v1/batches/{id}` until the batch ends or [`POLL_LIMIT`] passes;
/// the last reply.
async fn poll(target: &Target, id: &str) -> Exchange {
    let path = format!("/v1/batches/{id}");
    let start = Instant::now();
    loop {
        let ex = target.get(&path).await;
        let ended = ex.body["status"]
            .as_str()
            .is_some_and(|s| ENDED.contains(&s));
        if ended || ex.status != 200 || start.elapsed() > POLL_LIMIT {
            return ex;
        }
        tokio::time::sleep(POLL_EVERY).await;
    }
}

fn id_of(ex: &Exchange) -> Option<String> {
    match ex.status {
        200..=299 => ex.body["id"].as_str().map(str::to_string),
        _ => None,
    }
}
