//! What the benchmark sends, as conversations: a history, then one or
//! more user turns, each a request whose reply joins the history before
//! the next (`--turns`). Sources: the [`builtin`] prompt sets and JSONL
//! files, [`synthetic`] prompts of a token length with a shared prefix,
//! and [`trace`] replay with arrival times.
//!
//! Every prompt is salted per level and repetition, so nothing cached by
//! an earlier level or run makes a later one look fast; what requests of a
//! level share on purpose (a prefix, a growing history) is declared with
//! the conversation, so the client knows what the server could have
//! cached.

pub mod agents;
pub mod builtin;
pub mod synthetic;
pub mod tokens;
pub mod trace;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};

use builtin::Workload;
use synthetic::Vocabulary;
use trace::{Trace, TraceRequest};

/// One user's conversation.
#[derive(Debug, Clone, Default)]
pub struct Conversation {
    /// Messages before the first turn (chat shape).
    pub history: Vec<Value>,
    /// User messages, one request each.
    pub turns: Vec<Value>,
    /// Offered tools (chat shape), from a file.
    pub tools: Option<Value>,
    /// `max_tokens` of each turn, when the source sets it.
    pub max_tokens: Option<u32>,
    /// Prefixes shared with other requests of the level: a key and the
    /// prompt tokens it covers. Once a request with a key has completed,
    /// a later one with the same key can be served that much from cache.
    pub prefixes: Vec<(String, u64)>,
    /// Scripted replies: where turn t has one, it joins the history in
    /// place of the server's reply (an agent's tool call, so the session
    /// grows the same on every server).
    pub replies: Vec<Value>,
}

/// Where prompts come from.
pub enum Source {
    Builtin(Workload),
    /// Coding-agent sessions ([`agents`]).
    Agents,
    Synthetic {
        vocabulary: Vocabulary,
        input_len: usize,
        prefix_len: usize,
    },
    Trace(Trace),
}

/// A source with the run's per-conversation settings.
pub struct Dataset {
    pub source: Source,
    /// User turns per conversation.
    pub turns: usize,
    /// `max_tokens` of synthetic requests (else the run's `--max-tokens`).
    pub output_len: Option<u32>,
    /// Input and output lengths are drawn from `len * (1 +- ratio)`.
    pub range_ratio: f64,
    pub seed: u64,
}

impl Dataset {
    /// What `--prompts`, `--input-len` or `--trace` named, for the report.
    pub fn describe(&self) -> String {
        let turns = if self.turns > 1 {
            format!(", {} turns", self.turns)
        } else {
            String::new()
        };
        let base = match &self.source {
            Source::Builtin(w) => w.prompts().to_string(),
            Source::Synthetic {
                input_len,
                prefix_len,
                ..
            } => format!(
                "synthetic: input {input_len} tokens (+-{:.0}%), shared prefix {prefix_len}, output {}",
                self.range_ratio * 100.0,
                self.output_len.map_or("--max-tokens".into(), |o| o.to_string())
            ),
            Source::Trace(t) => format!("trace {} ({} requests)", t.name, t.requests.len()),
            Source::Agents => "agents: Codex, Claude Code and OpenCode sessions, a shell call per turn".into(),
        };
        format!("{base}{turns}")
    }

    /// The trace's arrival times in seconds, when replaying one.
    pub fn arrivals(&self) -> Option<Vec<f64>> {
        match &self.source {
            Source::Trace(t) => Some(t.requests.iter().map(|r| r.at_s).collect()),
            _ => None,
        }
    }

    /// Conversation `i` of a level salted `salt`.
    pub fn conversation(&self, i: usize, salt: &str) -> Conversation {
        let mut rng = StdRng::seed_from_u64(self.seed ^ hash(&format!("{salt}/{i}")));
        let spread = |rng: &mut StdRng, len: usize| -> usize {
            let r = self.range_ratio.clamp(0.0, 1.0);
            let lo = ((len as f64) * (1.0 - r)).round().max(1.0) as usize;
            let hi = ((len as f64) * (1.0 + r)).round().max(lo as f64) as usize;
            rng.random_range(lo..=hi)
        };
        let max_tokens = self.output_len.map(|o| spread(&mut rng, o as usize) as u32);
        match &self.source {
            Source::Builtin(w) => {
                let mut messages = w.messages_of(i, salt);
                let first = messages
                    .pop()
                    .unwrap_or(json!({"role": "user", "content": ""}));
                let mut turns = vec![first];
                for t in 1..self.turns {
                    turns.push(json!({"role": "user", "content": format!(
                        "Turn {t}: go on, and add one new detail."
                    )}));
                }
                Conversation {
                    history: messages,
                    turns,
                    tools: w.tools_of(i),
                    max_tokens,
                    ..Default::default()
                }
            }
            Source::Synthetic {
                vocabulary,
                input_len,
                prefix_len,
            } => {
                let mut prefixes = Vec::new();
                let mut first = String::new();
                if *prefix_len > 0 {
                    let mut shared = StdRng::seed_from_u64(self.seed ^ hash(salt));
                    first = vocabulary.text(*prefix_len, &mut shared);
                    first.push('\n');
                    prefixes.push((format!("{salt}/prefix"), *prefix_len as u64));
                }
                let turns = (0..self.turns)
                    .map(|t| {
                        let own = vocabulary.text(spread(&mut rng, *input_len), &mut rng);
                        let text = if t == 0 { format!("{first}{own}") } else { own };
                        json!({"role": "user", "content": text})
                    })
                    .collect();
                Conversation {
                    turns,
                    max_tokens,
                    prefixes,
                    ..Default::default()
                }
            }
            Source::Agents => Conversation {
                max_tokens,
                ..agents::conversation(i, self.turns, salt)
            },
            Source::Trace(t) => {
                let r: &TraceRequest = &t.requests[i % t.requests.len()];
                let mut c = r.conversation.clone();
                if c.max_tokens.is_none() {
                    c.max_tokens = max_tokens;
                }
                // A replayed trace is salted too, so a second pass over it
                // is not served from the first's cache.
                if let Some(Value::String(s)) = c.turns.first_mut().map(|m| &mut m["content"]) {
                    *s = format!("[{salt}] {s}");
                }
                c.prefixes = c
                    .prefixes
                    .into_iter()
                    .map(|(k, n)| (format!("{salt}/{k}"), n))
                    .collect();
                c
            }
        }
    }
}

/// FNV-1a: a stable seed from a text.
pub fn hash(s: &str) -> u64 {
    s.bytes().fold(0xcbf29ce484222325, |h, b| {
        (h ^ b as u64).wrapping_mul(0x100000001b3)
    })
}
