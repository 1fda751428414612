//! `afm-test diff A B`: how the failure set moved between two reports
//! (A the baseline, B the new run), case by case, so CI can gate on
//! regressions and a human sees what changed.

use std::collections::BTreeMap;
use std::fmt::Write;

use serde::Serialize;
use similar::TextDiff;

use crate::report::known_failures::KnownFailures;
use crate::report::{CaseResult, Report, Status};
use crate::suite::checks::Failure;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Change {
    /// Passed in A, fails, errors or skips in B (a feature that vanished
    /// skips as readily as it fails; `--allow-skips` relaxes the skip);
    /// also a new case that fails (unless it is a known failure): CI gates
    /// on these.
    Regression,
    /// Failed in A, passes in B.
    Fixed,
    /// Fails in both (pre-existing).
    StillFailing,
    /// Newly skipped (from pass or fail).
    NowSkipped,
    /// Skipped in A, runs in B (pass).
    NowRunning,
    /// Graded apart from failures in B and not in A: `spec` (off the
    /// published schema's letter only), `lenient`, or `degraded` where it
    /// failed before. Shown, never a regression (`--strict` runs make it
    /// one).
    NowSpec,
    /// Only in B (not failing).
    New,
    /// Only in A.
    Removed,
    /// Same status.
    Unchanged,
}

impl Change {
    pub fn title(self) -> &'static str {
        match self {
            Change::Regression => "Regressions",
            Change::Fixed => "Fixed",
            Change::StillFailing => "Still failing (pre-existing)",
            Change::NowSkipped => "Now skipped",
            Change::NowRunning => "No longer skipped",
            Change::NowSpec => "Now spec, degraded or lenient (not failures)",
            Change::New => "New cases",
            Change::Removed => "Removed cases",
            Change::Unchanged => "Unchanged",
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Entry {
    pub id: String,
    pub name: String,
    pub section: String,
    pub change: Change,
    pub before: Option<Status>,
    pub after: Option<Status>,
    /// The known issue a pre-existing (or new) failure is attributed to.
    pub known_issue: Option<String>,
    /// Unified diff of the actual outputs, when they differ.
    pub output_diff: Option<String>,
    /// B's failed checks.
    pub failures: Vec<String>,
    /// The same checks as data, so the Markdown summary can escape and
    /// clip expected and actual apart (left out of the JSON when none).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub checks: Vec<Failure>,
    /// The known issue a failure of A was attributed to, when B no longer
    /// fails: its known-failures entry may go. `known_issue` speaks of B's
    /// failures only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub was_known: Option<String>,
    /// Why B skipped or errored (or what the probes saw of a failure).
    pub reason: Option<String>,
}

/// How strict a comparison is.
#[derive(Debug, Clone, Copy, Default)]
pub struct Options {
    /// A case that passed and now skips is not a regression.
    pub allow_skips: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct Diff {
    pub before: String,
    pub after: String,
    pub entries: Vec<Entry>,
}

impl Diff {
    pub fn compare(a: &Report, b: &Report, known: &KnownFailures, options: Options) -> Diff {
        let before: BTreeMap<&str, &CaseResult> =
            a.cases.iter().map(|c| (c.id.as_str(), c)).collect();
        let after: BTreeMap<&str, &CaseResult> =
            b.cases.iter().map(|c| (c.id.as_str(), c)).collect();
        let mut ids: Vec<&str> = before.keys().chain(after.keys()).copied().collect();
        ids.sort();
        ids.dedup();
        let entries = ids
            .into_iter()
            .map(|id| {
                let (x, y) = (before.get(id).copied(), after.get(id).copied());
                let label = known
                    .label(id, b)
                    .or_else(|| y.and_then(|c| c.known_issue.clone()));
                let change = classify(
                    x.map(|c| c.status),
                    y.map(|c| c.status),
                    label.is_some(),
                    options.allow_skips,
                );
                let any = y.or(x).expect("in one of them");
                let output_diff = match (x, y) {
                    (Some(x), Some(y)) if x.status != y.status || y.status.failed() => {
                        output_diff(x, y)
                    }
                    _ => None,
                };
                Entry {
                    id: id.to_string(),
                    name: any.name.clone(),
                    section: any.section.clone(),
                    change,
                    before: x.map(|c| c.status),
                    after: y.map(|c| c.status),
                    known_issue: label.filter(|_| y.is_some_and(|c| c.status.failed())),
                    output_diff,
                    failures: y
                        .map(|c| {
                            c.failures
                                .iter()
                                .map(|f| {
                                    format!(
                                        "{}: expected {}; got {}",
                                        f.check, f.expected, f.actual
                                    )
                                })
                                .collect()
                        })
                        .unwrap_or_default(),
                    checks: y.map(|c| c.failures.clone()).unwrap_or_default(),
                    was_known: match (x, y) {
                        (Some(x), Some(y)) if x.status.failed() && !y.status.failed() => {
                            known.label(id, a).or_else(|| x.known_issue.clone())
                        }
                        _ => None,
                    },
                    reason: y.and_then(|c| c.reason.clone()),
                }
            })
            .collect();
        Diff {
            before: a
                .run
                .git_commit
                .clone()
                .unwrap_or_else(|| a.run.started.clone()),
            after: b
                .run
                .git_commit
                .clone()
                .unwrap_or_else(|| b.run.started.clone()),
            entries,
        }
    }

    pub fn count(&self, change: Change) -> usize {
        self.entries.iter().filter(|e| e.change == change).count()
    }

    pub fn has_regressions(&self) -> bool {
        self.count(Change::Regression) > 0
    }

    /// The plain-text account: counts, then each non-trivial group.
    pub fn text(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "afm-test diff: {} -> {}", self.before, self.after);
        for change in GROUPS {
            let _ = writeln!(out, "  {:<30} {}", change.title(), self.count(change));
        }
        for change in GROUPS {
            let group: Vec<&Entry> = self.entries.iter().filter(|e| e.change == change).collect();
            if group.is_empty() || change == Change::Unchanged {
                continue;
            }
            let _ = writeln!(out, "\n{} ({}):", change.title(), group.len());
            for e in group {
                let arrow = format!(
                    "{} -> {}",
                    e.before.map_or("-", Status::as_str),
                    e.after.map_or("-", Status::as_str)
                );
                let _ = writeln!(out, "  {:<40} {:<14} {}", e.id, arrow, e.name);
                if let Some(k) = &e.known_issue {
                    let _ = writeln!(out, "      known: {k}");
                }
                if change == Change::Regression || change == Change::NowSkipped {
                    if let Some(r) = &e.reason {
                        let _ = writeln!(out, "      reason: {r}");
                    }
                }
                if change == Change::Regression {
                    for f in &e.failures {
                        let _ = writeln!(out, "      {f}");
                    }
                    if let Some(d) = &e.output_diff {
                        for line in d.lines() {
                            let _ = writeln!(out, "      {line}");
                        }
                    }
                }
            }
        }
        out
    }
}

/// The order groups are shown in.
pub const GROUPS: [Change; 9] = [
    Change::Regression,
    Change::Fixed,
    Change::StillFailing,
    Change::NowSpec,
    Change::NowSkipped,
    Change::NowRunning,
    Change::New,
    Change::Removed,
    Change::Unchanged,
];

fn classify(
    before: Option<Status>,
    after: Option<Status>,
    known: bool,
    allow_skips: bool,
) -> Change {
    use Status::*;
    // Passing, or deviating in a way that is not a failure.
    let held = |s: Status| s == Pass || s.graded_apart();
    match (before, after) {
        (Some(a), Some(Skip)) if held(a) && !allow_skips => Change::Regression,
        (None, Some(s)) if s.failed() && !known => Change::Regression,
        (None, Some(_)) => Change::New,
        (Some(_), None) => Change::Removed,
        (Some(a), Some(b)) if a == b => match a {
            Fail | Error => Change::StillFailing,
            _ => Change::Unchanged,
        },
        (Some(a), Some(Fail | Error)) if held(a) => Change::Regression,
        // The client's user now loses what it had (an error's message, the
        // usage).
        (Some(Pass | Spec | Lenient), Some(Degraded)) => Change::Regression,
        (Some(Skip), Some(Fail | Error)) if !known => Change::Regression,
        (Some(Skip), Some(Fail | Error)) => Change::StillFailing,
        (Some(Fail | Error), Some(Fail | Error)) => Change::StillFailing,
        (Some(a), Some(Pass)) if a != Skip => Change::Fixed,
        (Some(_), Some(b)) if b.graded_apart() => Change::NowSpec,
        (Some(_), Some(Skip)) => Change::NowSkipped,
        (Some(Skip), Some(Pass)) => Change::NowRunning,
        (Some(_), Some(_)) => Change::Unchanged,
        (None, None) => Change::Unchanged,
    }
}

fn output_diff(a: &CaseResult, b: &CaseResult) -> Option<String> {
    let (x, y) = (a.actual_text(), b.actual_text());
    if x == y {
        return None;
    }
    let diff = TextDiff::from_lines(&x, &y);
    Some(
        diff.unified_diff()
            .context_radius(2)
            .header("before", "after")
            .to_string(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_move_into_their_groups() {
        use Status::*;
        let strict = |a, b, known| classify(a, b, known, false);
        assert_eq!(strict(Some(Pass), Some(Fail), false), Change::Regression);
        assert_eq!(strict(Some(Pass), Some(Error), true), Change::Regression);
        assert_eq!(strict(Some(Fail), Some(Pass), false), Change::Fixed);
        assert_eq!(strict(Some(Fail), Some(Fail), true), Change::StillFailing);
        assert_eq!(strict(Some(Pass), Some(Skip), false), Change::Regression);
        assert_eq!(strict(Some(Fail), Some(Skip), false), Change::NowSkipped);
        assert_eq!(strict(Some(Skip), Some(Pass), false), Change::NowRunning);
        assert_eq!(strict(None, Some(Pass), false), Change::New);
        assert_eq!(strict(None, Some(Fail), false), Change::Regression);
        assert_eq!(strict(None, Some(Fail), true), Change::New);
        assert_eq!(strict(Some(Pass), None, false), Change::Removed);
        assert_eq!(strict(Some(Pass), Some(Pass), false), Change::Unchanged);
        // A letter-only deviation is shown apart and gates nothing; a
        // failure after it is a regression as after a pass.
        assert_eq!(strict(Some(Pass), Some(Spec), false), Change::NowSpec);
        assert_eq!(strict(Some(Fail), Some(Spec), true), Change::NowSpec);
        assert_eq!(strict(Some(Spec), Some(Spec), false), Change::Unchanged);
        assert_eq!(strict(Some(Spec), Some(Pass), false), Change::Fixed);
        assert_eq!(strict(Some(Spec), Some(Fail), false), Change::Regression);
        assert_eq!(strict(Some(Spec), Some(Skip), false), Change::Regression);
        assert_eq!(strict(None, Some(Spec), false), Change::New);
        // Degraded: worse than passing, better than failing.
        assert_eq!(
            strict(Some(Pass), Some(Degraded), false),
            Change::Regression
        );
        assert_eq!(strict(Some(Fail), Some(Degraded), true), Change::NowSpec);
        assert_eq!(
            strict(Some(Degraded), Some(Fail), false),
            Change::Regression
        );
        assert_eq!(strict(Some(Degraded), Some(Pass), false), Change::Fixed);
        assert_eq!(strict(Some(Fail), Some(Lenient), false), Change::NowSpec);
        assert_eq!(strict(Some(Lenient), Some(Skip), false), Change::Regression);
        let relaxed = |a, b| classify(a, b, false, true);
        assert_eq!(relaxed(Some(Pass), Some(Skip)), Change::NowSkipped);
        assert_eq!(relaxed(Some(Pass), Some(Error)), Change::Regression);
    }
}
