//! Exchanges the family tests build their replies from: OpenAI chat, whole
//! or streamed, the protocol the suites default to.

use serde_json::{json, Value};

use crate::protocol::exchange::Exchange;

/// A whole chat reply with `body`.
pub(super) fn chat_body(body: Value) -> Exchange {
    Exchange {
        path: "/v1/chat/completions".into(),
        status: 200,
        body,
        ..Default::default()
    }
}

/// A whole chat reply with this `message` that stopped.
pub(super) fn chat_message(message: Value) -> Exchange {
    chat_body(json!({"choices": [{"message": message, "finish_reason": "stop"}]}))
}

/// A whole chat reply with this content that stopped.
pub(super) fn chat_reply(content: &str) -> Exchange {
    chat_message(json!({"content": content}))
}

/// A streamed chat reply whose content deltas are `pieces`.
pub(super) fn chat_stream(pieces: &[&str]) -> Exchange {
    Exchange {
        path: "/v1/chat/completions".into(),
        status: 200,
        streamed: true,
        chunks: pieces
            .iter()
            .map(|p| json!({"choices": [{"delta": {"content": p}}]}))
            .collect(),
        ..Default::default()
    }
}
