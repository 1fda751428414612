//! Text <-> token ids with the HF `tokenizers` crate, for GGUF files (BPE
//! rebuilt from the file) and HF folders (`tokenizer.json`).

mod gguf_bpe;
mod incremental;

pub use incremental::IncrementalDecoder;

use std::path::Path;

use crate::error::{EngineError, Result};
use crate::gguf::GgufModelFile;

/// A model's tokenizer. Special tokens written in a prompt (as chat templates
/// do) encode to their single ids.
pub struct TextTokenizer {
    inner: tokenizers::Tokenizer,
}

impl TextTokenizer {
    pub fn from_gguf(file: &GgufModelFile) -> Result<Self> {
        Ok(TextTokenizer {
            inner: gguf_bpe::build(file)?,
        })
    }

    pub fn from_file(path: &Path) -> Result<Self> {
        let inner = tokenizers::Tokenizer::from_file(path)
            .map_err(|e| EngineError::Tokenizer(format!("{}: {e}", path.display())))?;
        Ok(TextTokenizer { inner })
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

    pub fn vocab_size(&self) -> usize {
        self.inner.get_vocab_size(true)
    }

    /// The underlying HF tokenizer (for export and grammar back-ends).
    pub fn hf(&self) -> &tokenizers::Tokenizer {
        &self.inner
    }
}
