//! GitHub-flavoured Markdown summaries of a run and of a diff, for
//! `$GITHUB_STEP_SUMMARY` and pull-request comments: the verdict first,
//! then what a reviewer must act on (unexplained failures, regressions)
//! with every failed check, the rest folded into `<details>`.
//!
//! Server text is escaped (it cannot break a table row or inject HTML) and
//! clipped, and lists are capped, so a summary stays readable and under
//! GitHub's 1 MiB step-summary limit whatever the server answered.

use std::fmt::Write;

use crate::report::diff::{Change, Diff, Entry, GROUPS};
use crate::report::markdown::{cell, close_details, code, open_details};
use crate::report::{CaseResult, Report, Status};
use crate::suite::checks::Failure;

/// How much a summary shows.
#[derive(Debug, Clone, Copy)]
struct Limits {
    /// Cases a list shows before "... and N more" (regressions are exempt:
    /// the reason a gate fails is shown whole, within `bytes`).
    items: usize,
    /// Size the summary may reach with its lists; headings and notes after
    /// the last item that fits add a few KiB at most.
    bytes: usize,
    /// Characters of server text a table cell shows.
    cell: usize,
}

/// GitHub's step summary holds 1 MiB; 24 KiB stay for what follows the
/// lists.
const GITHUB: Limits = Limits {
    items: 50,
    bytes: 1000 * 1024,
    cell: 160,
};

/// The Markdown summary of a run: title, counts, the unexplained failures
/// with each failed check, then known failures and skips folded away.
pub fn of_report(report: &Report) -> String {
    report_with(report, &GITHUB)
}

/// The Markdown summary of `afm-test diff`: whether the gate passes, the
/// count of each change, every regression with the new run's failed
/// checks, the fixes (known failures that now pass first), then the other
/// groups briefly.
pub fn of_diff(diff: &Diff) -> String {
    diff_with(diff, &GITHUB)
}

fn report_with(report: &Report, limits: &Limits) -> String {
    let run = &report.run;
    let s = &report.summary;
    let mut out = String::new();
    let tier = run
        .tier
        .map_or_else(|| "no tier".to_string(), |t| format!("{} tier", t.as_str()));
    let commit = run.git_commit.as_deref().map_or_else(
        || "no commit".to_string(),
        |c| format!("commit {}", code(c)),
    );
    let _ = writeln!(
        out,
        "## afm-test: {} on {} · {tier} · {commit}\n",
        code(&run.model),
        code(&run.target)
    );

    let unexplained: Vec<&CaseResult> = report
        .cases
        .iter()
        .filter(|c| c.status.failed() && c.known_issue.is_none())
        .collect();
    if unexplained.is_empty() {
        let _ = writeln!(out, "✅ **no unexplained failures**\n");
    } else {
        let _ = writeln!(
            out,
            "❌ **{}** (not in the known-failures list)\n",
            plural(
                unexplained.len(),
                "unexplained failure",
                "unexplained failures"
            )
        );
    }
    out.push_str(
        "| pass | fail | of which known | degraded | spec | lenient | errors | skipped | wall time |\n",
    );
    out.push_str("|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    let _ = writeln!(
        out,
        "| {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
        s.pass,
        s.fail,
        s.known,
        s.degraded,
        s.spec,
        s.lenient,
        s.error,
        s.skip,
        duration(run.wall_seconds)
    );

    if !unexplained.is_empty() {
        let _ = writeln!(
            out,
            "### Unexplained failures and errors ({})\n",
            unexplained.len()
        );
        let rows = unexplained.iter().map(|c| {
            failure_rows(
                &c.id,
                &c.name,
                c.status.as_str(),
                &c.failures,
                c.reason.as_deref(),
                limits,
            )
        });
        write_rows(
            &mut out,
            FAILURE_HEAD,
            unexplained.len(),
            rows,
            Some(limits.items),
            limits,
        );
    }

    let known = |c: &&CaseResult| c.status.failed() && c.known_issue.is_some();
    folded(
        &mut out,
        report,
        "Known failures",
        known,
        limits,
        |c| {
            let issue = cell(c.known_issue.as_deref().unwrap_or_default(), limits.cell);
            format!("| {} | {} | {issue} |\n", code(&c.id), c.status.as_str())
        },
        "| case | status | known issue |\n|---|---|---|\n",
    );
    let title = "Not failures: degraded (clients work, their user loses something), \
                 spec (off the published schema only) or lenient";
    let apart = |c: &&CaseResult| c.status.graded_apart();
    folded(
        &mut out,
        report,
        title,
        apart,
        limits,
        |c| failure_rows(&c.id, &c.name, c.status.as_str(), &c.failures, None, limits),
        FAILURE_HEAD,
    );
    let skipped = |c: &&CaseResult| c.status == Status::Skip;
    folded(
        &mut out,
        report,
        "Skipped",
        skipped,
        limits,
        |c| {
            let reason = cell(
                c.reason.as_deref().unwrap_or("no reason given"),
                limits.cell,
            );
            format!("| {} | {reason} |\n", code(&c.id))
        },
        "| case | reason |\n|---|---|\n",
    );
    out
}

/// The cases `which` selects, as a table (`head`, one `row` each, capped)
/// folded into a `<details>` block titled with their count; nothing when
/// none.
fn folded<'a>(
    out: &mut String,
    report: &'a Report,
    title: &str,
    which: impl Fn(&&'a CaseResult) -> bool,
    limits: &Limits,
    row: impl Fn(&CaseResult) -> String,
    head: &str,
) {
    let cases: Vec<&CaseResult> = report.cases.iter().filter(which).collect();
    if cases.is_empty() {
        return;
    }
    open_details(out, &format!("{title} ({})", cases.len()));
    let rows = cases.iter().map(|c| row(c));
    write_rows(out, head, cases.len(), rows, Some(limits.items), limits);
    close_details(out);
}

fn diff_with(diff: &Diff, limits: &Limits) -> String {
    let mut out = String::new();
    let group = |change: Change| -> Vec<&Entry> {
        diff.entries.iter().filter(|e| e.change == change).collect()
    };
    let regressions = group(Change::Regression);
    let verdict = if regressions.is_empty() {
        "✅ no regressions".to_string()
    } else {
        format!(
            "❌ {}",
            plural(regressions.len(), "regression", "regressions")
        )
    };
    let _ = writeln!(out, "## afm-test diff: {verdict}\n");
    let _ = writeln!(
        out,
        "{} (baseline) → {} (this run)\n",
        code(&diff.before),
        code(&diff.after)
    );
    let titles: Vec<&str> = GROUPS.iter().map(|g| g.title()).collect();
    let _ = writeln!(out, "| {} |", titles.join(" | "));
    let _ = writeln!(out, "|{}", "---:|".repeat(GROUPS.len()));
    let counts: Vec<String> = GROUPS.iter().map(|g| diff.count(*g).to_string()).collect();
    let _ = writeln!(out, "| {} |\n", counts.join(" | "));

    if !regressions.is_empty() {
        let _ = writeln!(
            out,
            "### ❌ {} ({})\n",
            Change::Regression.title(),
            regressions.len()
        );
        let rows = regressions.iter().map(|e| {
            failure_rows(
                &e.id,
                &e.name,
                &arrow(e),
                &e.checks,
                e.reason.as_deref(),
                limits,
            )
        });
        write_rows(
            &mut out,
            &FAILURE_HEAD.replace("| status |", "| before → after |"),
            regressions.len(),
            rows,
            None,
            limits,
        );
    }

    let mut fixed = group(Change::Fixed);
    if !fixed.is_empty() {
        // Known failures first: their known-failures entries can go.
        fixed.sort_by_key(|e| e.was_known.is_none());
        let _ = writeln!(out, "### ✅ {} ({})\n", Change::Fixed.title(), fixed.len());
        let known = fixed.iter().filter(|e| e.was_known.is_some()).count();
        if known > 0 {
            let _ = writeln!(
                out,
                "{} now {}: take {} out of the known-failures file.\n",
                plural(known, "known failure", "known failures"),
                if known == 1 { "passes" } else { "pass" },
                if known == 1 {
                    "its entry"
                } else {
                    "their entries"
                }
            );
        }
        let rows = fixed.iter().map(|e| {
            format!(
                "| {} | {} | {} | {} |\n",
                code(&e.id),
                cell(&e.name, limits.cell),
                arrow(e),
                e.was_known
                    .as_deref()
                    .map_or_else(|| "—".to_string(), |k| cell(k, limits.cell))
            )
        });
        let head = "| case | name | before → after | was known as |\n|---|---|---|---|\n";
        write_rows(
            &mut out,
            head,
            fixed.len(),
            rows,
            Some(limits.items),
            limits,
        );
    }

    for change in GROUPS {
        if matches!(
            change,
            Change::Regression | Change::Fixed | Change::Unchanged
        ) {
            continue;
        }
        let entries = group(change);
        if entries.is_empty() {
            continue;
        }
        let mut title = format!("{} ({})", change.title(), entries.len());
        if change == Change::New {
            let known = entries.iter().filter(|e| e.known_issue.is_some()).count();
            if known > 0 {
                title = format!(
                    "{} ({}, {})",
                    change.title(),
                    entries.len(),
                    plural(known, "a known failure", "known failures")
                );
            }
        }
        open_details(&mut out, &title);
        let rows = entries.iter().map(|e| {
            format!(
                "| {} | {} | {} |\n",
                code(&e.id),
                arrow(e),
                brief_note(e, limits)
            )
        });
        let head = "| case | before → after | note |\n|---|---|---|\n";
        write_rows(
            &mut out,
            head,
            entries.len(),
            rows,
            Some(limits.items),
            limits,
        );
        close_details(&mut out);
    }
    out
}

const FAILURE_HEAD: &str = "| case | name | status | check | expected | actual |\n\
                            |---|---|---|---|---|---|\n";

/// The table rows of one failing case: one per failed check (the case
/// named on the first only), then why it did not run, when it did not.
fn failure_rows(
    id: &str,
    name: &str,
    status: &str,
    checks: &[Failure],
    reason: Option<&str>,
    limits: &Limits,
) -> String {
    let mut cells: Vec<[String; 3]> = checks
        .iter()
        .map(|f| {
            [
                cell(&f.check, limits.cell),
                cell(&f.expected, limits.cell),
                cell(&f.actual, limits.cell),
            ]
        })
        .collect();
    if let Some(r) = reason {
        cells.push([
            "*reason*".to_string(),
            "—".to_string(),
            cell(r, limits.cell),
        ]);
    }
    if cells.is_empty() {
        cells.push(["—".to_string(), "—".to_string(), "—".to_string()]);
    }
    let mut out = String::new();
    for (i, [check, expected, actual]) in cells.iter().enumerate() {
        if i == 0 {
            let _ = write!(
                out,
                "| {} | {} | {} ",
                code(id),
                cell(name, limits.cell),
                status
            );
        } else {
            out.push_str("| | | ");
        }
        let _ = writeln!(out, "| {check} | {expected} | {actual} |");
    }
    out
}

/// What a briefly listed entry is about: its known issue, the one it had,
/// or why it is skipped or errors.
fn brief_note(e: &Entry, limits: &Limits) -> String {
    if let Some(r) = &e.rates {
        format!("failure rate {}", cell(r, limits.cell))
    } else if let Some(k) = &e.known_issue {
        format!("known: {}", cell(k, limits.cell))
    } else if let Some(k) = &e.was_known {
        format!("was known: {}", cell(k, limits.cell))
    } else if let Some(r) = &e.reason {
        cell(r, limits.cell)
    } else if e.after.is_some_and(Status::failed) {
        "*not in the known-failures list*".to_string()
    } else {
        String::new()
    }
}

/// Appends `total` items' rows under `head` while `cap` and the byte
/// budget allow, then says how many were left out and why; the head goes
/// too when no row fits.
fn write_rows(
    out: &mut String,
    head: &str,
    total: usize,
    rows: impl Iterator<Item = String>,
    cap: Option<usize>,
    limits: &Limits,
) {
    let start = out.len();
    out.push_str(head);
    let mut shown = 0;
    let mut full = false;
    for row in rows {
        if cap.is_some_and(|c| shown >= c) {
            break;
        }
        if out.len() + row.len() > limits.bytes {
            full = true;
            break;
        }
        out.push_str(&row);
        shown += 1;
    }
    if shown == 0 {
        out.truncate(start);
    } else {
        out.push('\n');
    }
    if shown < total {
        let why = if full {
            "left out to keep the summary under GitHub's 1 MiB limit".to_string()
        } else {
            format!("the summary lists the first {shown}")
        };
        let _ = writeln!(
            out,
            "... and {} more ({why}; the full report has them all)\n",
            total - shown
        );
    }
}

fn arrow(e: &Entry) -> String {
    format!(
        "{} → {}",
        e.before.map_or("—", Status::as_str),
        e.after.map_or("—", Status::as_str)
    )
}

fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

fn duration(seconds: f64) -> String {
    let s = seconds.max(0.0);
    if s < 60.0 {
        format!("{s:.1} s")
    } else if s < 3600.0 {
        format!("{} min {:02} s", (s / 60.0) as u64, (s % 60.0) as u64)
    } else {
        format!(
            "{} h {:02} min",
            (s / 3600.0) as u64,
            ((s % 3600.0) / 60.0) as u64
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::known_failures::KnownFailures;
    use crate::report::RunInfo;
    use crate::suite::Tier;

    fn case(id: &str, status: Status, failures: &[(&str, &str, &str)]) -> CaseResult {
        CaseResult {
            id: id.into(),
            name: format!("The {id} case"),
            section: id.split('.').next().unwrap_or_default().into(),
            tier: Tier::Smoke,
            seeds: Vec::new(),
            status,
            reason: match status {
                Status::Skip => Some("capability tool_calls missing".into()),
                Status::Error => Some("connection refused".into()),
                _ => None,
            },
            failures: failures
                .iter()
                .map(|(check, expected, actual)| {
                    Failure::new(*check, (*expected).into(), (*actual).into())
                })
                .collect(),
            steps: Vec::new(),
            millis: 12.0,
            known_issue: None,
            known_cause: None,
            attempts: vec![],
        }
    }

    fn known(mut c: CaseResult, issue: &str) -> CaseResult {
        c.known_issue = Some(issue.into());
        c
    }

    fn run(commit: &str) -> RunInfo {
        RunInfo {
            target: "http://127.0.0.1:8080".into(),
            model: "mlx-community/SmolLM2-135M-Instruct".into(),
            git_commit: Some(commit.into()),
            started: "2026-01-01T00:00:00Z".into(),
            wall_seconds: 83.4,
            tier: Some(Tier::Standard),
            ..Default::default()
        }
    }

    /// The text between `heading` and the next heading or `<details>`.
    fn section<'a>(md: &'a str, heading: &str) -> &'a str {
        let start = md
            .find(heading)
            .unwrap_or_else(|| panic!("no {heading}:\n{md}"));
        let rest = &md[start + heading.len()..];
        let end = ["\n#", "\n<details>"]
            .iter()
            .filter_map(|m| rest.find(m))
            .min()
            .unwrap_or(rest.len());
        &rest[..end]
    }

    /// Pipes that end a cell: those not escaped by a backslash.
    fn cell_pipes(line: &str) -> usize {
        let mut n = 0;
        let mut escaped = false;
        for c in line.chars() {
            match c {
                '\\' if !escaped => escaped = true,
                '|' if !escaped => n += 1,
                _ => escaped = false,
            }
        }
        n
    }

    /// A baseline and a new run: `tools.parallel` regresses, the known
    /// failure `reasoning.split` is fixed, `grammar.enum` still fails.
    fn diff_one_regression() -> Diff {
        let a = Report::new(
            run("1a2b3c4"),
            vec![
                case("tools.parallel", Status::Pass, &[]),
                known(
                    case(
                        "reasoning.split",
                        Status::Fail,
                        &[("reasoning_present", "non-empty", "\"\"")],
                    ),
                    "https://example.org/issues/12 (no reasoning mode)",
                ),
                known(
                    case(
                        "grammar.enum",
                        Status::Fail,
                        &[("json_valid", "valid", "{")],
                    ),
                    "https://example.org/issues/7",
                ),
                case("chat.basic", Status::Pass, &[]),
            ],
        );
        let b = Report::new(
            run("5d6e7f8"),
            vec![
                case(
                    "tools.parallel",
                    Status::Fail,
                    &[
                        ("tool_call_count", "2", "1"),
                        (
                            "tool_args_schema",
                            "arguments match the schema",
                            "{\"city\": \"Paris|Lyon\"}\n<b>trailing</b> `x`",
                        ),
                    ],
                ),
                case("reasoning.split", Status::Pass, &[]),
                known(
                    case(
                        "grammar.enum",
                        Status::Fail,
                        &[("json_valid", "valid", "{")],
                    ),
                    "https://example.org/issues/7",
                ),
                case("chat.basic", Status::Pass, &[]),
            ],
        );
        Diff::compare(&a, &b, &KnownFailures::default(), Default::default())
    }

    #[test]
    fn a_regression_is_shown_with_its_failed_checks() {
        let md = of_diff(&diff_one_regression());
        let first = md.lines().next().unwrap();
        assert_eq!(first, "## afm-test diff: ❌ 1 regression", "{md}");
        let regressions = section(&md, "### ❌ Regressions (1)");
        assert!(regressions.contains("`tools.parallel`"), "{md}");
        assert!(regressions.contains("tool\\_call\\_count"), "{md}");
        assert!(regressions.contains("tool\\_args\\_schema"), "{md}");
        assert!(regressions.contains("pass → fail"), "{md}");
        assert!(!regressions.contains("reasoning.split"), "{md}");
        // The counts row, in the order of the groups.
        assert!(
            md.contains("| 1 | 1 | 1 | 0 | 0 | 0 | 0 | 0 | 0 | 1 |"),
            "{md}"
        );
    }

    #[test]
    fn a_fixed_known_failure_is_listed_with_its_issue() {
        let md = of_diff(&diff_one_regression());
        let fixed = section(&md, "### ✅ Fixed (1)");
        assert!(fixed.contains("1 known failure now passes"), "{md}");
        let row = fixed
            .lines()
            .find(|l| l.contains("`reasoning.split`"))
            .unwrap_or_else(|| panic!("not listed:\n{md}"));
        assert!(row.contains("fail → pass"), "{row}");
        assert!(row.contains("https://example.org/issues/12"), "{row}");
        // The pre-existing failure is listed briefly, folded.
        assert!(md.contains("<details><summary>Still failing (pre-existing) (1)</summary>"));
        assert!(
            md.contains("| `grammar.enum` | fail → fail | known: "),
            "{md}"
        );
    }

    #[test]
    fn no_regression_says_the_gate_passes() {
        let a = Report::new(run("1"), vec![case("chat.basic", Status::Pass, &[])]);
        let d = Diff::compare(&a, &a, &KnownFailures::default(), Default::default());
        let md = of_diff(&d);
        assert!(
            md.starts_with("## afm-test diff: ✅ no regressions\n"),
            "{md}"
        );
        assert!(!md.contains("### ❌"), "{md}");
    }

    #[test]
    fn server_text_cannot_break_a_row_or_inject_html() {
        let md = of_diff(&diff_one_regression());
        let head = "| case | name | before → after | check | expected | actual |";
        assert_eq!(cell_pipes(head), 7);
        let row = md
            .lines()
            .find(|l| l.contains("tool\\_args\\_schema"))
            .unwrap_or_else(|| panic!("no row:\n{md}"));
        // One line, as many cells as the head, the pipe and markup escaped.
        assert_eq!(cell_pipes(row), 7, "{row}");
        assert!(row.contains("Paris\\|Lyon"), "{row}");
        assert!(row.contains("↵\\<b\\>trailing\\</b\\> \\`x\\`"), "{row}");
        assert!(!md.contains("<b>"), "{md}");
        assert_eq!(cell("a@b \\| c", 50), "a@\u{2060}b \\\\\\| c");
    }

    #[test]
    fn a_run_summary_has_counts_failures_known_and_skips() {
        let r = Report::new(
            run("9c9931d"),
            vec![
                case("chat.basic", Status::Pass, &[]),
                case(
                    "grammar.regex",
                    Status::Fail,
                    &[("content_matches", "^Paris", "Lyon|Marseille")],
                ),
                case("tools.call", Status::Error, &[]),
                known(
                    case("reasoning.split", Status::Fail, &[("x", "y", "z")]),
                    "https://example.org/issues/12",
                ),
                case("tools.parallel", Status::Skip, &[]),
            ],
        );
        let md = of_report(&r);
        assert_eq!(
            md.lines().next().unwrap(),
            "## afm-test: `mlx-community/SmolLM2-135M-Instruct` on \
             `http://127.0.0.1:8080` · standard tier · commit `9c9931d`"
        );
        assert!(md.contains("❌ **2 unexplained failures**"), "{md}");
        assert!(
            md.contains("| 1 | 2 | 1 | 0 | 0 | 0 | 1 | 1 | 1 min 23 s |"),
            "{md}"
        );
        let failures = section(&md, "### Unexplained failures and errors (2)");
        assert!(failures.contains("| `grammar.regex` | The grammar.regex case | fail | content\\_matches | ^Paris | Lyon\\|Marseille |"), "{md}");
        assert!(failures.contains("| `tools.call` | The tools.call case | error | *reason* | — | connection refused |"), "{md}");
        assert!(!failures.contains("reasoning.split"), "{md}");
        let known = section(&md, "<summary>Known failures (1)</summary>");
        assert!(known.contains("| `reasoning.split` | fail | https://example.org/issues/12 |"));
        let skipped = section(&md, "<summary>Skipped (1)</summary>");
        assert!(skipped.contains("| `tools.parallel` | capability tool\\_calls missing |"));
    }

    #[test]
    fn long_lists_are_capped_and_say_so() {
        let cases = (0..60)
            .map(|i| {
                case(
                    &format!("grammar.c{i:02}"),
                    Status::Fail,
                    &[("c", "e", "a")],
                )
            })
            .collect();
        let md = of_report(&Report::new(run("1"), cases));
        let failures = section(&md, "### Unexplained failures and errors (60)");
        assert_eq!(failures.matches("| `grammar.c").count(), 50, "{md}");
        assert!(failures.contains("`grammar.c49`") && !failures.contains("`grammar.c50`"));
        assert!(failures.contains("... and 10 more (the summary lists the first 50;"));
    }

    #[test]
    fn a_huge_diff_stays_under_github_s_limit() {
        // Worst case: every character of server text escaped, thousands of
        // regressions (never capped by count).
        let huge = "<|".repeat(500);
        let checks: Vec<(&str, &str, &str)> = vec![("check", &huge, &huge); 3];
        let a = Report::new(
            run("1"),
            (0..3000)
                .map(|i| case(&format!("s.c{i:04}"), Status::Pass, &[]))
                .collect(),
        );
        let b = Report::new(
            run("2"),
            (0..3000)
                .map(|i| case(&format!("s.c{i:04}"), Status::Fail, &checks))
                .collect(),
        );
        let d = Diff::compare(&a, &b, &KnownFailures::default(), Default::default());
        let md = of_diff(&d);
        assert!(md.len() < 1024 * 1024, "{} bytes", md.len());
        assert!(md.contains("left out to keep the summary under GitHub's 1 MiB limit"));
        assert!(md.contains("`s.c0000`"));
        // A cell shows its first characters and how many it left out.
        assert!(md.contains("… (+840 chars)"), "clipped");
    }

    #[test]
    fn a_byte_budget_drops_whole_rows() {
        let cases = (0..10)
            .map(|i| case(&format!("grammar.c{i}"), Status::Fail, &[("c", "e", "a")]))
            .collect();
        let r = Report::new(run("1"), cases);
        let full = report_with(&r, &GITHUB);
        let budget = full.find("`grammar.c5`").unwrap();
        let small = Limits {
            bytes: budget,
            ..GITHUB
        };
        let md = report_with(&r, &small);
        assert!(
            md.contains("`grammar.c3`") && !md.contains("`grammar.c5`"),
            "{md}"
        );
        assert!(md.contains("more (left out to keep the summary under GitHub's 1 MiB limit;"));
    }

    #[test]
    fn code_spans_survive_backticks_and_pipes() {
        assert_eq!(code("a.b"), "`a.b`");
        assert_eq!(code("a`b"), "``a`b``");
        assert_eq!(code("`a|b"), "`` `a\\|b ``");
        assert_eq!(code(""), "—");
    }

    /// Writes the Markdown of a realistic diff with one regression to
    /// `target/summary-demo/diff-summary.md` (and the run's to
    /// `report-summary.md`), to render and look at.
    #[test]
    #[ignore]
    fn demo() {
        let dir = std::env::var_os("CARGO_TARGET_DIR")
            .map(std::path::PathBuf::from)
            .unwrap_or_else(|| std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target"))
            .join("summary-demo");
        std::fs::create_dir_all(&dir).unwrap();
        let a = Report::new(run("1a2b3c4"), demo_cases(false));
        let b = Report::new(run("5d6e7f8"), demo_cases(true));
        let d = Diff::compare(&a, &b, &KnownFailures::default(), Default::default());
        std::fs::write(dir.join("diff-summary.md"), of_diff(&d)).unwrap();
        std::fs::write(dir.join("report-summary.md"), of_report(&b)).unwrap();
        println!("{}", dir.join("diff-summary.md").display());
    }

    /// A standard-tier run; `after` is the run of a change that breaks
    /// parallel tool calls and gives the model a reasoning mode.
    fn demo_cases(after: bool) -> Vec<CaseResult> {
        let mut cases: Vec<CaseResult> = [
            "chat.basic",
            "chat.system_prompt",
            "chat.max_tokens",
            "chat.stop_sequence",
            "stream.deltas",
            "stream.usage_chunk",
            "tools.single_call",
            "tools.tool_choice_none",
            "grammar.json_object",
            "logprobs.top_logprobs",
        ]
        .iter()
        .map(|id| case(id, Status::Pass, &[]))
        .collect();
        cases.push(if after {
            case(
                "tools.parallel_calls",
                Status::Fail,
                &[
                    ("tool_call_count", "2 tool calls", "1 tool call"),
                    (
                        "tool_args_schema",
                        "arguments of get_weather match its schema",
                        "{\"city\": \"Paris | Lyon\", \"unit\": \"<celsius>\"}\n(then `done`)",
                    ),
                ],
            )
        } else {
            case("tools.parallel_calls", Status::Pass, &[])
        });
        let reasoning = if after {
            case("reasoning.think_split", Status::Pass, &[])
        } else {
            known(
                case(
                    "reasoning.think_split",
                    Status::Fail,
                    &[("reasoning_present", "non-empty reasoning", "\"\"")],
                ),
                "https://example.org/issues/12 (the bundled model has no reasoning mode)",
            )
        };
        cases.push(reasoning);
        cases.push(known(
            case(
                "grammar.regex_email",
                Status::Fail,
                &[("content_matches", "^[a-z]+@[a-z]+\\.org$", "bob@example")],
            ),
            "https://example.org/issues/31 (grammar engine ignores anchors)",
        ));
        let mut audio = case("audio.transcription", Status::Skip, &[]);
        audio.reason = Some("the server has no /v1/audio/transcriptions".into());
        cases.push(audio);
        for c in &mut cases {
            c.name = demo_name(&c.id).into();
        }
        cases
    }

    fn demo_name(id: &str) -> &'static str {
        match id {
            "chat.basic" => "A plain chat completion",
            "chat.system_prompt" => "The system prompt is followed",
            "chat.max_tokens" => "max_tokens stops the reply",
            "chat.stop_sequence" => "A stop sequence ends the reply",
            "stream.deltas" => "Streamed deltas add up to the reply",
            "stream.usage_chunk" => "stream_options.include_usage sends usage",
            "tools.single_call" => "One tool call with valid arguments",
            "tools.tool_choice_none" => "tool_choice none calls no tool",
            "tools.parallel_calls" => "Two tool calls in one turn",
            "grammar.json_object" => "response_format json_object is valid JSON",
            "grammar.regex_email" => "A regex-constrained e-mail address",
            "reasoning.think_split" => "Reasoning comes apart from the content",
            "logprobs.top_logprobs" => "top_logprobs alternatives per token",
            "audio.transcription" => "An audio transcription",
            _ => "a case",
        }
    }
}
