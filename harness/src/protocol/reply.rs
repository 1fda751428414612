//! The assistant's reply read out of an exchange, the same for a whole
//! body and a stream, and for every protocol (each [`crate::protocol::dialect`]
//! reads its own). Checks look at this, so they hold for every mode and
//! protocol.

use serde::{Deserialize, Serialize};
use serde_json::Value;

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    pub index: usize,
    pub id: Option<String>,
    pub name: String,
    /// As sent: a JSON text (streams: the concatenated fragments).
    pub arguments: String,
    /// Stream pieces that carried this call's id or name again after the
    /// first (a protocol error some servers make).
    pub repeated_headers: usize,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Reply {
    /// Chat content, or a completion's text.
    pub content: String,
    pub content_null: bool,
    pub reasoning: String,
    pub tool_calls: Vec<ToolCall>,
    pub finish_reason: Option<String>,
    pub usage: Option<Value>,
    /// `logprobs.content` entries, in order.
    pub logprobs: Vec<Value>,
    /// Whether any `logprobs` object was present at all.
    pub logprobs_present: bool,
    /// An `{"error": ...}` object in the body or the stream.
    pub error: Option<Value>,
}

/// A finish reason that says the reply stopped at its token limit, in any
/// protocol's words (chat's `length`, Messages' `max_tokens`, Responses'
/// `max_output_tokens`).
pub fn is_token_limit(finish_reason: Option<&str>) -> bool {
    matches!(
        finish_reason,
        Some("length" | "max_tokens" | "max_output_tokens")
    )
}

impl Reply {
    /// The content's longest word (the first of equals): a string the
    /// same greedy request will write again, for stop-sequence cases that
    /// must not depend on what a small model happens to say.
    pub fn longest_word(&self) -> &str {
        self.content
            .split(|c: char| !c.is_alphanumeric())
            .fold("", |best, w| if w.len() > best.len() { w } else { best })
    }

    /// The longest word without its first and last characters: a stop
    /// string that falls inside a word the same greedy request writes
    /// again ("ell" of "hello"; a word under 3 characters is kept whole).
    pub fn word_infix(&self) -> &str {
        let word = self.longest_word();
        let mut inner = word.char_indices().skip(1);
        match (inner.next(), word.char_indices().last()) {
            (Some((start, _)), Some((end, _))) if start < end => &word[start..end],
            _ => word,
        }
    }

    /// The longest word with its last character changed: a stop string
    /// that shares all but its end with a word the reply holds, so it
    /// never completes ("stoppinx" against "stopping").
    pub fn word_near_miss(&self) -> String {
        let word = self.longest_word();
        let Some((at, last)) = word.char_indices().last() else {
            return String::new();
        };
        let other = if last == 'x' { 'q' } else { 'x' };
        format!("{}{other}", &word[..at])
    }

    /// This reply as the next request's history holds it when a client
    /// of the official SDKs appends the returned message as is: `content`
    /// null when there is no text, `refusal` null, the calls with their ids.
    pub fn as_sdk_message(&self) -> Value {
        let calls: Vec<Value> = self
            .tool_calls
            .iter()
            .map(|c| {
                serde_json::json!({"id": c.id, "type": "function",
                    "function": {"name": c.name, "arguments": c.arguments}})
            })
            .collect();
        let mut m = serde_json::json!({
            "role": "assistant",
            "content": if self.content.is_empty() { Value::Null } else { self.content.clone().into() },
            "refusal": null,
        });
        if !calls.is_empty() {
            m["tool_calls"] = calls.into();
        }
        m
    }

    /// A usage field as a number.
    pub fn usage_field(&self, path: &str) -> Option<u64> {
        let mut v = self.usage.as_ref()?;
        for key in path.split('.') {
            v = v.get(key)?;
        }
        v.as_u64()
    }
}

#[cfg(test)]
mod tests {
    use super::Reply;

    fn said(text: &str) -> Reply {
        Reply {
            content: text.into(),
            ..Default::default()
        }
    }

    #[test]
    fn stop_strings_made_from_a_reply_fall_inside_its_word_or_just_miss_it() {
        let r = said("Say the word: stopping.");
        assert_eq!(r.longest_word(), "stopping");
        assert_eq!(r.word_infix(), "toppin");
        assert_eq!(r.word_near_miss(), "stoppinx");
        assert_eq!(said("box").word_near_miss(), "boq");
        assert_eq!(said("ok").word_infix(), "ok");
        assert_eq!(said("").word_near_miss(), "");
    }
}
