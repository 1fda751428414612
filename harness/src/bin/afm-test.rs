//! `afm-test`: runs the assertion suites against the in-process engine or
//! an OpenAI-compatible server, writes JSON/HTML/JUnit reports, and
//! compares two reports (`diff`) for CI gates.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use afm_engine::openai_api::ApiContext;
use afm_engine::{Engine, EngineConfig};
use afm_harness::capabilities::Capabilities;
use afm_harness::diff::Diff;
use afm_harness::known_failures::KnownFailures;
use afm_harness::report::{Report, RunInfo, Status};
use afm_harness::runner::{self, RunOptions};
use afm_harness::suite::{self, Selection, Tier};
use afm_harness::target::Target;
use afm_harness::{html, junit, run_info};
use anyhow::{bail, Context, Result};
use clap::{Args, Parser, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};

#[derive(Parser)]
#[command(
    name = "afm-test",
    version,
    about = "Assertion suites for OpenAI-compatible LLM servers"
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    run: RunArgs,
}

#[derive(Subcommand)]
enum Command {
    /// Run the suites (the default).
    Run(RunArgs),
    /// List the cases of a tier.
    List {
        #[arg(long, default_value = "full")]
        tier: Tier,
        #[arg(long)]
        suites: Option<PathBuf>,
    },
    /// Compare two reports: regressions, fixes, pre-existing failures.
    /// Exits 1 on any regression.
    Diff {
        /// The baseline report (JSON).
        before: PathBuf,
        /// The new report (JSON).
        after: PathBuf,
        /// Also write the comparison as HTML.
        #[arg(long)]
        html: Option<PathBuf>,
        /// Attributes pre-existing failures to issues.
        #[arg(long)]
        known_failures: Option<PathBuf>,
    },
}

#[derive(Args, Clone)]
struct RunArgs {
    #[arg(long, default_value = "standard")]
    tier: Tier,
    /// Model for the in-process engine (alias, .gguf, folder, HF repo id).
    #[arg(long, conflicts_with = "url")]
    model: Option<String>,
    /// Base URL of an OpenAI-compatible server (instead of the engine).
    #[arg(long)]
    url: Option<String>,
    /// Bearer key for --url.
    #[arg(long)]
    api_key: Option<String>,
    /// Only these sections (repeatable).
    #[arg(long = "section")]
    sections: Vec<String>,
    /// Only these case ids (repeatable).
    #[arg(long = "case")]
    cases: Vec<String>,
    /// Where report.json and report.html go.
    #[arg(long, default_value = "afm-test-report")]
    out: PathBuf,
    #[arg(long)]
    junit: Option<PathBuf>,
    #[arg(long)]
    known_failures: Option<PathBuf>,
    /// Cases run at the same time.
    #[arg(long, default_value_t = 1)]
    concurrency: usize,
    /// Seeds nonces and the `seed` of requests that set none.
    #[arg(long)]
    seed: Option<u64>,
    /// Suite folder (default: ./suites, else the project's).
    #[arg(long)]
    suites: Option<PathBuf>,
    /// Treat a capability as present without probing (repeatable).
    #[arg(long = "assume")]
    assume: Vec<String>,
    /// In-process engine: a chat template file replacing the model's.
    #[arg(long)]
    chat_template: Option<PathBuf>,
    /// In-process engine: batch-invariant decoding (the determinism cases
    /// hold only with it; `--deterministic false` measures the fast mode).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    deterministic: bool,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        None => run(cli.run),
        Some(Command::Run(args)) => run(args),
        Some(Command::List { tier, suites }) => list(tier, suites),
        Some(Command::Diff {
            before,
            after,
            html,
            known_failures,
        }) => diff(&before, &after, html.as_deref(), known_failures.as_deref()),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("afm-test: error: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn suites_dir(given: Option<PathBuf>) -> PathBuf {
    given.unwrap_or_else(|| {
        let local = PathBuf::from("suites");
        if local.is_dir() {
            local
        } else {
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../suites")
        }
    })
}

fn list(tier: Tier, suites: Option<PathBuf>) -> Result<ExitCode> {
    let sections = suite::load_dir(&suites_dir(suites))?;
    let mut n = 0;
    for s in &sections {
        let cases: Vec<_> = s.cases.iter().filter(|c| c.tier <= tier).collect();
        if cases.is_empty() {
            continue;
        }
        println!("{} — {}", s.section, s.title);
        for c in cases {
            n += 1;
            let mut extra = Vec::new();
            if !c.requires.is_empty() {
                extra.push(format!("requires {}", c.requires.join(",")));
            }
            if !c.seeds.is_empty() {
                extra.push(format!("seeds {}", c.seeds.join(",")));
            }
            println!(
                "  {:<40} {:<9} {}{}",
                c.id,
                format!("{:?}", c.tier).to_lowercase(),
                c.name,
                if extra.is_empty() {
                    String::new()
                } else {
                    format!("  [{}]", extra.join("; "))
                }
            );
        }
    }
    println!("{n} cases");
    Ok(ExitCode::SUCCESS)
}

fn diff(
    before: &Path,
    after: &Path,
    html_out: Option<&Path>,
    known: Option<&Path>,
) -> Result<ExitCode> {
    let a = Report::read(before)?;
    let b = Report::read(after)?;
    let known = match known {
        Some(p) => KnownFailures::read(p)?,
        None => KnownFailures::default(),
    };
    let d = Diff::compare(&a, &b, &known);
    print!("{}", d.text());
    if let Some(p) = html_out {
        std::fs::write(p, html::render_diff(&d)?)
            .with_context(|| format!("writing {}", p.display()))?;
    }
    Ok(if d.has_regressions() {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

fn run(args: RunArgs) -> Result<ExitCode> {
    let started = Instant::now();
    let started_at = run_info::now();
    html::check_templates()?;
    let sections = suite::load_dir(&suites_dir(args.suites.clone()))?;
    let known = match &args.known_failures {
        Some(p) => KnownFailures::read(p)?,
        None => KnownFailures::default(),
    };
    for a in &args.assume {
        if !afm_harness::capabilities::ALL.contains(&a.as_str()) {
            bail!(
                "--assume: unknown capability '{a}' ({})",
                afm_harness::capabilities::ALL.join(", ")
            );
        }
    }
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("creating {}", args.out.display()))?;
    let seed = args.seed.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_secs())
    });

    let (target, model, flags) = match &args.url {
        Some(url) => (
            Target::http(url, args.api_key.clone()),
            args.model.clone().unwrap_or_else(|| "served model".into()),
            Vec::new(),
        ),
        None => {
            let model = args.model.clone().unwrap_or_else(|| "smollm2".into());
            let chat_template = match &args.chat_template {
                Some(p) => Some(
                    std::fs::read_to_string(p)
                        .with_context(|| format!("--chat-template: cannot read {}", p.display()))?,
                ),
                None => None,
            };
            let config = EngineConfig {
                prefix_caching: true,
                grammar_constraints: true,
                concurrent: 8,
                deterministic: args.deterministic,
                chat_template,
                ..Default::default()
            };
            let mut flags = vec![
                "--enable-prefix-caching".to_string(),
                "--enable-grammar-constraints".into(),
                "--concurrent 8".into(),
            ];
            if args.deterministic {
                flags.push("--deterministic".into());
            }
            if let Some(p) = &args.chat_template {
                flags.push(format!("--chat-template {}", p.display()));
            }
            let engine = Engine::start(&model, config)?;
            let api = ApiContext::new(engine, &model);
            (Target::InProcess(Arc::new(api)), model, flags)
        }
    };

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let selection = Selection {
        tier: args.tier,
        sections: args.sections.clone(),
        cases: args.cases.clone(),
    };
    let selected = sections
        .iter()
        .flat_map(|s| s.cases.iter().map(move |c| (s, c)))
        .filter(|(s, c)| selection.includes(s, c))
        .count();
    if selected == 0 {
        bail!("no case matches the tier, --section and --case given");
    }
    eprintln!("afm-test: {} against {}", selected, target.describe());
    let mut capabilities = runtime.block_on(Capabilities::detect(&target));
    for a in &args.assume {
        capabilities.assume(a);
    }
    let bar = ProgressBar::new(selected as u64);
    bar.set_style(
        ProgressStyle::with_template("{bar:30} {pos}/{len} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let progress_bar = bar.clone();
    let options = RunOptions {
        selection,
        concurrency: args.concurrency,
        seed,
    };
    let results = runtime.block_on(runner::run(
        &target,
        &sections,
        &capabilities,
        &options,
        move |r| {
            progress_bar.set_message(format!("{} {}", r.status.as_str(), r.id));
            progress_bar.inc(1);
        },
    ));
    bar.finish_and_clear();
    drop(target);

    let info = RunInfo {
        target: args.url.clone().unwrap_or_else(|| "in-process".into()),
        model,
        server_flags: flags,
        engine_version: if args.url.is_some() {
            "not known (remote server)".into()
        } else {
            format!("afm-engine {}", env!("CARGO_PKG_VERSION"))
        },
        git_commit: run_info::git_commit(),
        host: run_info::host(),
        started: started_at,
        wall_seconds: started.elapsed().as_secs_f64(),
        tier: Some(args.tier),
        seed,
        capabilities,
    };
    let mut report = Report::new(info, results);
    known.annotate(&mut report);
    let json_path = args.out.join("report.json");
    report.write(&json_path)?;
    let html_path = args.out.join("report.html");
    std::fs::write(&html_path, html::render_report(&report)?)
        .with_context(|| format!("writing {}", html_path.display()))?;
    if let Some(p) = &args.junit {
        std::fs::write(p, junit::render(&report))
            .with_context(|| format!("writing {}", p.display()))?;
    }

    for c in report.cases.iter().filter(|c| c.status.failed()) {
        let known = c
            .known_issue
            .as_ref()
            .map(|k| format!("  [known: {k}]"))
            .unwrap_or_default();
        println!(
            "{:<5} {}  {}{known}",
            c.status.as_str().to_uppercase(),
            c.id,
            c.name
        );
        for f in &c.failures {
            println!(
                "      {}: expected {}; got {}",
                f.check, f.expected, f.actual
            );
        }
        if c.status == Status::Error {
            println!("      {}", c.reason.as_deref().unwrap_or_default());
        }
    }
    let s = report.summary;
    println!(
        "afm-test: {} passed, {} failed ({} known), {} errors, {} skipped in {:.1} s; {}",
        s.pass,
        s.fail,
        s.known,
        s.error,
        s.skip,
        report.run.wall_seconds,
        json_path.display()
    );
    Ok(if report.unexplained_failures() > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}
