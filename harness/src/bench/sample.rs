//! One request as measured: when it was due and sent, when its first
//! token and first answer token came, its token counts in its protocol's
//! usage, and what went wrong with it (a server failure, or a check of
//! the reply that failed).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::protocol::dialect::{Dialect, Output};
use crate::protocol::exchange::Exchange;
use crate::protocol::reply::Reply;

/// A check of the reply that failed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FailedCheck {
    /// stream, usage, isolation, schema, tool_args, replay, alone.
    pub check: String,
    pub detail: String,
}

/// How a reply served under load compared with its replay alone
/// (`replay::classify`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Replayed {
    Same,
    /// Left its replay after `at` characters: at least the opening shared.
    LateDivergence {
        at: usize,
    },
    /// Left its replay within the opening, and follows no other request.
    EarlyDivergence {
        at: usize,
    },
    /// Follows the replay of conversation `conversation`, turn `turn`, for
    /// `shared` characters, more than twice its own `at`.
    CrossTalk {
        conversation: usize,
        turn: usize,
        shared: usize,
        at: usize,
    },
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Sample {
    pub conversation: usize,
    pub turn: usize,
    /// When the request was due and when it went out, in ms after the
    /// level started; the difference is its client queue time.
    pub scheduled_ms: f64,
    pub sent_ms: f64,
    /// Open loop, first turn: when its task started, in ms after the level
    /// started; less its due time, the client's own schedule delay.
    #[serde(default)]
    pub started_ms: Option<f64>,
    /// Stream events received (the client's work per request).
    #[serde(default)]
    pub chunks: usize,
    /// Why the server failed it (transport, status, error, no output).
    pub error: Option<String>,
    /// The client dropped it on purpose (`--request-cancellation-rate`):
    /// neither served nor an error.
    #[serde(default)]
    pub cancelled: bool,
    /// Checks of a 200 reply that failed: a corrupted reply.
    pub failed_checks: Vec<FailedCheck>,
    /// Failed checks of kinds the run tolerates (`--tolerate`): counted,
    /// but the reply is not corrupted for them.
    #[serde(default)]
    pub tolerated: Vec<FailedCheck>,
    /// Time to the first output (reasoning or answer), after sending.
    pub ttft_ms: Option<f64>,
    /// Time to the first answer token (text or a call), after reasoning.
    pub ttfa_ms: Option<f64>,
    pub e2e_ms: f64,
    /// When each output-carrying event arrived, in ms after sending.
    pub token_ms: Vec<f64>,
    pub prompt_tokens: u64,
    pub output_tokens: u64,
    /// From the usage's reasoning count, else counted from events.
    pub reasoning_tokens: Option<u64>,
    /// As the server reported them.
    pub cached_tokens: Option<u64>,
    /// What the client knows the server could have cached: a shared
    /// prefix or the conversation's history sent before.
    pub expected_cached: Option<u64>,
    /// Token counts came from the server's usage, not from counting chunks.
    pub usage_reported: bool,
    /// The reply's text re-counted with the served tokenizer.
    #[serde(default)]
    pub recounted_tokens: Option<u64>,
    /// The isolation marker the request carried.
    pub marker: Option<String>,
    /// The request asked for a strict JSON schema.
    pub schema: bool,
    pub finish_reason: Option<String>,
    /// The reply's text (answer and calls), for checks and records.
    pub content: String,
    /// Replayed alone after the level (`--verify-alone`): how the reply
    /// compared.
    #[serde(default)]
    pub replay: Option<Replayed>,
}

impl Sample {
    /// The server served it (a 200 with output); its checks may still fail.
    pub fn served(&self) -> bool {
        self.error.is_none() && !self.cancelled
    }

    /// Served and every check passed.
    pub fn correct(&self) -> bool {
        self.served() && self.failed_checks.is_empty()
    }

    pub fn queue_ms(&self) -> f64 {
        (self.sent_ms - self.scheduled_ms).max(0.0)
    }

    /// How late the open loop started the request against its schedule.
    pub fn schedule_delay_ms(&self) -> Option<f64> {
        self.started_ms.map(|t| (t - self.scheduled_ms).max(0.0))
    }

    /// Gaps between consecutive output events.
    pub fn itl_ms(&self) -> Vec<f64> {
        self.token_ms.windows(2).map(|w| w[1] - w[0]).collect()
    }

    /// Time per output token after the first.
    pub fn tpot_ms(&self) -> Option<f64> {
        match (self.ttft_ms, self.output_tokens) {
            (Some(ttft), n) if n > 1 => Some((self.e2e_ms - ttft) / (n - 1) as f64),
            _ => None,
        }
    }

    /// Output tokens received per second of the request.
    pub fn output_tokens_per_s(&self) -> Option<f64> {
        (self.e2e_ms > 0.0 && self.output_tokens > 0)
            .then(|| self.output_tokens as f64 / (self.e2e_ms / 1000.0))
    }

    /// Reads an exchange (streamed in any protocol) as a sample.
    pub fn of(ex: &Exchange) -> Sample {
        Sample::of_reply(ex, &Reply::of(ex))
    }

    /// The same, from the reply already folded from `ex` (under load each
    /// fold walks every chunk: done once per request).
    pub fn of_reply(ex: &Exchange, reply: &Reply) -> Sample {
        let dialect = Dialect::of(ex);
        let mut s = Sample {
            e2e_ms: ex.millis,
            chunks: ex.chunks.len(),
            finish_reason: reply.finish_reason.clone(),
            ..Default::default()
        };
        let mut reasoning_events = 0u64;
        for (chunk, &at) in ex.chunks.iter().zip(&ex.chunk_millis) {
            let Some(kind) = dialect.output_of(chunk) else {
                continue;
            };
            s.ttft_ms.get_or_insert(at);
            match kind {
                Output::Answer => {
                    s.ttfa_ms.get_or_insert(at);
                }
                Output::Reasoning => reasoning_events += 1,
            }
            s.token_ms.push(at);
        }
        if let Some(u) = &reply.usage {
            s.usage_reported = true;
            s.prompt_tokens = reply.usage_field("prompt_tokens").unwrap_or(0);
            s.output_tokens = reply.usage_field("completion_tokens").unwrap_or(0);
            s.cached_tokens = reply.usage_field("prompt_tokens_details.cached_tokens");
            s.reasoning_tokens = reply.usage_field("completion_tokens_details.reasoning_tokens");
            let _ = u;
        } else {
            s.output_tokens = s.token_ms.len() as u64;
        }
        if s.reasoning_tokens.is_none() && reasoning_events > 0 {
            s.reasoning_tokens = Some(reasoning_events);
        }
        s.content = reply.content.clone();
        for c in &reply.tool_calls {
            s.content
                .push_str(&format!("\n[call {}] {}", c.name, c.arguments));
        }
        s.error = if let Some(o) = &ex.overran {
            Some(format!("past max_tokens: {o}"))
        } else if let Some(t) = &ex.transport_error {
            Some(format!("transport: {t}"))
        } else if ex.status != 200 {
            Some(format!("HTTP {}: {}", ex.status, short(&ex.body)))
        } else if let Some(e) = &reply.error {
            Some(format!("error event: {}", short(e)))
        } else if ex.streamed && ex.chunks.is_empty() && !ex.body.is_null() {
            let kind = ex.headers.get("content-type").map_or("no", String::as_str);
            Some(format!("not a stream: a {kind} body: {}", short(&ex.body)))
        } else if s.token_ms.is_empty() {
            Some("no output".into())
        } else {
            None
        };
        s
    }
}

/// The kind of a request's error, by which a level counts its failures:
/// a broken server's replies are told apart by what it did (too slow, too
/// big, not a stream...), not lumped as "error".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// The reply did not end within `--request-timeout`.
    Timeout,
    /// The stream went on past what its `max_tokens` allows (one that
    /// never ends), and reading stopped.
    PastMaxTokens,
    /// The reply passed the harness's cap.
    TooLarge,
    /// Redirects that did not end.
    Redirects,
    /// Any other connection failure.
    Transport,
    /// A status other than 200.
    Status,
    /// An error event inside a stream.
    ErrorEvent,
    /// A streamed request answered with a plain body.
    NotAStream,
    /// A 200 without one token.
    NoOutput,
    /// The request could not be built or sent.
    Request,
}

impl ErrorKind {
    /// The kind of one of [`Sample::error`]'s messages.
    pub fn of(error: &str) -> Self {
        let (head, rest) = error.split_once(':').unwrap_or((error, ""));
        match head {
            "transport" if rest.contains("request time limit") => ErrorKind::Timeout,
            "transport" if rest.contains("the harness's cap") => ErrorKind::TooLarge,
            "transport" if rest.contains("redirect") => ErrorKind::Redirects,
            "transport" => ErrorKind::Transport,
            "error event" => ErrorKind::ErrorEvent,
            "past max_tokens" => ErrorKind::PastMaxTokens,
            "request" => ErrorKind::Request,
            _ if head.starts_with("HTTP ") => ErrorKind::Status,
            _ if head.starts_with("not a stream") => ErrorKind::NotAStream,
            _ if head == "no output" => ErrorKind::NoOutput,
            _ => ErrorKind::Transport,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            ErrorKind::Timeout => "timeout",
            ErrorKind::PastMaxTokens => "past-max-tokens",
            ErrorKind::TooLarge => "too-large",
            ErrorKind::Redirects => "redirects",
            ErrorKind::Transport => "transport",
            ErrorKind::Status => "http-status",
            ErrorKind::ErrorEvent => "error-event",
            ErrorKind::NotAStream => "not-a-stream",
            ErrorKind::NoOutput => "no-output",
            ErrorKind::Request => "request",
        }
    }
}

fn short(v: &Value) -> String {
    let text = v["error"]["message"]
        .as_str()
        .or(v["message"].as_str())
        .map(str::to_string)
        .unwrap_or_else(|| v.to_string());
    text.chars().take(160).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn stream(path: &str, chunks: Vec<(Value, f64)>) -> Exchange {
        Exchange {
            path: path.into(),
            status: 200,
            streamed: true,
            done_marker: true,
            millis: 100.0,
            chunk_millis: chunks.iter().map(|c| c.1).collect(),
            events: chunks
                .iter()
                .map(|c| c.0["type"].as_str().unwrap_or_default().to_string())
                .collect(),
            chunks: chunks.into_iter().map(|c| c.0).collect(),
            ..Default::default()
        }
    }

    fn delta(key: &str, text: &str) -> Value {
        json!({"choices": [{"index": 0, "delta": {key: text}}]})
    }

    #[test]
    fn first_token_and_first_answer_token_are_apart_and_counts_come_from_usage() {
        let ex = stream(
            "/v1/chat/completions",
            vec![
                (
                    json!({"choices": [{"index": 0, "delta": {"role": "assistant"}}]}),
                    5.0,
                ),
                (delta("reasoning_content", "Hmm"), 20.0),
                (delta("content", "Hel"), 30.0),
                (delta("content", "lo"), 45.0),
                (
                    json!({"choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 4,
                        "total_tokens": 13, "prompt_tokens_details": {"cached_tokens": 3}}}),
                    50.0,
                ),
            ],
        );
        let s = Sample::of(&ex);
        assert!(s.correct(), "{:?}", s.error);
        assert_eq!((s.ttft_ms, s.ttfa_ms), (Some(20.0), Some(30.0)));
        assert_eq!(s.itl_ms(), vec![10.0, 15.0]);
        assert_eq!(
            (s.prompt_tokens, s.output_tokens, s.cached_tokens),
            (9, 4, Some(3))
        );
        assert_eq!(s.reasoning_tokens, Some(1));
        assert_eq!(s.content, "Hello");
        assert_eq!(s.tpot_ms(), Some((100.0 - 20.0) / 3.0));
    }

    #[test]
    fn messages_and_responses_streams_are_timed_in_their_own_events() {
        let m = stream(
            "/v1/messages",
            vec![
                (
                    json!({"type": "message_start", "message": {"usage": {"input_tokens": 7, "output_tokens": 0}}}),
                    1.0,
                ),
                (
                    json!({"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "so"}}),
                    10.0,
                ),
                (
                    json!({"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": "Yes"}}),
                    12.0,
                ),
                (
                    json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 2}}),
                    13.0,
                ),
            ],
        );
        let s = Sample::of(&m);
        assert_eq!((s.ttft_ms, s.ttfa_ms), (Some(10.0), Some(12.0)));
        let r = stream(
            "/v1/responses",
            vec![
                (
                    json!({"type": "response.output_text.delta", "delta": "Hi"}),
                    8.0,
                ),
                (
                    json!({"type": "response.completed", "response": {"usage": {"input_tokens": 5, "output_tokens": 1, "total_tokens": 6}}}),
                    9.0,
                ),
            ],
        );
        let s = Sample::of(&r);
        assert_eq!(
            (s.ttft_ms, s.prompt_tokens, s.output_tokens),
            (Some(8.0), 5, 1)
        );
    }

    #[test]
    fn failures_are_errors_not_fast_requests() {
        let refused = Exchange {
            transport_error: Some("connection refused".into()),
            millis: 1.0,
            ..Default::default()
        };
        assert!(Sample::of(&refused).error.unwrap().contains("refused"));
        let bad = Exchange {
            path: "/v1/chat/completions".into(),
            status: 400,
            body: json!({"error": {"message": "bad seed"}}),
            ..Default::default()
        };
        assert_eq!(Sample::of(&bad).error.unwrap(), "HTTP 400: bad seed");
        let empty = stream(
            "/v1/chat/completions",
            vec![(json!({"choices": [{"index": 0, "delta": {}}]}), 1.0)],
        );
        assert_eq!(Sample::of(&empty).error.unwrap(), "no output");
    }
}
