//! Plays requests against a target at a fixed concurrency and times each
//! one chunk by chunk.
//!
//! Closed loop: `concurrency` workers take the next request as soon as
//! their previous one ended, so the target always has that many in
//! flight. Every request streams (with `stream_options.include_usage`), so
//! the first token and the gaps between tokens are seen as a client sees
//! them.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::protocol::exchange::Exchange;
use crate::target::Target;

/// One request as measured.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Sample {
    /// Why the request counts as failed (transport, status, error chunk,
    /// no output, unterminated stream); None when it succeeded.
    pub error: Option<String>,
    /// Time to the first chunk carrying output.
    pub ttft_ms: Option<f64>,
    pub e2e_ms: f64,
    /// Gaps between consecutive output-carrying chunks.
    pub itl_ms: Vec<f64>,
    pub prompt_tokens: u64,
    pub output_tokens: u64,
    /// From `usage.prompt_tokens_details.cached_tokens`, when reported.
    pub cached_tokens: Option<u64>,
    /// Token counts came from the server's usage, not from counting chunks.
    pub usage_reported: bool,
}

impl Sample {
    pub fn ok(&self) -> bool {
        self.error.is_none()
    }

    /// Time per output token after the first.
    pub fn tpot_ms(&self) -> Option<f64> {
        match (self.ttft_ms, self.output_tokens) {
            (Some(ttft), n) if n > 1 => Some((self.e2e_ms - ttft) / (n - 1) as f64),
            _ => None,
        }
    }

    /// Reads an exchange as a benchmark sample.
    pub fn of(ex: &Exchange) -> Sample {
        let mut s = Sample {
            e2e_ms: ex.millis,
            ..Default::default()
        };
        let mut output_chunks = 0u64;
        let mut last_output_at: Option<f64> = None;
        for (chunk, &at) in ex.chunks.iter().zip(&ex.chunk_millis) {
            if let Some(e) = chunk.get("error") {
                s.error.get_or_insert_with(|| format!("error chunk: {e}"));
            }
            if carries_output(chunk) {
                output_chunks += 1;
                match last_output_at {
                    None => s.ttft_ms = Some(at),
                    Some(prev) => s.itl_ms.push(at - prev),
                }
                last_output_at = Some(at);
            }
            if let Some(u) = chunk.get("usage").filter(|u| u.is_object()) {
                s.usage_reported = true;
                s.prompt_tokens = u["prompt_tokens"].as_u64().unwrap_or(0);
                s.output_tokens = u["completion_tokens"].as_u64().unwrap_or(0);
                s.cached_tokens = u["prompt_tokens_details"]["cached_tokens"].as_u64();
            }
        }
        if !s.usage_reported {
            s.output_tokens = output_chunks;
        }
        let failure = if let Some(t) = &ex.transport_error {
            Some(format!("transport: {t}"))
        } else if ex.status != 200 {
            Some(format!("HTTP {}: {}", ex.status, short(&ex.body)))
        } else if s.error.is_some() {
            None
        } else if !ex.done_marker {
            Some("the stream ended without [DONE]".into())
        } else if output_chunks == 0 {
            Some("no output".into())
        } else {
            None
        };
        if failure.is_some() {
            s.error = failure;
        }
        s
    }
}

/// A chunk with generated text, reasoning or tool-call pieces in it.
fn carries_output(chunk: &Value) -> bool {
    let Some(choice) = chunk["choices"].get(0) else {
        return false;
    };
    let non_empty = |v: &Value| v.as_str().is_some_and(|s| !s.is_empty());
    let delta = &choice["delta"];
    non_empty(&choice["text"])
        || non_empty(&delta["content"])
        || non_empty(&delta["reasoning_content"])
        || non_empty(&delta["reasoning"])
        || delta["tool_calls"]
            .as_array()
            .is_some_and(|a| !a.is_empty())
}

fn short(v: &Value) -> String {
    let text = v["error"]["message"]
        .as_str()
        .map(str::to_string)
        .unwrap_or_else(|| v.to_string());
    text.chars().take(160).collect()
}

/// What one pass over a level's requests gave.
#[derive(Debug, Clone)]
pub struct LevelRun {
    pub samples: Vec<Sample>,
    pub wall_s: f64,
}

/// Sends every request (chat completion bodies, streamed) with
/// `concurrency` in flight, and waits for all.
pub async fn run(target: &Target, requests: Vec<Value>, concurrency: usize) -> LevelRun {
    let requests = Arc::new(requests);
    let next = Arc::new(AtomicUsize::new(0));
    let start = Instant::now();
    let mut workers = Vec::new();
    for _ in 0..concurrency.max(1) {
        let (target, requests, next) = (target.clone(), requests.clone(), next.clone());
        workers.push(tokio::spawn(async move {
            let mut mine = Vec::new();
            loop {
                let k = next.fetch_add(1, Ordering::SeqCst);
                let Some(req) = requests.get(k) else { break };
                let ex = target.post("/v1/chat/completions", req).await;
                mine.push((k, Sample::of(&ex)));
            }
            mine
        }));
    }
    let mut samples: Vec<(usize, Sample)> = Vec::new();
    for w in workers {
        match w.await {
            Ok(mine) => samples.extend(mine),
            Err(e) => samples.push((
                usize::MAX,
                Sample {
                    error: Some(format!("worker failed: {e}")),
                    ..Default::default()
                },
            )),
        }
    }
    samples.sort_by_key(|(k, _)| *k);
    LevelRun {
        samples: samples.into_iter().map(|(_, s)| s).collect(),
        wall_s: start.elapsed().as_secs_f64(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn stream(chunks: Vec<(Value, f64)>) -> Exchange {
        Exchange {
            status: 200,
            streamed: true,
            done_marker: true,
            millis: 100.0,
            chunk_millis: chunks.iter().map(|c| c.1).collect(),
            chunks: chunks.into_iter().map(|c| c.0).collect(),
            ..Default::default()
        }
    }

    fn delta(text: &str) -> Value {
        json!({"choices": [{"index": 0, "delta": {"content": text}}]})
    }

    #[test]
    fn times_come_from_output_chunks_and_counts_from_usage() {
        let ex = stream(vec![
            (
                json!({"choices": [{"index": 0, "delta": {"role": "assistant"}}]}),
                5.0,
            ),
            (delta("Hel"), 20.0),
            (delta("lo"), 30.0),
            (delta(" there"), 45.0),
            (
                json!({"choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 4,
                    "prompt_tokens_details": {"cached_tokens": 3}}}),
                50.0,
            ),
        ]);
        let s = Sample::of(&ex);
        assert!(s.ok(), "{:?}", s.error);
        assert_eq!(s.ttft_ms, Some(20.0));
        assert_eq!(s.itl_ms, vec![10.0, 15.0]);
        assert_eq!(
            (s.prompt_tokens, s.output_tokens, s.cached_tokens),
            (9, 4, Some(3))
        );
        assert_eq!(s.tpot_ms(), Some((100.0 - 20.0) / 3.0));
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
            status: 400,
            body: json!({"error": {"message": "bad seed"}}),
            ..Default::default()
        };
        assert_eq!(Sample::of(&bad).error.unwrap(), "HTTP 400: bad seed");

        let empty = stream(vec![(json!({"choices": [{"index": 0, "delta": {}}]}), 1.0)]);
        assert_eq!(Sample::of(&empty).error.unwrap(), "no output");

        let mut cut = stream(vec![(delta("a"), 1.0)]);
        cut.done_marker = false;
        assert!(Sample::of(&cut).error.unwrap().contains("[DONE]"));

        let errored = stream(vec![
            (delta("a"), 1.0),
            (json!({"error": {"message": "x"}}), 2.0),
        ]);
        assert!(Sample::of(&errored)
            .error
            .unwrap()
            .starts_with("error chunk"));
    }
}
