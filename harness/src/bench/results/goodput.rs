//! Service-level objectives (`--goodput ttft:MS tpot:MS e2el:MS`, vLLM's
//! syntax, plus `ttfa` for the first answer token after reasoning): a
//! request is good when it meets every target, and counts toward correct
//! goodput only when its reply also passed every check.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::bench::sample::Sample;

/// Targets in milliseconds; a missing one is not constrained.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Slo {
    pub ttft_ms: Option<f64>,
    pub ttfa_ms: Option<f64>,
    pub tpot_ms: Option<f64>,
    pub e2el_ms: Option<f64>,
}

impl Slo {
    /// Parses `KEY:MS` items (`ttft`, `ttfa`, `tpot`, `e2el`).
    pub fn parse(items: &[String]) -> Result<Slo, String> {
        let mut slo = Slo::default();
        for item in items.iter().flat_map(|i| i.split_whitespace()) {
            let (key, value) = item
                .split_once(':')
                .ok_or_else(|| format!("--goodput {item:?}: write KEY:MILLISECONDS"))?;
            let ms = f64::from_str(value)
                .ok()
                .filter(|v| *v > 0.0)
                .ok_or_else(|| {
                    format!("--goodput {item:?}: {value:?} is no positive number of ms")
                })?;
            let slot = match key {
                "ttft" => &mut slo.ttft_ms,
                "ttfa" => &mut slo.ttfa_ms,
                "tpot" => &mut slo.tpot_ms,
                "e2el" => &mut slo.e2el_ms,
                other => {
                    return Err(format!(
                        "--goodput: unknown metric {other:?} (ttft, ttfa, tpot, e2el)"
                    ))
                }
            };
            *slot = Some(ms);
        }
        Ok(slo)
    }

    pub fn is_empty(&self) -> bool {
        *self == Slo::default()
    }

    /// A served request meets every target. Latency counts from when the
    /// request was due, so time waiting for a client slot counts against
    /// it as a user would feel it.
    pub fn met_by(&self, s: &Sample) -> bool {
        if !s.served() {
            return false;
        }
        let q = s.queue_ms();
        let within = |target: Option<f64>, value: Option<f64>| match (target, value) {
            (None, _) => true,
            (Some(t), Some(v)) => v <= t,
            (Some(_), None) => false,
        };
        within(self.ttft_ms, s.ttft_ms.map(|v| v + q))
            && within(self.ttfa_ms, s.ttfa_ms.map(|v| v + q))
            && within(self.tpot_ms, s.tpot_ms().or(Some(0.0)))
            && within(self.e2el_ms, Some(s.e2e_ms + q))
    }
}

impl fmt::Display for Slo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = [
            ("ttft", self.ttft_ms),
            ("ttfa", self.ttfa_ms),
            ("tpot", self.tpot_ms),
            ("e2el", self.e2el_ms),
        ]
        .iter()
        .filter_map(|(k, v)| v.map(|v| format!("{k}:{v}")))
        .collect();
        f.write_str(&parts.join(" "))
    }
}

/// How many requests of a level met the SLO, and of those how many were
/// also correct; shares of all requests, rates per second of the level.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Goodput {
    pub good: usize,
    pub correct_good: usize,
    pub good_share: f64,
    pub correct_good_share: f64,
    pub good_per_s: f64,
    pub correct_good_per_s: f64,
}

impl Goodput {
    pub fn of<'a>(slo: &Slo, samples: impl Iterator<Item = &'a Sample>, wall_s: f64) -> Goodput {
        let (mut n, mut good, mut correct_good) = (0usize, 0usize, 0usize);
        for s in samples {
            n += 1;
            if slo.met_by(s) {
                good += 1;
                if s.correct() {
                    correct_good += 1;
                }
            }
        }
        let share = |k: usize| if n == 0 { 0.0 } else { k as f64 / n as f64 };
        let rate = |k: usize| if wall_s > 0.0 { k as f64 / wall_s } else { 0.0 };
        Goodput {
            good,
            correct_good,
            good_share: share(good),
            correct_good_share: share(correct_good),
            good_per_s: rate(good),
            correct_good_per_s: rate(correct_good),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::sample::FailedCheck;

    fn sample(ttft: f64, e2e: f64, queue: f64) -> Sample {
        Sample {
            ttft_ms: Some(ttft),
            ttfa_ms: Some(ttft),
            e2e_ms: e2e,
            scheduled_ms: 0.0,
            sent_ms: queue,
            output_tokens: 11,
            token_ms: vec![ttft],
            ..Default::default()
        }
    }

    #[test]
    fn slo_items_parse_and_unknown_ones_are_named() {
        let slo = Slo::parse(&["ttft:300 tpot:50".into(), "e2el:2000".into()]).unwrap();
        assert_eq!(
            (slo.ttft_ms, slo.tpot_ms, slo.e2el_ms),
            (Some(300.0), Some(50.0), Some(2000.0))
        );
        assert_eq!(slo.to_string(), "ttft:300 tpot:50 e2el:2000");
        assert!(Slo::parse(&["itl:5".into()]).unwrap_err().contains("itl"));
        assert!(Slo::parse(&["ttft".into()]).is_err());
    }

    #[test]
    fn correct_goodput_leaves_out_corrupted_and_queue_time_counts() {
        let slo = Slo::parse(&["ttft:100".into(), "e2el:1000".into()]).unwrap();
        let fast = sample(50.0, 500.0, 0.0);
        let queued = sample(50.0, 500.0, 80.0);
        let mut corrupted = sample(50.0, 500.0, 0.0);
        corrupted.failed_checks.push(FailedCheck {
            check: "isolation".into(),
            detail: String::new(),
        });
        let slow = sample(150.0, 500.0, 0.0);
        assert!(slo.met_by(&fast) && !slo.met_by(&queued) && !slo.met_by(&slow));
        let g = Goodput::of(&slo, [&fast, &queued, &corrupted, &slow].into_iter(), 2.0);
        assert_eq!((g.good, g.correct_good), (2, 1));
        assert_eq!((g.good_share, g.correct_good_per_s), (0.5, 0.5));
    }
}
