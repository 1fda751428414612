//! Routed mixtures of SwiGLU experts (Qwen3-MoE, Qwen3-Next, Qwen3.5-MoE):
//! a softmax router picks the top-k of `num_experts` experts per token
//! (optionally renormalised over the chosen k) and the experts run through
//! a gather matmul, one call per projection and layer: afm's CPU primitive
//! on the experts as stored where it takes their format
//! ([`qmm::gather_affine_qmm`]), MLX's `gather_qmm` where the platform keeps
//! other formats quantized (Metal), MLX's `gather_mm` on dequantized ones;
//! Qwen3-Next and Qwen3.5 add a shared expert scaled by
//! `sigmoid(shared_expert_gate(x))`.

use mlx_rs::ops::indexing::IndexOp;
use mlx_rs::ops::{
    argpartition_axis, expand_dims_axes, gather_mm, gather_qmm, sigmoid, softmax_axis, stack,
    sum_axis,
};
use mlx_rs::Array;

use super::feed_forward::{FeedForward, LayerParts, RoutedParts, SharedParts};
use super::forward::ForwardContext;
use super::gated_mlp::{Activation, GatedMlp};
use crate::cpu::qmm;
use crate::error::{EngineError, Result};
use crate::layers::{Linear, QuantizedWeight};
use crate::loading::config::HyperParams;
use crate::loading::weights::TensorMap;

/// Which layers route and how, from the config.
#[derive(Debug, Clone)]
pub struct Routing {
    pub experts: usize,
    pub top_k: usize,
    pub normalize: bool,
    /// Every `sparse_step`-th layer routes...
    sparse_step: usize,
    /// ...except these, which keep a dense MLP.
    dense_only: Vec<usize>,
}

impl Routing {
    /// `normalize_default`: `norm_topk_prob` when the config omits it
    /// (each architecture's own default); `arch` names it in errors.
    pub fn read(
        hyper: &HyperParams,
        origin: &str,
        arch: &str,
        normalize_default: bool,
    ) -> Result<Self> {
        let missing = |key: &str| EngineError::invalid_model(origin, format!("{arch} needs {key}"));
        let experts = hyper
            .usize(&["num_experts", "expert_count"])
            .ok_or_else(|| missing("num_experts"))?;
        let top_k = match experts {
            0 => 0,
            _ => hyper
                .usize(&["num_experts_per_tok", "expert_used_count"])
                .ok_or_else(|| missing("num_experts_per_tok"))?,
        };
        Ok(Routing {
            experts,
            top_k,
            normalize: hyper
                .get(&["norm_topk_prob"])
                .and_then(|v| v.as_bool())
                .unwrap_or(normalize_default),
            sparse_step: hyper.usize(&["decoder_sparse_step"]).unwrap_or(1).max(1),
            dense_only: hyper
                .get(&["mlp_only_layers"])
                .and_then(|v| v.as_array())
                .map(|a| {
                    a.iter()
                        .filter_map(|v| v.as_u64())
                        .map(|v| v as usize)
                        .collect()
                })
                .unwrap_or_default(),
        })
    }

    /// No experts anywhere (a dense variant).
    pub fn dense() -> Self {
        Routing {
            experts: 0,
            top_k: 0,
            normalize: false,
            sparse_step: 1,
            dense_only: Vec::new(),
        }
    }

    /// Routing in every layer (Qwen3.5-MoE ignores the placement keys).
    pub fn everywhere(self) -> Self {
        Routing {
            sparse_step: 1,
            dense_only: Vec::new(),
            ..self
        }
    }

    /// Whether layer `i` routes to experts.
    pub fn sparse(&self, i: usize) -> bool {
        self.experts > 0
            && !self.dense_only.contains(&i)
            && (i + 1).is_multiple_of(self.sparse_step)
    }
}

/// One projection of every expert.
enum Experts {
    /// Transposed for `x @ w`: `[experts, in, out]`.
    Dense(Array),
    /// As stored: `[experts, out, in * bits / 32]` with its scales.
    Quantized(QuantizedWeight),
}

impl Experts {
    /// Stacked `[experts, out, in]`, transposed for `x @ w`.
    fn dense(w: Array) -> Result<Self> {
        Ok(Experts::Dense(w.transpose_axes(&[0, 2, 1])?.contiguous()?))
    }

    /// `x` (`[..., 1, in]`) through the experts `chosen` picks per row.
    fn apply(&self, x: &Array, chosen: &Array) -> Result<Array> {
        Ok(match self {
            Experts::Dense(w) => gather_mm(x, w, None, chosen, false)?,
            Experts::Quantized(q) => gather_qmm(
                x,
                &q.weight,
                &q.scales,
                q.biases.as_ref(),
                None,
                chosen,
                true,
                q.group_size,
                q.bits,
                false,
            )?,
        })
    }

    fn stored(&self) -> Array {
        match self {
            Experts::Dense(w) => w.clone(),
            Experts::Quantized(q) => q.weight.clone(),
        }
    }

    /// The stack when afm's CPU primitive multiplies it.
    fn on_primitive(&self) -> Option<&QuantizedWeight> {
        match self {
            Experts::Quantized(q) if q.runs_on_primitive() => Some(q),
            _ => None,
        }
    }

    /// `x` (`[R, in]`) through the experts `chosen` (`[R, J]`) picks per
    /// row: `[R, J, out]`, on the primitive.
    fn gather(
        q: &QuantizedWeight,
        x: &Array,
        chosen: &Array,
        rows_independent: bool,
    ) -> Result<Array> {
        qmm::gather_affine_qmm(
            x,
            &q.weight,
            &q.scales,
            q.biases.as_ref().expect("checked by runs_on_primitive"),
            chosen,
            q.group_size,
            q.bits,
            rows_independent,
        )
    }

    /// Whether a row's product is independent of the other rows on MLX's
    /// path: measured for its CPU `gather_mm` (one product per row and
    /// chosen expert; bit-identical logits at any slot of batches up to 32,
    /// chunked and cached, in `mlx_lm_reference`); not established for its
    /// `gather_qmm`.
    fn row_independent_on_mlx(&self) -> bool {
        matches!(self, Experts::Dense(_))
    }
}

/// Why a model whose experts are not row-independent refuses
/// `--deterministic`.
pub fn experts_refuse_batch_invariance(architecture: &str) -> EngineError {
    EngineError::Unsupported(format!(
        "architecture '{architecture}' runs its experts through MLX's quantized gather \
         kernels, whose rows are not known to be independent of the batch, so it cannot \
         run batch-invariant (--deterministic)"
    ))
}

/// Every expert's gated MLP (`down(act(gate(x)) * up(x))`), run for the
/// experts each row chose.
pub struct ExpertStack {
    gate: Experts,
    up: Experts,
    down: Experts,
    activation: Activation,
}

impl ExpertStack {
    /// `<prefix>.{gate,up,down}_proj.weight` stacked `[experts, out, in]`
    /// (MLX's SwitchGLU), kept quantized where the platform keeps weights
    /// so.
    pub fn load(weights: &TensorMap, prefix: &str, activation: Activation) -> Result<Self> {
        let part = |proj: &str| -> Result<Experts> {
            match weights.expert_stack(&format!("{prefix}.{proj}"))? {
                Linear::Quantized(q) => Ok(Experts::Quantized(q)),
                Linear::Dense(w) => Experts::dense(w),
            }
        };
        Ok(ExpertStack {
            gate: part("gate_proj")?,
            up: part("up_proj")?,
            down: part("down_proj")?,
            activation,
        })
    }

    /// `x` (`[1, rows, dim]`) through each row's experts `chosen`
    /// (`[1, rows, k]`): `[1, rows, k, dim]`. `rows_independent`: each
    /// row's result must not depend on the others (batch-invariant mode).
    pub fn forward(&self, x: &Array, chosen: &Array, rows_independent: bool) -> Result<Array> {
        if let Some((gate, up, down)) = self.on_primitive() {
            let (rows, k) = (x.dim(-2), chosen.dim(-1));
            let x = x.reshape(&[rows, x.dim(-1)])?;
            let chosen = chosen.reshape(&[rows, k])?;
            let gate = Experts::gather(gate, &x, &chosen, rows_independent)?;
            let up = Experts::gather(up, &x, &chosen, rows_independent)?;
            let hidden = self.activation.gated(&gate, &up)?; // [rows, k, inter]
            let hidden = hidden.reshape(&[rows * k, hidden.dim(-1)])?;
            let each = chosen.reshape(&[rows * k, 1])?;
            let out = Experts::gather(down, &hidden, &each, rows_independent)?;
            return Ok(out.reshape(&[1, rows, k, out.dim(-1)])?);
        }
        // [1, rows, 1, 1, dim] against [experts, dim, inter].
        let rows = expand_dims_axes(x, &[-2, -3])?;
        let gate = self.gate.apply(&rows, chosen)?;
        let hidden = self
            .activation
            .gated(&gate, &self.up.apply(&rows, chosen)?)?;
        let out = self.down.apply(&hidden, chosen)?; // [1, rows, k, 1, dim]
        Ok(out.squeeze_axes(&[-2])?)
    }

    /// The three stacks when afm's primitive multiplies all of them (else
    /// all three go through MLX's gathers).
    pub(super) fn on_primitive(
        &self,
    ) -> Option<(&QuantizedWeight, &QuantizedWeight, &QuantizedWeight)> {
        Some((
            self.gate.on_primitive()?,
            self.up.on_primitive()?,
            self.down.on_primitive()?,
        ))
    }

    /// On the primitive by construction (each output's order is fixed by
    /// the format), on MLX's gathers only if every stack is dense.
    pub fn row_independent(&self) -> bool {
        self.on_primitive().is_some()
            || [&self.gate, &self.up, &self.down]
                .iter()
                .all(|e| e.row_independent_on_mlx())
    }

    pub fn stored(&self) -> Vec<Array> {
        vec![self.gate.stored(), self.up.stored(), self.down.stored()]
    }
}

/// A routed mixture of SwiGLU experts.
pub struct SparseMoe {
    /// The router: `[experts, dim]`.
    router: Linear,
    experts: ExpertStack,
    top_k: i32,
    normalize: bool,
}

impl SparseMoe {
    /// Experts as MLX folders store them (`switch_mlp.<proj>.weight`,
    /// stacked), as HF does one by one (`experts.<e>.<proj>.weight`) or
    /// fused (`experts.gate_up_proj` `[experts, 2 * inter, dim]` and
    /// `experts.down_proj`, Qwen3.5-MoE).
    pub fn load(weights: &TensorMap, prefix: &str, routing: &Routing) -> Result<Self> {
        let switch = format!("{prefix}.switch_mlp");
        let fused = format!("{prefix}.experts.gate_up_proj");
        let experts = if weights.contains(&format!("{switch}.gate_proj.weight")) {
            ExpertStack::load(weights, &switch, Activation::Silu)?
        } else if weights.contains(&fused) {
            let gate_up = weights.dense(&fused)?;
            let inter = gate_up.dim(1) / 2;
            ExpertStack {
                gate: Experts::dense(gate_up.index((.., ..inter, ..)))?,
                up: Experts::dense(gate_up.index((.., inter.., ..)))?,
                down: Experts::dense(weights.dense(&format!("{prefix}.experts.down_proj"))?)?,
                activation: Activation::Silu,
            }
        } else {
            let each = |proj: &str| -> Result<Experts> {
                let all = (0..routing.experts)
                    .map(|e| {
                        weights
                            .linear(&format!("{prefix}.experts.{e}.{proj}"))?
                            .to_dense()
                    })
                    .collect::<Result<Vec<_>>>()?;
                Experts::dense(stack(&all, 0)?)
            };
            ExpertStack {
                gate: each("gate_proj")?,
                up: each("up_proj")?,
                down: each("down_proj")?,
                activation: Activation::Silu,
            }
        };
        Ok(SparseMoe {
            router: weights.linear(&format!("{prefix}.gate"))?,
            experts,
            top_k: routing.top_k as i32,
            normalize: routing.normalize,
        })
    }
}

impl FeedForward for SparseMoe {
    fn forward(&self, ctx: &ForwardContext, x: &Array) -> Result<Array> {
        let k = self.top_k;
        let gates = softmax_axis(&ctx.linear(&self.router, x)?, -1, true)?;
        // The k best experts per row (in no particular order) and their
        // weights.
        let experts = gates.dim(-1);
        let chosen = argpartition_axis(&gates, experts - k, -1)?.index((.., .., experts - k..));
        let mut scores = gates.take_along_axis(&chosen, -1)?;
        if self.normalize {
            scores = scores.divide(sum_axis(&scores, -1, true)?)?;
        }
        let out = self.experts.forward(x, &chosen, ctx.batch_invariant())?; // [1, rows, k, dim]
        let weighted = out.multiply(expand_dims_axes(&scores, &[-1])?)?;
        Ok(sum_axis(&weighted, -2, false)?)
    }

    fn stored(&self) -> Vec<Array> {
        let mut out = vec![self.router.stored()];
        out.extend(self.experts.stored());
        out
    }

    /// Routing is per row (its own top-k of its own scores); with the
    /// router row-blocked like every projection, the experts decide.
    fn batch_invariant(&self) -> bool {
        self.experts.row_independent()
    }

    /// Where afm's primitive multiplies every stack.
    fn layer_parts(&self) -> Option<LayerParts<'_>> {
        let (gate, up, down) = self.experts.on_primitive()?;
        Some(LayerParts::Routed(RoutedParts {
            router: &self.router,
            gate,
            up,
            down,
            top_k: self.top_k as usize,
            normalize: self.normalize,
            act: self.experts.activation.cpu(),
            shared: None,
        }))
    }
}

/// Routed experts plus a shared expert every token goes through, scaled by
/// its own gate (Qwen3-Next, Qwen3.5-MoE).
pub struct SharedExpertMoe {
    routed: SparseMoe,
    shared: GatedMlp,
    /// `[1, dim]`: one gate value per token.
    shared_gate: Linear,
}

impl SharedExpertMoe {
    pub fn load(weights: &TensorMap, prefix: &str, routing: &Routing) -> Result<Self> {
        Ok(SharedExpertMoe {
            routed: SparseMoe::load(weights, prefix, routing)?,
            shared: GatedMlp::load(
                weights,
                &format!("{prefix}.shared_expert"),
                Activation::Silu,
            )?,
            shared_gate: weights.linear(&format!("{prefix}.shared_expert_gate"))?,
        })
    }
}

impl FeedForward for SharedExpertMoe {
    fn forward(&self, ctx: &ForwardContext, x: &Array) -> Result<Array> {
        let routed = self.routed.forward(ctx, x)?;
        let gate = sigmoid(&ctx.linear(&self.shared_gate, x)?)?;
        let shared = self.shared.forward(ctx, x)?.multiply(&gate)?;
        Ok(routed.add(&shared)?)
    }

    fn stored(&self) -> Vec<Array> {
        let mut out = self.routed.stored();
        out.extend(self.shared.stored());
        out.push(self.shared_gate.stored());
        out
    }

    fn batch_invariant(&self) -> bool {
        self.routed.batch_invariant()
    }

    /// The routed experts' parts with the shared expert's beside them.
    fn layer_parts(&self) -> Option<LayerParts<'_>> {
        let LayerParts::Routed(mut routed) = self.routed.layer_parts()? else {
            return None;
        };
        let LayerParts::Gated(mlp) = self.shared.layer_parts()? else {
            return None;
        };
        routed.shared = Some(SharedParts {
            mlp,
            gate: &self.shared_gate,
        });
        Some(LayerParts::Routed(routed))
    }
}
