//! One sequence's share of a forward pass.

/// One sequence's part of a batched forward pass.
pub struct BatchItem<'a> {
    /// New tokens: a prefill chunk or the one token being decoded.
    pub tokens: &'a [u32],
    /// The sequence's slot in the pass's KV store; the new tokens' keys and
    /// values are written after the ones it holds.
    pub slot: usize,
    /// Whether the logits of the last new token are wanted.
    pub sample: bool,
}
