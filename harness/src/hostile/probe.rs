//! The honest client: a short chat request sent again and again while an
//! attack runs, so the report says what a well-behaved user saw meanwhile
//! (served or not, and how long it took) against the same probe alone. Like
//! the official SDKs it honours a 503 that carries `Retry-After` (a server
//! shedding load as it promised) by waiting and sending again, a few times;
//! a 503 without one, or one retried past that, is not served.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::{json, Value};

use crate::bench::stats::percentile;
use crate::protocol::endpoint::Endpoint;
use crate::server::Target;

/// Sends after a 503 with `Retry-After` before the probe counts as not
/// served (the OpenAI SDKs retry twice by default; this is one more).
const RETRIES: usize = 3;

/// What one send got, when it was not a failure.
enum Sent {
    Served,
    /// A 503 asking to come back after this long (capped at 5 s).
    RetryAfter(Duration),
}

/// Where and what the probe sends: through the harness's one way to reach
/// a server, as every other honest request.
#[derive(Clone)]
pub struct Probe {
    pub target: Target,
    pub model: String,
}

/// What the probes of one period got.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct ProbeFigures {
    pub sent: usize,
    pub served: usize,
    pub p50_ms: f64,
    pub max_ms: f64,
    /// The first few failures, each in a few words.
    pub failures: Vec<String>,
}

impl ProbeFigures {
    pub fn all_served(&self) -> bool {
        self.sent > 0 && self.served == self.sent
    }

    /// "4/4 served, p50 212 ms, max 250 ms".
    pub fn summary(&self) -> String {
        let mut s = format!(
            "{}/{} served, p50 {:.0} ms, max {:.0} ms",
            self.served, self.sent, self.p50_ms, self.max_ms
        );
        if let Some(f) = self.failures.first() {
            s.push_str(&format!("; {f}"));
        }
        s
    }
}

impl Probe {
    fn body(&self) -> Value {
        json!({
            "model": self.model,
            "messages": [{"role": "user", "content": "Say hello."}],
            "max_tokens": 4,
            "temperature": 0,
        })
    }

    /// One probe: its latency from the first send, or why it was not
    /// served.
    pub async fn once(&self) -> Result<Duration, String> {
        let started = Instant::now();
        for _ in 0..RETRIES {
            match self.send().await? {
                Sent::Served => return Ok(started.elapsed()),
                Sent::RetryAfter(wait) => tokio::time::sleep(wait).await,
            }
        }
        match self.send().await? {
            Sent::Served => Ok(started.elapsed()),
            Sent::RetryAfter(_) => Err(format!("503 with Retry-After {RETRIES} times")),
        }
    }

    /// One send: served, or a 503 asking to retry after a wait.
    async fn send(&self) -> Result<Sent, String> {
        let ex = self.target.post(Endpoint::Chat.path(), &self.body()).await;
        if let Some(e) = &ex.transport_error {
            return Err(format!("transport: {e}"));
        }
        let retry_after = ex
            .headers
            .get("retry-after")
            .and_then(|v| v.trim().parse::<f64>().ok());
        if let (503, Some(s)) = (ex.status, retry_after) {
            return Ok(Sent::RetryAfter(Duration::from_secs_f64(s.clamp(0.0, 5.0))));
        }
        if ex.status != 200 || ex.body["choices"].as_array().is_none_or(|c| c.is_empty()) {
            let text = ex.body.to_string();
            return Err(format!("{}: {}", ex.status, &text[..text.len().min(120)]));
        }
        Ok(Sent::Served)
    }

    /// Probes one after another, `gap` apart, until `stop` is set (at
    /// least one is sent).
    pub async fn until(&self, stop: Arc<AtomicBool>, gap: Duration) -> ProbeFigures {
        let mut tally = Tally::default();
        loop {
            tally.add(self.once().await);
            if stop.load(Ordering::Relaxed) {
                break;
            }
            tokio::time::sleep(gap).await;
            if stop.load(Ordering::Relaxed) {
                break;
            }
        }
        tally.figures()
    }

    /// `n` probes alone, one after another: the baseline.
    pub async fn alone(&self, n: usize) -> ProbeFigures {
        let mut tally = Tally::default();
        for _ in 0..n.max(1) {
            tally.add(self.once().await);
        }
        tally.figures()
    }
}

#[derive(Default)]
struct Tally {
    latencies_ms: Vec<f64>,
    sent: usize,
    failures: Vec<String>,
}

impl Tally {
    fn add(&mut self, outcome: Result<Duration, String>) {
        self.sent += 1;
        match outcome {
            Ok(d) => self.latencies_ms.push(d.as_secs_f64() * 1e3),
            Err(e) if self.failures.len() < 3 => self.failures.push(e),
            Err(_) => {}
        }
    }

    fn figures(mut self) -> ProbeFigures {
        self.latencies_ms.sort_by(f64::total_cmp);
        let served = self.latencies_ms.len();
        ProbeFigures {
            sent: self.sent,
            served,
            p50_ms: if served > 0 {
                percentile(&self.latencies_ms, 50.0)
            } else {
                0.0
            },
            max_ms: self.latencies_ms.last().copied().unwrap_or(0.0),
            failures: self.failures,
        }
    }
}
