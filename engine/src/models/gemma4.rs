//! Gemma 4 (text; the multimodal checkpoints' language model too):
//! sliding and full layers by `layer_types`, each with its own head size
//! (`global_head_dim` on full layers), KV head count and RoPE (plain on
//! sliding layers, proportional on full ones: a share of the head rotated,
//! frequencies over the whole head). Attention scale 1, q/k norms and a
//! weightless v norm; full layers may take V from the K projection
//! (`attention_k_eq_v`). The last `num_kv_shared_layers` layers compute no
//! K/V: each reads the last earlier layer of its type. Per-layer
//! embeddings (E2B/E4B) add a gated per-layer input after the
//! feed-forward; every layer ends scaled by its `layer_scalar`. Norms
//! scale by `w` (not Gemma 3's `1 + w`), four per block; the embedding is
//! scaled by `sqrt(hidden)`; logits are soft-capped. The 26B-A4B MoE runs
//! a dense GeGLU MLP and routed GeGLU experts side by side. With packed
//! weights on the CPU every layer is one op (`LayerOp::gemma4`: all of
//! the above from the input norm to the layer scalar).

use mlx_rs::fast::rms_norm;
use mlx_rs::ops::indexing::IndexOp;
use mlx_rs::ops::{argpartition_axis, expand_dims_axes, softmax_axis, sum_axis, tanh};
use mlx_rs::Array;

use super::causal_lm::CausalLm;
use super::feed_forward::FeedForward;
use super::forward::{AttentionSpec, BatchItem, ForwardContext, Overlap, QkNorm};
use super::gated_mlp::{Activation, GatedMlp};
use super::kv_layout::KvLayout;
use super::kv_store::KvStore;
use super::layer_op::{self, Gemma4MoeParts, Gemma4Parts, LayerNorms, LayerOp, PerLayerParts};
use super::lm_head;
use super::self_attention::SelfAttention;
use super::sparse_moe::{experts_refuse_batch_invariance, ExpertStack};
use crate::error::{EngineError, Result};
use crate::layers::{Embedding, Linear};
use crate::loading::config::{HyperParams, ModelConfig};
use crate::loading::family::Family;
use crate::loading::weights::TensorMap;

/// How Gemma 4's files describe it (a multimodal one's `text_config`
/// names `gemma4_text`). Loads from HF/MLX folders; its GGUF tensors are
/// not mapped.
pub const FAMILY: Family = Family {
    hf_activation: ("hidden_activation", "gelu_pytorch_tanh"),
    turn_end_tokens: &["<turn|>", "<|tool_response>"],
    ..Family::plain("gemma4_text", "gemma4", "Gemma4ForCausalLM")
};

/// The registry's loader (`gemma4_text`, and `gemma4`'s text part).
pub fn load(
    config: ModelConfig,
    hyper: &HyperParams,
    weights: &TensorMap,
) -> Result<Box<dyn CausalLm>> {
    Ok(Box::new(Gemma4::load(config, hyper, weights)?))
}

/// One layer type's attention settings.
struct LayerType {
    head_dim: usize,
    kv_heads: usize,
    rope_base: f32,
    /// Proportional RoPE's frequencies (`None`: plain RoPE).
    rope_freqs: Option<Array>,
    window: Option<usize>,
    k_eq_v: bool,
}

/// RoPE settings of a layer type from `rope_parameters[type]`.
fn rope_of(
    hyper: &HyperParams,
    kind: &str,
    head_dim: usize,
    origin: &str,
) -> Result<(f32, Option<Array>)> {
    let params = hyper
        .get(&["rope_parameters"])
        .and_then(|r| r.get(kind))
        .and_then(|v| v.as_object());
    let key = |k: &str| params.and_then(|p| p.get(k));
    let base = key("rope_theta")
        .and_then(|v| v.as_f64())
        .unwrap_or(10_000.0) as f32;
    match key("rope_type")
        .and_then(|v| v.as_str())
        .unwrap_or("default")
    {
        "default" => Ok((base, None)),
        "proportional" => {
            // Wavelengths `factor * base^(2i / head_dim)` for the rotated
            // pairs, infinite (no rotation) for the rest.
            let share = key("partial_rotary_factor")
                .and_then(|v| v.as_f64())
                .unwrap_or(1.0);
            let factor = key("factor").and_then(|v| v.as_f64()).unwrap_or(1.0);
            let rotated = (head_dim as f64 * share) as usize;
            let freqs: Vec<f32> = (0..head_dim / 2)
                .map(|i| match 2 * i < rotated {
                    true => (factor * (base as f64).powf(2.0 * i as f64 / head_dim as f64)) as f32,
                    false => f32::INFINITY,
                })
                .collect();
            Ok((base, Some(Array::from_slice(&freqs, &[freqs.len() as i32]))))
        }
        other => Err(EngineError::invalid_model(
            origin,
            format!("gemma4 rope_type '{other}' is not supported"),
        )),
    }
}

/// Per-layer embeddings: a table of `layers * d` per token, projected
/// hidden state and gated input per layer.
struct PerLayerInput {
    table: Embedding,
    /// `[layers * d, hidden]`.
    projection: Linear,
    /// `[d]`, shared by every layer.
    norm: Array,
    dim: usize,
}

/// The gated per-layer input of one layer.
struct LayerInput {
    gate: Linear,
    projection: Linear,
    norm: Array,
}

/// Gemma's router and routed GeGLU experts (26B-A4B).
struct Gemma4Moe {
    /// `[experts, hidden]`.
    router: Linear,
    /// `router.scale * hidden^-0.5`, the router norm's weight.
    router_norm: Array,
    per_expert_scale: Array,
    experts: ExpertStack,
    top_k: i32,
    pre_norm: Array,
    post_norm: Array,
    /// The dense MLP's own post norm (`post_feedforward_layernorm_1`).
    dense_post_norm: Array,
}

enum Ffn {
    Dense(GatedMlp),
    WithExperts(GatedMlp, Box<Gemma4Moe>),
}

struct Layer {
    input_norm: Array,
    attention: SelfAttention,
    post_attention_norm: Array,
    pre_feedforward_norm: Array,
    ffn: Ffn,
    post_feedforward_norm: Array,
    input: Option<LayerInput>,
    scalar: Array,
    /// The layer as one op, where the CPU primitive runs it.
    one_op: Option<LayerOp>,
}

impl Layer {
    fn fuse(&mut self, index: usize, eps: f32) {
        let (mlp, moe) = match &self.ffn {
            Ffn::Dense(mlp) => (mlp, None),
            Ffn::WithExperts(mlp, moe) => {
                let Some(parts) = moe.layer_parts() else {
                    return;
                };
                (mlp, Some(parts))
            }
        };
        let norms = LayerNorms {
            attn: &self.input_norm,
            attn_out: Some(&self.post_attention_norm),
            ffn: &self.pre_feedforward_norm,
            ffn_out: Some(&self.post_feedforward_norm),
            eps,
        };
        let end = Gemma4Parts {
            moe,
            per_layer: self.input.as_ref().map(|i| PerLayerParts {
                gate: &i.gate,
                projection: &i.projection,
                norm: &i.norm,
                index,
            }),
            scalar: &self.scalar,
        };
        self.one_op = LayerOp::gemma4(norms, &self.attention, mlp, end);
    }
}

pub struct Gemma4 {
    config: ModelConfig,
    kv_layout: KvLayout,
    embed: Embedding,
    embed_scale: Array,
    per_layer: Option<PerLayerInput>,
    layers: Vec<Layer>,
    norm: Array,
    lm_head: Linear,
    softcap: Option<f32>,
    batch_invariant: bool,
}

impl Gemma4 {
    fn load(config: ModelConfig, hyper: &HyperParams, weights: &TensorMap) -> Result<Self> {
        let origin = weights.origin();
        let n = config.num_layers;
        let types: Vec<String> = match hyper.get(&["layer_types"]).and_then(|v| v.as_array()) {
            Some(t) => t
                .iter()
                .map(|v| v.as_str().unwrap_or("").to_string())
                .collect(),
            None => {
                let pattern = hyper.usize(&["sliding_window_pattern"]).unwrap_or(5).max(1);
                (0..n)
                    .map(|i| match (i + 1) % pattern {
                        0 => "full_attention".to_string(),
                        _ => "sliding_attention".to_string(),
                    })
                    .collect()
            }
        };
        if types.len() != n
            || types
                .iter()
                .any(|t| t != "sliding_attention" && t != "full_attention")
        {
            return Err(EngineError::invalid_model(
                origin,
                format!("layer_types {types:?} for {n} layers"),
            ));
        }
        let window = hyper.usize(&["sliding_window"]).unwrap_or(512);
        let k_eq_v = hyper
            .get(&["attention_k_eq_v"])
            .and_then(|v| v.as_bool())
            .unwrap_or(false);
        let sliding = {
            let (rope_base, rope_freqs) =
                rope_of(hyper, "sliding_attention", config.head_dim, origin)?;
            LayerType {
                head_dim: config.head_dim,
                kv_heads: config.num_kv_heads,
                rope_base,
                rope_freqs,
                window: Some(window),
                k_eq_v: false,
            }
        };
        let full = {
            let head_dim = hyper
                .usize(&["global_head_dim"])
                .filter(|&d| d > 0)
                .unwrap_or(config.head_dim);
            let (rope_base, rope_freqs) = rope_of(hyper, "full_attention", head_dim, origin)?;
            LayerType {
                head_dim,
                kv_heads: match k_eq_v {
                    true => hyper
                        .usize(&["num_global_key_value_heads"])
                        .unwrap_or(config.num_kv_heads),
                    false => config.num_kv_heads,
                },
                rope_base,
                rope_freqs,
                window: None,
                k_eq_v,
            }
        };
        // The last `shared` layers read the KV of the last earlier layer
        // of their type.
        let shared = hyper.usize(&["num_kv_shared_layers"]).unwrap_or(0).min(n);
        let first_shared = n - shared;
        let owner = |i: usize| -> Result<Option<usize>> {
            if i < first_shared {
                return Ok(None);
            }
            (0..first_shared)
                .rev()
                .find(|&j| types[j] == types[i])
                .map(Some)
                .ok_or_else(|| {
                    EngineError::invalid_model(
                        origin,
                        format!("KV-shared layer {i} has no earlier {} layer", types[i]),
                    )
                })
        };

        let eps = config.rms_norm_eps;
        let per_layer_dim = hyper.usize(&["hidden_size_per_layer_input"]).unwrap_or(0);
        let experts = hyper
            .get(&["enable_moe_block"])
            .and_then(|v| v.as_bool())
            .unwrap_or(false);
        let mut layers = Vec::with_capacity(n);
        for (i, kind) in types.iter().enumerate() {
            let p = format!("model.layers.{i}");
            let w = |name: &str| weights.dense(&format!("{p}.{name}.weight"));
            let t = match kind.as_str() {
                "full_attention" => &full,
                _ => &sliding,
            };
            let shares = owner(i)?;
            let q_norm = w("self_attn.q_norm")?;
            let (k_norm, kv_heads_in_qk) = match shares {
                None => (w("self_attn.k_norm")?, t.kv_heads),
                Some(_) => (q_norm.clone(), 0),
            };
            let spec = AttentionSpec {
                heads: config.num_heads,
                kv_heads: t.kv_heads,
                head_dim: t.head_dim,
                scale: 1.0,
                rope_base: t.rope_base,
                rope_dims: t.head_dim,
                rope_freqs: t.rope_freqs.clone(),
                rope_traditional: false,
                qk_norm: Some(QkNorm::new(
                    &q_norm,
                    &k_norm,
                    config.num_heads,
                    kv_heads_in_qk,
                    eps,
                )?),
                v_norm: Some(eps),
                window: t.window,
                output_gate: false,
                k_eq_v: t.k_eq_v,
                shares_kv_of: shares,
            };
            let ffn = {
                let mlp = GatedMlp::load(weights, &format!("{p}.mlp"), Activation::GeluTanh)?;
                match experts {
                    false => Ffn::Dense(mlp),
                    true => Ffn::WithExperts(
                        mlp,
                        Box::new(Gemma4Moe::load(weights, &p, hyper, &config)?),
                    ),
                }
            };
            let input = match per_layer_dim {
                0 => None,
                _ => Some(LayerInput {
                    gate: weights.linear(&format!("{p}.per_layer_input_gate"))?,
                    projection: weights.linear(&format!("{p}.per_layer_projection"))?,
                    norm: w("post_per_layer_input_norm")?,
                }),
            };
            let mut layer = Layer {
                input_norm: w("input_layernorm")?,
                attention: SelfAttention::load(weights, &format!("{p}.self_attn"), spec)?,
                post_attention_norm: w("post_attention_layernorm")?,
                pre_feedforward_norm: w("pre_feedforward_layernorm")?,
                ffn,
                post_feedforward_norm: w("post_feedforward_layernorm")?,
                input,
                scalar: weights.dense(&format!("{p}.layer_scalar"))?,
                one_op: None,
            };
            layer.fuse(i, eps);
            layers.push(layer);
        }
        layer_op::log_coverage(
            layers.iter().filter(|l| l.one_op.is_some()).count(),
            layers.len(),
        );
        // Attention layer `i` is layer `i`: owners are layer indices.
        let kv_layout = KvLayout::attention(
            layers
                .iter()
                .map(|l| l.attention.spec().layer_kv())
                .collect(),
        );
        let per_layer = match per_layer_dim {
            0 => None,
            dim => Some(PerLayerInput {
                table: weights.embedding("model.embed_tokens_per_layer")?,
                projection: weights.linear("model.per_layer_model_projection")?,
                norm: weights.dense("model.per_layer_projection_norm.weight")?,
                dim,
            }),
        };
        let embed = weights.embedding("model.embed_tokens")?;
        let model = Gemma4 {
            lm_head: lm_head::load(weights, &embed, &config)?,
            embed_scale: Array::from_f32((config.hidden_size as f32).sqrt()),
            norm: weights.dense("model.norm.weight")?,
            softcap: hyper.f32(&["final_logit_softcapping"]).filter(|c| *c > 0.0),
            kv_layout,
            per_layer,
            config,
            embed,
            layers,
            batch_invariant: false,
        };
        model.materialize()?;
        Ok(model)
    }

    fn materialize(&self) -> Result<()> {
        let mut arrays = vec![
            self.norm.clone(),
            self.embed.0.stored(),
            self.lm_head.stored(),
        ];
        if let Some(p) = &self.per_layer {
            arrays.extend([p.table.0.stored(), p.projection.stored(), p.norm.clone()]);
        }
        for l in &self.layers {
            arrays.extend(l.attention.stored());
            arrays.extend([
                l.input_norm.clone(),
                l.post_attention_norm.clone(),
                l.pre_feedforward_norm.clone(),
                l.post_feedforward_norm.clone(),
                l.scalar.clone(),
            ]);
            match &l.ffn {
                Ffn::Dense(m) => arrays.extend(m.stored()),
                Ffn::WithExperts(m, e) => {
                    arrays.extend(m.stored());
                    arrays.extend(e.stored());
                }
            }
            if let Some(i) = &l.input {
                arrays.extend([i.gate.stored(), i.projection.stored(), i.norm.clone()]);
            }
        }
        mlx_rs::transforms::eval(&arrays)?;
        Ok(())
    }

    /// Each layer's per-layer input, `[1, rows, layers, d]`, from the token
    /// ids and the scaled embedding `h`.
    fn per_layer_inputs(
        &self,
        ctx: &ForwardContext,
        ids: &Array,
        h: &Array,
    ) -> Result<Option<Array>> {
        let Some(p) = &self.per_layer else {
            return Ok(None);
        };
        let rows = h.dim(1);
        let (layers, d) = (self.layers.len() as i32, p.dim as i32);
        let from_table = p
            .table
            .lookup(ids)?
            .multiply(Array::from_f32((p.dim as f32).sqrt()))?
            .reshape(&[1, rows, layers, d])?;
        let projected = ctx
            .linear(&p.projection, h)?
            .multiply(Array::from_f32((self.config.hidden_size as f32).powf(-0.5)))?
            .reshape(&[1, rows, layers, d])?;
        let projected = rms_norm(projected, Some(&p.norm), self.config.rms_norm_eps)?;
        Ok(Some(projected.add(from_table)?.multiply(
            Array::from_f32(std::f32::consts::FRAC_1_SQRT_2),
        )?))
    }
}

impl Gemma4Moe {
    fn load(
        weights: &TensorMap,
        p: &str,
        hyper: &HyperParams,
        config: &ModelConfig,
    ) -> Result<Self> {
        let w = |name: &str| weights.dense(&format!("{p}.{name}"));
        let top_k = hyper
            .usize(&["top_k_experts", "num_experts_per_tok"])
            .ok_or_else(|| {
                EngineError::invalid_model(weights.origin(), "gemma4 MoE needs top_k_experts")
            })?;
        let root = Array::from_f32((config.hidden_size as f32).powf(-0.5));
        Ok(Gemma4Moe {
            router: weights.linear(&format!("{p}.router.proj"))?,
            router_norm: w("router.scale")?.multiply(&root)?,
            per_expert_scale: w("router.per_expert_scale")?,
            experts: ExpertStack::load(
                weights,
                &format!("{p}.experts.switch_glu"),
                Activation::GeluTanh,
            )?,
            top_k: top_k as i32,
            pre_norm: w("pre_feedforward_layernorm_2.weight")?,
            post_norm: w("post_feedforward_layernorm_2.weight")?,
            dense_post_norm: w("post_feedforward_layernorm_1.weight")?,
        })
    }

    /// The experts' output for the residual `h` (the router reads `h`
    /// itself; the experts its own pre-norm of it).
    fn forward(&self, ctx: &ForwardContext, h: &Array, eps: f32) -> Result<Array> {
        let x = rms_norm(h, Some(&self.router_norm), eps)?;
        let scores = ctx.linear(&self.router, &x)?;
        let experts = scores.dim(-1);
        let k = self.top_k;
        let chosen = argpartition_axis(&scores, experts - k, -1)?.index((.., .., experts - k..));
        let weights = softmax_axis(&scores.take_along_axis(&chosen, -1)?, -1, true)?
            .multiply(self.per_expert_scale.take_axis(&chosen, 0)?)?;
        let input = rms_norm(h, Some(&self.pre_norm), eps)?;
        let out = self
            .experts
            .forward(&input, &chosen, ctx.batch_invariant())?; // [1, rows, k, dim]
        let out = sum_axis(
            &out.multiply(expand_dims_axes(&weights, &[-1])?)?,
            -2,
            false,
        )?;
        Ok(rms_norm(out, Some(&self.post_norm), eps)?)
    }

    /// The block as the whole-layer primitive takes it, when its experts
    /// are packed for it.
    fn layer_parts(&self) -> Option<Gemma4MoeParts<'_>> {
        let (gate, up, down) = self.experts.on_primitive()?;
        Some(Gemma4MoeParts {
            router: &self.router,
            router_norm: &self.router_norm,
            expert_scale: &self.per_expert_scale,
            gate,
            up,
            down,
            top_k: self.top_k as usize,
            experts_norm: &self.pre_norm,
            experts_out_norm: &self.post_norm,
            dense_out_norm: &self.dense_post_norm,
        })
    }

    fn stored(&self) -> Vec<Array> {
        let mut out = vec![
            self.router.stored(),
            self.router_norm.clone(),
            self.per_expert_scale.clone(),
            self.pre_norm.clone(),
            self.post_norm.clone(),
            self.dense_post_norm.clone(),
        ];
        out.extend(self.experts.stored());
        out
    }
}

impl CausalLm for Gemma4 {
    fn config(&self) -> &ModelConfig {
        &self.config
    }

    fn kv_layout(&self) -> &KvLayout {
        &self.kv_layout
    }

    fn forward_pass(
        &self,
        kv: &mut KvStore,
        items: &[BatchItem<'_>],
        overlap: Overlap,
    ) -> Result<Array> {
        let eps = self.config.rms_norm_eps;
        let norm = |x: &Array, w: &Array| rms_norm(x, Some(w), eps);
        let mut ctx = ForwardContext::new(items, kv, self.batch_invariant, overlap)?;
        let ids = ctx.token_ids();
        let mut h = self.embed.lookup(&ids)?.multiply(&self.embed_scale)?;
        let inputs = self.per_layer_inputs(&ctx, &ids, &h)?;
        let rows = ctx.layer_rows();
        for (i, layer) in self.layers.iter().enumerate() {
            ctx.hand_over(&h)?;
            if let Some(one_op) = &layer.one_op {
                h = one_op.forward(&mut ctx, i, &h, &rows, inputs.as_ref())?;
                continue;
            }
            let x = norm(&h, &layer.input_norm)?;
            let a = layer.attention.forward(&mut ctx, i, &x)?;
            h = h.add(norm(&a, &layer.post_attention_norm)?)?;
            let f = match &layer.ffn {
                Ffn::Dense(mlp) => mlp.forward(&ctx, &norm(&h, &layer.pre_feedforward_norm)?)?,
                Ffn::WithExperts(mlp, moe) => {
                    let dense = mlp.forward(&ctx, &norm(&h, &layer.pre_feedforward_norm)?)?;
                    norm(&dense, &moe.dense_post_norm)?.add(moe.forward(&ctx, &h, eps)?)?
                }
            };
            h = h.add(norm(&f, &layer.post_feedforward_norm)?)?;
            if let (Some(input), Some(all)) = (&layer.input, &inputs) {
                let mine = all.index((.., .., i as i32, ..));
                let gate = ctx.linear(&input.gate, &h)?;
                let gated = Activation::GeluTanh.gated(&gate, &mine)?;
                let g = ctx.linear(&input.projection, &gated)?;
                h = h.add(norm(&g, &input.norm)?)?;
            }
            h = h.multiply(&layer.scalar)?;
        }
        let final_norm = |x: &Array| Ok(rms_norm(x, Some(&self.norm), eps)?);
        let logits =
            lm_head::sampled_logits(&mut ctx, &h, final_norm, &self.lm_head, &self.config)?;
        Ok(match self.softcap {
            Some(c) => tanh(&logits.divide(Array::from_f32(c))?)?.multiply(Array::from_f32(c))?,
            None => logits,
        })
    }

    fn set_batch_invariant(&mut self, on: bool) -> Result<()> {
        let routed_ok = self.layers.iter().all(|l| match &l.ffn {
            Ffn::Dense(_) => true,
            Ffn::WithExperts(_, e) => e.experts.row_independent(),
        });
        if on && !routed_ok {
            return Err(experts_refuse_batch_invariance(&self.config.architecture));
        }
        self.batch_invariant = on;
        Ok(())
    }
}
