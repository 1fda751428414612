//! How many prompt tokens one step may prefill.
//!
//! A step's forward pass holds every decoding stream for as long as it
//! runs, so a prompt prefilled beside running decodes goes in chunks that
//! cost about what the decodes do. A fixed token count cannot say that: a
//! prompt token's cost grows with the keys it attends (profiled on 2 CPU
//! cores, 4 streams decoding at 95 ms a step: a 256-token chunk took 0.6 s
//! at position 0 and 4.0 s at position 6,700, the streams' p99 inter-token
//! latency 31 times their own). So the budget is time: `share` times a
//! decode step, over what a prompt token cost in the last step that had
//! both, which follows the prompt's depth as it grows. With nothing
//! decoding, a step takes whole chunks of `max_chunk` tokens.

use std::time::Duration;

/// The smallest chunk beside decodes, so a prompt always moves.
pub const MIN_CHUNK: usize = 4;
/// The chunk beside decodes before any has been measured: a chat prompt
/// goes in one or two steps, and a deep one costs one step of ~32 tokens.
pub const FIRST_CHUNK: usize = 32;
/// Weight of a new step in the running estimates.
const DECODE_WEIGHT: f64 = 0.25;
const TOKEN_WEIGHT: f64 = 0.5;
/// A chunk beside decodes grows at most this much over the last one: one
/// noisy step (a token that seemed free) cannot bring a long stall.
const GROWTH: usize = 4;

#[derive(Debug, Clone)]
pub struct PrefillBudget {
    max_chunk: usize,
    /// Prefill time allowed per step as a share of a decode step; 0: fixed
    /// chunks of `max_chunk`.
    share: f64,
    /// Seconds of a step with decodes and no prefill (running estimate).
    decode_s: Option<f64>,
    /// Seconds a prompt token adds to a step with decodes (running
    /// estimate over the last steps, which follows the prompt's depth).
    token_s: Option<f64>,
    /// Prompt tokens of the last step with decodes.
    last: usize,
}

impl PrefillBudget {
    pub fn new(max_chunk: usize, share: f64) -> Self {
        PrefillBudget {
            max_chunk: max_chunk.max(1),
            share: share.max(0.0),
            decode_s: None,
            token_s: None,
            last: 0,
        }
    }

    /// Prompt tokens the next step may prefill, with `decoding` streams in it.
    pub fn tokens(&self, decoding: usize) -> usize {
        if decoding == 0 || self.share == 0.0 {
            return self.max_chunk;
        }
        match (self.decode_s, self.token_s) {
            (Some(decode), Some(token)) => {
                // (A hair over, so a whole number of tokens is not lost to rounding.)
                let fit = self.share * decode / token.max(1e-9) + 1e-6;
                let most = (GROWTH * self.last).max(MIN_CHUNK).min(self.max_chunk);
                (fit.min(most as f64) as usize).clamp(MIN_CHUNK.min(self.max_chunk), most)
            }
            // Not measured yet: a small chunk, which measures it.
            _ => FIRST_CHUNK.min(self.max_chunk),
        }
    }

    /// What a step with `decoding` streams and `prefilled` prompt tokens took.
    pub fn observe(&mut self, decoding: usize, prefilled: usize, took: Duration) {
        if decoding == 0 {
            return;
        }
        let t = took.as_secs_f64();
        if prefilled == 0 {
            self.decode_s = Some(smoothed(self.decode_s, t, DECODE_WEIGHT));
        } else if let Some(decode) = self.decode_s {
            let token = (t - decode).max(0.0) / prefilled as f64;
            self.token_s = Some(smoothed(self.token_s, token, TOKEN_WEIGHT));
            self.last = prefilled;
        }
    }
}

/// A running estimate moved `weight` of the way to `new` (`new` itself
/// when there was none).
fn smoothed(old: Option<f64>, new: f64, weight: f64) -> f64 {
    old.map_or(new, |old| old + weight * (new - old))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn with_nothing_decoding_or_no_share_a_step_takes_whole_chunks() {
        let mut b = PrefillBudget::new(256, 1.0);
        assert_eq!(b.tokens(0), 256);
        b.observe(4, 0, ms(100));
        b.observe(4, 10, ms(200));
        assert_eq!(b.tokens(0), 256);
        let fixed = PrefillBudget::new(256, 0.0);
        assert_eq!(fixed.tokens(4), 256);
    }

    #[test]
    fn beside_decodes_a_chunk_costs_the_share_of_a_decode_step() {
        let mut b = PrefillBudget::new(256, 1.0);
        // Unmeasured: the first chunk.
        assert_eq!(b.tokens(4), FIRST_CHUNK);
        b.observe(4, 0, ms(100));
        assert_eq!(b.tokens(4), FIRST_CHUNK);
        // 32 tokens added 320 ms: 10 ms each, so 100 ms holds 10.
        b.observe(4, 32, ms(420));
        assert_eq!(b.tokens(4), 10);
        // Deeper in the prompt a token costs 30 ms: the estimate moves
        // half way, to 20 ms, so 5 of them.
        b.observe(4, 10, ms(400));
        assert_eq!(b.tokens(4), 5);
        // Half the share, half the time: never below the smallest chunk.
        let mut half = PrefillBudget::new(256, 0.5);
        half.observe(4, 0, ms(100));
        half.observe(4, 32, ms(420));
        assert_eq!(half.tokens(4), 5);
        half.observe(4, 5, ms(400));
        assert_eq!(half.tokens(4), MIN_CHUNK);
    }

    #[test]
    fn cheap_tokens_grow_the_chunk_fourfold_up_to_the_cap() {
        let mut b = PrefillBudget::new(1_024, 1.0);
        b.observe(4, 0, ms(100));
        let mut chunks = Vec::new();
        let mut chunk = b.tokens(4);
        for _ in 0..4 {
            b.observe(4, chunk, ms(100)); // no measurable cost
            chunk = b.tokens(4);
            chunks.push(chunk);
        }
        assert_eq!(chunks, [128, 512, 1_024, 1_024]);
        // A token that seemed free after costly ones: the chunk grows four
        // times, no more (uncapped it would have jumped to 1,024: a stall
        // of seconds deep in a prompt).
        let mut b = PrefillBudget::new(1_024, 1.0);
        b.observe(4, 0, ms(100));
        b.observe(4, 32, ms(900)); // 25 ms a token
        assert_eq!(b.tokens(4), 4);
        b.observe(4, 4, ms(100));
        assert_eq!(b.tokens(4), 8);
    }

    #[test]
    fn a_cap_below_the_smallest_chunk_is_kept() {
        let mut b = PrefillBudget::new(1, 1.0);
        assert_eq!(b.tokens(4), 1);
        b.observe(4, 0, ms(100));
        b.observe(4, 1, ms(110));
        assert_eq!(b.tokens(4), 1);
    }

    #[test]
    fn decode_time_is_smoothed() {
        let mut b = PrefillBudget::new(256, 1.0);
        b.observe(4, 0, ms(100));
        // A slower decode step moves the estimate a quarter of the way.
        b.observe(4, 0, ms(200));
        b.observe(4, 8, ms(205)); // 80 ms over the 125 ms estimate: 10 each
        assert_eq!(b.tokens(4), 12);
    }
}
