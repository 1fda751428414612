//! A conformance run: the suites' selected cases against one target, the
//! target's capabilities probed first, and the report written (JSON,
//! HTML, JUnit, Markdown summary) and returned.

pub mod batch;
pub mod cases;
pub mod shutdown;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use clap::Args;

use super::Observer;
use crate::clients::Clients;
use crate::report::known_failures::KnownFailures;
use crate::report::{html, junit, summary};
use crate::server::flags::TargetArgs;
use tokio::signal::unix::{signal, Signal, SignalKind};

use crate::report::{write_text, CaseResult, Report, RunInfo};
use crate::run_info;
use crate::suite::profile::Profile;
use crate::suite::{self, Selection, Tier};
use cases::RunOptions;

/// One conformance run's settings (afm-test's flags).
#[derive(Args, Clone, Debug)]
pub struct ConformanceArgs {
    #[arg(long, default_value = Tier::DEFAULT.as_str())]
    pub tier: Tier,
    #[command(flatten)]
    pub target: TargetArgs,
    /// Only these sections (repeatable).
    #[arg(long = "section")]
    pub sections: Vec<String>,
    /// Only these case ids (repeatable).
    #[arg(long = "case")]
    pub cases: Vec<String>,
    /// Where report.json and report.html go.
    #[arg(long, default_value = "afm-test-report")]
    pub out: PathBuf,
    /// Also write the results as JUnit XML.
    #[arg(long)]
    pub junit: Option<PathBuf>,
    /// Also write a Markdown summary (for `$GITHUB_STEP_SUMMARY` or a
    /// pull-request comment).
    #[arg(long)]
    pub summary: Option<PathBuf>,
    /// Attributes failures to known issues (they do not fail the run).
    #[arg(long)]
    pub known_failures: Option<PathBuf>,
    /// Grade a case that leaves only the published schema's letter (in
    /// ways the official SDKs accept) a failure, not `spec`.
    #[arg(long)]
    pub strict: bool,
    /// Replay each exchange of every case that does not pass through the
    /// official clients (openai-python, anthropic-python) under this
    /// Python, and grade it by what they did: `degraded` where the client
    /// works and its user loses something, `spec` where it reads an
    /// off-schema reply rightly (`docs/grading.md`).
    #[arg(long, value_name = "PYTHON")]
    pub clients: Option<PathBuf>,
    /// Cases run at the same time.
    #[arg(long, default_value_t = 1)]
    pub concurrency: usize,
    /// The `seed` of requests that set none (nonces stay unique per run).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Suite folder (default: ./suites when there is one, else the suites
    /// built into this binary).
    #[arg(long)]
    pub suites: Option<PathBuf>,
    /// Treat a capability as present without probing (repeatable).
    #[arg(long = "assume")]
    pub assume: Vec<String>,
    /// Treat a capability as absent: its cases skip (repeatable;
    /// `NAME=REASON` records why).
    #[arg(long = "assume-absent")]
    pub assume_absent: Vec<String>,
    /// A target profile (TOML: `assume`, `[absent]` with reasons).
    #[arg(long)]
    pub profile: Option<PathBuf>,
    /// In-process engine: a chat template file replacing the model's.
    #[arg(long)]
    pub chat_template: Option<PathBuf>,
    /// In-process engine: batch-invariant decoding (the determinism cases
    /// hold only with it; `--deterministic false` measures the fast mode).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub deterministic: bool,
    /// Seconds the run may take (probes and cases); then it stops and writes
    /// the report of what ran, every case not finished marked an error
    /// ("not run"). SIGTERM and SIGINT (a CI job's timeout, Ctrl-C) do
    /// the same. 0: no limit.
    #[arg(long, default_value_t = 0)]
    pub run_timeout: u64,
    /// Run each case N times: the report keeps every attempt and the
    /// case's failure rate, and grades a case whose attempts disagree
    /// `flaky` (an attempt is one whole play of the case's scenario).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    pub repeat: u32,
    /// Run each case that failed N more times (after --repeat): a case
    /// that then passes is `flaky`, with its rate.
    #[arg(long, default_value_t = 0)]
    pub rerun_failures: u32,
}

impl ConformanceArgs {
    /// The settings of a run of `tier` against `target`, all else default.
    pub fn new(tier: Tier, target: TargetArgs, out: PathBuf) -> Self {
        ConformanceArgs {
            tier,
            target,
            sections: Vec::new(),
            cases: Vec::new(),
            out,
            junit: None,
            summary: None,
            known_failures: None,
            strict: false,
            clients: None,
            concurrency: 1,
            seed: None,
            suites: None,
            assume: Vec::new(),
            assume_absent: Vec::new(),
            profile: None,
            chat_template: None,
            deterministic: true,
            run_timeout: 0,
            repeat: 1,
            rerun_failures: 0,
        }
    }

    /// The in-process engine's afm-serve flags: every other setting is a
    /// flagless afm-serve's.
    fn engine_flags(&self) -> Vec<String> {
        let mut flags = Vec::new();
        if self.deterministic {
            flags.push("--deterministic".to_string());
        }
        if let Some(p) = &self.chat_template {
            flags.push("--chat-template".into());
            flags.push(p.display().to_string());
        }
        flags
    }
}

/// Runs the selected cases against the target and writes the report's
/// files into `args.out` (and `--junit`, `--summary`).
pub fn run(args: &ConformanceArgs, observer: Arc<dyn Observer>) -> Result<Report> {
    let started = Instant::now();
    let started_at = run_info::now();
    html::check_templates()?;
    let sections = suite::load(args.suites.as_deref())?;
    let known = KnownFailures::read_or_default(args.known_failures.as_deref())?;
    // Before any server starts: a Python without the clients is a flag error.
    let clients = args.clients.as_deref().map(Clients::start).transpose()?;
    let mut profile = match &args.profile {
        Some(p) => Profile::read(p)?,
        None => Profile::default(),
    }
    .with_flags(&args.assume, &args.assume_absent)?;
    let remote = args.target.remote();
    if remote && args.chat_template.is_some() {
        bail!("--chat-template is for the in-process engine; give the server its own");
    }
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("creating {}", args.out.display()))?;
    let seed = args.seed.unwrap_or_else(run_info::clock_seed);
    let selection = Selection {
        tier: args.tier,
        sections: args.sections.clone(),
        cases: args.cases.clone(),
    };
    let selected = selection.count(&sections);
    if selected == 0 {
        bail!("no case matches the tier, --section and --case given");
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let mut signals = {
        let _entered = runtime.enter();
        Signals::catch()
    };

    // A key, so the security cases check afm-serve's key handling too.
    let engine_key = format!("afm-test-{:x}", cases::run_nonce());
    let log = args.out.join("server.log");
    let target_args = args
        .target
        .with_request_timeout(args.tier.request_timeout_s());
    let opened =
        runtime.block_on(target_args.open(&args.engine_flags(), Some(engine_key), &log, false))?;
    if let Some(process) = &opened.server {
        observer.note(&format!(
            "started `{}` (log {})",
            process.command,
            log.display()
        ));
    }
    // A model that cannot promise batch invariance says why; the cases that
    // need it skip with that reason.
    if let Some(reason) = &opened.refused {
        observer.note(&format!("{reason}; running without --deterministic"));
        profile
            .absent
            .insert("batch_invariance".into(), reason.clone());
    }
    let mut target = opened
        .target
        .clone()
        .with_routes(&profile.routes)
        .skip_unanswered()
        .keeping_bytes();
    match &opened.server {
        Some(process) => target = target.owning(process.pid()),
        None => {
            profile
                .absent
                .entry("owned_process".into())
                .or_insert_with(|| {
                    "afm-test did not start this server (--server), so it does not stop it".into()
                });
        }
    }
    let requested_model = target.model().map(str::to_string);
    let nonce = cases::run_nonce();
    observer.note(&format!("{selected} cases against {}", target.describe()));
    // The time limit counts from here: probes and cases.
    let deadline = (args.run_timeout > 0)
        .then(|| tokio::time::Instant::now() + std::time::Duration::from_secs(args.run_timeout));
    let probe_nonce = format!("{nonce:x}");
    let probed = runtime.block_on(async {
        tokio::select! {
            c = profile.capabilities().probe(&target, &probe_nonce) => Ok(c),
            why = stopped(deadline, args.run_timeout, &mut signals) => Err(why),
        }
    });
    let (capabilities, stop) = match probed {
        Ok(c) => (c, None),
        Err(why) => (Default::default(), Some(why)),
    };
    observer.cases_planned(selected);
    let options = RunOptions {
        selection,
        concurrency: args.concurrency,
        seed,
        strict: args.strict,
        nonce,
        clients: clients.clone(),
        repeat: args.repeat as usize,
        rerun_failures: args.rerun_failures as usize,
    };
    let reporter = observer.clone();
    let done: Arc<std::sync::Mutex<Vec<CaseResult>>> = Arc::default();
    let finished = done.clone();
    let results = runtime.block_on(async {
        if let Some(why) = stop {
            observer.note(&format!("{why} while probing: writing the report"));
            return cases::with_not_run(&sections, &options.selection, Vec::new(), &why);
        }
        tokio::select! {
            results = cases::run(&target, &sections, &capabilities, &options, move |r| {
                finished.lock().expect("results").push(r.clone());
                reporter.case_done(r);
            }) => results,
            why = stopped(deadline, args.run_timeout, &mut signals) => {
                observer.note(&format!("{why}: writing the report of what ran"));
                let done = done.lock().expect("results").clone();
                cases::with_not_run(&sections, &options.selection, done, &why)
            }
        }
    });
    // The engine or the server stops before the report is written.
    drop(target);
    drop(opened.server);

    let info = RunInfo {
        target: opened.label,
        model: capabilities
            .served_model
            .clone()
            .or_else(|| requested_model.clone())
            .unwrap_or_else(|| "the server's default".into()),
        requested_model,
        server_flags: opened.flags,
        engine_version: run_info::engine_version(remote),
        git_commit: run_info::git_commit(),
        host: run_info::host(),
        started: started_at,
        wall_seconds: started.elapsed().as_secs_f64(),
        tier: Some(args.tier),
        seed,
        capabilities,
        reply_limits: Some(target_args.reply_limits()),
        clients: clients.map(|c| c.versions.clone()),
    };
    let mut report = Report::new(info, results);
    known.annotate(&mut report);
    write(&report, args)?;
    Ok(report)
}

/// Resolves when the run must stop: at the `deadline` (`--run-timeout
/// timeout`), or at SIGTERM or SIGINT. Says which.
async fn stopped(
    deadline: Option<tokio::time::Instant>,
    timeout: u64,
    signals: &mut Signals,
) -> String {
    let limit = async {
        match deadline {
            None => std::future::pending().await,
            Some(at) => tokio::time::sleep_until(at).await,
        }
    };
    async fn arrives(s: &mut Option<Signal>) {
        match s {
            Some(s) => {
                s.recv().await;
            }
            None => std::future::pending().await,
        }
    }
    tokio::select! {
        _ = limit => format!("--run-timeout {timeout} s reached"),
        _ = arrives(&mut signals.term) => "stopped by SIGTERM".into(),
        _ = arrives(&mut signals.int) => "stopped by SIGINT".into(),
    }
}

/// SIGTERM and SIGINT, caught from the start of the run (from then on
/// they no longer kill the process: the run stops and reports).
struct Signals {
    term: Option<Signal>,
    int: Option<Signal>,
}

impl Signals {
    /// Needs the runtime entered.
    fn catch() -> Self {
        Signals {
            term: signal(SignalKind::terminate()).ok(),
            int: signal(SignalKind::interrupt()).ok(),
        }
    }
}

/// The report's files: report.json and report.html in `out`, and the
/// JUnit and Markdown files where asked.
fn write(report: &Report, args: &ConformanceArgs) -> Result<()> {
    report.write(&args.out.join("report.json"))?;
    write_text(&args.out.join("report.html"), &html::render_report(report)?)?;
    if let Some(p) = &args.junit {
        write_text(p, &junit::render(report))?;
    }
    if let Some(p) = &args.summary {
        write_text(p, &summary::of_report(report))?;
    }
    Ok(())
}
