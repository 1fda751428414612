//! One sequence's share of a forward pass.

use crate::models::kv_cache::KvCache;

/// One sequence's part of a batched forward pass.
pub struct BatchItem<'a> {
    /// New tokens: a prefill chunk or the one token being decoded.
    pub tokens: &'a [u32],
    /// The sequence's cache; the new tokens' keys and values are appended.
    pub cache: &'a mut KvCache,
    /// Whether the logits of the last new token are wanted.
    pub sample: bool,
}
