//! The file store behind `/v1/files`: uploaded batch inputs and the
//! output and error files batches write, in memory under one cap on their
//! total size, so neither uploads nor results can grow the server without
//! bound. Contents are shared (`Bytes`), so a batch reading its input, or
//! a download in flight, holds no copy and survives a delete.

use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use serde_json::{json, Value};

use crate::api::error::ApiError;
use crate::api::ids::{new_id, unix_now};

/// The one purpose uploads may have here; OpenAI's others (assistants,
/// fine-tune, ...) belong to APIs this server does not have.
pub const BATCH: &str = "batch";
/// The purpose of the files batches write, as OpenAI names it.
pub const BATCH_OUTPUT: &str = "batch_output";

/// One stored file.
#[derive(Debug)]
pub struct StoredFile {
    pub id: String,
    pub filename: String,
    pub purpose: String,
    pub created_at: u64,
    pub content: Bytes,
}

impl StoredFile {
    /// OpenAI's file object.
    pub fn object(&self) -> Value {
        json!({
            "id": self.id,
            "object": "file",
            "bytes": self.content.len(),
            "created_at": self.created_at,
            "expires_at": null,
            "filename": self.filename,
            "purpose": self.purpose,
            "status": "processed",
            "status_details": null,
        })
    }
}

/// `GET /v1/files`'s query.
#[derive(Debug, Default, serde::Deserialize)]
pub struct FileListQuery {
    pub purpose: Option<String>,
    pub limit: Option<usize>,
    /// `asc` or `desc` (default: newest first).
    pub order: Option<String>,
    /// A file id: list those after it in the order asked.
    pub after: Option<String>,
}

/// OpenAI's most and default `limit` of a file list.
const MAX_LIST: usize = 10_000;

pub struct FileStore {
    cap: usize,
    inner: Mutex<Files>,
}

#[derive(Default)]
struct Files {
    /// In creation order.
    files: Vec<Arc<StoredFile>>,
    bytes: usize,
}

impl FileStore {
    pub fn new(cap: usize) -> Self {
        FileStore {
            cap,
            inner: Mutex::new(Files::default()),
        }
    }

    /// Bytes a new file may still have; an upload is refused as soon as
    /// it passes this, before the rest of it is read.
    pub fn room(&self) -> usize {
        self.cap.saturating_sub(self.lock().bytes)
    }

    /// Stores `content` as a new file; 413 when the store cannot hold it.
    pub fn insert(
        &self,
        filename: &str,
        purpose: &str,
        content: Bytes,
    ) -> Result<Arc<StoredFile>, ApiError> {
        let mut files = self.lock();
        if files.bytes + content.len() > self.cap {
            return Err(self.full(content.len(), files.bytes));
        }
        let file = Arc::new(StoredFile {
            id: new_id("file-"),
            filename: filename.to_string(),
            purpose: purpose.to_string(),
            created_at: unix_now(),
            content,
        });
        files.bytes += file.content.len();
        files.files.push(file.clone());
        Ok(file)
    }

    /// The 413 of a file of `len` bytes (or more) that does not fit.
    pub fn refuse(&self, len: usize) -> ApiError {
        let held = self.lock().bytes;
        self.full(len, held)
    }

    /// The 413 of a file of `len` bytes that does not fit beside `held`.
    fn full(&self, len: usize, held: usize) -> ApiError {
        ApiError {
            code: Some("file_too_large".into()),
            ..ApiError::new(
                413,
                "invalid_request_error",
                format!(
                    "the file store holds {held} of its {} bytes; a file of {len} bytes does not fit \
                     (delete files, or raise --batch-store-mb)",
                    self.cap
                ),
            )
        }
    }

    pub fn get(&self, id: &str) -> Result<Arc<StoredFile>, ApiError> {
        self.lock()
            .files
            .iter()
            .find(|f| f.id == id)
            .cloned()
            .ok_or_else(|| not_found(id))
    }

    /// Removes a file; OpenAI's deletion object.
    pub fn delete(&self, id: &str) -> Result<Value, ApiError> {
        let mut files = self.lock();
        let i = files
            .files
            .iter()
            .position(|f| f.id == id)
            .ok_or_else(|| not_found(id))?;
        let file = files.files.remove(i);
        files.bytes -= file.content.len();
        Ok(json!({"id": file.id, "object": "file", "deleted": true}))
    }

    /// OpenAI's list of files (`data`, `first_id`, `last_id`, `has_more`).
    pub fn list(&self, query: &FileListQuery) -> Result<Value, ApiError> {
        let limit = query.limit.unwrap_or(MAX_LIST);
        if !(1..=MAX_LIST).contains(&limit) {
            return Err(ApiError::invalid_param(
                "limit",
                format!("must be from 1 to {MAX_LIST}"),
            ));
        }
        let newest_first = match query.order.as_deref() {
            None | Some("desc") => true,
            Some("asc") => false,
            Some(other) => {
                return Err(ApiError::invalid_param(
                    "order",
                    format!("must be 'asc' or 'desc', not '{other}'"),
                ))
            }
        };
        let files = self.lock();
        let mut ordered: Vec<&Arc<StoredFile>> = files
            .files
            .iter()
            .filter(|f| query.purpose.as_ref().is_none_or(|p| &f.purpose == p))
            .collect();
        if newest_first {
            ordered.reverse();
        }
        let start = match &query.after {
            Some(after) => ordered
                .iter()
                .position(|f| &f.id == after)
                .map(|i| i + 1)
                .ok_or_else(|| ApiError::invalid_param("after", format!("no file '{after}'")))?,
            None => 0,
        };
        Ok(page(&ordered[start..], limit, |f| f.object(), |f| &f.id))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Files> {
        self.inner.lock().expect("file store lock")
    }
}

/// OpenAI's cursor page: at most `limit` of `items`, with the ids at its
/// ends and whether more follow.
pub fn page<T>(
    items: &[T],
    limit: usize,
    object: impl Fn(&T) -> Value,
    id: impl Fn(&T) -> &str,
) -> Value {
    let shown = &items[..items.len().min(limit)];
    json!({
        "object": "list",
        "data": shown.iter().map(&object).collect::<Vec<_>>(),
        "first_id": shown.first().map(&id),
        "last_id": shown.last().map(&id),
        "has_more": items.len() > shown.len(),
    })
}

fn not_found(id: &str) -> ApiError {
    ApiError {
        param: Some("id".into()),
        ..ApiError::new(
            404,
            "invalid_request_error",
            format!("No such File object: {id}"),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes(n: usize) -> Bytes {
        Bytes::from(vec![b'x'; n])
    }

    #[test]
    fn files_are_kept_read_and_deleted_by_id() {
        let store = FileStore::new(1000);
        let a = store.insert("a.jsonl", BATCH, bytes(10)).unwrap();
        assert!(a.id.starts_with("file-"));
        let got = store.get(&a.id).unwrap();
        assert_eq!(got.content.len(), 10);
        let o = got.object();
        assert_eq!(o["object"], "file");
        assert_eq!(o["bytes"], 10);
        assert_eq!(o["filename"], "a.jsonl");
        assert_eq!(o["purpose"], "batch");
        let deleted = store.delete(&a.id).unwrap();
        assert_eq!(
            deleted,
            json!({"id": a.id, "object": "file", "deleted": true})
        );
        let e = store.get(&a.id).unwrap_err();
        assert_eq!(e.status, 404);
        assert_eq!(store.delete(&a.id).unwrap_err().status, 404);
    }

    #[test]
    fn the_cap_holds_over_all_files_and_a_delete_frees_its_bytes() {
        let store = FileStore::new(100);
        let a = store.insert("a", BATCH, bytes(60)).unwrap();
        assert_eq!(store.room(), 40);
        let e = store.insert("b", BATCH, bytes(41)).unwrap_err();
        assert_eq!(e.status, 413);
        assert!(e.message.contains("--batch-store-mb"), "{}", e.message);
        store.insert("b", BATCH, bytes(40)).unwrap();
        assert_eq!(store.room(), 0);
        store.delete(&a.id).unwrap();
        assert_eq!(store.room(), 60);
        store.insert("c", BATCH_OUTPUT, bytes(60)).unwrap();
    }

    #[test]
    fn lists_are_newest_first_by_default_and_page_with_after() {
        let store = FileStore::new(1000);
        let ids: Vec<String> = (0..3)
            .map(|i| {
                store
                    .insert(&format!("{i}"), BATCH, bytes(1))
                    .unwrap()
                    .id
                    .clone()
            })
            .collect();
        store.insert("out", BATCH_OUTPUT, bytes(1)).unwrap();
        let q = |purpose: Option<&str>, limit, order: Option<&str>, after: Option<&str>| {
            store
                .list(&FileListQuery {
                    purpose: purpose.map(Into::into),
                    limit,
                    order: order.map(Into::into),
                    after: after.map(Into::into),
                })
                .unwrap()
        };
        let all = q(None, None, None, None);
        assert_eq!(all["data"].as_array().unwrap().len(), 4);
        assert_eq!(all["data"][0]["filename"], "out");
        let batch = q(Some(BATCH), Some(2), None, None);
        assert_eq!(batch["first_id"], ids[2].as_str());
        assert_eq!(batch["last_id"], ids[1].as_str());
        assert_eq!(batch["has_more"], true);
        let rest = q(Some(BATCH), Some(2), None, Some(&ids[1]));
        assert_eq!(rest["first_id"], ids[0].as_str());
        assert_eq!(rest["has_more"], false);
        let asc = q(Some(BATCH), None, Some("asc"), None);
        assert_eq!(asc["first_id"], ids[0].as_str());
        let bad = store.list(&FileListQuery {
            order: Some("up".into()),
            ..Default::default()
        });
        assert_eq!(bad.unwrap_err().param.as_deref(), Some("order"));
    }
}
