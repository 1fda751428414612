//! Where each item's tokens sit in the batch row and how attention groups
//! them. The same for every layer of a pass, so it is built once per pass.

use mlx_rs::Array;

use super::batch_item::BatchItem;

pub(super) struct BatchLayout {
    /// First row of each item.
    pub starts: Vec<i32>,
    /// Rows over all items.
    pub total: i32,
    /// The items that decode one token, attended as one group.
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
    /// Their cache offsets (RoPE positions of their new token).
    pub offsets: Array,
}

impl BatchLayout {
    /// `group_decoding`: whether one-token items form a decode group (not in
    /// batch-invariant mode, where every item keeps fixed-shape attention).
    pub fn new(items: &[BatchItem<'_>], group_decoding: bool) -> Self {
        let mut starts = Vec::with_capacity(items.len());
        let mut total = 0i32;
        for item in items {
            starts.push(total);
            total += item.tokens.len() as i32;
        }
        let is_member: Vec<bool> = items
            .iter()
            .map(|i| group_decoding && i.tokens.len() == 1)
            .collect();
        let members: Vec<usize> = (0..items.len()).filter(|&i| is_member[i]).collect();
        if members.is_empty() {
            return BatchLayout {
                starts,
                total,
                decode: None,
                to_item_order: None,
            };
        }
        // Row order of the attention output: the group, then the rest.
        let mut order: Vec<i32> = members.iter().map(|&i| starts[i]).collect();
        let n = order.len() as i32;
        let rows = (n != total).then(|| Array::from_slice(&order, &[n]));
        let offsets: Vec<i32> = members
            .iter()
            .map(|&i| items[i].cache.offset() as i32)
            .collect();
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
                items: members,
                is_member,
                rows,
                offsets: Array::from_slice(&offsets, &[n]),
            }),
            to_item_order,
        }
    }

    /// Whether item `i` is attended in the decode group.
    pub fn in_decode_group(&self, i: usize) -> bool {
        self.decode.as_ref().is_some_and(|d| d.is_member[i])
    }
}
