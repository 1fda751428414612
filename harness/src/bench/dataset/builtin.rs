//! The built-in prompt sets and prompt files.
//!
//! Built-in prompt sets are salted per level and repetition, so a prefix
//! cache filled by an earlier level (or an earlier run) cannot make a later
//! one look fast; only `shared-prefix` shares a long system prompt, and
//! only among the requests of one level.

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

use anyhow::{bail, Context, Result};
use serde_json::{json, Value};

use crate::suite::filler;

/// Sentences of filler in a long prompt (~10 tokens each).
const LONG_SENTENCES: usize = 80;
/// Sentences of the shared system prompt.
const SHARED_SENTENCES: usize = 60;

const TOPICS: [&str; 12] = [
    "a fox who learns to sail",
    "a lighthouse keeper",
    "a city built on stilts",
    "an owl that counts stars",
    "a clockmaker's apprentice",
    "a river that runs uphill",
    "a library with no doors",
    "a bear who bakes bread",
    "the last train of the night",
    "a garden on the moon",
    "a map that redraws itself",
    "a robot learning to paint",
];

/// The prompt set of a run (`--prompts`).
#[derive(Debug, Clone, PartialEq)]
pub enum Prompts {
    /// One-sentence requests for a story (~30 prompt tokens with the template).
    Short,
    /// A ~800-token document to summarise, different for every request.
    Long,
    /// A ~600-token system prompt shared by every request of a level, then
    /// a short question of each request's own.
    SharedPrefix,
    /// Coding-agent sessions: each agent's instructions and tools, whole,
    /// growing by a shell call and its output per turn (`dataset::agents`).
    Agents,
    /// A file: one request per line, JSON `{"messages": [...]}` or
    /// `{"prompt": "..."}`, or plain text; used as written, in turn.
    File(PathBuf),
}

impl FromStr for Prompts {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "short" => Ok(Prompts::Short),
            "long" => Ok(Prompts::Long),
            "shared-prefix" => Ok(Prompts::SharedPrefix),
            "agents" => Ok(Prompts::Agents),
            path if std::path::Path::new(path).is_file() => Ok(Prompts::File(path.into())),
            other => Err(format!(
                "'{other}' is neither short, long, shared-prefix, agents nor a readable file"
            )),
        }
    }
}

impl fmt::Display for Prompts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Prompts::Short => f.write_str("short"),
            Prompts::Long => f.write_str("long"),
            Prompts::SharedPrefix => f.write_str("shared-prefix"),
            Prompts::Agents => f.write_str("agents"),
            Prompts::File(p) => write!(f, "{}", p.display()),
        }
    }
}

/// A prompt set ready to hand out messages.
pub struct Workload {
    prompts: Prompts,
    /// The file's requests (`messages` arrays and optional `tools`), for
    /// `Prompts::File`.
    from_file: Vec<(Value, Option<Value>)>,
}

impl Workload {
    pub fn new(prompts: Prompts) -> Result<Self> {
        let from_file = match &prompts {
            Prompts::File(path) => read_file(path)?,
            _ => Vec::new(),
        };
        Ok(Workload { prompts, from_file })
    }

    pub fn prompts(&self) -> &Prompts {
        &self.prompts
    }

    /// The messages of `n` requests, unique to `salt` for built-in sets.
    pub fn messages(&self, n: usize, salt: &str) -> Vec<Value> {
        (0..n).map(|i| self.one(i, salt)).collect()
    }

    /// Request `i`'s messages, as a list.
    pub fn messages_of(&self, i: usize, salt: &str) -> Vec<Value> {
        self.one(i, salt).as_array().cloned().unwrap_or_default()
    }

    /// Request `i`'s tools, when its file line offers some.
    pub fn tools_of(&self, i: usize) -> Option<Value> {
        match self.prompts {
            Prompts::File(_) => self.from_file[i % self.from_file.len()].1.clone(),
            Prompts::Agents => super::agents::conversation(i, 1, "").tools,
            _ => None,
        }
    }

    fn one(&self, i: usize, salt: &str) -> Value {
        let topic = TOPICS[i % TOPICS.len()];
        match &self.prompts {
            Prompts::Short => json!([{
                "role": "user",
                "content": format!("Request {salt}.{i}: write a short story about {topic}.")
            }]),
            Prompts::Long => json!([{
                "role": "user",
                "content": format!(
                    "Document {salt}.{i}.\n{}\n\nSummarise the document above in one paragraph.",
                    filler::sentences(LONG_SENTENCES)
                )
            }]),
            Prompts::SharedPrefix => json!([
                {
                    "role": "system",
                    "content": format!("Handbook {salt}.\n{}", filler::sentences(SHARED_SENTENCES))
                },
                {
                    "role": "user",
                    "content": format!("Question {i}: how would the handbook apply to {topic}?")
                }
            ]),
            // A session's first request (its tools: `tools_of`).
            Prompts::Agents => {
                let c = super::agents::conversation(i, 1, salt);
                Value::Array(c.history.into_iter().chain(c.turns).collect())
            }
            Prompts::File(_) => self.from_file[i % self.from_file.len()].0.clone(),
        }
    }
}

fn read_file(path: &std::path::Path) -> Result<Vec<(Value, Option<Value>)>> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("--prompts: cannot read {}", path.display()))?;
    let mut out = Vec::new();
    for (k, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let mut tools = None;
        let messages = match serde_json::from_str::<Value>(line) {
            Ok(Value::Object(o)) => match (o.get("messages"), o.get("prompt")) {
                (Some(m @ Value::Array(_)), _) => {
                    tools = o.get("tools").cloned();
                    m.clone()
                }
                (None, Some(Value::String(p))) => json!([{ "role": "user", "content": p }]),
                _ => bail!(
                    "--prompts {} line {}: a JSON line needs \"messages\" (array) or \"prompt\" (string)",
                    path.display(),
                    k + 1
                ),
            },
            Ok(Value::String(p)) => json!([{ "role": "user", "content": p }]),
            _ => json!([{ "role": "user", "content": line }]),
        };
        out.push((messages, tools));
    }
    if out.is_empty() {
        bail!("--prompts {}: no prompts in the file", path.display());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn built_in_prompts_are_unique_per_salt_and_request() {
        let w = Workload::new(Prompts::Short).unwrap();
        let a = w.messages(3, "r1");
        assert_ne!(a[0], a[1]);
        assert_ne!(a[0], w.messages(1, "r2")[0]);
        assert_eq!(a[0], w.messages(1, "r1")[0]);
    }

    #[test]
    fn shared_prefix_requests_share_the_system_prompt_only() {
        let w = Workload::new(Prompts::SharedPrefix).unwrap();
        let m = w.messages(2, "s");
        assert_eq!(m[0][0], m[1][0]);
        assert_ne!(m[0][1], m[1][1]);
        assert_ne!(m[0][0], w.messages(1, "t")[0][0]);
    }

    #[test]
    fn a_prompt_file_mixes_json_and_plain_lines() {
        let path = std::env::temp_dir().join(format!("afm-bench-prompts-{}", std::process::id()));
        std::fs::write(
            &path,
            "{\"prompt\": \"hi\"}\n\nplain text\n{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}]}\n",
        )
        .unwrap();
        let w = Workload::new(Prompts::File(path.clone())).unwrap();
        let m = w.messages(4, "ignored");
        assert_eq!(m[0][0]["content"], "hi");
        assert_eq!(m[1][0]["content"], "plain text");
        assert_eq!(m[2][0]["content"], "x");
        assert_eq!(m[3], m[0]);
        std::fs::write(&path, "{\"text\": 1}\n").unwrap();
        let err = Workload::new(Prompts::File(path.clone())).err().unwrap();
        assert!(err.to_string().contains("line 1"), "{err}");
        std::fs::remove_file(path).ok();
    }
}
