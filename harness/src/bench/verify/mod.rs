//! Every reply checked under load, with afm-test's own checks where one
//! exists: the stream keeps its protocol's rules and ends with usage; a
//! reply holds no other request's isolation marker (cross-talk between
//! concurrent sequences); a strict-schema reply validates and carries its
//! own marker (the schema makes it a constant); tool calls parse against
//! their tools. A failed check makes the request a corrupted one, never a
//! success.

pub mod coverage;
pub mod recount;
pub mod schema_probe;

use std::collections::HashSet;

use regex::Regex;
use serde_json::{json, Value};

use crate::bench::dataset::hash;
use crate::bench::sample::{FailedCheck, Sample};
use crate::protocol::dialect::Dialect;
use crate::protocol::exchange::Exchange;
use crate::suite::checks::{check_one, Check};

/// The isolation marker of a conversation's turn in a level.
pub fn marker(salt: &str, conversation: usize, turn: usize) -> String {
    format!(
        "AFM-{:06x}",
        hash(&format!("{salt}/{conversation}/{turn}")) & 0xff_ffff
    )
}

/// How a request asks for its marker back: one short sentence after the
/// prompt. Small models may not obey; a reply without its own marker is
/// then unverified, never a failure (only another's marker is).
pub fn ask_for(marker: &str) -> String {
    format!("\nBegin your reply with the tag {marker}.")
}

/// A small strict schema whose `tag` must be the request's own marker, so
/// a constrained reply carries it whatever the model, and whose other
/// field is bounded, so the reply fits any budget of 64 tokens.
pub fn schema_for(marker: &str) -> Value {
    json!({
        "type": "object",
        "properties": {
            "tag": {"type": "string", "const": marker},
            "mood": {"type": "string", "enum": ["calm", "busy", "curious"]}
        },
        "required": ["tag", "mood"],
        "additionalProperties": false
    })
}

/// The markers of a level's requests, to tell another request's marker
/// in a reply from text that only looks like one.
pub struct Markers {
    all: HashSet<String>,
    pattern: Regex,
}

impl Markers {
    pub fn new(all: impl IntoIterator<Item = String>) -> Self {
        Markers {
            all: all.into_iter().collect(),
            pattern: Regex::new(r"AFM-[0-9a-f]{6}").expect("a pattern"),
        }
    }

    pub fn insert(&mut self, marker: String) {
        self.all.insert(marker);
    }

    /// Markers of other requests found in `text`.
    fn foreign<'t>(&self, text: &'t str, own: Option<&str>) -> Vec<&'t str> {
        self.pattern
            .find_iter(text)
            .map(|m| m.as_str())
            .filter(|m| Some(*m) != own && self.all.contains(*m))
            .collect()
    }
}

/// Checks a served reply; failures go to `sample.failed_checks`, or to
/// `sample.tolerated` for the kinds the user named (`--tolerate`: a known
/// deviation, still counted, that should not hide the rest).
pub fn check(sample: &mut Sample, ex: &Exchange, markers: &Markers, tolerate: &[String]) {
    if !sample.served() {
        return;
    }
    let mut fail = |check: &str, detail: String| {
        let failed = FailedCheck {
            check: check.into(),
            detail,
        };
        if tolerate.iter().any(|t| t == check) {
            sample.tolerated.push(failed);
        } else {
            sample.failed_checks.push(failed);
        }
    };
    if let Err((expected, actual)) = Dialect::of(ex).stream_protocol(ex) {
        fail("stream", format!("expected {expected}; got {actual}"));
    }
    let usage = Check::Usage {
        completion_max: None,
        reasoning_min: None,
        reasoning_max: None,
    };
    if let Err((expected, actual)) = check_one(&usage, ex) {
        fail("usage", format!("expected {expected}; got {actual}"));
    }
    let foreign = markers.foreign(&sample.content, sample.marker.as_deref());
    if !foreign.is_empty() {
        fail(
            "isolation",
            format!(
                "the reply to the request tagged {} holds {}: another request's reply",
                sample.marker.as_deref().unwrap_or("(none)"),
                foreign.join(", ")
            ),
        );
    }
    if sample.schema {
        if let Err((expected, actual)) = check_one(&Check::JsonSchema { schema: None }, ex) {
            fail("schema", format!("expected {expected}; got {actual}"));
        }
    }
    let has_tools = ex.request.get("tools").is_some_and(|t| t.is_array());
    if has_tools {
        if let Err((expected, actual)) = check_one(&Check::ToolArgs, ex) {
            fail("tool_args", format!("expected {expected}; got {actual}"));
        }
    }
}

/// Whether a served reply carried its own marker (isolation verified for
/// it, not only not refuted).
pub fn own_marker_seen(sample: &Sample) -> bool {
    sample
        .marker
        .as_deref()
        .is_some_and(|m| sample.content.contains(m))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn served(content: &str, marker: &str) -> (Sample, Exchange) {
        let ex = Exchange {
            path: "/v1/chat/completions".into(),
            status: 200,
            streamed: true,
            done_marker: true,
            chunks: vec![
                json!({"id": "c", "object": "chat.completion.chunk",
                    "choices": [{"index": 0, "delta": {"role": "assistant", "content": content}, "finish_reason": "stop"}]}),
                json!({"id": "c", "object": "chat.completion.chunk",
                    "choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}}),
            ],
            events: vec![String::new(), String::new()],
            chunk_millis: vec![1.0, 2.0],
            request: json!({"messages": [], "stream": true, "stream_options": {"include_usage": true}}),
            millis: 3.0,
            ..Default::default()
        };
        let mut s = Sample::of(&ex);
        s.marker = Some(marker.into());
        (s, ex)
    }

    #[test]
    fn another_requests_marker_is_cross_talk_and_a_missing_own_is_not() {
        let markers = Markers::new(["AFM-000001".to_string(), "AFM-000002".to_string()]);
        let (mut own, ex) = served("AFM-000001 Once upon a time", "AFM-000001");
        check(&mut own, &ex, &markers, &[]);
        assert!(
            own.correct() && own_marker_seen(&own),
            "{:?}",
            own.failed_checks
        );
        let (mut silent, ex) = served("Once upon a time", "AFM-000001");
        check(&mut silent, &ex, &markers, &[]);
        assert!(silent.correct() && !own_marker_seen(&silent));
        let (mut crossed, ex) = served("AFM-000002 A fox", "AFM-000001");
        check(&mut crossed, &ex, &markers, &[]);
        assert_eq!(crossed.failed_checks[0].check, "isolation");
        // Text shaped like a marker that no request carried is no evidence.
        let (mut lookalike, ex) = served("AFM-abcdef", "AFM-000001");
        check(&mut lookalike, &ex, &markers, &[]);
        assert!(lookalike.correct());
    }

    #[test]
    fn a_stream_without_usage_or_its_end_is_corrupted() {
        let markers = Markers::new([]);
        let (mut s, mut ex) = served("hi", "AFM-000001");
        ex.chunks.pop();
        ex.events.pop();
        ex.done_marker = false;
        let mut tolerant = s.clone();
        check(&mut s, &ex, &markers, &[]);
        let kinds: Vec<&str> = s.failed_checks.iter().map(|f| f.check.as_str()).collect();
        assert!(
            kinds.contains(&"usage") && kinds.contains(&"stream"),
            "{kinds:?}"
        );
        // A tolerated kind is counted apart and corrupts nothing.
        check(&mut tolerant, &ex, &markers, &["stream".to_string()]);
        assert_eq!(tolerant.tolerated[0].check, "stream");
        assert!(tolerant.failed_checks.iter().all(|f| f.check != "stream"));
    }
}
