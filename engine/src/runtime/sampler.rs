//! Picks the next token from logits on the host: logit processing (bias,
//! penalties), then greedy or temperature sampling with top-k / top-p /
//! min-p, driven by a generator keyed on (seed, position).
//!
//! Keying the random stream on the position, not on how many draws came
//! before, makes a seeded result depend only on the request itself: not on
//! its slot in a batch, its neighbours, streaming, or a cached prefix.

use std::collections::HashMap;

use rand_chacha::ChaCha8Rng;
use rand_core::{RngCore, SeedableRng};

/// Sampling settings of one request.
#[derive(Debug, Clone, PartialEq)]
pub struct SamplingParams {
    /// 0 means greedy.
    pub temperature: f32,
    /// Nucleus mass kept (1.0 keeps everything).
    pub top_p: f32,
    /// Keep only the k most likely tokens (0 = off).
    pub top_k: usize,
    /// Drop tokens whose probability is below `min_p` x the best one's.
    pub min_p: f32,
    /// HF-style: divides positive logits / multiplies negative ones of every
    /// token already in the prompt or output (1.0 = off).
    pub repetition_penalty: f32,
    /// OpenAI: subtracted once from every token already generated.
    pub presence_penalty: f32,
    /// OpenAI: subtracted per occurrence of a token already generated.
    pub frequency_penalty: f32,
    /// Added to the logit of each listed token id.
    pub logit_bias: Vec<(u32, f32)>,
    /// Seed of the request's generator; `None` draws one from the OS.
    pub seed: Option<u64>,
    /// End-of-turn ids are never sampled (where anything else may be), so
    /// the output runs to `max_tokens`: vLLM's and llama.cpp's
    /// `ignore_eos`, what benchmarks ask for an exact output length.
    pub ignore_eos: bool,
}

impl Default for SamplingParams {
    fn default() -> Self {
        SamplingParams {
            temperature: 0.0,
            top_p: 1.0,
            top_k: 0,
            min_p: 0.0,
            repetition_penalty: 1.0,
            presence_penalty: 0.0,
            frequency_penalty: 0.0,
            logit_bias: Vec::new(),
            seed: None,
            ignore_eos: false,
        }
    }
}

/// The sampler of one sequence, with the token counts penalties need.
#[derive(Debug, Clone)]
pub struct Sampler {
    params: SamplingParams,
    seed: u64,
    /// Occurrences of each generated token.
    generated: HashMap<u32, u32>,
    /// Tokens of the prompt (for the repetition penalty).
    prompt: Vec<u32>,
}

impl Sampler {
    pub fn new(params: SamplingParams) -> Self {
        let seed = params
            .seed
            .unwrap_or_else(|| ChaCha8Rng::from_os_rng().next_u64());
        Sampler {
            params,
            seed,
            generated: HashMap::new(),
            prompt: Vec::new(),
        }
    }

    /// Gives the repetition penalty the prompt's tokens.
    pub fn with_prompt(mut self, prompt: &[u32]) -> Self {
        if self.params.repetition_penalty != 1.0 {
            let mut p = prompt.to_vec();
            p.sort_unstable();
            p.dedup();
            self.prompt = p;
        }
        self
    }

    /// Records a generated token (for the penalties).
    pub fn observe(&mut self, token: u32) {
        *self.generated.entry(token).or_default() += 1;
    }

    /// Applies bias and penalties to `logits` in place.
    pub fn process(&self, logits: &mut [f32]) {
        let p = &self.params;
        for &(id, bias) in &p.logit_bias {
            if let Some(l) = logits.get_mut(id as usize) {
                *l += bias;
            }
        }
        if p.repetition_penalty != 1.0 {
            let seen = self.prompt.iter().chain(self.generated.keys());
            for &id in seen {
                if let Some(l) = logits.get_mut(id as usize) {
                    *l = if *l > 0.0 {
                        *l / p.repetition_penalty
                    } else {
                        *l * p.repetition_penalty
                    };
                }
            }
        }
        if p.presence_penalty != 0.0 || p.frequency_penalty != 0.0 {
            for (&id, &count) in &self.generated {
                if let Some(l) = logits.get_mut(id as usize) {
                    *l -= p.presence_penalty + p.frequency_penalty * count as f32;
                }
            }
        }
    }

    /// The token for sequence position `position` given processed logits.
    pub fn sample(&self, logits: &[f32], position: usize) -> u32 {
        let p = &self.params;
        if p.temperature <= 0.0 {
            return argmax(logits);
        }
        let inv_t = 1.0 / p.temperature;
        let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        let mut probs: Vec<(u32, f32)> = logits
            .iter()
            .enumerate()
            .map(|(i, &l)| (i as u32, ((l - max) * inv_t).exp()))
            .filter(|(_, w)| *w > 0.0)
            .collect();
        if probs.is_empty() {
            return argmax(logits);
        }
        if p.top_k > 0 {
            keep_best(&mut probs, p.top_k);
        }
        if p.min_p > 0.0 {
            // weights are relative to the best token, whose weight is 1.
            let best = probs.iter().map(|x| x.1).fold(0.0, f32::max);
            probs.retain(|(_, w)| *w >= p.min_p * best);
        }
        if p.top_p < 1.0 {
            keep_nucleus(&mut probs, p.top_p);
        }
        let total: f32 = probs.iter().map(|(_, w)| w).sum();
        let mut target = uniform(self.seed, position) as f32 * total;
        for &(id, w) in &probs {
            if target < w {
                return id;
            }
            target -= w;
        }
        probs.last().map_or_else(|| argmax(logits), |&(id, _)| id)
    }
}

/// Most likely first; equal weights by token id, so the order is total.
fn by_weight(a: &(u32, f32), b: &(u32, f32)) -> std::cmp::Ordering {
    b.1.total_cmp(&a.1).then(a.0.cmp(&b.0))
}

/// Keeps the `k` most likely candidates, sorted. A partial selection, then a
/// sort of the `k` kept: the vocabulary is ~50k tokens, `k` is small.
fn keep_best(probs: &mut Vec<(u32, f32)>, k: usize) {
    if k < probs.len() {
        probs.select_nth_unstable_by(k, by_weight);
        probs.truncate(k);
    }
    probs.sort_unstable_by(by_weight);
}

/// Keeps the smallest most-likely-first prefix whose mass reaches `top_p` of
/// the total, sorted. Only a growing head of the candidates is ever sorted
/// (the nucleus is usually a few hundred tokens of a ~50k vocabulary).
fn keep_nucleus(probs: &mut Vec<(u32, f32)>, top_p: f32) {
    let total: f32 = probs.iter().map(|(_, w)| w).sum();
    let mut head = 64.min(probs.len());
    loop {
        if head < probs.len() {
            probs.select_nth_unstable_by(head, by_weight);
        }
        probs[..head].sort_unstable_by(by_weight);
        let mut kept = 0.0;
        let cut = probs[..head].iter().position(|(_, w)| {
            kept += w / total;
            kept >= top_p
        });
        match cut {
            Some(i) => {
                probs.truncate(i + 1);
                return;
            }
            None if head == probs.len() => return,
            None => head = (head * 4).min(probs.len()),
        }
    }
}

/// A uniform draw in [0, 1) that depends only on (seed, position).
fn uniform(seed: u64, position: usize) -> f64 {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    rng.set_stream(position as u64);
    (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64
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

/// Log-probabilities of the model's distribution (log-softmax of `logits`):
/// the chosen token's and the `top` best ones, best first.
pub fn logprobs(logits: &[f32], chosen: u32, top: usize) -> (f32, Vec<(u32, f32)>) {
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let lse = max + logits.iter().map(|&l| (l - max).exp()).sum::<f32>().ln();
    let lp = |id: u32| (logits[id as usize] - lse).min(0.0);
    let mut best: Vec<u32> = Vec::with_capacity(top + 1);
    if top > 0 {
        // Partial selection keeps this O(vocab) for small `top`.
        let mut idx: Vec<u32> = (0..logits.len() as u32).collect();
        let k = top.min(idx.len());
        idx.select_nth_unstable_by(k - 1, |&a, &b| {
            logits[b as usize]
                .total_cmp(&logits[a as usize])
                .then(a.cmp(&b))
        });
        idx.truncate(k);
        idx.sort_by(|&a, &b| {
            logits[b as usize]
                .total_cmp(&logits[a as usize])
                .then(a.cmp(&b))
        });
        best = idx;
    }
    (
        lp(chosen),
        best.into_iter().map(|id| (id, lp(id))).collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sampler(temperature: f32, top_p: f32, seed: u64) -> Sampler {
        Sampler::new(SamplingParams {
            temperature,
            top_p,
            seed: Some(seed),
            ..Default::default()
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
    fn partial_selection_matches_a_full_sort() {
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        for round in 0..50 {
            let n = 1 + (rng.next_u32() % 5000) as usize;
            // Some exact ties, to check the tie order too.
            let probs: Vec<(u32, f32)> = (0..n as u32)
                .map(|i| (i, (rng.next_u32() % 1000) as f32 / 1000.0 + 1e-3))
                .collect();
            let mut sorted = probs.clone();
            sorted.sort_by(by_weight);
            let top_p = [0.1, 0.5, 0.9, 0.99, 0.999][round % 5];
            let total: f32 = probs.iter().map(|(_, w)| w).sum();
            let mut kept = 0.0;
            let cut = sorted
                .iter()
                .position(|(_, w)| {
                    kept += w / total;
                    kept >= top_p
                })
                .map_or(n, |i| i + 1);
            let mut nucleus = probs.clone();
            keep_nucleus(&mut nucleus, top_p);
            assert_eq!(nucleus, sorted[..cut], "n {n}, top_p {top_p}");
            let k = 1 + round * 37 % n;
            let mut best = probs.clone();
            keep_best(&mut best, k);
            assert_eq!(best, sorted[..k.min(n)], "n {n}, k {k}");
        }
    }

    #[test]
    fn tiny_top_p_keeps_only_the_best_token() {
        let logits = [1.0, 2.0, 1.5, 0.5];
        let s = sampler(1.0, 0.01, 7);
        assert!((0..100).all(|p| s.sample(&logits, p) == 1));
    }

    #[test]
    fn top_k_and_min_p_restrict_the_candidates() {
        let logits = [1.0, 2.0, 1.9, 0.5, 1.95];
        let k2 = Sampler::new(SamplingParams {
            temperature: 1.0,
            top_k: 2,
            seed: Some(3),
            ..Default::default()
        });
        assert!((0..200).all(|p| [1, 4].contains(&k2.sample(&logits, p))));
        let minp = Sampler::new(SamplingParams {
            temperature: 1.0,
            min_p: 0.8,
            seed: Some(3),
            ..Default::default()
        });
        // exp(-0.1) = 0.905 and exp(-0.05) = 0.95 pass; exp(-1) does not.
        assert!((0..200).all(|p| [1, 2, 4].contains(&minp.sample(&logits, p))));
    }

    #[test]
    fn draws_follow_the_distribution() {
        // p = softmax([0, ln 3]) = [0.25, 0.75]
        let logits = [0.0, 3f32.ln()];
        let s = sampler(1.0, 1.0, 9);
        let ones = (0..4000).filter(|&p| s.sample(&logits, p) == 1).count();
        assert!((2800..3200).contains(&ones), "{ones} of 4000");
    }

    #[test]
    fn bias_and_penalties_move_logits() {
        let mut s = Sampler::new(SamplingParams {
            presence_penalty: 1.0,
            frequency_penalty: 0.5,
            repetition_penalty: 2.0,
            logit_bias: vec![(3, -100.0)],
            ..Default::default()
        })
        .with_prompt(&[0]);
        s.observe(1);
        s.observe(1);
        let mut logits = [4.0, 4.0, 1.0, 9.0];
        s.process(&mut logits);
        // 0: prompt token, repetition only: 4 / 2.
        // 1: generated twice: 4 / 2 - (1 + 0.5 * 2).
        assert_eq!(logits, [2.0, 0.0, 1.0, -91.0]);
    }

    #[test]
    fn logprobs_are_normalized_and_sorted() {
        let logits = [0.0, 2f32.ln(), 0.0, 1f32.ln()];
        let (chosen, top) = logprobs(&logits, 1, 2);
        assert!((chosen - 0.4f32.ln()).abs() < 1e-6);
        assert_eq!(top[0].0, 1);
        assert!(top.iter().all(|(_, lp)| *lp <= 0.0));
        assert!(top[0].1 >= top[1].1);
        let total: f32 = (0..4).map(|i| logprobs(&logits, i, 0).0.exp()).sum();
        assert!((total - 1.0).abs() < 1e-6);
    }
}
