//! `afm-bench`: throughput and latency of the in-process engine or any
//! OpenAI-compatible server under load, per concurrency level, with
//! scenarios that toggle one thing (prefix cache, grammar, deterministic
//! mode); `afm-bench compare A B` sets two runs side by side. The run
//! lives in the library (`afm_harness::run::bench`); this parses flags,
//! prints and exits.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use afm_harness::bench::results::compare;
use afm_harness::bench::results::BenchReport;
use afm_harness::run::bench::{self, args::BenchArgs};
use afm_harness::run::Observer;
use anyhow::Result;
use clap::{Parser, Subcommand};

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
    run: BenchArgs,
}

#[derive(Subcommand)]
enum Command {
    /// Measure (the default).
    Run(Box<BenchArgs>),
    /// Serve a mock model with exact, recorded timing and optional faults
    /// (`GET /mock/record`).
    Mock(Box<afm_harness::mock::MockArgs>),
    /// Several clients' runs (each with --save-requests, the same levels,
    /// a shared --start-at) as one report: every level computed again
    /// over all their requests.
    Merge {
        /// The runs' folders (bench.json and requests.jsonl in each).
        #[arg(required = true)]
        runs: Vec<PathBuf>,
        /// Where the merged bench.json and bench.html go.
        #[arg(long, default_value = "afm-bench-merged")]
        out: PathBuf,
    },
    /// Hostile clients against a server (slowloris, idle connections,
    /// huge headers and bodies, deep JSON, a KV hog, a burst), each beside
    /// an honest probe's latency; exit 1 if the server did not hold.
    Attack(Box<afm_harness::hostile::AttackArgs>),
    /// Mixed traffic over the four protocols for a long time, judged on
    /// 5xx, memory, descriptors and p99 drift; exit 1 if it fails.
    Soak(Box<afm_harness::soak::SoakArgs>),
    /// Two runs side by side: each metric of A and B and the ratio B/A.
    Compare {
        /// A run: its bench.json or the folder holding it.
        a: PathBuf,
        /// B run, likewise.
        b: PathBuf,
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
        Some(Command::Compare { a, b }) => compare_runs(&a, &b),
        Some(Command::Mock(args)) => serve_mock(*args),
        Some(Command::Merge { runs, out }) => merge_runs(&runs, &out),
        Some(Command::Attack(args)) => return attack(&args),
        Some(Command::Soak(args)) => return soak(&args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("afm-bench: error: {e:#}");
            ExitCode::from(2)
        }
    }
}

/// A run's bench.json, given itself or its folder.
fn read_run(p: &Path) -> Result<BenchReport> {
    if p.is_dir() {
        BenchReport::read(&p.join("bench.json"))
    } else {
        BenchReport::read(p)
    }
}

fn compare_runs(a: &Path, b: &Path) -> Result<()> {
    print!("{}", compare::text(&read_run(a)?, &read_run(b)?));
    Ok(())
}

fn merge_runs(runs: &[PathBuf], out: &Path) -> Result<()> {
    let report = afm_harness::bench::results::merge::merge(runs)?;
    std::fs::create_dir_all(out)?;
    report.write(&out.join("bench.json"))?;
    afm_harness::report::write_text(
        &out.join("bench.html"),
        &afm_harness::bench::results::page::render(&report)?,
    )?;
    print!("{}", report.table());
    println!(
        "afm-bench: merged {} runs into {}",
        runs.len(),
        out.display()
    );
    Ok(())
}

fn serve_mock(args: afm_harness::mock::MockArgs) -> Result<()> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?
        .block_on(afm_harness::mock::serve(args))
}

fn attack(args: &afm_harness::hostile::AttackArgs) -> ExitCode {
    let job = afm_harness::hostile::run(args, |l| eprintln!("afm-bench attack: {l}"));
    judged(job, |report| {
        print!("{}", report.table());
        println!(
            "afm-bench attack: {}",
            args.out.join("attack.json").display()
        );
        report.held()
    })
}

fn soak(args: &afm_harness::soak::SoakArgs) -> ExitCode {
    let job = afm_harness::soak::run(args, |l| eprintln!("afm-bench soak: {l}"));
    judged(job, |report| {
        print!("{}", report.table());
        println!("afm-bench soak: {}", args.out.join("soak.json").display());
        report.verdict.passed()
    })
}

/// Runs a judged job (attack, soak) on a runtime of two workers: `show`
/// prints its report and says whether it passed. Exit 0 if it did, 1 if
/// not, 2 if the job could not run.
fn judged<R>(
    job: impl std::future::Future<Output = Result<R>>,
    show: impl FnOnce(&R) -> bool,
) -> ExitCode {
    let report = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(anyhow::Error::from)
        .and_then(|rt| rt.block_on(job));
    match report {
        Ok(report) if show(&report) => ExitCode::SUCCESS,
        Ok(_) => ExitCode::from(1),
        Err(e) => {
            eprintln!("afm-bench: error: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn run(args: &BenchArgs) -> Result<()> {
    let report = bench::run(args, Arc::new(Console))?;
    print!("{}", report.table());
    println!(
        "afm-bench: {:.1} s; {} and {}",
        report.run.wall_seconds,
        args.out.join("bench.json").display(),
        args.out.join("bench.html").display()
    );
    Ok(())
}

/// The run's news on stderr, as it goes.
struct Console;

impl Observer for Console {
    fn note(&self, line: &str) {
        eprintln!("afm-bench: {line}");
    }
}
