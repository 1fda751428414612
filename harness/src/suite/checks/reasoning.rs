//! Checks on the reply's reasoning (`reasoning_content` or `reasoning`,
//! Anthropic's thinking): `reasoning_non_empty`, `reasoning_empty`,
//! `reasoning_not_contains`.

use super::content::text_without;
use crate::outcome::{clip, ensure, Outcome};
use crate::protocol::reply::Reply;

pub(super) fn non_empty(r: &Reply) -> Outcome {
    ensure(
        !r.reasoning.trim().is_empty(),
        "non-empty reasoning",
        || "no reasoning".into(),
    )
}

/// Not even whitespace: a reply asked to skip reasoning sends none.
pub(super) fn empty(r: &Reply) -> Outcome {
    ensure(r.reasoning.is_empty(), "no reasoning", || {
        clip(&r.reasoning)
    })
}

pub(super) fn not_contains(r: &Reply, any: &[String]) -> Outcome {
    text_without("reasoning", &r.reasoning, any)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::suite::checks::fixtures::{chat_message, chat_reply};
    use crate::suite::checks::{check_one, Check};

    #[test]
    fn reasoning_is_there_or_not_as_asked() {
        let thought = chat_message(json!({"content": "4", "reasoning_content": "2 + 2 is 4"}));
        let blank = chat_message(json!({"content": "4", "reasoning": " "}));
        let none = chat_reply("4");
        assert_eq!(check_one(&Check::ReasoningNonEmpty, &thought), Ok(()));
        assert!(check_one(&Check::ReasoningNonEmpty, &blank).is_err());
        assert!(check_one(&Check::ReasoningNonEmpty, &none).is_err());
        assert_eq!(check_one(&Check::ReasoningEmpty, &none), Ok(()));
        assert!(check_one(&Check::ReasoningEmpty, &blank).is_err());
        assert!(check_one(&Check::ReasoningEmpty, &thought).is_err());
    }

    #[test]
    fn reasoning_is_searched_not_the_content() {
        let check = Check::ReasoningNotContains {
            any: vec!["<think>".into()],
        };
        let leaked = chat_message(json!({"content": "4", "reasoning_content": "<think>2 + 2"}));
        assert_eq!(
            check_one(&check, &leaked).unwrap_err().0,
            "reasoning without \"<think>\""
        );
        let in_content = chat_message(json!({"content": "<think>", "reasoning_content": "2 + 2"}));
        assert_eq!(check_one(&check, &in_content), Ok(()));
    }
}
