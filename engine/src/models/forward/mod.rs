//! The forward context: what every architecture's forward pass shares,
//! built once per pass. The running sequences' new tokens (one each when
//! decoding, a chunk when prefilling) are laid end to end in one
//! `[1, tokens, dim]` row, so embedding, norms, projections and the MLP run
//! once for all of them; attention runs per item against its own cache
//! ([`attention`]); the LM head runs only on sampled rows. An architecture
//! file holds only what is its own (weights, norms, the order of blocks).

mod attention;
mod batch_item;
mod context;
mod layout;
mod linear;

pub use attention::{AttentionSpec, QkNorm};
pub use batch_item::BatchItem;
pub use context::{ForwardContext, Overlap, States};
