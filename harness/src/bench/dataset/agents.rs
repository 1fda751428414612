//! Coding-agent sessions (`--prompts agents`): what Codex, Claude Code and
//! OpenCode send on every turn, whole (their instructions, context and
//! tools: `fixtures/agents/sessions.json`, made from the captured requests
//! by `scripts/agents/make_sessions.py`), then a session that grows as an
//! agent's does: a call of the agent's own shell tool and the command's
//! output, turn after turn.
//!
//! The calls are scripted, not the model's: the session grows the same way
//! on every server whatever its model answers, so turn t's prompt is the
//! same length everywhere and a perfect cache holds all of the turn before.
//! Conversation i plays agent i mod 3. The level's salt opens the
//! instructions: the sessions of one agent in a level share them, as an
//! agent's sessions do, and no level finds them cached by an earlier one.

use std::sync::OnceLock;

use serde::Deserialize;
use serde_json::{json, Value};

use super::Conversation;
use crate::suite::filler;

const SESSIONS: &str = include_str!("../../../../fixtures/agents/sessions.json");

/// The task each session opens with.
const TASK: &str = "List the files here, read the main module and its tests, and tell me \
what the project does and what is left to do.";

/// The shell commands of the scripted turns, in order (then again).
const COMMANDS: [&str; 6] = [
    "ls -la",
    "cat src/app.py",
    "grep -rn 'def ' src tests",
    "cat tests/test_app.py",
    "git log --oneline -n 40",
    "python -m pytest -q",
];

/// Lines of each command's output (~12 tokens a line).
const OUTPUT_LINES: usize = 40;

#[derive(Debug, Deserialize)]
pub struct Session {
    pub agent: String,
    pub system: String,
    pub context: Vec<String>,
    pub tools: Value,
    pub shell_tool: String,
    pub shell_argument: String,
}

#[derive(Deserialize)]
struct File {
    sessions: Vec<Session>,
}

/// The captured agents' sessions, in conversation order.
pub fn sessions() -> &'static [Session] {
    static PARSED: OnceLock<Vec<Session>> = OnceLock::new();
    PARSED.get_or_init(|| {
        serde_json::from_str::<File>(SESSIONS)
            .expect("fixtures/agents/sessions.json is afm's own file")
            .sessions
    })
}

/// Conversation `i` of a level salted `salt`, with `turns` requests: the
/// task, then `turns - 1` shell calls with their output.
pub fn conversation(i: usize, turns: usize, salt: &str) -> Conversation {
    let s = &sessions()[i % sessions().len()];
    let mut history = vec![json!({
        "role": "system",
        "content": format!("[{salt}]\n{}", s.system),
    })];
    history.extend(
        s.context
            .iter()
            .map(|c| json!({"role": "user", "content": c})),
    );
    let mut messages = vec![json!({"role": "user", "content": format!("{TASK} (session {i})")})];
    let mut replies = Vec::new();
    for t in 1..turns.max(1) {
        let command = COMMANDS[(t - 1) % COMMANDS.len()];
        let id = format!("call_{i}_{t}");
        let mut args = serde_json::Map::new();
        args.insert(s.shell_argument.clone(), command.into());
        replies.push(json!({
            "role": "assistant",
            "content": "",
            "tool_calls": [{
                "id": id,
                "type": "function",
                "function": {"name": s.shell_tool, "arguments": Value::Object(args).to_string()},
            }],
        }));
        messages.push(json!({
            "role": "tool",
            "tool_call_id": id,
            "content": output_of(command, i, t),
        }));
    }
    Conversation {
        history,
        turns: messages,
        tools: Some(s.tools.clone()),
        max_tokens: None,
        prefixes: Vec::new(),
        replies,
    }
}

/// A command's output: plausible lines of its kind, unique to the turn.
fn output_of(command: &str, i: usize, t: usize) -> String {
    let sentences = filler::sentences(OUTPUT_LINES);
    let lines = sentences.split(". ").enumerate().map(|(k, text)| {
        let text = text.trim_end_matches('.');
        match command.split_whitespace().next() {
            Some("ls") => format!(
                "-rw-r--r-- 1 dev dev {} Dec  1 12:{k:02} module_{t}_{k}.py",
                900 + 37 * k
            ),
            Some("grep") => format!(
                "src/module_{k}.py:{}: def step_{k}(state):  # {text}",
                10 + 3 * k
            ),
            Some("git") => format!(
                "{:07x} {text}",
                (i * 7919 + t * 104_729 + k * 31) & 0xfff_ffff
            ),
            Some("python") => format!(
                "tests/test_app.py::test_{k} {}",
                if k % 9 == 4 { "FAILED" } else { "PASSED" }
            ),
            _ => format!(
                "def step_{t}_{k}(state):\n    \"\"\"{text}.\"\"\"\n    return state.advance({k})"
            ),
        }
    });
    lines.collect::<Vec<_>>().join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_agent_brings_its_instructions_and_its_shell_tool() {
        let agents: Vec<&str> = sessions().iter().map(|s| s.agent.as_str()).collect();
        assert_eq!(agents, ["codex", "claude", "opencode"]);
        for s in sessions() {
            assert!(
                s.system.len() > 5_000,
                "{}: instructions kept whole",
                s.agent
            );
            let names: Vec<&str> = s
                .tools
                .as_array()
                .unwrap()
                .iter()
                .filter_map(|t| t["function"]["name"].as_str())
                .collect();
            assert!(
                names.contains(&s.shell_tool.as_str()),
                "{}: {names:?}",
                s.agent
            );
        }
    }

    #[test]
    fn a_session_grows_by_a_shell_call_and_its_output() {
        let c = conversation(4, 3, "L1");
        assert_eq!(sessions()[4 % 3].agent, "claude");
        assert!(c.history[0]["content"]
            .as_str()
            .unwrap()
            .starts_with("[L1]\n"));
        assert_eq!(c.turns.len(), 3);
        assert_eq!(c.replies.len(), 2);
        assert_eq!(c.turns[0]["role"], "user");
        for (reply, result) in c.replies.iter().zip(&c.turns[1..]) {
            let call = &reply["tool_calls"][0];
            assert_eq!(call["function"]["name"], "Bash");
            let args: Value =
                serde_json::from_str(call["function"]["arguments"].as_str().unwrap()).unwrap();
            assert!(args["command"].is_string());
            assert_eq!(result["role"], "tool");
            assert_eq!(result["tool_call_id"], call["id"]);
            assert!(result["content"].as_str().unwrap().lines().count() >= 30);
        }
        // The same session in another level differs only by its salt.
        let other = conversation(4, 3, "L2");
        assert_ne!(c.history[0], other.history[0]);
        assert_eq!(c.turns, other.turns);
    }
}
