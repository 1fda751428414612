//! afm-serve over HTTP: every kind of bad input gets its status and an
//! OpenAI-style error body, the server keeps serving, a client that hangs
//! up mid-stream frees its slot, CORS preflight is answered, and SIGTERM
//! lets an in-flight request finish; `ignore_eos` runs to `max_tokens`; a
//! request past the KV budget is refused naming the flag.

use crate::support::{metric, Server};
use reqwest::{Client, StatusCode};
use serde_json::{json, Value};

async fn post(client: &Client, url: &str, body: impl Into<reqwest::Body>) -> (StatusCode, Value) {
    let r = client
        .post(url)
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .unwrap();
    let status = r.status();
    (status, r.json().await.unwrap_or(Value::Null))
}

fn assert_error(status: StatusCode, body: &Value, expected: StatusCode, what: &str) {
    assert_eq!(status, expected, "{what}: {body}");
    let e = &body["error"];
    assert!(
        e["message"].as_str().is_some_and(|m| !m.is_empty()),
        "{what}: {body}"
    );
    assert!(e["type"].is_string(), "{what}: {body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_gets_its_status_and_an_openai_error_body() {
    let server = Server::start(&["--max-body-mb", "1"]);
    let client = Client::new();
    let chat = server.url("/v1/chat/completions");
    let user = |extra: Value| {
        let mut b = json!({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2});
        for (k, v) in extra.as_object().unwrap() {
            b[k] = v.clone();
        }
        b.to_string()
    };
    let cases: Vec<(&str, String, StatusCode)> = vec![
        (
            "malformed JSON",
            "{\"messages\": [".into(),
            StatusCode::BAD_REQUEST,
        ),
        ("not an object", "[1, 2]".into(), StatusCode::BAD_REQUEST),
        (
            "missing messages",
            json!({"max_tokens": 3}).to_string(),
            StatusCode::BAD_REQUEST,
        ),
        (
            "empty messages",
            json!({"messages": []}).to_string(),
            StatusCode::BAD_REQUEST,
        ),
        (
            "wrong field type",
            user(json!({"max_tokens": "five"})),
            StatusCode::BAD_REQUEST,
        ),
        (
            "messages not a list",
            json!({"messages": "hi"}).to_string(),
            StatusCode::BAD_REQUEST,
        ),
        (
            "unknown role",
            json!({"messages": [{"role": "wizard", "content": "x"}]}).to_string(),
            StatusCode::BAD_REQUEST,
        ),
        (
            "top_logprobs too big",
            user(json!({"logprobs": true, "top_logprobs": 21})),
            StatusCode::BAD_REQUEST,
        ),
        (
            "invalid schema",
            user(
                json!({"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "nope"}}}}),
            ),
            StatusCode::BAD_REQUEST,
        ),
        (
            "n too large",
            user(json!({"n": 17})),
            StatusCode::BAD_REQUEST,
        ),
        (
            "legacy functions",
            user(json!({"functions": [{"name": "f", "parameters": {}}]})),
            StatusCode::BAD_REQUEST,
        ),
        (
            "an image part",
            json!({"messages": [{"role": "user", "content": [
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA=="}}]}]})
            .to_string(),
            StatusCode::BAD_REQUEST,
        ),
        (
            "unknown model",
            user(json!({"model": "gpt-9"})),
            StatusCode::NOT_FOUND,
        ),
        (
            "oversized body",
            user(json!({"pad": "x".repeat(2 << 20)})),
            StatusCode::PAYLOAD_TOO_LARGE,
        ),
    ];
    for (what, body, expected) in &cases {
        // A fresh connection each: after a 413 the server closes the
        // connection without reading the rest of the body.
        let (status, value) = post(&Client::new(), &chat, body.clone()).await;
        assert_error(status, &value, *expected, what);
    }
    let (status, value) = post(
        &client,
        &server.url("/v1/completions"),
        json!({"max_tokens": 2, "prompt": {"text": "hi"}}).to_string(),
    )
    .await;
    assert_error(
        status,
        &value,
        StatusCode::BAD_REQUEST,
        "completion with an object as prompt",
    );
    let r = client
        .get(server.url("/v1/nothing-here"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::NOT_FOUND);

    // CORS preflight.
    let r = client
        .request(reqwest::Method::OPTIONS, &chat)
        .header("origin", "http://example.test")
        .header("access-control-request-method", "POST")
        .header(
            "access-control-request-headers",
            "content-type,authorization",
        )
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success(), "{}", r.status());
    assert!(r.headers().contains_key("access-control-allow-origin"));

    // Still serving, and the rejections were counted.
    let (status, value) = post(&client, &chat, user(json!({"temperature": 0}))).await;
    assert_eq!(status, StatusCode::OK, "{value}");
    let metrics = client
        .get(server.url("/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert_eq!(
        metric(&metrics, "afm_requests_total{outcome=\"rejected\"}"),
        cases.len() as u64 + 2
    );
}

/// With grammar constraints off, a request that needs them is refused on
/// every protocol, in the protocol's error shape, naming the flag: never a
/// 200 that ignored the schema.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_grammar_constraints_a_constrained_request_is_refused_naming_the_flag() {
    let server = Server::start(&["--no-grammar-constraints"]);
    let client = Client::new();
    let schema =
        json!({"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]});
    let user = json!([{"role": "user", "content": "Give me JSON."}]);
    let cases = [
        (
            "/v1/chat/completions",
            json!({"messages": user, "max_tokens": 8,
                "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": schema}}}),
            "response_format",
        ),
        (
            "/v1/chat/completions",
            json!({"messages": user, "max_tokens": 8, "tool_choice": "required",
                "tools": [{"type": "function", "function": {"name": "f", "parameters": schema}}]}),
            "tool_choice",
        ),
        (
            "/v1/messages",
            json!({"messages": user, "max_tokens": 8,
                "output_config": {"format": {"type": "json_schema", "schema": schema}}}),
            "output_config.format",
        ),
        (
            "/v1/responses",
            json!({"input": "Give me JSON.", "max_output_tokens": 8,
                "text": {"format": {"type": "json_schema", "name": "x", "schema": schema}}}),
            "text.format",
        ),
    ];
    for (path, body, param) in cases {
        let (status, value) = post(&client, &server.url(path), body.to_string()).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{path}: {value}");
        let message = value["error"]["message"].as_str().unwrap_or_default();
        assert!(
            message.contains("--no-grammar-constraints"),
            "{path}: {value}"
        );
        assert!(message.starts_with(param), "{path}: {value}");
        if path == "/v1/messages" {
            assert_eq!(value["type"], "error", "{value}");
        } else {
            assert_eq!(value["error"]["param"], param, "{value}");
        }
    }
}

/// The KV budget: a request whose prompt plus max_tokens could never fit
/// is a 400 naming the flag (never admitted to run the machine out of
/// memory); requests that fit are served, one at a time if need be.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_past_the_kv_budget_is_refused_naming_the_flag() {
    // SmolLM2-135M keeps 45 KiB of KV per token: 1 MiB holds 22 tokens.
    let server = Server::start(&["--max-kv-mb", "1"]);
    let client = Client::new();
    let big =
        json!({"messages": [{"role": "user", "content": "Tell me a story."}], "max_tokens": 100});
    let (status, value) = post(
        &client,
        &server.url("/v1/chat/completions"),
        big.to_string(),
    )
    .await;
    assert_error(
        status,
        &value,
        StatusCode::BAD_REQUEST,
        "past the KV budget",
    );
    let message = value["error"]["message"].as_str().unwrap();
    assert!(message.contains("--max-kv-mb"), "{value}");
    assert_eq!(value["error"]["param"], "max_tokens", "{value}");
    let small = json!({"prompt": "Hi", "max_tokens": 4, "temperature": 0});
    let url = server.url("/v1/completions");
    let (a, b) = tokio::join!(
        post(&client, &url, small.to_string()),
        post(&client, &url, small.to_string())
    );
    assert_eq!((a.0, b.0), (StatusCode::OK, StatusCode::OK), "{a:?} {b:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_or_missing_key_is_401() {
    let server = Server::start(&["--api-key", "sekrit"]);
    let client = Client::new();
    let body =
        json!({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 1}).to_string();
    for key in [None, Some("wrong")] {
        let mut r = client
            .post(server.url("/v1/chat/completions"))
            .body(body.clone());
        if let Some(k) = key {
            r = r.bearer_auth(k);
        }
        let r = r.send().await.unwrap();
        let status = r.status();
        assert_error(
            status,
            &r.json().await.unwrap(),
            StatusCode::UNAUTHORIZED,
            "key",
        );
    }
    let r = client
        .post(server.url("/v1/chat/completions"))
        .bearer_auth("sekrit")
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    // Health stays open for probes.
    assert_eq!(
        client
            .get(server.url("/health"))
            .send()
            .await
            .unwrap()
            .status(),
        StatusCode::OK
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_hangs_up_mid_stream_frees_its_slot() {
    let server = Server::start(&["--concurrent", "1"]);
    let client = Client::new();
    let body = json!({
        "messages": [{"role": "user", "content": "Write a long essay about the ocean."}],
        "max_tokens": 400, "temperature": 0, "stream": true,
        "logit_bias": {"2": -100}
    });
    let mut r = client
        .post(server.url("/v1/chat/completions"))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let first = r.chunk().await.unwrap().unwrap();
    assert!(String::from_utf8_lossy(&first).starts_with("data: "));
    drop(r);
    // With one slot, this only runs once the abandoned stream is cancelled.
    let quick = json!({"messages": [{"role": "user", "content": "Say hi."}], "max_tokens": 3});
    let r = client
        .post(server.url("/v1/chat/completions"))
        .json(&quick)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let metrics = client
        .get(server.url("/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert_eq!(
        metric(&metrics, "afm_requests_total{outcome=\"cancelled\"}"),
        1
    );
    assert!(metric(&metrics, "afm_completion_tokens_total") < 400);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_lets_the_in_flight_request_finish() {
    let server = Server::start(&[]);
    let url = server.url("/v1/chat/completions");
    let request = tokio::spawn(async move {
        let body = json!({
            "messages": [{"role": "user", "content": "Count from one to twenty."}],
            "max_tokens": 40, "temperature": 0, "logit_bias": {"2": -100}
        });
        let r = Client::new().post(url).json(&body).send().await.unwrap();
        (r.status(), r.json::<Value>().await.unwrap())
    });
    tokio::time::sleep(std::time::Duration::from_millis(700)).await;
    let status = tokio::task::spawn_blocking(move || server.terminate())
        .await
        .unwrap();
    let (code, body) = request.await.unwrap();
    assert_eq!(code, StatusCode::OK, "{body}");
    assert_eq!(body["choices"][0]["finish_reason"], "length");
    assert_eq!(body["usage"]["completion_tokens"], 40);
    assert!(status.success(), "exit status {status:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ignore_eos_generates_exactly_max_tokens() {
    let server = Server::start(&[]);
    let client = Client::new();
    let url = server.url("/v1/chat/completions");
    let ask = |ignore: bool| {
        json!({"messages": [{"role": "user", "content": "Reply with the single word yes."}],
            "max_tokens": 40, "temperature": 0, "ignore_eos": ignore})
        .to_string()
    };
    let (status, natural) = post(&client, &url, ask(false)).await;
    assert_eq!(status, StatusCode::OK, "{natural}");
    let ended = natural["usage"]["completion_tokens"].as_u64().unwrap();
    assert!(ended < 40, "the model ends its turn by itself: {natural}");
    let (status, forced) = post(&client, &url, ask(true)).await;
    assert_eq!(status, StatusCode::OK, "{forced}");
    assert_eq!(forced["usage"]["completion_tokens"], 40, "{forced}");
    assert_eq!(forced["choices"][0]["finish_reason"], "length", "{forced}");
}
