//! The gated MLP of llama-style blocks, `down(act(gate(x)) * up(x))`, with
//! gate and up as one matmul. SwiGLU (SiLU) for llama and Qwen, GeGLU
//! (tanh-approximated GELU) for Gemma.

use mlx_rs::Array;

use super::feed_forward::{FeedForward, GatedParts, LayerParts};
use super::forward::ForwardContext;
use crate::cpu;
use crate::error::Result;
use crate::layers::{FusedLinear, Linear};
use crate::loading::weights::TensorMap;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Activation {
    Silu,
    /// GELU with the tanh approximation (`gelu_pytorch_tanh`).
    GeluTanh,
}

impl Activation {
    /// `act(gate) * up`: afm's CPU primitive (`cpu::glu`: one pass, the
    /// halves of a fused product read in place) where it runs and the
    /// shapes match, else MLX's ops.
    pub fn gated(self, gate: &Array, up: &Array) -> Result<Array> {
        if cpu::glu::path().is_primitive() && gate.shape() == up.shape() {
            return cpu::glu::gated(gate, up, self.cpu());
        }
        let gate = match self {
            Activation::Silu => mlx_rs::nn::silu(gate)?,
            Activation::GeluTanh => mlx_rs::nn::gelu_approximate(gate)?,
        };
        Ok(gate.multiply(up)?)
    }

    /// The same activation as afm's CPU kernels name it.
    pub fn cpu(self) -> cpu::glu::Act {
        match self {
            Activation::Silu => cpu::glu::Act::Silu,
            Activation::GeluTanh => cpu::glu::Act::GeluTanh,
        }
    }
}

pub struct GatedMlp {
    /// gate and up projections as one matmul.
    gate_up: FusedLinear,
    down: Linear,
    activation: Activation,
}

impl GatedMlp {
    /// The projections under `prefix` (e.g. `model.layers.3.mlp`).
    pub fn load(weights: &TensorMap, prefix: &str, activation: Activation) -> Result<Self> {
        let linear = |name: &str| weights.linear(&format!("{prefix}.{name}"));
        Ok(GatedMlp {
            gate_up: FusedLinear::new(vec![linear("gate_proj")?, linear("up_proj")?])?,
            down: linear("down_proj")?,
            activation,
        })
    }
}

impl FeedForward for GatedMlp {
    fn forward(&self, ctx: &ForwardContext, x: &Array) -> Result<Array> {
        let [gate, up]: [Array; 2] = ctx
            .fused(&self.gate_up, x)?
            .try_into()
            .expect("gate and up");
        ctx.linear(&self.down, &self.activation.gated(&gate, &up)?)
    }

    fn stored(&self) -> Vec<Array> {
        let mut out = self.gate_up.stored();
        out.push(self.down.stored());
        out
    }

    fn layer_parts(&self) -> Option<LayerParts<'_>> {
        Some(LayerParts::Gated(GatedParts {
            gate_up: &self.gate_up,
            down: &self.down,
            act: self.activation.cpu(),
        }))
    }
}
