//! When requests are sent: a closed loop (N users, each sending its next
//! request when the previous one ended) or an open loop (arrivals at a
//! request rate, whatever the server's state), with vLLM `bench serve`'s
//! semantics: gaps drawn from a gamma distribution of shape `burstiness`
//! (1 = a Poisson process) and mean `1 / rate`; an infinite rate sends
//! everything at once; a ramp moves the rate from a start to an end value
//! over the run.

use rand::rngs::StdRng;
use rand::SeedableRng;
use rand_distr::{Distribution, Gamma};
use serde::{Deserialize, Serialize};

/// How a level loads the target.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Shape {
    /// `concurrency` users, each with one request in flight.
    Closed { concurrency: usize },
    /// Arrivals at `rate` requests/s (infinite: all at once), at most
    /// `max_concurrency` in flight; an arrival over the cap waits for a
    /// slot, and that wait is the request's client queue time.
    Open {
        rate: f64,
        burstiness: f64,
        max_concurrency: Option<usize>,
        ramp: Option<Ramp>,
    },
}

impl Shape {
    /// The level's figure on a chart's x axis: users or requests/s.
    pub fn x(&self) -> f64 {
        match *self {
            Shape::Closed { concurrency } => concurrency as f64,
            Shape::Open { rate, ramp, .. } => ramp.map_or(rate, |r| r.end),
        }
    }

    /// Most requests the client keeps in flight (None: an open loop
    /// without a cap).
    pub fn in_flight_cap(&self) -> Option<usize> {
        match *self {
            Shape::Closed { concurrency } => Some(concurrency),
            Shape::Open {
                max_concurrency, ..
            } => max_concurrency,
        }
    }

    /// The same kind of level at load `x` (users, or requests/s without
    /// a ramp): the levels an SLO search probes.
    pub fn at_load(self, x: f64) -> Shape {
        match self {
            Shape::Closed { .. } => Shape::Closed {
                concurrency: x.round().max(1.0) as usize,
            },
            Shape::Open {
                burstiness,
                max_concurrency,
                ..
            } => Shape::Open {
                rate: x,
                burstiness,
                max_concurrency,
                ramp: None,
            },
        }
    }

    pub fn label(&self) -> String {
        match *self {
            Shape::Closed { concurrency } => format!("concurrency {concurrency}"),
            Shape::Open {
                rate,
                max_concurrency,
                ramp,
                ..
            } => {
                let mut s = match ramp {
                    Some(r) => format!("rate {} -> {} req/s ({:?})", r.start, r.end, r.strategy),
                    None if rate.is_infinite() => "rate inf".to_string(),
                    None => format!("rate {rate} req/s"),
                };
                if let Some(c) = max_concurrency {
                    s.push_str(&format!(", max concurrency {c}"));
                }
                s
            }
        }
    }
}

impl Default for Shape {
    fn default() -> Self {
        Shape::Closed { concurrency: 1 }
    }
}

/// A rate that moves over the run (vLLM's `--ramp-up-strategy`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Ramp {
    pub strategy: RampStrategy,
    pub start: f64,
    pub end: f64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum RampStrategy {
    Linear,
    Exponential,
}

impl Ramp {
    /// The rate at `progress` (0..=1) of the run.
    fn rate_at(&self, progress: f64) -> f64 {
        let p = progress.clamp(0.0, 1.0);
        match self.strategy {
            RampStrategy::Linear => self.start + (self.end - self.start) * p,
            RampStrategy::Exponential => self.start * (self.end / self.start).powf(p),
        }
    }
}

/// Where a run stops: after `requests`, after `duration_s`, or at the
/// first of both.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Bound {
    pub requests: Option<usize>,
    pub duration_s: Option<f64>,
}

impl Bound {
    pub fn allows(&self, sent: usize, elapsed_s: f64) -> bool {
        self.requests.is_none_or(|n| sent < n) && self.duration_s.is_none_or(|d| elapsed_s < d)
    }
}

/// Send offsets in seconds of an open loop's arrivals, from `seed`.
/// Progress through a ramp is by request count when the run is bounded by
/// one, else by time (vLLM ramps by request index).
pub fn schedule(
    rate: f64,
    burstiness: f64,
    ramp: Option<Ramp>,
    bound: Bound,
    seed: u64,
) -> Vec<f64> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut out = Vec::new();
    let mut t = 0.0;
    // A run bounded by nothing but time at an infinite rate would never end.
    let cap = bound.requests.unwrap_or(1_000_000);
    while bound.allows(out.len(), t) && out.len() < cap {
        out.push(t);
        let progress = match (bound.requests, bound.duration_s) {
            (Some(n), _) => out.len() as f64 / n.max(1) as f64,
            (None, Some(d)) => t / d,
            (None, None) => 1.0,
        };
        let r = ramp.map_or(rate, |ramp| ramp.rate_at(progress));
        if r.is_infinite() {
            continue;
        }
        if r <= 0.0 {
            break;
        }
        // Gamma(shape k, scale 1/(r k)): mean 1/r, variance 1/(r^2 k).
        let gap = Gamma::new(burstiness, 1.0 / (r * burstiness))
            .map(|g| g.sample(&mut rng))
            .unwrap_or(1.0 / r);
        t += gap;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn by_count(n: usize) -> Bound {
        Bound {
            requests: Some(n),
            duration_s: None,
        }
    }

    #[test]
    fn poisson_arrivals_average_the_rate_and_repeat_per_seed() {
        let a = schedule(4.0, 1.0, None, by_count(4000), 7);
        let mean_gap = a.last().unwrap() / (a.len() - 1) as f64;
        assert!((mean_gap - 0.25).abs() < 0.02, "mean gap {mean_gap}");
        assert_eq!(a, schedule(4.0, 1.0, None, by_count(4000), 7));
        assert_ne!(a, schedule(4.0, 1.0, None, by_count(4000), 8));
    }

    #[test]
    fn burstiness_spreads_gaps_at_the_same_mean() {
        let cv = |b: f64| {
            let a = schedule(2.0, b, None, by_count(4000), 1);
            let gaps: Vec<f64> = a.windows(2).map(|w| w[1] - w[0]).collect();
            let mean = gaps.iter().sum::<f64>() / gaps.len() as f64;
            let var = gaps.iter().map(|g| (g - mean).powi(2)).sum::<f64>() / gaps.len() as f64;
            (mean, var.sqrt() / mean)
        };
        let (m1, cv1) = cv(1.0);
        let (m4, cv4) = cv(0.25);
        assert!(
            (m1 - 0.5).abs() < 0.05 && (m4 - 0.5).abs() < 0.08,
            "{m1} {m4}"
        );
        // A gamma's coefficient of variation is 1/sqrt(shape): 1 and 2.
        assert!(
            (cv1 - 1.0).abs() < 0.1 && (cv4 - 2.0).abs() < 0.3,
            "{cv1} {cv4}"
        );
    }

    #[test]
    fn infinite_rate_sends_at_once_and_duration_bounds_the_run() {
        assert_eq!(
            schedule(f64::INFINITY, 1.0, None, by_count(5), 0),
            vec![0.0; 5]
        );
        let timed = Bound {
            requests: None,
            duration_s: Some(10.0),
        };
        let a = schedule(3.0, 1.0, None, timed, 2);
        assert!(a.iter().all(|&t| t < 10.0));
        assert!((20..=40).contains(&a.len()), "{} arrivals", a.len());
    }

    #[test]
    fn a_linear_ramp_sends_faster_at_the_end() {
        let ramp = Ramp {
            strategy: RampStrategy::Linear,
            start: 1.0,
            end: 20.0,
        };
        let a = schedule(0.0, 1.0, Some(ramp), by_count(400), 3);
        let first = a[100] - a[0];
        let last = a[399] - a[299];
        assert!(first > 3.0 * last, "first quarter {first}s, last {last}s");
    }
}
