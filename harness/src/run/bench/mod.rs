//! A bench run: each variant of the scenario against its target, each
//! load level warmed up, played, its replies checked (and replayed alone
//! where asked), and the results written (bench.json, bench.html,
//! requests.jsonl) and returned.

pub mod args;
pub mod scenario;

use std::io::Write as _;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use tokio::runtime::RuntimeFlavor;

use self::args::BenchArgs;
use self::scenario::VariantSpec;
use super::Observer;
use crate::bench::dataset::builtin::{Prompts, Workload};
use crate::bench::dataset::synthetic::Vocabulary;
use crate::bench::dataset::tokens::TokenCounter;
use crate::bench::dataset::trace::Trace;
use crate::bench::dataset::{Dataset, Source};
use crate::bench::load::arrivals::{Bound, Shape};
use crate::bench::load::cancel::{self, CancelFigures};
use crate::bench::load::replay::{self, ReplayFigures};
use crate::bench::load::{client_cpu, server_metrics};
use crate::bench::load::{LevelRun, Player};
use crate::bench::request::RequestSettings;
use crate::bench::results::goodput::Slo;
use crate::bench::results::{self, BenchReport, BenchRun, ClientCpu, LevelResult, Search, Variant};
use crate::bench::results::{page, records, search};
use crate::bench::verify::recount::{self, TokenFigures};
use crate::bench::verify::schema_probe;
use crate::report::{html, write_text};
use crate::run_info;
use crate::server::Target;

/// Measures every variant and level of `args` and writes the results into
/// `args.out`.
pub fn run(args: &BenchArgs, observer: Arc<dyn Observer>) -> Result<BenchReport> {
    let started = Instant::now();
    let started_at = run_info::now();
    args.validate()?;
    let slo = Slo::parse(&args.goodput).map_err(anyhow::Error::msg)?;
    html::check_templates()?;
    let remote = args.target.remote();
    let concurrent = args.concurrency.iter().copied().max().unwrap_or(8).max(8);
    let specs = scenario::variants(args.scenario, !remote, concurrent, args.deterministic)?;
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("creating {}", args.out.display()))?;
    // Against a server over HTTP every stream is read on one thread: a
    // chunk then wakes no other worker (cross-thread wakes were a quarter
    // of the client's CPU per chunk), and the server keeps the other
    // cores. The engine in-process shares the runtime, so it keeps two.
    let runtime = match remote {
        true => tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?,
        false => tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()?,
    };
    let mut records = match args.save_requests {
        true => Some(records::create(&args.out.join("requests.jsonl"))?),
        false => None,
    };
    let log = args.out.join("server.log");
    // A server is opened once for every variant; the engine once per
    // variant, since variants switch its settings.
    let server = match remote {
        true => Some(runtime.block_on(args.target.open(&[], None, &log, true))?),
        false => None,
    };
    if let Some(process) = server.as_ref().and_then(|o| o.server.as_ref()) {
        observer.note(&format!(
            "started `{}` (log {})",
            process.command,
            log.display()
        ));
    }
    let user_flags: Vec<String> = args
        .server_flags
        .as_deref()
        .map(|f| f.split_whitespace().map(str::to_string).collect())
        .unwrap_or_default();
    let mut variants = Vec::new();
    let mut facts = Facts::default();
    for (vi, spec) in specs.iter().enumerate() {
        // A server is shared by every variant; an engine serves one.
        let engine = match &server {
            Some(_) => None,
            None => {
                Some(runtime.block_on(args.target.open(&spec.engine_flags, None, &log, true))?)
            }
        };
        let opened = server.as_ref().or(engine.as_ref()).expect("a target");
        let shared = Shared {
            args,
            runtime: &runtime,
            slo: &slo,
            observer: &*observer,
            user_flags: &user_flags,
        };
        let (variant, seen) = shared.variant(vi, spec, opened, &mut records)?;
        variants.push(variant);
        facts = seen;
        // The engine of this variant stops before the next one starts.
        drop(engine);
    }
    drop(server);
    if let Some(out) = records.as_mut() {
        out.flush()?;
    }
    let run = BenchRun {
        target: facts.label,
        model: facts.model,
        server_flags: variants
            .first()
            .map(|v| v.server_flags.clone())
            .unwrap_or_default(),
        engine_version: run_info::engine_version(remote),
        git_commit: run_info::git_commit(),
        host: run_info::host(),
        hardware: run_info::hardware(),
        started: started_at,
        wall_seconds: started.elapsed().as_secs_f64(),
        scenario: args.scenario.name(),
        prompts: facts.prompts,
        requests: args.bound().requests,
        duration_s: args.bound().duration_s,
        max_tokens: args.max_tokens,
        warmup: args.warmup,
        repetitions: args.repetitions,
        endpoint: args.endpoint.name(),
        slo: slo.to_string(),
        verified: !args.no_verify,
        schema_share: facts.schema_share,
        percentiles: args.percentiles.clone(),
        tolerated: args.tolerate.clone(),
        reply_limits: Some(args.target.reply_limits()),
    };
    let report = BenchReport::new(run, variants);
    report.write(&args.out.join("bench.json"))?;
    write_text(&args.out.join("bench.html"), &page::render(&report)?)?;
    Ok(report)
}

/// What every variant of a run shares.
struct Shared<'a> {
    args: &'a BenchArgs,
    runtime: &'a tokio::runtime::Runtime,
    slo: &'a Slo,
    observer: &'a dyn Observer,
    /// `--server-flags`, for a target that reports none of its own.
    user_flags: &'a [String],
}

/// What the run's report says of the target, as the last variant saw it.
#[derive(Default)]
struct Facts {
    label: String,
    model: String,
    prompts: String,
    schema_share: f64,
}

impl Shared<'_> {
    /// One variant on its opened target: the dataset, the schema and token
    /// probes, then its levels.
    fn variant(
        &self,
        vi: usize,
        spec: &VariantSpec,
        opened: &crate::server::flags::Opened,
        records: &mut Records,
    ) -> Result<(Variant, Facts)> {
        let (args, runtime, observer) = (self.args, self.runtime, self.observer);
        let remote = args.target.remote();
        if let Some(reason) = &opened.refused {
            observer.note(&format!("{reason}; running without --deterministic"));
        }
        let flags = match opened.flags.is_empty() {
            true => self.user_flags.to_vec(),
            false => opened.flags.clone(),
        };
        let target = match args.keep_alive && remote {
            true => opened
                .target
                .clone()
                .time_limit(args.target.time_limit(), true),
            false => opened.target.clone(),
        };
        let model = target
            .model()
            .context("the target names no model")?
            .to_string();
        let dataset = Arc::new(runtime.block_on(dataset_of(args, &target, &model, observer))?);
        let prompts = dataset.describe();
        observer.note(&format!(
            "{} on {} ({prompts})",
            spec.name,
            target.describe()
        ));
        let salt = format!("{}-{vi}", run_info::clock_millis());
        let mut player = player(args, spec, target, dataset, &model);
        let probe = (!args.no_verify && args.schema_share.is_none()).then(|| {
            runtime.block_on(schema_probe::probe(&player.target, &player.settings, &salt))
        });
        if let Some(p) = &probe {
            player.schema_share = if p.enforced {
                schema_probe::DEFAULT_SHARE
            } else {
                0.0
            };
            observer.note(&format!(
                "schema nonce check {}: {}",
                if p.enforced {
                    format!("on for {:.0}% of requests", 100.0 * player.schema_share)
                } else {
                    "off".into()
                },
                p.detail
            ));
        }
        let schema_share = player.schema_share;
        let counter = match args.no_verify {
            true => Err("checks off (--no-verify)".to_string()),
            false => runtime
                .block_on(TokenCounter::probe(
                    &player.target,
                    &model,
                    args.tokenizer.as_deref(),
                ))
                .map_err(|e| format!("{e:#}")),
        };
        let levels = Levels {
            args,
            runtime,
            counter: &counter,
            player: Arc::new(player),
            slo: self.slo,
            enforce_alone: args.batch_invariant
                || (!remote && flags.iter().any(|f| f == "--deterministic")),
            salt,
            variant: &spec.name,
            observer,
        };
        let (levels, search, stopped) = levels.measure_all(records)?;
        let variant = Variant {
            name: spec.name.clone(),
            server_flags: flags,
            levels,
            search,
            stopped,
            schema_probe: probe,
        };
        let facts = Facts {
            label: opened.label.clone(),
            model,
            prompts,
            schema_share,
        };
        Ok((variant, facts))
    }
}

/// What a variant sends and checks.
fn player(
    args: &BenchArgs,
    spec: &VariantSpec,
    target: Target,
    dataset: Arc<Dataset>,
    model: &str,
) -> Player {
    Player {
        target,
        dataset,
        settings: RequestSettings {
            endpoint: args.endpoint,
            model: model.to_string(),
            temperature: args.temperature,
            ignore_eos: args.ignore_eos,
            extra: spec.extra.clone(),
        },
        max_tokens: args.max_tokens,
        verify: !args.no_verify,
        tolerate: args.tolerate.clone(),
        schema_share: args.schema_share.unwrap_or(0.0),
        cancel_share: args.request_cancellation_rate / 100.0,
        cancel_after: std::time::Duration::from_secs_f64(args.request_cancellation_delay),
        think_s: args.think_time,
        seed: args.seed,
        background_streams: args.background_streams,
        background_tokens: args.background_tokens,
    }
}

/// The levels of one variant.
struct Levels<'a> {
    args: &'a BenchArgs,
    runtime: &'a tokio::runtime::Runtime,
    player: Arc<Player>,
    slo: &'a Slo,
    /// A reply that differs alone is a failure, not a figure.
    enforce_alone: bool,
    /// Unique per run and variant, so nothing an earlier run cached helps.
    salt: String,
    variant: &'a str,
    observer: &'a dyn Observer,
    /// The served tokenizer, to re-count replies with (Err: why none).
    counter: &'a std::result::Result<TokenCounter, String>,
}

type Records = Option<std::io::BufWriter<std::fs::File>>;

impl Levels<'_> {
    /// Every level of the run's shapes, or the levels an SLO search
    /// probes (sorted by load) with the search's outcome.
    fn measure_all(
        &self,
        records: &mut Records,
    ) -> Result<(Vec<LevelResult>, Option<Search>, Option<String>)> {
        let all = self.args.shapes();
        let mut levels = Vec::new();
        let Some(pct) = self.args.slo_search else {
            for (k, shape) in all.into_iter().enumerate() {
                let level = self.measure(shape, &k.to_string(), records)?;
                let stop = match (levels.first(), levels.last()) {
                    (Some(first), Some(previous)) if self.args.stop_at_saturation => {
                        results::saturated(first, previous, &level)
                    }
                    _ => None,
                };
                levels.push(level);
                if let Some(why) = stop {
                    self.observer.note(&format!("sweep stopped: {why}"));
                    return Ok((levels, None, Some(why)));
                }
            }
            return Ok((levels, None, None));
        };
        let first = all[0];
        let start = all.iter().map(|s| s.x()).fold(f64::MAX, f64::min);
        let integer = matches!(first, Shape::Closed { .. });
        let mut k = 0;
        let found = search::search(start, integer, self.args.search_steps, pct / 100.0, |x| {
            k += 1;
            let level = self.measure(first.at_load(x), &format!("search-{k}"), records)?;
            let share = level.goodput.map_or(0.0, |g| g.correct_good_share);
            levels.push(level);
            Ok(share)
        })?;
        levels.sort_by(|a, b| a.x.total_cmp(&b.x));
        Ok((levels, Some(found), None))
    }

    /// One level: a warm-up at its load, its repetitions (the first
    /// replayed alone where asked), the server's counters around them.
    fn measure(&self, shape: Shape, tag: &str, records: &mut Records) -> Result<LevelResult> {
        let (args, rt, player) = (self.args, self.runtime, &self.player);
        self.warm_up(shape, tag);
        if let Some(at) = args.start_at {
            wait_until(at);
        }
        let cancelling = player.cancel_share > 0.0;
        let probe_before = match cancelling {
            true => rt.block_on(cancel::probe_ttft(
                &player.target,
                &player.settings,
                args.max_tokens,
            )),
            false => None,
        };
        let before = rt.block_on(server_metrics::scrape(&player.target));
        let mut runs = Vec::new();
        let mut replayed = None;
        let mut cpu = client_cpu::Spent::zero();
        let mut timeline = Vec::new();
        let mut tokens = None;
        for rep in 0..args.repetitions {
            let salt = format!("{}-{tag}-{rep}", self.salt);
            let (mut run, gauges) = cpu.during(|| self.play_watched(shape, &salt));
            if rep == 0 {
                timeline = gauges;
                tokens = Some(match self.counter {
                    Ok(c) => rt.block_on(recount::recount(c, &mut run.samples)),
                    Err(why) => TokenFigures::skipped(why.clone()),
                });
            }
            if rep == 0 && args.verify_alone > 0 && !args.no_verify {
                replayed = Some(if args.temperature != 0.0 {
                    ReplayFigures::skipped("temperature > 0: a replay may differ by sampling")
                } else if !run.overlapped() {
                    ReplayFigures::skipped("one request at a time: no reply to cross")
                } else {
                    rt.block_on(replay::replay(
                        &player.target,
                        args.endpoint.path(),
                        &mut run,
                        args.verify_alone,
                        self.enforce_alone,
                    ))
                });
            }
            if let Some(out) = records.as_mut() {
                records::write(out, self.variant, &shape, rep, &run.samples)?;
            }
            runs.push(run);
        }
        let after = rt.block_on(server_metrics::scrape(&player.target));
        let server = before
            .zip(after)
            .map(|(b, a)| server_metrics::delta(&b, &a));
        let mut level = LevelResult::of(shape, &runs, server, self.slo, &args.percentiles);
        level.replay = replayed;
        if cancelling {
            level.cancellation = Some(self.cancellation(&level, shape, &timeline, probe_before));
        }
        level.server_timeline = timeline;
        level.tokens = tokens;
        if self.args.target.remote() {
            // The reading thread's clock holds every stream's reading only
            // on a runtime of one thread.
            let one_thread = rt.handle().runtime_flavor() == RuntimeFlavor::CurrentThread;
            level.client_cpu = Some(ClientCpu::of(cpu, one_thread, &runs));
        }
        self.observer.note(&level.headline());
        Ok(level)
    }

    /// A warm-up at the level's load (as many users, at most `--warmup`
    /// requests), its failures only noted.
    fn warm_up(&self, shape: Shape, tag: &str) {
        let args = self.args;
        if args.warmup == 0 {
            return;
        }
        let users = match shape {
            Shape::Closed { concurrency } => concurrency,
            Shape::Open {
                max_concurrency, ..
            } => max_concurrency.unwrap_or(4),
        };
        let warm = self.runtime.block_on(self.player.play(
            Shape::Closed {
                concurrency: users.min(args.warmup),
            },
            Bound {
                requests: Some(args.warmup),
                duration_s: None,
            },
            &format!("{}-warmup-{tag}", self.salt),
        ));
        if let Some(e) = warm.samples.iter().find_map(|s| s.error.clone()) {
            self.observer
                .note(&format!("warning: a warm-up request failed: {e}"));
        }
    }

    /// One repetition played while the server's gauges are watched.
    fn play_watched(
        &self,
        shape: Shape,
        salt: &str,
    ) -> (LevelRun, Vec<server_metrics::GaugePoint>) {
        let player = &self.player;
        self.runtime.block_on(async {
            let stop = Arc::new(AtomicBool::new(false));
            let watcher = tokio::spawn(server_metrics::watch(
                player.target.clone(),
                Duration::from_millis(250),
                stop.clone(),
            ));
            let run = player.play(shape, self.args.bound(), salt).await;
            stop.store(true, Ordering::SeqCst);
            (run, watcher.await.unwrap_or_default())
        })
    }

    /// What cancelled requests cost: the level's cancels, the server's
    /// in-flight gauge over it, and a probe's TTFT before and after.
    fn cancellation(
        &self,
        level: &LevelResult,
        shape: Shape,
        timeline: &[server_metrics::GaugePoint],
        probe_before: Option<f64>,
    ) -> CancelFigures {
        let mut c = CancelFigures::new(
            level.cancelled,
            self.args.request_cancellation_delay,
            shape.in_flight_cap(),
            timeline,
        );
        c.probe_ttft_before_ms = probe_before;
        c.probe_ttft_after_ms = self.runtime.block_on(cancel::probe_ttft(
            &self.player.target,
            &self.player.settings,
            self.args.max_tokens,
        ));
        c
    }
}

/// Sleeps until `at` (seconds since the epoch), a start shared by several
/// clients; a start already past is now.
fn wait_until(at: f64) {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64());
    if at > now {
        std::thread::sleep(Duration::from_secs_f64(at - now));
    }
}

/// The run's prompts: a trace, synthetic token-sized prompts, or a
/// built-in set or file.
async fn dataset_of(
    args: &BenchArgs,
    target: &Target,
    model: &str,
    observer: &dyn Observer,
) -> Result<Dataset> {
    let needs_tokens = args.input_len.is_some() || args.trace.is_some();
    let vocabulary = if needs_tokens {
        let counter = TokenCounter::probe(target, model, args.tokenizer.as_deref()).await?;
        let v = Vocabulary::probe(&counter).await?;
        observer.note(&format!(
            "prompt tokens counted with {} ({} one-token words)",
            counter.describe(),
            v.len()
        ));
        Some(v)
    } else {
        None
    };
    let source = if let Some(path) = &args.trace {
        Source::Trace(Trace::read(
            path,
            vocabulary.as_ref(),
            args.trace_block_size,
        )?)
    } else if let (Some(input_len), Some(vocabulary)) = (args.input_len, vocabulary) {
        Source::Synthetic {
            vocabulary,
            input_len,
            prefix_len: args.prefix_len,
        }
    } else if args.prompts() == Prompts::Agents {
        Source::Agents
    } else {
        Source::Builtin(Workload::new(args.prompts())?)
    };
    Ok(Dataset {
        source,
        turns: args.turns,
        output_len: args.output_len,
        range_ratio: args.range_ratio,
        seed: args.seed,
    })
}
