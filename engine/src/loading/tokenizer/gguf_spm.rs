//! Builds an HF `tokenizers` BPE from a GGUF file's SentencePiece
//! vocabulary (`tokenizer.ggml.model = "llama"`: tokens, scores, types; no
//! merges), as Gemma's files carry it.
//!
//! SentencePiece's BPE merges, at each step, the adjacent pair whose merged
//! piece has the highest score. The same order as a merge list: every
//! split `(left, right)` of a normal piece into two vocabulary pieces is a
//! merge, ranked by the piece's score (highest first). Unknown bytes fall
//! back to the `<0xXX>` byte pieces; spaces are `▁`.

use std::collections::HashMap;

use tokenizers::decoders::byte_fallback::ByteFallback;
use tokenizers::decoders::fuse::Fuse;
use tokenizers::decoders::sequence::Sequence as DecoderSequence;
use tokenizers::models::bpe::{Vocab, BPE};
use tokenizers::normalizers::prepend::Prepend;
use tokenizers::normalizers::replace::Replace;
use tokenizers::normalizers::{NormalizerWrapper, Sequence as NormalizerSequence};
use tokenizers::{AddedToken, DecoderWrapper, Tokenizer};

use crate::error::{EngineError, Result};
use crate::loading::gguf::GgufModelFile;

/// GGUF token types (`tokenizer.ggml.token_type`).
const NORMAL: i64 = 1;
const CONTROL: i64 = 3;
const USER_DEFINED: i64 = 4;

const SPACE: &str = "\u{2581}";

pub fn build(file: &GgufModelFile) -> Result<Tokenizer> {
    let tokens = file
        .strings("tokenizer.ggml.tokens")?
        .ok_or_else(|| file.missing("tokenizer.ggml.tokens"))?;
    let scores: Vec<f32> = match file.json("tokenizer.ggml.scores") {
        Some(serde_json::Value::Array(s)) => {
            s.iter().map(|v| v.as_f64().unwrap_or(0.0) as f32).collect()
        }
        _ => return Err(file.missing("tokenizer.ggml.scores")),
    };
    let types = file
        .i64s("tokenizer.ggml.token_type")?
        .unwrap_or_else(|| vec![NORMAL; tokens.len()]);
    if scores.len() != tokens.len() || types.len() != tokens.len() {
        return Err(EngineError::Tokenizer(
            "GGUF tokens, scores and token types differ in length".into(),
        ));
    }
    let unk = file
        .usize("tokenizer.ggml.unknown_token_id")?
        .and_then(|id| tokens.get(id).cloned());
    let add_space_prefix = file
        .json("tokenizer.ggml.add_space_prefix")
        .and_then(|v| v.as_bool())
        .unwrap_or(true);

    let vocab: HashMap<String, u32> = tokens
        .iter()
        .enumerate()
        .map(|(i, t)| (t.clone(), i as u32))
        .collect();
    let merges = merges(&tokens, &scores, &types, &vocab);
    let mut builder = BPE::builder()
        .vocab_and_merges(vocab.into_iter().collect::<Vocab>(), merges)
        .byte_fallback(true)
        .fuse_unk(true);
    if let Some(unk) = unk {
        builder = builder.unk_token(unk);
    }
    let bpe = builder
        .build()
        .map_err(|e| EngineError::Tokenizer(e.to_string()))?;

    let mut tokenizer = Tokenizer::new(bpe);
    let replace = |from: &str, to: &str| {
        Replace::new(from, to).map_err(|e| EngineError::Tokenizer(e.to_string()))
    };
    let mut normalizers: Vec<NormalizerWrapper> = Vec::new();
    if add_space_prefix {
        normalizers.push(Prepend::new(SPACE.into()).into());
    }
    normalizers.push(replace(" ", SPACE)?.into());
    tokenizer.with_normalizer(Some(NormalizerSequence::new(normalizers)));
    tokenizer.with_decoder(Some(DecoderSequence::new(vec![
        DecoderWrapper::Replace(replace(SPACE, " ")?),
        ByteFallback::new().into(),
        Fuse::new().into(),
    ])));

    // Control and user-defined pieces are matched whole in any text, before
    // normalization (templates write `<start_of_turn>` as text).
    let added: Vec<AddedToken> = tokens
        .iter()
        .zip(&types)
        .filter(|(_, &ty)| ty == CONTROL || ty == USER_DEFINED)
        .map(|(t, &ty)| AddedToken::from(t.clone(), ty == CONTROL).normalized(false))
        .collect();
    tokenizer.add_special_tokens(&added);
    Ok(tokenizer)
}

/// Every split of a normal piece into two vocabulary pieces, highest piece
/// score first (ties: the piece's id, then the split's position).
fn merges(
    tokens: &[String],
    scores: &[f32],
    types: &[i64],
    vocab: &HashMap<String, u32>,
) -> Vec<(String, String)> {
    let mut ranked: Vec<(f32, u32, usize, &str, &str)> = Vec::new();
    for (id, piece) in tokens.iter().enumerate() {
        if types[id] != NORMAL {
            continue;
        }
        for (at, _) in piece.char_indices().skip(1) {
            let (left, right) = piece.split_at(at);
            if vocab.contains_key(left) && vocab.contains_key(right) {
                ranked.push((scores[id], id as u32, at, left, right));
            }
        }
    }
    ranked.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)).then(a.2.cmp(&b.2)));
    ranked
        .into_iter()
        .map(|(_, _, _, l, r)| (l.to_string(), r.to_string()))
        .collect()
}
