//! Per-sequence key/value cache: one `[1, kv_heads, len, head_dim]` pair per
//! layer, grown by concatenation.

use mlx_rs::ops::concatenate;
use mlx_rs::ops::indexing::IndexOp;
use mlx_rs::Array;

use crate::error::Result;

/// Keys and values of a run of positions, one pair per layer.
pub type KvSegment = Vec<(Array, Array)>;

pub struct KvCache {
    layers: Vec<Option<(Array, Array)>>,
    offset: usize,
}

impl KvCache {
    pub fn new(num_layers: usize) -> Self {
        KvCache {
            layers: (0..num_layers).map(|_| None).collect(),
            offset: 0,
        }
    }

    /// A cache holding `segments` back to back (a reused prefix).
    pub fn from_segments(num_layers: usize, segments: &[KvSegment], len: usize) -> Result<Self> {
        let mut cache = KvCache::new(num_layers);
        if segments.is_empty() {
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
        Ok(cache)
    }

    /// Tokens already cached (the RoPE offset of the next token).
    pub fn offset(&self) -> usize {
        self.offset
    }

    /// Appends this step's keys/values for `layer` and returns the full ones.
    pub fn update(&mut self, layer: usize, k: Array, v: Array) -> Result<(Array, Array)> {
        let merged = match self.layers[layer].take() {
            None => (k, v),
            Some((pk, pv)) => (concatenate(&[pk, k], 2)?, concatenate(&[pv, v], 2)?),
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
