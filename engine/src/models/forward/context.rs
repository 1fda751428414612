//! [`ForwardContext`]: one pass over a batch, built once and read by every
//! layer.

use mlx_rs::ops::concatenate;
use mlx_rs::ops::indexing::IndexOp;
use mlx_rs::Array;

use super::attention::{self, AttentionSpec, NewRows};
use super::batch_item::BatchItem;
use super::layout::BatchLayout;
use super::linear;
use crate::cpu;
use crate::error::Result;
use crate::layers::{FusedLinear, Linear};
use crate::models::kv_store::{Buffers, KvStore, SlotSet};

/// A recurrent layer's state of some sequences: `(conv, delta)`, `[n, ...]`
/// each.
pub type States = (Array, Array);

/// When a pass hands its graph to MLX.
///
/// MLX builds a graph on the host and computes it on the device's stream.
/// Built whole and evaluated at the end, the device waits while the host
/// builds (3.5 ms of a 114 ms decode step of SmolLM2 at 8 streams on
/// MLX's CPU ops; on a launch-bound GPU the build is most of a step).
/// Handed over a layer at a time (`async_eval`), the device computes layer
/// `i` while the host builds layer `i + 1`. Values are the same either way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Overlap {
    /// The whole graph stays lazy until the caller evaluates it (what a
    /// caller inspecting the graph needs: it is all there).
    None,
    /// Each layer's input starts computing before the layer is built.
    Layers,
}

/// One forward pass over a batch of items.
pub struct ForwardContext<'p, 'a> {
    items: &'p [BatchItem<'a>],
    kv: &'p mut KvStore,
    layout: BatchLayout,
    batch_invariant: bool,
    overlap: Overlap,
}

impl<'p, 'a> ForwardContext<'p, 'a> {
    /// `batch_invariant`: every shape independent of the batch (row-blocked
    /// matmuls, fixed-shape attention over fixed-capacity slots). Makes room
    /// in `kv` for every item's new tokens.
    pub fn new(
        items: &'p [BatchItem<'a>],
        kv: &'p mut KvStore,
        batch_invariant: bool,
        overlap: Overlap,
    ) -> Result<Self> {
        let wants: Vec<(usize, usize)> = items
            .iter()
            .map(|item| (item.slot, kv.offset(item.slot) + item.tokens.len()))
            .collect();
        kv.reserve_all(wants)?;
        let layout = BatchLayout::new(items, kv);
        Ok(ForwardContext {
            items,
            kv,
            layout,
            batch_invariant,
            overlap,
        })
    }

    /// Called by an architecture before it builds each layer, with the
    /// layer's input: under [`Overlap::Layers`] MLX starts computing it
    /// (and the keys and values written so far, which it depends on) while
    /// the layer is built.
    pub fn hand_over(&self, h: &Array) -> Result<()> {
        if self.overlap == Overlap::Layers {
            mlx_rs::transforms::async_eval([h])?;
        }
        Ok(())
    }

    /// Whether every row's result must be independent of the batch.
    pub fn batch_invariant(&self) -> bool {
        self.batch_invariant
    }

    /// Every item's new token ids, end to end: `[1, rows]`.
    pub fn token_ids(&self) -> Array {
        let ids: Vec<u32> = self
            .items
            .iter()
            .flat_map(|i| i.tokens.iter().copied())
            .collect();
        Array::from_slice(&ids, &[1, ids.len() as i32])
    }

    /// `lin` over the batch rows `x` (`[1, rows, in]`).
    pub fn linear(&self, lin: &Linear, x: &Array) -> Result<Array> {
        linear::apply(lin, x, self.batch_invariant)
    }

    /// A fused projection's parts over `x`.
    pub fn fused(&self, lin: &FusedLinear, x: &Array) -> Result<Vec<Array>> {
        linear::apply_fused(lin, x, None, self.batch_invariant)
    }

    /// A fused projection's parts over `x`, adjacent parts merged by
    /// `groups` (`[2, 1]`: q and k as one array, then v).
    pub fn fused_grouped(
        &self,
        lin: &FusedLinear,
        x: &Array,
        groups: &[usize],
    ) -> Result<Vec<Array>> {
        linear::apply_fused(lin, x, Some(groups), self.batch_invariant)
    }

    /// Attention of layer `layer` for every item: `qk` holds each row's
    /// queries then keys (`[1, rows, (heads + kv_heads) * head_dim]`; the
    /// queries alone for a layer that shares another's KV, which passes no
    /// `v`), `v` its values. RoPE is applied here (q and k in one call per
    /// group), the new keys and values are all written into the store first
    /// (so each buffer is updated in place, once per writer), then the
    /// decode group attends in one call (one per fixed capacity in
    /// batch-invariant mode) and each chunk over its slot. A shared layer
    /// writes nothing and reads its owner's buffers (written earlier in
    /// this pass). The output comes back in row order:
    /// `[1, rows, heads * head_dim]`.
    pub fn attention(
        &mut self,
        layer: usize,
        qk: &Array,
        v: Option<&Array>,
        spec: &AttentionSpec,
    ) -> Result<Array> {
        let decode = match &self.layout.decode {
            Some(d) => Some(attention::decode_rows(spec, qk, v, d)?),
            None => None,
        };
        // Per chunk: its slot, its first position and its new rows.
        let mut chunks: Vec<(usize, usize, NewRows)> = Vec::new();
        for (i, item) in self.items.iter().enumerate() {
            if self.layout.in_decode_group(i) {
                continue;
            }
            let start = self.layout.starts[i];
            let rows = start..start + item.tokens.len() as i32;
            let offset = self.kv.offset(item.slot);
            let new = attention::chunk_rows(spec, qk, v, rows, offset)?;
            chunks.push((item.slot, offset, new));
        }

        if spec.shares_kv_of.is_none() {
            let (mut keys, mut values) = self.kv.take(layer);
            if let (Some(group), Some(NewRows { kv: Some(kv), .. })) =
                (&self.layout.decode, &decode)
            {
                attention::write_decode([&mut keys, &mut values], group, kv)?;
            }
            for (slot, offset, new) in &chunks {
                if let Some(kv) = &new.kv {
                    attention::write_chunk([&mut keys, &mut values], *slot, *offset, kv)?;
                }
            }
            self.kv.put(layer, (keys, values));
        }

        let mut pieces = Vec::new();
        if let (Some(group), Some(new)) = (&self.layout.decode, &decode) {
            let mut outs = Vec::with_capacity(group.reads.len());
            for read in &group.reads {
                outs.push(attention::decode_read(
                    spec, &new.q, read, group, self.kv, layer,
                )?);
            }
            let o = if outs.len() == 1 {
                outs.pop().expect("one read")
            } else {
                concatenate(&outs, 0)?
            };
            // [n, heads, 1, d] is laid out as [1, n, heads * d].
            pieces.push(o.reshape(&[1, group.items.len() as i32, -1])?);
        }
        for (slot, offset, new) in &chunks {
            pieces.push(attention::chunk_read(
                spec, &new.q, *slot, *offset, self.kv, layer,
            )?);
        }
        let o = if pieces.len() == 1 {
            pieces.pop().expect("one piece")
        } else {
            concatenate(&pieces, 1)?
        };
        Ok(match &self.layout.to_item_order {
            Some(inverse) => o.take_axis(inverse, 1)?,
            None => o,
        })
    }

    /// This pass's rows as a whole-layer primitive takes them
    /// ([`cpu::layer`]): every item, decoding or prefilling, in item order.
    pub fn layer_rows(&self) -> cpu::layer::Rows {
        cpu::layer::Rows {
            slots: self.items.iter().map(|i| i.slot as i32).collect(),
            offsets: self
                .items
                .iter()
                .map(|i| self.kv.offset(i.slot) as i32)
                .collect(),
            lens: self.items.iter().map(|i| i.tokens.len() as i32).collect(),
        }
    }

    /// Runs attention layer `layer` as one op that also writes its keys and
    /// values: `run` gets the layer's store buffers and returns the new
    /// hidden rows and the new buffers. The store leaves this context's
    /// hands while `run` builds the op, so the op can update it in place;
    /// on an error the old buffers go back.
    pub fn layer_op(
        &mut self,
        layer: usize,
        run: impl FnOnce(&Array, &Array) -> Result<(Array, Array, Array)>,
    ) -> Result<Array> {
        self.donated(Buffers::Kv(layer), run)
    }

    /// Runs KV-shared attention layer `layer` as one op that reads its
    /// owner's store where it lies and writes nothing: `run` gets the
    /// owner's buffers and returns the new hidden rows (and two empty
    /// arrays). The store stays in place: donating it would copy it, since
    /// the owner's op, earlier in the same graph, still holds the buffer
    /// when this one is encoded.
    pub fn shared_layer_op(
        &mut self,
        layer: usize,
        run: impl FnOnce(&Array, &Array) -> Result<(Array, Array, Array)>,
    ) -> Result<Array> {
        let (keys, values) = self.kv.buffers(layer);
        run(keys, values).map(|(h, _, _)| h)
    }

    /// Runs recurrent layer `layer` as one op that also steps its states,
    /// as [`layer_op`](Self::layer_op) does with a store: `run` gets the
    /// layer's `(conv, delta)` state buffers and returns the new hidden
    /// rows and the new buffers.
    pub fn recurrent_layer_op(
        &mut self,
        layer: usize,
        run: impl FnOnce(&Array, &Array) -> Result<(Array, Array, Array)>,
    ) -> Result<Array> {
        self.donated(Buffers::States(layer), run)
    }

    fn donated(
        &mut self,
        which: Buffers,
        run: impl FnOnce(&Array, &Array) -> Result<(Array, Array, Array)>,
    ) -> Result<Array> {
        let (a, b) = self.kv.take_buffers(which);
        match run(&a, &b) {
            Ok((h, new_a, new_b)) => {
                drop((a, b));
                self.kv.put_buffers(which, (new_a, new_b));
                Ok(h)
            }
            Err(e) => {
                self.kv.put_buffers(which, (a, b));
                Err(e)
            }
        }
    }

    /// Recurrent layer `layer` (its index among the model's recurrent
    /// layers) for every item. `x` holds each row's input to the recurrence
    /// (`[1, rows, width]`); `step` runs it over `[n, l, width]` rows of `n`
    /// sequences from their states and returns `[n, l, out]` and the new
    /// states. The decode group's states are gathered, stepped and written
    /// back in one call each (`l` = 1); each prefill chunk runs over its own
    /// slot, carrying the state from the previous chunk. The output comes
    /// back in row order: `[1, rows, out]`.
    pub fn recurrent(
        &mut self,
        layer: usize,
        x: &Array,
        step: impl Fn(&Array, States) -> Result<(Array, States)>,
    ) -> Result<Array> {
        let mut pieces = Vec::new();
        if let Some(group) = &self.layout.decode {
            let n = group.items.len() as i32;
            let rows = match &group.rows {
                Some(rows) => x.take_axis(rows, 1)?,
                None => x.clone(),
            };
            let rows = rows.reshape(&[n, 1, -1])?;
            let state = self.kv.state_rows(layer, &group.slots)?;
            let (y, (conv, delta)) = step(&rows, state)?;
            self.kv.write_states(layer, &group.slots, (&conv, &delta))?;
            pieces.push(y.reshape(&[1, n, -1])?);
        }
        for (i, item) in self.items.iter().enumerate() {
            if self.layout.in_decode_group(i) {
                continue;
            }
            let start = self.layout.starts[i];
            let rows = x.index((.., start..start + item.tokens.len() as i32, ..));
            let slot = SlotSet::new(&[item.slot]);
            let state = self.kv.state_rows(layer, &slot)?;
            let (y, (conv, delta)) = step(&rows, state)?;
            self.kv.write_states(layer, &slot, (&conv, &delta))?;
            pieces.push(y);
        }
        let o = if pieces.len() == 1 {
            pieces.pop().expect("one piece")
        } else {
            concatenate(&pieces, 1)?
        };
        Ok(match &self.layout.to_item_order {
            Some(inverse) => o.take_axis(inverse, 1)?,
            None => o,
        })
    }

    /// After the last layer: records the new tokens in every cache and
    /// returns the hidden states of the sampled rows (`[1, n_sampled, dim]`),
    /// in item order, or `None` when nothing is sampled (prefill chunks
    /// only). Call it once per pass.
    pub fn sampled_rows(&mut self, h: &Array) -> Result<Option<Array>> {
        debug_assert_eq!(h.dim(1), self.layout.total, "one hidden row per token");
        let mut rows = Vec::new();
        let mut end = 0i32;
        for item in self.items {
            self.kv.advance(item.slot, item.tokens.len());
            end += item.tokens.len() as i32;
            if item.sample {
                rows.push(end - 1);
            }
        }
        if rows.is_empty() {
            return Ok(None);
        }
        let n = rows.len() as i32;
        Ok(Some(h.take_axis(Array::from_slice(&rows, &[n]), 1)?))
    }
}
