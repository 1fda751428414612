//! Per-sequence key/value cache: one `[1, kv_heads, len, head_dim]` pair per
//! layer. By default it grows by concatenation. A fixed-capacity cache
//! (batch-invariant mode) instead holds `[1, kv_heads, capacity, head_dim]`
//! buffers written in place, so attention always has the same shape.

use mlx_rs::ops::concatenate;
use mlx_rs::ops::indexing::{IndexOp, TryIndexMutOp};
use mlx_rs::Array;

use crate::error::Result;

/// Keys and values of a run of positions, one pair per layer.
pub type KvSegment = Vec<(Array, Array)>;

pub struct KvCache {
    layers: Vec<Option<(Array, Array)>>,
    offset: usize,
    /// `Some(c)`: fixed `c`-position buffers (allocated on first write).
    capacity: Option<usize>,
}

impl KvCache {
    pub fn new(num_layers: usize) -> Self {
        KvCache {
            layers: (0..num_layers).map(|_| None).collect(),
            offset: 0,
            capacity: None,
        }
    }

    /// A fixed-capacity cache of `capacity` positions.
    pub fn with_capacity(num_layers: usize, capacity: usize) -> Self {
        KvCache {
            capacity: Some(capacity),
            ..KvCache::new(num_layers)
        }
    }

    pub fn capacity(&self) -> Option<usize> {
        self.capacity
    }

    /// A cache holding `segments` back to back (a reused prefix).
    pub fn from_segments(
        num_layers: usize,
        segments: &[KvSegment],
        len: usize,
        capacity: Option<usize>,
    ) -> Result<Self> {
        let mut cache = KvCache::new(num_layers);
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
            let mut fixed = KvCache::with_capacity(num_layers, c);
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

    /// Appends this step's keys/values for `layer` and returns the full ones.
    pub fn update(&mut self, layer: usize, k: Array, v: Array) -> Result<(Array, Array)> {
        let merged = match (self.capacity, self.layers[layer].take()) {
            (None, None) => (k, v),
            (None, Some((pk, pv))) => (concatenate(&[pk, k], 2)?, concatenate(&[pv, v], 2)?),
            (Some(cap), slot) => {
                let (mut bk, mut bv) = match slot {
                    Some(b) => b,
                    None => {
                        let shape = [k.dim(0), k.dim(1), cap as i32, k.dim(3)];
                        (Array::zeros::<f32>(&shape)?, Array::zeros::<f32>(&shape)?)
                    }
                };
                let (s, e) = (self.offset as i32, self.offset as i32 + k.dim(2));
                if e as usize > cap {
                    return Err(crate::error::EngineError::InvalidRequest {
                        message: format!("sequence of {e} positions exceeds its cache of {cap}"),
                        param: None,
                    });
                }
                bk.try_index_mut((.., .., s..e, ..), &k)?;
                bv.try_index_mut((.., .., s..e, ..), &v)?;
                (bk, bv)
            }
        };
        self.layers[layer] = Some(merged.clone());
        Ok(merged)
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
