//! A matrix as a compatibility page in Markdown (`matrix.md`, published
//! as `reports/compatibility.md`): a column per server, a row per case
//! grouped by section (the capabilities and the seeds' bug classes), each
//! cell the case's grade there, and a footnote for every failure
//! attributed to the server's own code.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::report::features;
use crate::report::markdown::{cell, code};
use crate::report::matrix::{label, Cell, Matrix};
use crate::report::Status;

/// The legend's symbols, one per grade.
fn symbol(c: &Cell) -> &'static str {
    match c.status {
        Status::Pass => "✅",
        Status::Fail if c.known => "❌",
        Status::Fail => "❌ **new**",
        Status::Degraded => "🟠",
        Status::Spec => "🟡",
        Status::Lenient => "🔵",
        Status::Error => "⚠️",
        Status::Flaky => "🎲",
        Status::Skip => "⏭",
    }
}

/// The feature summary: a row per section, each server's support.
fn features(out: &mut String, m: &Matrix) {
    out.push_str("\n## Features at a glance\n\n| feature |");
    for c in &m.columns {
        let _ = write!(out, " {} |", code(&c.label));
    }
    out.push_str("\n|---|");
    out.push_str(&"---|".repeat(m.columns.len()));
    out.push('\n');
    for f in &features::of(m) {
        let _ = write!(out, "| {} |", cell(&f.section, 80));
        for s in &f.cells {
            let mark = match s.level {
                "supported" => "✅",
                "partial" => "◐",
                "broken" => "❌",
                "not run" => "—",
                _ => "⏭",
            };
            let _ = write!(out, " {mark} {}: {} |", s.level, cell(&s.note, 200));
        }
        out.push('\n');
    }
}

/// A wall time as minutes and seconds.
fn minutes(seconds: f64) -> String {
    let s = seconds.round() as u64;
    format!("{}:{:02}", s / 60, s % 60)
}

/// The page: legend, a table of counts per server, then one table per
/// section, then the footnotes.
pub fn markdown(m: &Matrix) -> String {
    let mut out = String::from("# Compatibility of local LLM servers\n\n");
    out.push_str(
        "How each cell is graded: [docs/grading.md](../docs/grading.md). Each failure's \
         attribution: the known-failures files in [reports/baselines/peers/](baselines/peers/). \
         Every column's report, with each reply's bytes (`afm-test regrade` grades it \
         again): beside this page.\n\n",
    );
    out.push_str(
        "Each cell is the grade of an afm-test case on that server: ✅ pass · ❌ fail \
         (attributed in a footnote; **new** when nothing explains it) · 🟠 degraded (the \
         official client works and its user loses something: an error's message or type, \
         the usage) · 🟡 spec (off the published schema only, in ways the official SDKs \
         accept) · 🔵 lenient (answers a request the spec forbids) · 🎲 flaky (its attempts disagree) · ⚠️ error · ⏭ skip (refused by name, or declared absent) · — not run.\n\n",
    );
    out.push_str(
        "| server | model | pass | fail (attributed) | causes | degraded | spec | lenient | fail before grading | errors | skipped | wall |\n",
    );
    out.push_str("|---|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|\n");
    for c in &m.columns {
        let s = c.summary;
        let causes = match c.unattributed {
            0 => format!("{} behind {}", c.causes, s.known),
            n => format!("{} behind {}; {n} unattributed", c.causes, s.known),
        };
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} ({}) | {} | {} | {} | {} | {} | {} | {} | {} |",
            code(&c.label),
            code(&c.model),
            s.pass,
            s.fail,
            c.attributed,
            causes,
            s.degraded,
            s.spec,
            s.lenient,
            c.failed_ungraded(),
            s.error,
            s.skip,
            minutes(c.wall_seconds)
        );
    }
    out.push_str(
        "\n*causes*: the distinct causes (footnotes) behind the attributed failures and \
         errors: one server bug that fails several cases is one cause. *fail before grading*: what the \
         column failed when every deviation was a failure (fail + degraded + spec + \
         lenient). Grades come from the checks' rules, and where the column was run with \
         `--clients`, from what openai-python and anthropic-python did with each reply \
         (`docs/grading.md`).\n",
    );
    features(&mut out, m);
    if !m.unavailable.is_empty() {
        out.push_str("\n## Not runnable here\n\n| server | why |\n|---|---|\n");
        for u in &m.unavailable {
            let name = label(&u.name, u.version.as_deref());
            let _ = writeln!(out, "| {} | {} |", code(&name), cell(&u.why, 600));
        }
    }
    out.push('\n');
    // One footnote per (server, cause), numbered in order of appearance:
    // the first failure's attribution in full, then the other cases the
    // same cause fails.
    let mut notes: BTreeMap<(usize, String), usize> = BTreeMap::new();
    let mut order: Vec<(usize, String)> = Vec::new();
    let mut first: Vec<String> = Vec::new();
    let mut also: Vec<Vec<String>> = Vec::new();
    let mut section = "";
    for row in &m.rows {
        if row.section != section {
            section = &row.section;
            let _ = write!(out, "\n## {}\n\n| case |", cell(section, 80));
            for c in &m.columns {
                let _ = write!(out, " {} |", code(&c.label));
            }
            out.push_str("\n|---|");
            out.push_str(&"---|".repeat(m.columns.len()));
            out.push('\n');
        }
        let seeds = if row.seeds.is_empty() {
            String::new()
        } else {
            format!(" (seed {})", row.seeds.join(", "))
        };
        let _ = write!(
            out,
            "| {} {}{} |",
            code(&row.id),
            cell(&row.name, 100),
            seeds
        );
        for (k, c) in row.cells.iter().enumerate() {
            let Some(c) = c else {
                out.push_str(" — |");
                continue;
            };
            let mut text = symbol(c).to_string();
            if let Some(issue) = c.issue.as_ref().filter(|_| c.status.failed()) {
                let cause = c.cause.clone().unwrap_or_else(|| issue.clone());
                let key = (k, cause);
                let n = match notes.get(&key) {
                    Some(&n) => {
                        also[n - 1].push(row.id.clone());
                        n
                    }
                    None => {
                        order.push(key.clone());
                        first.push(issue.clone());
                        also.push(Vec::new());
                        notes.insert(key, order.len());
                        order.len()
                    }
                };
                let _ = write!(text, "[^{n}]");
            }
            let _ = write!(out, " {text} |");
        }
        out.push('\n');
    }
    if !order.is_empty() {
        out.push('\n');
    }
    for (n, (k, _)) in order.iter().enumerate() {
        let others = match also[n].is_empty() {
            true => String::new(),
            false => {
                let ids: Vec<String> = also[n].iter().map(|id| code(id)).collect();
                format!(" Also fails {}.", ids.join(", "))
            }
        };
        let _ = writeln!(
            out,
            "[^{}]: {}: {}{others}",
            n + 1,
            code(&m.columns[*k].label),
            cell(&first[n], 600)
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{CaseResult, Report, RunInfo};
    use crate::suite::checks::Failure;
    use crate::suite::Tier;

    fn case(id: &str, status: Status, known: Option<&str>) -> CaseResult {
        CaseResult {
            id: id.into(),
            name: format!("the {id} case"),
            section: id.split('.').next().unwrap().into(),
            tier: Tier::Smoke,
            seeds: Vec::new(),
            status,
            reason: None,
            failures: match status {
                Status::Fail => vec![Failure::new("status", "200".into(), "400".into())],
                _ => Vec::new(),
            },
            steps: Vec::new(),
            millis: 1.0,
            known_issue: known.map(str::to_string),
            known_cause: known.map(|k| k.split(" (").next().unwrap_or(k).to_string()),
            attempts: vec![],
        }
    }

    fn report(cases: Vec<CaseResult>) -> Report {
        Report::new(
            RunInfo {
                model: "smollm2".into(),
                ..Default::default()
            },
            cases,
        )
    }

    #[test]
    fn the_feature_summary_grades_each_section_per_server() {
        let a = report(vec![
            case("tools.none", Status::Pass, None),
            case("tools.required", Status::Spec, None),
            case("reasoning.on", Status::Skip, None),
        ]);
        let b = report(vec![
            case("tools.none", Status::Fail, Some("x")),
            case("tools.required", Status::Pass, None),
            case("reasoning.on", Status::Fail, Some("y")),
        ]);
        let m = Matrix::new(&[("a".into(), a), ("b".into(), b)]);
        let md = markdown(&m);
        assert!(
            md.contains(
                "| tools | ✅ supported: 2 of 2 hold | ◐ partial: 1 of 2 hold; fails none |"
            ),
            "{md}"
        );
        assert!(
            md.contains(
                "| reasoning | ⏭ untested: every case skipped | ❌ broken: 0 of 1 hold; fails on |"
            ),
            "{md}"
        );
    }

    #[test]
    fn cells_carry_grades_and_attributed_failures_their_footnotes() {
        let issue = "vllm/entrypoints/openai/serving_chat.py: ChatCompletion | tool_choice none";
        let a = report(vec![
            case("tools.none", Status::Pass, None),
            case("tools.required", Status::Pass, None),
            case("schema.chat", Status::Spec, None),
        ]);
        let b = report(vec![
            case("tools.none", Status::Fail, Some(issue)),
            case("tools.required", Status::Fail, None),
            case("schema.chat", Status::Pass, None),
        ]);
        let m = Matrix::new(&[("afm-serve".into(), a), ("vllm@0.32.0".into(), b)]);
        let md = markdown(&m);
        assert!(
            md.contains("| `tools.none` the tools.none case | ✅ | ❌[^1] |"),
            "{md}"
        );
        assert!(
            md.contains("| `tools.required` the tools.required case | ✅ | ❌ **new** |"),
            "{md}"
        );
        assert!(
            md.contains("| `schema.chat` the schema.chat case | 🟡 | ✅ |"),
            "{md}"
        );
        // The issue's pipe cannot end the footnote's line early.
        assert!(md.contains("[^1]: `vllm@0.32.0`: vllm/entrypoints/openai/serving\\_chat.py: ChatCompletion \\| tool\\_choice none"), "{md}");
        assert_eq!(
            md.matches("\n## ").count(),
            3,
            "the features' heading and one per section: {md}"
        );
        assert!(
            md.contains("| `vllm@0.32.0` | `smollm2` | 1 | 2 (1) | 1 behind 1; 1 unattributed | 0 | 0 | 0 | 2 | 0 | 0 | 0:00 |"),
            "{md}"
        );
    }

    #[test]
    fn a_section_not_run_on_a_server_is_not_called_skipped() {
        let a = report(vec![
            case("limits.huge", Status::Pass, None),
            case("tools.none", Status::Skip, None),
        ]);
        let b = report(vec![case("tools.none", Status::Skip, None)]);
        let m = Matrix::new(&[("a".into(), a), ("b".into(), b)]);
        let md = markdown(&m);
        assert!(
            md.contains(
                "| limits | ✅ supported: 1 of 1 hold | — not run: no case of it ran here |"
            ),
            "{md}"
        );
        assert!(
            md.contains(
                "| tools | ⏭ untested: every case skipped | ⏭ untested: every case skipped |"
            ),
            "{md}"
        );
    }

    #[test]
    fn attributed_failures_never_outnumber_the_failures() {
        // An attributed error counts behind its cause, not as a failure.
        let b = report(vec![
            case("tools.required", Status::Fail, Some("cause a")),
            case("tools.named", Status::Error, Some("cause b")),
        ]);
        let m = Matrix::new(&[("peer".into(), b)]);
        let md = markdown(&m);
        assert!(md.contains("| 1 (1) | 2 behind 2 |"), "{md}");
    }

    #[test]
    fn a_cause_behind_several_failures_counts_once() {
        let issue = "server.py: tool_choice is accepted and ignored";
        let b = report(vec![
            case("tools.required", Status::Fail, Some(issue)),
            case("tools.named", Status::Fail, Some(issue)),
            case("tools.none", Status::Fail, Some("another cause")),
        ]);
        let m = Matrix::new(&[("mlx-lm".into(), b)]);
        assert_eq!((m.columns[0].causes, m.columns[0].unattributed), (2, 0));
        let md = markdown(&m);
        assert!(md.contains("| 3 (3) | 2 behind 3 |"), "{md}");
        // One footnote per cause, however many cells point to it.
        assert_eq!(md.matches("\n[^").count(), 2, "{md}");
        assert!(md.contains("Also fails `tools.named`."), "{md}");
    }
}
