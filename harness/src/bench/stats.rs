//! Distributions of per-request measurements (mean and percentiles).

use serde::{Deserialize, Serialize};

/// A distribution in milliseconds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Dist {
    pub n: usize,
    pub mean: f64,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub max: f64,
    /// The percentiles `--percentiles` chose: `[p, value]`.
    #[serde(default)]
    pub at: Vec<[f64; 2]>,
}

impl Dist {
    /// None for no samples: an empty set has no latency, not a zero one.
    pub fn of(values: &[f64]) -> Option<Dist> {
        if values.is_empty() {
            return None;
        }
        let mut v = values.to_vec();
        v.sort_by(f64::total_cmp);
        Some(Dist {
            n: v.len(),
            mean: v.iter().sum::<f64>() / v.len() as f64,
            p50: percentile(&v, 50.0),
            p90: percentile(&v, 90.0),
            p99: percentile(&v, 99.0),
            max: v[v.len() - 1],
            at: Vec::new(),
        })
    }

    /// As [`Dist::of`], with the percentiles `chosen` too.
    pub fn at(values: &[f64], chosen: &[f64]) -> Option<Dist> {
        let mut d = Dist::of(values)?;
        let mut v = values.to_vec();
        v.sort_by(f64::total_cmp);
        d.at = chosen.iter().map(|&p| [p, percentile(&v, p)]).collect();
        Some(d)
    }
}

/// Linear interpolation between closest ranks, on sorted values (the
/// definition numpy and vllm's benchmark use).
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    let rank = p / 100.0 * (sorted.len() - 1) as f64;
    let lo = rank.floor() as usize;
    let hi = rank.ceil() as usize;
    sorted[lo] + (sorted[hi] - sorted[lo]) * (rank - lo as f64)
}

/// The median of a few values (throughput over repetitions).
pub fn median(values: &[f64]) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    Some(percentile(&v, 50.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_interpolate_between_ranks() {
        let d = Dist::of(&[4.0, 1.0, 3.0, 2.0, 5.0]).unwrap();
        assert_eq!((d.n, d.mean, d.p50, d.max), (5, 3.0, 3.0, 5.0));
        assert!((d.p90 - 4.6).abs() < 1e-9);
        assert!((d.p99 - 4.96).abs() < 1e-9);
        assert_eq!(median(&[10.0, 30.0]), Some(20.0));
    }

    #[test]
    fn no_samples_is_no_distribution() {
        assert_eq!(Dist::of(&[]), None);
        assert_eq!(median(&[]), None);
    }
}
