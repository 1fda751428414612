//! Streaming detokenization: text is released only once it is complete
//! UTF-8, so a character split over several byte-level tokens never shows
//! up half-formed (as U+FFFD) in a stream.

use super::text::TextTokenizer;
use crate::error::Result;

/// Tokens held back waiting for a character to complete before the text is
/// released as is (a model can emit bytes that never form valid UTF-8).
const MAX_PENDING_TOKENS: usize = 8;

/// Turns a token stream into text deltas.
///
/// Decodes a small window `[prefix, end)` and releases what lies beyond the
/// text of `[prefix, read)`, the usual way to keep byte-level BPE spacing
/// right without re-decoding the whole sequence each step.
#[derive(Debug, Default, Clone)]
pub struct IncrementalDecoder {
    ids: Vec<u32>,
    prefix: usize,
    read: usize,
}

impl IncrementalDecoder {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds one token; returns the text it completes (possibly empty).
    pub fn push(&mut self, tokenizer: &TextTokenizer, id: u32) -> Result<String> {
        self.ids.push(id);
        let before = tokenizer.decode(&self.ids[self.prefix..self.read])?;
        let after = tokenizer.decode(&self.ids[self.prefix..])?;
        let pending = self.ids.len() - self.read;
        let incomplete = after.ends_with('\u{FFFD}') && pending < MAX_PENDING_TOKENS;
        match after.get(before.len()..) {
            Some(new) if !incomplete && after.len() > before.len() => {
                let new = new.to_string();
                self.prefix = self.read;
                self.read = self.ids.len();
                Ok(new)
            }
            _ => Ok(String::new()),
        }
    }

    /// Releases whatever is still held (at the end of a sequence). A
    /// character the sequence ended in the middle of (`max_tokens` ran out
    /// between its bytes) is dropped: it was never generated whole, and
    /// sending it as U+FFFD would put a character into the reply that the
    /// model did not write.
    pub fn finish(&mut self, tokenizer: &TextTokenizer) -> Result<String> {
        if self.read == self.ids.len() {
            return Ok(String::new());
        }
        let before = tokenizer.decode(&self.ids[self.prefix..self.read])?;
        let after = tokenizer.decode(&self.ids[self.prefix..])?;
        self.prefix = self.read;
        self.read = self.ids.len();
        let rest = after.get(before.len()..).unwrap_or_default();
        Ok(rest.trim_end_matches('\u{FFFD}').to_string())
    }
}
