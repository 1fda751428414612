//! `afm-bench`: throughput and latency of the in-process engine or any
//! OpenAI-compatible server under load, per concurrency level, with
//! scenarios that toggle one thing (prefix cache, grammar, deterministic
//! mode); `afm-bench compare A B` sets two runs side by side.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use afm_harness::bench::report::{BenchReport, BenchRun, LevelResult, Variant};
use afm_harness::bench::workload::{Prompts, Workload};
use afm_harness::bench::{compare, load, server_metrics};
use afm_harness::run_info;
use afm_harness::target::Target;
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
    /// Concurrency levels, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1,2,4,8")]
    concurrency: Vec<usize>,
    /// Requests per level and repetition.
    #[arg(long, default_value_t = 16)]
    requests: usize,
    #[arg(long, default_value_t = 64)]
    max_tokens: u32,
    /// short | long | shared-prefix | FILE (default: short; shared-prefix
    /// for the prefix-cache scenario).
    #[arg(long)]
    prompts: Option<Prompts>,
    /// Requests sent one at a time before measuring, per variant.
    #[arg(long, default_value_t = 2)]
    warmup: usize,
    /// Passes over each level; throughput is their median.
    #[arg(long, default_value_t = 1)]
    repetitions: usize,
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

fn request(model: &str, messages: Value, max_tokens: u32, extra: &Value) -> Value {
    let mut r = json!({
        "model": model,
        "messages": messages,
        "max_tokens": max_tokens,
        "temperature": 0.0,
        "stream": true,
        "stream_options": {"include_usage": true}
    });
    if let (Some(r), Some(extra)) = (r.as_object_mut(), extra.as_object()) {
        for (k, v) in extra {
            r.insert(k.clone(), v.clone());
        }
    }
    r
}

fn run(args: RunArgs) -> Result<()> {
    let started = Instant::now();
    let started_at = run_info::now();
    if args.concurrency.is_empty() || args.concurrency.contains(&0) {
        bail!("--concurrency: levels must be at least 1");
    }
    if args.requests == 0 || args.repetitions == 0 {
        bail!("--requests and --repetitions must be at least 1");
    }
    afm_harness::report::html::check_templates()?;
    let prompts = args.prompts.clone().unwrap_or(match args.scenario {
        Scenario::PrefixCache => Prompts::SharedPrefix,
        _ => Prompts::Short,
    });
    let workload = Workload::new(prompts)?;
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
    let mut results = Vec::new();
    let mut model_name = String::new();
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
        eprintln!("afm-bench: {} on {}", spec.name, target.describe());
        let bodies = |n: usize, salt: &str| -> Vec<Value> {
            workload
                .messages(n, salt)
                .into_iter()
                .map(|m| request(&model, m, args.max_tokens, &spec.extra))
                .collect()
        };
        if args.warmup > 0 {
            let warm = runtime.block_on(load::run(
                &target,
                bodies(args.warmup, &format!("{nonce}-warmup-{vi}")),
                1,
            ));
            if let Some(e) = warm.samples.iter().find_map(|s| s.error.clone()) {
                eprintln!("afm-bench: warning: a warm-up request failed: {e}");
            }
        }
        let mut levels = Vec::new();
        for &c in &args.concurrency {
            let before = runtime.block_on(server_metrics::scrape(&target));
            let mut runs = Vec::new();
            for rep in 0..args.repetitions {
                let reqs = bodies(args.requests, &format!("{nonce}-{vi}-{c}-{rep}"));
                runs.push(runtime.block_on(load::run(&target, reqs, c)));
            }
            let after = runtime.block_on(server_metrics::scrape(&target));
            let server = before
                .zip(after)
                .map(|(b, a)| server_metrics::delta(&b, &a));
            let level = LevelResult::of(c, &runs, server);
            eprintln!(
                "afm-bench:   concurrency {c}: {}/{} ok, {:.1} output tok/s",
                level.requests - level.errors,
                level.requests,
                level.output_tokens_per_s
            );
            levels.push(level);
        }
        results.push(Variant {
            name: spec.name.clone(),
            server_flags,
            levels,
        });
        // An in-process engine stops here, before the next one starts.
        drop(target);
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
        prompts: workload.prompts().to_string(),
        requests: args.requests,
        max_tokens: args.max_tokens,
        warmup: args.warmup,
        repetitions: args.repetitions,
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
