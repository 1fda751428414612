//! The canonical run report (JSON): run metadata and one result per case
//! with its status, what was expected and seen, and every request sent.
//! HTML and JUnit are rendered from it; `afm-test diff` compares two.

pub mod compatibility;
pub mod diff;
pub mod features;
pub mod history;
pub mod html;
pub mod junit;
pub mod known_failures;
pub mod markdown;
pub mod matrix;
pub mod summary;

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, Result};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::clients::ClientOutcome;
use crate::protocol::exchange::Exchange;
use crate::protocol::reply::Reply;
use crate::suite::capabilities::Capabilities;
use crate::suite::checks::{Failure, Grade};
use crate::suite::{Case, Tier};

/// Report format version; readers refuse others.
pub const FORMAT: &str = "afm-test-report/2";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Pass,
    Fail,
    /// Off a published schema's letter only, in ways the official SDKs
    /// accept (`docs/grading.md`); a failure only with `--strict`.
    Spec,
    /// The official clients work and their user loses something (an
    /// error's message or type, the usage); a failure only with `--strict`.
    Degraded,
    /// The server answers a request the spec forbids; a failure only with
    /// `--strict`.
    Lenient,
    Skip,
    /// The case could not be carried out (transport failure).
    Error,
    /// Its attempts disagree (`--repeat`, `--rerun-failures`): some
    /// failed, some did not. A failure, shown apart with its rate.
    Flaky,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Pass => "pass",
            Status::Fail => "fail",
            Status::Spec => "spec",
            Status::Degraded => "degraded",
            Status::Lenient => "lenient",
            Status::Skip => "skip",
            Status::Error => "error",
            Status::Flaky => "flaky",
        }
    }

    pub fn failed(self) -> bool {
        matches!(self, Status::Fail | Status::Error | Status::Flaky)
    }

    /// A deviation that is not a failure unless `--strict`: spec,
    /// degraded, lenient.
    pub fn graded_apart(self) -> bool {
        matches!(self, Status::Spec | Status::Degraded | Status::Lenient)
    }

    /// A case's status from its failures' grades: the worst grade decides,
    /// and a transport error (the case could not be carried out) outranks
    /// them all.
    pub fn graded(transport_error: bool, grades: impl IntoIterator<Item = Grade>) -> Status {
        if transport_error {
            return Status::Error;
        }
        match grades.into_iter().max_by_key(|g| g.weight()) {
            Some(Grade::Fail) => Status::Fail,
            Some(Grade::Degraded) => Status::Degraded,
            Some(Grade::Spec) => Status::Spec,
            Some(Grade::Lenient) => Status::Lenient,
            None => Status::Pass,
        }
    }
}

/// One request of a case and what came back (the reply read the same way
/// for streams and whole bodies).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StepRecord {
    pub path: String,
    pub request: Value,
    pub streamed: bool,
    pub status: u16,
    pub reply: Reply,
    /// Error bodies and non-JSON bodies, verbatim.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transport_error: Option<String>,
    pub millis: f64,
    /// What the official client did with this reply (`--clients`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<ClientOutcome>,
    /// The reply as it came (`afm-test regrade` reads it again).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw: Option<RawReply>,
    /// Which play of the case this step belongs to (a case sent both
    /// whole and streamed plays twice), and whether its checks read it.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub play: usize,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub subject: bool,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// A reply's headers and bytes as they came, with when each piece
/// arrived: enough to read it again exactly (`server::reread`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RawReply {
    /// Lower-case names.
    pub headers: BTreeMap<String, String>,
    /// The bytes, when they are UTF-8.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// The bytes, when they are not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes: Option<Vec<u8>>,
    /// Each piece's end in the bytes and the ms it arrived.
    pub pieces: Vec<(usize, f64)>,
    /// More came than a report keeps (`protocol::exchange::RAW_CAP`):
    /// these bytes are its start.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cut: bool,
}

impl RawReply {
    fn of(ex: &Exchange) -> Self {
        let (text, bytes) = match String::from_utf8(ex.raw.clone()) {
            Ok(t) => (Some(t), None),
            Err(e) => (None, Some(e.into_bytes())),
        };
        RawReply {
            headers: ex.headers.clone(),
            text,
            bytes,
            pieces: ex.raw_pieces.clone(),
            cut: ex.raw_cut,
        }
    }

    /// The bytes as they came.
    pub fn bytes(&self) -> &[u8] {
        match (&self.text, &self.bytes) {
            (Some(t), _) => t.as_bytes(),
            (None, Some(b)) => b,
            (None, None) => &[],
        }
    }
}

impl StepRecord {
    pub fn of(ex: &Exchange) -> StepRecord {
        let reply = Reply::of(ex);
        let keep_body = ex.status >= 400 || !(ex.body.is_object() || ex.body.is_null());
        StepRecord {
            path: ex.path.clone(),
            request: ex.request.clone(),
            streamed: ex.streamed,
            status: ex.status,
            reply,
            body: keep_body.then(|| ex.body.clone()),
            transport_error: ex.transport_error.clone(),
            millis: ex.millis,
            client: None,
            raw: (ex.keep_bytes && ex.status != 0).then(|| RawReply::of(ex)),
            play: 0,
            subject: false,
        }
    }

    /// The exchange this step recorded, its reply read again from the
    /// stored bytes (None: the report kept no bytes: older than them).
    pub fn exchange(&self) -> Option<Exchange> {
        // A step that failed before any reply needs no bytes.
        let raw = match (&self.raw, &self.transport_error) {
            (None, None) => return None,
            (raw, _) => raw.as_ref(),
        };
        let mut ex = Exchange {
            path: self.path.clone(),
            request: self.request.clone(),
            status: self.status,
            headers: raw.map(|r| r.headers.clone()).unwrap_or_default(),
            streamed: self.streamed,
            transport_error: self.transport_error.clone(),
            millis: self.millis,
            // A report graded again keeps them too.
            keep_bytes: true,
            ..Default::default()
        };
        if let Some(raw) = raw {
            crate::server::reread(&mut ex, raw.bytes(), &raw.pieces);
        }
        Some(ex)
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CaseResult {
    pub id: String,
    pub name: String,
    pub section: String,
    pub tier: Tier,
    #[serde(default)]
    pub seeds: Vec<String>,
    pub status: Status,
    /// Why it was skipped or could not run.
    #[serde(default)]
    pub reason: Option<String>,
    pub failures: Vec<Failure>,
    pub steps: Vec<StepRecord>,
    pub millis: f64,
    /// A known-failures entry that attributes this failure to an issue.
    #[serde(default)]
    pub known_issue: Option<String>,
    /// That entry's issue alone (its cause), without the case's reason:
    /// the failures one server bug explains share it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub known_cause: Option<String>,
    /// Every attempt, when the case ran more than once (`--repeat`,
    /// `--rerun-failures`); the steps and failures above are the first
    /// failing attempt's (else the first's).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attempts: Vec<Attempt>,
}

/// One attempt of a case run several times: the whole scenario played
/// once (a concurrency case's parallel requests, a determinism case's
/// repeated ones, all of them: an attempt is what one run of the case
/// does).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Attempt {
    pub status: Status,
    pub millis: f64,
    /// Its first failed check (or why it could not run), as a line.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
}

impl Attempt {
    pub fn of(c: &CaseResult) -> Self {
        Attempt {
            status: c.status,
            millis: c.millis,
            failure: c
                .failures
                .iter()
                .find(|f| c.status.failed() && f.grade == Grade::Fail)
                .map(|f| format!("{}: expected {}; got {}", f.check, f.expected, f.actual))
                .or_else(|| c.reason.clone().filter(|_| c.status.failed())),
        }
    }
}

impl CaseResult {
    /// (failed attempts, attempts): one attempt of its own status when it
    /// ran once.
    pub fn failure_counts(&self) -> (usize, usize) {
        match self.attempts.is_empty() {
            true => (usize::from(self.status.failed()), 1),
            false => (
                self.attempts.iter().filter(|a| a.status.failed()).count(),
                self.attempts.len(),
            ),
        }
    }

    /// The attempts of one case as one result: their common status when
    /// they agree; else `Status::Flaky`, naming how many failed and the
    /// first failing attempt's evidence, with that attempt's steps and
    /// failures. None when there is no attempt.
    pub fn of_attempts(mut runs: Vec<CaseResult>) -> Option<CaseResult> {
        if runs.len() <= 1 {
            return runs.pop();
        }
        let attempts: Vec<Attempt> = runs.iter().map(Attempt::of).collect();
        let failed = attempts.iter().filter(|a| a.status.failed()).count();
        let n = attempts.len();
        let first_failed = runs.iter().position(|r| r.status.failed());
        let agree = runs.iter().all(|r| r.status == runs[0].status);
        let mut out = runs.swap_remove(first_failed.unwrap_or(0));
        out.millis = attempts.iter().map(|a| a.millis).sum();
        if !agree && failed > 0 && failed < n {
            let k = first_failed.expect("one failed") + 1;
            let evidence = attempts[k - 1].failure.clone().unwrap_or_default();
            out.reason = Some(format!(
                "flaky: failed {failed} of {n} attempts (first at attempt {k}: {evidence})"
            ));
            out.status = Status::Flaky;
        }
        out.attempts = attempts;
        Some(out)
    }

    pub fn skipped(section: &str, case: &Case, reason: String) -> Self {
        Self::not_run(section, case, Status::Skip, reason)
    }

    /// A case a stopped run never finished: an error, never a skip (it
    /// proves nothing either way).
    pub fn unfinished(section: &str, case: &Case, why: &str) -> Self {
        Self::not_run(section, case, Status::Error, format!("not run: {why}"))
    }

    fn not_run(section: &str, case: &Case, status: Status, reason: String) -> Self {
        Self::of_case(section, case, status, Some(reason))
    }

    /// A result for `case` with no failures, steps or time yet: the one
    /// place a case's identity is copied into its result.
    pub fn of_case(section: &str, case: &Case, status: Status, reason: Option<String>) -> Self {
        CaseResult {
            id: case.id.clone(),
            name: case.name.clone(),
            section: section.to_string(),
            tier: case.tier,
            seeds: case.seeds.clone(),
            status,
            reason,
            failures: Vec::new(),
            steps: Vec::new(),
            millis: 0.0,
            known_issue: None,
            known_cause: None,
            attempts: Vec::new(),
        }
    }

    /// The content of each step, for output diffs.
    pub fn actual_text(&self) -> String {
        self.steps
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let mut t = format!("step {i} ({}): ", s.status);
                if !s.reply.reasoning.is_empty() {
                    t.push_str(&format!("[reasoning] {} ", s.reply.reasoning));
                }
                t.push_str(&s.reply.content);
                for c in &s.reply.tool_calls {
                    t.push_str(&format!(" [call {}({})]", c.name, c.arguments));
                }
                if let Some(e) = &s.reply.error {
                    t.push_str(&format!(" [error {e}]"));
                }
                t
            })
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// Where and how a run happened.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct RunInfo {
    pub target: String,
    /// The model the server said it served (the `model` of its replies),
    /// else the one requested.
    pub model: String,
    /// The `model` requests named (none: the server's default).
    #[serde(default)]
    pub requested_model: Option<String>,
    /// Engine settings (in-process) or what the user said of the server.
    pub server_flags: Vec<String>,
    pub engine_version: String,
    pub git_commit: Option<String>,
    pub host: String,
    pub started: String,
    pub wall_seconds: f64,
    pub tier: Option<Tier>,
    pub seed: u64,
    pub capabilities: Capabilities,
    /// The reply cap and the request time limit.
    #[serde(default)]
    pub reply_limits: Option<crate::server::ReplyLimits>,
    /// The official clients that graded the run (`--clients`), with
    /// their versions; none: the checks' rules alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clients: Option<String>,
}

#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Summary {
    pub pass: usize,
    pub fail: usize,
    pub skip: usize,
    pub error: usize,
    /// Failures attributed to a known issue.
    pub known: usize,
    /// Cases off a published schema's letter only (`Status::Spec`).
    #[serde(default)]
    pub spec: usize,
    /// Cases whose clients work with something lost (`Status::Degraded`).
    #[serde(default)]
    pub degraded: usize,
    /// Cases answering a request the spec forbids (`Status::Lenient`).
    #[serde(default)]
    pub lenient: usize,
    /// Cases whose attempts disagree (`Status::Flaky`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub flaky: usize,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Report {
    pub format: String,
    pub run: RunInfo,
    pub summary: Summary,
    pub cases: Vec<CaseResult>,
}

impl Report {
    pub fn new(run: RunInfo, cases: Vec<CaseResult>) -> Self {
        let mut summary = Summary::default();
        for c in &cases {
            match c.status {
                Status::Pass => summary.pass += 1,
                Status::Fail => summary.fail += 1,
                Status::Spec => summary.spec += 1,
                Status::Degraded => summary.degraded += 1,
                Status::Lenient => summary.lenient += 1,
                Status::Skip => summary.skip += 1,
                Status::Error => summary.error += 1,
                Status::Flaky => summary.flaky += 1,
            }
            if c.status.failed() && c.known_issue.is_some() {
                summary.known += 1;
            }
        }
        Report {
            format: FORMAT.into(),
            run,
            summary,
            cases,
        }
    }

    pub fn read(path: &Path) -> Result<Report> {
        read_versioned(path, "afm-test", FORMAT, |r: &Report| &r.format)
    }

    pub fn write(&self, path: &Path) -> Result<()> {
        write_json(path, self)
    }

    /// The console's account of a run: each failed case with its failed
    /// checks, then one line of counts naming the report file.
    pub fn text(&self, json_path: &Path) -> String {
        use std::fmt::Write as _;
        let mut out = String::new();
        let shown = |c: &&CaseResult| c.status.failed() || c.status.graded_apart();
        for c in self.cases.iter().filter(shown) {
            let known = c.known_issue.as_ref();
            let known = known.map(|k| format!("  [known: {k}]")).unwrap_or_default();
            let status = c.status.as_str().to_uppercase();
            let _ = writeln!(out, "{status:<5} {}  {}{known}", c.id, c.name);
            for f in &c.failures {
                let _ = writeln!(
                    out,
                    "      {}: expected {}; got {}",
                    f.check, f.expected, f.actual
                );
                if let Some(client) = &f.client {
                    let _ = writeln!(out, "        client: {client}");
                }
            }
            if let Some(reason) = &c.reason {
                let _ = writeln!(out, "      {reason}");
            }
        }
        let s = self.summary;
        let flaky = match s.flaky {
            0 => String::new(),
            n => format!(", {n} flaky"),
        };
        let _ = writeln!(
            out,
            "afm-test: {} passed, {} failed{flaky} ({} known), {} degraded, {} spec, {} lenient, {} errors, {} skipped in {:.1} s; {}",
            s.pass,
            s.fail,
            s.known,
            s.degraded,
            s.spec,
            s.lenient,
            s.error,
            s.skip,
            self.run.wall_seconds,
            json_path.display()
        );
        out
    }

    /// Failures not attributed to a known issue.
    pub fn unexplained_failures(&self) -> usize {
        self.cases
            .iter()
            .filter(|c| c.status.failed() && c.known_issue.is_none())
            .count()
    }
}

/// Reads a report file of `tool` (afm-test, afm-bench), gzipped or not
/// (`.gz`), and refuses other format versions, so an old or foreign file
/// fails with a clear message.
pub fn read_versioned<T: DeserializeOwned>(
    path: &Path,
    tool: &str,
    format: &str,
    format_of: impl Fn(&T) -> &str,
) -> Result<T> {
    let bytes =
        std::fs::read(path).with_context(|| format!("reading report {}", path.display()))?;
    let text = if path.extension().is_some_and(|e| e == "gz") {
        let mut text = String::new();
        std::io::Read::read_to_string(&mut flate2::read::GzDecoder::new(&bytes[..]), &mut text)
            .with_context(|| format!("{} is not gzipped text", path.display()))?;
        text
    } else {
        String::from_utf8(bytes).with_context(|| format!("{} is not text", path.display()))?
    };
    let report: T = serde_json::from_str(&text)
        .with_context(|| format!("{} is not an {tool} report", path.display()))?;
    let found = format_of(&report);
    anyhow::ensure!(
        found == format,
        "{}: report format {found:?}, this {tool} reads {format:?}",
        path.display()
    );
    Ok(report)
}

/// Writes a text file (a page, a summary), naming it in the error.
pub fn write_text(path: &Path, text: &str) -> Result<()> {
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))
}

/// Writes a report as pretty JSON.
pub fn write_json(path: &Path, value: &impl Serialize) -> Result<()> {
    let text = serde_json::to_string_pretty(value)?;
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_worst_grade_decides_and_a_transport_error_outranks_all() {
        use Grade::*;
        assert_eq!(Status::graded(false, []), Status::Pass);
        assert_eq!(Status::graded(false, [Lenient, Spec]), Status::Spec);
        assert_eq!(
            Status::graded(false, [Spec, Degraded, Lenient]),
            Status::Degraded
        );
        assert_eq!(
            Status::graded(false, [Lenient, Fail, Degraded]),
            Status::Fail
        );
        assert_eq!(Status::graded(false, [Lenient]), Status::Lenient);
        assert_eq!(Status::graded(true, []), Status::Error);
        assert_eq!(Status::graded(true, [Fail]), Status::Error);
    }
}
