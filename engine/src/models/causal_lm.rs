//! The trait every architecture implements: what the runtime needs of a
//! model.

use mlx_rs::Array;

use super::forward::{BatchItem, Overlap};
use super::kv_layout::KvLayout;
use super::kv_store::{KvCache, KvStore};
use crate::error::{EngineError, Result};
use crate::loading::config::ModelConfig;

/// A causal language model that MLX runs.
pub trait CausalLm {
    fn config(&self) -> &ModelConfig;

    /// What the model keeps per token and layer; caches are built from it.
    fn kv_layout(&self) -> &KvLayout;

    /// An empty cache for one sequence.
    fn new_cache(&self) -> KvCache {
        KvCache::new(self.kv_layout())
    }

    /// Runs every item's new tokens in one pass, each against its slot of
    /// `kv`, and returns the logits of the last token of each item with
    /// `sample` set, in item order (`[n_sampled, vocab]`, f32, not yet
    /// evaluated). Items name distinct slots.
    fn forward_batch(&self, kv: &mut KvStore, items: &[BatchItem<'_>]) -> Result<Array> {
        self.forward_pass(kv, items, Overlap::None)
    }

    /// [`forward_batch`](Self::forward_batch), choosing when the graph is
    /// handed to MLX: under [`Overlap::Layers`] each layer computes while
    /// the next is built, and the returned graph holds only what was built
    /// after the last hand-over (for computing, not for inspecting).
    fn forward_pass(
        &self,
        kv: &mut KvStore,
        items: &[BatchItem<'_>],
        overlap: Overlap,
    ) -> Result<Array>;

    /// One sequence: the logits of the last of `tokens` (`[vocab]`).
    fn forward(&self, tokens: &[u32], cache: &mut KvCache) -> Result<Array> {
        let items = [BatchItem {
            tokens,
            slot: cache.slot,
            sample: true,
        }];
        Ok(self
            .forward_batch(&mut cache.store, &items)?
            .reshape(&[-1])?)
    }

    /// Batch-invariant mode: results for a sequence must not depend on the
    /// batch, the chunking of its prompt or a cached prefix (bit for bit).
    /// Attention is batch-invariant only over fixed-capacity slots. A model
    /// that cannot honour it says so instead of doing less.
    fn set_batch_invariant(&mut self, on: bool) -> Result<()> {
        if !on {
            return Ok(());
        }
        Err(EngineError::Unsupported(format!(
            "architecture '{}' cannot run batch-invariant (--deterministic)",
            self.config().architecture
        )))
    }
}
