//! `afm-test matrix FILE`: several targets (servers, models, flag sets)
//! run one after another, and one report with a column per target, so a
//! case that passes on one server and fails on another shows in one row.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;
use std::path::Path;

use anyhow::Result;
use serde::{Deserialize, Serialize};

use crate::protocol::endpoint::{Endpoint, MODELS_PATH};
use crate::report::{write_json, CaseResult, Report, Status, Summary};
use crate::suite::Tier;

/// A server listed with the reason it has no column.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Unavailable {
    pub name: String,
    #[serde(default)]
    pub version: Option<String>,
    pub why: String,
}

/// The API a request path belongs to: the dialect that reads it, and
/// within OpenAI's which endpoint.
fn protocol(path: &str) -> Option<String> {
    let p = path.split('?').next().unwrap_or(path);
    if p == MODELS_PATH {
        return Some("models".into());
    }
    Endpoint::under(p).map(Endpoint::name)
}

/// A cell's evidence: its failed checks, then what each request got.
fn evidence(c: &CaseResult) -> Vec<String> {
    const CUT: usize = 400;
    let cut = |s: String| {
        if s.chars().count() > CUT {
            format!("{}…", s.chars().take(CUT).collect::<String>())
        } else {
            s
        }
    };
    let mut out: Vec<String> = c
        .failures
        .iter()
        .map(|f| {
            // The client's own words first: they decide the grade.
            let client = f
                .client
                .as_ref()
                .map(|c| format!("{c}; "))
                .unwrap_or_default();
            cut(format!(
                "{} ({}): {client}expected {}; got {}",
                f.check,
                f.grade.as_str(),
                f.expected,
                f.actual
            ))
        })
        .collect();
    if let Some(r) = &c.reason {
        out.push(cut(r.clone()));
    }
    for s in &c.steps {
        let mut line = format!(
            "{} {}{} -> {}",
            if s.request.is_null() { "GET" } else { "POST" },
            s.path,
            if s.streamed { " (stream)" } else { "" },
            s.status
        );
        if let Some(e) = &s.transport_error {
            line.push_str(&format!(": {e}"));
        } else if s.status >= 400 {
            if let Some(b) = &s.body {
                line.push_str(&format!(": {b}"));
            }
        }
        out.push(cut(line));
    }
    out
}

/// One column: a target and how its run went.
#[derive(Debug, Clone, Serialize)]
pub struct Column {
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// `name@version` (the name alone without a version): the column's
    /// heading and its report's folder, so each version keeps its own.
    pub label: String,
    pub target: String,
    pub model: String,
    pub flags: Vec<String>,
    pub summary: Summary,
    pub wall_seconds: f64,
    /// Distinct causes (known issues) behind the column's attributed
    /// failures: a server bug that fails five cases is one cause.
    pub causes: usize,
    /// Failures (not errors) a known issue explains: what the page's
    /// "fail (attributed)" counts, out of the summary's `fail`.
    #[serde(default)]
    pub attributed: usize,
    /// Failures (and errors) no known issue explains.
    pub unattributed: usize,
    /// When the column's run started (RFC 3339), and its tier.
    #[serde(default)]
    pub started: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tier: Option<Tier>,
    /// The official clients that graded it (`--clients`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clients: Option<String>,
}

/// `name@version`, or the name alone.
pub fn label(name: &str, version: Option<&str>) -> String {
    match version {
        Some(v) => format!("{name}@{v}"),
        None => name.to_string(),
    }
}

impl Column {
    /// What the column would fail before grading told deviations apart:
    /// every deviation was a failure.
    pub fn failed_ungraded(&self) -> usize {
        let s = &self.summary;
        s.fail + s.degraded + s.spec + s.lenient
    }
}

/// One row: a case and its status on each target (None: not run there).
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    pub id: String,
    pub name: String,
    pub section: String,
    /// The seeds (bug reports) the case reproduces.
    pub seeds: Vec<String>,
    /// The APIs its requests reach (chat, completions, messages,
    /// responses, models), from the paths any server was sent.
    pub protocols: Vec<String>,
    pub cells: Vec<Option<Cell>>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Cell {
    pub status: Status,
    /// Why it skipped, errored, or what failed (first failure).
    pub note: Option<String>,
    pub known: bool,
    /// The known issue its failure is attributed to.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub issue: Option<String>,
    /// That issue's cause alone (shared by the failures it explains).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cause: Option<String>,
    /// What the server did: each failed check, then each request's path,
    /// status and (for errors) body, cut short.
    pub evidence: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Matrix {
    pub format: String,
    /// What the page says first: when, which tier and models, by what.
    pub about: About,
    pub columns: Vec<Column>,
    pub rows: Vec<Row>,
    pub unavailable: Vec<Unavailable>,
}

/// The method at the top of a page.
#[derive(Debug, Clone, Serialize)]
pub struct About {
    /// The day the newest column ran (YYYY-MM-DD).
    pub newest_run: String,
    pub tiers: Vec<String>,
    pub models: Vec<String>,
    /// The clients that graded the columns; none: the checks' rules.
    pub clients: Vec<String>,
    /// The afm-test that made the page.
    pub made_by: String,
}

impl About {
    pub fn of(columns: &[Column]) -> About {
        let distinct = |it: &mut dyn Iterator<Item = String>| -> Vec<String> {
            it.collect::<BTreeSet<String>>().into_iter().collect()
        };
        About {
            newest_run: columns
                .iter()
                .map(|c| c.started.chars().take(10).collect::<String>())
                .max()
                .unwrap_or_default(),
            tiers: distinct(
                &mut columns
                    .iter()
                    .filter_map(|c| c.tier.map(|t| t.as_str().to_string())),
            ),
            models: distinct(&mut columns.iter().map(|c| c.model.clone())),
            clients: distinct(&mut columns.iter().filter_map(|c| c.clients.clone())),
            made_by: format!("afm-test {}", env!("CARGO_PKG_VERSION")),
        }
    }
}

impl Matrix {
    pub fn new(runs: &[(String, Report)]) -> Matrix {
        struct Meta {
            name: String,
            section: String,
            seeds: Vec<String>,
            protocols: BTreeSet<String>,
        }
        let mut order: Vec<String> = Vec::new();
        let mut meta: BTreeMap<String, Meta> = BTreeMap::new();
        let mut cells: BTreeMap<String, Vec<Option<Cell>>> = BTreeMap::new();
        for (k, (_, report)) in runs.iter().enumerate() {
            for c in &report.cases {
                let row = cells.entry(c.id.clone()).or_insert_with(|| {
                    order.push(c.id.clone());
                    vec![None; runs.len()]
                });
                let m = meta.entry(c.id.clone()).or_insert_with(|| Meta {
                    name: c.name.clone(),
                    section: c.section.clone(),
                    seeds: c.seeds.clone(),
                    protocols: BTreeSet::new(),
                });
                m.protocols
                    .extend(c.steps.iter().filter_map(|s| protocol(&s.path)));
                // The first failure that breaks clients says most.
                let note = c.reason.clone().or_else(|| {
                    c.failures
                        .iter()
                        .find(|f| f.grade.breaks())
                        .or(c.failures.first())
                        .map(|f| format!("{}: expected {}; got {}", f.check, f.expected, f.actual))
                });
                row[k] = Some(Cell {
                    status: c.status,
                    note,
                    known: c.known_issue.is_some(),
                    issue: c.known_issue.clone(),
                    cause: c.known_cause.clone().or_else(|| c.known_issue.clone()),
                    evidence: evidence(c),
                });
            }
        }
        let columns: Vec<Column> = runs
            .iter()
            .map(|(name, r)| Column {
                name: name.clone(),
                version: None,
                label: name.clone(),
                target: r.run.target.clone(),
                model: r.run.model.clone(),
                flags: r.run.server_flags.clone(),
                summary: r.summary,
                wall_seconds: r.run.wall_seconds,
                causes: r
                    .cases
                    .iter()
                    .filter(|c| c.status.failed())
                    .filter_map(|c| c.known_cause.as_deref().or(c.known_issue.as_deref()))
                    .collect::<BTreeSet<_>>()
                    .len(),
                attributed: r
                    .cases
                    .iter()
                    .filter(|c| c.status == Status::Fail && c.known_issue.is_some())
                    .count(),
                unattributed: r
                    .cases
                    .iter()
                    .filter(|c| c.status.failed() && c.known_issue.is_none())
                    .count(),
                started: r.run.started.clone(),
                tier: r.run.tier,
                clients: r.run.clients.clone(),
            })
            .collect();
        Matrix {
            format: "afm-test-matrix/2".into(),
            about: About::of(&columns),
            columns,
            rows: order
                .into_iter()
                .map(|id| {
                    let m = meta.remove(&id).expect("every row has its case");
                    let mut protocols: Vec<String> = m.protocols.into_iter().collect();
                    if protocols.is_empty() {
                        // Run nowhere (skipped on every server): its section
                        // names the API where it is one.
                        protocols.push(
                            match m.section.as_str() {
                                "messages" | "responses" => m.section.as_str(),
                                _ => "chat",
                            }
                            .to_string(),
                        );
                    }
                    Row {
                        cells: cells.remove(&id).unwrap_or_default(),
                        id,
                        name: m.name,
                        section: m.section,
                        seeds: m.seeds,
                        protocols,
                    }
                })
                .collect(),
            unavailable: Vec::new(),
        }
    }

    pub fn write(&self, dir: &Path) -> Result<()> {
        write_json(&dir.join("matrix.json"), self)
    }

    /// A plain table: one line per case, a status per target.
    pub fn text(&self) -> String {
        let mut out = String::new();
        let _ = write!(out, "{:<44}", "case");
        for c in &self.columns {
            let _ = write!(out, " {:<14}", c.label);
        }
        out.push('\n');
        for r in &self.rows {
            let _ = write!(out, "{:<44}", r.id);
            for cell in &r.cells {
                let s = cell.as_ref().map_or("-".to_string(), |c| {
                    format!(
                        "{}{}",
                        c.status.as_str(),
                        if c.known { " (attributed)" } else { "" }
                    )
                });
                let _ = write!(out, " {s:<14}");
            }
            out.push('\n');
        }
        for c in &self.columns {
            let s = c.summary;
            let _ = writeln!(
                out,
                "{}: {} passed, {} failed ({} attributed; {} causes behind {} failures and errors), {} degraded, {} spec, {} lenient, {} errors, {} skipped in {:.0} s",
                c.label, s.pass, s.fail, c.attributed, c.causes, s.known, s.degraded, s.spec, s.lenient, s.error, s.skip, c.wall_seconds
            );
        }
        for u in &self.unavailable {
            let _ = writeln!(out, "{}: not runnable here ({})", u.name, u.why);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::protocol;

    #[test]
    fn a_request_path_names_its_api() {
        let of = |p: &str| protocol(p);
        assert_eq!(of("/v1/chat/completions").as_deref(), Some("chat"));
        assert_eq!(of("/v1/completions").as_deref(), Some("completions"));
        assert_eq!(of("/v1/messages/count_tokens").as_deref(), Some("messages"));
        assert_eq!(of("/v1/responses").as_deref(), Some("responses"));
        assert_eq!(of("/v1/models?limit=1").as_deref(), Some("models"));
        assert_eq!(of("/health"), None);
    }
}
