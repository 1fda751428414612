//! Reasoning, the thinking budget and tool calls end to end: the bundled
//! model behind the OpenAI API layer, with a chat template that opens a
//! `<think>` block in the prompt (as Qwen3-style templates do), so the
//! model's output starts inside reasoning.

use afm_engine::api::{ApiContext, ApiResponse};
use afm_engine::{Engine, EngineConfig};
use futures_util::StreamExt;
use serde_json::{json, Value};

/// ChatML, as the bundled model was trained on, plus a reasoning block
/// opened by the template; `enable_thinking: false` writes it closed.
const THINKING_TEMPLATE: &str = r#"{%- for message in messages -%}
{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>\n' }}
{%- endfor -%}
{%- if add_generation_prompt -%}
{{ '<|im_start|>assistant\n' }}
{%- if enable_thinking is defined and enable_thinking is false -%}
{{ '<think>\n\n</think>\n\n' }}
{%- else -%}
{{ '<think>\n' }}
{%- endif -%}
{%- endif -%}"#;

fn api(config: EngineConfig) -> ApiContext {
    let engine = Engine::start("smollm2", config).expect("run scripts/setup.sh first");
    ApiContext::new(engine, "smollm2")
}

fn thinking_api(default_budget: Option<usize>) -> ApiContext {
    api(EngineConfig {
        chat_template: Some(THINKING_TEMPLATE.into()),
        thinking_budget: default_budget,
        concurrent: 2,
        ..Default::default()
    })
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
}

fn complete(api: &ApiContext, body: &Value) -> Value {
    let bytes = serde_json::to_vec(body).unwrap();
    match runtime().block_on(api.chat_completions(&bytes)) {
        Ok(ApiResponse::Complete { body, .. }) => body,
        Ok(ApiResponse::Stream { .. }) => panic!("asked for a whole response"),
        Err(e) => panic!("{e:?}"),
    }
}

fn stream(api: &ApiContext, body: &Value) -> Vec<Value> {
    let mut body = body.clone();
    body["stream"] = json!(true);
    let bytes = serde_json::to_vec(&body).unwrap();
    runtime().block_on(async {
        let Ok(ApiResponse::Stream { events, .. }) = api.chat_completions(&bytes).await else {
            panic!("asked for a stream");
        };
        let events: Vec<_> = events.collect().await;
        events
            .iter()
            .filter(|e| e.data != "[DONE]")
            .map(|e| serde_json::from_str(&e.data).unwrap())
            .collect()
    })
}

fn question(q: &str, max_tokens: u32) -> Value {
    json!({
        "messages": [
            {"role": "system", "content": "You are a helpful assistant. Think step by step."},
            {"role": "user", "content": q}
        ],
        "max_tokens": max_tokens,
        "temperature": 0
    })
}

fn reasoning_tokens(body: &Value) -> u64 {
    body["usage"]["completion_tokens_details"]["reasoning_tokens"]
        .as_u64()
        .expect("usage.completion_tokens_details.reasoning_tokens")
}

fn assert_no_markers(content: &str) {
    for marker in ["<think>", "</think>"] {
        assert!(!content.contains(marker), "marker in content: {content:?}");
    }
}

/// Seed 002: reasoning took the whole `max_tokens` and content was empty.
#[test]
fn a_thinking_model_with_max_tokens_50_still_answers() {
    let api = thinking_api(None);
    let body = complete(&api, &question("What is the capital of France?", 50));
    let message = &body["choices"][0]["message"];
    let content = message["content"].as_str().unwrap_or_default();
    assert!(!content.trim().is_empty(), "no content: {body}");
    assert_no_markers(content);
    let reasoning = message["reasoning_content"].as_str().unwrap_or_default();
    assert!(!reasoning.trim().is_empty(), "no reasoning: {body}");
    assert_no_markers(reasoning);
    let spent = reasoning_tokens(&body);
    // A quarter of max_tokens (at least 16) is kept for the answer.
    assert!(spent > 0 && spent <= 50 - 16, "reasoning tokens {spent}");
    assert!(body["usage"]["completion_tokens"].as_u64().unwrap() <= 50);
}

#[test]
fn the_thinking_budget_ends_reasoning_and_content_follows() {
    let forced_close = 8; // generous bound on the tokens of "\n</think>\n\n"
    let api = thinking_api(Some(12));
    let ask = question("Explain in detail why the sky is blue.", 120);

    // The server default applies when the request sets none.
    let body = complete(&api, &ask);
    let spent = reasoning_tokens(&body);
    assert!(
        spent >= 12 && spent <= 12 + forced_close,
        "spent {spent}: {body}"
    );
    let content = body["choices"][0]["message"]["content"]
        .as_str()
        .unwrap_or_default();
    assert!(!content.trim().is_empty(), "no content: {body}");
    assert_no_markers(content);

    // A request's own budget overrides it.
    let mut own = ask.clone();
    own["thinking_budget"] = json!(4);
    let body = complete(&api, &own);
    let spent = reasoning_tokens(&body);
    assert!(
        spent >= 4 && spent <= 4 + forced_close,
        "spent {spent}: {body}"
    );
    assert!(!body["choices"][0]["message"]["content"]
        .as_str()
        .unwrap_or_default()
        .trim()
        .is_empty());
}

#[test]
fn streamed_reasoning_and_content_match_the_whole_response() {
    let api = thinking_api(Some(10));
    let ask = question("Name three primary colours.", 60);
    let whole = complete(&api, &ask);
    let chunks = stream(&api, &ask);
    let (mut reasoning, mut content) = (String::new(), String::new());
    let mut reasoning_chunks = 0;
    for c in &chunks {
        let delta = &c["choices"][0]["delta"];
        if let Some(r) = delta["reasoning_content"].as_str() {
            reasoning.push_str(r);
            reasoning_chunks += 1;
        }
        if let Some(t) = delta["content"].as_str() {
            assert_no_markers(t);
            content.push_str(t);
        }
    }
    assert!(reasoning_chunks > 1, "reasoning is streamed in pieces");
    let message = &whole["choices"][0]["message"];
    assert_eq!(reasoning, message["reasoning_content"].as_str().unwrap());
    assert_eq!(content, message["content"].as_str().unwrap());
    let last = chunks.last().unwrap();
    assert_eq!(
        last["choices"][0]["finish_reason"],
        whole["choices"][0]["finish_reason"]
    );
}

#[test]
fn enable_thinking_false_gives_no_reasoning() {
    let api = thinking_api(None);
    let mut ask = question("What is the capital of France?", 30);
    ask["chat_template_kwargs"] = json!({"enable_thinking": false});
    let body = complete(&api, &ask);
    let message = &body["choices"][0]["message"];
    assert!(message.get("reasoning_content").is_none(), "{body}");
    assert_eq!(reasoning_tokens(&body), 0);
    let content = message["content"].as_str().unwrap();
    assert!(content.contains("Paris"), "{body}");
}

#[test]
fn tool_calls_stream_in_openai_shape_and_match_the_whole_response() {
    let api = api(EngineConfig {
        grammar_constraints: true,
        concurrent: 2,
        ..Default::default()
    });
    let params = json!({
        "type": "object",
        "properties": {
            "city": {"type": "string", "maxLength": 20},
            "days": {"type": "integer", "minimum": 1, "maximum": 7},
            "metric": {"type": "boolean"}
        },
        "required": ["city", "days", "metric"],
        "additionalProperties": false
    });
    let ask = json!({
        "messages": [{"role": "user", "content": "Weather in Oslo for 3 days, in celsius?"}],
        "tools": [{"type": "function", "function": {
            "name": "get_forecast", "strict": true, "parameters": params
        }}],
        "tool_choice": "required",
        "max_tokens": 80,
        "temperature": 0
    });

    let whole = complete(&api, &ask);
    let choice = &whole["choices"][0];
    assert_eq!(choice["finish_reason"], "tool_calls", "{whole}");
    let message = &choice["message"];
    assert!(message["content"].is_null(), "only a call: {whole}");
    let calls = message["tool_calls"].as_array().expect("tool_calls");
    assert_eq!(calls.len(), 1, "{whole}");
    let call = &calls[0];
    assert_eq!(call["type"], "function");
    assert_eq!(call["function"]["name"], "get_forecast");
    let id = call["id"].as_str().unwrap();
    assert!(id.starts_with("call_"), "{id}");
    let arguments = call["function"]["arguments"].as_str().unwrap();
    let parsed: Value = serde_json::from_str(arguments).expect("arguments are JSON");
    assert!(
        parsed["days"].is_i64() && parsed["metric"].is_boolean(),
        "{parsed}"
    );

    let chunks = stream(&api, &ask);
    let pieces: Vec<&Value> = chunks
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["tool_calls"].as_array())
        .flatten()
        .collect();
    let first = pieces.first().expect("streamed tool-call deltas");
    assert_eq!(first["index"], 0);
    assert_eq!(first["type"], "function");
    assert_eq!(first["function"]["name"], "get_forecast");
    assert_eq!(first["function"]["arguments"], "");
    let streamed_id = first["id"].as_str().unwrap();
    assert_ne!(streamed_id, id, "ids are unique across requests");
    let mut streamed = String::new();
    for p in &pieces[1..] {
        assert_eq!(p["index"], 0);
        assert!(p.get("id").is_none() && p["function"].get("name").is_none());
        streamed.push_str(p["function"]["arguments"].as_str().unwrap());
    }
    assert!(pieces.len() > 2, "arguments arrive in fragments");
    assert_eq!(
        streamed, arguments,
        "fragments concatenate to the arguments"
    );
    let finish = chunks
        .iter()
        .find_map(|c| c["choices"][0]["finish_reason"].as_str())
        .unwrap();
    assert_eq!(finish, "tool_calls");
}

/// A conversation whose earlier turns called `lookup`: the model follows
/// the pattern, so it writes a call unless something stops it.
fn calling_pattern(tool_choice: Value) -> Value {
    let call = |q: &str| {
        format!("<tool_call>\n{{\"name\": \"lookup\", \"arguments\": {{\"q\": \"{q}\"}}}}\n</tool_call>")
    };
    json!({
        "messages": [
            {"role": "user", "content": "Look up cats."},
            {"role": "assistant", "content": call("cats")},
            {"role": "user", "content": "Look up dogs."},
            {"role": "assistant", "content": call("dogs")},
            {"role": "user", "content": "Look up birds."}
        ],
        "tools": [{"type": "function", "function": {"name": "lookup", "parameters": {
            "type": "object", "properties": {"q": {"type": "string"}}}}}],
        "tool_choice": tool_choice,
        "max_tokens": 40,
        "temperature": 0
    })
}

#[test]
fn tool_choice_none_forbids_the_call_that_auto_parses() {
    let api = api(EngineConfig {
        grammar_constraints: true,
        concurrent: 2,
        ..Default::default()
    });
    // Unconstrained, the model's own call text is parsed into a call with
    // arguments typed by the schema.
    let auto = complete(&api, &calling_pattern(json!("auto")));
    let choice = &auto["choices"][0];
    assert_eq!(choice["finish_reason"], "tool_calls", "{auto}");
    let call = &choice["message"]["tool_calls"][0]["function"];
    assert_eq!(call["name"], "lookup");
    let args: Value = serde_json::from_str(call["arguments"].as_str().unwrap()).unwrap();
    assert!(args["q"].is_string(), "{auto}");

    // With "none" the grammar forbids the call marker, and nothing is parsed.
    let none = complete(&api, &calling_pattern(json!("none")));
    let message = &none["choices"][0]["message"];
    assert!(message.get("tool_calls").is_none(), "{none}");
    let content = message["content"].as_str().unwrap();
    assert!(!content.contains("<tool_call>"), "{none}");
    assert_ne!(none["choices"][0]["finish_reason"], "tool_calls");
}

fn assert_matches_schema(text: &str, schema: &Value) {
    let value: Value = serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}: {text:?}"));
    let validator = jsonschema::validator_for(schema).unwrap();
    assert!(validator.is_valid(&value), "{text} does not match {schema}");
}

#[test]
fn with_thinking_on_the_constraint_starts_after_reasoning() {
    let api = api(EngineConfig {
        chat_template: Some(THINKING_TEMPLATE.into()),
        grammar_constraints: true,
        concurrent: 2,
        ..Default::default()
    });
    let schema = json!({
        "type": "object",
        "properties": {
            "city": {"type": "string", "maxLength": 20},
            "population": {"type": "integer"}
        },
        "required": ["city", "population"],
        "additionalProperties": false
    });
    let mut ask = question("Give the largest city of France and its population.", 100);
    ask["thinking_budget"] = json!(12);
    ask["response_format"] = json!({"type": "json_schema",
        "json_schema": {"name": "city", "strict": true, "schema": schema}});
    let body = complete(&api, &ask);
    let message = &body["choices"][0]["message"];
    assert_eq!(body["choices"][0]["finish_reason"], "stop", "{body}");
    assert!(
        !message["reasoning_content"]
            .as_str()
            .unwrap_or_default()
            .trim()
            .is_empty(),
        "reasoning is free before the constraint: {body}"
    );
    assert!(reasoning_tokens(&body) > 0);
    assert_matches_schema(message["content"].as_str().unwrap().trim(), &schema);

    // A forced call after reasoning.
    let params = json!({"type": "object", "properties": {"q": {"type": "string", "maxLength": 20}},
                        "required": ["q"], "additionalProperties": false});
    let mut ask = question("Search the web for the weather in Paris.", 100);
    ask["thinking_budget"] = json!(8);
    ask["tools"] =
        json!([{"type": "function", "function": {"name": "search", "parameters": params}}]);
    ask["tool_choice"] = json!("required");
    let body = complete(&api, &ask);
    let choice = &body["choices"][0];
    assert_eq!(choice["finish_reason"], "tool_calls", "{body}");
    assert!(reasoning_tokens(&body) > 0, "{body}");
    let call = &choice["message"]["tool_calls"][0]["function"];
    assert_eq!(call["name"], "search");
    assert_matches_schema(call["arguments"].as_str().unwrap(), &params);
}

#[test]
fn a_strict_tool_under_auto_allows_text_or_a_valid_call() {
    let api = api(EngineConfig {
        grammar_constraints: true,
        concurrent: 2,
        ..Default::default()
    });
    let strict = |mut body: Value| {
        body["tools"] = json!([{"type": "function", "function": {"name": "lookup", "strict": true,
            "parameters": {"type": "object", "properties": {"q": {"type": "string", "maxLength": 20}},
                           "required": ["q"], "additionalProperties": false}}}]);
        body
    };
    // The model chooses to call: the call is valid against the schema.
    let called = complete(&api, &strict(calling_pattern(json!("auto"))));
    let choice = &called["choices"][0];
    assert_eq!(choice["finish_reason"], "tool_calls", "{called}");
    let args = choice["message"]["tool_calls"][0]["function"]["arguments"]
        .as_str()
        .unwrap();
    let args: Value = serde_json::from_str(args).unwrap();
    assert!(
        args["q"].as_str().is_some_and(|q| q.len() <= 20),
        "{called}"
    );

    // The model chooses to answer: plain text is untouched.
    let mut ask = question("What is the capital of France?", 20);
    ask["tool_choice"] = json!("auto");
    let answered = complete(&api, &strict(ask));
    let message = &answered["choices"][0]["message"];
    assert!(message.get("tool_calls").is_none(), "{answered}");
    assert!(
        message["content"].as_str().unwrap().contains("Paris"),
        "{answered}"
    );
}

/// The conformance model (fixtures/models/conformance/): `<think>`, `</think>`,
/// `<tool_call>` and `</tool_call>` are added tokens that are not special,
/// as in Qwen3's tokenizer, and its own template opens the think block.
fn conformance_api() -> ApiContext {
    let engine = Engine::start(
        "conformance",
        EngineConfig {
            grammar_constraints: true,
            concurrent: 2,
            ..Default::default()
        },
    )
    .expect("run scripts/setup.sh first");
    ApiContext::new(engine, "conformance")
}

#[test]
fn constraints_after_reasoning_take_marker_tokens_that_are_not_special() {
    // The grammar once spelled such markers as bytes, which the token trie
    // never matches: every constrained request with thinking on failed
    // with "token </think> doesn't satisfy the grammar".
    let api = conformance_api();
    let schema = json!({"type": "object", "properties": {"city": {"type": "string", "maxLength": 20}},
                        "required": ["city"], "additionalProperties": false});
    let mut ask = question("Which city is the capital of France? Reply in JSON.", 80);
    ask["response_format"] = json!({"type": "json_schema",
        "json_schema": {"name": "city", "strict": true, "schema": schema}});
    let body = complete(&api, &ask);
    let message = &body["choices"][0]["message"];
    assert_eq!(body["choices"][0]["finish_reason"], "stop", "{body}");
    assert!(reasoning_tokens(&body) > 0, "{body}");
    assert_matches_schema(message["content"].as_str().unwrap().trim(), &schema);

    let params = json!({"type": "object", "properties": {"city": {"type": "string", "maxLength": 20}},
                        "required": ["city"], "additionalProperties": false});
    let tools =
        json!([{"type": "function", "function": {"name": "get_weather", "parameters": params}}]);
    let mut ask = question("What is the weather in Oslo?", 80);
    ask["tools"] = tools.clone();
    ask["tool_choice"] = json!("required");
    let body = complete(&api, &ask);
    let choice = &body["choices"][0];
    assert_eq!(choice["finish_reason"], "tool_calls", "{body}");
    let call = &choice["message"]["tool_calls"][0]["function"];
    assert_eq!(call["name"], "get_weather");
    assert_matches_schema(call["arguments"].as_str().unwrap(), &params);

    // A strict tool under auto: text or a valid call, never an error.
    let mut ask = question("What is the weather in Rome?", 80);
    ask["tools"] = json!([{"type": "function", "function": {"name": "get_weather", "strict": true,
                                                          "parameters": params}}]);
    let body = complete(&api, &ask);
    assert!(body.get("error").is_none(), "{body}");
    assert_eq!(body["choices"][0]["finish_reason"], "tool_calls", "{body}");
}

#[test]
fn a_stop_sequence_ends_the_answer_not_the_reasoning() {
    // The model's reasoning names the lighthouse too ("I will describe a
    // lighthouse ..."): matched there, the reply ended with no content.
    let api = conformance_api();
    let mut ask = question("Describe a lighthouse in one sentence.", 60);
    ask["stop"] = json!(["lighthouse"]);
    let body = complete(&api, &ask);
    let message = &body["choices"][0]["message"];
    let reasoning = message["reasoning_content"].as_str().unwrap_or_default();
    let content = message["content"].as_str().unwrap_or_default();
    assert!(reasoning.contains("lighthouse"), "{body}");
    assert!(!content.trim().is_empty(), "{body}");
    assert!(!content.contains("lighthouse"), "{body}");
    assert_eq!(body["choices"][0]["finish_reason"], "stop", "{body}");
}

#[test]
fn a_newline_stop_is_not_met_by_the_separator_after_the_reasoning() {
    // `</think>\n\n` then the answer: the separator is not the answer, so a
    // stop of "\n" ends the answer at its own first line break, not before
    // it (an empty reply).
    let api = conformance_api();
    let mut ask = question("List five fruits, one per line.", 60);
    let whole = complete(&api, &ask);
    ask["stop"] = json!(["\n"]);
    let body = complete(&api, &ask);
    let want = whole["choices"][0]["message"]["content"].as_str().unwrap();
    let want = want.split('\n').next().unwrap();
    assert!(!want.trim().is_empty(), "{whole}");
    let content = body["choices"][0]["message"]["content"]
        .as_str()
        .unwrap_or_default();
    assert_eq!(content.trim_end(), want.trim_end(), "{body}");
}
