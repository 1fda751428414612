//! Picks the next token from logits: greedy, or temperature (+ top-p)
//! sampling driven by a generator keyed on (seed, position).
//!
//! Keying the random stream on the position, not on how many draws came
//! before, makes a seeded result depend only on the request itself.

use rand_chacha::ChaCha8Rng;
use rand_core::{RngCore, SeedableRng};

/// Sampling settings of one request.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SamplingParams {
    /// 0 means greedy.
    pub temperature: f32,
    /// Nucleus mass kept (1.0 keeps everything).
    pub top_p: f32,
    /// Seed of the request's generator; `None` draws one from the OS.
    pub seed: Option<u64>,
}

impl Default for SamplingParams {
    fn default() -> Self {
        SamplingParams {
            temperature: 0.0,
            top_p: 1.0,
            seed: None,
        }
    }
}

/// The sampler of one sequence.
#[derive(Debug, Clone)]
pub struct Sampler {
    params: SamplingParams,
    seed: u64,
}

impl Sampler {
    pub fn new(params: SamplingParams) -> Self {
        let seed = params
            .seed
            .unwrap_or_else(|| ChaCha8Rng::from_os_rng().next_u64());
        Sampler { params, seed }
    }

    /// The token for sequence position `position` given its logits.
    pub fn sample(&self, logits: &[f32], position: usize) -> u32 {
        if self.params.temperature <= 0.0 {
            return argmax(logits);
        }
        let inv_t = 1.0 / self.params.temperature;
        let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        let mut probs: Vec<(u32, f32)> = logits
            .iter()
            .enumerate()
            .map(|(i, &l)| (i as u32, ((l - max) * inv_t).exp()))
            .filter(|(_, p)| *p > 0.0)
            .collect();
        let mut total: f32 = probs.iter().map(|(_, p)| p).sum();
        if self.params.top_p < 1.0 {
            probs.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
            let mut kept = 0.0;
            let cut = probs
                .iter()
                .position(|(_, p)| {
                    kept += p / total;
                    kept >= self.params.top_p
                })
                .map_or(probs.len(), |i| i + 1);
            probs.truncate(cut);
            total = probs.iter().map(|(_, p)| p).sum();
        }
        let mut rng = ChaCha8Rng::seed_from_u64(self.seed);
        rng.set_stream(position as u64);
        let u = (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
        let mut target = u as f32 * total;
        for &(id, p) in &probs {
            if target < p {
                return id;
            }
            target -= p;
        }
        probs.last().map_or_else(|| argmax(logits), |&(id, _)| id)
    }
}

/// Index of the largest logit (the lowest index on ties).
pub fn argmax(logits: &[f32]) -> u32 {
    let mut best = 0;
    for (i, &l) in logits.iter().enumerate() {
        if l > logits[best] {
            best = i;
        }
    }
    best as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sampler(temperature: f32, top_p: f32, seed: u64) -> Sampler {
        Sampler::new(SamplingParams {
            temperature,
            top_p,
            seed: Some(seed),
        })
    }

    #[test]
    fn greedy_takes_the_first_maximum() {
        assert_eq!(sampler(0.0, 1.0, 1).sample(&[0.1, 3.0, 3.0, -1.0], 0), 1);
    }

    #[test]
    fn same_seed_and_position_give_the_same_token() {
        let logits: Vec<f32> = (0..100).map(|i| (i % 7) as f32 * 0.3).collect();
        let s = sampler(1.0, 1.0, 42);
        let a: Vec<u32> = (0..50).map(|p| s.sample(&logits, p)).collect();
        let b: Vec<u32> = (0..50)
            .map(|p| sampler(1.0, 1.0, 42).sample(&logits, p))
            .collect();
        assert_eq!(a, b);
        let c: Vec<u32> = (0..50)
            .map(|p| sampler(1.0, 1.0, 43).sample(&logits, p))
            .collect();
        assert_ne!(a, c, "a different seed should change some draw");
        let distinct: std::collections::BTreeSet<_> = a.iter().collect();
        assert!(
            distinct.len() > 3,
            "temperature 1 should spread draws: {a:?}"
        );
    }

    #[test]
    fn tiny_top_p_keeps_only_the_best_token() {
        let logits = [1.0, 2.0, 1.5, 0.5];
        let s = sampler(1.0, 0.01, 7);
        assert!((0..100).all(|p| s.sample(&logits, p) == 1));
    }

    #[test]
    fn draws_follow_the_distribution() {
        // p = softmax([0, ln 3]) = [0.25, 0.75]
        let logits = [0.0, 3f32.ln()];
        let s = sampler(1.0, 1.0, 9);
        let ones = (0..4000).filter(|&p| s.sample(&logits, p) == 1).count();
        assert!((2800..3200).contains(&ones), "{ones} of 4000");
    }
}
