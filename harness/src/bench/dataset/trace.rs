//! Trace replay (`--trace FILE`): one request per JSONL line, sent at its
//! `timestamp` (milliseconds after the first). A line is either
//! Mooncake's (`input_length`, `output_length`, `hash_ids`: the prompt's
//! blocks of `block_size` tokens, equal ids meaning equal blocks, so
//! shared prefixes come back as shared text) or a request of its own
//! (`messages` or `prompt`, optional `max_tokens`).

use std::path::Path;

use anyhow::{bail, Context, Result};
use rand::rngs::StdRng;
use rand::SeedableRng;
use serde_json::{json, Value};

use super::synthetic::Vocabulary;
use super::{hash, Conversation};

/// Tokens per hash id in Mooncake's traces.
pub const MOONCAKE_BLOCK: usize = 512;

pub struct TraceRequest {
    /// Seconds after the trace's first request.
    pub at_s: f64,
    pub conversation: Conversation,
}

pub struct Trace {
    pub name: String,
    pub requests: Vec<TraceRequest>,
}

impl Trace {
    /// Reads a trace; Mooncake lines need the served model's vocabulary.
    pub fn read(path: &Path, vocabulary: Option<&Vocabulary>, block: usize) -> Result<Trace> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("--trace: cannot read {}", path.display()))?;
        let mut requests = Vec::new();
        let mut first_ms: Option<f64> = None;
        for (k, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() {
                continue;
            }
            let at = |what: &str| format!("--trace {} line {}: {what}", path.display(), k + 1);
            let v: Value = serde_json::from_str(line).with_context(|| at("not JSON"))?;
            let ms = v["timestamp"]
                .as_f64()
                .with_context(|| at("no \"timestamp\" (milliseconds)"))?;
            let first = *first_ms.get_or_insert(ms);
            let mut c = Conversation {
                max_tokens: v["max_tokens"]
                    .as_u64()
                    .or(v["output_length"].as_u64())
                    .map(|n| n as u32),
                ..Default::default()
            };
            if let Some(messages) = v["messages"].as_array() {
                let mut m = messages.clone();
                let last = m.pop().with_context(|| at("empty \"messages\""))?;
                c.history = m;
                c.turns = vec![last];
                c.tools = v.get("tools").cloned();
            } else if let Some(p) = v["prompt"].as_str() {
                c.turns = vec![json!({"role": "user", "content": p})];
            } else if let Some(len) = v["input_length"].as_u64() {
                let Some(vocab) = vocabulary else {
                    bail!(at("a Mooncake line needs the served model's tokenizer"));
                };
                let ids: Vec<u64> = v["hash_ids"]
                    .as_array()
                    .map(|a| a.iter().filter_map(Value::as_u64).collect())
                    .unwrap_or_default();
                c.turns = vec![
                    json!({"role": "user", "content": blocks(vocab, &ids, len as usize, block)}),
                ];
                c.prefixes = (1..ids.len())
                    .map(|n| {
                        let key = ids[..n]
                            .iter()
                            .map(u64::to_string)
                            .collect::<Vec<_>>()
                            .join(",");
                        (key, (n * block) as u64)
                    })
                    .collect();
            } else {
                bail!(at("needs \"messages\", \"prompt\" or \"input_length\""));
            }
            requests.push(TraceRequest {
                at_s: (ms - first) / 1000.0,
                conversation: c,
            });
        }
        if requests.is_empty() {
            bail!("--trace {}: no requests", path.display());
        }
        requests.sort_by(|a, b| a.at_s.total_cmp(&b.at_s));
        Ok(Trace {
            name: path.display().to_string(),
            requests,
        })
    }
}

/// A prompt of `len` tokens whose k-th block of `block` tokens is the
/// same text wherever `ids[k]` is the same.
fn blocks(vocab: &Vocabulary, ids: &[u64], len: usize, block: usize) -> String {
    let mut text = Vec::new();
    let mut left = len;
    for (k, id) in ids.iter().enumerate() {
        if left == 0 {
            break;
        }
        let n = if k + 1 == ids.len() {
            left
        } else {
            block.min(left)
        };
        let mut rng = StdRng::seed_from_u64(hash(&format!("block/{id}")));
        text.push(vocab.text(n, &mut rng));
        left -= n;
    }
    if left > 0 || text.is_empty() {
        let mut rng = StdRng::seed_from_u64(hash(&format!("tail/{len}")));
        text.push(vocab.text(left.max(1), &mut rng));
    }
    text.join(" ")
}
