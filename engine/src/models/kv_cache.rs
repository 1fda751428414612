//! Per-sequence key/value cache: one `[1, kv_heads, slots, head_dim]` buffer
//! pair per layer, written in place. By default the buffers grow by
//! [`GROW_STEP`] positions when full (one copy every `GROW_STEP` tokens, not
//! one per token) and attention sees the filled part. A fixed-capacity cache
//! (batch-invariant mode) allocates `capacity` slots once and attention sees
//! all of them, masked, so its shapes never change.
//!
//! A sliding-window layer (declared in the model's KV layout) keeps only
//! what a future query can still see: before new keys are written, the
//! positions older than `window - 1` before them are dropped, once at least
//! `window` of them have piled up (one copy per `window` tokens). Its slot 0
//! then holds position [`KvCache::start`], not 0.

use mlx_rs::ops::concatenate;
use mlx_rs::ops::indexing::{IndexOp, TryIndexMutOp};
use mlx_rs::Array;

use super::kv_layout::KvLayout;
use crate::error::{EngineError, Result};

/// Keys and values of a run of positions, one pair per layer.
pub type KvSegment = Vec<(Array, Array)>;

/// Positions a growing cache adds when it is full.
const GROW_STEP: usize = 256;

pub struct KvCache {
    layers: Vec<Option<(Array, Array)>>,
    /// Per layer: the position held in slot 0.
    starts: Vec<usize>,
    /// Per layer: its attention window, if it slides.
    windows: Vec<Option<usize>>,
    offset: usize,
    /// `Some(c)`: fixed `c`-position buffers (allocated on first write).
    capacity: Option<usize>,
}

impl KvCache {
    /// An empty cache for a model of this layout.
    pub fn new(layout: &KvLayout) -> Self {
        KvCache {
            layers: (0..layout.num_layers()).map(|_| None).collect(),
            starts: vec![0; layout.num_layers()],
            windows: layout.layers.iter().map(|l| l.window).collect(),
            offset: 0,
            capacity: None,
        }
    }

    /// A fixed-capacity cache of `capacity` positions (windows are applied
    /// by masks; nothing is dropped).
    pub fn with_capacity(layout: &KvLayout, capacity: usize) -> Self {
        KvCache {
            capacity: Some(capacity),
            ..KvCache::new(layout)
        }
    }

    pub fn capacity(&self) -> Option<usize> {
        self.capacity
    }

    /// A cache holding `segments` back to back (a reused prefix).
    pub fn from_segments(
        layout: &KvLayout,
        segments: &[KvSegment],
        len: usize,
        capacity: Option<usize>,
    ) -> Result<Self> {
        let mut cache = KvCache::new(layout);
        if segments.is_empty() {
            cache.capacity = capacity;
            return Ok(cache);
        }
        for (layer, slot) in cache.layers.iter_mut().enumerate() {
            let ks: Vec<&Array> = segments.iter().map(|s| &s[layer].0).collect();
            let vs: Vec<&Array> = segments.iter().map(|s| &s[layer].1).collect();
            *slot = Some(if segments.len() == 1 {
                (ks[0].clone(), vs[0].clone())
            } else {
                (concatenate(&ks, 2)?, concatenate(&vs, 2)?)
            });
        }
        cache.offset = len;
        if let Some(c) = capacity {
            let mut fixed = KvCache::with_capacity(layout, c);
            for (layer, slot) in cache.layers.into_iter().enumerate() {
                let (k, v) = slot.expect("filled above");
                fixed.update(layer, k, v)?;
            }
            fixed.offset = len;
            return Ok(fixed);
        }
        Ok(cache)
    }

    /// Tokens already cached (the RoPE offset of the next token).
    pub fn offset(&self) -> usize {
        self.offset
    }

    /// The position slot 0 of `layer` holds (0 unless its window slid).
    pub fn start(&self, layer: usize) -> usize {
        self.starts[layer]
    }

    /// Whether every layer still holds position `position` and after.
    pub fn holds_from(&self, position: usize) -> bool {
        self.starts.iter().all(|&s| s <= position)
    }

    /// Writes this step's keys/values for `layer` (`[1, kv_heads, n, d]`)
    /// after the cached ones and returns what attention reads: the held
    /// positions (from [`KvCache::start`]), or every slot of a
    /// fixed-capacity cache.
    pub fn update(&mut self, layer: usize, k: Array, v: Array) -> Result<(Array, Array)> {
        let (s, e) = (self.offset, self.offset + k.dim(2) as usize);
        if self.capacity.is_some_and(|cap| e > cap) {
            return Err(EngineError::InvalidRequest {
                message: format!(
                    "sequence of {e} positions exceeds its cache of {}",
                    self.capacity.unwrap_or_default()
                ),
                param: None,
            });
        }
        self.slide(layer)?;
        let base = self.starts[layer];
        let (mut bk, mut bv) = match self.layers[layer].take() {
            Some((bk, bv)) if bk.dim(2) as usize >= e - base => (bk, bv),
            old => {
                let slots = self
                    .capacity
                    .unwrap_or((e - base).div_ceil(GROW_STEP) * GROW_STEP);
                let shape = [k.dim(0), k.dim(1), slots as i32, k.dim(3)];
                let (mut bk, mut bv) = (Array::zeros::<f32>(&shape)?, Array::zeros::<f32>(&shape)?);
                if let Some((pk, pv)) = old.filter(|_| s > base) {
                    let kept = || (.., .., 0..(s - base) as i32, ..);
                    bk.try_index_mut(kept(), pk.index(kept()))?;
                    bv.try_index_mut(kept(), pv.index(kept()))?;
                }
                (bk, bv)
            }
        };
        let new = || (.., .., (s - base) as i32..(e - base) as i32, ..);
        bk.try_index_mut(new(), &k)?;
        bv.try_index_mut(new(), &v)?;
        self.layers[layer] = Some((bk.clone(), bv.clone()));
        if self.capacity.is_some() {
            return Ok((bk, bv));
        }
        let filled = || (.., .., 0..(e - base) as i32, ..);
        Ok((bk.index(filled()), bv.index(filled())))
    }

    /// Drops the positions of a sliding `layer` that no query from the
    /// next one on can see (the next query at `offset` sees `offset -
    /// window + 1` and after), once at least `window` of them piled up.
    fn slide(&mut self, layer: usize) -> Result<()> {
        let Some(w) = self.windows[layer].filter(|_| self.capacity.is_none()) else {
            return Ok(());
        };
        let keep_from = (self.offset + 1).saturating_sub(w);
        let base = self.starts[layer];
        if keep_from < base + w {
            return Ok(());
        }
        if let Some((k, v)) = self.layers[layer].take() {
            let kept = || {
                (
                    ..,
                    ..,
                    (keep_from - base) as i32..(self.offset - base) as i32,
                    ..,
                )
            };
            self.layers[layer] =
                Some((k.index(kept()).contiguous()?, v.index(kept()).contiguous()?));
        }
        self.starts[layer] = keep_from;
        Ok(())
    }

    /// Every key and value array (to evaluate them together with logits).
    pub fn arrays(&self) -> impl Iterator<Item = &Array> {
        self.layers.iter().flatten().flat_map(|(k, v)| [k, v])
    }

    /// Records that `n` more positions were written by every layer.
    pub fn advance(&mut self, n: usize) {
        self.offset += n;
    }

    /// A contiguous copy of positions `start..end` of every layer (so the
    /// copy does not keep this cache's buffers alive). Fails for positions
    /// a sliding layer has dropped (see [`KvCache::holds_from`]).
    pub fn segment(&self, start: usize, end: usize) -> Result<KvSegment> {
        self.layers
            .iter()
            .zip(&self.starts)
            .map(|(l, &base)| {
                let (k, v) = l.as_ref().expect("segment of a filled cache");
                if start < base {
                    return Err(EngineError::EngineStopped(format!(
                        "KV of position {start} was dropped by a sliding window"
                    )));
                }
                let (s, e) = ((start - base) as i32, (end - base) as i32);
                Ok((
                    k.index((.., .., s..e, ..)).contiguous()?,
                    v.index((.., .., s..e, ..)).contiguous()?,
                ))
            })
            .collect()
    }
}
