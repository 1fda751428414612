//! Output tokens re-counted on the client with the served model's own
//! tokenizer (SGLang's retokenized counts, vLLM's `/tokenize`), beside the
//! count the server reports in its usage. Throughput is computed from the
//! server's count, so a server that over-reports looks fast. Text
//! re-tokenized may merge differently from the ids generated, and a server
//! may count its end-of-turn token: one token more at a natural stop is
//! counted apart from other differences.

use serde::{Deserialize, Serialize};

use crate::bench::dataset::tokens::TokenCounter;
use crate::bench::sample::Sample;

/// Replies re-counted per level, at most (one tokenizer call each).
pub const MAX_PER_LEVEL: usize = 64;

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TokenFigures {
    /// The tokenizer used (None: none known; see `not_run`).
    pub counted_with: Option<String>,
    pub not_run: Option<String>,
    pub compared: usize,
    pub equal: usize,
    /// The server counted one token more and the reply stopped on its own
    /// (its end-of-turn token counted).
    pub one_more_at_stop: usize,
    pub differ: usize,
    /// A few differences: server count, client count.
    pub examples: Vec<[u64; 2]>,
}

impl TokenFigures {
    pub fn skipped(why: String) -> TokenFigures {
        TokenFigures {
            not_run: Some(why),
            ..Default::default()
        }
    }

    pub fn describe(&self) -> String {
        match (&self.counted_with, &self.not_run) {
            (_, Some(why)) => format!("not re-counted ({why})"),
            (Some(with), None) => format!(
                "{} re-counted with {with}: {} equal, {} one more at a stop (end token counted), \
                 {} differ{}",
                self.compared,
                self.equal,
                self.one_more_at_stop,
                self.differ,
                if self.examples.is_empty() {
                    String::new()
                } else {
                    let e: Vec<String> = self
                        .examples
                        .iter()
                        .map(|[s, c]| format!("server {s} vs {c}"))
                        .collect();
                    format!(" ({})", e.join(", "))
                }
            ),
            (None, None) => "not re-counted".into(),
        }
    }
}

/// Re-counts the plain-text replies of `samples` (no calls, no
/// reasoning, no schema, usage reported) with `counter`.
pub async fn recount(counter: &TokenCounter, samples: &mut [Sample]) -> TokenFigures {
    let mut f = TokenFigures {
        counted_with: Some(counter.describe().to_string()),
        ..Default::default()
    };
    // Schema replies are left out: a grammar picks the tokens it allows,
    // often not the tokenizer's own split of the same text.
    let plain = |s: &Sample| {
        s.served()
            && s.usage_reported
            && !s.schema
            && s.reasoning_tokens.unwrap_or(0) == 0
            && !s.content.contains("\n[call ")
    };
    for s in samples.iter_mut().filter(|s| plain(s)).take(MAX_PER_LEVEL) {
        let Ok(n) = counter.count(&s.content).await else {
            continue;
        };
        let n = n as u64;
        s.recounted_tokens = Some(n);
        f.compared += 1;
        let stopped = matches!(s.finish_reason.as_deref(), Some("stop" | "end_turn"))
            || (s.finish_reason.is_none() && s.output_tokens > 0);
        if s.output_tokens == n {
            f.equal += 1;
        } else if s.output_tokens == n + 1 && stopped {
            f.one_more_at_stop += 1;
        } else {
            f.differ += 1;
            if f.examples.len() < 3 {
                f.examples.push([s.output_tokens, n]);
            }
        }
    }
    f
}
