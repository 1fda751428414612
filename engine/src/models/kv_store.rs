//! The batch KV store: per layer, one key and one value buffer of shape
//! `[slots, kv_heads, capacity, head_dim]` holding every running sequence,
//! one slot each. A decode step writes all its new keys with ONE scatter per
//! layer and reads every decoding sequence's keys with one slice (or one
//! gather when the decoding slots are not `0..n`), so attention runs once per
//! layer for all of them (`forward::attention`).
//!
//! Padded rather than paged: on the CPU a paged layout costs a gather of
//! every page per layer and step, while padding costs only memory, which
//! sequences of one server share (the capacity grows to the longest running
//! sequence, rounded up to [`GROW_STEP`] positions and by half of itself at
//! least, up to the context: a prompt prefilled chunk by chunk copies the
//! store a few times, not once per step (at 7,000 positions each copy held
//! running streams 1.5 s on 2 cores); it shrinks back when the open slots
//! need half of it, and the buffers are dropped when no slot is open). Writes happen in place: a buffer is
//! taken out of the store, updated (MLX reuses its memory when nothing else
//! holds it) and put back.
//!
//! Recurrent layers (Gated DeltaNet) keep one state per slot instead:
//! `[slots, conv_len, conv_dim]` and `[slots, heads, value_dim, key_dim]`,
//! gathered for the decode group and scattered back in one call each per
//! layer, like keys and values. A slot's state starts at zero when it is
//! opened and can only be restored whole, from a snapshot
//! ([`StateSnapshot`]) taken at one exact position: a prefix of a hybrid
//! model is reusable only where such a snapshot exists.
//!
//! Sliding-window layers keep every position and attention masks what is
//! out of the window: a slot's positions then stay at fixed places, which
//! one write per step and copying a prefix in and out rely on. A slot opened
//! with a fixed capacity (batch-invariant mode) is read at exactly that many
//! positions, masked, so its attention shapes depend on the request alone.

use mlx_rs::ops::indexing::{IndexOp, TryIndexMutOp};
use mlx_rs::Array;

use super::kv_layout::KvLayout;
use crate::error::{EngineError, Result};

/// Keys and values of a run of positions of one sequence, one pair per
/// layer that holds its own (a shared layer's are its owner's), each
/// `[1, kv_heads, len, head_dim]`.
pub type KvSegment = Vec<(Array, Array)>;

/// One sequence's recurrent state at one position, one `(conv, delta)`
/// pair per recurrent layer, each `[1, ...]`: evaluated copies, never views
/// of the live store (a later step of the slot must not change them).
pub type StateSnapshot = Vec<(Array, Array)>;

/// Positions the store's capacity grows by.
pub const GROW_STEP: usize = 256;

#[derive(Debug, Clone, Copy, Default)]
struct Slot {
    open: bool,
    /// Positions written (the RoPE offset of the next token).
    offset: usize,
    /// Batch-invariant mode: attention reads exactly this many positions.
    fixed: Option<usize>,
}

/// Which pair of a layer's buffers: attention layer `n`'s keys and values,
/// or recurrent layer `n`'s conv and delta states.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Buffers {
    Kv(usize),
    States(usize),
}

/// Every running sequence's keys and values, one slot each.
pub struct KvStore {
    layout: KvLayout,
    /// Per layer: `(keys, values)`, each `[slots, kv_heads, capacity, d]`,
    /// or `None` before the first write (and after the last slot closed).
    layers: Vec<Option<(Array, Array)>>,
    /// Per recurrent layer: `(conv, delta)` states, `[slots, ...]` each, or
    /// `None` while no buffer is allocated.
    states: Vec<Option<(Array, Array)>>,
    slots: Vec<Slot>,
    /// Slots the buffers have room for.
    allocated_slots: usize,
    /// Positions per slot the buffers have room for.
    capacity: usize,
    /// Times the buffers grew so far.
    grows: usize,
    /// Positions a slot never passes (the context): growth stops there.
    max_positions: usize,
}

impl KvStore {
    pub fn new(layout: &KvLayout) -> Self {
        KvStore {
            layout: layout.clone(),
            layers: (0..layout.num_layers()).map(|_| None).collect(),
            states: layout.recurrent.iter().map(|_| None).collect(),
            slots: Vec::new(),
            allocated_slots: 0,
            capacity: 0,
            grows: 0,
            max_positions: usize::MAX,
        }
    }

    /// The store for sequences of at most `max` positions: its capacity
    /// grows ahead of them, never past `max` (rounded to [`GROW_STEP`]).
    pub fn with_max_positions(mut self, max: usize) -> Self {
        self.max_positions = max.max(1);
        self
    }

    /// Opens an empty slot (the lowest free one); `fixed`: the positions
    /// attention reads in batch-invariant mode. Its recurrent state is zero
    /// (a closed slot's row is cleared when reused; new rows are zeros).
    pub fn open(&mut self, fixed: Option<usize>) -> Result<usize> {
        let slot = Slot {
            open: true,
            offset: 0,
            fixed,
        };
        let i = match self.slots.iter().position(|s| !s.open) {
            Some(i) => {
                self.slots[i] = slot;
                i
            }
            None => {
                self.slots.push(slot);
                self.slots.len() - 1
            }
        };
        if i < self.allocated_slots {
            self.clear_state(i)?;
        }
        Ok(i)
    }

    /// Zeroes `slot`'s recurrent state.
    fn clear_state(&mut self, slot: usize) -> Result<()> {
        let s = slot as i32;
        for state in self.states.iter_mut().flatten() {
            for a in [&mut state.0, &mut state.1] {
                let mut shape = a.shape().to_vec();
                shape[0] = 1;
                a.try_index_mut(s..s + 1, Array::zeros::<f32>(&shape)?)?;
            }
        }
        Ok(())
    }

    /// Closes a slot; its positions may be overwritten by the next
    /// sequence. When no slot is open the buffers are freed; when the open
    /// ones need at most half the slots or half the capacity, the buffers
    /// shrink to what they need (so one long request does not keep every
    /// slot at its length after it ended).
    pub fn close(&mut self, slot: usize) -> Result<()> {
        self.slots[slot].open = false;
        while self.slots.last().is_some_and(|s| !s.open) {
            self.slots.pop();
        }
        if self.slots.is_empty() {
            self.layers.iter_mut().for_each(|l| *l = None);
            self.states.iter_mut().for_each(|l| *l = None);
            self.allocated_slots = 0;
            self.capacity = 0;
            return Ok(());
        }
        let needed = self
            .slots
            .iter()
            .filter(|s| s.open)
            .map(|s| s.offset.max(s.fixed.unwrap_or(0)))
            .max()
            .unwrap_or(0)
            .max(1)
            .div_ceil(GROW_STEP)
            * GROW_STEP;
        if self.slots.len() * 2 <= self.allocated_slots || needed * 2 <= self.capacity {
            self.resize(self.slots.len(), needed.min(self.capacity))?;
        }
        Ok(())
    }

    /// Tokens written in `slot` (the RoPE offset of its next token).
    pub fn offset(&self, slot: usize) -> usize {
        self.slots[slot].offset
    }

    /// The positions attention reads for `slot` in batch-invariant mode.
    pub fn fixed(&self, slot: usize) -> Option<usize> {
        self.slots[slot].fixed
    }

    /// Records that `n` more positions of `slot` were written by every layer.
    pub fn advance(&mut self, slot: usize, n: usize) {
        self.slots[slot].offset += n;
    }

    /// Makes room for `slot` to hold `end` positions (and all of its fixed
    /// capacity): grows every layer's buffers, copying what they hold. Call
    /// it for every slot of a pass before the pass writes.
    pub fn reserve(&mut self, slot: usize, end: usize) -> Result<()> {
        self.reserve_all([(slot, end)])
    }

    /// [`reserve`](Self::reserve) for several `(slot, end)` at once, with
    /// one resize at most: growing slot by slot copies the whole store for
    /// each (32 requests arriving together with a cached prefix spent ~7 s
    /// of SmolLM2's first token in those copies).
    pub fn reserve_all(&mut self, wants: impl IntoIterator<Item = (usize, usize)>) -> Result<()> {
        let mut positions = 0;
        for (slot, end) in wants {
            let s = self.slots[slot];
            if let Some(fixed) = s.fixed.filter(|&f| end > f) {
                return Err(EngineError::InvalidRequest {
                    message: format!("sequence of {end} positions exceeds its cache of {fixed}"),
                    param: None,
                });
            }
            positions = positions.max(end.max(s.fixed.unwrap_or(0)));
        }
        let needed = positions.div_ceil(GROW_STEP) * GROW_STEP;
        let capacity = if needed <= self.capacity {
            self.capacity
        } else {
            // Ahead by half the old capacity, within the context.
            let ahead = (self.capacity + self.capacity / 2).div_ceil(GROW_STEP) * GROW_STEP;
            let ceiling = self
                .max_positions
                .div_ceil(GROW_STEP)
                .saturating_mul(GROW_STEP);
            needed.max(ahead.min(ceiling))
        };
        let slots = self.slots.len().max(self.allocated_slots);
        if slots == self.allocated_slots && capacity == self.capacity {
            return Ok(());
        }
        self.resize(slots, capacity)
    }

    /// How many times the buffers grew (each a copy of what they held).
    pub fn grows(&self) -> usize {
        self.grows
    }

    /// New buffers of `slots` x `capacity`, holding what the old ones held
    /// within those bounds. On failure nothing changes.
    fn resize(&mut self, slots: usize, capacity: usize) -> Result<()> {
        let mut layers = Vec::with_capacity(self.layers.len());
        for (layer, kv) in self.layers.iter().enumerate() {
            let l = self.layout.layers[layer];
            if l.shares.is_some() {
                layers.push(None);
                continue;
            }
            let shape = [
                slots as i32,
                l.kv_heads as i32,
                capacity as i32,
                l.head_dim as i32,
            ];
            let copy = |old: Option<&Array>| -> Result<Array> {
                let mut buf = Array::zeros::<f32>(&shape)?;
                if let Some(old) = old {
                    let s = old.dim(0).min(slots as i32);
                    let c = old.dim(2).min(capacity as i32);
                    let kept = || (0..s, .., 0..c, ..);
                    buf.try_index_mut(kept(), old.index(kept()))?;
                }
                Ok(buf)
            };
            let (k, v) = match kv {
                Some((k, v)) => (Some(k), Some(v)),
                None => (None, None),
            };
            layers.push(Some((copy(k)?, copy(v)?)));
        }
        let mut states = Vec::with_capacity(self.states.len());
        for (r, state) in self.layout.recurrent.iter().zip(&self.states) {
            let n = slots as i32;
            let conv = [n, r.conv_len as i32, r.conv_dim as i32];
            let delta = [
                n,
                r.value_heads as i32,
                r.value_dim as i32,
                r.key_dim as i32,
            ];
            let copy = |shape: &[i32], old: Option<&Array>| -> Result<Array> {
                let mut buf = Array::zeros::<f32>(shape)?;
                if let Some(old) = old {
                    let s = old.dim(0).min(n);
                    buf.try_index_mut(0..s, old.index(0..s))?;
                }
                Ok(buf)
            };
            states.push(Some((
                copy(&conv, state.as_ref().map(|s| &s.0))?,
                copy(&delta, state.as_ref().map(|s| &s.1))?,
            )));
        }
        if slots > self.allocated_slots || capacity > self.capacity {
            self.grows += 1;
        }
        self.layers = layers;
        self.states = states;
        self.allocated_slots = slots;
        self.capacity = capacity;
        Ok(())
    }

    /// Takes attention layer `layer`'s keys and values out for writing (so
    /// MLX can update them in place); [`KvStore::put`] returns them.
    pub fn take(&mut self, layer: usize) -> (Array, Array) {
        self.take_buffers(Buffers::Kv(layer))
    }

    pub fn put(&mut self, layer: usize, kv: (Array, Array)) {
        self.put_buffers(Buffers::Kv(layer), kv)
    }

    /// A layer's pair of buffers, out of the store until
    /// [`put_buffers`](Self::put_buffers) (so an op can update them in
    /// place).
    pub fn take_buffers(&mut self, which: Buffers) -> (Array, Array) {
        match which {
            Buffers::Kv(layer) => self.layers[layer].take(),
            Buffers::States(layer) => self.states[layer].take(),
        }
        .expect("reserve() before writing a layer")
    }

    pub fn put_buffers(&mut self, which: Buffers, buffers: (Array, Array)) {
        match which {
            Buffers::Kv(layer) => self.layers[layer] = Some(buffers),
            Buffers::States(layer) => self.states[layer] = Some(buffers),
        }
    }

    /// Keys and values of `layer` for `slots` (`[n, kv_heads, positions,
    /// d]`): a view when the slots are consecutive and in order (the decode
    /// group's are, in slot order), else one gather. The gather takes whole
    /// slots from the contiguous buffer and slices after: MLX's CPU gather
    /// copies contiguous slices with a plain copy, but walks a strided
    /// source element by element (a gather of the sliced positions took 8%
    /// of a decode step at 8 streams).
    pub fn rows(&self, layer: usize, slots: &SlotSet, positions: usize) -> Result<(Array, Array)> {
        let (k, v) = self.layers[self.layout.owner_of(layer)]
            .as_ref()
            .expect("written before it is read");
        let p = positions as i32;
        Ok(match slots.range.clone() {
            Some(r) => (
                k.index((r.clone(), .., 0..p, ..)),
                v.index((r, .., 0..p, ..)),
            ),
            None => (
                k.take_axis(&slots.index, 0)?.index((.., .., 0..p, ..)),
                v.take_axis(&slots.index, 0)?.index((.., .., 0..p, ..)),
            ),
        })
    }

    /// The whole key and value buffers `layer` reads (its owner's),
    /// `[slots, kv_heads, capacity, d]`: for attention that reads each slot
    /// where it lies (`cpu::attention`).
    pub fn buffers(&self, layer: usize) -> (&Array, &Array) {
        let (k, v) = self.layers[self.layout.owner_of(layer)]
            .as_ref()
            .expect("written before it is read");
        (k, v)
    }

    /// Keys and values of `layer` for one slot: `[1, kv_heads, positions, d]`.
    pub fn slot(&self, layer: usize, slot: usize, positions: usize) -> (Array, Array) {
        let (k, v) = self.layers[self.layout.owner_of(layer)]
            .as_ref()
            .expect("written before it is read");
        let (s, p) = (slot as i32, positions as i32);
        (
            k.index((s..s + 1, .., 0..p, ..)),
            v.index((s..s + 1, .., 0..p, ..)),
        )
    }

    /// Fills an empty slot with a cached prefix (`segments` back to back,
    /// `len` positions in all) and, for a model with recurrent layers, the
    /// state those `len` positions left (required: without it the prefix
    /// cannot be resumed exactly).
    pub fn load(
        &mut self,
        slot: usize,
        segments: &[KvSegment],
        len: usize,
        state: Option<&StateSnapshot>,
    ) -> Result<()> {
        if len == 0 {
            return Ok(());
        }
        self.reserve(slot, len)?;
        if self.layout.has_recurrent() {
            let state = state.ok_or_else(|| {
                EngineError::Internal(format!(
                    "a prefix of {len} positions without the recurrent state it left"
                ))
            })?;
            self.restore(slot, state)?;
        }
        let s = slot as i32;
        let owners: Vec<usize> = self.layout.owners().collect();
        for (entry, &layer) in owners.iter().enumerate() {
            let (mut k, mut v) = self.take(layer);
            let mut at = 0i32;
            for seg in segments {
                let (sk, sv) = &seg[entry];
                let n = sk.dim(2);
                k.try_index_mut((s..s + 1, .., at..at + n, ..), sk)?;
                v.try_index_mut((s..s + 1, .., at..at + n, ..), sv)?;
                at += n;
            }
            self.put(layer, (k, v));
        }
        self.slots[slot].offset = len;
        Ok(())
    }

    /// A copy of positions `start..end` of `slot`, evaluated now: an
    /// unevaluated copy would keep the whole store buffer it reads alive (in
    /// the prefix cache, one such buffer per cached chunk).
    pub fn segment(&self, slot: usize, start: usize, end: usize) -> Result<KvSegment> {
        let (s, a, b) = (slot as i32, start as i32, end as i32);
        let segment: KvSegment = self
            .layout
            .owners()
            .map(|l| {
                let (k, v) = self.layers[l].as_ref().expect("segment of a written slot");
                Ok((
                    k.index((s..s + 1, .., a..b, ..)).contiguous()?,
                    v.index((s..s + 1, .., a..b, ..)).contiguous()?,
                ))
            })
            .collect::<Result<_>>()?;
        mlx_rs::transforms::eval(segment.iter().flat_map(|(k, v)| [k, v]))?;
        Ok(segment)
    }

    /// Every key, value and state buffer (to evaluate them with the
    /// logits).
    pub fn arrays(&self) -> impl Iterator<Item = &Array> {
        self.layers
            .iter()
            .chain(&self.states)
            .flatten()
            .flat_map(|(k, v)| [k, v])
    }

    /// Recurrent layer `layer`'s states of `slots` (`[n, ...]` each): a
    /// slice when the slots are consecutive, else one gather.
    pub fn state_rows(&self, layer: usize, slots: &SlotSet) -> Result<(Array, Array)> {
        let (conv, delta) = self.states[layer]
            .as_ref()
            .expect("reserve() before reading a state");
        Ok(match slots.range.clone() {
            Some(r) => (conv.index(r.clone()), delta.index(r)),
            None => (
                conv.take_axis(&slots.index, 0)?,
                delta.take_axis(&slots.index, 0)?,
            ),
        })
    }

    /// Writes `slots`' new states of recurrent layer `layer` (one scatter
    /// per buffer).
    pub fn write_states(
        &mut self,
        layer: usize,
        slots: &SlotSet,
        (conv, delta): (&Array, &Array),
    ) -> Result<()> {
        let (mut c, mut d) = self.states[layer]
            .take()
            .expect("reserve() before writing a state");
        let written =
            write_rows(&mut c, slots, conv).and_then(|_| write_rows(&mut d, slots, delta));
        self.states[layer] = Some((c, d));
        written
    }

    /// A copy of `slot`'s recurrent state as it is now, evaluated (empty
    /// for a model without recurrent layers).
    pub fn snapshot(&self, slot: usize) -> Result<StateSnapshot> {
        let s = slot as i32;
        let snapshot: StateSnapshot = self
            .states
            .iter()
            .map(|st| {
                let (conv, delta) = st.as_ref().expect("snapshot of a written slot");
                Ok((
                    conv.index(s..s + 1).contiguous()?,
                    delta.index(s..s + 1).contiguous()?,
                ))
            })
            .collect::<Result<_>>()?;
        mlx_rs::transforms::eval(snapshot.iter().flat_map(|(c, d)| [c, d]))?;
        Ok(snapshot)
    }

    /// Sets `slot`'s recurrent state to `snapshot`.
    fn restore(&mut self, slot: usize, snapshot: &StateSnapshot) -> Result<()> {
        if snapshot.len() != self.states.len() {
            return Err(EngineError::Internal(format!(
                "a state snapshot of {} layers for a model of {}",
                snapshot.len(),
                self.states.len()
            )));
        }
        let s = slot as i32;
        for (state, (conv, delta)) in self.states.iter_mut().zip(snapshot) {
            let (c, d) = state.as_mut().expect("reserve() before restoring");
            c.try_index_mut(s..s + 1, conv)?;
            d.try_index_mut(s..s + 1, delta)?;
        }
        Ok(())
    }
}

/// Writes `rows` into `slots`' rows of `buf` (a slice when the slots are
/// consecutive, else one scatter).
fn write_rows(buf: &mut Array, slots: &SlotSet, rows: &Array) -> Result<()> {
    if let Some(r) = slots.range.clone() {
        buf.try_index_mut(r, rows)?;
    } else {
        buf.try_index_mut((&slots.index, ..), rows)?;
    }
    Ok(())
}

/// A set of slots read together: which rows of the store, and how.
pub struct SlotSet {
    /// The slots, in the order their rows come out.
    slots: Vec<i32>,
    /// The slots, in the order their rows come out, as an index array
    /// (built once per pass, used by every layer).
    index: Array,
    /// The slots as a range of the store's rows, when they are
    /// consecutive and in order: read by a slice (a view: no copy), not a
    /// gather.
    range: Option<std::ops::Range<i32>>,
}

impl SlotSet {
    pub fn new(slots: &[usize]) -> Self {
        let idx: Vec<i32> = slots.iter().map(|&s| s as i32).collect();
        SlotSet {
            index: Array::from_slice(&idx, &[slots.len() as i32]),
            range: idx
                .first()
                .filter(|&&first| idx.iter().zip(first..).all(|(&s, want)| s == want))
                .map(|&first| first..first + idx.len() as i32),
            slots: idx,
        }
    }

    /// The slots, in order.
    pub fn as_slice(&self) -> &[i32] {
        &self.slots
    }

    /// The slots as an index array.
    pub fn index(&self) -> &Array {
        &self.index
    }
}

/// One sequence's own store: what single-sequence callers (tests, tools,
/// `generate`) pass to [`crate::models::CausalLm::forward`].
pub struct KvCache {
    pub store: KvStore,
    pub slot: usize,
}

impl KvCache {
    pub fn new(layout: &KvLayout) -> Self {
        KvCache::open(layout, None)
    }

    /// A cache whose attention reads `capacity` positions (batch-invariant
    /// mode).
    pub fn with_capacity(layout: &KvLayout, capacity: usize) -> Self {
        KvCache::open(layout, Some(capacity))
    }

    fn open(layout: &KvLayout, fixed: Option<usize>) -> Self {
        let mut store = KvStore::new(layout);
        let slot = store
            .open(fixed)
            .expect("a new store's first slot has no state to clear");
        KvCache { store, slot }
    }

    /// A cache holding a reused prefix: its KV and, for a model with
    /// recurrent layers, the state it left.
    pub fn from_segments(
        layout: &KvLayout,
        segments: &[KvSegment],
        len: usize,
        state: Option<&StateSnapshot>,
        capacity: Option<usize>,
    ) -> Result<Self> {
        let mut cache = KvCache::open(layout, capacity);
        cache.store.load(cache.slot, segments, len, state)?;
        Ok(cache)
    }

    /// The recurrent state as it is now (a copy).
    pub fn snapshot(&self) -> Result<StateSnapshot> {
        self.store.snapshot(self.slot)
    }

    pub fn offset(&self) -> usize {
        self.store.offset(self.slot)
    }

    /// Positions `start..end` of every layer.
    pub fn segment(&self, start: usize, end: usize) -> Result<KvSegment> {
        self.store.segment(self.slot, start, end)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `n` positions whose keys are `base + p` (values: the negation).
    fn segment(base: f32, n: usize) -> KvSegment {
        let keys: Vec<f32> = (0..n).map(|p| base + p as f32).collect();
        let k = Array::from_slice(&keys, &[1, 1, n as i32, 1]);
        vec![(k.clone(), k.negative().unwrap())]
    }

    fn keys(kv: &KvStore, slot: usize) -> Vec<f32> {
        let n = kv.offset(slot);
        kv.segment(slot, 0, n).unwrap()[0]
            .0
            .as_slice::<f32>()
            .to_vec()
    }

    /// A prompt written chunk by chunk grows the store a few times, ahead
    /// of it, never past the context; its keys stay where they were.
    #[test]
    fn a_growing_sequence_grows_the_store_geometrically_up_to_the_context() {
        let mut kv = KvStore::new(&KvLayout::uniform(1, 1, 1)).with_max_positions(8_192);
        let slot = kv.open(None).unwrap();
        kv.load(slot, &[segment(0.0, 16)], 16, None).unwrap();
        let first = keys(&kv, slot);
        let mut capacities = vec![kv.capacity];
        let mut end = 16;
        while end < 8_000 {
            end += 16;
            kv.reserve(slot, end).unwrap();
            if kv.capacity != *capacities.last().unwrap() {
                capacities.push(kv.capacity);
            }
        }
        assert_eq!(
            capacities,
            [256, 512, 768, 1_280, 2_048, 3_072, 4_608, 6_912, 8_192]
        );
        // Steps of GROW_STEP alone would have copied the store 31 times.
        assert_eq!(kv.grows(), capacities.len());
        assert_eq!(keys(&kv, slot)[..16], first[..16]);
    }

    /// A long sequence grows every slot; once it ends, the store shrinks
    /// back and the other slots keep what they hold.
    #[test]
    fn the_store_grows_for_a_long_sequence_and_shrinks_after_it() {
        let mut kv = KvStore::new(&KvLayout::uniform(1, 1, 1));
        let short = kv.open(None).unwrap();
        kv.load(short, &[segment(0.0, 10)], 10, None).unwrap();
        let long = kv.open(None).unwrap();
        kv.load(long, &[segment(100.0, 600)], 600, None).unwrap();
        assert_eq!((kv.allocated_slots, kv.capacity), (2, 768));
        let before = keys(&kv, short);
        kv.close(long).unwrap();
        assert_eq!((kv.allocated_slots, kv.capacity), (1, GROW_STEP));
        assert_eq!(keys(&kv, short), before);
        // A slot opened next reuses the freed index.
        assert_eq!(kv.open(None).unwrap(), 1);
        kv.close(1).unwrap();
        kv.close(short).unwrap();
        assert!(kv.arrays().next().is_none(), "no slot open: buffers freed");
    }
}
