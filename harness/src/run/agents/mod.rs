//! `afm-test agents`: the real coding agents (Codex CLI, Claude Code,
//! OpenCode), run headless as their users run them, against any server,
//! each graded `ready`, `broken` (the server refused or failed a request,
//! or the agent could not go on: named with its first error and the request
//! that caused it) or `unproven` (every request was served, but the model
//! did not do a task, e.g. called no shell tool: a small model's doing,
//! never counted against the server).
//!
//! Every agent gets the same tasks, each in a fresh scratch folder, through
//! a forwarding [`recorder`] that keeps each request and its answer:
//! - `text`: a greeting, answered with text;
//! - `shell`: "list the files here": the agent calls its own shell tool and
//!   sends the result back (the round trip);
//! - `cached`: that second turn reuses the first turn's prompt from the
//!   server's prefix cache, as the server reports it.

pub mod clients;
pub mod recorder;
mod report;

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use serde::Serialize;
use serde_json::Value;

use crate::server::process::ServerProcess;
use crate::server::Target;

pub use clients::Agent;
use recorder::{Recorded, Recorder};
pub use report::markdown as report_markdown;

/// `afm-test agents` flags.
#[derive(clap::Args, Debug, Clone)]
pub struct AgentsArgs {
    /// The server (its base URL, e.g. http://127.0.0.1:8080).
    #[arg(long, conflicts_with = "server")]
    pub url: Option<String>,
    /// A command that starts the server, with {port} and {model}.
    #[arg(long)]
    pub server: Option<String>,
    /// The model to ask for (default: the first `GET /v1/models` lists).
    #[arg(long)]
    pub model: Option<String>,
    /// Agents to run: codex, claude-code, opencode (default: all).
    #[arg(long = "agent", value_name = "AGENT")]
    pub agents: Vec<String>,
    /// Where the agents' commands are (default: $AFM_AGENTS_BIN, else
    /// .cache/agents/node_modules/.bin, where scripts/agents/install.sh
    /// puts them).
    #[arg(long)]
    pub bin: Option<PathBuf>,
    /// Seconds one task may take.
    #[arg(long, default_value_t = 900)]
    pub task_timeout: u64,
    /// Where report.json, report.md and each task's requests go.
    #[arg(long, default_value = "afm-test-agents")]
    pub out: PathBuf,
    /// Also write a JUnit XML file (a test case per agent and task).
    #[arg(long)]
    pub junit: Option<PathBuf>,
    /// Also write the Markdown summary here (e.g. $GITHUB_STEP_SUMMARY).
    #[arg(long)]
    pub summary: Option<PathBuf>,
}

/// The tasks every agent is given.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Task {
    Text,
    Shell,
    Cached,
}

impl Task {
    pub fn name(self) -> &'static str {
        match self {
            Task::Text => "text",
            Task::Shell => "shell",
            Task::Cached => "cached",
        }
    }
}

const TEXT_PROMPT: &str = "Say hello.";
/// The shell task names the agent's own shell tool, so a small model
/// knows which of the many offered tools is meant.
fn shell_prompt(agent: Agent) -> String {
    format!(
        "List the files here: call the {} tool with the command ls.",
        agent.shell_tools()[0]
    )
}

/// Whose doing a failed task is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Blame {
    /// A request refused or failed, a broken stream, the agent stopped.
    Server,
    /// Every request served; the model did not do the task.
    Model,
}

/// One task's outcome.
#[derive(Debug, Clone, Serialize)]
pub struct TaskResult {
    pub task: Task,
    pub passed: bool,
    /// Why it failed, in words, and whose doing that is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub blame: Option<Blame>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    pub seconds: f64,
    /// The agent's last lines.
    pub output_tail: String,
    pub requests: usize,
    /// Seconds the agent's first turn (its first request offering tools)
    /// took to its reply's end, and the cached prompt tokens it reported.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_turn_seconds: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_turn_cached_tokens: Option<u64>,
}

/// One agent's grade.
#[derive(Debug, Clone, Serialize)]
pub struct AgentResult {
    pub agent: String,
    pub package: String,
    pub protocol: String,
    /// `ready`, `broken` or `unproven`.
    pub grade: String,
    /// A broken agent's first error, and the request that caused it (an
    /// unproven one's first task the model did not do).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_error: Option<String>,
    pub tasks: Vec<TaskResult>,
}

/// The whole run.
#[derive(Debug, Clone, Serialize)]
pub struct AgentsReport {
    pub target: String,
    pub model: String,
    pub agents: Vec<AgentResult>,
}

impl AgentsReport {
    /// Whether the server broke an agent (an unproven one is the model's).
    pub fn any_broken(&self) -> bool {
        self.agents.iter().any(|a| a.grade == "broken")
    }
}

/// Runs the agents and writes the report; `Ok(report)` whatever the grades.
pub async fn run(args: &AgentsArgs) -> Result<AgentsReport> {
    let agents: Vec<Agent> = match args.agents.is_empty() {
        true => Agent::ALL.to_vec(),
        false => args
            .agents
            .iter()
            .map(|n| {
                Agent::from_name(n).with_context(|| {
                    format!("--agent: unknown agent '{n}' (codex, claude-code, opencode)")
                })
            })
            .collect::<Result<_>>()?,
    };
    let bin = match &args.bin {
        Some(b) => b.clone(),
        None => std::env::var_os("AFM_AGENTS_BIN")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(".cache/agents/node_modules/.bin")),
    };
    for a in &agents {
        let program = bin.join(a.command());
        if !program.exists() {
            bail!(
                "{} is not installed at {} (scripts/agents/install.sh installs {}, or pass --bin)",
                a.name(),
                program.display(),
                a.package()
            );
        }
    }
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("creating {}", args.out.display()))?;
    let mut process = None;
    let (base, target_name) = match (&args.url, &args.server) {
        (Some(url), _) => (url.trim_end_matches('/').to_string(), url.clone()),
        (None, Some(cmd)) => {
            let mut p =
                ServerProcess::start(cmd, args.model.as_deref(), &args.out.join("server.log"))?;
            let t = Target::http(&p.base, None);
            p.wait_ready(&t, Duration::from_secs(600)).await?;
            let base = p.base.clone();
            let name = p.command.clone();
            process = Some(p);
            (base, name)
        }
        (None, None) => bail!("afm-test agents needs --url or --server"),
    };
    let model = match &args.model {
        Some(m) => m.clone(),
        None => Target::http(&base, None)
            .listed_model()
            .await?
            .context("the server lists no model; pass --model")?,
    };
    let mut results = Vec::new();
    for agent in agents {
        results.push(run_agent(agent, &bin, &base, &model, args).await?);
    }
    drop(process);
    let report = AgentsReport {
        target: target_name,
        model,
        agents: results,
    };
    report::write(&report, args)?;
    Ok(report)
}

async fn run_agent(
    agent: Agent,
    bin: &Path,
    base: &str,
    model: &str,
    args: &AgentsArgs,
) -> Result<AgentResult> {
    let limit = Duration::from_secs(args.task_timeout);
    let mut tasks: Vec<TaskResult> = Vec::new();
    let mut shell_requests = Vec::new();
    for task in [Task::Text, Task::Shell] {
        let prompt = match task {
            Task::Shell => shell_prompt(agent),
            _ => TEXT_PROMPT.to_string(),
        };
        let recorder = Recorder::start(base).await?;
        // One folder per agent, emptied between tasks: the agents put
        // their working folder in the system prompt, so only the same
        // path lets a later task's prompt share the earlier one's prefix.
        let scratch = tempdir(&format!("afm-agents-{}", agent.name()))?;
        let out = clients::run(agent, bin, &recorder.base, model, &prompt, &scratch, limit).await?;
        let _ = std::fs::remove_dir_all(&scratch);
        let requests = recorder.requests();
        save(&args.out.join(agent.name()).join(task.name()), &requests)?;
        let failure = judge(agent, task, &out, &requests);
        let first_turn = requests
            .iter()
            .find(|r| r.body["tools"].as_array().is_some_and(|t| !t.is_empty()));
        tasks.push(TaskResult {
            task,
            passed: failure.is_none(),
            blame: failure.as_ref().map(|f| f.0),
            failure: failure.map(|f| f.1),
            exit_code: out.exit_code,
            seconds: out.seconds,
            output_tail: tail(&out.output, 20),
            requests: requests.len(),
            first_turn_seconds: first_turn.map(|r| r.millis / 1e3),
            first_turn_cached_tokens: first_turn.and_then(|r| r.cached_tokens),
        });
        if task == Task::Shell {
            shell_requests = requests;
        }
    }
    // The shell task's second turn, from the cache.
    let cached = cache_failure(&shell_requests);
    tasks.push(TaskResult {
        task: Task::Cached,
        passed: cached.is_none(),
        blame: cached.as_ref().map(|f| f.0),
        failure: cached.map(|f| f.1),
        exit_code: None,
        seconds: 0.0,
        output_tail: String::new(),
        requests: shell_requests.len(),
        first_turn_seconds: None,
        first_turn_cached_tokens: None,
    });
    let (grade, first_error) = grade(&tasks);
    Ok(AgentResult {
        agent: agent.name().into(),
        package: agent.package().into(),
        protocol: agent.protocol().into(),
        grade: grade.into(),
        first_error,
        tasks,
    })
}

/// `broken` on any failure of the server's, else `unproven` on any of
/// the model's, else `ready`; with the first such failure.
fn grade(tasks: &[TaskResult]) -> (&'static str, Option<String>) {
    for (blame, grade) in [(Blame::Server, "broken"), (Blame::Model, "unproven")] {
        if let Some(t) = tasks.iter().find(|t| t.blame == Some(blame)) {
            let why = t.failure.as_deref().unwrap_or_default();
            return (grade, Some(format!("{}: {why}", t.task.name())));
        }
    }
    ("ready", None)
}

/// Why a task failed, if it did: the first request the server refused or
/// failed (with what it was), else what the agent itself showed.
pub fn judge(
    agent: Agent,
    task: Task,
    out: &clients::RunOutput,
    requests: &[Recorded],
) -> Option<(Blame, String)> {
    if let Some((k, r)) = requests
        .iter()
        .enumerate()
        .find(|(_, r)| r.status >= 400 || r.error.is_some())
    {
        return Some((
            Blame::Server,
            format!(
                "{} on {} {} (request {} of {}, {}): {}",
                match r.status {
                    0 => "no answer".to_string(),
                    s => format!("HTTP {s}"),
                },
                r.method,
                r.path,
                k + 1,
                requests.len(),
                describe(&r.body),
                r.error.as_deref().map(first_line).unwrap_or_default()
            ),
        ));
    }
    if requests.is_empty() {
        return Some((
            Blame::Server,
            format!(
                "the agent sent no request; it printed: {}",
                first_line(&tail(&out.output, 5))
            ),
        ));
    }
    match out.exit_code {
        None => {
            return Some((
                Blame::Server,
                "the agent did not finish within the time limit".into(),
            ))
        }
        Some(0) => {}
        Some(code) => {
            return Some((
                Blame::Server,
                format!(
                    "the agent exited with code {code}: {}",
                    first_line(&tail(&out.output, 5))
                ),
            ))
        }
    }
    if task == Task::Shell
        && !requests
            .iter()
            .any(|r| carries_shell_result(agent, &r.body))
    {
        return Some((Blame::Model, format!(
            "no request carried the result of a call to its shell tool ({}): the model did not call it",
            agent.shell_tools().join(", ")
        )));
    }
    None
}

/// The cached task: a turn after the first reports cached prompt tokens.
/// Not reached is the shell task's failure, whoever's that was.
fn cache_failure(shell: &[Recorded]) -> Option<(Blame, String)> {
    let later: Vec<&Recorded> = shell
        .iter()
        .filter(|r| r.status == 200 && carries_any_result(&r.body))
        .collect();
    if later.is_empty() {
        return Some((
            Blame::Model,
            "not reached: the shell task sent no second turn".into(),
        ));
    }
    match later.iter().filter_map(|r| r.cached_tokens).max() {
        Some(n) if n > 0 => None,
        Some(_) => Some((
            Blame::Server,
            "the second turn reported 0 cached tokens".into(),
        )),
        None => Some((
            Blame::Server,
            "the second turn's reply reported no cached-token count".into(),
        )),
    }
}

/// A request's shape in a few words: its size, tools and messages.
fn describe(body: &Value) -> String {
    let size = body.to_string().len();
    let tools = body["tools"].as_array().map_or(0, Vec::len);
    let turns = body["messages"]
        .as_array()
        .or_else(|| body["input"].as_array())
        .map_or(0, Vec::len);
    format!(
        "{:.1} KB, {tools} tools, {turns} messages",
        size as f64 / 1024.0
    )
}

/// Whether a request sends back the result of a call of one of `agent`'s
/// shell tools.
fn carries_shell_result(agent: Agent, body: &Value) -> bool {
    let shell = agent.shell_tools();
    // The ids of shell calls, then a result answering one of them.
    let mut ids = Vec::new();
    for m in body["messages"].as_array().into_iter().flatten() {
        for c in m["tool_calls"].as_array().into_iter().flatten() {
            if shell.contains(&c["function"]["name"].as_str().unwrap_or_default()) {
                ids.extend(c["id"].as_str());
            }
        }
        for b in m["content"].as_array().into_iter().flatten() {
            if b["type"] == "tool_use" && shell.contains(&b["name"].as_str().unwrap_or_default()) {
                ids.extend(b["id"].as_str());
            }
        }
    }
    for item in body["input"].as_array().into_iter().flatten() {
        if item["type"] == "function_call"
            && shell.contains(&item["name"].as_str().unwrap_or_default())
        {
            ids.extend(item["call_id"].as_str());
        }
    }
    let answered = |id: Option<&str>| id.is_some_and(|id| ids.contains(&id));
    body["messages"].as_array().into_iter().flatten().any(|m| {
        answered(m["tool_call_id"].as_str())
            || m["content"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|b| b["type"] == "tool_result" && answered(b["tool_use_id"].as_str()))
    }) || body["input"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|i| i["type"] == "function_call_output" && answered(i["call_id"].as_str()))
}

/// Whether a request sends back any tool's result (a later turn).
fn carries_any_result(body: &Value) -> bool {
    body["messages"].as_array().into_iter().flatten().any(|m| {
        m["role"] == "tool"
            || m["content"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|b| b["type"] == "tool_result")
    }) || body["input"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|i| i["type"] == "function_call_output")
}

fn first_line(s: &str) -> String {
    let line = s
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or_default();
    line.chars().take(300).collect()
}

fn tail(s: &str, lines: usize) -> String {
    let all: Vec<&str> = s.lines().filter(|l| !l.trim().is_empty()).collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

fn save(dir: &Path, requests: &[Recorded]) -> Result<()> {
    std::fs::create_dir_all(dir)?;
    for (k, r) in requests.iter().enumerate() {
        let name = format!(
            "{:03}-{}.json",
            k + 1,
            r.path
                .split('?')
                .next()
                .unwrap_or("")
                .trim_matches('/')
                .replace('/', "_")
        );
        std::fs::write(dir.join(name), serde_json::to_string_pretty(r)?)?;
    }
    Ok(())
}

/// An empty folder named for this run and `prefix`.
fn tempdir(prefix: &str) -> Result<PathBuf> {
    let dir = std::env::temp_dir().join(format!("{prefix}-{}", std::process::id()));
    if dir.exists() {
        std::fs::remove_dir_all(&dir)?;
    }
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn recorded(status: u16, body: Value, error: Option<&str>) -> Recorded {
        Recorded {
            method: "POST".into(),
            path: "/v1/messages?beta=true".into(),
            body,
            status,
            error: error.map(str::to_string),
            cached_tokens: None,
            millis: 1.0,
        }
    }

    fn finished() -> clients::RunOutput {
        clients::RunOutput {
            exit_code: Some(0),
            output: "done".into(),
            seconds: 1.0,
        }
    }

    #[test]
    fn a_refused_request_is_named_with_what_it_was() {
        let body =
            json!({"tools": [{"name": "Bash"}], "messages": [{"role": "user", "content": "hi"}]});
        let r = recorded(
            400,
            body,
            Some("{\"type\":\"error\",\"error\":{\"message\":\"thinking.type: bad\"}}"),
        );
        let (blame, why) = judge(Agent::ClaudeCode, Task::Text, &finished(), &[r]).unwrap();
        assert_eq!(blame, Blame::Server);
        assert!(
            why.starts_with("HTTP 400 on POST /v1/messages?beta=true (request 1 of 1"),
            "{why}"
        );
        assert!(
            why.contains("1 tools, 1 messages") && why.contains("thinking.type"),
            "{why}"
        );
    }

    #[test]
    fn the_shell_task_needs_the_shell_tools_result_sent_back() {
        let first = recorded(
            200,
            json!({"messages": [{"role": "user", "content": "ls"}]}),
            None,
        );
        let (blame, why) = judge(
            Agent::OpenCode,
            Task::Shell,
            &finished(),
            std::slice::from_ref(&first),
        )
        .unwrap();
        assert_eq!(
            blame,
            Blame::Model,
            "a model that calls no tool is not the server's doing"
        );
        assert!(why.contains("did not call it"), "{why}");
        let second = recorded(
            200,
            json!({"messages": [
                {"role": "user", "content": "ls"},
                {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "bash", "arguments": "{}"}}]},
                {"role": "tool", "tool_call_id": "c1", "content": "README.md"}
            ]}),
            None,
        );
        assert_eq!(
            judge(
                Agent::OpenCode,
                Task::Shell,
                &finished(),
                &[first, second.clone()]
            ),
            None
        );
        assert!(cache_failure(std::slice::from_ref(&second))
            .unwrap()
            .1
            .contains("no cached-token count"));
        let mut hit = second;
        hit.cached_tokens = Some(900);
        assert_eq!(cache_failure(&[hit]), None);
    }
}
