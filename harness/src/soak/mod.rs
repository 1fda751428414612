//! `afm-bench soak`: mixed traffic for a long time, watching what leaks.
//!
//! Workers send the [`traffic`] mix back to back; every `--sample`
//! seconds the run reads the server's resident memory and descriptors
//! (with `--server-pid`) and the window's latencies. After the warm-up it
//! judges by a stated rule:
//! - no 5xx, and no connection broken by the server;
//! - resident memory flat: the Theil-Sen slope (the median of the slopes
//!   between every two readings) over the measured span grows it by at
//!   most 16 MiB or 5%, whichever is more. A median, because a reading
//!   taken while a big request holds its buffers is a spike that a
//!   least-squares line follows (one +80 MiB reading late in a 2-minute
//!   run failed it once); a leak moves every reading, so the median sees it;
//! - no descriptor growth: the most open in the last third is at most the
//!   most in the first third plus 2;
//! - p99 latency steady: over the last third, the median of the readings'
//!   p99 (each over its `--sample` seconds) at most 1.5x the first third's
//!   plus 50 ms. A median of windows, so one slow request (a grammar
//!   compiled, an eviction) does not decide a short run.

pub mod traffic;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use rand::rngs::StdRng;
use rand::SeedableRng;
use serde::Serialize;

use crate::bench::stats::percentile;
use crate::server::flags::{Remote, TargetArgs};
use crate::server::watch::{self, ProcessSample};
use traffic::{Client, Ending, Kind};

/// `afm-bench soak`'s flags.
#[derive(clap::Args, Debug, Clone)]
pub struct SoakArgs {
    /// The server soaked: `--url`, or `--server COMMAND` started and
    /// watched by the run.
    #[command(flatten)]
    pub server: TargetArgs,
    /// Seconds of traffic.
    #[arg(long, default_value_t = 1800.0)]
    pub duration: f64,
    /// Seconds at the start left out of the verdict (caches filling).
    #[arg(long, default_value_t = 120.0)]
    pub warmup: f64,
    /// Clients sending at once.
    #[arg(long, default_value_t = 4)]
    pub workers: usize,
    /// Seconds between readings of memory, descriptors and latency.
    #[arg(long, default_value_t = 10.0)]
    pub sample: f64,
    /// Seconds per span of the report's table (e.g. 600: by 10 minutes).
    #[arg(long, default_value_t = 600.0)]
    pub span: f64,
    /// The server's process id (Linux): memory and descriptors are judged
    /// only with it (or with a `--server` the run started).
    #[arg(long)]
    pub server_pid: Option<u32>,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Where soak.json goes.
    #[arg(long, default_value = "afm-bench-soak")]
    pub out: std::path::PathBuf,
}

/// One reading.
#[derive(Debug, Clone, Serialize)]
pub struct Reading {
    pub at_s: f64,
    pub server: Option<ProcessSample>,
    /// Requests that ended in the period, by outcome.
    pub ended: usize,
    pub p50_ms: Option<f64>,
    pub p99_ms: Option<f64>,
}

/// A stretch of the run in the report's table.
#[derive(Debug, Clone, Serialize)]
pub struct Span {
    pub from_s: f64,
    pub to_s: f64,
    pub requests: usize,
    pub server_errors: usize,
    pub p50_ms: Option<f64>,
    pub p99_ms: Option<f64>,
    pub rss_mib_start: Option<f64>,
    pub rss_mib_end: Option<f64>,
    pub fds_max: Option<usize>,
}

/// The rule's four parts and their figures.
#[derive(Debug, Clone, Serialize)]
pub struct Verdict {
    pub server_errors: usize,
    pub broken: usize,
    /// MiB per minute over the measured span.
    pub rss_slope_mib_per_min: Option<f64>,
    pub rss_growth_allowed_mib: Option<f64>,
    pub fds_first_third: Option<usize>,
    pub fds_last_third: Option<usize>,
    /// The median of the readings' p99 in the first and last thirds.
    pub p99_first_third_ms: Option<f64>,
    pub p99_last_third_ms: Option<f64>,
    pub failures: Vec<String>,
}

impl Verdict {
    pub fn passed(&self) -> bool {
        self.failures.is_empty()
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct SoakReport {
    pub url: String,
    pub model: String,
    pub seconds: f64,
    pub warmup_s: f64,
    pub workers: usize,
    pub requests: usize,
    /// Requests by kind and outcome ("chat-stream 200": 812).
    pub outcomes: BTreeMap<String, usize>,
    /// The first few broken connections and 5xx, in a few words each.
    pub examples: Vec<String>,
    pub samples: Vec<Reading>,
    pub spans: Vec<Span>,
    pub verdict: Verdict,
}

struct Ended {
    at: Instant,
    kind: Kind,
    outcome: Ending,
}

/// Runs the soak and judges it.
pub async fn run(args: &SoakArgs, note: impl Fn(&str)) -> Result<SoakReport> {
    // A fresh connection per request (`Target::http`), so a close racing
    // a reuse is never taken for a connection the server broke.
    let Remote {
        target,
        base,
        model,
        pid: started_pid,
        server: _server,
    } = args
        .server
        .open_remote("afm-bench soak", 300, &args.out)
        .await?;
    let pid = args.server_pid.or(started_pid);
    let client = Arc::new(Client {
        target,
        model: model.clone(),
    });
    let ended: Arc<Mutex<Vec<Ended>>> = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    let started = Instant::now();
    let workers: Vec<_> = (0..args.workers.max(1))
        .map(|w| {
            let (client, ended, stop) = (client.clone(), ended.clone(), stop.clone());
            let mut rng = StdRng::seed_from_u64(args.seed.wrapping_mul(1000) + w as u64);
            tokio::spawn(async move {
                let mut i = w;
                while !stop.load(Ordering::Relaxed) {
                    let kind = Kind::MIX[i % Kind::MIX.len()];
                    i += 1;
                    let outcome = client.send(kind, &mut rng).await;
                    ended.lock().expect("ended").push(Ended {
                        at: Instant::now(),
                        kind,
                        outcome,
                    });
                }
            })
        })
        .collect();
    let period = Duration::from_secs_f64(args.sample.max(0.5));
    let mut samples = Vec::new();
    let mut seen = 0;
    let end = started + Duration::from_secs_f64(args.duration);
    loop {
        let now = Instant::now();
        if now >= end {
            break;
        }
        tokio::time::sleep(period.min(end - now)).await;
        let all = ended.lock().expect("ended");
        let fresh = &all[seen..];
        let mut ms: Vec<f64> = fresh
            .iter()
            .filter_map(|e| match e.outcome {
                Ending::Status(200, d) => Some(d.as_secs_f64() * 1e3),
                _ => None,
            })
            .collect();
        ms.sort_by(f64::total_cmp);
        let sample = Reading {
            at_s: started.elapsed().as_secs_f64(),
            server: pid.and_then(watch::sample),
            ended: fresh.len(),
            p50_ms: (!ms.is_empty()).then(|| percentile(&ms, 50.0)),
            p99_ms: (!ms.is_empty()).then(|| percentile(&ms, 99.0)),
        };
        seen = all.len();
        drop(all);
        if samples.len() % 6 == 0 {
            note(&format!(
                "{:.0} s: {} requests so far{}",
                sample.at_s,
                seen,
                sample
                    .server
                    .map(|s| format!(", server {:.0} MiB, {} fds", s.rss_mib, s.fds))
                    .unwrap_or_default()
            ));
        }
        samples.push(sample);
    }
    stop.store(true, Ordering::Relaxed);
    for w in workers {
        w.await.context("a soak worker panicked")?;
    }
    let seconds = started.elapsed().as_secs_f64();
    let all = std::mem::take(&mut *ended.lock().expect("ended"));
    let report = judge(args, base, model, started, seconds, &all, samples);
    std::fs::create_dir_all(&args.out)?;
    std::fs::write(
        args.out.join("soak.json"),
        serde_json::to_string_pretty(&report)?,
    )?;
    Ok(report)
}

fn kind_name(kind: Kind) -> String {
    let debug = format!("{kind:?}");
    let mut name = String::new();
    for (i, c) in debug.chars().enumerate() {
        if c.is_uppercase() && i > 0 {
            name.push('-');
        }
        name.push(c.to_ascii_lowercase());
    }
    name
}

fn judge(
    args: &SoakArgs,
    url: String,
    model: String,
    started: Instant,
    seconds: f64,
    all: &[Ended],
    samples: Vec<Reading>,
) -> SoakReport {
    let at = |e: &Ended| e.at.duration_since(started).as_secs_f64();
    let mut outcomes = BTreeMap::new();
    let mut examples = Vec::new();
    let (mut server_errors, mut broken) = (0, 0);
    for e in all {
        let label = match &e.outcome {
            Ending::Status(s, _) => format!("{s}"),
            Ending::Left => "left by the client".into(),
            Ending::Broken(_) => "broken".into(),
        };
        *outcomes
            .entry(format!("{} {label}", kind_name(e.kind)))
            .or_insert(0) += 1;
        let bad = match &e.outcome {
            Ending::Status(s, _) if *s >= 500 => {
                server_errors += 1;
                Some(format!("{}: {s}", kind_name(e.kind)))
            }
            Ending::Broken(why) => {
                broken += 1;
                Some(format!("{}: {why}", kind_name(e.kind)))
            }
            _ => None,
        };
        if let (Some(b), true) = (bad, examples.len() < 5) {
            examples.push(b);
        }
    }
    let warmup = args.warmup.min(seconds / 2.0);
    let measured: Vec<&Reading> = samples.iter().filter(|s| s.at_s > warmup).collect();
    let third = (seconds - warmup) / 3.0;
    let in_third = |s: &&Reading, k: f64| {
        s.at_s > warmup + k * third && s.at_s <= warmup + (k + 1.0) * third + 1e-9
    };
    let latencies_in = |from: f64, to: f64| {
        let mut ms: Vec<f64> = all
            .iter()
            .filter(|e| at(e) > from && at(e) <= to)
            .filter_map(|e| match e.outcome {
                Ending::Status(200, d) => Some(d.as_secs_f64() * 1e3),
                _ => None,
            })
            .collect();
        ms.sort_by(f64::total_cmp);
        ms
    };
    let p = |ms: &[f64], q: f64| (!ms.is_empty()).then(|| percentile(ms, q));
    let mut failures = Vec::new();
    if server_errors > 0 {
        failures.push(format!("{server_errors} replies with a 5xx"));
    }
    if broken > 0 {
        failures.push(format!("{broken} connections broken by the server"));
    }
    // Memory: the robust slope over the measured samples.
    let points: Vec<(f64, f64)> = measured
        .iter()
        .filter_map(|s| s.server.map(|p| (s.at_s / 60.0, p.rss_mib)))
        .collect();
    let slope = slope_of(&points);
    let allowed = points.first().map(|&(_, rss)| (rss * 0.05).max(16.0));
    if let (Some(slope), Some(allowed), Some(first), Some(last)) =
        (slope, allowed, points.first(), points.last())
    {
        let growth = slope * (last.0 - first.0);
        if growth > allowed {
            failures.push(format!(
                "resident memory grew {slope:.2} MiB/min, {growth:.0} MiB over the measured span (at most {allowed:.0})"
            ));
        }
    }
    let fds_in = |k: f64| {
        measured
            .iter()
            .filter(|s| in_third(s, k))
            .filter_map(|s| s.server.map(|p| p.fds))
            .max()
    };
    let (fds_first, fds_last) = (fds_in(0.0), fds_in(2.0));
    if let (Some(a), Some(b)) = (fds_first, fds_last) {
        if b > a + 2 {
            failures.push(format!("open descriptors grew from {a} to {b}"));
        }
    }
    let p99_in = |k: f64| {
        let mut p99s: Vec<f64> = measured
            .iter()
            .filter(|s| in_third(s, k))
            .filter_map(|s| s.p99_ms)
            .collect();
        p99s.sort_by(f64::total_cmp);
        p(&p99s, 50.0)
    };
    let (p99_first, p99_last) = (p99_in(0.0), p99_in(2.0));
    match (p99_first, p99_last) {
        (Some(a), Some(b)) if b > 1.5 * a + 50.0 => {
            failures.push(format!("p99 latency rose from {a:.0} ms to {b:.0} ms"))
        }
        (None, _) | (_, None) => {
            failures.push("no request was served in a third of the run".into())
        }
        _ => {}
    }
    let mut spans = Vec::new();
    let step = args.span.max(args.sample);
    let mut from = 0.0;
    while from < seconds - 1e-6 {
        let to = (from + step).min(seconds);
        let ms = latencies_in(from, to);
        let in_span: Vec<&Reading> = samples
            .iter()
            .filter(|s| s.at_s > from && s.at_s <= to + 1e-9)
            .collect();
        spans.push(Span {
            from_s: from,
            to_s: to,
            requests: all.iter().filter(|e| at(e) > from && at(e) <= to).count(),
            server_errors: all
                .iter()
                .filter(|e| at(e) > from && at(e) <= to)
                .filter(|e| matches!(e.outcome, Ending::Status(s, _) if s >= 500))
                .count(),
            p50_ms: p(&ms, 50.0),
            p99_ms: p(&ms, 99.0),
            rss_mib_start: in_span.first().and_then(|s| s.server).map(|p| p.rss_mib),
            rss_mib_end: in_span.last().and_then(|s| s.server).map(|p| p.rss_mib),
            fds_max: in_span.iter().filter_map(|s| s.server.map(|p| p.fds)).max(),
        });
        from = to;
    }
    SoakReport {
        url,
        model,
        seconds,
        warmup_s: warmup,
        workers: args.workers,
        requests: all.len(),
        outcomes,
        examples,
        samples,
        spans,
        verdict: Verdict {
            server_errors,
            broken,
            rss_slope_mib_per_min: slope,
            rss_growth_allowed_mib: allowed,
            fds_first_third: fds_first,
            fds_last_third: fds_last,
            p99_first_third_ms: p99_first,
            p99_last_third_ms: p99_last,
            failures,
        },
    }
}

/// Theil-Sen slope of y over x: the median of the slopes between every
/// two points with different x; `None` under three points. Up to ~29% of
/// the points can be wild without moving it far.
fn slope_of(points: &[(f64, f64)]) -> Option<f64> {
    if points.len() < 3 {
        return None;
    }
    let mut slopes: Vec<f64> = points
        .iter()
        .enumerate()
        .flat_map(|(i, a)| points[i + 1..].iter().map(move |b| (a, b)))
        .filter(|(a, b)| b.0 != a.0)
        .map(|(a, b)| (b.1 - a.1) / (b.0 - a.0))
        .collect();
    if slopes.is_empty() {
        return None;
    }
    slopes.sort_by(f64::total_cmp);
    let n = slopes.len();
    Some(match n % 2 {
        1 => slopes[n / 2],
        _ => (slopes[n / 2 - 1] + slopes[n / 2]) / 2.0,
    })
}

impl SoakReport {
    /// The spans as a Markdown table, then the verdict.
    pub fn table(&self) -> String {
        let f = |v: Option<f64>| v.map_or("-".into(), |v| format!("{v:.0}"));
        let mut s = String::from(
            "| span (s) | requests | 5xx | p50 ms | p99 ms | RSS MiB start-end | fds max |\n|---|---:|---:|---:|---:|---|---:|\n",
        );
        for sp in &self.spans {
            s.push_str(&format!(
                "| {:.0}-{:.0} | {} | {} | {} | {} | {}-{} | {} |\n",
                sp.from_s,
                sp.to_s,
                sp.requests,
                sp.server_errors,
                f(sp.p50_ms),
                f(sp.p99_ms),
                f(sp.rss_mib_start),
                f(sp.rss_mib_end),
                sp.fds_max.map_or("-".into(), |v| v.to_string())
            ));
        }
        let v = &self.verdict;
        s.push_str(&format!(
            "\n{} requests in {:.0} s ({} workers, warm-up {:.0} s): {} 5xx, {} broken; RSS slope {} MiB/min (allowed growth {} MiB); fds {} -> {}; p99 {} -> {} ms (median of readings)\n",
            self.requests,
            self.seconds,
            self.workers,
            self.warmup_s,
            v.server_errors,
            v.broken,
            v.rss_slope_mib_per_min.map_or("-".into(), |x| format!("{x:.2}")),
            f(v.rss_growth_allowed_mib),
            v.fds_first_third.map_or("-".into(), |x| x.to_string()),
            v.fds_last_third.map_or("-".into(), |x| x.to_string()),
            f(v.p99_first_third_ms),
            f(v.p99_last_third_ms),
        ));
        match v.passed() {
            true => s.push_str("soak: PASS\n"),
            false => s.push_str(&format!("soak: FAIL: {}\n", v.failures.join("; "))),
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slope_is_the_line_through_steady_growth() {
        let pts: Vec<(f64, f64)> = (0..10)
            .map(|i| (i as f64, 100.0 + 2.0 * i as f64))
            .collect();
        assert!((slope_of(&pts).unwrap() - 2.0).abs() < 1e-9);
        assert_eq!(slope_of(&pts[..2]), None);
    }

    /// CI's 2-minute soak once failed on a flat server: readings every
    /// 5 s swinging 294-318 MiB, and one taken at 384 MiB while a big
    /// request held its buffers. The spike must not read as growth (a
    /// least-squares line through these grows 24 MiB).
    #[test]
    fn one_spike_in_flat_memory_is_not_growth() {
        let rss = [
            305.0, 304.0, 317.0, 303.0, 305.0, 317.0, 305.0, 305.0, 294.0, 306.0, 384.0, 362.0,
            318.0, 305.0, 319.0, 317.0,
        ];
        let pts: Vec<(f64, f64)> = rss
            .iter()
            .enumerate()
            .map(|(i, &y)| ((45.0 + 5.0 * i as f64) / 60.0, y))
            .collect();
        let slope = slope_of(&pts).unwrap();
        let span = pts.last().unwrap().0 - pts[0].0;
        assert!(slope * span < 16.0, "{slope} MiB/min");
    }

    /// A leak with the same noise and spike on top is still growth.
    #[test]
    fn a_leak_under_noise_and_a_spike_is_growth() {
        let noise = [
            0.0, 12.0, -2.0, 0.0, 11.0, 0.0, -10.0, 1.0, 80.0, 1.0, -11.0, 0.0,
        ];
        let pts: Vec<(f64, f64)> = noise
            .iter()
            .enumerate()
            .map(|(i, &n)| (i as f64 / 12.0, 300.0 + 3.0 * i as f64 + n))
            .collect();
        let slope = slope_of(&pts).unwrap();
        assert!((slope / 36.0 - 1.0).abs() < 0.15, "{slope} MiB/min");
    }

    #[test]
    fn kinds_are_named_in_kebab_case() {
        assert_eq!(kind_name(Kind::ChatStream), "chat-stream");
        assert_eq!(kind_name(Kind::Fuzzed), "fuzzed");
    }
}
