//! Checks of the `batch` scenario (`protocol::batch`): the batch
//! ran every line once and each came back answered (`batch_completed`),
//! input OpenAI refuses was refused (`batch_refused`), and the input file
//! kept its metadata and went when deleted (`batch_files`).

use std::collections::BTreeMap;

use serde_json::Value;

use super::Mismatch;
use crate::outcome::clip;
use crate::protocol::batch::{
    unsent, uploaded_lines, AFTER_DELETE, CREATE, DELETE, FINAL, LIST, METADATA, OUTPUT, UPLOAD,
};
use crate::protocol::exchange::Exchange;
use crate::protocol::reply::Reply;

/// Each line as OpenAI writes it to a batch file: `{custom_id, response:
/// {status_code, body}, error}`.
fn file_lines(ex: &Exchange) -> Vec<Value> {
    let text = match &ex.body {
        Value::String(s) => s.clone(),
        // A one-line file is itself a JSON object.
        Value::Object(_) => ex.body.to_string(),
        _ => String::new(),
    };
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or(Value::String(l.into())))
        .collect()
}

fn step(steps: &[Exchange], k: usize) -> Result<&Exchange, Mismatch> {
    let ex = steps
        .get(k)
        .ok_or_else(|| (format!("step {k}"), "no such step".into()))?;
    if let Some(why) = unsent(ex) {
        return Err((format!("{} sent", ex.path), format!("not sent: {why}")));
    }
    match &ex.transport_error {
        Some(e) => Err((format!("{} answered", ex.path), e.clone())),
        None => Ok(ex),
    }
}

fn batch_completed_one(steps: &[Exchange]) -> Result<(), Mismatch> {
    let sent = uploaded_lines(step(steps, UPLOAD)?);
    let created = step(steps, CREATE)?;
    if created.status != 200 || created.body["object"] != "batch" {
        return Err((
            "the batch created (200, object batch)".into(),
            format!("{}: {}", created.status, clip(&created.body.to_string())),
        ));
    }
    let end = step(steps, FINAL)?;
    let counts = &end.body["request_counts"];
    let n = sent.len() as u64;
    let whole = end.body["status"] == "completed"
        && counts["total"].as_u64() == Some(n)
        && counts["completed"].as_u64() == Some(n)
        && counts["failed"].as_u64() == Some(0);
    if !whole {
        return Err((
            format!("status completed, request_counts {n} total, {n} completed, 0 failed"),
            format!(
                "status {}, request_counts {}, errors {}",
                end.body["status"], counts, end.body["errors"]
            ),
        ));
    }
    let id = &end.body["id"];
    let listed = step(steps, LIST)?.body["data"]
        .as_array()
        .is_some_and(|d| d.iter().any(|b| &b["id"] == id));
    if !listed {
        return Err((format!("GET /v1/batches lists {id}"), "not listed".into()));
    }
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let endpoint = end.body["endpoint"]
        .as_str()
        .unwrap_or("/v1/chat/completions");
    for line in file_lines(step(steps, OUTPUT)?) {
        let custom = line["custom_id"].as_str().unwrap_or_default().to_string();
        *seen.entry(custom.clone()).or_default() += 1;
        let body = &line["response"]["body"];
        let reply = Reply::of(&Exchange {
            path: endpoint.into(),
            status: 200,
            body: body.clone(),
            ..Default::default()
        });
        let answered = line["response"]["status_code"] == 200
            && reply.error.is_none()
            && !(reply.content.trim().is_empty() && reply.reasoning.trim().is_empty());
        if !answered {
            return Err((
                "each output line a 200 with an answer".into(),
                format!("{custom}: {}", clip(&line.to_string())),
            ));
        }
    }
    let wanted: BTreeMap<String, usize> = sent
        .iter()
        .map(|l| (l["custom_id"].as_str().unwrap_or_default().to_string(), 1))
        .collect();
    if seen != wanted {
        return Err((
            format!("each custom_id once in the output: {:?}", wanted.keys()),
            format!("{seen:?}"),
        ));
    }
    Ok(())
}

/// The batch ended `completed` with every line counted, is listed, and its
/// output file holds each line's custom_id once, each a 200 with text.
pub(super) fn completed(steps: &[Exchange]) -> Vec<Mismatch> {
    batch_completed_one(steps).err().into_iter().collect()
}

/// Input that OpenAI refuses (duplicate custom_ids, no lines): the upload
/// or the create is a 4xx with an error body, or the batch ends `failed`
/// naming the fault in `errors.data`; no line runs.
pub(super) fn refused(steps: &[Exchange]) -> Vec<Mismatch> {
    let refused_at = |k: usize| {
        steps
            .get(k)
            .is_some_and(|ex| (400..500).contains(&ex.status) && ex.body["error"].is_object())
    };
    if refused_at(UPLOAD) || refused_at(CREATE) {
        return Vec::new();
    }
    let Some(end) = steps.get(FINAL) else {
        return vec![("a batch step".into(), "none".into())];
    };
    let failed = end.body["status"] == "failed"
        && end.body["errors"]["data"]
            .as_array()
            .is_some_and(|d| !d.is_empty())
        && end.body["request_counts"]["completed"]
            .as_u64()
            .unwrap_or(0)
            == 0;
    match failed {
        true => Vec::new(),
        false => vec![(
            "refused: a 4xx at upload or create, or status failed with errors.data and no line run"
                .into(),
            format!(
                "status {}, request_counts {}",
                end.body["status"], end.body["request_counts"]
            ),
        )],
    }
}

/// The input file's metadata says what was uploaded; deleting it says so
/// and a read after it is a 404.
pub(super) fn files(steps: &[Exchange]) -> Vec<Mismatch> {
    let check = || -> Result<(), Mismatch> {
        let upload = step(steps, UPLOAD)?;
        let meta = step(steps, METADATA)?;
        let id = &upload.body["id"];
        let file_ok = meta.status == 200
            && meta.body["object"] == "file"
            && &meta.body["id"] == id
            && meta.body["purpose"] == "batch"
            && meta.body["bytes"] == upload.body["bytes"]
            && meta.body["bytes"].as_u64().is_some_and(|b| b > 0);
        if !file_ok {
            return Err((
                format!(
                    "GET /v1/files/{id}: object file, its id, purpose batch, the upload's bytes"
                ),
                format!(
                    "{}: {}; the upload said {}",
                    meta.status,
                    clip(&meta.body.to_string()),
                    clip(&upload.body.to_string())
                ),
            ));
        }
        let delete = step(steps, DELETE)?;
        if delete.status != 200 || delete.body["deleted"] != true || &delete.body["id"] != id {
            return Err((
                format!("DELETE /v1/files/{id}: deleted true"),
                format!("{}: {}", delete.status, clip(&delete.body.to_string())),
            ));
        }
        let after = step(steps, AFTER_DELETE)?;
        if after.status != 404 {
            return Err((
                "a 404 for the deleted file".into(),
                format!("{}: {}", after.status, clip(&after.body.to_string())),
            ));
        }
        Ok(())
    };
    check().err().into_iter().collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn ex(path: &str, status: u16, body: Value) -> Exchange {
        Exchange {
            path: path.into(),
            status,
            body,
            ..Default::default()
        }
    }

    /// A batch of lines a and b, ended `status` with these output lines.
    fn played(status: &str, output: &[&str]) -> Vec<Exchange> {
        let mut upload = ex("/v1/files", 200, json!({"id": "file-1", "bytes": 10}));
        upload.request = Value::String(
            "--b\r\n\r\n{\"custom_id\":\"a\"}\n{\"custom_id\":\"b\"}\n\r\n--b--".into(),
        );
        let batch = json!({"id": "batch_1", "object": "batch", "status": status,
            "endpoint": "/v1/chat/completions",
            "request_counts": {"total": 2, "completed": 2, "failed": 0}});
        let line = |c: &str| {
            json!({"custom_id": c, "response": {"status_code": 200, "body":
                {"choices": [{"message": {"content": "Hi"}, "finish_reason": "stop"}]}}})
            .to_string()
        };
        let text: String = output.iter().map(|c| line(c) + "\n").collect();
        vec![
            upload,
            ex("/v1/batches", 200, batch.clone()),
            ex("/v1/batches/batch_1", 200, batch.clone()),
            ex("/v1/batches", 200, json!({"data": [batch]})),
            ex("/v1/files/o/content", 200, Value::String(text)),
            ex("/v1/files/e/content", 404, Value::Null),
            ex(
                "/v1/files/file-1",
                200,
                json!({"id": "file-1", "object": "file", "purpose": "batch", "bytes": 10}),
            ),
            ex(
                "/v1/files/file-1",
                200,
                json!({"id": "file-1", "deleted": true}),
            ),
            ex("/v1/files/file-1", 404, json!({"error": {}})),
        ]
    }

    #[test]
    fn a_batch_must_answer_each_line_once() {
        assert!(completed(&played("completed", &["a", "b"])).is_empty());
        assert_eq!(
            completed(&played("completed", &["a"])).len(),
            1,
            "a line lost"
        );
        assert_eq!(
            completed(&played("completed", &["a", "b", "b"])).len(),
            1,
            "a line twice"
        );
        assert_eq!(
            completed(&played("in_progress", &["a", "b"])).len(),
            1,
            "never ended"
        );
        assert!(files(&played("completed", &["a", "b"])).is_empty());
    }

    #[test]
    fn refused_input_is_a_4xx_or_a_failed_batch_that_ran_nothing() {
        let mut steps = played("failed", &[]);
        steps[FINAL].body["errors"] = json!({"data": [{"code": "duplicate_custom_id"}]});
        steps[FINAL].body["request_counts"] = json!({"total": 2, "completed": 0, "failed": 0});
        assert!(refused(&steps).is_empty());
        assert_eq!(refused(&played("completed", &["a", "b"])).len(), 1);
        let mut at_upload = played("completed", &[]);
        at_upload[UPLOAD] = ex("/v1/files", 400, json!({"error": {"message": "duplicate"}}));
        assert!(refused(&at_upload).is_empty());
    }
}
