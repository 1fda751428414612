//! The model's tokenizer: special tokens written in a prompt (as chat
//! templates do) encode to their single ids.

use std::path::Path;

use crate::error::{EngineError, Result};
use crate::loading::gguf::GgufModelFile;

/// A model's tokenizer. Special tokens written in a prompt (as chat templates
/// do) encode to their single ids.
pub struct TextTokenizer {
    inner: tokenizers::Tokenizer,
    /// GPT-2 style byte-level vocabulary: token strings spell bytes.
    byte_level: bool,
}

impl TextTokenizer {
    /// The tokenizer a GGUF file describes: byte-level BPE (`gpt2`) or
    /// SentencePiece (`llama`, as Gemma's files carry it).
    pub fn from_gguf(file: &GgufModelFile) -> Result<Self> {
        match file.require_string("tokenizer.ggml.model")?.as_str() {
            "gpt2" => Ok(TextTokenizer {
                inner: super::gguf_bpe::build(file)?,
                byte_level: true,
            }),
            "llama" => Ok(TextTokenizer {
                inner: super::gguf_spm::build(file)?,
                byte_level: false,
            }),
            other => Err(EngineError::Tokenizer(format!(
                "GGUF tokenizer model '{other}' is not supported (gpt2 byte-level BPE, llama SentencePiece)"
            ))),
        }
    }

    pub fn from_file(path: &Path) -> Result<Self> {
        let inner = tokenizers::Tokenizer::from_file(path)
            .map_err(|e| EngineError::Tokenizer(format!("{}: {e}", path.display())))?;
        let byte_level = matches!(
            inner.get_decoder(),
            Some(tokenizers::DecoderWrapper::ByteLevel(_))
        );
        Ok(TextTokenizer { inner, byte_level })
    }

    /// Encodes `text` as is: no BOS/EOS is added (chat templates write their own).
    pub fn encode(&self, text: &str) -> Result<Vec<u32>> {
        let enc = self
            .inner
            .encode(text, false)
            .map_err(|e| EngineError::Tokenizer(e.to_string()))?;
        Ok(enc.get_ids().to_vec())
    }

    /// Decodes ids to text, special tokens included.
    pub fn decode(&self, ids: &[u32]) -> Result<String> {
        self.inner
            .decode(ids, false)
            .map_err(|e| EngineError::Tokenizer(e.to_string()))
    }

    pub fn token_to_id(&self, token: &str) -> Option<u32> {
        self.inner.token_to_id(token)
    }

    pub fn id_to_token(&self, id: u32) -> Option<String> {
        self.inner.id_to_token(id)
    }

    /// The raw bytes a token stands for (what OpenAI's logprobs `bytes`
    /// report); a token may hold part of a UTF-8 character.
    pub fn token_bytes(&self, id: u32) -> Vec<u8> {
        let special = self
            .inner
            .get_added_vocabulary()
            .simple_id_to_token(id)
            .is_some();
        match self.id_to_token(id) {
            Some(t) if self.byte_level && !special => t.chars().filter_map(byte_of_char).collect(),
            // SentencePiece byte pieces stand for one byte each.
            Some(t) if !special && fallback_byte(&t).is_some() => {
                fallback_byte(&t).into_iter().collect()
            }
            _ => self.decode(&[id]).unwrap_or_default().into_bytes(),
        }
    }

    pub fn vocab_size(&self) -> usize {
        self.inner.get_vocab_size(true)
    }

    /// Writes the tokenizer as an HF `tokenizer.json`.
    pub fn save(&self, path: &Path) -> Result<()> {
        self.inner
            .save(path, false)
            .map_err(|e| EngineError::Tokenizer(format!("writing {}: {e}", path.display())))
    }

    /// The underlying HF tokenizer (for export and grammar back-ends).
    pub fn hf(&self) -> &tokenizers::Tokenizer {
        &self.inner
    }
}

/// The byte of a SentencePiece byte-fallback piece (`<0x0A>`).
fn fallback_byte(piece: &str) -> Option<u8> {
    let hex = piece.strip_prefix("<0x")?.strip_suffix('>')?;
    (hex.len() == 2).then(|| u8::from_str_radix(hex, 16).ok())?
}

/// Inverse of GPT-2's byte-to-character table: printable Latin-1 bytes stand
/// for themselves, the other bytes were moved to U+0100 and up, in order.
fn byte_of_char(c: char) -> Option<u8> {
    let printable =
        |b: u32| (33..=126).contains(&b) || (161..=172).contains(&b) || (174..=255).contains(&b);
    let code = c as u32;
    if code < 256 {
        return printable(code).then_some(code as u8);
    }
    let shifted = (0u32..256)
        .filter(|&b| !printable(b))
        .nth((code - 256) as usize)?;
    Some(shifted as u8)
}
