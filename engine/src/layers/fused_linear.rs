//! Several linear layers over one input run as one matmul.

use mlx_rs::ops::concatenate;
use mlx_rs::ops::indexing::IndexOp;
use mlx_rs::Array;

use super::linear::Linear;
use super::quantized_weight::QuantizedWeight;
use crate::error::Result;

/// Linear layers that read the same input (q/k/v, gate/up), run as one
/// matmul over weights concatenated along the output axis at load: one large
/// product instead of several small ones, each of which pays MLX's dispatch
/// and the BLAS call's fixed cost.
pub struct FusedLinear {
    layout: Fused,
}

enum Fused {
    /// One matrix; `widths` are the parts' output sizes, in order.
    One { linear: Linear, widths: Vec<i32> },
    /// Quantized parts of different formats (mixed GGUF quantizations on
    /// Metal) cannot share one matrix; they stay separate.
    Separate(Vec<Linear>),
}

impl FusedLinear {
    pub fn new(parts: Vec<Linear>) -> Result<Self> {
        let widths: Vec<i32> = parts.iter().map(Linear::out_features).collect();
        let layout = match parts.first() {
            Some(Linear::Dense(_)) if parts.iter().all(|p| matches!(p, Linear::Dense(_))) => {
                let ws: Vec<&Array> = parts
                    .iter()
                    .map(|p| match p {
                        Linear::Dense(w) => w,
                        Linear::Quantized(_) => unreachable!("all dense"),
                    })
                    .collect();
                Fused::One {
                    linear: Linear::Dense(concatenate(&ws, 0)?),
                    widths,
                }
            }
            Some(Linear::Quantized(first))
                if parts.iter().all(|p| {
                    matches!(p, Linear::Quantized(q) if q.bits == first.bits
                    && q.group_size == first.group_size
                    && q.biases.is_some() == first.biases.is_some())
                }) =>
            {
                let quantized: Vec<&QuantizedWeight> = parts
                    .iter()
                    .map(|p| match p {
                        Linear::Quantized(q) => q,
                        Linear::Dense(_) => unreachable!("all quantized"),
                    })
                    .collect();
                let cat = |f: &dyn Fn(&QuantizedWeight) -> &Array| -> Result<Array> {
                    let arrays: Vec<&Array> = quantized.iter().map(|q| f(q)).collect();
                    Ok(concatenate(&arrays, 0)?)
                };
                let biases = match first.biases {
                    Some(_) => Some(cat(&|q| q.biases.as_ref().expect("checked above"))?),
                    None => None,
                };
                let linear = Linear::Quantized(QuantizedWeight {
                    weight: cat(&|q| &q.weight)?,
                    scales: cat(&|q| &q.scales)?,
                    biases,
                    group_size: first.group_size,
                    bits: first.bits,
                });
                Fused::One { linear, widths }
            }
            _ => Fused::Separate(parts),
        };
        Ok(FusedLinear { layout })
    }

    /// Every part's output for `x`, in order; `apply` runs one matrix.
    pub fn forward_with(
        &self,
        x: &Array,
        apply: impl Fn(&Linear, &Array) -> Result<Array>,
    ) -> Result<Vec<Array>> {
        let ones = vec![1; self.parts()];
        self.forward_grouped(x, apply, &ones)
    }

    /// Like [`forward_with`](Self::forward_with), with consecutive parts
    /// joined: `groups` gives how many parts each output holds (`[2, 1]` on
    /// q/k/v gives q and k side by side, then v). A fused matrix joins them
    /// for free (a view of its output).
    pub fn forward_grouped(
        &self,
        x: &Array,
        apply: impl Fn(&Linear, &Array) -> Result<Array>,
        groups: &[usize],
    ) -> Result<Vec<Array>> {
        assert_eq!(
            groups.iter().sum::<usize>(),
            self.parts(),
            "groups cover every part"
        );
        match &self.layout {
            Fused::One { linear, widths } => {
                let y = apply(linear, x)?;
                let (mut part, mut col) = (0, 0);
                Ok(groups
                    .iter()
                    .map(|&n| {
                        let w: i32 = widths[part..part + n].iter().sum();
                        let out = y.index((.., .., col..col + w));
                        (part, col) = (part + n, col + w);
                        out
                    })
                    .collect())
            }
            Fused::Separate(parts) => {
                let mut rest = parts.iter();
                groups
                    .iter()
                    .map(|&n| {
                        let outs = rest
                            .by_ref()
                            .take(n)
                            .map(|p| apply(p, x))
                            .collect::<Result<Vec<_>>>()?;
                        Ok(if n == 1 {
                            outs.into_iter().next().expect("one part")
                        } else {
                            concatenate(&outs, -1)?
                        })
                    })
                    .collect()
            }
        }
    }

    /// The one matrix all parts share, unless they stay separate.
    pub fn single(&self) -> Option<&Linear> {
        match &self.layout {
            Fused::One { linear, .. } => Some(linear),
            Fused::Separate(_) => None,
        }
    }

    fn parts(&self) -> usize {
        match &self.layout {
            Fused::One { widths, .. } => widths.len(),
            Fused::Separate(parts) => parts.len(),
        }
    }

    /// The stored weight arrays (to evaluate them at load).
    pub fn stored(&self) -> Vec<Array> {
        match &self.layout {
            Fused::One { linear, .. } => vec![linear.stored()],
            Fused::Separate(parts) => parts.iter().map(Linear::stored).collect(),
        }
    }
}
