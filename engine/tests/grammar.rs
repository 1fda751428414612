//! Structured output with llguidance on the bundled model: strict schemas
//! hold under concurrency, over many seeds, streamed, and for forced tool
//! calls; bad schemas are request errors; with grammar constraints off a
//! request that needs one is refused naming the flag, never served
//! unconstrained.

use crate::support::together::release_together;

use std::sync::Arc;

use afm_engine::api::ChatRequest;
use afm_engine::runtime::GrammarMode;
use afm_engine::{Engine, EngineConfig, EngineError, EngineEvent, FinishReason, GenerationRequest};
use serde_json::{json, Value};

fn engine(grammar_constraints: bool, concurrent: usize) -> Arc<Engine> {
    Arc::new(
        Engine::start(
            "smollm2",
            EngineConfig {
                grammar_constraints,
                prefix_caching: true,
                concurrent,
                ..Default::default()
            },
        )
        .expect("run scripts/setup.sh first"),
    )
}

fn request(body: Value) -> GenerationRequest {
    ChatRequest::from_json(body.to_string().as_bytes())
        .unwrap()
        .to_generation()
        .unwrap()
}

fn city_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "city": {"type": "string", "minLength": 1, "maxLength": 24},
            "country": {"type": "string", "minLength": 1, "maxLength": 24},
            "population_millions": {"type": "integer", "minimum": 0, "maximum": 100}
        },
        "required": ["city", "country", "population_millions"],
        "additionalProperties": false
    })
}

fn strict_format(schema: &Value) -> Value {
    json!({"type": "json_schema", "json_schema": {"name": "answer", "schema": schema, "strict": true}})
}

fn assert_valid(text: &str, schema: &Value) -> Value {
    let value: Value =
        serde_json::from_str(text).unwrap_or_else(|e| panic!("not JSON ({e}): {text:?}"));
    let validator = jsonschema::validator_for(schema).unwrap();
    if let Err(e) = validator.validate(&value) {
        panic!("{text} does not match the schema: {e}");
    }
    value
}

#[test]
fn sixteen_concurrent_strict_requests_sharing_a_prompt_are_all_valid() {
    let engine = engine(true, 16);
    let system: String = (0..30)
        .map(|i| format!("Guideline {i}: answer with accurate facts. "))
        .collect();
    let cities = [
        "Paris", "Tokyo", "Lima", "Cairo", "Oslo", "Rome", "Madrid", "Berlin", "Dublin", "Vienna",
        "Athens", "Lisbon", "Prague", "Warsaw", "Seoul", "Nairobi",
    ];
    let schema = city_schema();
    let requests = cities
        .iter()
        .map(|c| {
            request(json!({
                "messages": [
                    {"role": "system", "content": system},
                    {"role": "user", "content": format!("Give facts about {c} as JSON.")}
                ],
                "response_format": strict_format(&schema),
                "max_tokens": 80,
                "temperature": 0
            }))
        })
        .collect();
    let out = release_together(&engine, requests);
    for c in &out {
        assert!(!c.text.is_empty(), "empty reply");
        assert_eq!(c.finish_reason, Some(FinishReason::Stop), "{c:?}");
        assert_valid(&c.text, &schema);
    }
    assert!(out.iter().filter(|c| c.usage.cached_tokens > 0).count() >= 15);
}

#[test]
fn a_complex_schema_holds_over_twenty_seeds_and_when_streamed() {
    let engine = engine(true, 20);
    let schema = json!({
        "type": "object",
        "properties": {
            "name": {"type": "string", "minLength": 1, "maxLength": 20},
            "age": {"type": "integer", "minimum": 0, "maximum": 120},
            "tags": {"type": "array", "items": {"type": "string", "maxLength": 12}, "minItems": 1, "maxItems": 3},
            "address": {
                "type": "object",
                "properties": {
                    "street": {"type": "string", "maxLength": 24},
                    "zip": {"type": "string", "pattern": "^[0-9]{5}$"}
                },
                "required": ["street", "zip"],
                "additionalProperties": false
            },
            "role": {"enum": ["admin", "user", "guest"]},
            "manager": {"anyOf": [{"type": "string", "maxLength": 20}, {"type": "null"}]}
        },
        "required": ["name", "age", "tags", "address", "role", "manager"],
        "additionalProperties": false
    });
    let body = |seed: u64| {
        json!({
            "messages": [{"role": "user", "content": "Invent a person record as JSON."}],
            "response_format": strict_format(&schema),
            "max_tokens": 160,
            "temperature": 1.0,
            "seed": seed
        })
    };
    let out = release_together(&engine, (0..20).map(|s| request(body(s))).collect());
    let mut distinct = std::collections::BTreeSet::new();
    for c in &out {
        assert_eq!(c.finish_reason, Some(FinishReason::Stop), "{c:?}");
        assert_valid(&c.text, &schema);
        distinct.insert(c.text.clone());
    }
    assert!(distinct.len() > 10, "seeds should give different records");

    let mut stream = engine.submit(&request(body(99))).unwrap();
    assert_eq!(stream.grammar, GrammarMode::Enforced);
    let mut text = String::new();
    let mut deltas = 0;
    while let Some(e) = stream.next_blocking() {
        match e {
            EngineEvent::Delta { text: t, .. } => {
                text.push_str(&t);
                deltas += 1;
            }
            EngineEvent::Finished { .. } => break,
            EngineEvent::Failed { message, .. } => panic!("{message}"),
            EngineEvent::Started { .. } => {}
        }
    }
    assert!(deltas > 5, "streamed in pieces");
    assert_valid(&text, &schema);
}

#[test]
fn a_forced_strict_tool_call_has_valid_arguments() {
    let engine = engine(true, 4);
    let params = json!({
        "type": "object",
        "properties": {
            "city": {"type": "string", "maxLength": 30},
            "days": {"type": "integer", "minimum": 1, "maximum": 14},
            "unit": {"enum": ["celsius", "fahrenheit"]}
        },
        "required": ["city", "days", "unit"],
        "additionalProperties": false
    });
    let tools = json!([
        {"type": "function", "function": {"name": "get_forecast", "strict": true, "parameters": params}},
        {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object", "properties": {}}}}
    ]);
    for choice in [
        json!("required"),
        json!({"type": "function", "function": {"name": "get_forecast"}}),
    ] {
        let c = engine
            .submit(&request(json!({
                "messages": [{"role": "user", "content": "What will the weather be in Oslo for the next 3 days?"}],
                "tools": tools,
                "tool_choice": choice,
                "max_tokens": 100,
                "temperature": 0
            })))
            .unwrap()
            .collect_blocking()
            .unwrap();
        // The forced call is parsed into a tool call, not left as text.
        assert_eq!(c.finish_reason, Some(FinishReason::ToolCalls), "{c:?}");
        assert!(c.text.is_empty(), "{c:?}");
        let [call] = &c.tool_calls[..] else {
            panic!("one call expected: {c:?}");
        };
        if choice.is_object() {
            assert_eq!(call.name, "get_forecast");
        }
        if call.name == "get_forecast" {
            assert_valid(&call.arguments, &params);
        }
    }
}

#[test]
fn limits_errors_and_downgrade() {
    let engine = engine(true, 4);
    let schema = city_schema();
    // max_tokens reached mid-JSON: finish_reason length.
    let c = engine
        .submit(&request(json!({
            "messages": [{"role": "user", "content": "Facts about Paris as JSON."}],
            "response_format": strict_format(&schema),
            "max_tokens": 5
        })))
        .unwrap()
        .collect_blocking()
        .unwrap();
    assert_eq!(c.finish_reason, Some(FinishReason::Length));
    assert!(c.text.starts_with('{'), "{c:?}");

    // An unconstrained request in the same engine is unaffected.
    let plain = engine
        .submit(&request(json!({
            "messages": [{"role": "user", "content": "What is the capital of France?"}],
            "max_tokens": 20, "temperature": 0
        })))
        .unwrap();
    assert_eq!(plain.grammar, GrammarMode::None);
    assert!(plain.collect_blocking().unwrap().text.contains("Paris"));

    // An invalid schema is a request error naming the field.
    let bad = request(json!({
        "messages": [{"role": "user", "content": "x"}],
        "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "object", "properties": {"a": {"type": "no-such-type"}}}}}
    }));
    match engine.submit(&bad) {
        Err(EngineError::InvalidRequest { param, message }) => {
            assert_eq!(param.as_deref(), Some("response_format"), "{message}");
        }
        other => panic!(
            "expected a request error, got {:?}",
            other.map(|s| s.grammar)
        ),
    }

    // With constraints off, every request that needs one is refused,
    // naming the flag; only tool_choice "none" (kept by the output parser)
    // is served, marked downgraded.
    let off = self::engine(false, 2);
    let tool = json!({"type": "function", "function": {"name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}});
    let mut strict_tool = tool.clone();
    strict_tool["function"]["strict"] = json!(true);
    let user = json!([{"role": "user", "content": "Weather in Paris?"}]);
    for (extra, param) in [
        (
            json!({"response_format": strict_format(&schema)}),
            "response_format",
        ),
        (
            json!({"response_format": {"type": "json_object"}}),
            "response_format",
        ),
        (
            json!({"tools": [tool.clone()], "tool_choice": "required"}),
            "tool_choice",
        ),
        (
            json!({"tools": [tool.clone()], "tool_choice": {"type": "function", "function": {"name": "get_weather"}}}),
            "tool_choice",
        ),
        (json!({"tools": [strict_tool]}), "tools"),
    ] {
        let mut body = json!({"messages": user, "max_tokens": 8});
        for (k, v) in extra.as_object().unwrap() {
            body[k] = v.clone();
        }
        match off.submit(&request(body)) {
            Err(EngineError::InvalidRequest {
                param: Some(p),
                message,
            }) => {
                assert_eq!(p, param, "{message}");
                assert!(message.contains("--no-grammar-constraints"), "{message}");
            }
            other => panic!(
                "{param}: expected a refusal, got {:?}",
                other.map(|s| s.grammar)
            ),
        }
    }
    let s = off
        .submit(&request(json!({"messages": user, "max_tokens": 8,
            "tools": [tool], "tool_choice": "none"})))
        .unwrap();
    assert_eq!(s.grammar, GrammarMode::Downgraded);
    assert!(s.collect_blocking().is_ok());
}
