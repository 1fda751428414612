//! Text <-> token ids with the HF `tokenizers` crate, for GGUF files
//! (byte-level BPE or SentencePiece rebuilt from the file) and HF folders
//! (`tokenizer.json`).

mod gguf_bpe;
mod gguf_spm;
mod incremental;
mod text;

pub use incremental::IncrementalDecoder;
pub use text::TextTokenizer;
