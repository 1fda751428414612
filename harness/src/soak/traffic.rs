//! The soak's mixed traffic: every protocol, streamed and whole, with
//! grammar, tools, several choices, clients that leave mid-stream or
//! give up, and bodies broken on purpose. Each request's end is one
//! [`Ending`].

use std::time::Duration;

use rand::rngs::StdRng;
use rand::Rng;
use serde_json::{json, Value};

use crate::protocol::endpoint::Endpoint;
use crate::protocol::exchange::Exchange;
use crate::server::{Leave, Outgoing, Target};

/// One kind of request of the mix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    ChatStream,
    ChatWhole,
    Completions,
    MessagesStream,
    MessagesWhole,
    ResponsesStream,
    ResponsesWhole,
    Grammar,
    Tools,
    Choices,
    /// A stream the client drops after its first chunk.
    Disconnect,
    /// A whole request the client gives up on after 300 ms.
    Cancel,
    /// A chat body broken on purpose (truncated, a byte changed, a field
    /// of the wrong type): a 4xx is the right answer, never a 5xx.
    Fuzzed,
}

impl Kind {
    pub const MIX: [Kind; 13] = [
        Kind::ChatStream,
        Kind::ChatWhole,
        Kind::Completions,
        Kind::MessagesStream,
        Kind::MessagesWhole,
        Kind::ResponsesStream,
        Kind::ResponsesWhole,
        Kind::Grammar,
        Kind::Tools,
        Kind::Choices,
        Kind::Disconnect,
        Kind::Cancel,
        Kind::Fuzzed,
    ];
}

/// How one request ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Ending {
    /// An HTTP status and the time to the reply's end.
    Status(u16, Duration),
    /// The client left on purpose (disconnect, cancel).
    Left,
    /// The connection failed or broke on the server's side.
    Broken(String),
}

/// A few user turns, so prompts repeat (the prefix cache fills and then
/// stays at its size, as in real use) yet differ.
const PROMPTS: [&str; 6] = [
    "Name three colours.",
    "What is two plus two?",
    "Write one sentence about the sea.",
    "List the days of the week.",
    "Say hello in French.",
    "What is the capital of Italy?",
];

/// The soak's client: requests go through the harness's one way to reach
/// a server ([`Target`]), which also walks away from them on purpose.
pub struct Client {
    pub target: Target,
    pub model: String,
}

impl Client {
    /// Sends one request of `kind` and waits for its end.
    pub async fn send(&self, kind: Kind, rng: &mut StdRng) -> Ending {
        let prompt = PROMPTS[rng.random_range(0..PROMPTS.len())];
        let chat = |extra: Value| {
            let mut body = json!({
                "model": self.model,
                "messages": [{"role": "user", "content": prompt}],
                "max_tokens": 24,
            });
            merge(&mut body, extra);
            body
        };
        let (endpoint, body) = match kind {
            Kind::ChatStream | Kind::Disconnect => (Endpoint::Chat, chat(json!({"stream": true}))),
            Kind::ChatWhole | Kind::Cancel => (Endpoint::Chat, chat(json!({}))),
            Kind::Choices => (Endpoint::Chat, chat(json!({"n": 2, "temperature": 0.8}))),
            Kind::Grammar => (
                Endpoint::Chat,
                chat(
                    json!({"response_format": {"type": "json_schema", "json_schema": {
                    "name": "answer", "strict": true,
                    "schema": {"type": "object", "properties": {"answer": {"type": "string"}},
                               "required": ["answer"], "additionalProperties": false}}}}),
                ),
            ),
            Kind::Tools => (
                Endpoint::Chat,
                chat(json!({"tools": [{"type": "function", "function": {
                    "name": "get_weather", "description": "The weather in a city.",
                    "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                                   "required": ["city"]}}}]})),
            ),
            Kind::Completions => (
                Endpoint::Completions,
                json!({"model": self.model, "prompt": prompt, "max_tokens": 24,
                       "stream": rng.random_bool(0.5)}),
            ),
            Kind::MessagesStream | Kind::MessagesWhole => (
                Endpoint::Messages,
                json!({"model": self.model, "max_tokens": 24,
                       "messages": [{"role": "user", "content": prompt}],
                       "stream": kind == Kind::MessagesStream}),
            ),
            Kind::ResponsesStream | Kind::ResponsesWhole => (
                Endpoint::Responses,
                json!({"model": self.model, "input": prompt, "max_output_tokens": 24,
                       "stream": kind == Kind::ResponsesStream}),
            ),
            Kind::Fuzzed => (Endpoint::Chat, Value::Null),
        };
        let raw = match kind {
            Kind::Fuzzed => fuzz(&chat(json!({})).to_string(), rng),
            _ => body.to_string(),
        };
        let mut out = Outgoing::post(endpoint.path(), raw.into_bytes());
        out.headers
            .push(("anthropic-version".into(), "2023-06-01".into()));
        out.leave = match kind {
            Kind::Disconnect => Leave::AfterFirstEvent,
            Kind::Cancel => Leave::After(Duration::from_millis(300)),
            _ => Leave::Never,
        };
        Ending::of(&self.target.send(out).await)
    }
}

impl Ending {
    fn of(ex: &Exchange) -> Ending {
        if ex.left {
            return Ending::Left;
        }
        // A stream past its token budget never ends on its own: broken.
        match (&ex.transport_error, &ex.overran) {
            (Some(why), _) | (None, Some(why)) => Ending::Broken(why.clone()),
            (None, None) => Ending::Status(ex.status, Duration::from_secs_f64(ex.millis / 1000.0)),
        }
    }
}

fn merge(body: &mut Value, extra: Value) {
    if let (Some(b), Value::Object(e)) = (body.as_object_mut(), extra) {
        b.extend(e);
    }
}

/// A valid body broken one way: cut short, one byte changed, or a field
/// given a value of the wrong type or range.
pub fn fuzz(valid: &str, rng: &mut impl Rng) -> String {
    match rng.random_range(0..3) {
        0 => valid[..rng.random_range(0..valid.len())].to_string(),
        1 => {
            let mut bytes = valid.as_bytes().to_vec();
            let at = rng.random_range(0..bytes.len());
            bytes[at] = rng.random_range(0..=255u8);
            String::from_utf8_lossy(&bytes).into_owned()
        }
        _ => {
            let mut v: Value = serde_json::from_str(valid).expect("a valid body");
            let wrong = [
                ("max_tokens", json!("many")),
                ("max_tokens", json!(-5)),
                ("messages", json!(5)),
                ("temperature", json!(-3)),
                ("n", json!(0)),
                ("messages", json!([{"role": "wizard", "content": "hi"}])),
                ("tools", json!([{"type": "function"}])),
            ];
            let (k, bad) = &wrong[rng.random_range(0..wrong.len())];
            v[*k] = bad.clone();
            v.to_string()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn fuzzed_bodies_differ_from_the_valid_one() {
        let valid = r#"{"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":4}"#;
        let mut rng = StdRng::seed_from_u64(7);
        let changed = (0..50).filter(|_| fuzz(valid, &mut rng) != valid).count();
        assert!(changed >= 45, "{changed} of 50 changed");
    }
}
