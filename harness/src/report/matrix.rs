//! `afm-test matrix FILE`: several targets (servers, models, flag sets)
//! run one after another, and one report with a column per target, so a
//! case that passes on one server and fails on another shows in one row.
//!
//! ```toml
//! tier = "standard"                 # default for every target
//! sections = ["tools", "grammar"]   # optional
//! seed = 1                          # optional
//!
//! [[target]]
//! name = "afm-serve"                # the column and the report's folder
//! server = "afm-serve --model {model} --port {port} --enable-prefix-caching"
//! model = "smollm2"
//!
//! [[target]]
//! name = "peer"
//! url = "http://127.0.0.1:8080"     # a server already running
//! profile = "profiles/peer.toml"    # optional, as --profile
//! known_failures = "known.toml"     # optional
//!
//! [[target]]
//! name = "in-process"               # neither url nor server: the engine
//! model = "smollm2"
//! ```
//!
//! Paths in the file are relative to the file.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::path::{Path, PathBuf};

use anyhow::{bail, Result};
use serde::{Deserialize, Serialize};

use crate::report::{write_json, Report, Status, Summary};
use crate::suite::Tier;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MatrixFile {
    #[serde(default)]
    pub tier: Option<Tier>,
    #[serde(default)]
    pub sections: Vec<String>,
    #[serde(default)]
    pub seed: Option<u64>,
    #[serde(default)]
    pub suites: Option<PathBuf>,
    #[serde(rename = "target")]
    pub targets: Vec<MatrixTarget>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MatrixTarget {
    pub name: String,
    #[serde(default)]
    pub tier: Option<Tier>,
    #[serde(default)]
    pub url: Option<String>,
    #[serde(default)]
    pub server: Option<String>,
    #[serde(default)]
    pub model: Option<String>,
    #[serde(default)]
    pub api_key: Option<String>,
    #[serde(default)]
    pub profile: Option<PathBuf>,
    #[serde(default)]
    pub known_failures: Option<PathBuf>,
    #[serde(default)]
    pub chat_template: Option<PathBuf>,
    #[serde(default)]
    pub deterministic: Option<bool>,
}

impl MatrixFile {
    pub fn read(path: &Path) -> Result<MatrixFile> {
        let mut file: MatrixFile = crate::toml_input::read(path, "matrix")?;
        let dir = path.parent().unwrap_or(Path::new("."));
        let relative = |p: &mut Option<PathBuf>| {
            if let Some(p) = p {
                if p.is_relative() {
                    *p = dir.join(&*p);
                }
            }
        };
        relative(&mut file.suites);
        let mut names = std::collections::BTreeSet::new();
        for t in &mut file.targets {
            relative(&mut t.profile);
            relative(&mut t.known_failures);
            relative(&mut t.chat_template);
            if t.url.is_some() && t.server.is_some() {
                bail!(
                    "matrix {}: target '{}' has both url and server",
                    path.display(),
                    t.name
                );
            }
            let plain = !t.name.is_empty()
                && t.name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c));
            if !plain || !names.insert(t.name.clone()) {
                bail!(
                    "matrix {}: target name '{}' must be unique and made of letters, digits, - _ .",
                    path.display(),
                    t.name
                );
            }
        }
        if file.targets.is_empty() {
            bail!("matrix {}: no [[target]]", path.display());
        }
        Ok(file)
    }
}

/// One column: a target and how its run went.
#[derive(Debug, Clone, Serialize)]
pub struct Column {
    pub name: String,
    pub target: String,
    pub model: String,
    pub flags: Vec<String>,
    pub summary: Summary,
}

/// One row: a case and its status on each target (None: not run there).
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    pub id: String,
    pub name: String,
    pub section: String,
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
}

#[derive(Debug, Clone, Serialize)]
pub struct Matrix {
    pub format: String,
    pub columns: Vec<Column>,
    pub rows: Vec<Row>,
}

impl Matrix {
    pub fn new(runs: &[(String, Report)]) -> Matrix {
        let mut order: Vec<(String, String, String)> = Vec::new();
        let mut cells: BTreeMap<String, Vec<Option<Cell>>> = BTreeMap::new();
        for (k, (_, report)) in runs.iter().enumerate() {
            for c in &report.cases {
                let row = cells.entry(c.id.clone()).or_insert_with(|| {
                    order.push((c.id.clone(), c.name.clone(), c.section.clone()));
                    vec![None; runs.len()]
                });
                let note = c.reason.clone().or_else(|| {
                    c.failures
                        .first()
                        .map(|f| format!("{}: expected {}; got {}", f.check, f.expected, f.actual))
                });
                row[k] = Some(Cell {
                    status: c.status,
                    note,
                    known: c.known_issue.is_some(),
                    issue: c.known_issue.clone(),
                });
            }
        }
        Matrix {
            format: "afm-test-matrix/1".into(),
            columns: runs
                .iter()
                .map(|(name, r)| Column {
                    name: name.clone(),
                    target: r.run.target.clone(),
                    model: r.run.model.clone(),
                    flags: r.run.server_flags.clone(),
                    summary: r.summary,
                })
                .collect(),
            rows: order
                .into_iter()
                .map(|(id, name, section)| Row {
                    cells: cells.remove(&id).unwrap_or_default(),
                    id,
                    name,
                    section,
                })
                .collect(),
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
            let _ = write!(out, " {:<14}", c.name);
        }
        out.push('\n');
        for r in &self.rows {
            let _ = write!(out, "{:<44}", r.id);
            for cell in &r.cells {
                let s = cell.as_ref().map_or("-".to_string(), |c| {
                    format!(
                        "{}{}",
                        c.status.as_str(),
                        if c.known { " (known)" } else { "" }
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
                "{}: {} passed, {} failed ({} known), {} spec, {} errors, {} skipped",
                c.name, s.pass, s.fail, s.known, s.spec, s.error, s.skip
            );
        }
        out
    }
}
