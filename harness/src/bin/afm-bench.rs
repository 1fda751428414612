//! `afm-bench`: throughput and latency of the in-process engine or any
//! OpenAI-compatible server under load, per concurrency level, with
//! scenarios that toggle one thing (prefix cache, grammar, deterministic
//! mode); `afm-bench compare A B` sets two runs side by side.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use std::sync::Arc;

use afm_harness::bench::arrivals::{Bound, Ramp, RampStrategy, Shape};
use afm_harness::bench::dataset::builtin::{Prompts, Workload};
use afm_harness::bench::dataset::synthetic::Vocabulary;
use afm_harness::bench::dataset::trace::Trace;
use afm_harness::bench::dataset::{Dataset, Source};
use afm_harness::bench::goodput::Slo;
use afm_harness::bench::load::{LevelRun, Player};
use afm_harness::bench::results::{AloneFigures, BenchReport, BenchRun, LevelResult, Variant};
use afm_harness::bench::request::{Endpoint, RequestSettings};
use afm_harness::bench::sample::{FailedCheck, Sample};
use afm_harness::bench::tokens::TokenCounter;
use afm_harness::bench::{compare, records, server_metrics};
use afm_harness::run_info;
use afm_harness::server::Target;
use anyhow::{bail, Context, Result};
use clap::{Args, Parser, Subcommand, ValueEnum};
use serde_json::{json, Value};

#[derive(Parser)]
#[command(
    name = "afm-bench",
    version,
    about = "Throughput and latency of OpenAI-compatible LLM servers"
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    run: RunArgs,
}

// Parsed once per process: the size difference costs nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand)]
enum Command {
    /// Measure (the default).
    Run(RunArgs),
    /// Two runs side by side: each metric of A and B and the ratio B/A.
    Compare {
        /// A run: its bench.json or the folder holding it.
        a: PathBuf,
        /// B run, likewise.
        b: PathBuf,
    },
}

#[derive(Clone, Copy, ValueEnum)]
enum Scenario {
    /// One configuration over the concurrency levels.
    Sweep,
    /// Shared-prefix prompts with the engine's prefix cache on and off
    /// (in-process).
    PrefixCache,
    /// Plain requests and the same with a strict JSON schema.
    Grammar,
    /// The engine in its default and in batch-invariant mode (in-process).
    Deterministic,
}

#[derive(Args, Clone)]
struct RunArgs {
    /// In-process: the model to load (alias, .gguf, folder); with --url:
    /// the served model's name (default: the first of /v1/models).
    #[arg(long)]
    model: Option<String>,
    /// Base URL of an OpenAI-compatible server (instead of the engine).
    #[arg(long)]
    url: Option<String>,
    /// Bearer key for --url.
    #[arg(long)]
    api_key: Option<String>,
    /// How the server was started, recorded in the report (--url).
    #[arg(long)]
    server_flags: Option<String>,
    /// The API to load: chat, completions, messages (Anthropic) or
    /// responses (OpenAI Responses).
    #[arg(long, value_enum, default_value = "chat")]
    endpoint: Endpoint,

    // Load shape.
    /// Closed-loop levels: users, each with one request in flight.
    #[arg(long, value_delimiter = ',', default_value = "1,2,4,8")]
    concurrency: Vec<usize>,
    /// Open-loop levels instead: arrivals per second ("inf": all at once).
    #[arg(long, value_delimiter = ',')]
    request_rate: Vec<f64>,
    /// Gamma shape of the gaps between arrivals (1: Poisson; lower is
    /// burstier).
    #[arg(long, default_value_t = 1.0)]
    burstiness: f64,
    /// Open loop: at most this many requests in flight; later arrivals
    /// wait for a slot (reported as queue time).
    #[arg(long)]
    max_concurrency: Option<usize>,
    /// Open loop: move the rate from --ramp-up-start-rps to
    /// --ramp-up-end-rps over the run (one level).
    #[arg(long, value_enum, requires_all = ["ramp_up_start_rps", "ramp_up_end_rps"])]
    ramp_up_strategy: Option<RampStrategy>,
    #[arg(long)]
    ramp_up_start_rps: Option<f64>,
    #[arg(long)]
    ramp_up_end_rps: Option<f64>,
    /// Requests per level and repetition (default 16 unless --duration).
    #[arg(long)]
    requests: Option<usize>,
    /// Seconds per level and repetition (with --requests: the first bound
    /// reached ends the level).
    #[arg(long)]
    duration: Option<f64>,
    /// Requests sent before each level, at its load, and not measured.
    #[arg(long, default_value_t = 2)]
    warmup: usize,
    /// Passes over each level; throughput is their median.
    #[arg(long, default_value_t = 1)]
    repetitions: usize,
    /// Seed of arrivals and synthetic prompts.
    #[arg(long, default_value_t = 0)]
    seed: u64,

    // What is sent.
    #[arg(long, default_value_t = 64)]
    max_tokens: u32,
    #[arg(long, default_value_t = 0.0)]
    temperature: f64,
    /// short | long | shared-prefix | FILE (default: short; shared-prefix
    /// for the prefix-cache scenario).
    #[arg(long)]
    prompts: Option<Prompts>,
    /// Synthetic prompts of this many tokens (the served model's tokens).
    #[arg(long)]
    input_len: Option<usize>,
    /// Synthetic requests' max_tokens (default --max-tokens).
    #[arg(long)]
    output_len: Option<u32>,
    /// Input and output lengths drawn from len * (1 +- ratio).
    #[arg(long, default_value_t = 0.0)]
    range_ratio: f64,
    /// Tokens of a prefix every synthetic prompt of a level shares.
    #[arg(long, default_value_t = 0)]
    prefix_len: usize,
    /// The served model's tokenizer.json, to count tokens with when the
    /// server has no /tokenize or count_tokens endpoint.
    #[arg(long)]
    tokenizer: Option<PathBuf>,
    /// Ask for exactly max_tokens (`ignore_eos`, where the server has it).
    #[arg(long)]
    ignore_eos: bool,
    /// User turns per conversation; each reply joins the history.
    #[arg(long, default_value_t = 1)]
    turns: usize,
    /// Seconds a user waits between a reply and the next turn.
    #[arg(long, default_value_t = 0.0)]
    think_time: f64,
    /// Replay a JSONL trace at its timestamps (Mooncake's format or
    /// requests with `messages`/`prompt`).
    #[arg(long)]
    trace: Option<PathBuf>,
    /// Tokens per hash id of a Mooncake trace.
    #[arg(long, default_value_t = 512)]
    trace_block_size: usize,

    // What is measured.
    /// Percentiles reported beside p50/p90/p99.
    #[arg(long, value_delimiter = ',', default_value = "50,90,99")]
    percentiles: Vec<f64>,
    /// SLO targets, e.g. `--goodput ttft:500 tpot:100 e2el:5000` (ms;
    /// ttfa: first answer token).
    #[arg(long, num_args = 1..)]
    goodput: Vec<String>,
    /// Search the highest load whose correct goodput share stays at least
    /// PCT% (needs --goodput): over rates with --request-rate (the lowest
    /// given starts), else over concurrency.
    #[arg(long)]
    slo_search: Option<f64>,
    /// Levels a search may probe.
    #[arg(long, default_value_t = 6)]
    search_steps: usize,
    /// Do not check replies (markers and schema requests are not sent).
    #[arg(long)]
    no_verify: bool,
    /// Check kinds (stream, usage, isolation, schema, tool_args, alone)
    /// whose failures are counted but do not make a reply corrupted: a
    /// known deviation of the server that should not hide the rest.
    #[arg(long, value_delimiter = ',')]
    tolerate: Vec<String>,
    /// Share of requests (0..1) that ask for a strict JSON schema.
    #[arg(long, default_value_t = 0.0)]
    schema_share: f64,
    /// Replay this many temperature-0 replies of each level alone after
    /// it, and compare.
    #[arg(long, default_value_t = 0)]
    verify_alone: usize,
    /// The server claims batch invariance: a reply that differs alone is
    /// a failure, not a figure (implied in-process with --deterministic).
    #[arg(long)]
    batch_invariant: bool,
    /// Write every request's record to OUT/requests.jsonl.
    #[arg(long)]
    save_requests: bool,

    #[arg(long, value_enum, default_value = "sweep")]
    scenario: Scenario,
    /// In-process engine: batch-invariant mode for every variant.
    #[arg(long)]
    deterministic: bool,
    /// Where bench.json and bench.html go.
    #[arg(long, default_value = "afm-bench-report")]
    out: PathBuf,
}

fn main() -> ExitCode {
    // The in-process target runs the engine in this process.
    #[cfg(feature = "engine")]
    afm_engine::cpu::blas::restart_for_openblas_core();
    let cli = Cli::parse();
    let result = match cli.command {
        None => run(cli.run),
        Some(Command::Run(args)) => run(args),
        Some(Command::Compare { a, b }) => compare_runs(&a, &b),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("afm-bench: error: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn read_run(p: &Path) -> Result<BenchReport> {
    if p.is_dir() {
        BenchReport::read(&p.join("bench.json"))
    } else {
        BenchReport::read(p)
    }
}

fn compare_runs(a: &Path, b: &Path) -> Result<()> {
    let (a, b) = (read_run(a)?, read_run(b)?);
    print!("{}", compare::text(&a, &b));
    Ok(())
}

/// One configuration of a scenario.
struct VariantSpec {
    name: String,
    /// In-process: the afm-serve flags to start the engine with.
    engine: Option<Vec<String>>,
    /// Fields merged into every request.
    extra: Value,
}

fn story_schema() -> Value {
    json!({
        "type": "json_schema",
        "json_schema": {
            "name": "story",
            "strict": true,
            "schema": {
                "type": "object",
                "properties": {
                    "title": {"type": "string"},
                    "characters": {"type": "array", "items": {"type": "string"}},
                    "summary": {"type": "string"}
                },
                "required": ["title", "characters", "summary"],
                "additionalProperties": false
            }
        }
    })
}

fn variants(args: &RunArgs) -> Result<Vec<VariantSpec>> {
    let in_process = args.url.is_none();
    let concurrent = args.concurrency.iter().copied().max().unwrap_or(8).max(8);
    // Every other setting is a flagless afm-serve's.
    let engine_with = |extra: &[&str], deterministic: bool| {
        in_process.then(|| {
            let mut flags = vec!["--concurrent".to_string(), concurrent.to_string()];
            if deterministic {
                flags.push("--deterministic".into());
            }
            flags.extend(extra.iter().map(|f| f.to_string()));
            flags
        })
    };
    let engine = |extra: &[&str]| engine_with(extra, args.deterministic);
    let needs_engine = |what: &str| -> Result<()> {
        if in_process {
            Ok(())
        } else {
            bail!(
                "--scenario {what} switches an engine setting, so it runs in-process only; \
                 against a server, run the sweep once per server configuration and use \
                 `afm-bench compare`"
            )
        }
    };
    let plain = |name: &str, engine: Option<Vec<String>>| VariantSpec {
        name: name.into(),
        engine,
        extra: json!({}),
    };
    Ok(match args.scenario {
        Scenario::Sweep => vec![plain("default", engine(&[]))],
        Scenario::PrefixCache => {
            needs_engine("prefix-cache")?;
            vec![
                plain("prefix cache on", engine(&[])),
                plain("prefix cache off", engine(&["--no-prefix-caching"])),
            ]
        }
        Scenario::Grammar => vec![
            plain("grammar off", engine(&[])),
            VariantSpec {
                name: "grammar on (json_schema)".into(),
                engine: engine(&[]),
                extra: json!({ "response_format": story_schema() }),
            },
        ],
        Scenario::Deterministic => {
            needs_engine("deterministic")?;
            vec![
                plain("deterministic off", engine_with(&[], false)),
                plain("deterministic on", engine_with(&[], true)),
            ]
        }
    })
}

fn scenario_name(s: Scenario) -> String {
    s.to_possible_value()
        .map_or_else(String::new, |v| v.get_name().to_string())
}

/// The served model's name: `--model`, else the first of `/v1/models`.
async fn served_model(target: &Target, given: Option<&str>) -> Result<String> {
    if let Some(m) = given {
        return Ok(m.to_string());
    }
    target.listed_model().await?.with_context(|| {
        format!(
            "{} lists no model at /v1/models; pass --model",
            target.describe()
        )
    })
}

/// The levels of a run: open-loop rates, a ramp, or closed-loop users.
fn shapes(args: &RunArgs) -> Vec<Shape> {
    let open = |rate: f64, ramp: Option<Ramp>| Shape::Open {
        rate,
        burstiness: args.burstiness,
        max_concurrency: args.max_concurrency,
        ramp,
    };
    if let (Some(strategy), Some(start), Some(end)) = (
        args.ramp_up_strategy,
        args.ramp_up_start_rps,
        args.ramp_up_end_rps,
    ) {
        return vec![open(
            end,
            Some(Ramp {
                strategy,
                start,
                end,
            }),
        )];
    }
    if !args.request_rate.is_empty() {
        return args.request_rate.iter().map(|&r| open(r, None)).collect();
    }
    args.concurrency
        .iter()
        .map(|&c| Shape::Closed { concurrency: c })
        .collect()
}

/// The same kind of level at load `x`.
fn at_load(like: Shape, x: f64) -> Shape {
    match like {
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

fn validate(args: &RunArgs) -> Result<()> {
    if args.concurrency.is_empty() || args.concurrency.contains(&0) {
        bail!("--concurrency: levels must be at least 1");
    }
    if args.request_rate.iter().any(|r| r.is_nan() || *r <= 0.0) {
        bail!("--request-rate: rates must be positive (or inf)");
    }
    if args.requests == Some(0) || args.repetitions == 0 {
        bail!("--requests and --repetitions must be at least 1");
    }
    if args.duration.is_some_and(|d| d <= 0.0) {
        bail!("--duration must be positive");
    }
    if args.burstiness <= 0.0 {
        bail!("--burstiness must be positive");
    }
    if !(0.0..=1.0).contains(&args.schema_share) {
        bail!("--schema-share is a share between 0 and 1");
    }
    if !(0.0..1.0).contains(&args.range_ratio) {
        bail!("--range-ratio must be in [0, 1)");
    }
    if args.turns == 0 {
        bail!("--turns must be at least 1");
    }
    if args.slo_search.is_some() && args.goodput.is_empty() {
        bail!("--slo-search needs the SLO it searches for: --goodput ttft:MS ...");
    }
    if args.slo_search.is_some_and(|p| !(0.0..=100.0).contains(&p)) {
        bail!("--slo-search is a percentage");
    }
    if args.schema_share > 0.0 && args.no_verify {
        bail!("--schema-share needs the checks (drop --no-verify)");
    }
    const KINDS: [&str; 6] = [
        "stream",
        "usage",
        "isolation",
        "schema",
        "tool_args",
        "alone",
    ];
    if let Some(k) = args.tolerate.iter().find(|k| !KINDS.contains(&k.as_str())) {
        bail!("--tolerate {k:?}: the checks are {}", KINDS.join(", "));
    }
    if args.percentiles.iter().any(|p| !(0.0..=100.0).contains(p)) {
        bail!("--percentiles are between 0 and 100");
    }
    Ok(())
}

fn run(args: RunArgs) -> Result<()> {
    let started = Instant::now();
    let started_at = run_info::now();
    validate(&args)?;
    let slo = Slo::parse(&args.goodput).map_err(anyhow::Error::msg)?;
    afm_harness::report::html::check_templates()?;
    let prompts = args.prompts.clone().unwrap_or(match args.scenario {
        Scenario::PrefixCache => Prompts::SharedPrefix,
        _ => Prompts::Short,
    });
    let bound = Bound {
        requests: args.requests.or(if args.duration.is_some() {
            None
        } else {
            Some(16)
        }),
        duration_s: args.duration,
    };
    let specs = variants(&args)?;
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("creating {}", args.out.display()))?;
    // Unique per run, so nothing cached by an earlier run helps this one.
    let nonce = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let mut records = if args.save_requests {
        Some(records::create(&args.out.join("requests.jsonl"))?)
    } else {
        None
    };
    let mut results = Vec::new();
    let mut model_name = String::new();
    let mut dataset_name = String::new();
    let user_flags: Vec<String> = args
        .server_flags
        .as_deref()
        .map(|f| f.split_whitespace().map(str::to_string).collect())
        .unwrap_or_default();
    for (vi, spec) in specs.iter().enumerate() {
        let (target, server_flags) = match (&args.url, &spec.engine) {
            (Some(url), _) => (Target::http(url, args.api_key.clone()), user_flags.clone()),
            (None, Some(flags)) => {
                let model = args.model.clone().unwrap_or_else(|| "smollm2".into());
                let (target, flags, refused) = Target::start_in_process(&model, flags, None)?;
                if let Some(reason) = refused {
                    eprintln!("afm-bench: {reason}; running without --deterministic");
                }
                (target, flags)
            }
            (None, None) => unreachable!("in-process variants carry an engine"),
        };
        let model = match target.model() {
            Some(m) if args.url.is_none() => m.to_string(),
            _ => runtime.block_on(served_model(&target, args.model.as_deref()))?,
        };
        model_name = model.clone();
        let dataset =
            Arc::new(runtime.block_on(dataset_of(&args, &target, &model, prompts.clone()))?);
        dataset_name = dataset.describe();
        eprintln!(
            "afm-bench: {} on {} ({})",
            spec.name,
            target.describe(),
            dataset_name
        );
        let player = Arc::new(Player {
            target: target.clone(),
            dataset,
            settings: RequestSettings {
                endpoint: args.endpoint,
                model: model.clone(),
                temperature: args.temperature,
                ignore_eos: args.ignore_eos,
                extra: spec.extra.clone(),
            },
            max_tokens: args.max_tokens,
            verify: !args.no_verify,
            tolerate: args.tolerate.clone(),
            schema_share: args.schema_share,
            think_s: args.think_time,
            seed: args.seed,
        });
        let enforce_alone = args.batch_invariant
            || (args.url.is_none() && server_flags.iter().any(|f| f == "--deterministic"));
        let mut level_at = |shape: Shape, tag: &str| -> Result<LevelResult> {
            if args.warmup > 0 {
                let warm_users = match shape {
                    Shape::Closed { concurrency } => concurrency,
                    Shape::Open {
                        max_concurrency, ..
                    } => max_concurrency.unwrap_or(4),
                };
                let warm = runtime.block_on(player.play(
                    Shape::Closed {
                        concurrency: warm_users.min(args.warmup),
                    },
                    Bound {
                        requests: Some(args.warmup),
                        duration_s: None,
                    },
                    &format!("{nonce}-warmup-{vi}-{tag}"),
                ));
                if let Some(e) = warm.samples.iter().find_map(|s| s.error.clone()) {
                    eprintln!("afm-bench: warning: a warm-up request failed: {e}");
                }
            }
            let before = runtime.block_on(server_metrics::scrape(&target));
            let mut runs = Vec::new();
            for rep in 0..args.repetitions {
                let mut run = runtime.block_on(player.play(
                    shape,
                    bound,
                    &format!("{nonce}-{vi}-{tag}-{rep}"),
                ));
                if rep == 0 && args.verify_alone > 0 {
                    runtime.block_on(replay_alone(
                        &target,
                        args.endpoint.path(),
                        &mut run,
                        args.verify_alone,
                        args.temperature,
                        enforce_alone,
                    ));
                }
                if let Some(out) = records.as_mut() {
                    records::write(out, &spec.name, &shape.label(), rep, &run.samples)?;
                }
                runs.push(run);
            }
            let after = runtime.block_on(server_metrics::scrape(&target));
            let server = before
                .zip(after)
                .map(|(b, a)| server_metrics::delta(&b, &a));
            let mut level = LevelResult::of(shape, &runs, server, &slo, &args.percentiles);
            if args.verify_alone > 0 {
                level.alone = Some(alone_figures(&runs[0], enforce_alone));
            }
            eprintln!(
                "afm-bench:   {}: {}/{} served, {} corrupted, {:.1} output tok/s{}",
                level.label,
                level.requests - level.errors,
                level.requests,
                level.corrupted,
                level.output_tokens_per_s,
                level.goodput.map_or(String::new(), |g| format!(
                    ", correct goodput {:.2}/s ({:.0}%)",
                    g.correct_good_per_s,
                    100.0 * g.correct_good_share
                ))
            );
            Ok(level)
        };
        let mut levels = Vec::new();
        let mut search = None;
        let all = shapes(&args);
        if let Some(pct) = args.slo_search {
            let first = all[0];
            let start = all.iter().map(|s| s.x()).fold(f64::MAX, f64::min);
            let integer = matches!(first, Shape::Closed { .. });
            let mut k = 0;
            search = Some(afm_harness::bench::search::search(
                start,
                integer,
                args.search_steps,
                pct / 100.0,
                |x| {
                    k += 1;
                    let level = level_at(at_load(first, x), &format!("search-{k}"))?;
                    let share = level.goodput.map_or(0.0, |g| g.correct_good_share);
                    levels.push(level);
                    Ok(share)
                },
            )?);
            levels.sort_by(|a, b| a.x.total_cmp(&b.x));
        } else {
            for (k, shape) in all.into_iter().enumerate() {
                levels.push(level_at(shape, &k.to_string())?);
            }
        }
        results.push(Variant {
            name: spec.name.clone(),
            server_flags,
            levels,
            search,
        });
        // An in-process engine stops here, before the next one starts.
        drop(player);
        drop(target);
    }
    if let Some(mut out) = records {
        use std::io::Write as _;
        out.flush()?;
    }

    let run = BenchRun {
        target: args.url.clone().unwrap_or_else(|| "in-process".into()),
        model: model_name,
        server_flags: results
            .first()
            .map(|v: &Variant| v.server_flags.clone())
            .unwrap_or_default(),
        engine_version: if args.url.is_some() {
            "not known (remote server)".into()
        } else {
            format!("afm-engine {}", env!("CARGO_PKG_VERSION"))
        },
        git_commit: run_info::git_commit(),
        host: run_info::host(),
        hardware: run_info::hardware(),
        started: started_at,
        wall_seconds: started.elapsed().as_secs_f64(),
        scenario: scenario_name(args.scenario),
        prompts: dataset_name,
        requests: bound.requests,
        duration_s: bound.duration_s,
        max_tokens: args.max_tokens,
        warmup: args.warmup,
        repetitions: args.repetitions,
        endpoint: args
            .endpoint
            .to_possible_value()
            .map_or_else(String::new, |v| v.get_name().to_string()),
        slo: slo.to_string(),
        verified: !args.no_verify,
        schema_share: args.schema_share,
        percentiles: args.percentiles.clone(),
        tolerated: args.tolerate.clone(),
    };
    let report = BenchReport::new(run, results);
    let json_path = args.out.join("bench.json");
    report.write(&json_path)?;
    let html_path = args.out.join("bench.html");
    std::fs::write(&html_path, afm_harness::bench::page::render(&report)?)
        .with_context(|| format!("writing {}", html_path.display()))?;
    print!("{}", report.table());
    println!(
        "afm-bench: {:.1} s; {} and {}",
        report.run.wall_seconds,
        json_path.display(),
        html_path.display()
    );
    Ok(())
}

/// The run's prompts: a trace, synthetic token-sized prompts, or a
/// built-in set or file.
async fn dataset_of(
    args: &RunArgs,
    target: &Target,
    model: &str,
    prompts: Prompts,
) -> Result<Dataset> {
    let needs_tokens = args.input_len.is_some() || args.trace.is_some();
    let vocabulary = if needs_tokens {
        let counter = TokenCounter::probe(target, model, args.tokenizer.as_deref()).await?;
        let v = Vocabulary::probe(&counter).await?;
        eprintln!(
            "afm-bench: prompt tokens counted with {} ({} one-token words)",
            counter.describe(),
            v.len()
        );
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
    } else {
        Source::Builtin(Workload::new(prompts)?)
    };
    Ok(Dataset {
        source,
        turns: args.turns,
        output_len: args.output_len,
        range_ratio: args.range_ratio,
        seed: args.seed,
    })
}

/// Replays up to `n` served temperature-0 replies one at a time and marks
/// each that differs (a failure when `enforce`).
async fn replay_alone(
    target: &Target,
    path: &str,
    run: &mut LevelRun,
    n: usize,
    temperature: f64,
    enforce: bool,
) {
    if temperature != 0.0 {
        return;
    }
    let picks: Vec<usize> = (0..run.samples.len())
        .filter(|&k| run.samples[k].correct() && run.bodies[k].is_object())
        .take(n)
        .collect();
    for k in picks {
        let ex = target.post(path, &run.bodies[k]).await;
        let alone = Sample::of(&ex);
        let s = &mut run.samples[k];
        s.alone_differs = Some(alone.served() && alone.content != s.content);
        if enforce && s.alone_differs == Some(true) {
            s.failed_checks.push(FailedCheck {
                check: "alone".into(),
                detail: format!(
                    "under load {:?}; alone {:?}",
                    clip(&s.content),
                    clip(&alone.content)
                ),
            });
        }
    }
}

fn clip(s: &str) -> String {
    s.chars().take(120).collect()
}

fn alone_figures(run: &LevelRun, enforced: bool) -> AloneFigures {
    let compared: Vec<bool> = run.samples.iter().filter_map(|s| s.alone_differs).collect();
    AloneFigures {
        compared: compared.len(),
        differing: compared.iter().filter(|d| **d).count(),
        enforced,
    }
}
