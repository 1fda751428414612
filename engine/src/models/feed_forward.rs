//! What a decoder layer asks of its feed-forward block, dense or routed:
//! a trait of its own, so blocks and the decoder that holds them each
//! depend on it and not on each other.

use mlx_rs::Array;

use super::forward::ForwardContext;
use super::gated_mlp::GatedMlp;
use crate::error::Result;

/// A layer's feed-forward block.
pub trait FeedForward {
    fn forward(&self, ctx: &ForwardContext, x: &Array) -> Result<Array>;

    /// The stored weight arrays (to evaluate them at load).
    fn stored(&self) -> Vec<Array>;

    /// Whether a row's output is independent of the other rows in the
    /// batch, given row-blocked matmuls (false for routed experts, whose
    /// grouping depends on the batch).
    fn batch_invariant(&self) -> bool {
        true
    }

    /// The block as a plain gated MLP, which a whole-layer primitive can
    /// run (`models::fused_layer`); `None` for any other block.
    fn gated_mlp(&self) -> Option<&GatedMlp> {
        None
    }
}
