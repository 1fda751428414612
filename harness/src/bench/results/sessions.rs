//! What a level of growing sessions shows: per turn, the prompt, what the
//! cache served against what it could have, time to first token and the
//! prompt's read speed; and the pace of running streams while a long
//! prompt is read, against their pace otherwise.

use serde::{Deserialize, Serialize};

use crate::bench::sample::Sample;
use crate::bench::stats::Dist;

/// Prompt tokens left to compute (past what the server reported cached)
/// from which a request's prefill counts as long.
pub const LONG_PREFILL_TOKENS: u64 = 1_000;

/// One turn over the level's conversations.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct TurnFigures {
    /// 1 for the first turn.
    pub turn: usize,
    /// Served requests of this turn.
    pub requests: usize,
    pub prompt_tokens: Option<Dist>,
    /// Summed over the turn's requests: what the server reported cached,
    /// and what a perfect cache would hold (each conversation's previous
    /// prompt, or a declared shared prefix).
    pub cached_tokens: Option<u64>,
    pub expected_cached: Option<u64>,
    pub ttft: Option<Dist>,
    /// Prompt tokens computed (less those reported cached) per second of
    /// time to first token.
    pub prefill_tokens_per_s: Option<Dist>,
}

/// Each served request's turn, prompt and time to first token: the plot's
/// points.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
pub struct TurnPoint {
    pub turn: usize,
    pub prompt_tokens: u64,
    pub ttft_ms: f64,
}

/// Inter-token latency of every stream of the level (background streams
/// too), while another request's long prompt was being read and otherwise.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct StallFigures {
    /// Requests whose prefill was long ([`LONG_PREFILL_TOKENS`]).
    pub long_prefills: usize,
    /// Gaps that overlapped another request's long prefill.
    pub beside_prefill: Option<Dist>,
    /// The other gaps.
    pub alone: Option<Dist>,
}

/// Prompt tokens a served request computed.
fn computed(s: &Sample) -> u64 {
    s.prompt_tokens.saturating_sub(s.cached_tokens.unwrap_or(0))
}

impl TurnFigures {
    /// One entry per turn that has a served request, in turn order.
    pub fn of(samples: &[&Sample], percentiles: &[f64]) -> Vec<TurnFigures> {
        let last = samples.iter().map(|s| s.turn).max().unwrap_or(0);
        (0..=last)
            .filter_map(|t| {
                let of: Vec<&&Sample> = samples
                    .iter()
                    .filter(|s| s.turn == t && s.served())
                    .collect();
                if of.is_empty() {
                    return None;
                }
                let sum = |f: &dyn Fn(&Sample) -> Option<u64>| -> Option<u64> {
                    let v: Vec<u64> = of.iter().filter_map(|s| f(s)).collect();
                    (!v.is_empty()).then(|| v.iter().sum())
                };
                Some(TurnFigures {
                    turn: t + 1,
                    requests: of.len(),
                    prompt_tokens: Dist::at(
                        &of.iter()
                            .map(|s| s.prompt_tokens as f64)
                            .collect::<Vec<_>>(),
                        percentiles,
                    ),
                    cached_tokens: sum(&|s| s.cached_tokens),
                    expected_cached: sum(&|s| s.expected_cached),
                    ttft: Dist::at(
                        &of.iter().filter_map(|s| s.ttft_ms).collect::<Vec<_>>(),
                        percentiles,
                    ),
                    prefill_tokens_per_s: Dist::at(
                        &of.iter()
                            .filter_map(|s| {
                                let ttft = s.ttft_ms.filter(|t| *t > 0.0)?;
                                Some(computed(s) as f64 / (ttft / 1000.0))
                            })
                            .collect::<Vec<_>>(),
                        percentiles,
                    ),
                })
            })
            .collect()
    }
}

impl TurnFigures {
    /// One console line.
    pub fn describe(&self) -> String {
        let p50 = |d: &Option<Dist>| d.as_ref().map_or("-".into(), |d| format!("{:.0}", d.p50));
        format!(
            "turn {}: {} requests, prompt p50 {} tokens, cached {} of {} a perfect cache holds, \
             TTFT p50 {} ms, prefill p50 {} tok/s",
            self.turn,
            self.requests,
            p50(&self.prompt_tokens),
            self.cached_tokens.map_or("-".into(), |c| c.to_string()),
            self.expected_cached.map_or("-".into(), |c| c.to_string()),
            p50(&self.ttft),
            p50(&self.prefill_tokens_per_s),
        )
    }
}

impl TurnPoint {
    pub fn of(samples: &[&Sample]) -> Vec<TurnPoint> {
        samples
            .iter()
            .filter(|s| s.served())
            .filter_map(|s| {
                Some(TurnPoint {
                    turn: s.turn + 1,
                    prompt_tokens: s.prompt_tokens,
                    ttft_ms: s.ttft_ms?,
                })
            })
            .collect()
    }
}

impl StallFigures {
    /// From the level's requests and its background streams; None when no
    /// request's prefill was long.
    pub fn of(
        requests: &[&Sample],
        background: &[&Sample],
        percentiles: &[f64],
    ) -> Option<StallFigures> {
        // Long prefills: from sending to the first token, in the level's ms.
        let long: Vec<(usize, f64, f64)> = requests
            .iter()
            .enumerate()
            .filter(|(_, s)| s.served() && computed(s) >= LONG_PREFILL_TOKENS)
            .filter_map(|(k, s)| Some((k, s.sent_ms, s.sent_ms + s.ttft_ms?)))
            .collect();
        if long.is_empty() {
            return None;
        }
        let (mut beside, mut alone) = (Vec::new(), Vec::new());
        let streams = requests
            .iter()
            .enumerate()
            .map(|(k, s)| (Some(k), s))
            .chain(background.iter().map(|s| (None, s)));
        for (own, s) in streams {
            for w in s.token_ms.windows(2) {
                let (from, to) = (s.sent_ms + w[0], s.sent_ms + w[1]);
                let overlaps = long
                    .iter()
                    .any(|&(k, start, end)| Some(k) != own && start < to && from < end);
                if overlaps {
                    beside.push(w[1] - w[0]);
                } else {
                    alone.push(w[1] - w[0]);
                }
            }
        }
        Some(StallFigures {
            long_prefills: long.len(),
            beside_prefill: Dist::at(&beside, percentiles),
            alone: Dist::at(&alone, percentiles),
        })
    }
}

impl StallFigures {
    /// One console line.
    pub fn describe(&self) -> String {
        let d = |d: &Option<Dist>| {
            d.as_ref().map_or("no gaps".into(), |d| {
                format!("p50 {:.0} ms, p99 {:.0} ms ({} gaps)", d.p50, d.p99, d.n)
            })
        };
        format!(
            "inter-token latency beside {} long prefills: {}; otherwise: {}",
            self.long_prefills,
            d(&self.beside_prefill),
            d(&self.alone)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(turn: usize, sent: f64, prompt: u64, cached: u64, ttft: f64) -> Sample {
        Sample {
            turn,
            sent_ms: sent,
            prompt_tokens: prompt,
            cached_tokens: Some(cached),
            ttft_ms: Some(ttft),
            e2e_ms: ttft,
            token_ms: vec![ttft],
            ..Default::default()
        }
    }

    #[test]
    fn turns_give_cache_against_a_perfect_one_and_the_read_speed() {
        let mut second = sample(1, 5_000.0, 9_000, 8_000, 500.0);
        second.expected_cached = Some(8_500);
        let all = [sample(0, 0.0, 8_000, 0, 4_000.0), second];
        let refs: Vec<&Sample> = all.iter().collect();
        let t = TurnFigures::of(&refs, &[50.0]);
        assert_eq!(t.len(), 2);
        assert_eq!(
            (t[0].turn, t[0].cached_tokens, t[0].expected_cached),
            (1, Some(0), None)
        );
        assert_eq!(t[0].prefill_tokens_per_s.as_ref().unwrap().p50, 2_000.0);
        assert_eq!(
            (t[1].cached_tokens, t[1].expected_cached),
            (Some(8_000), Some(8_500))
        );
        // 1,000 tokens computed in 0.5 s.
        assert_eq!(t[1].prefill_tokens_per_s.as_ref().unwrap().p50, 2_000.0);
    }

    #[test]
    fn a_gap_is_beside_a_prefill_only_when_another_long_prompt_is_being_read() {
        // A long prompt read from 1,000 to 3,000 ms; a short one, cached.
        let long = sample(0, 1_000.0, 5_000, 0, 2_000.0);
        let short = sample(0, 1_500.0, 5_000, 4_900, 100.0);
        // A stream with gaps of 100 ms before and after, 900 ms across.
        let mut stream = sample(0, 0.0, 20, 0, 100.0);
        stream.token_ms = vec![100.0, 200.0, 1_100.0, 2_000.0, 3_100.0, 3_200.0, 3_300.0];
        let requests = [&long, &short];
        let s = StallFigures::of(&requests, &[&stream], &[50.0, 100.0]).unwrap();
        assert_eq!(s.long_prefills, 1);
        let beside = s.beside_prefill.unwrap();
        assert_eq!((beside.n, beside.max), (3, 1_100.0));
        let alone = s.alone.unwrap();
        assert_eq!((alone.n, alone.max), (3, 100.0));
        // No long prefill, no figures.
        assert!(StallFigures::of(&[&short], &[&stream], &[50.0]).is_none());
    }
}
