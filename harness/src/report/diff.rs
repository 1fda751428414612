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
    /// Its attempts disagree in A or B, and the failure rates do not
    /// differ beyond what their attempts can tell apart (or only one
    /// side has a rate): listed apart, never a regression.
    Flaky,
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
            Change::Flaky => "Flaky (attempts disagree; rates not told apart)",
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
    /// The failure rates, where either side ran the case more than once:
    /// "0/5 -> 3/5", and Fisher's p where both did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rates: Option<String>,
}

/// The level below which Fisher's exact test (one-sided: B fails more
/// often than A) calls a rise in the failure rate a regression.
pub const SIGNIFICANCE: f64 = 0.05;

/// Fisher's exact test, one-sided: the chance that B's `fb` failures of
/// `nb` attempts (or more) come out of the `fa + fb` failures of all
/// `na + nb` attempts if both sides failed at the same rate.
pub fn fisher_one_sided(fa: usize, na: usize, fb: usize, nb: usize) -> f64 {
    let ln_fact = |n: usize| (1..=n).map(|k| (k as f64).ln()).sum::<f64>();
    let ln_choose = |n: usize, k: usize| ln_fact(n) - ln_fact(k) - ln_fact(n - k);
    let (n, failures) = (na + nb, fa + fb);
    let total = ln_choose(n, nb);
    (fb..=nb.min(failures))
        .filter(|&k| nb - k <= n - failures)
        .map(|k| (ln_choose(failures, k) + ln_choose(n - failures, nb - k) - total).exp())
        .sum::<f64>()
        .min(1.0)
}

/// How two results' failure rates compare, where either has attempts:
/// the rates as text, and where both sides ran it more than once, whether
/// B's rose beyond what the attempts can tell apart.
fn rates(x: &CaseResult, y: &CaseResult) -> Option<(String, Option<bool>)> {
    let ((fa, na), (fb, nb)) = (x.failure_counts(), y.failure_counts());
    match (na > 1, nb > 1) {
        (false, false) => None,
        (true, true) => {
            let p = fisher_one_sided(fa, na, fb, nb);
            // (Below the level by more than the logarithms' rounding: 1/20
            // is not below 0.05.)
            let rose = fb * na > fa * nb && p < SIGNIFICANCE - 1e-9;
            Some((
                format!("{fa}/{na} -> {fb}/{nb}, Fisher's exact p = {p:.3} (one-sided)"),
                Some(rose),
            ))
        }
        _ => Some((format!("{fa}/{na} -> {fb}/{nb}"), None)),
    }
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
                let mut change = classify(
                    x.map(|c| c.status),
                    y.map(|c| c.status),
                    label.is_some(),
                    options.allow_skips,
                );
                let rated = match (x, y) {
                    (Some(x), Some(y)) => rates(x, y),
                    _ => None,
                };
                // Rates decide where both sides have them: a regression
                // only beyond what the attempts tell apart.
                if y.is_some_and(|c| c.status != Status::Skip) {
                    match rated.as_ref().and_then(|(_, rose)| *rose) {
                        Some(true) => change = Change::Regression,
                        Some(false) if change == Change::Regression => change = Change::Flaky,
                        _ => {}
                    }
                }
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
                    rates: rated.map(|(text, _)| text),
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
                if let Some(r) = &e.rates {
                    let _ = writeln!(out, "      failure rate: {r}");
                }
                if change == Change::Flaky {
                    if let Some(r) = &e.reason {
                        let _ = writeln!(out, "      {r}");
                    }
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
pub const GROUPS: [Change; 10] = [
    Change::Regression,
    Change::Fixed,
    Change::StillFailing,
    Change::Flaky,
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
            Flaky => Change::Flaky,
            _ => Change::Unchanged,
        },
        // Attempts that disagree are listed apart (the rates, where both
        // sides have them, may still make it a regression).
        (Some(a), Some(Flaky)) if a != Skip => Change::Flaky,
        (Some(Flaky), Some(Fail | Error)) => Change::Flaky,
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
mod rate_tests {
    use super::*;
    use crate::report::{Attempt, RunInfo};

    #[test]
    fn fishers_exact_test_matches_its_hand_computed_values() {
        // 0 of 5 then 5 of 5: 1 / C(10, 5) = 1/252.
        assert!((fisher_one_sided(0, 5, 5, 5) - 1.0 / 252.0).abs() < 1e-12);
        // 0 of 5 then 2 of 5: C(5,2) / C(10,2) = 10/45.
        assert!((fisher_one_sided(0, 5, 2, 5) - 10.0 / 45.0).abs() < 1e-12);
        // 2 of 5 then 5 of 5: C(7,5) / C(10,5) = 21/252.
        assert!((fisher_one_sided(2, 5, 5, 5) - 21.0 / 252.0).abs() < 1e-12);
        // No rise: certain.
        assert!((fisher_one_sided(3, 5, 0, 5) - 1.0).abs() < 1e-12);
    }

    fn rated(id: &str, fails: usize, n: usize) -> CaseResult {
        let status = |failed| if failed { Status::Fail } else { Status::Pass };
        let runs: Vec<CaseResult> = (0..n)
            .map(|k| CaseResult {
                id: id.into(),
                name: id.into(),
                section: "s".into(),
                tier: crate::suite::Tier::Smoke,
                seeds: vec![],
                status: status(k < fails),
                reason: None,
                failures: vec![],
                steps: vec![],
                millis: 1.0,
                known_issue: None,
                known_cause: None,
                attempts: vec![],
            })
            .collect();
        CaseResult::of_attempts(runs).unwrap()
    }

    fn change(a: (usize, usize), b: (usize, usize)) -> Change {
        let report = |c| Report::new(RunInfo::default(), vec![c]);
        let d = Diff::compare(
            &report(rated("x", a.0, a.1)),
            &report(rated("x", b.0, b.1)),
            &KnownFailures::default(),
            Options::default(),
        );
        d.entries[0].change
    }

    #[test]
    fn a_rate_rise_is_a_regression_only_beyond_what_the_attempts_tell_apart() {
        assert_eq!(change((0, 5), (5, 5)), Change::Regression, "p = 0.004");
        assert_eq!(change((0, 3), (3, 3)), Change::Flaky, "p = 0.05: not below");
        assert_eq!(change((0, 5), (2, 5)), Change::Flaky, "p = 0.22");
        assert_eq!(change((2, 5), (5, 5)), Change::Flaky, "p = 0.083");
        assert_eq!(change((0, 10), (8, 10)), Change::Regression);
        assert_eq!(change((5, 5), (5, 5)), Change::StillFailing);
        assert_eq!(change((2, 5), (0, 5)), Change::Fixed);
        assert_eq!(change((0, 5), (0, 5)), Change::Unchanged);
        // One run each: the statuses decide, as before rates.
        assert_eq!(change((0, 1), (1, 1)), Change::Regression);
        // A flaky case against a single passing run: apart.
        assert_eq!(change((0, 1), (1, 3)), Change::Flaky);
        let flaky = rated("x", 1, 3);
        assert_eq!(flaky.status, Status::Flaky);
        assert_eq!(flaky.attempts.len(), 3);
        assert!(matches!(
            flaky.attempts[0],
            Attempt {
                status: Status::Fail,
                ..
            }
        ));
        assert!(flaky
            .reason
            .unwrap()
            .starts_with("flaky: failed 1 of 3 attempts"));
    }
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
