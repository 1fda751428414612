//! The target's own counters, from its Prometheus `/metrics` when it has
//! one: how many prompt tokens it really computed and how often its prefix
//! cache hit, over one level (the difference of two scrapes).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::protocol::endpoint::METRICS_PATH;
use crate::server::Target;

/// Counter names of known servers, per quantity, first found wins.
const PREFILL_COMPUTED: [&str; 2] = [
    "afm_prefill_computed_tokens_total",
    // llama.cpp's server (`--metrics`): prompt tokens processed.
    "llamacpp:prompt_tokens_total",
];
const CACHE_HITS: [&str; 2] = [
    "afm_prefix_cache_hits_total",
    // vLLM counts hit tokens.
    "vllm:prefix_cache_hits_total",
];

/// Gauges of requests being generated and waiting, per known server.
const RUNNING: [&str; 4] = [
    "afm_running_sequences",
    "vllm:num_requests_running",
    "llamacpp:requests_processing",
    "afm_mock_requests_running",
];
const WAITING: [&str; 3] = [
    "afm_waiting_sequences",
    "vllm:num_requests_waiting",
    "llamacpp:requests_deferred",
];

/// The first known gauge of running requests in `c`: its name and value.
pub fn running(c: &Counters) -> Option<(&'static str, f64)> {
    RUNNING.iter().find_map(|n| c.get(*n).map(|v| (*n, *v)))
}

/// The server's running and waiting requests at one moment of a level.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct GaugePoint {
    /// ms after the level started.
    pub t_ms: f64,
    pub running: Option<f64>,
    pub waiting: Option<f64>,
}

impl GaugePoint {
    pub fn of(t_ms: f64, c: &Counters) -> Option<GaugePoint> {
        let first = |names: &[&str]| names.iter().find_map(|n| c.get(*n).copied());
        let p = GaugePoint {
            t_ms,
            running: first(&RUNNING),
            waiting: first(&WAITING),
        };
        (p.running.is_some() || p.waiting.is_some()).then_some(p)
    }
}

/// Scrapes the gauges every `every` until `stop` is set; empty when the
/// server has no `/metrics` or none of the known gauges.
pub async fn watch(
    target: Target,
    every: std::time::Duration,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> Vec<GaugePoint> {
    let start = std::time::Instant::now();
    let mut out = Vec::new();
    while !stop.load(std::sync::atomic::Ordering::SeqCst) {
        let t_ms = start.elapsed().as_secs_f64() * 1000.0;
        match scrape(&target).await.and_then(|c| GaugePoint::of(t_ms, &c)) {
            Some(p) => out.push(p),
            None => break,
        }
        tokio::time::sleep(every).await;
    }
    out
}

/// Counters summed over label sets, by metric name.
pub type Counters = BTreeMap<String, f64>;

/// What moved on the server during a level.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ServerCounters {
    pub prefill_computed_tokens: Option<f64>,
    pub cache_hits: Option<f64>,
    /// The metric names the figures came from.
    pub sources: Vec<String>,
}

/// Scrapes `/metrics`; None when the target has none.
pub async fn scrape(target: &Target) -> Option<Counters> {
    let ex = target.get(METRICS_PATH).await;
    if ex.status != 200 {
        return None;
    }
    match ex.body {
        Value::String(text) => Some(parse(&text)),
        _ => None,
    }
}

/// Prometheus text format: `name{labels} value`, comments skipped.
pub fn parse(text: &str) -> Counters {
    let mut out = Counters::new();
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let name_end = line.find(['{', ' ']).unwrap_or(line.len());
        let name = &line[..name_end];
        let rest = match line[name_end..].strip_prefix('{') {
            Some(r) => r.split_once('}').map_or("", |(_, v)| v),
            None => &line[name_end..],
        };
        if let Some(v) = rest
            .split_whitespace()
            .next()
            .and_then(|v| v.parse::<f64>().ok())
        {
            *out.entry(name.to_string()).or_default() += v;
        }
    }
    out
}

/// The change of the known counters between two scrapes.
pub fn delta(before: &Counters, after: &Counters) -> ServerCounters {
    let mut sources = Vec::new();
    let mut pick = |names: &[&str]| {
        names.iter().find_map(|n| {
            let (a, b) = (after.get(*n)?, before.get(*n).copied().unwrap_or(0.0));
            sources.push(n.to_string());
            Some(a - b)
        })
    };
    let prefill_computed_tokens = pick(&PREFILL_COMPUTED);
    let cache_hits = pick(&CACHE_HITS);
    ServerCounters {
        prefill_computed_tokens,
        cache_hits,
        sources,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_are_summed_over_labels_and_differenced() {
        let before = parse(
            "# HELP afm_prefix_cache_hits_total hits\n\
             afm_prefix_cache_hits_total 2\n\
             afm_prefill_computed_tokens_total 100\n",
        );
        let after = parse(
            "afm_prefix_cache_hits_total 9\n\
             afm_prefill_computed_tokens_total 160\n\
             afm_requests_total{outcome=\"finished\"} 3\n\
             afm_requests_total{outcome=\"failed\"} 1\n",
        );
        assert_eq!(after["afm_requests_total"], 4.0);
        let d = delta(&before, &after);
        assert_eq!(d.prefill_computed_tokens, Some(60.0));
        assert_eq!(d.cache_hits, Some(7.0));
        assert_eq!(d.sources.len(), 2);
    }

    #[test]
    fn unknown_servers_give_no_figures() {
        let d = delta(&Counters::new(), &parse("http_requests 5\n"));
        assert_eq!(d, ServerCounters::default());
    }
}
