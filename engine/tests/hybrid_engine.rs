//! The batch engine on a hybrid model (Qwen3.5: Gated DeltaNet layers with
//! a recurrent state, random weights from fixtures/models/random): the
//! seed bug classes that live in a hybrid model's prefix cache. Requests
//! arriving together share an uncached prefix through a state snapshot
//! and each reply is what it is alone (seed 001); one arriving after the
//! shared prefix was computed resumes at the last chunk end inside it;
//! the same prompt again resumes at its last but one token; the next turn
//! of a conversation resumes where the previous turn's reply ended.

use std::path::PathBuf;

use afm_engine::api::ChatRequest;
use afm_engine::{Completion, Engine, EngineConfig, GenerationRequest};
use serde_json::json;

fn engine(prefix_caching: bool) -> Engine {
    engine_chunked(prefix_caching, EngineConfig::default().prefill_chunk)
}

/// An engine that prefills at most `prefill_chunk` tokens per step.
fn engine_chunked(prefix_caching: bool, prefill_chunk: usize) -> Engine {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fixtures/models/random/qwen3_5");
    Engine::start(
        dir.to_str().unwrap(),
        EngineConfig {
            prefix_caching,
            // Bit-exact replies whatever the batch or the cache (Qwen3.5
            // dense runs batch-invariant): a reply compared with its run
            // alone can never differ by a near tie.
            deterministic: true,
            concurrent: 8,
            prefill_chunk,
            ..Default::default()
        },
    )
    .unwrap()
}

fn request(body: serde_json::Value) -> GenerationRequest {
    ChatRequest::from_json(body.to_string().as_bytes())
        .unwrap()
        .to_generation()
        .unwrap()
}

fn question(i: usize) -> GenerationRequest {
    let rules: String = (0..12).map(|r| format!("Rule {r}: be brief. ")).collect();
    request(json!({
        "messages": [
            {"role": "system", "content": rules},
            {"role": "user", "content": format!("Question {i}: which colour is {}?", i * 7)}
        ],
        "max_tokens": 8,
        "temperature": 0
    }))
}

fn alone(engine: &Engine, r: &GenerationRequest) -> Completion {
    engine.submit(r).unwrap().collect_blocking().unwrap()
}

#[test]
fn requests_arriving_together_share_a_prefix_through_a_snapshot_and_stay_isolated() {
    let cold_engine = engine(false);
    let requests: Vec<GenerationRequest> = (0..8).map(question).collect();
    let expected: Vec<String> = requests
        .iter()
        .map(|r| alone(&cold_engine, r).text)
        .collect();

    let engine = engine(true);
    let prompts: Vec<Vec<u32>> = requests
        .iter()
        .map(|r| engine.prompt_tokens(r).unwrap())
        .collect();
    let shared = prompts[1..]
        .iter()
        .map(|p| {
            p.iter()
                .zip(&prompts[0])
                .take_while(|(a, b)| a == b)
                .count()
        })
        .min()
        .unwrap();
    assert!(shared >= 200, "shared prefix of {shared} tokens");

    // Queued in one step: whatever the threads' timing, the first request
    // has not run ahead alone (a hybrid's state is kept only at chunk ends,
    // so one that had would leave nothing to resume inside the prefix).
    let out: Vec<Completion> = engine
        .submit_together(&requests)
        .unwrap()
        .into_iter()
        .map(|s| s.collect_blocking().unwrap())
        .collect();
    let mut cold = 0;
    for (i, c) in out.iter().enumerate() {
        assert_eq!(c.text, expected[i], "reply {i} differs from its run alone");
        match c.usage.cached_tokens {
            0 => cold += 1,
            n => assert!(
                n >= shared && n < prompts[i].len(),
                "request {i}: cached {n}, shared {shared}"
            ),
        }
    }
    assert_eq!(cold, 1, "exactly one request computes the shared prefix");
    let total: usize = prompts.iter().map(Vec::len).sum();
    let cached: usize = out.iter().map(|c| c.usage.cached_tokens).sum();
    assert_eq!(
        engine.stats().prefill_computed_tokens as usize,
        total - cached,
        "cached_tokens is what was really reused"
    );

    // The same prompt again resumes at its last but one token.
    let again = alone(&engine, &question(3));
    assert_eq!(again.usage.cached_tokens, prompts[3].len() - 1);
    assert_eq!(again.text, expected[3]);
}

#[test]
fn a_request_after_the_shared_prefix_was_computed_resumes_at_the_last_chunk_end_inside_it() {
    let cold_engine = engine(false);
    let engine = engine_chunked(true, 64);
    let (first, second) = (question(0), question(1));
    let prompts = [&first, &second].map(|r| engine.prompt_tokens(r).unwrap());
    let shared = prompts[0]
        .iter()
        .zip(&prompts[1])
        .take_while(|(a, b)| a == b)
        .count();
    let chunk = engine.config().prefill_chunk;
    assert!(shared > 2 * chunk, "shared prefix of {shared} tokens");

    alone(&engine, &first);
    let late = alone(&engine, &second);
    // The first request's state was kept at each of its chunk ends.
    assert_eq!(late.usage.cached_tokens, shared / chunk * chunk);
    assert_eq!(late.text, alone(&cold_engine, &second).text);
}

#[test]
fn the_next_turn_resumes_where_the_last_reply_ended() {
    let engine = engine(true);
    // A reply fixed by a grammar, so the next turn's prompt holds exactly
    // the tokens the model wrote.
    let first = json!([{"role": "user", "content": "Say yes."}]);
    let turn1 = request(json!({
        "messages": first,
        "max_tokens": 16,
        "temperature": 0,
        "response_format": {"type": "json_schema", "json_schema": {
            "name": "answer", "strict": true,
            "schema": {"type": "string", "enum": ["yes"]}
        }}
    }));
    let prompt1 = engine.prompt_tokens(&turn1).unwrap();
    let reply = alone(&engine, &turn1);
    assert_eq!(reply.text, "\"yes\"");

    let turn2 = request(json!({
        "messages": [
            first[0],
            {"role": "assistant", "content": reply.text},
            {"role": "user", "content": "Again."}
        ],
        "max_tokens": 4,
        "temperature": 0
    }));
    let out = alone(&engine, &turn2);
    // The prompt and the reply's five tokens, whose state was kept when
    // the turn finished (before it only the prompt's last but one token
    // had a snapshot).
    assert_eq!(out.usage.cached_tokens, prompt1.len() + 5);
}
