//! `afm-test`: runs the assertion suites against the in-process engine or
//! an OpenAI-compatible server, writes JSON/HTML/JUnit reports, and
//! compares two reports (`diff`) for CI gates. The runs live in the
//! library (`afm_harness::run`); this parses flags, prints and exits.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use afm_harness::report::diff::Options as DiffOptions;
use afm_harness::run::compare::{self, CompareFiles};
use afm_harness::run::conformance::{self, ConformanceArgs};
use afm_harness::run::matrix;
use afm_harness::run::progress::Progress;
use afm_harness::run::regrade::{self, RegradeArgs};
use afm_harness::suite::{self, Tier};
use anyhow::Result;
use clap::{Parser, Subcommand};

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
    run: ConformanceArgs,
}

#[derive(Subcommand)]
enum Command {
    /// Run the suites (the default).
    Run(Box<ConformanceArgs>),
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
        /// Also write it as Markdown (for `$GITHUB_STEP_SUMMARY` or a
        /// pull-request comment).
        #[arg(long)]
        summary: Option<PathBuf>,
        /// Attributes pre-existing failures to issues.
        #[arg(long)]
        known_failures: Option<PathBuf>,
        /// A case that passed and now skips is not a regression.
        #[arg(long)]
        allow_skips: bool,
    },
    /// Grade a report's cases again from the reply bytes it stored, with
    /// no server (the suites' checks as they are now; `--clients` as in
    /// the run). Exits 1 when a grade came out otherwise.
    Regrade(RegradeArgs),
    /// Read many reports of one target over time (files, folders, a
    /// matrix's folder) as a case x run grid: each case's state now, the
    /// run where it began failing, its flips and failure rate.
    History {
        /// Reports, or folders holding them.
        #[arg(required = true)]
        reports: Vec<PathBuf>,
        /// Where history.html, history.md and history.json go.
        #[arg(long, default_value = "afm-test-history")]
        out: PathBuf,
    },
    /// Run the real coding agents (Codex CLI, Claude Code, OpenCode)
    /// headless against a server: each graded ready, broken (naming its
    /// first error and the request that caused it) or unproven (the model
    /// did not do a task). Exits 1 when one is broken.
    Agents(Box<afm_harness::run::agents::AgentsArgs>),
    /// Run several targets (servers, models, flag sets) from a TOML file
    /// into one report with a column per target.
    Matrix {
        /// The matrix file (see suites/README.md).
        file: PathBuf,
        /// Where each target's report and matrix.{json,html} go.
        #[arg(long, default_value = "afm-test-matrix")]
        out: PathBuf,
        /// Targets whose report is already in --out are not run again:
        /// their failures are attributed anew from the known-failures files.
        #[arg(long)]
        reuse: bool,
        /// Grade every column by the official clients under this Python
        /// (`run --clients`).
        #[arg(long, value_name = "PYTHON")]
        clients: Option<PathBuf>,
    },
}

fn main() -> ExitCode {
    // The in-process target runs the engine in this process.
    #[cfg(feature = "engine")]
    afm_engine::cpu::blas::restart_for_openblas_core();
    let cli = Cli::parse();
    let result = match cli.command {
        None => run(&cli.run),
        Some(Command::Run(args)) => run(&args),
        Some(Command::List { tier, suites }) => list(tier, suites),
        Some(Command::Diff {
            before,
            after,
            html,
            summary,
            known_failures,
            allow_skips,
        }) => compare::run(&CompareFiles {
            before: &before,
            after: &after,
            known_failures: known_failures.as_deref(),
            html,
            summary,
            options: DiffOptions { allow_skips },
        })
        .map(|d| {
            print!("{}", d.text());
            exit_code(d.has_regressions())
        }),
        Some(Command::History { reports, out }) => history(&reports, &out),
        Some(Command::Agents(args)) => agents(&args),
        Some(Command::Regrade(args)) => regrade::run(&args).map(|r| {
            print!("{}", r.text());
            if let Some(out) = &args.out {
                println!("afm-test regrade: {}", out.join("report.json").display());
            }
            exit_code(!r.changes.is_empty())
        }),
        Some(Command::Matrix {
            file,
            out,
            reuse,
            clients,
        }) => matrix::run(&file, &out, reuse, clients, Progress::new()).map(|m| {
            print!("{}", m.matrix.text());
            exit_code(m.columns.iter().any(|(_, r)| r.unexplained_failures() > 0))
        }),
    };
    result.unwrap_or_else(|e| {
        eprintln!("afm-test: error: {e:#}");
        ExitCode::from(2)
    })
}

/// The agents run against the server, their table printed; 1 when the
/// server broke one.
fn agents(args: &afm_harness::run::agents::AgentsArgs) -> Result<ExitCode> {
    let runtime = tokio::runtime::Runtime::new()?;
    let report = runtime.block_on(afm_harness::run::agents::run(args))?;
    print!("{}", afm_harness::run::agents::report_markdown(&report));
    println!(
        "afm-test agents: {}",
        args.out.join("report.json").display()
    );
    Ok(exit_code(report.any_broken()))
}

/// The history of `paths`' reports written into `out` and told; 0.
fn history(paths: &[PathBuf], out: &Path) -> Result<ExitCode> {
    let started = std::time::Instant::now();
    let h = afm_harness::report::history::History::from_paths(paths)?;
    h.write(out)?;
    print!("{}", h.text());
    println!(
        "afm-test history: {} in {:.1} s",
        out.join("history.html").display(),
        started.elapsed().as_secs_f64()
    );
    Ok(ExitCode::SUCCESS)
}

/// 1 when something failed that nothing explains, else 0.
fn exit_code(failed: bool) -> ExitCode {
    if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

fn list(tier: Tier, suites: Option<PathBuf>) -> Result<ExitCode> {
    print!("{}", suite::listing(&suite::load(suites.as_deref())?, tier));
    Ok(ExitCode::SUCCESS)
}

/// One conformance run: its failures and a summary line printed.
fn run(args: &ConformanceArgs) -> Result<ExitCode> {
    let report = conformance::run(args, Progress::new())?;
    print!("{}", report.text(&args.out.join("report.json")));
    Ok(exit_code(report.unexplained_failures() > 0))
}
