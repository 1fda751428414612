//! OpenAI's Batch API as the harness drives and reads it: the fixed
//! index of each step of the `batch` scenario (`run::conformance::batch`
//! plays them, `suite::checks::batch` reads them), the JSONL of an input
//! file, and how a step that could not be sent is recorded.

use serde_json::{json, Value};

use crate::protocol::exchange::Exchange;

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

/// A step the scenario could not send (status 0, the reason in the
/// body): the checks that need it fail naming why, and the case is graded,
/// not an error, since what stopped it was the server's earlier reply.
pub fn not_sent(path: &str, why: &str) -> Exchange {
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
