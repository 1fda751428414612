//! `afm-test history REPORTS...`: many reports of one target read
//! together, in the order they ran, as a case x run grid: per case its
//! state now, the run where its current failing streak began, how often
//! it flipped between passing and failing, its failure rate over the runs
//! that ran it, and whether it ever passed. Nightly CI leaves one report
//! per commit; this answers "since when?" and "is it flaky?" from them.
//!
//! Reports are read as they are, old formats included: only each run's
//! time, commit and versions and each case's id, name, section and status
//! are read (serde skips the rest, replies included), so a thousand
//! reports read in seconds.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use super::Status;

/// What history reads of a report.
#[derive(Deserialize)]
struct Light {
    run: LightRun,
    cases: Vec<LightCase>,
}

#[derive(Deserialize)]
struct LightRun {
    #[serde(default)]
    started: String,
    #[serde(default)]
    git_commit: Option<String>,
    #[serde(default)]
    engine_version: String,
    #[serde(default)]
    model: String,
    #[serde(default)]
    target: String,
}

#[derive(Deserialize)]
struct LightCase {
    id: String,
    #[serde(default)]
    name: String,
    #[serde(default)]
    section: String,
    status: Status,
}

/// One run: a column of the grid.
#[derive(Debug, Clone, Serialize)]
pub struct Run {
    /// How the grid names it: its commit, with its start where several
    /// runs share the commit, else its start.
    pub label: String,
    pub file: String,
    pub started: String,
    pub commit: Option<String>,
    /// The server's or engine's version as the report names it.
    pub version: String,
    pub model: String,
    pub target: String,
}

/// One case: a row of the grid.
#[derive(Debug, Clone, Serialize)]
pub struct CaseHistory {
    pub id: String,
    pub name: String,
    pub section: String,
    /// Its status in each run (None: not in that run).
    pub cells: Vec<Option<Status>>,
    /// Its status in the last run that ran it.
    pub current: Option<Status>,
    /// The run (index) where its current failing streak began, when it
    /// fails now.
    pub failing_since: Option<usize>,
    /// Changes between failing and not failing from one run that ran it
    /// to the next.
    pub flips: usize,
    /// Failed runs over runs that ran it (skips not counted).
    pub failure_rate: f64,
    /// It failed in every run that ran it.
    pub never_passed: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct History {
    pub runs: Vec<Run>,
    pub cases: Vec<CaseHistory>,
}

/// The report files under `paths`: files as given; folders searched for
/// `report.json` and `*.report.json[.gz]` (a matrix's folder gives its
/// columns' reports).
pub fn report_files(paths: &[PathBuf]) -> Result<Vec<PathBuf>> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
        let mut entries: Vec<_> = std::fs::read_dir(dir)
            .with_context(|| format!("reading {}", dir.display()))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .collect();
        entries.sort();
        for p in entries {
            let name = p.file_name().and_then(|n| n.to_str()).unwrap_or_default();
            if p.is_dir() {
                walk(&p, out)?;
            } else if name == "report.json"
                || name.ends_with(".report.json")
                || name.ends_with(".report.json.gz")
            {
                out.push(p);
            }
        }
        Ok(())
    }
    let mut out = Vec::new();
    for p in paths {
        if p.is_dir() {
            walk(p, &mut out)?;
        } else {
            out.push(p.clone());
        }
    }
    anyhow::ensure!(!out.is_empty(), "no report found in {paths:?}");
    Ok(out)
}

fn read_light(path: &Path) -> Result<Light> {
    let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    let light = if path.extension().is_some_and(|e| e == "gz") {
        serde_json::from_reader(flate2::read::GzDecoder::new(&bytes[..]))
    } else {
        serde_json::from_slice(&bytes)
    };
    light.with_context(|| format!("{} is not an afm-test report", path.display()))
}

impl History {
    /// The reports under `paths` ([`report_files`]), read.
    pub fn from_paths(paths: &[PathBuf]) -> Result<History> {
        Self::read(&report_files(paths)?)
    }

    /// Reads `files` and orders their runs by start time (the report's
    /// run info; a commit alone carries no date).
    pub fn read(files: &[PathBuf]) -> Result<History> {
        let mut reports: Vec<(PathBuf, Light)> = files
            .iter()
            .map(|f| read_light(f).map(|l| (f.clone(), l)))
            .collect::<Result<_>>()?;
        reports.sort_by(|a, b| a.1.run.started.cmp(&b.1.run.started));
        Ok(Self::of(reports))
    }

    fn of(reports: Vec<(PathBuf, Light)>) -> History {
        let label = |l: &Light| {
            let started: String = l.run.started.chars().take(19).collect();
            let commit = l.run.git_commit.as_ref();
            let shared = reports
                .iter()
                .filter(|(_, o)| commit.is_some() && o.run.git_commit.as_ref() == commit)
                .count();
            match commit {
                Some(c) if shared > 1 => format!("{c} {started}"),
                Some(c) => c.clone(),
                None => started,
            }
        };
        let runs: Vec<Run> = reports
            .iter()
            .map(|(f, l)| Run {
                label: label(l),
                file: f.display().to_string(),
                started: l.run.started.clone(),
                commit: l.run.git_commit.clone(),
                version: l.run.engine_version.clone(),
                model: l.run.model.clone(),
                target: l.run.target.clone(),
            })
            .collect();
        // Cases in the order they first appear (the suites' order).
        let mut index: std::collections::HashMap<String, usize> = Default::default();
        let mut cases: Vec<CaseHistory> = Vec::new();
        let n = reports.len();
        for (k, (_, l)) in reports.iter().enumerate() {
            for c in &l.cases {
                let i = *index.entry(c.id.clone()).or_insert_with(|| {
                    cases.push(CaseHistory {
                        id: c.id.clone(),
                        name: c.name.clone(),
                        section: c.section.clone(),
                        cells: vec![None; n],
                        current: None,
                        failing_since: None,
                        flips: 0,
                        failure_rate: 0.0,
                        never_passed: false,
                    });
                    cases.len() - 1
                });
                cases[i].cells[k] = Some(c.status);
            }
        }
        for c in &mut cases {
            c.summarise();
        }
        History { runs, cases }
    }

    /// Cases failing in their last run.
    pub fn failing_now(&self) -> impl Iterator<Item = &CaseHistory> {
        self.cases
            .iter()
            .filter(|c| c.current.is_some_and(Status::failed))
    }

    /// Run `k`'s label.
    pub fn label(&self, k: usize) -> &str {
        &self.runs[k].label
    }
}

impl CaseHistory {
    fn summarise(&mut self) {
        // Runs that ran it (skips say nothing of failing or not).
        let ran: Vec<(usize, bool)> = self
            .cells
            .iter()
            .enumerate()
            .filter_map(|(k, s)| s.filter(|s| *s != Status::Skip).map(|s| (k, s.failed())))
            .collect();
        self.current = self.cells.iter().rev().find_map(|s| *s);
        self.flips = ran.windows(2).filter(|w| w[0].1 != w[1].1).count();
        let failed = ran.iter().filter(|(_, f)| *f).count();
        self.failure_rate = match ran.len() {
            0 => 0.0,
            n => failed as f64 / n as f64,
        };
        self.never_passed = !ran.is_empty() && failed == ran.len();
        if self.current.is_some_and(Status::failed) {
            let streak = ran.iter().rev().take_while(|(_, f)| *f).count();
            self.failing_since = ran.get(ran.len() - streak).map(|(k, _)| *k);
        }
    }
}

fn mark(s: Option<Status>) -> &'static str {
    match s {
        None => "·",
        Some(Status::Pass) => "✅",
        Some(Status::Fail) => "❌",
        Some(Status::Error) => "⚠️",
        Some(Status::Flaky) => "🎲",
        Some(Status::Skip) => "⏭",
        Some(Status::Spec) => "🟡",
        Some(Status::Degraded) => "🟠",
        Some(Status::Lenient) => "🔵",
    }
}

impl History {
    /// The account in a few lines.
    pub fn text(&self) -> String {
        let failing: Vec<&CaseHistory> = self.failing_now().collect();
        let flaky = self.cases.iter().filter(|c| c.flips >= 2).count();
        let never = self.cases.iter().filter(|c| c.never_passed).count();
        let mut out = format!(
            "afm-test history: {} runs ({} .. {}), {} cases: {} failing now, {} flipped twice or \
             more, {} never passed\n",
            self.runs.len(),
            self.runs.first().map(|r| r.started.as_str()).unwrap_or("-"),
            self.runs.last().map(|r| r.started.as_str()).unwrap_or("-"),
            self.cases.len(),
            failing.len(),
            flaky,
            never
        );
        for c in failing {
            let since = c.failing_since.map(|k| self.label(k)).unwrap_or_default();
            out.push_str(&format!(
                "  {:<40} failing since {since} ({} flips, failure rate {:.0}%)\n",
                c.id,
                c.flips,
                c.failure_rate * 100.0
            ));
        }
        out
    }

    /// The grid as Markdown: the cases that ever failed or flipped first
    /// (a passing row says nothing), then the counts.
    pub fn markdown(&self) -> String {
        let mut out = String::from("# afm-test history\n\n");
        out.push_str(&format!(
            "{} runs, {} cases. Each row: the case's grade in each run, oldest first \
             (✅ pass · ❌ fail · 🎲 flaky · ⚠️ error · ⏭ skip · 🟡 spec · 🟠 degraded · 🔵 \
             lenient · · not in that run).\n\n",
            self.runs.len(),
            self.cases.len()
        ));
        out.push_str("| case | now | failing since | flips | failure rate | runs |\n");
        out.push_str("|---|---|---|---:|---:|---|\n");
        for c in self
            .cases
            .iter()
            .filter(|c| c.flips > 0 || c.failure_rate > 0.0)
        {
            let since = c.failing_since.map(|k| self.label(k)).unwrap_or_default();
            let cells: String = c.cells.iter().map(|s| mark(*s)).collect();
            out.push_str(&format!(
                "| `{}` | {} | {} | {} | {:.0}% | {} |\n",
                c.id,
                mark(c.current),
                since,
                c.flips,
                c.failure_rate * 100.0,
                cells
            ));
        }
        let quiet = self
            .cases
            .iter()
            .filter(|c| c.flips == 0 && c.failure_rate == 0.0)
            .count();
        out.push_str(&format!("\n{quiet} cases never failed in these runs.\n\n"));
        out.push_str("| run | started | commit | version | model |\n|---:|---|---|---|---|\n");
        for (k, r) in self.runs.iter().enumerate() {
            out.push_str(&format!(
                "| {} | {} | {} | {} | {} |\n",
                k + 1,
                r.started,
                r.commit.as_deref().unwrap_or("-"),
                r.version,
                r.model
            ));
        }
        out
    }

    pub fn html(&self) -> Result<String> {
        let mut ctx = tera::Context::new();
        ctx.insert("history", self);
        let labels: Vec<&str> = self.runs.iter().map(|r| r.label.as_str()).collect();
        ctx.insert("labels", &labels);
        let since: Vec<&str> = self
            .cases
            .iter()
            .map(|c| c.failing_since.map_or("", |k| labels[k]))
            .collect();
        ctx.insert("since", &since);
        super::html::tera()?
            .render("history.html", &ctx)
            .context("rendering the history page")
    }

    /// history.json, history.md and history.html into `out`.
    pub fn write(&self, out: &Path) -> Result<()> {
        std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
        super::write_json(&out.join("history.json"), self)?;
        super::write_text(&out.join("history.md"), &self.markdown())?;
        super::write_text(&out.join("history.html"), &self.html()?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn light(started: &str, commit: &str, statuses: &[(&str, Status)]) -> (PathBuf, Light) {
        (
            PathBuf::from(format!("{commit}.json")),
            Light {
                run: LightRun {
                    started: started.into(),
                    git_commit: Some(commit.into()),
                    engine_version: "v".into(),
                    model: "m".into(),
                    target: "t".into(),
                },
                cases: statuses
                    .iter()
                    .map(|(id, s)| LightCase {
                        id: id.to_string(),
                        name: id.to_string(),
                        section: "s".into(),
                        status: *s,
                    })
                    .collect(),
            },
        )
    }

    #[test]
    fn the_first_failing_commit_is_placed_exactly_and_flips_counted() {
        use Status::*;
        // Ten runs: `a` fails from run 6 on (commit c6); `b` flips; `c`
        // never passes; `d` skips once between failures.
        let pattern = |k: usize| {
            vec![
                ("a", if k >= 6 { Fail } else { Pass }),
                ("b", if k.is_multiple_of(3) { Fail } else { Pass }),
                ("c", Fail),
                (
                    "d",
                    if k == 8 {
                        Skip
                    } else if k >= 7 {
                        Fail
                    } else {
                        Pass
                    },
                ),
            ]
        };
        let reports: Vec<_> = (0..10)
            .map(|k| {
                light(
                    &format!("2026-11-{:02}T00:00:00Z", k + 1),
                    &format!("c{k}"),
                    &pattern(k),
                )
            })
            .collect();
        let h = History::of(reports);
        let case = |id: &str| h.cases.iter().find(|c| c.id == id).unwrap();
        assert_eq!(h.label(case("a").failing_since.unwrap()), "c6");
        assert_eq!(case("a").flips, 1);
        assert!((case("a").failure_rate - 0.4).abs() < 1e-9);
        assert_eq!(case("b").current, Some(Fail));
        assert_eq!(h.label(case("b").failing_since.unwrap()), "c9");
        assert_eq!(case("b").flips, 6);
        assert!(case("c").never_passed);
        assert_eq!(h.label(case("c").failing_since.unwrap()), "c0");
        // A skip neither breaks nor starts a streak.
        assert_eq!(h.label(case("d").failing_since.unwrap()), "c7");
        assert_eq!(case("d").flips, 1);
        let md = h.markdown();
        assert!(
            md.contains("| `a` | ❌ | c6 | 1 | 40% | ✅✅✅✅✅✅❌❌❌❌ |"),
            "{md}"
        );
    }
}
