//! Grades by the official clients' word (`--clients`): recorded replies
//! the checks' rules fail, replayed through openai-python and
//! anthropic-python (the project's Python, as scripts/setup.sh installs
//! it; `AFM_PYTHON` names another), then regraded by what the clients did.
//! Each test holds one example where the replay and the rules disagree, or
//! where they agree and the client's words become the evidence.

use std::path::PathBuf;

use afm_harness::clients::grade::{regrade, Replayed};
use afm_harness::clients::{ClientOutcome, Clients};
use afm_harness::protocol::exchange::Exchange;
use afm_harness::suite::checks::{Failure, Grade};
use afm_harness::suite::Case;
use serde_json::{json, Value};

fn python() -> PathBuf {
    std::env::var_os("AFM_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../.cache/venv/bin/python")
        })
}

/// The case's failures by its checks' rules, then regraded by the replay
/// of `exchanges` (each failure's grade and the client's words).
fn graded(case: &str, exchanges: &[Exchange]) -> Vec<Failure> {
    let case: Case = toml::from_str(&format!(
        "id = \"t.case\"\nname = \"t\"\ntier = \"smoke\"\n{case}"
    ))
    .expect("a case");
    let subjects: Vec<usize> = (0..exchanges.len()).collect();
    let mut failures: Vec<Failure> = case
        .checks
        .iter()
        .flat_map(|c| c.evaluate(exchanges, &subjects))
        .collect();
    assert!(!failures.is_empty(), "the rules find nothing to grade");
    let clients = Clients::start(&python()).expect("the replay starts");
    let outcomes: Vec<Option<ClientOutcome>> =
        exchanges.iter().map(|e| clients.replay(e)).collect();
    let replayed: Vec<Replayed> = exchanges
        .iter()
        .zip(&outcomes)
        .map(|(e, o)| Replayed::of(&e.path, &e.request, e.streamed, e.status, o.as_ref()))
        .collect();
    regrade(&case, &mut failures, &replayed);
    failures
}

fn whole(status: u16, body: Value) -> Exchange {
    Exchange {
        path: "/v1/chat/completions".into(),
        request: json!({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 5}),
        status,
        headers: [("content-type".to_string(), "application/json".to_string())].into(),
        body,
        ..Default::default()
    }
}

fn completion(message: Value) -> Value {
    json!({"id": "c1", "object": "chat.completion", "created": 1, "model": "m",
           "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
           "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4}})
}

fn chunk(object: &str, delta: Value, finish: Option<&str>, usage: Option<Value>) -> Value {
    let choices = match usage {
        Some(_) => json!([]),
        None => json!([{"index": 0, "delta": delta, "finish_reason": finish}]),
    };
    json!({"id": "c1", "object": object, "created": 1, "model": "m", "choices": choices,
           "usage": usage})
}

fn stream(request: Value, chunks: Vec<Value>) -> Exchange {
    Exchange {
        path: "/v1/chat/completions".into(),
        request,
        status: 200,
        headers: [("content-type".to_string(), "text/event-stream".to_string())].into(),
        events: vec![String::new(); chunks.len()],
        chunks,
        done_marker: true,
        streamed: true,
        ..Default::default()
    }
}

/// A streamed "Hi" ending with `finish`, then mlx-lm's usage chunk whose
/// `object` says `chat.completion` (the rules fail that constant).
fn usage_labelled_stream(finish: &str) -> Exchange {
    let request = json!({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 5,
                         "stream": true, "stream_options": {"include_usage": true}});
    let usage = json!({"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4});
    let chunks = vec![
        chunk(
            "chat.completion.chunk",
            json!({"role": "assistant", "content": "Hi"}),
            None,
            None,
        ),
        chunk("chat.completion.chunk", json!({}), Some(finish), None),
        chunk("chat.completion", json!({}), None, Some(usage)),
    ];
    stream(request, chunks)
}

fn grades(failures: &[Failure]) -> Vec<(&str, Grade)> {
    failures
        .iter()
        .map(|f| (f.check.as_str(), f.grade))
        .collect()
}

/// The right status with a body off OpenAI's shape: openai-python still
/// raises `BadRequestError`; its user loses the message.
#[test]
fn an_error_body_off_openais_shape_is_degraded_by_the_clients_word() {
    let ex = whole(400, json!({"detail": "Unknown role: wizard"}));
    let f = graded(
        r#"check = [{ kind = "status", equals = 400 }, { kind = "error_body" }]"#,
        &[ex],
    );
    assert_eq!(grades(&f), [("error_body", Grade::Degraded)]);
    let quote = f[0].client.as_deref().unwrap();
    assert!(
        quote.starts_with("openai-python ") && quote.contains("raised BadRequestError (400)"),
        "{quote}"
    );
}

/// mlx-lm's last chunk (the usage) says `object: chat.completion`: the
/// rules fail the constant; `create(stream=True)` yields it, usage and
/// all, but the `.stream()` helper the SDK's docs recommend drops it, so
/// its user gets no usage: degraded, and the evidence says so.
#[test]
fn a_usage_chunk_labelled_chat_completion_loses_the_stream_helpers_usage() {
    let f = graded(
        r#"mode = "stream"
check = [{ kind = "schema" }]"#,
        &[usage_labelled_stream("stop")],
    );
    assert_eq!(grades(&f), [("schema", Grade::Degraded)]);
    let quote = f[0].client.as_deref().unwrap();
    assert!(
        quote.contains("chat.completions.stream() helper returned")
            && quote.contains("\"usage\":null")
            && quote.contains("its user loses the reply's usage"),
        "{quote}"
    );
}

/// A choice without its `index`: the SDK hands its user an object whose
/// declared field is missing, so the rules' failure stands.
#[test]
fn a_reply_missing_a_field_the_sdk_declares_stays_a_failure() {
    let mut body = completion(json!({"role": "assistant", "content": "hi"}));
    body["choices"][0].as_object_mut().unwrap().remove("index");
    let f = graded(r#"check = [{ kind = "schema" }]"#, &[whole(200, body)]);
    assert_eq!(grades(&f), [("schema", Grade::Fail)]);
    let quote = f[0].client.as_deref().unwrap();
    assert!(quote.contains("choices.0.index: Field required"), "{quote}");
}

/// Streamed arguments sent whole twice (`{..}{..}`): a behaviour failure
/// whatever the client does, with the arguments its user got as evidence.
#[test]
fn duplicated_streamed_arguments_stay_a_failure_quoting_what_the_client_got() {
    let tools = json!([{"type": "function", "function": {"name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                       "required": ["city"]}}}]);
    let request = json!({"messages": [{"role": "user", "content": "Weather in Paris?"}],
                         "tools": tools, "max_tokens": 40, "stream": true});
    let call = |args: &str, first: bool| {
        let mut tc = json!({"index": 0, "function": {"arguments": args}});
        if first {
            tc["id"] = json!("call_1");
            tc["type"] = json!("function");
            tc["function"]["name"] = json!("get_weather");
        }
        chunk(
            "chat.completion.chunk",
            json!({"tool_calls": [tc]}),
            None,
            None,
        )
    };
    let chunks = vec![
        call(r#"{"city": "Paris"}"#, true),
        call(r#"{"city": "Paris"}"#, false),
        chunk("chat.completion.chunk", json!({}), Some("tool_calls"), None),
    ];
    let f = graded(
        r#"mode = "stream"
check = [{ kind = "tool_args" }]"#,
        &[stream(request, chunks)],
    );
    assert_eq!(grades(&f), [("tool_args", Grade::Fail)]);
    let quote = f[0].client.as_deref().unwrap();
    assert!(
        quote.contains(r#"{\"city\": \"Paris\"}{\"city\": \"Paris\"}"#),
        "{quote}"
    );
}

/// An unknown role answered 200, in a case marked lenient: the server
/// accepts what the spec forbids; graded apart from failures.
#[test]
fn a_forbidden_request_answered_is_lenient_where_the_case_says_so() {
    let ex = whole(
        200,
        completion(json!({"role": "assistant", "content": "hi"})),
    );
    let case = r#"lenient = true
check = [{ kind = "status", equals = 400 }, { kind = "error_body" }]"#;
    let f = graded(case, std::slice::from_ref(&ex));
    assert_eq!(
        grades(&f),
        [("status", Grade::Lenient), ("error_body", Grade::Lenient)]
    );
    // Not marked lenient, the same answer is a failure.
    let f = graded(&case.replace("lenient = true", ""), &[ex]);
    assert_eq!(grades(&f)[0], ("status", Grade::Fail));
}

/// A stream cut at its max_tokens (finish_reason "length") is no client
/// failure: the SDK's `.parse()` step raises LengthFinishReasonError on
/// any such reply, so the replay reads the accumulated completion instead
/// (degraded only for the usage chunk the helper drops, as above).
#[test]
fn a_stream_cut_at_max_tokens_is_read_not_raised() {
    let f = graded(
        r#"mode = "stream"
check = [{ kind = "schema" }]"#,
        &[usage_labelled_stream("length")],
    );
    assert_eq!(grades(&f), [("schema", Grade::Degraded)]);
    let quote = f[0].client.as_deref().unwrap();
    assert!(quote.contains("\"finish_reason\":\"length\""), "{quote}");
}
