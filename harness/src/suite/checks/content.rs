//! Checks on the reply's text and how it ended: `finish_reason`,
//! `content_non_empty`, `content_matches`, `content_not_contains`,
//! `no_repetition`.

use std::collections::HashMap;

use regex::Regex;

use crate::outcome::{clip, ensure, Outcome};
use crate::protocol::reply::Reply;

pub(super) fn finish_reason(r: &Reply, one_of: &[String]) -> Outcome {
    ensure(
        r.finish_reason.as_ref().is_some_and(|f| one_of.contains(f)),
        format!("finish_reason in {one_of:?}"),
        || format!("{:?}", r.finish_reason),
    )
}

/// Whitespace alone is empty; the failure tells why the text may be
/// missing (the finish reason, calls instead of text).
pub(super) fn non_empty(r: &Reply) -> Outcome {
    ensure(!r.content.trim().is_empty(), "non-empty content", || {
        format!(
            "empty content (finish_reason {:?}, {} tool calls)",
            r.finish_reason,
            r.tool_calls.len()
        )
    })
}

/// Content, or reasoning cut by `max_tokens` before the answer began
/// (`Check::Answered` says why). Cut is each protocol's word for it: chat's
/// `length`, Messages' `max_tokens`, Responses' `max_output_tokens`.
pub(super) fn answered(r: &Reply) -> Outcome {
    let cut = crate::protocol::reply::is_token_limit(r.finish_reason.as_deref());
    let thought_to_the_limit = cut && r.content.trim().is_empty() && !r.reasoning.trim().is_empty();
    if thought_to_the_limit {
        return Ok(());
    }
    non_empty(r).map_err(|(_, actual)| {
        (
            "non-empty content, or reasoning cut by max_tokens".to_string(),
            actual,
        )
    })
}

/// A bad pattern fails the check with the regex error (suites are
/// validated on load, so it is only met by a check built in code).
pub(super) fn matches(r: &Reply, pattern: &str) -> Outcome {
    let re = Regex::new(pattern).map_err(|e| (pattern.to_string(), e.to_string()))?;
    ensure(
        re.is_match(&r.content),
        format!("content matching /{pattern}/"),
        || clip(&r.content),
    )
}

pub(super) fn not_contains(r: &Reply, any: &[String]) -> Outcome {
    text_without("content", &r.content, any)
}

/// `text` (the reply's `what`) holds none of `any`.
pub(super) fn text_without(what: &str, text: &str, any: &[String]) -> Outcome {
    match any.iter().find(|m| text.contains(m.as_str())) {
        Some(m) => Err((format!("{what} without {m:?}"), clip(text))),
        None => Ok(()),
    }
}

/// A word 4-gram repeated more than `max` times is a generation loop.
pub(super) fn no_repetition(r: &Reply, max: usize) -> Outcome {
    let words: Vec<&str> = r.content.split_whitespace().collect();
    let mut counts: HashMap<&[&str], usize> = HashMap::new();
    for w in words.windows(4) {
        *counts.entry(w).or_default() += 1;
    }
    let worst = counts.iter().max_by_key(|(_, n)| **n);
    match worst {
        Some((gram, n)) if *n > max => Err((
            format!("no 4-word sequence more than {max} times"),
            format!("{:?} {n} times", gram.join(" ")),
        )),
        _ => Ok(()),
    }
}

/// Reasoning then content is one piece repeated at least `min` times
/// (ends trimmed, so a piece that starts with a space still counts when a
/// server trims the reply's first one).
pub(super) fn one_piece_repeated(r: &Reply, min: usize) -> Outcome {
    let text = format!("{}{}", r.reasoning, r.content);
    let trimmed = text.trim();
    let periodic = |s: &str| {
        (1..=s.len() / min.max(1)).any(|len| {
            s.is_char_boundary(len)
                && s.len().is_multiple_of(len)
                && s[..len].repeat(s.len() / len) == s
        })
    };
    let spaced = format!(" {trimmed}");
    ensure(
        !trimmed.is_empty() && (periodic(trimmed) || periodic(&spaced)),
        format!("one piece written {min} times or more"),
        || clip(&text),
    )
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::suite::checks::fixtures::{chat_body, chat_reply};
    use crate::suite::checks::{check_one, Check};

    #[test]
    fn the_finish_reason_must_be_one_listed() {
        let check = Check::FinishReason {
            one_of: vec!["length".into()],
        };
        let cut = chat_body(
            json!({"choices": [{"message": {"content": "a"}, "finish_reason": "length"}]}),
        );
        assert_eq!(check_one(&check, &cut), Ok(()));
        assert_eq!(
            check_one(&check, &chat_reply("a")),
            Err((
                "finish_reason in [\"length\"]".into(),
                "Some(\"stop\")".into()
            ))
        );
    }

    #[test]
    fn content_must_have_text() {
        assert_eq!(
            check_one(&Check::ContentNonEmpty, &chat_reply("Paris")),
            Ok(())
        );
        let (_, actual) = check_one(&Check::ContentNonEmpty, &chat_reply(" \n")).unwrap_err();
        assert_eq!(
            actual,
            "empty content (finish_reason Some(\"stop\"), 0 tool calls)"
        );
    }

    #[test]
    fn an_answer_is_content_or_reasoning_cut_by_max_tokens() {
        let thought = |finish: &str| {
            chat_body(
                json!({"choices": [{"message": {"content": null, "reasoning_content": "The user asks"}, "finish_reason": finish}]}),
            )
        };
        assert_eq!(check_one(&Check::Answered, &chat_reply("Hello")), Ok(()));
        assert_eq!(check_one(&Check::Answered, &thought("length")), Ok(()));
        // Reasoning that ended on its own with no answer is no answer.
        let (expected, actual) = check_one(&Check::Answered, &thought("stop")).unwrap_err();
        assert_eq!(
            expected,
            "non-empty content, or reasoning cut by max_tokens"
        );
        assert_eq!(
            actual,
            "empty content (finish_reason Some(\"stop\"), 0 tool calls)"
        );
        // Nothing at all, cut or not, is no answer.
        let empty = chat_body(
            json!({"choices": [{"message": {"content": ""}, "finish_reason": "length"}]}),
        );
        assert!(check_one(&Check::Answered, &empty).is_err());
    }

    #[test]
    fn content_is_matched_and_searched() {
        let matches = Check::ContentMatches {
            pattern: "(?i)paris".into(),
        };
        assert_eq!(check_one(&matches, &chat_reply("It is PARIS.")), Ok(()));
        assert!(check_one(&matches, &chat_reply("It is Lyon.")).is_err());
        let without = Check::ContentNotContains {
            any: vec!["7".into(), "8".into()],
        };
        assert_eq!(check_one(&without, &chat_reply("1 2 3 4 5 6")), Ok(()));
        assert_eq!(
            check_one(&without, &chat_reply("6 7")),
            Err(("content without \"7\"".into(), "\"6 7\"".into()))
        );
    }

    #[test]
    fn a_repeated_four_word_sequence_is_a_loop() {
        let check = Check::NoRepetition { max: 2 };
        let twice = "the cat sat down. the cat sat down.";
        assert_eq!(check_one(&check, &chat_reply(twice)), Ok(()));
        let looped = "the cat sat down ".repeat(4);
        let (_, actual) = check_one(&check, &chat_reply(&looped)).unwrap_err();
        assert!(actual.ends_with(" 4 times"), "{actual}");
    }

    #[test]
    fn one_piece_repeated_takes_a_forced_token_only() {
        let forced = |text: &str| check_one(&Check::OnePieceRepeated { min: 3 }, &chat_reply(text));
        assert!(forced("()()()()()()").is_ok());
        // A piece that starts with a space, its first one trimmed.
        assert!(forced("temper temper temper").is_ok());
        assert!(forced(" temper temper temper").is_ok());
        assert!(forced("The sea is wide and deep.").is_err());
        assert!(forced("()()").is_err());
        assert!(forced("").is_err());
    }
}
