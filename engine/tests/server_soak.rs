//! Soak: 200 mixed requests (plain, streaming, strict JSON, forced tool
//! call, long shared prompt, cancelled mid-stream) at concurrency 16
//! against one afm-serve. No 5xx, no empty reply without a reason, the
//! metrics add up, and the server is healthy and idle afterwards.

use std::sync::Arc;

use crate::support::{metric, Server};
use reqwest::{Client, StatusCode};
use serde_json::{json, Value};
use tokio::sync::Semaphore;

const REQUESTS: usize = 200;
const CONCURRENCY: usize = 16;

#[derive(Debug)]
enum Outcome {
    Done { completion_tokens: u64 },
    Cancelled,
}

fn body(i: usize) -> Value {
    let user = format!("Question {i}: name a colour.");
    match i % 6 {
        0 => json!({"messages": [{"role": "user", "content": user}], "max_tokens": 8}),
        1 => json!({"messages": [{"role": "user", "content": user}], "max_tokens": 8,
                    "stream": true, "stream_options": {"include_usage": true}}),
        2 => json!({"messages": [{"role": "user", "content": user}], "max_tokens": 40,
                    "response_format": {"type": "json_schema", "json_schema": {"name": "c", "strict": true,
                        "schema": {"type": "object", "properties": {"colour": {"type": "string", "maxLength": 12}},
                                   "required": ["colour"], "additionalProperties": false}}}}),
        3 => json!({"messages": [{"role": "user", "content": user}], "max_tokens": 60,
                    "tools": [{"type": "function", "function": {"name": "paint", "strict": true,
                        "parameters": {"type": "object", "properties": {"colour": {"type": "string", "maxLength": 12}},
                                       "required": ["colour"], "additionalProperties": false}}}],
                    "tool_choice": "required"}),
        4 => {
            let system: String = (0..60)
                .map(|r| format!("Rule {r} of set {}: be brief. ", i % 3))
                .collect();
            json!({"messages": [{"role": "system", "content": system}, {"role": "user", "content": user}],
                   "max_tokens": 8})
        }
        _ => {
            json!({"messages": [{"role": "user", "content": "Write a long poem."}], "max_tokens": 200,
                    "stream": true, "logit_bias": {"2": -100}})
        }
    }
}

async fn run_one(client: &Client, url: &str, i: usize) -> Outcome {
    let body = body(i);
    let mut r = client.post(url).json(&body).send().await.unwrap();
    let status = r.status();
    assert!(!status.is_server_error(), "request {i}: {status}");
    assert_eq!(
        status,
        StatusCode::OK,
        "request {i}: {}",
        r.text().await.unwrap_or_default()
    );
    if i % 6 == 5 {
        let _ = r.chunk().await.unwrap();
        return Outcome::Cancelled;
    }
    if body["stream"] == true {
        let text = r.text().await.unwrap();
        let chunks: Vec<Value> = text
            .lines()
            .filter_map(|l| l.strip_prefix("data: "))
            .filter(|d| *d != "[DONE]")
            .map(|d| serde_json::from_str(d).unwrap())
            .collect();
        assert!(text.trim_end().ends_with("data: [DONE]"), "request {i}");
        let content: String = chunks
            .iter()
            .filter_map(|c| c["choices"][0]["delta"]["content"].as_str())
            .collect();
        let finish = chunks
            .iter()
            .find_map(|c| c["choices"][0]["finish_reason"].as_str());
        let usage = &chunks.last().unwrap()["usage"];
        check_reply(
            i,
            &content,
            finish,
            usage["completion_tokens"].as_u64().unwrap(),
        );
        return Outcome::Done {
            completion_tokens: usage["completion_tokens"].as_u64().unwrap(),
        };
    }
    let v: Value = r.json().await.unwrap();
    let message = &v["choices"][0]["message"];
    let content = message["content"].as_str().unwrap_or_default();
    let finish = v["choices"][0]["finish_reason"].as_str();
    let tokens = v["usage"]["completion_tokens"].as_u64().unwrap();
    match i % 6 {
        2 if finish == Some("stop") => {
            let parsed: Value =
                serde_json::from_str(content).unwrap_or_else(|e| panic!("{i}: {e}: {content}"));
            assert!(parsed["colour"].is_string(), "{content}");
        }
        // A forced call that completed is a parsed tool call.
        3 if finish != Some("length") => {
            assert_eq!(finish, Some("tool_calls"), "request {i}: {v}");
            let call = &message["tool_calls"][0]["function"];
            assert_eq!(call["name"], "paint", "{v}");
            let args: Value = serde_json::from_str(call["arguments"].as_str().unwrap()).unwrap();
            assert!(args["colour"].is_string(), "{v}");
            return Outcome::Done {
                completion_tokens: tokens,
            };
        }
        _ => {}
    }
    check_reply(i, content, finish, tokens);
    Outcome::Done {
        completion_tokens: tokens,
    }
}

/// An empty reply is fine only with a reason: the model ended at once.
fn check_reply(i: usize, content: &str, finish: Option<&str>, tokens: u64) {
    assert!(
        matches!(finish, Some("stop") | Some("length")),
        "request {i}: finish {finish:?}"
    );
    assert!(
        !content.is_empty() || (finish == Some("stop") && tokens <= 1),
        "request {i}: empty reply"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_hundred_mixed_requests_at_concurrency_sixteen() {
    let server = Server::start(&[
        "--concurrent",
        "16",
        "--enable-prefix-caching",
        "--enable-grammar-constraints",
    ]);
    let client = Client::new();
    let url = server.url("/v1/chat/completions");
    let permits = Arc::new(Semaphore::new(CONCURRENCY));
    let tasks: Vec<_> = (0..REQUESTS)
        .map(|i| {
            let (client, url, permits) = (client.clone(), url.clone(), permits.clone());
            tokio::spawn(async move {
                let _permit = permits.acquire().await.unwrap();
                run_one(&client, &url, i).await
            })
        })
        .collect();
    let mut done = 0;
    let mut cancelled = 0;
    let mut tokens = 0;
    for t in tasks {
        match t.await.unwrap() {
            Outcome::Done { completion_tokens } => {
                done += 1;
                tokens += completion_tokens;
            }
            Outcome::Cancelled => cancelled += 1,
        }
    }
    assert_eq!(done + cancelled, REQUESTS as u64);

    // Cancellations land at the engine's next step; wait until idle.
    let mut metrics = String::new();
    for _ in 0..100 {
        metrics = client
            .get(server.url("/metrics"))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        if metric(&metrics, "afm_running_sequences") == 0
            && metric(&metrics, "afm_waiting_sequences") == 0
        {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(metric(&metrics, "afm_running_sequences"), 0);
    assert_eq!(
        metric(&metrics, "afm_requests_total{outcome=\"finished\"}"),
        done
    );
    assert_eq!(
        metric(&metrics, "afm_requests_total{outcome=\"cancelled\"}"),
        cancelled
    );
    assert_eq!(
        metric(&metrics, "afm_requests_total{outcome=\"failed\"}"),
        0
    );
    assert_eq!(
        metric(&metrics, "afm_requests_total{outcome=\"rejected\"}"),
        0
    );
    let total = metric(&metrics, "afm_completion_tokens_total");
    assert!(
        total >= tokens,
        "metrics count {total} completion tokens, replies {tokens}"
    );
    assert!(metric(&metrics, "afm_prefix_cache_hits_total") > 0);
    let r = client.get(server.url("/health")).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::OK);
}
