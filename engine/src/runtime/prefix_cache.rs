//! Radix prefix cache: a token-level radix tree whose edges carry the KV of
//! their tokens.
//!
//! A lookup returns the longest cached prefix of a prompt; the caller copies
//! that KV into the sequence's own cache, so a sequence never reads another
//! sequence's memory and eviction never waits on readers. Prompts are
//! inserted chunk by chunk right after each prefill step (not when a request
//! finishes), so requests arriving while a long prompt is still prefilling
//! already hit what is done. Least-recently-used leaves are evicted when the
//! cached KV exceeds the byte budget.
//!
//! A model with recurrent layers (Gated DeltaNet) cannot resume from KV
//! alone: its state after a prefix is known only where it was copied. Such
//! copies (snapshots) sit on nodes, each taken at the node's end: the
//! scheduler inserts at every prefill chunk's end, at the prompt's last
//! but one token, and where a waiting request's shared prefix ends. A
//! lookup then returns the deepest matched node that has one, and the rest
//! of the prompt is recomputed; `cached_tokens` is that length, what is
//! really reused. Snapshots have their own budget and least-recently-used
//! order, since one snapshot weighs as much as thousands of tokens of KV.

use std::collections::HashMap;

use crate::error::Result;
use crate::models::{KvLayout, KvSegment, KvStore, StateSnapshot};

const ROOT: usize = 0;

struct Node {
    /// The edge's tokens (empty for the root).
    tokens: Vec<u32>,
    /// KV of `tokens`, one `[1, kv_heads, tokens.len(), head_dim]` pair per layer.
    kv: KvSegment,
    /// The recurrent state after this node's last token (models with
    /// recurrent layers only).
    state: Option<StateSnapshot>,
    children: HashMap<u32, usize>,
    parent: usize,
    last_used: u64,
}

/// A cached prefix found by [`PrefixCache::lookup`].
pub struct PrefixMatch {
    /// Tokens covered.
    pub len: usize,
    /// KV of the prefix, in order (the last one possibly a partial edge).
    pub segments: Vec<KvSegment>,
    /// The recurrent state after `len` tokens (`None` for a model without
    /// recurrent layers, or when nothing matched).
    pub state: Option<StateSnapshot>,
}

pub struct PrefixCache {
    nodes: Vec<Option<Node>>,
    free: Vec<usize>,
    bytes_per_token: usize,
    budget_bytes: usize,
    cached_tokens: usize,
    /// The model has recurrent layers: prefixes end at snapshots.
    recurrent: bool,
    bytes_per_snapshot: usize,
    snapshot_budget_bytes: usize,
    snapshots: usize,
    clock: u64,
}

impl PrefixCache {
    /// A cache for a model of `layout` (which sizes its entries) holding at
    /// most `budget_bytes` of KV and, for a model with recurrent layers,
    /// at most `snapshot_budget_bytes` of state snapshots.
    pub fn new(layout: &KvLayout, budget_bytes: usize, snapshot_budget_bytes: usize) -> Self {
        let bytes_per_token = layout.bytes_per_token();
        PrefixCache {
            nodes: vec![Some(Node {
                tokens: Vec::new(),
                kv: Vec::new(),
                state: None,
                children: HashMap::new(),
                parent: ROOT,
                last_used: 0,
            })],
            free: Vec::new(),
            bytes_per_token: bytes_per_token.max(1),
            budget_bytes,
            cached_tokens: 0,
            recurrent: layout.has_recurrent(),
            bytes_per_snapshot: layout.bytes_per_snapshot(),
            snapshot_budget_bytes,
            snapshots: 0,
            clock: 0,
        }
    }

    /// Whether prefixes can only be resumed where a snapshot was kept.
    pub fn needs_snapshots(&self) -> bool {
        self.recurrent
    }

    /// Recurrent-state snapshots held.
    pub fn snapshots(&self) -> usize {
        self.snapshots
    }

    pub fn snapshot_bytes(&self) -> usize {
        self.snapshots * self.bytes_per_snapshot
    }

    /// Tokens currently cached (over all edges).
    pub fn cached_tokens(&self) -> usize {
        self.cached_tokens
    }

    pub fn bytes(&self) -> usize {
        self.cached_tokens * self.bytes_per_token
    }

    fn node(&self, id: usize) -> &Node {
        self.nodes[id].as_ref().expect("live node")
    }

    fn node_mut(&mut self, id: usize) -> &mut Node {
        self.nodes[id].as_mut().expect("live node")
    }

    /// The longest reusable cached prefix of `tokens`, at most `max_len`
    /// long: for a model with recurrent layers, the deepest matched node
    /// with a snapshot.
    pub fn lookup(&mut self, tokens: &[u32], max_len: usize) -> Result<PrefixMatch> {
        self.clock += 1;
        let tokens = &tokens[..tokens.len().min(max_len)];
        let path = self.path(tokens);
        // The edges served: all of them, or for a recurrent model those up
        // to the deepest whole edge that ends at a snapshot.
        let used = match self.recurrent {
            false => path.len(),
            true => path
                .iter()
                .rposition(|&(id, common)| self.resumable_at(id, common))
                .map_or(0, |i| i + 1),
        };
        let clock = self.clock;
        let mut segments = Vec::with_capacity(used);
        let mut pos = 0;
        for &(id, common) in &path[..used] {
            let edge = self.node_mut(id);
            edge.last_used = clock;
            segments.push(match common == edge.tokens.len() {
                true => edge.kv.clone(),
                false => slice_segment(&edge.kv, 0, common)?,
            });
            pos += common;
        }
        let state = match (self.recurrent, used) {
            (true, n) if n > 0 => self.node(path[n - 1].0).state.clone(),
            _ => None,
        };
        Ok(PrefixMatch {
            len: pos,
            segments,
            state,
        })
    }

    /// Length of the reusable cached prefix of `tokens` (what
    /// [`PrefixCache::lookup`] would return), without touching recency.
    pub fn cached_len(&self, tokens: &[u32]) -> usize {
        let path = self.path(tokens);
        if !self.recurrent {
            return path.iter().map(|&(_, c)| c).sum();
        }
        let mut pos = 0;
        let mut usable = 0;
        for &(id, common) in &path {
            pos += common;
            if self.resumable_at(id, common) {
                usable = pos;
            }
        }
        usable
    }

    /// Whether a match of `common` tokens of edge `id` ends where a
    /// recurrent model can resume: the whole edge, which has a snapshot.
    fn resumable_at(&self, id: usize, common: usize) -> bool {
        let node = self.node(id);
        common == node.tokens.len() && node.state.is_some()
    }

    /// The edges `tokens` runs along from the root, each with the number of
    /// its tokens matched (all but possibly the last edge's).
    fn path(&self, tokens: &[u32]) -> Vec<(usize, usize)> {
        let mut path = Vec::new();
        let (mut node, mut pos) = (ROOT, 0);
        while pos < tokens.len() {
            let Some(&child) = self.node(node).children.get(&tokens[pos]) else {
                break;
            };
            let edge = self.node(child);
            let common = common_prefix(&edge.tokens, &tokens[pos..]);
            path.push((child, common));
            pos += common;
            if common < edge.tokens.len() {
                break;
            }
            node = child;
        }
        path
    }

    /// Records `tokens`, whose KV is in `slot` of `kv` from position 0.
    /// Only the part not already in the tree is copied. For a model with
    /// recurrent layers, when the slot stands right after `tokens`, its
    /// state is copied onto the node ending there (unless one is there).
    pub fn insert(&mut self, tokens: &[u32], kv: &KvStore, slot: usize) -> Result<()> {
        self.clock += 1;
        let (mut node, mut pos) = (ROOT, 0);
        while pos < tokens.len() {
            match self.node(node).children.get(&tokens[pos]).copied() {
                None => {
                    let segment = kv.segment(slot, pos, tokens.len())?;
                    node = self.add_child(node, tokens[pos..].to_vec(), segment);
                    break;
                }
                Some(child) => {
                    let common = common_prefix(&self.node(child).tokens, &tokens[pos..]);
                    if common < self.node(child).tokens.len() {
                        self.split(child, common)?;
                    }
                    let clock = self.clock;
                    self.node_mut(child).last_used = clock;
                    pos += common;
                    node = child;
                }
            }
        }
        // The node now ends exactly at `tokens.len()`.
        if self.recurrent
            && node != ROOT
            && kv.offset(slot) == tokens.len()
            && self.node(node).state.is_none()
        {
            let state = kv.snapshot(slot)?;
            self.node_mut(node).state = Some(state);
            self.snapshots += 1;
        }
        self.evict();
        Ok(())
    }

    fn add_child(&mut self, parent: usize, tokens: Vec<u32>, kv: KvSegment) -> usize {
        self.cached_tokens += tokens.len();
        let first = tokens[0];
        let node = Node {
            tokens,
            kv,
            state: None,
            children: HashMap::new(),
            parent,
            last_used: self.clock,
        };
        let id = match self.free.pop() {
            Some(id) => {
                self.nodes[id] = Some(node);
                id
            }
            None => {
                self.nodes.push(Some(node));
                self.nodes.len() - 1
            }
        };
        self.node_mut(parent).children.insert(first, id);
        id
    }

    /// Splits edge `id` after `at` tokens; the tail becomes its only child.
    fn split(&mut self, id: usize, at: usize) -> Result<()> {
        let node = self.node(id);
        let tail_tokens = node.tokens[at..].to_vec();
        let head_kv = slice_segment(&node.kv, 0, at)?;
        let tail_kv = slice_segment(&node.kv, at, node.tokens.len())?;
        let children = std::mem::take(&mut self.node_mut(id).children);
        // A snapshot belongs to the edge's end, which the tail now holds.
        let state = self.node_mut(id).state.take();
        let last_used = self.node(id).last_used;
        let tail = Node {
            tokens: tail_tokens,
            kv: tail_kv,
            state,
            children,
            parent: id,
            last_used,
        };
        let tail_id = match self.free.pop() {
            Some(slot) => {
                self.nodes[slot] = Some(tail);
                slot
            }
            None => {
                self.nodes.push(Some(tail));
                self.nodes.len() - 1
            }
        };
        let grandchildren: Vec<usize> = self.node(tail_id).children.values().copied().collect();
        for g in grandchildren {
            self.node_mut(g).parent = tail_id;
        }
        let first = self.node(tail_id).tokens[0];
        let head = self.node_mut(id);
        head.tokens.truncate(at);
        head.kv = head_kv;
        head.children.insert(first, tail_id);
        Ok(())
    }

    /// Drops least-recently-used leaves until the KV budget holds, and
    /// least-recently-used snapshots until theirs does. A recurrent model's
    /// leaf left without a snapshot can serve no lookup, so it goes too.
    fn evict(&mut self) {
        while self.bytes() > self.budget_bytes {
            let victim = self.least_recent(|n| n.children.is_empty());
            let Some(id) = victim else { break };
            self.remove_leaf(id);
        }
        while self.snapshot_bytes() > self.snapshot_budget_bytes {
            let Some(id) = self.least_recent(|n| n.state.is_some()) else {
                break;
            };
            self.node_mut(id).state = None;
            self.snapshots -= 1;
            let mut id = id;
            while id != ROOT && self.node(id).children.is_empty() && self.node(id).state.is_none() {
                let parent = self.node(id).parent;
                self.remove_leaf(id);
                id = parent;
            }
        }
    }

    /// The least recently used node (not the root) that `pick` accepts.
    fn least_recent(&self, pick: impl Fn(&Node) -> bool) -> Option<usize> {
        self.nodes
            .iter()
            .enumerate()
            .skip(1)
            .filter_map(|(id, n)| n.as_ref().map(|n| (id, n)))
            .filter(|(_, n)| pick(n))
            .min_by_key(|(_, n)| n.last_used)
            .map(|(id, _)| id)
    }

    fn remove_leaf(&mut self, id: usize) {
        let node = self.nodes[id].take().expect("live node");
        self.cached_tokens -= node.tokens.len();
        if node.state.is_some() {
            self.snapshots -= 1;
        }
        self.node_mut(node.parent).children.remove(&node.tokens[0]);
        self.free.push(id);
    }
}

fn common_prefix(a: &[u32], b: &[u32]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

/// Positions `start..end` of a segment, as contiguous copies.
/// Positions `start..end` of a segment, copied now: a lazy slice would
/// keep the whole edge's buffer alive for as long as the cache keeps
/// either half, memory the budget never counts.
fn slice_segment(kv: &KvSegment, start: usize, end: usize) -> Result<KvSegment> {
    use mlx_rs::ops::indexing::IndexOp;
    let (s, e) = (start as i32, end as i32);
    let sliced: KvSegment = kv
        .iter()
        .map(|(k, v)| {
            Ok((
                k.index((.., .., s..e, ..)).contiguous()?,
                v.index((.., .., s..e, ..)).contiguous()?,
            ))
        })
        .collect::<Result<_>>()?;
    mlx_rs::transforms::eval(sliced.iter().flat_map(|(k, v)| [k, v]))?;
    Ok(sliced)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::models::KvCache;
    use mlx_rs::Array;

    /// One layer, one KV head of one dimension: 8 bytes per token.
    fn layout() -> KvLayout {
        KvLayout::uniform(1, 1, 1)
    }

    /// A one-layer cache whose key at position p is p (value: -p), so a
    /// reused prefix's content can be checked exactly.
    fn cache_of(tokens: &[u32]) -> KvCache {
        let n = tokens.len() as i32;
        let pos: Vec<f32> = (0..n).map(|p| p as f32).collect();
        let k = Array::from_slice(&pos, &[1, 1, n, 1]);
        let v = k.negative().unwrap();
        KvCache::from_segments(&layout(), &[vec![(k, v)]], tokens.len(), None, None).unwrap()
    }

    fn insert(pc: &mut PrefixCache, tokens: &[u32]) {
        let c = cache_of(tokens);
        pc.insert(tokens, &c.store, c.slot).unwrap();
    }

    fn keys(m: &PrefixMatch) -> Vec<f32> {
        let c = KvCache::from_segments(&layout(), &m.segments, m.len, None, None).unwrap();
        if m.len == 0 {
            return Vec::new();
        }
        c.segment(0, m.len).unwrap()[0].0.as_slice::<f32>().to_vec()
    }

    #[test]
    fn longest_prefix_is_found_across_split_edges() {
        let mut pc = PrefixCache::new(&layout(), 1 << 20, 0);
        let a = [1, 2, 3, 4, 5, 6];
        insert(&mut pc, &a);
        let b = [1, 2, 3, 9, 9];
        let m = pc.lookup(&b, usize::MAX).unwrap();
        assert_eq!(m.len, 3);
        assert_eq!(keys(&m), [0.0, 1.0, 2.0]);
        // Inserting b splits a's edge; both stay fully retrievable.
        insert(&mut pc, &b);
        assert_eq!(pc.cached_tokens(), 6 + 2);
        assert_eq!(pc.lookup(&a, usize::MAX).unwrap().len, 6);
        let m = pc.lookup(&b, usize::MAX).unwrap();
        assert_eq!((m.len, keys(&m)), (5, vec![0.0, 1.0, 2.0, 3.0, 4.0]));
    }

    #[test]
    fn lookup_respects_the_limit_and_misses_cleanly() {
        let mut pc = PrefixCache::new(&layout(), 1 << 20, 0);
        let a = [7, 8, 9];
        insert(&mut pc, &a);
        assert_eq!(pc.lookup(&a, 2).unwrap().len, 2);
        assert_eq!(pc.lookup(&[8, 9], usize::MAX).unwrap().len, 0);
        assert_eq!(pc.cached_len(&[7, 8, 1]), 2);
    }

    /// The store keeps every position of a sliding-window layer, so a
    /// windowed model's prompt is cached and served from position 0.
    #[test]
    fn a_windowed_prefix_is_cached_whole() {
        let layout = KvLayout::attention(vec![crate::models::LayerKv {
            kv_heads: 1,
            head_dim: 1,
            window: Some(2),
            shares: None,
        }]);
        let tokens = [1, 2, 3, 4, 5, 6];
        let pos: Vec<f32> = (0..6).map(|p| p as f32).collect();
        let k = Array::from_slice(&pos, &[1, 1, 6, 1]);
        let cache =
            KvCache::from_segments(&layout, &[vec![(k.clone(), k)]], 6, None, None).unwrap();
        let mut pc = PrefixCache::new(&layout, 1 << 20, 0);
        pc.insert(&tokens, &cache.store, cache.slot).unwrap();
        assert_eq!(pc.cached_tokens(), 6);
        let m = pc.lookup(&tokens, usize::MAX).unwrap();
        let served = KvCache::from_segments(&layout, &m.segments, m.len, None, None).unwrap();
        assert_eq!(
            served.segment(0, 6).unwrap()[0].0.as_slice::<f32>(),
            [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
        );
    }

    #[test]
    fn least_recently_used_leaves_are_evicted_over_budget() {
        // 8 bytes per token, room for 10 tokens.
        let mut pc = PrefixCache::new(&layout(), 80, 0);
        let a = [1, 2, 3, 4];
        let b = [5, 6, 7, 8];
        insert(&mut pc, &a);
        insert(&mut pc, &b);
        pc.lookup(&a, usize::MAX).unwrap(); // a is now the more recent
        let c = [9, 10, 11, 12];
        insert(&mut pc, &c);
        assert!(pc.bytes() <= 80);
        assert_eq!(pc.cached_len(&a), 4);
        assert_eq!(pc.cached_len(&b), 0, "b was least recently used");
        assert_eq!(pc.cached_len(&c), 4);
    }

    /// One attention layer and one recurrent layer, both of one value:
    /// 8 bytes of KV per token, 8 bytes per snapshot.
    fn hybrid_layout() -> KvLayout {
        KvLayout {
            layers: layout().layers,
            recurrent: vec![crate::models::RecurrentLayer {
                conv_len: 1,
                conv_dim: 1,
                value_heads: 1,
                value_dim: 1,
                key_dim: 1,
            }],
        }
    }

    /// A hybrid model's cache after `tokens`, its recurrent state `marker`.
    fn hybrid_insert(pc: &mut PrefixCache, tokens: &[u32], marker: f32) {
        let n = tokens.len() as i32;
        let pos: Vec<f32> = (0..n).map(|p| p as f32).collect();
        let k = Array::from_slice(&pos, &[1, 1, n, 1]);
        let state = vec![(
            Array::from_slice(&[marker], &[1, 1, 1]),
            Array::from_slice(&[marker], &[1, 1, 1, 1]),
        )];
        let c = KvCache::from_segments(
            &hybrid_layout(),
            &[vec![(k.clone(), k)]],
            tokens.len(),
            Some(&state),
            None,
        )
        .unwrap();
        pc.insert(tokens, &c.store, c.slot).unwrap();
    }

    fn marker(m: &PrefixMatch) -> f32 {
        m.state.as_ref().expect("a snapshot")[0].1.as_slice::<f32>()[0]
    }

    /// A recurrent model resumes only where a snapshot was taken: a match
    /// past the last one falls back to it, with the state it holds.
    #[test]
    fn a_hybrid_prefix_resumes_at_the_deepest_snapshot() {
        let mut pc = PrefixCache::new(&hybrid_layout(), 1 << 20, 1 << 20);
        hybrid_insert(&mut pc, &[1, 2, 3], 3.0);
        hybrid_insert(&mut pc, &[1, 2, 3, 4, 5, 6], 6.0);
        assert_eq!(pc.snapshots(), 2);
        let m = pc.lookup(&[1, 2, 3, 4, 5, 9], usize::MAX).unwrap();
        assert_eq!((m.len, marker(&m)), (3, 3.0));
        assert_eq!(pc.cached_len(&[1, 2, 3, 4, 5, 9]), 3);
        let m = pc.lookup(&[1, 2, 3, 4, 5, 6, 7], usize::MAX).unwrap();
        assert_eq!((m.len, marker(&m)), (6, 6.0));
        assert_eq!(keys(&m), [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]);
        // Below the first snapshot nothing is reusable.
        let m = pc.lookup(&[1, 2, 3], 2).unwrap();
        assert_eq!((m.len, m.state.is_none()), (0, true));
    }

    /// Snapshots have their own budget: the least recently used goes, and
    /// its leaf with it (its KV alone cannot resume anything).
    #[test]
    fn least_recently_used_snapshots_are_evicted_over_their_budget() {
        let mut pc = PrefixCache::new(&hybrid_layout(), 1 << 20, 16);
        hybrid_insert(&mut pc, &[1, 2, 3], 1.0);
        hybrid_insert(&mut pc, &[4, 5, 6], 2.0);
        pc.lookup(&[1, 2, 3, 9], usize::MAX).unwrap(); // [1, 2, 3] is now the more recent
        hybrid_insert(&mut pc, &[7, 8, 9], 3.0);
        assert_eq!((pc.snapshots(), pc.snapshot_bytes()), (2, 16));
        assert_eq!(
            pc.cached_len(&[4, 5, 6, 0]),
            0,
            "[4, 5, 6] was least recently used"
        );
        assert_eq!(pc.cached_tokens(), 6, "its KV went with its snapshot");
        assert_eq!(pc.cached_len(&[1, 2, 3, 0]), 3);
        assert_eq!(pc.cached_len(&[7, 8, 9, 0]), 3);
    }
}
