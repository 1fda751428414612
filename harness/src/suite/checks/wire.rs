//! Checks on the reply as its protocol sends it, rather than on what it
//! says: the stream's event rules, characters kept whole across events,
//! and the vendor's published schema (`sse`, `no_split_characters`,
//! `schema`).

use crate::outcome::{clip, ensure, Outcome};
use crate::protocol::dialect::Dialect;
use crate::protocol::exchange::Exchange;

/// Each protocol's own rules (see [`Dialect::stream_protocol`]).
pub(super) fn sse(ex: &Exchange) -> Outcome {
    Dialect::of(ex).stream_protocol(ex)
}

/// A text delta ending in U+FFFD with another delta after it is a
/// multi-byte character split between events; one inside a delta is the
/// model's own bytes, and one at the very end a character cut by
/// `max_tokens`.
pub(super) fn no_split_characters(ex: &Exchange) -> Outcome {
    let pieces = Dialect::of(ex).text_deltas(ex);
    let split = pieces
        .iter()
        .enumerate()
        .take(pieces.len().saturating_sub(1))
        .find(|(_, p)| p.ends_with('\u{FFFD}'));
    match split {
        Some((k, p)) => Err((
            "no text delta ending in half a character".into(),
            format!(
                "delta {k} of {}: {} then {}",
                pieces.len(),
                clip(p),
                clip(&pieces[k + 1])
            ),
        )),
        None => Ok(()),
    }
}

/// The published schema as the official SDKs read it: a deviation here
/// breaks a client (the check's `fail` grade, and what afm-bench counts).
pub(super) fn published_schema(ex: &Exchange) -> Outcome {
    let found = crate::protocol::spec_schemas::deviations(ex).breaking;
    ensure(
        found.is_empty(),
        "a reply the official SDKs read (the published schema, as they read it)",
        || found.join("\n"),
    )
}

/// The published schema's letter, where the SDKs' reading found nothing:
/// what the case's `spec` grade shows.
pub(super) fn schema_letter(ex: &Exchange) -> Outcome {
    let found = crate::protocol::spec_schemas::deviations(ex).letter;
    ensure(
        found.is_empty(),
        "a reply that validates against the published schema",
        || found.join("\n"),
    )
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::suite::checks::fixtures::{chat_body, chat_stream};
    use crate::suite::checks::{check_one, Check, CheckSpec};

    #[test]
    fn a_character_split_between_deltas_is_caught() {
        let spec = CheckSpec {
            check: Check::NoSplitCharacters,
            step: None,
        };
        // "🎉" sent as half a character in one delta and the rest in the next.
        let split = chat_stream(&["Party \u{FFFD}", "\u{FFFD} time"]);
        assert_eq!(spec.evaluate(&[split], &[0]).len(), 1);
        let whole = chat_stream(&["Party ", "🎉", " time"]);
        assert!(spec.evaluate(&[whole], &[0]).is_empty());
        // The model's own invalid bytes inside a delta, or a character cut
        // by max_tokens at the very end, are not a split.
        let model = chat_stream(&["bad \u{FFFD} byte", "end \u{FFFD}"]);
        assert!(spec.evaluate(&[model], &[0]).is_empty());
    }

    #[test]
    fn a_chat_stream_must_end_with_done() {
        let mut ex = chat_stream(&[]);
        ex.chunks = vec![
            json!({"id": "c", "object": "chat.completion.chunk",
                "choices": [{"delta": {"role": "assistant", "content": "Hi"}, "finish_reason": null}]}),
            json!({"id": "c", "object": "chat.completion.chunk",
                "choices": [{"delta": {}, "finish_reason": "stop"}]}),
        ];
        assert_eq!(
            check_one(&Check::Sse, &ex),
            Err(("data: [DONE] last".into(), "no [DONE]".into()))
        );
        ex.done_marker = true;
        assert_eq!(check_one(&Check::Sse, &ex), Ok(()));
    }

    #[test]
    fn a_reply_missing_a_required_field_fails_the_published_schema() {
        let mut body = json!({
            "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "m",
            "choices": [{"index": 0, "finish_reason": "stop", "logprobs": null,
                "message": {"role": "assistant", "content": "hi", "refusal": null}}],
        });
        assert_eq!(check_one(&Check::Schema, &chat_body(body.clone())), Ok(()));
        body.as_object_mut().unwrap().remove("created");
        let (expected, actual) = check_one(&Check::Schema, &chat_body(body)).unwrap_err();
        assert_eq!(
            expected,
            "a reply the official SDKs read (the published schema, as they read it)"
        );
        assert!(actual.contains("created"), "{actual}");
    }

    /// An explicit null the SDKs read as absent: the case is graded
    /// `spec`, with the letter's deviation; `check_one` (what afm-bench
    /// counts) passes it.
    #[test]
    fn an_explicit_null_is_graded_spec_not_fail() {
        let body = json!({
            "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "m",
            "choices": [{"index": 0, "finish_reason": "stop", "logprobs": null,
                "message": {"role": "assistant", "content": "hi", "refusal": null,
                    "function_call": null}}],
        });
        let ex = chat_body(body);
        assert_eq!(check_one(&Check::Schema, &ex), Ok(()));
        let spec = CheckSpec {
            check: Check::Schema,
            step: None,
        };
        let found = spec.evaluate(&[ex], &[0]);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].grade, crate::suite::checks::Grade::Spec);
        assert!(found[0].actual.contains("function_call"), "{found:?}");
    }
}
