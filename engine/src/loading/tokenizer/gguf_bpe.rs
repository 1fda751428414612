//! Builds an HF `tokenizers` BPE from a GGUF file's vocabulary, merges and
//! token types, with the pre-tokenizer its `tokenizer.ggml.pre` names.

use tokenizers::decoders::byte_level::ByteLevel as ByteLevelDecoder;
use tokenizers::models::bpe::{Vocab, BPE};
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::pre_tokenizers::digits::Digits;
use tokenizers::pre_tokenizers::sequence::Sequence;
use tokenizers::pre_tokenizers::split::{Split, SplitPattern};
use tokenizers::pre_tokenizers::PreTokenizerWrapper;
use tokenizers::{AddedToken, SplitDelimiterBehavior, Tokenizer};

use crate::error::{EngineError, Result};
use crate::loading::gguf::GgufModelFile;

/// GGUF token types (`tokenizer.ggml.token_type`).
const TOKEN_TYPE_CONTROL: i64 = 3;
const TOKEN_TYPE_USER_DEFINED: i64 = 4;

/// Llama 3's split regex (also used by many later BPE models).
const LLAMA3_SPLIT: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
/// Qwen 2/3's split regex: like Llama 3's, but one digit per piece.
const QWEN2_SPLIT: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// The tokenizer of a GGUF model.
pub fn build(file: &GgufModelFile) -> Result<Tokenizer> {
    let tokens = file
        .strings("tokenizer.ggml.tokens")?
        .ok_or_else(|| file.missing("tokenizer.ggml.tokens"))?;
    let merges = file
        .strings("tokenizer.ggml.merges")?
        .ok_or_else(|| file.missing("tokenizer.ggml.merges"))?;
    let types = file
        .i64s("tokenizer.ggml.token_type")?
        .unwrap_or_else(|| vec![1; tokens.len()]);
    let pre = file
        .string("tokenizer.ggml.pre")?
        .unwrap_or_else(|| "default".into());

    let vocab: Vocab = tokens
        .iter()
        .enumerate()
        .map(|(i, t)| (t.clone(), i as u32))
        .collect();
    let merges = merges
        .iter()
        .map(|m| {
            m.split_once(' ')
                .map(|(a, b)| (a.to_string(), b.to_string()))
                .ok_or_else(|| EngineError::Tokenizer(format!("malformed merge '{m}'")))
        })
        .collect::<Result<Vec<_>>>()?;
    let bpe = BPE::builder()
        .vocab_and_merges(vocab, merges)
        .build()
        .map_err(|e| EngineError::Tokenizer(e.to_string()))?;

    let mut tokenizer = Tokenizer::new(bpe);
    tokenizer.with_pre_tokenizer(Some(pre_tokenizer(&pre)?));
    tokenizer.with_decoder(Some(ByteLevelDecoder::default()));

    // Control and user-defined tokens are matched whole in any text
    // (templates write `<|im_start|>` as text); control ones are special.
    let added: Vec<AddedToken> = tokens
        .iter()
        .zip(types.iter())
        .filter(|(_, &ty)| ty == TOKEN_TYPE_CONTROL || ty == TOKEN_TYPE_USER_DEFINED)
        .map(|(t, &ty)| AddedToken::from(t.clone(), ty == TOKEN_TYPE_CONTROL))
        .collect();
    tokenizer.add_special_tokens(&added);
    Ok(tokenizer)
}

/// The pre-tokenizer llama.cpp associates with a `tokenizer.ggml.pre` name.
fn pre_tokenizer(pre: &str) -> Result<PreTokenizerWrapper> {
    let byte_level = |use_regex| ByteLevel::new(false, true, use_regex).into();
    let split = |re: &str| -> Result<PreTokenizerWrapper> {
        Ok(Split::new(
            SplitPattern::Regex(re.into()),
            SplitDelimiterBehavior::Isolated,
            false,
        )
        .map_err(|e| EngineError::Tokenizer(e.to_string()))?
        .into())
    };
    Ok(match pre {
        "default" | "gpt-2" | "gpt2" => byte_level(true),
        // SmolLM: every digit alone, then GPT-2's byte-level split.
        "smollm" | "starcoder" | "refact" => {
            Sequence::new(vec![Digits::new(true).into(), byte_level(true)]).into()
        }
        "llama-bpe" | "llama3" | "smaug-bpe" | "dbrx" => {
            Sequence::new(vec![split(LLAMA3_SPLIT)?, byte_level(false)]).into()
        }
        "qwen2" | "deepseek-r1-qwen" => {
            Sequence::new(vec![split(QWEN2_SPLIT)?, byte_level(false)]).into()
        }
        other => {
            return Err(EngineError::Tokenizer(format!(
                "GGUF pre-tokenizer '{other}' is not supported"
            )))
        }
    })
}
