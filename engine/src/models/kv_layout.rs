//! What a model keeps per sequence, declared by the model so that the
//! scheduler, the KV caches and the prefix cache size themselves from it
//! instead of assuming every layer alike: attention layers keep keys and
//! values per token; recurrent layers (Gated DeltaNet) keep one fixed state
//! per sequence, however long it is.

/// One attention layer's keys and values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LayerKv {
    pub kv_heads: usize,
    pub head_dim: usize,
    /// Sliding-window attention: the layer attends to at most this many
    /// most recent positions (`None`: every position).
    pub window: Option<usize>,
    /// The layer computes no keys and values of its own: it reads those
    /// of attention layer `j` (Gemma 4's KV-shared layers), so it holds no
    /// buffers and the prefix cache keeps the owner's once.
    pub shares: Option<usize>,
}

/// One recurrent layer's state: the short convolution's last inputs and
/// the delta rule's matrix, both f32 whatever the weights' type (they
/// accumulate over the whole sequence).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecurrentLayer {
    /// Inputs the causal convolution keeps (its kernel size minus one).
    pub conv_len: usize,
    /// Channels the convolution runs over (q, k and v side by side).
    pub conv_dim: usize,
    /// The delta state is `[value_heads, value_dim, key_dim]`.
    pub value_heads: usize,
    pub value_dim: usize,
    pub key_dim: usize,
}

impl RecurrentLayer {
    /// f32 values of one sequence's state.
    pub fn values(&self) -> usize {
        self.conv_len * self.conv_dim + self.value_heads * self.value_dim * self.key_dim
    }
}

/// Every attention layer's KV and every recurrent layer's state, each list
/// in layer order. A model indexes its attention layers and its recurrent
/// layers separately (a hybrid model's layer 3 may be attention layer 0).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct KvLayout {
    pub layers: Vec<LayerKv>,
    pub recurrent: Vec<RecurrentLayer>,
}

impl KvLayout {
    /// Attention layers only.
    pub fn attention(layers: Vec<LayerKv>) -> Self {
        KvLayout {
            layers,
            recurrent: Vec::new(),
        }
    }

    /// `n` alike layers of global attention.
    pub fn uniform(n: usize, kv_heads: usize, head_dim: usize) -> Self {
        KvLayout::attention(vec![
            LayerKv {
                kv_heads,
                head_dim,
                window: None,
                shares: None,
            };
            n
        ])
    }

    pub fn num_layers(&self) -> usize {
        self.layers.len()
    }

    /// Whether the model has layers whose state cannot be cut at an
    /// arbitrary token (a prefix is reusable only where a snapshot of that
    /// state was kept).
    pub fn has_recurrent(&self) -> bool {
        !self.recurrent.is_empty()
    }

    /// Bytes of f32 keys and values one token takes over all layers (a
    /// shared layer's are its owner's).
    pub fn bytes_per_token(&self) -> usize {
        self.layers
            .iter()
            .filter(|l| l.shares.is_none())
            .map(|l| 2 * l.kv_heads * l.head_dim * std::mem::size_of::<f32>())
            .sum()
    }

    /// Bytes one sequence of `tokens` positions holds at most: every
    /// owning layer's keys and values for each (a sliding window counted
    /// whole, an upper bound) and its recurrent state.
    pub fn bytes_for(&self, tokens: usize) -> usize {
        self.bytes_per_token() * tokens + self.bytes_per_snapshot()
    }

    /// The attention layers that hold keys and values (not shared), in
    /// order: what a KV segment has one entry for.
    pub fn owners(&self) -> impl Iterator<Item = usize> + '_ {
        (0..self.layers.len()).filter(|&l| self.layers[l].shares.is_none())
    }

    /// The layer whose buffers layer `layer` reads.
    pub fn owner_of(&self, layer: usize) -> usize {
        self.layers[layer].shares.unwrap_or(layer)
    }

    /// Bytes of one sequence's recurrent state over all recurrent layers
    /// (one prefix-cache snapshot).
    pub fn bytes_per_snapshot(&self) -> usize {
        self.recurrent
            .iter()
            .map(|r| r.values() * std::mem::size_of::<f32>())
            .sum()
    }
}
