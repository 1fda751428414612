//! A benchmark run: where and how it ran, and per variant (one engine or
//! request configuration) and concurrency level, the measured figures.
//! Written as `bench.json`, printed as a table, rendered as HTML.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::Result;
use serde::{Deserialize, Serialize};

use super::load::LevelRun;
use super::server_metrics::ServerCounters;
use super::stats::{median, Dist};
use crate::report::{read_versioned, write_json};

/// Report format version; readers refuse others.
pub const FORMAT: &str = "afm-bench-report/1";

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct BenchRun {
    pub target: String,
    pub model: String,
    pub server_flags: Vec<String>,
    pub engine_version: String,
    pub git_commit: Option<String>,
    pub host: String,
    /// CPU model and memory.
    pub hardware: String,
    pub started: String,
    pub wall_seconds: f64,
    pub scenario: String,
    pub prompts: String,
    pub requests: usize,
    pub max_tokens: u32,
    pub warmup: usize,
    pub repetitions: usize,
}

/// One concurrency level of one variant, over all repetitions.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LevelResult {
    pub concurrency: usize,
    pub requests: usize,
    pub errors: usize,
    /// A few distinct error messages, for the reader.
    pub error_examples: Vec<String>,
    /// Latencies of successful requests, in ms.
    pub ttft: Option<Dist>,
    pub tpot: Option<Dist>,
    pub itl: Option<Dist>,
    pub e2e: Option<Dist>,
    /// Medians over repetitions; only successful requests' tokens count.
    pub output_tokens_per_s: f64,
    pub total_tokens_per_s: f64,
    pub requests_per_s: f64,
    /// Each repetition's output tokens/s.
    pub output_tokens_per_s_runs: Vec<f64>,
    pub prompt_tokens: u64,
    pub output_tokens: u64,
    /// Prompt tokens the server reported as served from its cache.
    pub cached_tokens: Option<u64>,
    /// Some requests' token counts were counted from chunks because the
    /// server reported no usage.
    pub tokens_estimated: bool,
    pub server: Option<ServerCounters>,
}

impl LevelResult {
    pub fn of(concurrency: usize, runs: &[LevelRun], server: Option<ServerCounters>) -> Self {
        let samples: Vec<_> = runs.iter().flat_map(|r| &r.samples).collect();
        let ok: Vec<_> = samples.iter().filter(|s| s.ok()).collect();
        let mut error_examples: Vec<String> = Vec::new();
        for e in samples.iter().filter_map(|s| s.error.as_ref()) {
            if error_examples.len() < 3 && !error_examples.contains(e) {
                error_examples.push(e.clone());
            }
        }
        let per_run = |f: &dyn Fn(&LevelRun) -> f64| -> f64 {
            median(&runs.iter().map(f).collect::<Vec<_>>()).unwrap_or(0.0)
        };
        let ok_sum = |r: &LevelRun, tokens: &dyn Fn(&super::load::Sample) -> u64| -> f64 {
            r.samples.iter().filter(|s| s.ok()).map(tokens).sum::<u64>() as f64
        };
        let rate = |r: &LevelRun, x: f64| if r.wall_s > 0.0 { x / r.wall_s } else { 0.0 };
        let output_runs: Vec<f64> = runs
            .iter()
            .map(|r| rate(r, ok_sum(r, &|s| s.output_tokens)))
            .collect();
        let cached: Vec<u64> = ok.iter().filter_map(|s| s.cached_tokens).collect();
        LevelResult {
            concurrency,
            requests: samples.len(),
            errors: samples.len() - ok.len(),
            error_examples,
            ttft: Dist::of(&ok.iter().filter_map(|s| s.ttft_ms).collect::<Vec<_>>()),
            tpot: Dist::of(&ok.iter().filter_map(|s| s.tpot_ms()).collect::<Vec<_>>()),
            itl: Dist::of(
                &ok.iter()
                    .flat_map(|s| s.itl_ms.iter().copied())
                    .collect::<Vec<_>>(),
            ),
            e2e: Dist::of(&ok.iter().map(|s| s.e2e_ms).collect::<Vec<_>>()),
            output_tokens_per_s: median(&output_runs).unwrap_or(0.0),
            total_tokens_per_s: per_run(&|r| {
                rate(r, ok_sum(r, &|s| s.output_tokens + s.prompt_tokens))
            }),
            requests_per_s: per_run(&|r| {
                rate(r, r.samples.iter().filter(|s| s.ok()).count() as f64)
            }),
            output_tokens_per_s_runs: output_runs,
            prompt_tokens: ok.iter().map(|s| s.prompt_tokens).sum(),
            output_tokens: ok.iter().map(|s| s.output_tokens).sum(),
            cached_tokens: (!cached.is_empty()).then(|| cached.iter().sum()),
            tokens_estimated: ok.iter().any(|s| !s.usage_reported),
            server,
        }
    }
}

/// One configuration measured across the concurrency levels.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Variant {
    pub name: String,
    /// The engine or server configuration it ran with.
    pub server_flags: Vec<String>,
    pub levels: Vec<LevelResult>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BenchReport {
    pub format: String,
    pub run: BenchRun,
    pub variants: Vec<Variant>,
}

impl BenchReport {
    pub fn new(run: BenchRun, variants: Vec<Variant>) -> Self {
        BenchReport {
            format: FORMAT.into(),
            run,
            variants,
        }
    }

    pub fn read(path: &Path) -> Result<Self> {
        read_versioned(path, "afm-bench", FORMAT, |r: &BenchReport| &r.format)
    }

    pub fn write(&self, path: &Path) -> Result<()> {
        write_json(path, self)
    }

    /// The console table: one row per level, one block per variant.
    pub fn table(&self) -> String {
        let mut out = String::new();
        for v in &self.variants {
            let _ = writeln!(out, "{}  [{}]", v.name, v.server_flags.join(" "));
            let _ =
                writeln!(
                out,
                "  {:>5} {:>5} {:>4} {:>7} {:>9} {:>9} {:>9} {:>9} {:>8} {:>8} {:>8} {:>9} {:>9}",
                "conc", "reqs", "err", "req/s", "out tok/s", "tot tok/s", "TTFT p50", "TTFT p99",
                "TPOT p50", "ITL p50", "ITL p99", "E2E p50", "E2E p99"
            );
            for l in &v.levels {
                let _ = writeln!(
                    out,
                    "  {:>5} {:>5} {:>4} {:>7.2} {:>9.1} {:>9.1} {:>9} {:>9} {:>8} {:>8} {:>8} {:>9} {:>9}",
                    l.concurrency,
                    l.requests,
                    l.errors,
                    l.requests_per_s,
                    l.output_tokens_per_s,
                    l.total_tokens_per_s,
                    ms(l.ttft.map(|d| d.p50)),
                    ms(l.ttft.map(|d| d.p99)),
                    ms(l.tpot.map(|d| d.p50)),
                    ms(l.itl.map(|d| d.p50)),
                    ms(l.itl.map(|d| d.p99)),
                    ms(l.e2e.map(|d| d.p50)),
                    ms(l.e2e.map(|d| d.p99)),
                );
                if let Some(s) = &l.server {
                    let fig = |x: Option<f64>| x.map_or("-".to_string(), |v| format!("{v:.0}"));
                    let _ = writeln!(
                        out,
                        "        server: prefill tokens computed {}, cache hits {}",
                        fig(s.prefill_computed_tokens),
                        fig(s.cache_hits)
                    );
                }
                for e in &l.error_examples {
                    let _ = writeln!(out, "        error: {e}");
                }
            }
        }
        out
    }
}

/// Milliseconds for the table; "-" when nothing was measured.
pub fn ms(v: Option<f64>) -> String {
    v.map_or("-".into(), |v| format!("{v:.1}ms"))
}

#[cfg(test)]
mod tests {
    use super::super::load::Sample;
    use super::*;

    fn ok(ttft: f64, e2e: f64, out: u64) -> Sample {
        Sample {
            ttft_ms: Some(ttft),
            e2e_ms: e2e,
            itl_ms: vec![1.0; out.saturating_sub(1) as usize],
            prompt_tokens: 10,
            output_tokens: out,
            usage_reported: true,
            ..Default::default()
        }
    }

    #[test]
    fn errors_are_counted_and_left_out_of_latency_and_throughput() {
        let failed = Sample {
            error: Some("HTTP 500: boom".into()),
            e2e_ms: 0.5,
            ..Default::default()
        };
        let run = LevelRun {
            samples: vec![ok(10.0, 100.0, 11), failed.clone(), ok(30.0, 300.0, 21)],
            wall_s: 2.0,
        };
        let l = LevelResult::of(2, &[run], None);
        assert_eq!((l.requests, l.errors), (3, 1));
        assert_eq!(l.error_examples, vec!["HTTP 500: boom".to_string()]);
        assert_eq!(l.e2e.unwrap().n, 2);
        assert_eq!(l.e2e.unwrap().p50, 200.0);
        assert_eq!(l.output_tokens_per_s, 16.0);
        assert_eq!(l.total_tokens_per_s, 26.0);
        assert_eq!(l.requests_per_s, 1.0);

        let all_failed = LevelResult::of(
            1,
            &[LevelRun {
                samples: vec![failed],
                wall_s: 1.0,
            }],
            None,
        );
        assert_eq!(
            (all_failed.ttft, all_failed.output_tokens_per_s),
            (None, 0.0)
        );
    }
}
