//! `afm-test`: runs the assertion suites against the in-process engine or
//! an OpenAI-compatible server, writes JSON/HTML/JUnit reports, and
//! compares two reports (`diff`) for CI gates.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use afm_harness::report::diff::{Diff, Options as DiffOptions};
use afm_harness::report::known_failures::KnownFailures;
use afm_harness::report::matrix::{Matrix, MatrixFile};
use afm_harness::report::{html, junit};
use afm_harness::report::{CaseResult, Report, RunInfo};
use afm_harness::run_info;
use afm_harness::runner::{self, RunOptions};
use afm_harness::suite::profile::Profile;
use afm_harness::suite::{self, Selection, Tier};
use afm_harness::server::process::ServerProcess;
use afm_harness::server::Target;
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
    Run(Box<RunArgs>),
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
        /// A case that passed and now skips is not a regression.
        #[arg(long)]
        allow_skips: bool,
    },
    /// Run several targets (servers, models, flag sets) from a TOML file
    /// into one report with a column per target.
    Matrix {
        /// The matrix file (see suites/README.md).
        file: PathBuf,
        /// Where each target's report and matrix.{json,html} go.
        #[arg(long, default_value = "afm-test-matrix")]
        out: PathBuf,
    },
}

#[derive(Args, Clone)]
struct RunArgs {
    #[arg(long, default_value = "standard")]
    tier: Tier,
    /// The model: for the in-process engine an alias, .gguf, folder or HF
    /// repo id; with --url or --server the name sent as `model` in every
    /// request (default: the first id of GET /v1/models) and `{model}` in
    /// the --server command.
    #[arg(long)]
    model: Option<String>,
    /// Base URL of an OpenAI-compatible server (instead of the engine).
    #[arg(long, conflicts_with = "server")]
    url: Option<String>,
    /// Start this server, run, stop it: a shell command with `{port}`
    /// (a free port) and `{model}` (--model) in it.
    #[arg(long)]
    server: Option<String>,
    /// Seconds to wait for a --server to answer.
    #[arg(long, default_value_t = 300)]
    server_timeout: u64,
    /// Bearer key for --url / --server.
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
    /// The `seed` of requests that set none (nonces stay unique per run).
    #[arg(long)]
    seed: Option<u64>,
    /// Suite folder (default: ./suites when there is one, else the suites
    /// built into this binary).
    #[arg(long)]
    suites: Option<PathBuf>,
    /// Treat a capability as present without probing (repeatable).
    #[arg(long = "assume")]
    assume: Vec<String>,
    /// Treat a capability as absent: its cases skip (repeatable;
    /// `NAME=REASON` records why).
    #[arg(long = "assume-absent")]
    assume_absent: Vec<String>,
    /// A target profile (TOML: `assume`, `[absent]` with reasons).
    #[arg(long)]
    profile: Option<PathBuf>,
    /// In-process engine: a chat template file replacing the model's.
    #[arg(long)]
    chat_template: Option<PathBuf>,
    /// In-process engine: batch-invariant decoding (the determinism cases
    /// hold only with it; `--deterministic false` measures the fast mode).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    deterministic: bool,
}

fn main() -> ExitCode {
    // The in-process target runs the engine in this process.
    #[cfg(feature = "engine")]
    afm_engine::cpu::blas::restart_for_openblas_core();
    let cli = Cli::parse();
    let result = match cli.command {
        None => run(cli.run),
        Some(Command::Run(args)) => run(*args),
        Some(Command::List { tier, suites }) => list(tier, suites),
        Some(Command::Diff {
            before,
            after,
            html,
            known_failures,
            allow_skips,
        }) => diff(
            &before,
            &after,
            html.as_deref(),
            known_failures.as_deref(),
            DiffOptions { allow_skips },
        ),
        Some(Command::Matrix { file, out }) => matrix(&file, &out),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("afm-test: error: {e:#}");
            ExitCode::from(2)
        }
    }
}

/// The suites: `--suites DIR`, else `./suites` when there is one, else the
/// ones built into this binary.
fn load_suites(given: Option<PathBuf>) -> Result<Vec<suite::Section>> {
    match given {
        Some(dir) => suite::load_dir(&dir),
        None if Path::new("suites").is_dir() => suite::load_dir(Path::new("suites")),
        None => suite::load_embedded(),
    }
}

fn list(tier: Tier, suites: Option<PathBuf>) -> Result<ExitCode> {
    let sections = load_suites(suites)?;
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
    options: DiffOptions,
) -> Result<ExitCode> {
    let a = Report::read(before)?;
    let b = Report::read(after)?;
    let known = match known {
        Some(p) => KnownFailures::read(p)?,
        None => KnownFailures::default(),
    };
    let d = Diff::compare(&a, &b, &known, options);
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
    let report = run_report(&args)?;
    Ok(if report.unexplained_failures() > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// Runs the suites against one target and writes its report files.
fn run_report(args: &RunArgs) -> Result<Report> {
    let started = Instant::now();
    let started_at = run_info::now();
    html::check_templates()?;
    let sections = load_suites(args.suites.clone())?;
    let known = match &args.known_failures {
        Some(p) => KnownFailures::read(p)?,
        None => KnownFailures::default(),
    };
    let mut profile = match &args.profile {
        Some(p) => Profile::read(p)?,
        None => Profile::default(),
    }
    .with_flags(&args.assume, &args.assume_absent)?;
    let remote = args.url.is_some() || args.server.is_some();
    if !remote && args.api_key.is_some() {
        bail!("--api-key needs --url or --server");
    }
    if remote && args.chat_template.is_some() {
        bail!("--chat-template is for the in-process engine; give the server its own");
    }
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("creating {}", args.out.display()))?;
    let seed = args.seed.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_secs())
    });
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
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;

    // Kept alive for the run; dropping it stops the server.
    let mut server = None;
    let (target, flags) = match (&args.url, &args.server) {
        (Some(url), _) => (Target::http(url, args.api_key.clone()), Vec::new()),
        (None, Some(command)) => {
            let log = args.out.join("server.log");
            let mut process = ServerProcess::start(command, args.model.as_deref(), &log)?;
            let target = Target::http(&process.base, args.api_key.clone());
            eprintln!(
                "afm-test: started `{}` (log {})",
                process.command,
                log.display()
            );
            runtime
                .block_on(process.wait_ready(&target, Duration::from_secs(args.server_timeout)))?;
            let flags = vec![process.command.clone()];
            server = Some(process);
            (target, flags)
        }
        (None, None) => {
            let (target, flags, refused) = in_process_target(args)?;
            // A model that cannot promise batch invariance says why; the
            // cases that need it skip with that reason.
            if let Some(reason) = refused {
                eprintln!("afm-test: {reason}; running without --deterministic");
                profile.absent.insert("batch_invariance".into(), reason);
            }
            (target, flags)
        }
    };
    let target = if remote {
        let model = match &args.model {
            Some(m) => Some(m.clone()),
            None => runtime.block_on(target.listed_model())?,
        };
        target.with_model(model)
    } else {
        target
    };
    let requested_model = target.model().map(str::to_string);

    let nonce = runner::run_nonce();
    eprintln!("afm-test: {} cases against {}", selected, target.describe());
    let capabilities =
        runtime.block_on(profile.capabilities().probe(&target, &format!("{nonce:x}")));
    let progress = Progress::new(selected);
    let reporter = progress.clone();
    let options = RunOptions {
        selection,
        concurrency: args.concurrency,
        seed,
        nonce,
    };
    let results = runtime.block_on(runner::run(
        &target,
        &sections,
        &capabilities,
        &options,
        move |r| reporter.case_done(r),
    ));
    progress.finish();
    drop(target);
    drop(server);

    let info = RunInfo {
        target: args
            .url
            .clone()
            .or_else(|| args.server.as_ref().map(|_| "started by afm-test".into()))
            .unwrap_or_else(|| "in-process".into()),
        model: capabilities
            .served_model
            .clone()
            .or_else(|| requested_model.clone())
            .unwrap_or_else(|| "the server's default".into()),
        requested_model,
        server_flags: flags,
        engine_version: if remote {
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
        if let Some(reason) = &c.reason {
            println!("      {reason}");
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
    Ok(report)
}

/// The in-process engine, started with the flags afm-serve would take
/// (parsed by afm-serve's own flag reader, so every other setting is a
/// flagless afm-serve's), those flags, and why batch invariance was refused
/// (then the engine runs without it).
fn in_process_target(args: &RunArgs) -> Result<(Target, Vec<String>, Option<String>)> {
    let model = args.model.clone().unwrap_or_else(|| "smollm2".into());
    let mut flags = Vec::new();
    if args.deterministic {
        flags.push("--deterministic".to_string());
    }
    if let Some(p) = &args.chat_template {
        flags.push("--chat-template".into());
        flags.push(p.display().to_string());
    }
    // A key, so the security cases check afm-serve's key handling too.
    let key = format!("afm-test-{:x}", afm_harness::runner::run_nonce());
    Target::start_in_process(&model, &flags, Some(key))
}

/// How a run shows its progress: a bar on a terminal; in a log (no
/// terminal) one `PASS id (ms)` line per case as it ends.
#[derive(Clone)]
enum Progress {
    Bar(ProgressBar),
    Lines,
}

impl Progress {
    fn new(cases: usize) -> Progress {
        if !std::io::stderr().is_terminal() {
            return Progress::Lines;
        }
        let bar = ProgressBar::new(cases as u64);
        bar.set_style(
            ProgressStyle::with_template("{bar:30} {pos}/{len} {msg}")
                .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        Progress::Bar(bar)
    }

    fn case_done(&self, r: &CaseResult) {
        match self {
            Progress::Bar(bar) => {
                bar.set_message(format!("{} {}", r.status.as_str(), r.id));
                bar.inc(1);
            }
            Progress::Lines => println!(
                "{:<5} {} ({:.0} ms)",
                r.status.as_str().to_uppercase(),
                r.id,
                r.millis
            ),
        }
    }

    fn finish(&self) {
        if let Progress::Bar(bar) = self {
            bar.finish_and_clear();
        }
    }
}

/// Runs every target of a matrix file, each into its own folder, then
/// writes the combined report.
fn matrix(file: &Path, out: &Path) -> Result<ExitCode> {
    let plan = MatrixFile::read(file)?;
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    let mut columns = Vec::new();
    for t in &plan.targets {
        eprintln!("afm-test matrix: {}", t.name);
        let args = RunArgs {
            tier: t.tier.or(plan.tier).unwrap_or(Tier::Standard),
            model: t.model.clone(),
            url: t.url.clone(),
            server: t.server.clone(),
            server_timeout: 300,
            api_key: t.api_key.clone(),
            sections: plan.sections.clone(),
            cases: Vec::new(),
            out: out.join(&t.name),
            junit: None,
            known_failures: t.known_failures.clone(),
            concurrency: 1,
            seed: plan.seed,
            suites: plan.suites.clone(),
            assume: Vec::new(),
            assume_absent: Vec::new(),
            profile: t.profile.clone(),
            chat_template: t.chat_template.clone(),
            deterministic: t.deterministic.unwrap_or(true),
        };
        let report = run_report(&args)?;
        columns.push((t.name.clone(), report));
    }
    let m = Matrix::new(&columns);
    m.write(out)?;
    std::fs::write(out.join("matrix.html"), html::render_matrix(&m)?)
        .with_context(|| format!("writing {}", out.join("matrix.html").display()))?;
    print!("{}", m.text());
    Ok(
        if columns.iter().any(|(_, r)| r.unexplained_failures() > 0) {
            ExitCode::from(1)
        } else {
            ExitCode::SUCCESS
        },
    )
}
