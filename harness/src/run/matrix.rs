//! `afm-test matrix FILE`: each target of the file run as its own
//! conformance run into its own folder, then one report with a column per
//! target (matrix.json, matrix.html, and matrix.md: the compatibility
//! page).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, Result};

use super::conformance::{self, ConformanceArgs};
use super::plan::MatrixFile;
use super::Observer;
use crate::report::known_failures::KnownFailures;
use crate::report::matrix::{About, Matrix};
use crate::report::{compatibility, html, write_text, Report};
use crate::server::flags::TargetArgs;
use crate::suite::Tier;

/// The matrix and each column's own report.
pub struct MatrixRun {
    pub matrix: Matrix,
    pub columns: Vec<(String, Report)>,
}

/// Runs every target of `file`, each into `out/NAME`, and writes the
/// combined report into `out`. With `reuse`, a target whose report is
/// already in `out/NAME` is not run again: its report is read back and its
/// failures attributed anew from the target's current known-failures file
/// (so a long matrix resumes, and an attribution edited after the run
/// shows without re-running a server for an hour). With `clients` (a
/// Python), every column run is graded by the official clients.
pub fn run(
    file: &Path,
    out: &Path,
    reuse: bool,
    clients: Option<PathBuf>,
    observer: Arc<dyn Observer>,
) -> Result<MatrixRun> {
    let plan = MatrixFile::read(file)?;
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    let mut columns = Vec::new();
    for t in &plan.targets {
        // A folder per name@version: an upgrade's run sits beside the last.
        let dir = out.join(t.label());
        if reuse && dir.join("report.json").is_file() {
            observer.note(&format!("matrix: {} (reusing its report)", t.label()));
            let mut report = Report::read(&dir.join("report.json"))?;
            KnownFailures::read_or_default(t.known_failures.as_deref())?.annotate(&mut report);
            report.write(&dir.join("report.json"))?;
            write_text(&dir.join("report.html"), &html::render_report(&report)?)?;
            columns.push((t.name.clone(), report));
            continue;
        }
        observer.note(&format!("matrix: {}", t.label()));
        let target = TargetArgs {
            model: t.model.clone(),
            url: t.url.clone(),
            server: t.server.clone(),
            api_key: t.api_key.clone(),
            ..TargetArgs::default()
        };
        let tier = t.tier.or(plan.tier).unwrap_or(Tier::DEFAULT);
        let args = ConformanceArgs {
            sections: t.sections.clone().unwrap_or_else(|| plan.sections.clone()),
            known_failures: t.known_failures.clone(),
            seed: plan.seed,
            suites: plan.suites.clone(),
            profile: t.profile.clone(),
            chat_template: t.chat_template.clone(),
            deterministic: t.deterministic.unwrap_or(true),
            repeat: t.repeat.or(plan.repeat).unwrap_or(1).max(1),
            clients: clients.clone(),
            ..ConformanceArgs::new(tier, target, dir)
        };
        let report = conformance::run(&args, observer.clone())?;
        columns.push((t.name.clone(), report));
    }
    let mut matrix = Matrix::new(&columns);
    for (column, t) in matrix.columns.iter_mut().zip(&plan.targets) {
        column.version = t.version.clone();
        column.label = t.label();
        if let Some(name) = &plan.model_name {
            column.model = name.clone();
        }
    }
    matrix.about = About::of(&matrix.columns);
    matrix.unavailable = plan.unavailable.clone();
    matrix.write(out)?;
    write_text(&out.join("matrix.html"), &html::render_matrix(&matrix)?)?;
    write_text(&out.join("matrix.md"), &compatibility::markdown(&matrix))?;
    Ok(MatrixRun { matrix, columns })
}
