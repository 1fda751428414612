//! The coding agents as their users run them: each one's headless command,
//! with only its provider pointed at a server, in a scratch folder whose
//! home holds its settings (nothing of the machine's own home is read).

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use tokio::process::Command;

/// One agent CLI.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Agent {
    Codex,
    ClaudeCode,
    OpenCode,
}

impl Agent {
    pub const ALL: [Agent; 3] = [Agent::Codex, Agent::ClaudeCode, Agent::OpenCode];

    pub fn name(self) -> &'static str {
        match self {
            Agent::Codex => "codex",
            Agent::ClaudeCode => "claude-code",
            Agent::OpenCode => "opencode",
        }
    }

    pub fn from_name(name: &str) -> Option<Agent> {
        Agent::ALL.into_iter().find(|a| a.name() == name)
    }

    /// The npm package and the version afm tests (`scripts/agents/install.sh`).
    pub fn package(self) -> &'static str {
        match self {
            Agent::Codex => "@openai/codex@0.171.0",
            Agent::ClaudeCode => "@anthropic-ai/claude-code@2.1.332",
            Agent::OpenCode => "opencode-ai@1.18.33",
        }
    }

    /// Its command's name in the npm package's bin folder.
    pub fn command(self) -> &'static str {
        match self {
            Agent::Codex => "codex",
            Agent::ClaudeCode => "claude",
            Agent::OpenCode => "opencode",
        }
    }

    /// The protocol it speaks, as the report names it.
    pub fn protocol(self) -> &'static str {
        match self {
            Agent::Codex => "responses",
            Agent::ClaudeCode => "messages",
            Agent::OpenCode => "chat completions",
        }
    }

    /// Its shell tool, whose call the shell task must see.
    pub fn shell_tools(self) -> &'static [&'static str] {
        match self {
            Agent::Codex => &["exec_command", "shell", "local_shell"],
            Agent::ClaudeCode => &["Bash"],
            Agent::OpenCode => &["bash"],
        }
    }
}

/// How one run of an agent ended.
#[derive(Debug, Clone)]
pub struct RunOutput {
    /// `None`: killed at the time limit.
    pub exit_code: Option<i32>,
    pub output: String,
    pub seconds: f64,
}

/// Runs `agent` on `prompt` in `scratch` against `base` (the recorder),
/// for `model`, within `limit`.
pub async fn run(
    agent: Agent,
    bin: &Path,
    base: &str,
    model: &str,
    prompt: &str,
    scratch: &Path,
    limit: Duration,
) -> Result<RunOutput> {
    let home = scratch.join("home");
    let work = scratch.join("work");
    std::fs::create_dir_all(&home)?;
    std::fs::create_dir_all(&work)?;
    // Something for the shell task to list.
    std::fs::write(work.join("README.md"), "A project.\n")?;
    std::fs::write(work.join("main.py"), "print('hi')\n")?;
    let program: PathBuf = bin.join(agent.command());
    let mut cmd = Command::new(&program);
    // PWD too: OpenCode finds its project (and opencode.json) by it.
    cmd.current_dir(&work)
        .env("PWD", &work)
        .env("HOME", &home)
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    match agent {
        Agent::Codex => {
            let codex_home = home.join(".codex");
            std::fs::create_dir_all(&codex_home)?;
            std::fs::write(
                codex_home.join("config.toml"),
                format!(
                    "model = {model:?}\nmodel_provider = \"local\"\napproval_policy = \"never\"\n\
                     sandbox_mode = \"read-only\"\n[model_providers.local]\nname = \"local\"\n\
                     base_url = \"{base}/v1\"\nwire_api = \"responses\"\n"
                ),
            )?;
            cmd.env("CODEX_HOME", &codex_home)
                .args(["exec", "--skip-git-repo-check", prompt]);
        }
        Agent::ClaudeCode => {
            cmd.env("ANTHROPIC_BASE_URL", base)
                .env("ANTHROPIC_API_KEY", "sk-local")
                .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
                .env("DISABLE_TELEMETRY", "1")
                .env("DISABLE_AUTOUPDATER", "1")
                .args(["-p", prompt, "--model", model, "--allowedTools", "Bash(ls)"]);
        }
        Agent::OpenCode => {
            let mut models = serde_json::Map::new();
            models.insert(model.to_string(), serde_json::json!({"name": model}));
            let config = serde_json::json!({
                "provider": {"local": {
                    "npm": "@ai-sdk/openai-compatible", "name": "local",
                    "options": {"baseURL": format!("{base}/v1"), "apiKey": "sk-local"},
                    "models": models,
                }},
                "model": format!("local/{model}"),
                "autoupdate": false,
                "share": "disabled",
            });
            std::fs::write(work.join("opencode.json"), config.to_string())?;
            cmd.args(["run", prompt]);
        }
    }
    let start = Instant::now();
    let child = cmd.spawn().with_context(|| {
        format!(
            "starting {} (scripts/agents/install.sh installs it)",
            program.display()
        )
    })?;
    let (exit_code, output) = match tokio::time::timeout(limit, child.wait_with_output()).await {
        Ok(out) => {
            let out = out?;
            let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
            text.push_str(&String::from_utf8_lossy(&out.stderr));
            (out.status.code(), text)
        }
        Err(_) => (None, format!("stopped after {} s", limit.as_secs())),
    };
    // The scratch folder is this run's, not something to publish.
    let output = output.replace(&scratch.display().to_string(), "<scratch>");
    Ok(RunOutput {
        exit_code,
        output: strip_ansi(&output),
        seconds: start.elapsed().as_secs_f64(),
    })
}

/// Text without terminal colour codes (OpenCode prints them regardless).
fn strip_ansi(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' && chars.peek() == Some(&'[') {
            chars.next();
            for d in chars.by_ref() {
                if d.is_ascii_alphabetic() {
                    break;
                }
            }
            continue;
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn colour_codes_are_stripped() {
        assert_eq!(
            super::strip_ansi("\u{1b}[0m$ \u{1b}[32mls\u{1b}[0m"),
            "$ ls"
        );
    }
}
