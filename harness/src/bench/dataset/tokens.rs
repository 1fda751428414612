//! Counting a text's tokens with the served model's own tokenizer, so a
//! synthetic prompt of `--input-len` tokens is that long for the model
//! that reads it: a tokenizer file given by `--tokenizer`, else the
//! server's `/tokenize` (llama.cpp, vLLM, SGLang), else Anthropic's
//! `/v1/messages/count_tokens` (afm-serve and the in-process engine; a
//! whole message's count, less an empty message's to drop the template).

use std::path::Path;

use anyhow::{bail, Context, Result};
use serde_json::{json, Value};

use crate::protocol::endpoint::{COUNT_TOKENS_PATH, TOKENIZE_PATH};
use crate::server::Target;

pub enum TokenCounter {
    File(Box<tokenizers::Tokenizer>),
    Tokenize(Target),
    CountTokens {
        target: Target,
        model: String,
        /// The template's tokens around an empty user message.
        overhead: usize,
    },
}

impl TokenCounter {
    /// The first counter that works for `target`.
    pub async fn probe(target: &Target, model: &str, file: Option<&Path>) -> Result<Self> {
        if let Some(path) = file {
            let t = tokenizers::Tokenizer::from_file(path).map_err(|e| {
                anyhow::anyhow!("--tokenizer {}: not a tokenizer.json: {e}", path.display())
            })?;
            return Ok(TokenCounter::File(Box::new(t)));
        }
        let tokenize = TokenCounter::Tokenize(target.clone());
        if tokenize.count("probe text").await.is_ok() {
            return Ok(tokenize);
        }
        let mut count = TokenCounter::CountTokens {
            target: target.clone(),
            model: model.to_string(),
            overhead: 0,
        };
        if let Ok(n) = count.count("").await {
            if let TokenCounter::CountTokens { overhead, .. } = &mut count {
                *overhead = n;
            }
            return Ok(count);
        }
        bail!(
            "{} has neither {TOKENIZE_PATH} nor {COUNT_TOKENS_PATH} to count prompt tokens \
             with; pass the served model's tokenizer.json with --tokenizer FILE",
            target.describe()
        )
    }

    pub fn describe(&self) -> String {
        match self {
            TokenCounter::File(_) => "--tokenizer file".into(),
            TokenCounter::Tokenize(_) => format!("the server's {TOKENIZE_PATH}"),
            TokenCounter::CountTokens { .. } => format!("the server's {COUNT_TOKENS_PATH}"),
        }
    }

    /// Tokens of `text`, without special tokens.
    pub async fn count(&self, text: &str) -> Result<usize> {
        match self {
            TokenCounter::File(t) => Ok(t
                .encode(text, false)
                .map_err(|e| anyhow::anyhow!("tokenizing: {e}"))?
                .len()),
            TokenCounter::Tokenize(target) => {
                // llama.cpp reads `content`, vLLM and SGLang `prompt`.
                let ex = target
                    .post(
                        TOKENIZE_PATH,
                        &json!({"content": text, "prompt": text, "add_special": false,
                                "add_special_tokens": false}),
                    )
                    .await;
                if ex.status != 200 {
                    bail!("{TOKENIZE_PATH} answered {}", ex.status);
                }
                match (&ex.body["tokens"], &ex.body["count"]) {
                    (Value::Array(t), _) => Ok(t.len()),
                    (_, Value::Number(n)) => Ok(n.as_u64().unwrap_or(0) as usize),
                    _ => bail!("{TOKENIZE_PATH} gave no tokens: {}", ex.body),
                }
            }
            TokenCounter::CountTokens {
                target,
                model,
                overhead,
            } => {
                let ex = target
                    .post(
                        COUNT_TOKENS_PATH,
                        &json!({"model": model, "messages": [{"role": "user", "content": text}]}),
                    )
                    .await;
                let n = ex.body["input_tokens"]
                    .as_u64()
                    .filter(|_| ex.status == 200)
                    .with_context(|| format!("count_tokens answered {}", ex.status))?;
                Ok((n as usize).saturating_sub(*overhead))
            }
        }
    }
}
