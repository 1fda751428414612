//! Per-sequence key/value cache: one `[1, kv_heads, slots, head_dim]` buffer
//! pair per layer, written in place. By default the buffers grow by
//! [`GROW_STEP`] positions when full (one copy every `GROW_STEP` tokens, not
//! one per token) and attention sees the filled part. A fixed-capacity cache
//! (batch-invariant mode) allocates `capacity` slots once and attention sees
//! all of them, masked, so its shapes never change.

use mlx_rs::ops::concatenate;
use mlx_rs::ops::indexing::{IndexOp, TryIndexMutOp};
use mlx_rs::Array;

use super::kv_layout::KvLayout;
use crate::error::Result;

/// Keys and values of a run of positions, one pair per layer.
pub type KvSegment = Vec<(Array, Array)>;

/// Positions a growing cache adds when it is full.
const GROW_STEP: usize = 256;

pub struct KvCache {
    layers: Vec<Option<(Array, Array)>>,
    offset: usize,
    /// `Some(c)`: fixed `c`-position buffers (allocated on first write).
    capacity: Option<usize>,
}

impl KvCache {
    /// An empty cache for a model of this layout.
    pub fn new(layout: &KvLayout) -> Self {
        KvCache {
            layers: (0..layout.num_layers()).map(|_| None).collect(),
            offset: 0,
            capacity: None,
        }
    }

    /// A fixed-capacity cache of `capacity` positions.
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

    /// Writes this step's keys/values for `layer` (`[1, kv_heads, n, d]`)
    /// after the cached ones and returns what attention reads: the filled
    /// positions, or every slot of a fixed-capacity cache.
    pub fn update(&mut self, layer: usize, k: Array, v: Array) -> Result<(Array, Array)> {
        let (s, e) = (self.offset, self.offset + k.dim(2) as usize);
        if self.capacity.is_some_and(|cap| e > cap) {
            return Err(crate::error::EngineError::InvalidRequest {
                message: format!(
                    "sequence of {e} positions exceeds its cache of {}",
                    self.capacity.unwrap_or_default()
                ),
                param: None,
            });
        }
        let (mut bk, mut bv) = match self.layers[layer].take() {
            Some((bk, bv)) if bk.dim(2) as usize >= e => (bk, bv),
            old => {
                let slots = self.capacity.unwrap_or(e.div_ceil(GROW_STEP) * GROW_STEP);
                let shape = [k.dim(0), k.dim(1), slots as i32, k.dim(3)];
                let (mut bk, mut bv) = (Array::zeros::<f32>(&shape)?, Array::zeros::<f32>(&shape)?);
                if let Some((pk, pv)) = old.filter(|_| s > 0) {
                    let kept = || (.., .., 0..s as i32, ..);
                    bk.try_index_mut(kept(), pk.index(kept()))?;
                    bv.try_index_mut(kept(), pv.index(kept()))?;
                }
                (bk, bv)
            }
        };
        let new = || (.., .., s as i32..e as i32, ..);
        bk.try_index_mut(new(), &k)?;
        bv.try_index_mut(new(), &v)?;
        self.layers[layer] = Some((bk.clone(), bv.clone()));
        if self.capacity.is_some() {
            return Ok((bk, bv));
        }
        let filled = || (.., .., 0..e as i32, ..);
        Ok((bk.index(filled()), bv.index(filled())))
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
    /// copy does not keep this cache's buffers alive).
    pub fn segment(&self, start: usize, end: usize) -> Result<KvSegment> {
        let (s, e) = (start as i32, end as i32);
        self.layers
            .iter()
            .map(|l| {
                let (k, v) = l.as_ref().expect("segment of a filled cache");
                Ok((
                    k.index((.., .., s..e, ..)).contiguous()?,
                    v.index((.., .., s..e, ..)).contiguous()?,
                ))
            })
            .collect()
    }
}
