//! Per-sequence key/value cache: one `[1, kv_heads, len, head_dim]` pair per
//! layer, grown by concatenation.

use mlx_rs::ops::concatenate;
use mlx_rs::Array;

use crate::error::Result;

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

    /// Records that `n` more positions were written by every layer.
    pub fn advance(&mut self, n: usize) {
        self.offset += n;
    }
}
