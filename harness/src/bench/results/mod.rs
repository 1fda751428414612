//! A benchmark run: where and how it ran, and per variant (one engine or
//! request configuration) and concurrency level, the measured figures.
//! Written as `bench.json`, printed as a table, rendered as HTML.

pub mod charts;
pub mod compare;
pub mod goodput;
pub mod merge;
pub mod page;
pub mod records;
pub mod search;
pub mod sessions;

use std::fmt::Write as _;
use std::path::Path;

use anyhow::Result;
use serde::{Deserialize, Serialize};

use std::collections::BTreeMap;

use crate::bench::load::arrivals::Shape;
use crate::bench::load::cancel::CancelFigures;
use crate::bench::load::client_cpu::Spent;
use crate::bench::load::replay::ReplayFigures;
use crate::bench::load::server_metrics::GaugePoint;
use crate::bench::load::server_metrics::ServerCounters;
use crate::bench::load::LevelRun;
use crate::bench::results::goodput::{Goodput, Slo};
use crate::bench::results::sessions::{StallFigures, TurnFigures, TurnPoint};
use crate::bench::sample::Sample;
use crate::bench::stats::{median, Dist};
use crate::bench::verify::coverage::Coverage;
use crate::bench::verify::own_marker_seen;
use crate::bench::verify::recount::TokenFigures;
use crate::bench::verify::schema_probe::SchemaProbe;
use crate::protocol::reply::is_token_limit;
use crate::report::{read_versioned, write_json};

/// Report format version; readers refuse others.
pub const FORMAT: &str = "afm-bench-report/2";

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
    /// `--requests` (None: bounded by duration only).
    pub requests: Option<usize>,
    #[serde(default)]
    pub duration_s: Option<f64>,
    pub max_tokens: u32,
    pub warmup: usize,
    pub repetitions: usize,
    /// chat, completions, messages or responses.
    #[serde(default)]
    pub endpoint: String,
    /// The SLO of the goodput figures, as given.
    #[serde(default)]
    pub slo: String,
    /// Replies were checked.
    #[serde(default)]
    pub verified: bool,
    #[serde(default)]
    pub schema_share: f64,
    /// The percentiles reported beside p50/p90/p99.
    #[serde(default)]
    pub percentiles: Vec<f64>,
    /// Check kinds counted but not corrupting (`--tolerate`).
    #[serde(default)]
    pub tolerated: Vec<String>,
    /// The reply cap and the request time limit.
    #[serde(default)]
    pub reply_limits: Option<crate::server::ReplyLimits>,
}

/// The highest load level whose correct goodput share met the target.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Search {
    /// "rate" or "concurrency".
    pub over: String,
    /// The correct-goodput share a level must reach (0..1).
    pub target_share: f64,
    /// Each probed level's x and correct-goodput share, in probe order.
    pub probes: Vec<[f64; 2]>,
    /// The highest x that met the target (None: not even the lowest).
    pub best: Option<f64>,
}

/// A request whose reply failed a check, for the report's list.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Corrupted {
    pub conversation: usize,
    pub turn: usize,
    pub marker: Option<String>,
    pub check: String,
    pub detail: String,
    /// The reply's start.
    pub reply: String,
}

/// The prefix cache as the client expected it and as the server said.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct CacheFigures {
    /// Requests for which the client knew a cacheable prefix.
    pub requests: usize,
    /// Sum of what they could have been served from cache.
    pub expected_tokens: u64,
    /// Sum of what the server reported cached for them (None: it never
    /// reported cached tokens).
    pub reported_tokens: Option<u64>,
    /// Of those requests, how many reported at least 90% of expected.
    pub requests_at_90: usize,
}

/// afm-bench's own CPU time over a level's repetitions
/// (`bench::load::client_cpu` says what each clock counts).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ClientCpu {
    /// The event path's: the reading thread's clock against a server over
    /// HTTP (every stream is read on it), else the process's.
    pub cpu_s: f64,
    /// The whole process's, every thread and start-up work included.
    #[serde(default)]
    pub process_cpu_s: f64,
    /// Which clock `cpu_s` is: "reading thread" or "process".
    #[serde(default)]
    pub clock: String,
    /// Stream events received.
    pub chunks: usize,
    pub us_per_chunk: f64,
    #[serde(default)]
    pub process_us_per_chunk: f64,
}

impl ClientCpu {
    /// `one_thread`: every stream was read on the measuring thread.
    pub fn of(spent: Spent, one_thread: bool, runs: &[LevelRun]) -> ClientCpu {
        let chunks: usize = runs.iter().flat_map(|r| &r.samples).map(|s| s.chunks).sum();
        let (cpu_s, clock) = match spent.thread_s.filter(|_| one_thread) {
            Some(t) => (t, "reading thread"),
            None => (spent.process_s, "process"),
        };
        let per_chunk = |s: f64| match chunks {
            0 => 0.0,
            n => s * 1e6 / n as f64,
        };
        ClientCpu {
            cpu_s,
            process_cpu_s: spent.process_s,
            clock: clock.into(),
            chunks,
            us_per_chunk: per_chunk(cpu_s),
            process_us_per_chunk: per_chunk(spent.process_s),
        }
    }
}

/// One load level of one variant, over all repetitions.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct LevelResult {
    pub shape: Shape,
    /// "concurrency 8", "rate 4 req/s".
    pub label: String,
    /// Users (closed loop) or requests/s (open loop): the charts' x.
    pub x: f64,
    pub requests: usize,
    /// Requests the server failed (transport, status, error, no output).
    pub errors: usize,
    /// Requests the client dropped on purpose.
    #[serde(default)]
    pub cancelled: usize,
    /// Served requests whose reply failed a check.
    pub corrupted: usize,
    /// Failures by kind: an error's [`ErrorKind`](crate::bench::sample::ErrorKind)
    /// name or a check's name.
    pub failures: BTreeMap<String, usize>,
    /// A few distinct error messages, for the reader.
    pub error_examples: Vec<String>,
    /// The corrupted requests (at most 50).
    pub corrupted_requests: Vec<Corrupted>,
    /// Latencies of served requests, in ms (from sending).
    pub ttft: Option<Dist>,
    /// To the first answer token, after any reasoning.
    pub ttfa: Option<Dist>,
    pub tpot: Option<Dist>,
    pub itl: Option<Dist>,
    pub e2e: Option<Dist>,
    /// Time a request waited for a client slot before it was sent.
    pub queue: Option<Dist>,
    /// Open loop: how late the client started requests against their
    /// arrival schedule (its own lag, not the server's).
    #[serde(default)]
    pub schedule_delay: Option<Dist>,
    /// The client's own CPU over the level, per stream event received
    /// (None in-process, where the engine shares the process).
    #[serde(default)]
    pub client_cpu: Option<ClientCpu>,
    /// Output tokens/s of each served request.
    pub request_output_tokens_per_s: Option<Dist>,
    /// Medians over repetitions; every served request's tokens count,
    /// the drain tail included (vLLM's definition).
    pub output_tokens_per_s: f64,
    /// The same up to the last request's sending: the drain tail, when
    /// fewer requests are in flight, left out.
    pub steady_output_tokens_per_s: f64,
    pub total_tokens_per_s: f64,
    /// Correct requests per second.
    pub requests_per_s: f64,
    /// Each repetition's output tokens/s.
    pub output_tokens_per_s_runs: Vec<f64>,
    pub prompt_tokens: u64,
    pub output_tokens: u64,
    /// Reasoning tokens of served requests (usage, else counted events).
    pub reasoning_tokens: Option<u64>,
    /// Served requests that ended at their token budget (`length`,
    /// `max_tokens`, `max_output_tokens`): with `--ignore-eos`, all of them
    /// on a server that honours it; otherwise budgets eaten (by reasoning).
    #[serde(default)]
    pub cut_by_budget: usize,
    /// Prompt tokens the server reported as served from its cache.
    pub cached_tokens: Option<u64>,
    pub cache: Option<CacheFigures>,
    /// Requests that carried an isolation marker, and served replies that
    /// held their own (isolation verified, not only not refuted).
    pub markers_sent: usize,
    pub markers_echoed: usize,
    /// Requests that met the SLO, and those that also were correct.
    pub goodput: Option<Goodput>,
    /// Replies replayed alone after the level (`--verify-alone`).
    #[serde(default)]
    pub replay: Option<ReplayFigures>,
    /// Which isolation checks covered how many replies.
    #[serde(default)]
    pub coverage: Coverage,
    /// The server's running and waiting counts over the level, from its
    /// `/metrics` (empty: it has none).
    #[serde(default)]
    pub server_timeline: Vec<GaugePoint>,
    /// The replies' tokens re-counted on the client, against the usage.
    #[serde(default)]
    pub tokens: Option<TokenFigures>,
    /// With cancellation: what the server did with dropped requests.
    #[serde(default)]
    pub cancellation: Option<CancelFigures>,
    /// Some requests' token counts were counted from chunks because the
    /// server reported no usage.
    pub tokens_estimated: bool,
    pub server: Option<ServerCounters>,
    /// Per turn, when conversations have more than one.
    #[serde(default)]
    pub turns: Vec<TurnFigures>,
    /// Each request's turn, prompt and time to first token (with turns).
    #[serde(default)]
    pub turn_points: Vec<TurnPoint>,
    /// Streams' pace while a long prompt was read, and otherwise.
    #[serde(default)]
    pub prefill_stall: Option<StallFigures>,
}

impl LevelResult {
    /// One line for the console as the level ends.
    pub fn headline(&self) -> String {
        format!(
            "  {}: {}/{} served, {} corrupted, {:.1} output tok/s{}",
            self.label,
            self.requests - self.errors - self.cancelled,
            self.requests,
            self.corrupted,
            self.output_tokens_per_s,
            self.goodput.map_or(String::new(), |g| format!(
                ", correct goodput {:.2}/s ({:.0}%)",
                g.correct_good_per_s,
                100.0 * g.correct_good_share
            ))
        )
    }

    pub fn of(
        shape: Shape,
        runs: &[LevelRun],
        server: Option<ServerCounters>,
        slo: &Slo,
        percentiles: &[f64],
    ) -> Self {
        let samples: Vec<&Sample> = runs.iter().flat_map(|r| &r.samples).collect();
        let served: Vec<&&Sample> = samples.iter().filter(|s| s.served()).collect();
        let mut error_examples: Vec<String> = Vec::new();
        let mut failures: BTreeMap<String, usize> = BTreeMap::new();
        let mut corrupted_requests = Vec::new();
        for s in &samples {
            if let Some(e) = &s.error {
                if error_examples.len() < 3 && !error_examples.contains(e) {
                    error_examples.push(e.clone());
                }
                let kind = crate::bench::sample::ErrorKind::of(e).name().to_string();
                *failures.entry(kind).or_default() += 1;
            }
            for t in &s.tolerated {
                *failures
                    .entry(format!("{} (tolerated)", t.check))
                    .or_default() += 1;
            }
            if let Some(f) = s.failed_checks.first().filter(|_| s.served()) {
                for c in &s.failed_checks {
                    *failures.entry(c.check.clone()).or_default() += 1;
                }
                if corrupted_requests.len() < 50 {
                    corrupted_requests.push(Corrupted {
                        conversation: s.conversation,
                        turn: s.turn,
                        marker: s.marker.clone(),
                        check: f.check.clone(),
                        detail: f.detail.clone(),
                        reply: s.content.chars().take(160).collect(),
                    });
                }
            }
        }
        let dist = |values: Vec<f64>| Dist::at(&values, percentiles);
        let per_run = |f: &dyn Fn(&LevelRun) -> f64| -> f64 {
            median(&runs.iter().map(f).collect::<Vec<_>>()).unwrap_or(0.0)
        };
        let served_sum = |r: &LevelRun, tokens: &dyn Fn(&Sample) -> u64| -> f64 {
            r.samples
                .iter()
                .filter(|s| s.served())
                .map(tokens)
                .sum::<u64>() as f64
        };
        let rate = |x: f64, secs: f64| if secs > 0.0 { x / secs } else { 0.0 };
        let output_runs: Vec<f64> = runs
            .iter()
            .map(|r| rate(served_sum(r, &|s| s.output_tokens), r.wall_s))
            .collect();
        let steady = per_run(&|r| rate(steady_tokens(r), r.steady_s));
        let cached: Vec<u64> = served.iter().filter_map(|s| s.cached_tokens).collect();
        let reasoning: Vec<u64> = served.iter().filter_map(|s| s.reasoning_tokens).collect();
        let expecting: Vec<&&&Sample> = served
            .iter()
            .filter(|s| s.expected_cached.is_some_and(|e| e > 0))
            .collect();
        let cache = (!expecting.is_empty()).then(|| {
            let reported: Vec<u64> = expecting.iter().filter_map(|s| s.cached_tokens).collect();
            CacheFigures {
                requests: expecting.len(),
                expected_tokens: expecting.iter().filter_map(|s| s.expected_cached).sum(),
                reported_tokens: (!reported.is_empty()).then(|| reported.iter().sum()),
                requests_at_90: expecting
                    .iter()
                    .filter(|s| {
                        let e = s.expected_cached.unwrap_or(0) as f64;
                        s.cached_tokens.is_some_and(|c| c as f64 >= 0.9 * e)
                    })
                    .count(),
            }
        });
        let wall = median(&runs.iter().map(|r| r.wall_s).collect::<Vec<_>>()).unwrap_or(0.0);
        let background: Vec<&Sample> = runs.iter().flat_map(|r| &r.background).collect();
        let several_turns = samples.iter().any(|s| s.turn > 0);
        LevelResult {
            shape,
            label: shape.label(),
            x: shape.x(),
            requests: samples.len(),
            errors: samples.iter().filter(|s| s.error.is_some()).count(),
            cancelled: samples.iter().filter(|s| s.cancelled).count(),
            corrupted: samples
                .iter()
                .filter(|s| s.served() && !s.correct())
                .count(),
            failures,
            error_examples,
            corrupted_requests,
            ttft: dist(served.iter().filter_map(|s| s.ttft_ms).collect()),
            ttfa: dist(served.iter().filter_map(|s| s.ttfa_ms).collect()),
            tpot: dist(served.iter().filter_map(|s| s.tpot_ms()).collect()),
            itl: dist(served.iter().flat_map(|s| s.itl_ms()).collect()),
            e2e: dist(served.iter().map(|s| s.e2e_ms).collect()),
            queue: dist(samples.iter().map(|s| s.queue_ms()).collect()),
            schedule_delay: dist(
                samples
                    .iter()
                    .filter_map(|s| s.schedule_delay_ms())
                    .collect(),
            ),
            client_cpu: None,
            request_output_tokens_per_s: dist(
                served
                    .iter()
                    .filter_map(|s| s.output_tokens_per_s())
                    .collect(),
            ),
            output_tokens_per_s: median(&output_runs).unwrap_or(0.0),
            steady_output_tokens_per_s: steady,
            total_tokens_per_s: per_run(&|r| {
                rate(
                    served_sum(r, &|s| s.output_tokens + s.prompt_tokens),
                    r.wall_s,
                )
            }),
            requests_per_s: per_run(&|r| {
                rate(
                    r.samples.iter().filter(|s| s.correct()).count() as f64,
                    r.wall_s,
                )
            }),
            output_tokens_per_s_runs: output_runs,
            prompt_tokens: served.iter().map(|s| s.prompt_tokens).sum(),
            output_tokens: served.iter().map(|s| s.output_tokens).sum(),
            reasoning_tokens: (!reasoning.is_empty()).then(|| reasoning.iter().sum()),
            cut_by_budget: served
                .iter()
                .filter(|s| is_token_limit(s.finish_reason.as_deref()))
                .count(),
            cached_tokens: (!cached.is_empty()).then(|| cached.iter().sum()),
            cache,
            markers_sent: samples.iter().filter(|s| s.marker.is_some()).count(),
            markers_echoed: served.iter().filter(|s| own_marker_seen(s)).count(),
            goodput: (!slo.is_empty()).then(|| {
                Goodput::of(
                    slo,
                    runs.iter().flat_map(|r| &r.samples),
                    wall * runs.len() as f64,
                )
            }),
            replay: None,
            server_timeline: Vec::new(),
            cancellation: None,
            tokens: None,
            coverage: Coverage::of(samples.iter().copied()),
            tokens_estimated: served.iter().any(|s| !s.usage_reported),
            server,
            turns: if several_turns {
                TurnFigures::of(&samples, percentiles)
            } else {
                Vec::new()
            },
            turn_points: if several_turns {
                TurnPoint::of(&samples)
            } else {
                Vec::new()
            },
            prefill_stall: StallFigures::of(&samples, &background, percentiles),
        }
    }
}

/// Output tokens received before the last request was sent: each served
/// request's tokens spread evenly over its output events.
fn steady_tokens(r: &LevelRun) -> f64 {
    let end_ms = r.steady_s * 1000.0;
    r.samples
        .iter()
        .filter(|s| s.served() && !s.token_ms.is_empty())
        .map(|s| {
            let per_event = s.output_tokens as f64 / s.token_ms.len() as f64;
            let inside = s
                .token_ms
                .iter()
                .filter(|&&t| s.sent_ms + t <= end_ms)
                .count();
            inside as f64 * per_event
        })
        .sum()
}

/// One configuration measured across the concurrency levels.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Variant {
    pub name: String,
    /// The engine or server configuration it ran with.
    pub server_flags: Vec<String>,
    pub levels: Vec<LevelResult>,
    #[serde(default)]
    pub search: Option<Search>,
    /// Why the sweep stopped before its last level (`--stop-at-saturation`).
    #[serde(default)]
    pub stopped: Option<String>,
    /// Whether the server enforced a nonce schema before the run (None:
    /// not probed: checks off, or `--schema-share` given).
    #[serde(default)]
    pub schema_probe: Option<SchemaProbe>,
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
            if let Some(p) = &v.schema_probe {
                let _ = writeln!(
                    out,
                    "  schema nonce check: {} ({})",
                    if p.enforced { "on" } else { "off" },
                    p.detail
                );
            }
            let _ = writeln!(
                out,
                "  {:<34} {:>5} {:>4} {:>4} {:>8} {:>9} {:>9} {:>9} {:>9} {:>9} {:>8} {:>8} {:>9} {:>9} {:>8} {:>7}",
                "level", "reqs", "err", "bad", "ok req/s", "out tok/s", "steady", "TTFT p50", "TTFT p99",
                "TTFA p50", "TPOT p50", "ITL p50", "E2E p50", "E2E p99", "queue", "good%"
            );
            for l in &v.levels {
                let _ = writeln!(
                    out,
                    "  {:<34} {:>5} {:>4} {:>4} {:>8.2} {:>9.1} {:>9.1} {:>9} {:>9} {:>9} {:>8} {:>8} {:>9} {:>9} {:>8} {:>7}",
                    l.label,
                    l.requests,
                    l.errors,
                    l.corrupted,
                    l.requests_per_s,
                    l.output_tokens_per_s,
                    l.steady_output_tokens_per_s,
                    ms(l.ttft.as_ref().map(|d| d.p50)),
                    ms(l.ttft.as_ref().map(|d| d.p99)),
                    ms(l.ttfa.as_ref().map(|d| d.p50)),
                    ms(l.tpot.as_ref().map(|d| d.p50)),
                    ms(l.itl.as_ref().map(|d| d.p50)),
                    ms(l.e2e.as_ref().map(|d| d.p50)),
                    ms(l.e2e.as_ref().map(|d| d.p99)),
                    ms(l.queue.as_ref().map(|d| d.p50)),
                    l.goodput.map_or("-".into(), |g| format!("{:.0}%", 100.0 * g.correct_good_share)),
                );
                if let Some(c) = &l.cache {
                    let _ = writeln!(
                        out,
                        "        cache: {} requests could reuse {} tokens; server reported {} ({} at >= 90%)",
                        c.requests,
                        c.expected_tokens,
                        c.reported_tokens.map_or("no cached tokens".into(), |t| t.to_string()),
                        c.requests_at_90
                    );
                }
                for t in &l.turns {
                    let _ = writeln!(out, "        {}", t.describe());
                }
                if let Some(st) = &l.prefill_stall {
                    let _ = writeln!(out, "        {}", st.describe());
                }
                let _ = writeln!(
                    out,
                    "        ended at the token budget: {} of {} served",
                    l.cut_by_budget,
                    l.requests - l.errors - l.cancelled
                );
                if let Some(r) = l.reasoning_tokens.filter(|r| *r > 0) {
                    let _ = writeln!(out, "        reasoning tokens: {r}");
                }
                if l.markers_sent > 0 {
                    let _ = writeln!(
                        out,
                        "        isolation: {} of {} replies carried their own marker",
                        l.markers_echoed, l.markers_sent
                    );
                }
                if let Some(t) = &l.tokens {
                    let _ = writeln!(out, "        output tokens: {}", t.describe());
                }
                if let Some(c) = &l.cancellation {
                    let _ = writeln!(out, "        cancelled: {}", c.describe());
                }
                if let Some(r) = &l.replay {
                    let _ = writeln!(out, "        replayed alone: {}", r.describe());
                }
                let _ = writeln!(out, "        {}", l.coverage.describe());
                if let Some(c) = &l.client_cpu {
                    let _ = writeln!(
                        out,
                        "        client: {:.1} us CPU per stream event ({}; {:.1} by the \
                         process), {} events{}",
                        c.us_per_chunk,
                        c.clock,
                        c.process_us_per_chunk,
                        c.chunks,
                        l.schedule_delay.as_ref().map_or(String::new(), |d| format!(
                            "; schedule delay p50 {:.2} ms, p99 {:.2} ms",
                            d.p50, d.p99
                        ))
                    );
                }
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
                if !l.failures.is_empty() {
                    let kinds: Vec<String> =
                        l.failures.iter().map(|(k, n)| format!("{k} {n}")).collect();
                    let _ = writeln!(out, "        failures: {}", kinds.join(", "));
                }
                for c in l.corrupted_requests.iter().take(3) {
                    let _ = writeln!(
                        out,
                        "        corrupted: conversation {} turn {} [{}] {}",
                        c.conversation, c.turn, c.check, c.detail
                    );
                }
            }
            if let Some(s) = &v.stopped {
                let _ = writeln!(out, "  sweep stopped: {s}");
            }
            if let Some(s) = &v.search {
                let _ = writeln!(
                    out,
                    "  search over {}: highest meeting {:.0}% correct goodput: {}",
                    s.over,
                    100.0 * s.target_share,
                    s.best.map_or("none".into(), |b| format!("{b}"))
                );
            }
        }
        out
    }
}

/// Over-saturation (`--stop-at-saturation`): `level` queues more than it
/// serves. Its TTFT p50 is over twice the first level's, and its output
/// tokens/s grew less than 10% over `previous`'s.
pub fn saturated(
    first: &LevelResult,
    previous: &LevelResult,
    level: &LevelResult,
) -> Option<String> {
    let (t0, t) = (first.ttft.as_ref()?.p50, level.ttft.as_ref()?.p50);
    let gain = level.output_tokens_per_s / previous.output_tokens_per_s.max(1e-9);
    (t > 2.0 * t0 && gain < 1.1).then(|| {
        format!(
            "over-saturated at {}: TTFT p50 {t:.1} ms (first level {t0:.1} ms), \
             output tokens/s x{gain:.2} over {}",
            level.label, previous.label
        )
    })
}

/// Milliseconds for the table; "-" when nothing was measured.
pub fn ms(v: Option<f64>) -> String {
    v.map_or("-".into(), |v| format!("{v:.1}ms"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::sample::FailedCheck;

    fn ok(ttft: f64, e2e: f64, out: u64) -> Sample {
        Sample {
            ttft_ms: Some(ttft),
            e2e_ms: e2e,
            token_ms: (0..out).map(|k| ttft + k as f64).collect(),
            prompt_tokens: 10,
            output_tokens: out,
            usage_reported: true,
            ..Default::default()
        }
    }

    fn level(samples: Vec<Sample>, wall_s: f64) -> LevelResult {
        let run = LevelRun {
            samples,
            wall_s,
            steady_s: wall_s,
            ..Default::default()
        };
        LevelResult::of(
            Shape::Closed { concurrency: 2 },
            &[run],
            None,
            &Slo::default(),
            &[],
        )
    }

    #[test]
    fn errors_are_counted_and_left_out_of_latency_and_throughput() {
        let failed = Sample {
            error: Some("HTTP 500: boom".into()),
            e2e_ms: 0.5,
            ..Default::default()
        };
        let l = level(
            vec![ok(10.0, 100.0, 11), failed.clone(), ok(30.0, 300.0, 21)],
            2.0,
        );
        assert_eq!((l.requests, l.errors), (3, 1));
        assert_eq!(l.error_examples, vec!["HTTP 500: boom".to_string()]);
        assert_eq!(l.failures["http-status"], 1);
        assert_eq!(l.e2e.as_ref().unwrap().n, 2);
        assert_eq!(l.e2e.as_ref().unwrap().p50, 200.0);
        assert_eq!(l.output_tokens_per_s, 16.0);
        assert_eq!(l.total_tokens_per_s, 26.0);
        assert_eq!(l.requests_per_s, 1.0);
        let all_failed = level(vec![failed], 1.0);
        assert_eq!(
            (all_failed.ttft, all_failed.output_tokens_per_s),
            (None, 0.0)
        );
    }

    #[test]
    fn a_corrupted_reply_counts_in_throughput_but_not_as_a_success() {
        let mut bad = ok(10.0, 100.0, 11);
        bad.failed_checks.push(FailedCheck {
            check: "isolation".into(),
            detail: "holds AFM-000002".into(),
        });
        let l = level(vec![ok(10.0, 100.0, 11), bad], 1.0);
        assert_eq!((l.errors, l.corrupted), (0, 1));
        assert_eq!(l.output_tokens_per_s, 22.0);
        assert_eq!(l.requests_per_s, 1.0);
        assert_eq!(l.corrupted_requests[0].check, "isolation");
    }

    #[test]
    fn a_level_is_over_saturated_when_ttft_grows_and_throughput_does_not() {
        let at = |ttft: f64, tok_s: f64| LevelResult {
            ttft: Dist::of(&[ttft]),
            output_tokens_per_s: tok_s,
            ..Default::default()
        };
        let first = at(50.0, 100.0);
        // Throughput still grows: load is being served, not only queued.
        assert_eq!(saturated(&first, &at(80.0, 180.0), &at(120.0, 300.0)), None);
        // TTFT up 2.4x, throughput up 5%: more load only queues.
        assert!(saturated(&first, &at(80.0, 300.0), &at(120.0, 315.0)).is_some());
        // Flat throughput but TTFT still low: not saturated yet.
        assert_eq!(saturated(&first, &at(60.0, 300.0), &at(90.0, 300.0)), None);
    }

    #[test]
    fn the_drain_tail_is_left_out_of_steady_throughput() {
        // Two requests sent at 0 ms; the level's last sending was at 0.5 s,
        // so only tokens before then count, over 0.5 s.
        let mut a = ok(0.0, 1000.0, 10);
        a.token_ms = (0..10).map(|k| k as f64 * 100.0).collect();
        let run = LevelRun {
            samples: vec![a],
            wall_s: 1.0,
            steady_s: 0.5,
            ..Default::default()
        };
        let l = LevelResult::of(Shape::default(), &[run], None, &Slo::default(), &[]);
        assert_eq!(l.output_tokens_per_s, 10.0);
        assert_eq!(l.steady_output_tokens_per_s, 12.0);
    }
}
