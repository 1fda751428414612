//! What a decoder layer asks of its feed-forward block, dense or routed:
//! a trait of its own, so blocks and the decoder that holds them each
//! depend on it and not on each other.

use mlx_rs::Array;

use super::forward::ForwardContext;
use crate::cpu::glu::Act;
use crate::error::Result;
use crate::layers::{FusedLinear, Linear, QuantizedWeight};

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

    /// The block's parts when a whole-layer primitive can run it
    /// (`models::layer_op`): a plain gated MLP, or routed experts kept
    /// packed; `None` for any other.
    fn layer_parts(&self) -> Option<LayerParts<'_>> {
        None
    }
}

/// A feed-forward block as a whole-layer primitive takes it.
pub enum LayerParts<'a> {
    Gated(GatedParts<'a>),
    Routed(RoutedParts<'a>),
}

/// A gated MLP as a whole-layer primitive takes it: `down(act(gate(x)) *
/// up(x))` with gate and up as one product.
pub struct GatedParts<'a> {
    pub gate_up: &'a FusedLinear,
    pub down: &'a Linear,
    pub act: Act,
}

/// Routed experts as a whole-layer primitive takes them: a softmax router,
/// each row's `top_k` experts (their weights renormalised over the k when
/// `normalize`), each expert `down(act(gate(x)) * up(x))` from stacks
/// `[experts, out, in]`.
pub struct RoutedParts<'a> {
    pub router: &'a Linear,
    pub gate: &'a QuantizedWeight,
    pub up: &'a QuantizedWeight,
    pub down: &'a QuantizedWeight,
    pub top_k: usize,
    pub normalize: bool,
    pub act: Act,
    /// A shared expert every row goes through (its output times the
    /// sigmoid of `shared_gate`'s one value), added to the routed sum.
    pub shared: Option<SharedParts<'a>>,
}

/// A shared expert beside routed ones (Qwen3-Next, Qwen3.5-MoE).
pub struct SharedParts<'a> {
    pub mlp: GatedParts<'a>,
    /// `[1, dim]`.
    pub gate: &'a Linear,
}
