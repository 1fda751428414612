//! What a model keeps per token and layer, declared by the model so that
//! the scheduler, the KV caches and the prefix cache size themselves from
//! it instead of assuming every layer alike.

/// One layer's keys and values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LayerKv {
    pub kv_heads: usize,
    pub head_dim: usize,
    /// Sliding-window attention: the layer attends to at most this many
    /// most recent positions (`None`: every position).
    pub window: Option<usize>,
}

/// Every layer's KV, in layer order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KvLayout {
    pub layers: Vec<LayerKv>,
}

impl KvLayout {
    /// `n` alike layers of global attention.
    pub fn uniform(n: usize, kv_heads: usize, head_dim: usize) -> Self {
        KvLayout {
            layers: vec![
                LayerKv {
                    kv_heads,
                    head_dim,
                    window: None,
                };
                n
            ],
        }
    }

    pub fn num_layers(&self) -> usize {
        self.layers.len()
    }

    /// Bytes of f32 keys and values one token takes over all layers.
    pub fn bytes_per_token(&self) -> usize {
        self.layers
            .iter()
            .map(|l| 2 * l.kv_heads * l.head_dim * std::mem::size_of::<f32>())
            .sum()
    }
}
