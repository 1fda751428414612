//! The Batch API over HTTP (`/v1/files`, `/v1/batches`) with the bundled
//! model: a batch runs to `completed` with one output line per request,
//! a bad body fails its line alone (the error file), cancel stops the
//! dispatch, a duplicate `custom_id` fails the batch, the file store
//! keeps its cap; and in the engine, batch sequences yield decode slots
//! to interactive requests.

use std::time::{Duration, Instant};

use afm_engine::api::ChatRequest;
use afm_engine::{Engine, EngineConfig, GenerationRequest, Priority};
use reqwest::{Client, StatusCode};
use serde_json::{json, Value};

use crate::support::Server;

const CHAT: &str = "/v1/chat/completions";
const BOUNDARY: &str = "afm-batch-test-boundary";

/// A chat line of a batch input file.
fn chat_line(custom_id: &str, body: Value) -> String {
    json!({"custom_id": custom_id, "method": "POST", "url": CHAT, "body": body}).to_string()
}

fn ask(word: &str, max_tokens: u32) -> Value {
    json!({
        "messages": [{"role": "user", "content": format!("Say the word {word}.")}],
        "max_tokens": max_tokens,
        "temperature": 0
    })
}

/// A multipart/form-data body of a `file` part and a `purpose` part.
fn multipart(filename: &str, content: &[u8], purpose: Option<&str>) -> Vec<u8> {
    let mut body = Vec::new();
    if let Some(p) = purpose {
        body.extend_from_slice(
            format!(
                "--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"purpose\"\r\n\r\n{p}\r\n"
            )
            .as_bytes(),
        );
    }
    body.extend_from_slice(
        format!(
            "--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"{filename}\"\r\n\
             Content-Type: application/jsonl\r\n\r\n"
        )
        .as_bytes(),
    );
    body.extend_from_slice(content);
    body.extend_from_slice(format!("\r\n--{BOUNDARY}--\r\n").as_bytes());
    body
}

struct Api {
    server: Server,
    client: Client,
}

impl Api {
    fn start(extra: &[&str]) -> Api {
        Api {
            server: Server::start(extra),
            client: Client::new(),
        }
    }

    async fn send(&self, request: reqwest::RequestBuilder) -> (StatusCode, Value) {
        let r = request.send().await.unwrap();
        let status = r.status();
        (status, r.json().await.unwrap_or(Value::Null))
    }

    async fn upload_as(&self, content: &[u8], purpose: Option<&str>) -> (StatusCode, Value) {
        let request = self
            .client
            .post(self.server.url("/v1/files"))
            .header(
                "content-type",
                format!("multipart/form-data; boundary={BOUNDARY}"),
            )
            .body(multipart("input.jsonl", content, purpose));
        self.send(request).await
    }

    /// Uploads `lines` as a batch input file; its id.
    async fn upload(&self, lines: &[String]) -> String {
        let (status, file) = self
            .upload_as(lines.join("\n").as_bytes(), Some("batch"))
            .await;
        assert_eq!(status, StatusCode::OK, "{file}");
        file["id"].as_str().unwrap().to_string()
    }

    async fn get(&self, path: &str) -> (StatusCode, Value) {
        self.send(self.client.get(self.server.url(path))).await
    }

    async fn post(&self, path: &str, body: Value) -> (StatusCode, Value) {
        self.send(self.client.post(self.server.url(path)).json(&body))
            .await
    }

    async fn create(&self, input_file_id: &str, endpoint: &str) -> Value {
        let (status, batch) = self
            .post(
                "/v1/batches",
                json!({"input_file_id": input_file_id, "endpoint": endpoint,
                       "completion_window": "24h", "metadata": {"suite": "batch_api"}}),
            )
            .await;
        assert_eq!(status, StatusCode::OK, "{batch}");
        batch
    }

    /// Polls the batch until `done` holds of it.
    async fn wait_for(&self, id: &str, done: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + Duration::from_secs(180);
        loop {
            let (status, batch) = self.get(&format!("/v1/batches/{id}")).await;
            assert_eq!(status, StatusCode::OK, "{batch}");
            if done(&batch) {
                return batch;
            }
            assert!(
                Instant::now() < deadline,
                "the batch did not get there: {batch}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    async fn finished(&self, id: &str) -> Value {
        self.wait_for(id, |b| {
            ["completed", "failed", "cancelled"].contains(&b["status"].as_str().unwrap())
        })
        .await
    }

    /// A file's content as JSON lines.
    async fn lines(&self, file_id: &Value) -> Vec<Value> {
        let id = file_id.as_str().expect("a file id");
        let r = self
            .client
            .get(self.server.url(&format!("/v1/files/{id}/content")))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::OK);
        let text = r.text().await.unwrap();
        text.lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_runs_to_completed_with_one_chat_completion_per_line() {
    let api = Api::start(&[]);
    let ids = ["first", "second", "third"];
    let lines: Vec<String> = ids.iter().map(|id| chat_line(id, ask(id, 4))).collect();
    let input = api.upload(&lines).await;
    let created = api.create(&input, CHAT).await;
    assert_eq!(created["object"], "batch");
    assert!(created["id"].as_str().unwrap().starts_with("batch_"));
    assert_eq!(created["status"], "validating");
    assert_eq!(created["input_file_id"], input.as_str());
    assert_eq!(created["metadata"]["suite"], "batch_api");

    let id = created["id"].as_str().unwrap();
    let done = api.finished(id).await;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(
        done["request_counts"],
        json!({"total": 3, "completed": 3, "failed": 0})
    );
    for at in ["in_progress_at", "finalizing_at", "completed_at"] {
        assert!(done[at].is_u64(), "{at}: {done}");
    }
    assert!(done["error_file_id"].is_null(), "{done}");
    assert!(done["usage"]["output_tokens"].as_u64().unwrap() > 0);

    let output = api.lines(&done["output_file_id"]).await;
    let got: Vec<&str> = output
        .iter()
        .map(|l| l["custom_id"].as_str().unwrap())
        .collect();
    assert_eq!(got, ids);
    for line in &output {
        assert!(line["id"].as_str().unwrap().starts_with("batch_req_"));
        assert!(line["error"].is_null(), "{line}");
        let response = &line["response"];
        assert_eq!(response["status_code"], 200, "{line}");
        assert!(response["request_id"].is_string());
        let body = &response["body"];
        assert_eq!(body["object"], "chat.completion", "{line}");
        assert_eq!(body["choices"][0]["message"]["role"], "assistant");
        assert!(body["usage"]["completion_tokens"].as_u64().unwrap() <= 4);
    }
    // The output file is a file like any other, and the batch is listed.
    let (_, meta) = api
        .get(&format!(
            "/v1/files/{}",
            done["output_file_id"].as_str().unwrap()
        ))
        .await;
    assert_eq!(meta["purpose"], "batch_output");
    let (_, list) = api.get("/v1/batches?limit=1").await;
    assert_eq!(list["first_id"], id);
    assert_eq!(list["has_more"], false);
    // A finished batch cannot be cancelled.
    let (status, e) = api
        .post(&format!("/v1/batches/{id}/cancel"), json!({}))
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_body_fails_its_line_alone_into_the_error_file() {
    let api = Api::start(&[]);
    let mut bad = ask("bad", 4);
    bad["max_tokens"] = json!(0);
    let streamed = {
        let mut b = ask("stream", 4);
        b["stream"] = json!(true);
        b
    };
    let lines = [
        chat_line("good", ask("good", 3)),
        chat_line("bad", bad),
        chat_line("streamed", streamed),
    ];
    let input = api.upload(&lines).await;
    let created = api.create(&input, CHAT).await;
    let done = api.finished(created["id"].as_str().unwrap()).await;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(
        done["request_counts"],
        json!({"total": 3, "completed": 1, "failed": 2})
    );
    let output = api.lines(&done["output_file_id"]).await;
    assert_eq!(output.len(), 1);
    assert_eq!(output[0]["custom_id"], "good");
    let errors = api.lines(&done["error_file_id"]).await;
    let failed: Vec<(&str, &str)> = errors
        .iter()
        .map(|l| {
            assert_eq!(l["response"]["status_code"], 400, "{l}");
            let e = &l["response"]["body"]["error"];
            assert_eq!(e["type"], "invalid_request_error", "{l}");
            (
                l["custom_id"].as_str().unwrap(),
                e["param"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(failed, [("bad", "max_tokens"), ("streamed", "stream")]);

    // /v1/completions batches answer text completions.
    let line = json!({"custom_id": "text", "method": "POST", "url": "/v1/completions",
                      "body": {"prompt": "The sea is", "max_tokens": 3, "temperature": 0}});
    let input = api.upload(&[line.to_string()]).await;
    let created = api.create(&input, "/v1/completions").await;
    let done = api.finished(created["id"].as_str().unwrap()).await;
    let output = api.lines(&done["output_file_id"]).await;
    assert_eq!(output[0]["response"]["body"]["object"], "text_completion");

    // An endpoint no batch runs is refused at create, naming the param.
    let (status, e) = api
        .post(
            "/v1/batches",
            json!({"input_file_id": input, "endpoint": "/v1/embeddings", "completion_window": "24h"}),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{e}");
    assert_eq!(e["error"]["param"], "endpoint");
    let (status, e) = api
        .post(
            "/v1/batches",
            json!({"input_file_id": "file-nope", "endpoint": CHAT, "completion_window": "24h"}),
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_stops_dispatching_and_the_lines_that_ran_are_kept() {
    let api = Api::start(&["--batch-concurrency", "1"]);
    let lines: Vec<String> = (0..6)
        .map(|i| {
            let mut body = ask(&format!("w{i}"), 48);
            body["ignore_eos"] = json!(true);
            chat_line(&format!("line-{i}"), body)
        })
        .collect();
    let input = api.upload(&lines).await;
    let created = api.create(&input, CHAT).await;
    let id = created["id"].as_str().unwrap();
    api.wait_for(id, |b| b["status"] == "in_progress").await;
    let (status, cancelling) = api
        .post(&format!("/v1/batches/{id}/cancel"), json!({}))
        .await;
    assert_eq!(status, StatusCode::OK, "{cancelling}");
    assert!(
        ["cancelling", "cancelled"].contains(&cancelling["status"].as_str().unwrap()),
        "{cancelling}"
    );
    let done = api.finished(id).await;
    assert_eq!(done["status"], "cancelled", "{done}");
    assert!(done["cancelling_at"].is_u64() && done["cancelled_at"].is_u64());
    let counts = &done["request_counts"];
    let ran = counts["completed"].as_u64().unwrap() + counts["failed"].as_u64().unwrap();
    assert_eq!(counts["total"], 6);
    // One line in the engine at a time: at most the one in flight when
    // the cancel came, and the one before it, ran.
    assert!(ran <= 2, "{done}");
    if counts["completed"].as_u64().unwrap() > 0 {
        let output = api.lines(&done["output_file_id"]).await;
        assert_eq!(output.len() as u64, counts["completed"].as_u64().unwrap());
    }
    // Cancelling again changes nothing.
    let (status, again) = api
        .post(&format!("/v1/batches/{id}/cancel"), json!({}))
        .await;
    assert_eq!(
        (status, &again["status"]),
        (StatusCode::OK, &json!("cancelled"))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_duplicate_custom_id_or_an_empty_file_fails_the_batch() {
    let api = Api::start(&[]);
    let lines = [
        chat_line("same", ask("a", 2)),
        chat_line("other", ask("b", 2)),
        chat_line("same", ask("c", 2)),
    ];
    let input = api.upload(&lines).await;
    let created = api.create(&input, CHAT).await;
    let done = api.finished(created["id"].as_str().unwrap()).await;
    assert_eq!(done["status"], "failed", "{done}");
    assert!(done["failed_at"].is_u64());
    assert_eq!(done["errors"]["object"], "list");
    let e = &done["errors"]["data"][0];
    assert_eq!(
        (&e["code"], &e["line"]),
        (&json!("duplicate_custom_id"), &json!(3)),
        "{done}"
    );
    assert!(done["output_file_id"].is_null());
    assert_eq!(done["request_counts"]["completed"], 0);

    let input = api.upload(&[String::new()]).await;
    let created = api.create(&input, CHAT).await;
    let done = api.finished(created["id"].as_str().unwrap()).await;
    assert_eq!(done["errors"]["data"][0]["code"], "empty_file", "{done}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_are_stored_listed_read_and_deleted_within_the_store_cap() {
    let api = Api::start(&["--batch-store-mb", "1"]);
    let content = chat_line("a", ask("a", 2));
    let (status, file) = api.upload_as(content.as_bytes(), Some("batch")).await;
    assert_eq!(status, StatusCode::OK, "{file}");
    let id = file["id"].as_str().unwrap();
    assert!(id.starts_with("file-"));
    assert_eq!(file["object"], "file");
    assert_eq!(file["bytes"], content.len());
    assert_eq!(file["filename"], "input.jsonl");
    assert_eq!(file["purpose"], "batch");

    let (_, meta) = api.get(&format!("/v1/files/{id}")).await;
    assert_eq!(meta, file);
    let (_, list) = api.get("/v1/files?purpose=batch").await;
    assert_eq!(list["data"][0]["id"], id);
    let got = api.lines(&file["id"]).await;
    assert_eq!(got[0]["custom_id"], "a");

    // Missing parts, another purpose, an oversized upload.
    let (status, e) = api.upload_as(b"x", None).await;
    assert_eq!(
        (status, &e["error"]["param"]),
        (StatusCode::BAD_REQUEST, &json!("purpose"))
    );
    let (status, e) = api.upload_as(b"x", Some("fine-tune")).await;
    assert_eq!(
        (status, &e["error"]["param"]),
        (StatusCode::BAD_REQUEST, &json!("purpose"))
    );
    let (status, e) = api.upload_as(&vec![b'x'; 1 << 20], Some("batch")).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE, "{e}");
    assert!(e["error"]["message"]
        .as_str()
        .unwrap()
        .contains("--batch-store-mb"));

    let r = api
        .client
        .delete(api.server.url(&format!("/v1/files/{id}")))
        .send()
        .await
        .unwrap();
    assert_eq!(
        r.json::<Value>().await.unwrap(),
        json!({"id": id, "object": "file", "deleted": true})
    );
    for path in [format!("/v1/files/{id}"), format!("/v1/files/{id}/content")] {
        let (status, e) = api.get(&path).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{path}: {e}");
        assert_eq!(e["error"]["type"], "invalid_request_error");
    }
    let (status, _) = api.get("/v1/batches/batch_nope").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

fn request(body: Value, priority: Priority) -> GenerationRequest {
    let mut r = ChatRequest::from_json(body.to_string().as_bytes())
        .unwrap()
        .to_generation()
        .unwrap();
    r.priority = priority;
    r
}

/// Two slots, two batch requests queued before an interactive one, all in
/// one step: the interactive one is admitted first and one batch request
/// beside it (the last slot never goes to the batch), so the second batch
/// request still waits when the interactive reply is done.
#[test]
fn batch_sequences_yield_decode_slots_to_interactive_requests() {
    let engine = Engine::start(
        "smollm2",
        EngineConfig {
            concurrent: 2,
            ..Default::default()
        },
    )
    .expect("run scripts/setup.sh first");
    let long = |word: &str| {
        let mut body = ask(word, 32);
        body["ignore_eos"] = json!(true);
        request(body, Priority::Batch)
    };
    let mut short = ask("now", 4);
    short["ignore_eos"] = json!(true);
    let streams = engine
        .submit_together(&[
            long("one"),
            long("two"),
            request(short, Priority::Interactive),
        ])
        .unwrap();
    let [first, second, interactive]: [_; 3] = streams.try_into().ok().unwrap();
    let reply = interactive.collect_blocking().unwrap();
    assert_eq!(reply.usage.completion_tokens, 4);
    assert_eq!(
        engine.stats().waiting,
        1,
        "the second batch request should still wait for the first's slot"
    );
    for batch in [first, second] {
        assert_eq!(
            batch.collect_blocking().unwrap().usage.completion_tokens,
            32
        );
    }
}
