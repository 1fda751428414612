//! `afm-test regrade REPORT`: every case of a report graded again from
//! the bytes it stored, with no server. Each step keeps its reply as it
//! came (`report::RawReply`: headers, bytes, when each piece arrived); the
//! same reader reads them again, the case's checks (from the suites, by
//! id) run over the same plays, and with `--clients` the official clients
//! replay each step as in the run. So anyone who doubts a published cell
//! reproduces it, or re-grades a column after the checks or the clients
//! changed, from the report alone.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use anyhow::{bail, Result};
use clap::Args;

use crate::clients::Clients;
use crate::report::known_failures::KnownFailures;
use crate::report::{html, CaseResult, Report, Status};
use crate::suite::{self, Case};

use super::conformance::cases::{self, Play};

/// `afm-test regrade`'s flags.
#[derive(Args, Clone, Debug)]
pub struct RegradeArgs {
    /// The report (report.json, or a published NAME.report.json.gz).
    pub report: PathBuf,
    /// Replay each step of a case that does not pass through the official
    /// clients under this Python (needed for a report graded so).
    #[arg(long, value_name = "PYTHON")]
    pub clients: Option<PathBuf>,
    /// Suite folder (default: ./suites when there is one, else the suites
    /// built into this binary).
    #[arg(long)]
    pub suites: Option<PathBuf>,
    /// Attributes the failures anew.
    #[arg(long)]
    pub known_failures: Option<PathBuf>,
    /// As `run --strict`.
    #[arg(long)]
    pub strict: bool,
    /// Where the regraded report.json and report.html go (none: only the
    /// account is printed).
    #[arg(long)]
    pub out: Option<PathBuf>,
}

impl RegradeArgs {
    /// `report` graded again with every other flag at its default.
    pub fn new(report: &Path) -> Self {
        RegradeArgs {
            report: report.to_path_buf(),
            clients: None,
            suites: None,
            known_failures: None,
            strict: false,
            out: None,
        }
    }
}

/// One case whose grade came out otherwise.
#[derive(Debug, Clone)]
pub struct Change {
    pub id: String,
    pub before: String,
    pub after: String,
}

/// The report graded again, and how it compares.
pub struct Regraded {
    pub report: Report,
    /// Cases graded again from their bytes.
    pub regraded: usize,
    /// Cases kept as they were, each with why (skipped or not run, no
    /// bytes stored, no longer in the suites).
    pub kept: Vec<(String, &'static str)>,
    pub changes: Vec<Change>,
}

/// A case's grade as one line: its status and each failure's check and
/// grade.
fn grade_line(c: &CaseResult) -> String {
    let mut line = c.status.as_str().to_string();
    for f in &c.failures {
        line.push_str(&format!(" {}:{}", f.check, f.grade.as_str()));
    }
    line
}

pub fn run(args: &RegradeArgs) -> Result<Regraded> {
    let old = Report::read(&args.report)?;
    let sections = suite::load(args.suites.as_deref())?;
    let known = KnownFailures::read_or_default(args.known_failures.as_deref())?;
    if let (Some(versions), None) = (&old.run.clients, &args.clients) {
        bail!(
            "{} was graded by the official clients ({versions}): pass --clients PYTHON to \
             grade it again as it was graded",
            args.report.display()
        );
    }
    let clients = args.clients.as_deref().map(Clients::start).transpose()?;
    let by_id: HashMap<&str, (&str, &Case)> = sections
        .iter()
        .flat_map(|s| {
            s.cases
                .iter()
                .map(move |c| (c.id.as_str(), (s.section.as_str(), c)))
        })
        .collect();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let mut kept = Vec::new();
    let mut changes = Vec::new();
    let mut regraded = 0;
    let mut results = Vec::new();
    for c in &old.cases {
        let why_kept = match by_id.get(c.id.as_str()) {
            _ if c.status == Status::Skip => Err("skipped"),
            _ if c.steps.is_empty() => Err("not run"),
            None => Err("no longer in the suites"),
            Some(&(section, case)) => plays(c, case)
                .map(|p| (section, case, p))
                .ok_or("no bytes stored"),
        };
        let (section, case, plays) = match why_kept {
            Ok(found) => found,
            Err(why) => {
                kept.push((c.id.clone(), why));
                results.push(c.clone());
                continue;
            }
        };
        let mut r = runtime.block_on(cases::grade(section, case, plays, clients.clone()));
        if args.strict && r.status.graded_apart() {
            r.status = Status::Fail;
        }
        r.millis = c.millis;
        // The run's own notes (what the probes saw) stay with its grade.
        if r.status == c.status {
            r.reason = c.reason.clone();
        }
        regraded += 1;
        let (before, after) = (grade_line(c), grade_line(&r));
        if before != after {
            changes.push(Change {
                id: c.id.clone(),
                before,
                after,
            });
        }
        results.push(r);
    }
    let mut run = old.run.clone();
    if let Some(c) = &clients {
        run.clients = Some(c.versions.clone());
    }
    let mut report = Report::new(run, results);
    known.annotate(&mut report);
    if let Some(out) = &args.out {
        write(&report, out)?;
    }
    Ok(Regraded {
        report,
        regraded,
        kept,
        changes,
    })
}

/// The plays of `case` as stored in `c`'s steps (None: a step kept no
/// bytes, as in reports written before they were stored).
fn plays(c: &CaseResult, case: &Case) -> Option<Vec<Play>> {
    let modes = cases::modes(case);
    let mut plays: Vec<Play> = Vec::new();
    for step in &c.steps {
        let ex = step.exchange()?;
        if plays.len() <= step.play {
            let stream = *modes.get(step.play)?;
            plays.push(Play {
                stream,
                exchanges: Vec::new(),
                subjects: Vec::new(),
            });
        }
        let p = plays.get_mut(step.play)?;
        if step.subject {
            p.subjects.push(p.exchanges.len());
        }
        p.exchanges.push(ex);
    }
    Some(plays)
}

fn write(report: &Report, out: &Path) -> Result<()> {
    std::fs::create_dir_all(out)?;
    report.write(&out.join("report.json"))?;
    crate::report::write_text(&out.join("report.html"), &html::render_report(report)?)
}

impl Regraded {
    /// The account: how many cases were graded again, which came out
    /// otherwise, and which were kept as they were.
    pub fn text(&self) -> String {
        use std::fmt::Write as _;
        let mut out = String::new();
        for c in &self.changes {
            let _ = writeln!(out, "CHANGED {}: {} -> {}", c.id, c.before, c.after);
        }
        let mut why: Vec<&str> = self.kept.iter().map(|(_, w)| *w).collect();
        why.sort();
        why.dedup();
        let kept: Vec<String> = why
            .iter()
            .map(|w| format!("{} {w}", self.kept.iter().filter(|(_, k)| k == w).count()))
            .collect();
        let _ = writeln!(
            out,
            "afm-test regrade: {} cases graded again from their stored bytes, {} the same, {} \
             changed; {} kept as they were{}",
            self.regraded,
            self.regraded - self.changes.len(),
            self.changes.len(),
            self.kept.len(),
            if kept.is_empty() {
                String::new()
            } else {
                format!(" ({})", kept.join(", "))
            }
        );
        out
    }
}
