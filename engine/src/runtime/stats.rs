//! Counters over the engine's life, exported as metrics by the server.
//! Every count is made before the event that a caller could see it by, so
//! a caller that saw a request finish sees it counted.

use serde::Serialize;

use crate::parsers::ParseStats;
use crate::runtime::events::Usage;

/// Upper bounds of the batch-size histogram.
pub const BATCH_SIZE_BUCKETS: [usize; 7] = [1, 2, 4, 8, 16, 32, 64];

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct EngineStats {
    pub requests_admitted: u64,
    pub requests_finished: u64,
    pub requests_cancelled: u64,
    pub requests_failed: u64,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub cached_tokens: u64,
    pub reasoning_tokens: u64,
    /// What the output parsers found and repaired, summed over requests.
    pub output: ParseStats,
    /// Prompt tokens actually run through the model (prefill work done).
    pub prefill_computed_tokens: u64,
    pub cache_hits: u64,
    pub cache_misses: u64,
    pub steps: u64,
    /// Sum of sequences per step (mean batch = this / steps).
    pub batched_sequences: u64,
    /// Steps by batch size: `[i]` counts steps with at most
    /// `BATCH_SIZE_BUCKETS[i]` sequences (and more than the previous bound);
    /// the last slot counts larger batches.
    pub batch_size_steps: [u64; BATCH_SIZE_BUCKETS.len() + 1],
    pub running: usize,
    pub waiting: usize,
    /// KV held by the prefix cache, as its budget counts it.
    pub prefix_cache_bytes: usize,
    /// Times the batch KV store grew (each copies all it holds).
    pub kv_grows: usize,
}

impl EngineStats {
    /// A sequence started: its prompt and the part served from the cache
    /// (`caching`: whether a prefix cache is on, so hits and misses count).
    pub(crate) fn record_start(&mut self, prompt: usize, cached: usize, caching: bool) {
        self.prompt_tokens += prompt as u64;
        self.cached_tokens += cached as u64;
        if caching {
            if cached > 0 {
                self.cache_hits += 1;
            } else {
                self.cache_misses += 1;
            }
        }
    }

    /// One forward pass over `batch` sequences that prefilled
    /// `prefill_tokens` prompt tokens.
    pub(crate) fn record_step(&mut self, batch: usize, prefill_tokens: usize) {
        self.steps += 1;
        self.batched_sequences += batch as u64;
        let bucket = BATCH_SIZE_BUCKETS
            .iter()
            .position(|&b| batch <= b)
            .unwrap_or(BATCH_SIZE_BUCKETS.len());
        self.batch_size_steps[bucket] += 1;
        self.prefill_computed_tokens += prefill_tokens as u64;
    }

    pub(crate) fn record_finish(&mut self, usage: &Usage, parsed: &ParseStats) {
        self.requests_finished += 1;
        self.completion_tokens += usage.completion_tokens as u64;
        self.reasoning_tokens += usage.reasoning_tokens as u64;
        self.output.add(parsed);
    }
}
