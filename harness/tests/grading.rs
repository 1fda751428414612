//! The schema check's grade on real replies: vLLM 0.32.0's, which the
//! official SDKs parse (`model_validate` of openai 3.54.0's and anthropic
//! 1.13.0's types; error bodies read by their `APIError`), are off the
//! published schema's letter only: graded `spec`, never `fail`. No engine
//! and no server needed.

use afm_harness::protocol::exchange::Exchange;
use afm_harness::protocol::spec_schemas::deviations;
use serde_json::Value;

fn replies() -> Vec<(String, Exchange)> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/vllm-0.32.0-replies.json"
    );
    let file: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    file["replies"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(name, r)| {
            let ex = Exchange {
                path: r["path"].as_str().unwrap().into(),
                status: r["status"].as_u64().unwrap() as u16,
                body: r["body"].clone(),
                ..Default::default()
            };
            (name.clone(), ex)
        })
        .collect()
}

#[test]
fn replies_the_sdks_parse_never_grade_fail() {
    for (name, ex) in replies() {
        let found = deviations(&ex);
        assert_eq!(found.breaking, Vec::<String>::new(), "{name}");
    }
}

/// The letter still sees them: each a deviation the grade keeps visible.
#[test]
fn the_letter_still_finds_what_the_sdks_forgive() {
    let letter: Vec<(String, usize)> = replies()
        .into_iter()
        .map(|(name, ex)| (name, deviations(&ex).letter.len()))
        .collect();
    for name in [
        // `error` left out (a nullable $ref), output text `logprobs: null`.
        "responses.basic",
        // an integer error `code` (openai-python reads str(code)).
        "chat.image",
        "responses.missing_input",
        // a tool_use block without `caller` (a default in the schema).
        "messages.forced_tool",
    ] {
        let n = letter.iter().find(|(n, _)| n == name).unwrap().1;
        assert!(n > 0, "{name}: {letter:?}");
    }
}
