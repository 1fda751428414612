//! The `batch` scenario: OpenAI's Batch API as its SDK drives it. The
//! case's lines go up as a JSONL file (multipart, purpose "batch"), a
//! batch is created on it and polled until it ends, its list, output and
//! error files are read, then the input file's metadata, its deletion and
//! a read after it. Every step has a fixed index ([`UPLOAD`] ..
//! [`AFTER_DELETE`]) so checks find each; one that could not be sent
//! (its id never came) is recorded as such ([`unsent`]), saying why.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::protocol::exchange::Exchange;
use crate::server::{Outgoing, Target};

pub const UPLOAD: usize = 0;
pub const CREATE: usize = 1;
/// The batch as the last poll found it: the scenario's subject.
pub const FINAL: usize = 2;
pub const LIST: usize = 3;
pub const OUTPUT: usize = 4;
pub const ERRORS: usize = 5;
pub const METADATA: usize = 6;
pub const DELETE: usize = 7;
pub const AFTER_DELETE: usize = 8;

/// How long a batch may take to end before the scenario stops polling.
const POLL_LIMIT: Duration = Duration::from_secs(300);
const POLL_EVERY: Duration = Duration::from_millis(200);

/// Statuses after which a batch changes no more.
const ENDED: [&str; 4] = ["completed", "failed", "cancelled", "expired"];

/// The JSONL of `lines` (each `{custom_id, body}`, bodies prepared) for
/// `endpoint`.
pub fn jsonl(lines: &[Value], endpoint: &str) -> String {
    lines
        .iter()
        .map(|l| {
            json!({"custom_id": l["custom_id"], "method": "POST", "url": endpoint, "body": l["body"]})
                .to_string()
                + "\n"
        })
        .collect()
}

/// The lines a batch was given, read back from its upload step (the
/// multipart body holds the JSONL verbatim).
pub fn uploaded_lines(upload: &Exchange) -> Vec<Value> {
    upload
        .request
        .as_str()
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v.get("custom_id").is_some())
        .collect()
}

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

/// A step the scenario could not send (status 0, the reason in the
/// body): the checks that need it fail naming why, and the case is graded,
/// not an error, since what stopped it was the server's earlier reply.
fn not_sent(path: &str, why: &str) -> Exchange {
    Exchange {
        path: path.into(),
        body: serde_json::json!({ "not_sent": why }),
        ..Default::default()
    }
}

/// Why a step was not sent, if it was not.
pub fn unsent(ex: &Exchange) -> Option<&str> {
    match ex.status {
        0 => ex.body["not_sent"].as_str(),
        _ => None,
    }
}
