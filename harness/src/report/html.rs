//! Self-contained HTML pages (tera templates under `harness/templates/`, compiled
//! into the binary): the run report, the diff of two reports, the matrix
//! and (for [`crate::bench::results::page`]) the benchmark page.

use anyhow::{Context as _, Result};
use serde::Serialize;
use similar::{ChangeTag, TextDiff};
use tera::{Context, Tera};

use crate::report::diff::{Change, Diff, Entry, GROUPS};
use crate::report::features;
use crate::report::matrix::Matrix;
use crate::report::Report;

const REPORT: &str = include_str!("../../templates/report.html.tera");
const DIFF: &str = include_str!("../../templates/diff.html.tera");
const BENCH: &str = include_str!("../../templates/bench.html.tera");
const MATRIX: &str = include_str!("../../templates/matrix.html.tera");
const HISTORY: &str = include_str!("../../templates/history.html.tera");

/// One line of an expected-vs-actual diff.
#[derive(Serialize)]
struct Line {
    tag: &'static str,
    text: String,
}

#[derive(Serialize)]
struct FailureView {
    check: String,
    grade: &'static str,
    client: Option<String>,
    expected: String,
    actual: String,
    diff: Vec<Line>,
}

/// Every page's template, compiled.
pub(crate) fn tera() -> Result<Tera> {
    let mut t = Tera::new();
    t.autoescape_on([".html"]);
    t.add_raw_template("report.html", REPORT)
        .context("report template")?;
    t.add_raw_template("diff.html", DIFF)
        .context("diff template")?;
    t.add_raw_template("bench.html", BENCH)
        .context("benchmark template")?;
    t.add_raw_template("matrix.html", MATRIX)
        .context("matrix template")?;
    t.add_raw_template("history.html", HISTORY)
        .context("history template")?;
    Ok(t)
}

/// Fails early (before a long run) if a template does not compile.
pub fn check_templates() -> Result<()> {
    tera().map(|_| ())
}

fn line_diff(expected: &str, actual: &str) -> Vec<Line> {
    TextDiff::from_words(expected, actual)
        .iter_all_changes()
        .map(|c| Line {
            tag: match c.tag() {
                ChangeTag::Equal => "eq",
                ChangeTag::Delete => "del",
                ChangeTag::Insert => "ins",
            },
            text: c.value().to_string(),
        })
        .collect()
}

pub fn render_report(report: &Report) -> Result<String> {
    let failures: Vec<Vec<FailureView>> = report
        .cases
        .iter()
        .map(|c| {
            c.failures
                .iter()
                .map(|f| FailureView {
                    check: f.check.clone(),
                    grade: f.grade.as_str(),
                    client: f.client.clone(),
                    expected: f.expected.clone(),
                    actual: f.actual.clone(),
                    diff: line_diff(&f.expected, &f.actual),
                })
                .collect()
        })
        .collect();
    let mut sections: Vec<String> = report.cases.iter().map(|c| c.section.clone()).collect();
    sections.dedup();
    // Each step as read, without its stored bytes (they are for
    // `afm-test regrade`, in report.json).
    let steps: Vec<String> = report
        .cases
        .iter()
        .map(|c| {
            let shown: Vec<_> = c
                .steps
                .iter()
                .map(|s| crate::report::StepRecord {
                    raw: None,
                    ..s.clone()
                })
                .collect();
            serde_json::to_string_pretty(&shown).unwrap_or_default()
        })
        .collect();
    let mut ctx = Context::new();
    ctx.insert("report", report);
    ctx.insert("failures", &failures);
    ctx.insert("sections", &sections);
    ctx.insert("steps", &steps);
    tera()?
        .render("report.html", &ctx)
        .context("rendering the HTML report")
}

#[derive(Serialize)]
struct Group<'a> {
    title: &'static str,
    regression: bool,
    entries: Vec<&'a Entry>,
}

pub fn render_diff(diff: &Diff) -> Result<String> {
    let groups: Vec<Group> = GROUPS
        .iter()
        .filter(|g| **g != Change::Unchanged)
        .map(|g| Group {
            title: g.title(),
            regression: *g == Change::Regression,
            entries: diff.entries.iter().filter(|e| e.change == *g).collect(),
        })
        .collect();
    let mut ctx = Context::new();
    ctx.insert("diff", diff);
    ctx.insert("groups", &groups);
    ctx.insert("unchanged", &diff.count(Change::Unchanged));
    tera()?
        .render("diff.html", &ctx)
        .context("rendering the HTML diff")
}

/// The matrix page: a row per case, a column per target.
pub fn render_matrix(matrix: &Matrix) -> Result<String> {
    let mut ctx = Context::new();
    ctx.insert("m", matrix);
    ctx.insert("features", &features::of(matrix));
    tera()?
        .render("matrix.html", &ctx)
        .context("rendering the HTML matrix")
}
