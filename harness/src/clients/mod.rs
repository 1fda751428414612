//! The official client libraries as judges. With `--clients PYTHON`, each
//! exchange of a case that did not pass is replayed through openai-python
//! or anthropic-python (`replay.py`: the recorded reply served from
//! loopback, the call a user makes for it), and the grade says what a user
//! of the server's most common clients saw (`grade`, `docs/grading.md`).

pub mod grade;

use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::{Arc, Mutex};

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::protocol::exchange::Exchange;

const SCRIPT: &str = include_str!("replay.py");

/// What one client did with one recorded reply.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClientOutcome {
    /// The client and its version, e.g. `openai-python 3.54.0`.
    pub client: String,
    /// The SDK call made, e.g. `chat.completions.stream`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call: Option<String>,
    /// What the call raised (or the user's first read of its value).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raised: Option<Raised>,
    /// What the user reads from the returned value: content, reasoning,
    /// tool calls, finish reason, usage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<Value>,
    /// Where the values the SDK hands its user break the types it
    /// declares for them (`field: why`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rejected: Vec<String>,
    /// What the user of this call loses that the reply carried (fields of
    /// `value`): the chat `.stream()` helper skips chunks whose `object`
    /// is not `chat.completion.chunk`, with whatever they carried.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub lost: Vec<String>,
}

/// An exception of the client.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Raised {
    /// The exception's class, e.g. `BadRequestError`.
    pub class: String,
    pub message: String,
    /// The HTTP status an `APIStatusError` carries.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    /// The error's `message`, `type`, `param` and `code` as the exception
    /// exposes them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fields: Option<Value>,
}

impl ClientOutcome {
    /// One line of evidence: what the client raised, or what its user read.
    pub fn quote(&self) -> String {
        if let Some(r) = &self.raised {
            let status = r.status.map(|s| format!(" ({s})")).unwrap_or_default();
            let lost = match lost_fields(r.fields.as_ref()).as_slice() {
                [] => String::new(),
                empty => format!(" (error {} empty)", empty.join(", ")),
            };
            return format!(
                "{} raised {}{status}: {}{lost}",
                self.client,
                r.class,
                short(&r.message, 160)
            );
        }
        let call = self.call.as_deref().unwrap_or("the call");
        let value = self
            .value
            .as_ref()
            .map(|v| short(&v.to_string(), 200))
            .unwrap_or_default();
        let rejected = match self.rejected.is_empty() {
            true => String::new(),
            false => format!("; its types reject {}", self.rejected.join("; ")),
        };
        let lost = match self.lost.is_empty() {
            true => String::new(),
            false => format!("; its user loses the reply's {}", self.lost.join(", ")),
        };
        format!("{} {call} returned {value}{rejected}{lost}", self.client)
    }
}

/// What the user of an exception loses: its error's message or type,
/// named (empty: nothing).
pub(crate) fn lost_fields(fields: Option<&Value>) -> Vec<&'static str> {
    ["message", "type"]
        .into_iter()
        .filter(|k| fields.and_then(|f| f.get(*k)).is_none_or(Value::is_null))
        .collect()
}

fn short(s: &str, limit: usize) -> String {
    match s.char_indices().nth(limit) {
        Some((i, _)) => format!("{}...", &s[..i]),
        None => s.to_string(),
    }
}

/// A running `replay.py`: one request line, one answer line.
pub struct Clients {
    io: Mutex<(Child, ChildStdin, BufReader<ChildStdout>)>,
    /// `openai-python X, anthropic-python Y`, for the report.
    pub versions: String,
}

impl Clients {
    /// Starts the replay under `python`, which must import `openai`,
    /// `anthropic` and `pydantic`; the error says what it printed if not.
    pub fn start(python: &Path) -> Result<Arc<Clients>> {
        let mut child = Command::new(python)
            .arg("-c")
            .arg(SCRIPT)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .with_context(|| format!("--clients: cannot start {}", python.display()))?;
        let stdin = child.stdin.take().expect("piped");
        let mut stdout = BufReader::new(child.stdout.take().expect("piped"));
        let mut stderr = child.stderr.take().expect("piped");
        let mut first = String::new();
        stdout.read_line(&mut first)?;
        let ready: Value = serde_json::from_str(&first).unwrap_or(Value::Null);
        let Some(v) = ready.get("ready") else {
            let mut why = String::new();
            let _ = child.wait();
            let _ = stderr.read_to_string(&mut why);
            let last = why.lines().last().unwrap_or("it printed nothing");
            bail!(
                "--clients: {} cannot replay through the official clients \
                 (it needs the openai and anthropic packages): {last}",
                python.display()
            );
        };
        // Python's warnings must never fill the pipe and stall it.
        std::thread::spawn(move || std::io::copy(&mut stderr, &mut std::io::sink()));
        let version = |k: &str| v.get(k).and_then(Value::as_str).unwrap_or("?").to_string();
        let versions = format!(
            "openai-python {}, anthropic-python {}",
            version("openai"),
            version("anthropic")
        );
        Ok(Arc::new(Clients {
            io: Mutex::new((child, stdin, stdout)),
            versions,
        }))
    }

    /// What the client of `ex`'s protocol does with its reply; `None` for
    /// paths no client call maps to (health, metrics) or when the replay
    /// itself broke (then the rule-based grade stands).
    pub fn replay(&self, ex: &Exchange) -> Option<ClientOutcome> {
        let line = serde_json::to_string(ex).ok()?;
        let mut io = self.io.lock().unwrap_or_else(|e| e.into_inner());
        let (_, stdin, stdout) = &mut *io;
        writeln!(stdin, "{line}").ok()?;
        stdin.flush().ok()?;
        let mut answer = String::new();
        stdout.read_line(&mut answer).ok()?;
        serde_json::from_str(&answer).ok()
    }
}

impl Drop for Clients {
    fn drop(&mut self) {
        let io = self.io.get_mut().unwrap_or_else(|e| e.into_inner());
        let _ = io.0.kill();
        let _ = io.0.wait();
    }
}
