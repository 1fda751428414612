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
                at_s: ms / 1000.0,
                conversation: c,
            });
        }
        if requests.is_empty() {
            bail!("--trace {}: no requests", path.display());
        }
        // Times after the earliest request, whatever the lines' order.
        requests.sort_by(|a, b| a.at_s.total_cmp(&b.at_s));
        let first = requests[0].at_s;
        for r in &mut requests {
            r.at_s -= first;
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mooncake_blocks_share_text_where_hash_ids_are_shared_and_times_are_relative() {
        let path = std::env::temp_dir().join(format!("afm-trace-{}", std::process::id()));
        std::fs::write(
            &path,
            concat!(
                "{\"timestamp\": 5000, \"input_length\": 10, \"output_length\": 3, \"hash_ids\": [1, 2, 3]}\n",
                "{\"timestamp\": 2000, \"input_length\": 9, \"output_length\": 4, \"hash_ids\": [1, 2, 9]}\n",
                "{\"timestamp\": 2500, \"prompt\": \"hello\", \"max_tokens\": 5}\n",
            ),
        )
        .unwrap();
        let vocab = Vocabulary::of_words(vec!["a", "b", "c", "d", "e", "f"]);
        let t = Trace::read(&path, Some(&vocab), 4).unwrap();
        let at: Vec<f64> = t.requests.iter().map(|r| r.at_s).collect();
        assert_eq!(at, vec![0.0, 0.5, 3.0]);
        let text = |k: usize| {
            t.requests[k].conversation.turns[0]["content"]
                .as_str()
                .unwrap()
                .to_string()
        };
        let (first, third) = (text(0), text(2));
        let words = |s: &str| s.split(' ').map(str::to_string).collect::<Vec<_>>();
        assert_eq!(words(&first).len(), 9);
        assert_eq!(words(&third).len(), 10);
        assert_eq!(
            words(&first)[..8],
            words(&third)[..8],
            "blocks 1 and 2 are shared"
        );
        assert_eq!(t.requests[0].conversation.max_tokens, Some(4));
        assert_eq!(t.requests[1].conversation.max_tokens, Some(5));
        assert_eq!(
            t.requests[0].conversation.prefixes[1],
            ("1,2".to_string(), 8)
        );
        assert!(
            Trace::read(&path, None, 4).is_err(),
            "Mooncake lines need a tokenizer"
        );
        std::fs::remove_file(path).ok();
    }
}
