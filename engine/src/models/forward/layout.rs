//! Where each item's tokens sit in the batch row and how attention groups
//! them. The same for every layer of a pass, so it is built once per pass.

use std::cell::RefCell;

use mlx_rs::Array;

use super::batch_item::BatchItem;
use crate::models::kv_store::{KvStore, SlotSet};

pub(super) struct BatchLayout {
    /// First row of each item.
    pub starts: Vec<i32>,
    /// Rows over all items.
    pub total: i32,
    /// The items that add one token, attended as one group.
    pub decode: Option<DecodeGroup>,
    /// Attention outputs come decode group first; this permutation puts the
    /// rows back in item order (`None`: already in order).
    pub to_item_order: Option<Array>,
}

pub(super) struct DecodeGroup {
    /// Item indices, in the group's order.
    pub items: Vec<usize>,
    /// `is_member[i]`: item `i` is in the group.
    pub is_member: Vec<bool>,
    /// Their rows in the batch (`None`: every row is theirs, in order).
    pub rows: Option<Array>,
    /// Their positions (the RoPE offset of their new token), as an array,
    /// as numbers, and as the `i32`s the CPU attention primitive takes.
    pub offsets: Array,
    pub positions: Vec<usize>,
    pub positions_i32: Vec<i32>,
    /// Their slots, in group order (where the new keys are written).
    pub slots: SlotSet,
    /// How the group reads its keys: one read (and attention call) for the
    /// whole group, or in batch-invariant mode one per distinct fixed
    /// capacity (members sorted so that each read is a run of the group).
    pub reads: Vec<DecodeRead>,
}

/// Members `range` of a decode group, read and attended together over
/// `keys` positions of their slots.
pub(super) struct DecodeRead {
    pub range: std::ops::Range<usize>,
    pub slots: SlotSet,
    pub keys: usize,
    /// Fixed-shape attention (batch-invariant mode).
    pub fixed: bool,
    /// Slots with holes between them, read in place with the holes.
    pub spread: Option<Spread>,
    /// Its attention masks, built once per pass for each window size.
    masks: RefCell<Vec<(Option<usize>, Array)>>,
}

/// A read whose slots are not consecutive but close (a sequence between
/// them is prefilling, or its slot is free): attention runs over every slot
/// of `slots`, a view of the store, and the holes' rows are thrown away.
/// On MLX's ops a gather of the members' slots copies
/// `n x kv_heads x positions x head_dim` floats twice per layer, walking
/// the strided store element by element (at 32 streams a step with one
/// hole took 2.3x a step without); a hole's attention costs one member's.
pub(super) struct Spread {
    /// The slots read, holes included.
    pub slots: SlotSet,
    /// For each slot read, the member whose query and position its row
    /// takes (a hole's row repeats a neighbour's: a valid mask, no NaN).
    pub queries: Array,
    pub positions: Vec<usize>,
    /// Each member's row in the read's output.
    pub rows: Array,
}

impl Spread {
    /// For `slots` (sorted, distinct) at `positions`: a spread read when
    /// the slots are not consecutive and the holes at most double the rows
    /// attended.
    fn new(slots: &[usize], positions: &[usize]) -> Option<Self> {
        let (first, last) = (*slots.first()?, *slots.last()?);
        let span = last - first + 1;
        if span == slots.len() || span > 2 * slots.len() {
            return None;
        }
        let mut queries = Vec::with_capacity(span);
        let mut member = 0;
        for slot in first..=last {
            if slots[member] < slot {
                member += 1;
            }
            queries.push(member as i32);
        }
        let rows: Vec<i32> = slots.iter().map(|&s| (s - first) as i32).collect();
        Some(Spread {
            slots: SlotSet::new(&(first..=last).collect::<Vec<_>>()),
            positions: queries.iter().map(|&m| positions[m as usize]).collect(),
            queries: Array::from_slice(&queries, &[span as i32]),
            rows: Array::from_slice(&rows, &[slots.len() as i32]),
        })
    }
}

impl DecodeRead {
    /// The mask for layers of `window`, built by `build` on first use.
    pub fn mask(&self, window: Option<usize>, build: impl FnOnce() -> Array) -> Array {
        let mut masks = self.masks.borrow_mut();
        if let Some((_, m)) = masks.iter().find(|(w, _)| *w == window) {
            return m.clone();
        }
        let m = build();
        masks.push((window, m.clone()));
        m
    }
}

impl BatchLayout {
    pub fn new(items: &[BatchItem<'_>], kv: &KvStore) -> Self {
        let mut starts = Vec::with_capacity(items.len());
        let mut total = 0i32;
        for item in items {
            starts.push(total);
            total += item.tokens.len() as i32;
        }
        let is_member: Vec<bool> = items.iter().map(|i| i.tokens.len() == 1).collect();
        let mut members: Vec<usize> = (0..items.len()).filter(|&i| is_member[i]).collect();
        if members.is_empty() {
            return BatchLayout {
                starts,
                total,
                decode: None,
                to_item_order: None,
            };
        }
        // Batch-invariant slots read their fixed capacity: group equal ones;
        // within a group, slot order, so that consecutive slots are read as
        // one view of the store rather than gathered (the scheduler passes
        // items in slot order, so this leaves them in row order).
        members.sort_by_key(|&i| (kv.fixed(items[i].slot), items[i].slot));
        let member_slots: Vec<usize> = members.iter().map(|&i| items[i].slot).collect();
        let positions: Vec<usize> = member_slots.iter().map(|&s| kv.offset(s)).collect();
        let mut reads: Vec<DecodeRead> = Vec::new();
        let mut from = 0;
        while from < members.len() {
            let fixed = kv.fixed(member_slots[from]);
            let to = from
                + member_slots[from..]
                    .iter()
                    .take_while(|&&s| kv.fixed(s) == fixed)
                    .count();
            let keys =
                fixed.unwrap_or_else(|| positions[from..to].iter().max().expect("a member") + 1);
            reads.push(DecodeRead {
                range: from..to,
                slots: SlotSet::new(&member_slots[from..to]),
                keys,
                fixed: fixed.is_some(),
                // Fixed-capacity reads keep one shape per request.
                spread: fixed
                    .is_none()
                    .then(|| Spread::new(&member_slots[from..to], &positions[from..to]))
                    .flatten(),
                masks: RefCell::new(Vec::new()),
            });
            from = to;
        }
        // Row order of the attention output: the group, then the rest.
        let mut order: Vec<i32> = members.iter().map(|&i| starts[i]).collect();
        let n = order.len() as i32;
        let in_row_order = order.iter().enumerate().all(|(p, &r)| p as i32 == r);
        let rows = (n != total || !in_row_order).then(|| Array::from_slice(&order, &[n]));
        let offsets: Vec<i32> = positions.iter().map(|&p| p as i32).collect();
        for (i, item) in items.iter().enumerate() {
            if !is_member[i] {
                order.extend(starts[i]..starts[i] + item.tokens.len() as i32);
            }
        }
        let in_order = order.iter().enumerate().all(|(p, &r)| p as i32 == r);
        let to_item_order = (!in_order).then(|| {
            let mut inverse = vec![0i32; order.len()];
            for (p, &r) in order.iter().enumerate() {
                inverse[r as usize] = p as i32;
            }
            Array::from_slice(&inverse, &[total])
        });
        BatchLayout {
            starts,
            total,
            decode: Some(DecodeGroup {
                slots: SlotSet::new(&member_slots),
                items: members,
                is_member,
                rows,
                offsets: Array::from_slice(&offsets, &[n]),
                positions,
                positions_i32: offsets,
                reads,
            }),
            to_item_order,
        }
    }

    /// Whether item `i` is attended in the decode group.
    pub fn in_decode_group(&self, i: usize) -> bool {
        self.decode.as_ref().is_some_and(|d| d.is_member[i])
    }
}
