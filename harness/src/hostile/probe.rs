//! The honest client: a short chat request sent again and again while an
//! attack runs, so the report says what a well-behaved user saw meanwhile
//! (served or not, and how long it took) against the same probe alone.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::{json, Value};

use crate::bench::stats::percentile;

/// Where and what the probe sends.
#[derive(Clone)]
pub struct Probe {
    pub client: reqwest::Client,
    pub base: String,
    pub model: String,
    pub api_key: Option<String>,
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

    /// One probe: its latency, or why it was not served.
    pub async fn once(&self) -> Result<Duration, String> {
        let started = Instant::now();
        let mut req = self
            .client
            .post(format!("{}/v1/chat/completions", self.base))
            .timeout(Duration::from_secs(60))
            .json(&self.body());
        if let Some(key) = &self.api_key {
            req = req.bearer_auth(key);
        }
        let resp = req.send().await.map_err(|e| format!("transport: {e}"))?;
        let status = resp.status().as_u16();
        let body: Value = resp.json().await.map_err(|e| format!("body: {e}"))?;
        if status != 200 || body["choices"].as_array().is_none_or(|c| c.is_empty()) {
            let text = body.to_string();
            return Err(format!("{status}: {}", &text[..text.len().min(120)]));
        }
        Ok(started.elapsed())
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
