//! A whole pre-norm decoder layer as one MLX primitive on the CPU:
//! `AfmDecoderLayer` (`cpu-kernels/layer*`).
//!
//! As MLX ops a layer is ~13 operations a step (MLX's `rms_norm` and `rope`
//! fall back to several plain ops each on CPU streams, plus the KV writes,
//! residual adds and copies of reshaped views), and each one is a graph
//! node, a push to MLX's stream thread and usually a thread wake: ~390
//! context switches a token on SmolLM2. The primitive runs the layer's small
//! steps inline on the stream thread and its products, attention and
//! activation on the shared pool, whose workers stay hot between them.
//!
//! Each row is computed from its own input row and its own KV slot in a
//! fixed order, so the layer is batch-invariant by construction (with
//! `blas_min_rows` 0). It rides on the quantized matmul's build and checks
//! ([`qmm::path`](super::qmm::path)) and needs afm's attention and gated
//! activation; `AFM_LAYER=off` turns it off alone, and the engine then
//! builds the layer from MLX ops, as on Metal.

use std::sync::OnceLock;

use mlx_rs::Array;

use super::glu::Act;
use super::qmm::Path;
use crate::error::Result;

/// Whether decoder layers take the primitive in this process (decided
/// once).
/// The layer runs afm's attention and gated activation inside it, so it is
/// off wherever either of those is (`AFM_ATTENTION=off` then means MLX's
/// attention everywhere, as on Metal).
pub fn path() -> &'static Path {
    static PATH: OnceLock<Path> = OnceLock::new();
    PATH.get_or_init(|| {
        for (part, p) in [
            ("attention", super::attention::path()),
            ("gated activation", super::glu::path()),
        ] {
            if let Path::Unavailable(why) = p {
                return Path::Unavailable(format!("{part}: {why}"));
            }
        }
        super::switched_path("AFM_LAYER")
    })
}

/// What the start-up log says of [`path`].
pub fn describe() -> String {
    match path() {
        Path::Primitive { threads, .. } => {
            format!("afm decoder layer (one op per layer, {threads} threads)")
        }
        Path::Unavailable(why) => format!("MLX ops ({why})"),
    }
}

/// A product's packed format: bits and group size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Format {
    pub bits: i32,
    pub group_size: i32,
}

/// A layer's routed experts (instead of a gated MLP): a softmax router
/// picks each row's `top_k` of `experts`, their weights renormalised over
/// the k when `normalize`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Routed {
    pub experts: usize,
    pub top_k: usize,
    pub normalize: bool,
    /// A shared expert beside them: its gate/up, down and one-row gate
    /// products follow the experts' (Qwen3-Next, Qwen3.5-MoE).
    pub shared: bool,
}

/// A Gated DeltaNet mixer's sizes (the linear-attention layers of
/// Qwen3-Next and Qwen3.5), in place of attention.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Recurrent {
    pub key_heads: usize,
    pub value_heads: usize,
    pub key_dim: usize,
    pub value_dim: usize,
}

/// Gemma 4's additions to an attention layer; all off by default.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Gemma4 {
    /// RoPE's wavelengths (`rope_dims / 2`) come as an input after the
    /// norms, in place of `rope_base`'s.
    pub rope_freqs: bool,
    /// A weightless RMSNorm of each value head, with this eps.
    pub v_norm: Option<f32>,
    /// The values are the key product's output before its norm and RoPE;
    /// there is no value product.
    pub k_eq_v: bool,
    /// The store is another layer's: read, left as it is; the q/k/v
    /// product holds queries alone.
    pub kv_shared: bool,
    /// The per-layer input after the feed-forward block (dense only).
    pub per_layer: Option<PerLayer>,
    /// A one-value input multiplying the layer's output, last.
    pub layer_scalar: bool,
    /// The MoE block (26B-A4B), with `routed`: the dense gated MLP (products
    /// 6 and 7) beside the experts, Gemma's router (top-k scores, softmax
    /// over them, per-expert scales) and five inputs after the RoPE
    /// wavelengths (router norm, expert scales, the experts' norm, their
    /// output norm, the dense output norm).
    pub moe: bool,
}

/// A layer's share of the per-layer inputs (`[..., rows, layers, dim]`,
/// an input after the RoPE wavelengths): `dim` values at `index`. Its gate
/// and projection are products 4 and 5, its norm the input after.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PerLayer {
    pub dim: usize,
    pub index: usize,
}

/// A layer's fixed parameters.
#[derive(Debug, Clone)]
pub struct Config {
    /// A Gated DeltaNet recurrence instead of attention: the q/k/v product
    /// is then its input product (q, k, v, z, b, a), the output product
    /// its, the store its conv and delta states, and the attention fields
    /// below are unused.
    pub recurrent: Option<Recurrent>,
    pub heads: usize,
    pub kv_heads: usize,
    pub head_dim: usize,
    /// The products' formats, in the inputs' order: q/k/v, output, then
    /// gate/up and down; or, with `routed`, the router and the experts'
    /// gate, up and down (and the shared expert's gate/up, down and gate).
    pub formats: Vec<Format>,
    /// Routed experts in place of the gated MLP.
    pub routed: Option<Routed>,
    /// The layer norms' eps.
    pub eps: f32,
    /// The per-head q/k norms' eps, when the layer has them.
    pub qk_norm: Option<f32>,
    /// A norm of the attention output before its residual add (Gemma).
    pub attn_out_norm: bool,
    /// A norm of the MLP output before its residual add (Gemma).
    pub ffn_out_norm: bool,
    pub rope_base: f32,
    /// RoPE over each head's first `rope_dims` features (the whole head
    /// when equal to `head_dim`).
    pub rope_dims: usize,
    pub rope_traditional: bool,
    /// Qwen3-Next's and Qwen3.5's output gate: the q/k/v product ends with
    /// `heads * head_dim` gate values, whose sigmoid multiplies attention's
    /// output.
    pub output_gate: bool,
    pub scale: f32,
    pub window: Option<usize>,
    pub act: Act,
    pub gemma4: Gemma4,
}

/// The rows of one call: item `i`'s `lens[i]` new tokens, end to end after
/// the previous item's; it sits in KV slot `slots[i]`, its first new token
/// at `offsets[i]`. Any mix of decoding items and prefill chunks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rows {
    pub slots: Vec<i32>,
    pub offsets: Vec<i32>,
    pub lens: Vec<i32>,
}

/// The layer over `h` (`[..., rows, dim]`), lazily: `(h_out, keys,
/// values)`, the store with this call's keys and values written (in place
/// when the caller holds no other reference to it). `inputs` after `h`,
/// `keys`, `values`: the attention norm, q/k/v packed weight, scales,
/// biases, the output projection's three, the MLP norm, gate/up's three,
/// down's three (with `routed`: the router's three, then the stacked
/// experts' gate, up and down, three each), then the q and k norms (with `qk_norm`), the attention
/// output norm and the MLP output norm (when the config has them). With
/// `recurrent`, `keys` and `values` are the layer's conv and delta states
/// and the mixer's conv weight, decay (`exp(A_log)`), `dt_bias` and gated
/// norm come right after the products (no q/k norms). With
/// [`Gemma4`]'s parts, last: RoPE's wavelengths, the per-layer inputs and
/// norm (its gate and projection being products 4 and 5), the layer scalar.
/// `blas_min_rows` as for [`qmm::affine_qmm_blas_from`](super::qmm::affine_qmm_blas_from).
/// Only where [`path`] is the primitive.
pub fn decoder_layer(
    inputs: &[&Array],
    config: &Config,
    rows: &Rows,
    blas_min_rows: i32,
) -> Result<(Array, Array, Array)> {
    ffi::decoder_layer(inputs, config, rows, blas_min_rows)
}

#[cfg(not(target_os = "macos"))]
mod ffi {
    use std::ffi::{c_float, c_int};

    use mlx_rs::Array;
    use mlx_sys::{mlx_array, mlx_stream};

    use super::{Config, Rows};
    use crate::cpu::glu::Act;
    use crate::error::{EngineError, Result};

    /// `afm_layer_config` of `cpu-kernels/primitive.h`, field for field.
    #[repr(C)]
    struct LayerConfig {
        heads: c_int,
        kv_heads: c_int,
        head_dim: c_int,
        bits: [c_int; 9],
        group_size: [c_int; 9],
        eps: c_float,
        qk_eps: c_float,
        has_qk_norm: c_int,
        has_attn_out_norm: c_int,
        has_ffn_out_norm: c_int,
        rope_base: c_float,
        rope_dims: c_int,
        rope_traditional: c_int,
        output_gate: c_int,
        scale: c_float,
        window: c_int,
        act: c_int,
        experts: c_int,
        top_k: c_int,
        norm_topk: c_int,
        blas_min_rows: c_int,
        recurrent: c_int,
        delta_key_heads: c_int,
        delta_value_heads: c_int,
        delta_key_dim: c_int,
        delta_value_dim: c_int,
        shared_expert: c_int,
        rope_freqs: c_int,
        v_norm: c_int,
        v_eps: c_float,
        k_eq_v: c_int,
        kv_shared: c_int,
        per_layer_dim: c_int,
        per_layer_index: c_int,
        layer_scalar: c_int,
        gemma_moe: c_int,
    }

    extern "C" {
        fn afm_decoder_layer(
            res: *mut mlx_array,
            inputs: *const mlx_array,
            n_inputs: c_int,
            cfg: *const LayerConfig,
            slots: *const i32,
            offsets: *const i32,
            lens: *const i32,
            n: c_int,
            s: mlx_stream,
        ) -> c_int;
    }

    pub(super) fn decoder_layer(
        inputs: &[&Array],
        c: &Config,
        rows: &Rows,
        blas_min_rows: i32,
    ) -> Result<(Array, Array, Array)> {
        let n = rows.slots.len();
        if rows.offsets.len() != n || rows.lens.len() != n {
            return Err(EngineError::Internal(
                "decoder layer: one offset and one length per slot".into(),
            ));
        }
        let shared = c.routed.is_some_and(|r| r.shared);
        let g = &c.gemma4;
        let products = 4
            + 2 * c.routed.is_some() as usize
            + 3 * shared as usize
            + 2 * g.per_layer.is_some() as usize
            + 2 * g.moe as usize;
        if c.formats.len() != products {
            return Err(EngineError::Internal(
                "decoder layer: one format per product".into(),
            ));
        }
        let format = |j: usize| c.formats.get(j).copied();
        let cfg = LayerConfig {
            heads: c.heads as c_int,
            kv_heads: c.kv_heads as c_int,
            head_dim: c.head_dim as c_int,
            bits: std::array::from_fn(|j| format(j).map_or(0, |f| f.bits)),
            group_size: std::array::from_fn(|j| format(j).map_or(0, |f| f.group_size)),
            eps: c.eps,
            qk_eps: c.qk_norm.unwrap_or(0.0),
            has_qk_norm: c.qk_norm.is_some() as c_int,
            has_attn_out_norm: c.attn_out_norm as c_int,
            has_ffn_out_norm: c.ffn_out_norm as c_int,
            rope_base: c.rope_base,
            rope_dims: c.rope_dims as c_int,
            rope_traditional: c.rope_traditional as c_int,
            output_gate: c.output_gate as c_int,
            scale: c.scale,
            window: c.window.unwrap_or(0) as c_int,
            act: match c.act {
                Act::Silu => 0,
                Act::GeluTanh => 1,
            },
            experts: c.routed.map_or(0, |r| r.experts as c_int),
            top_k: c.routed.map_or(0, |r| r.top_k as c_int),
            norm_topk: c.routed.is_some_and(|r| r.normalize) as c_int,
            blas_min_rows,
            recurrent: c.recurrent.is_some() as c_int,
            delta_key_heads: c.recurrent.map_or(0, |r| r.key_heads as c_int),
            delta_value_heads: c.recurrent.map_or(0, |r| r.value_heads as c_int),
            delta_key_dim: c.recurrent.map_or(0, |r| r.key_dim as c_int),
            delta_value_dim: c.recurrent.map_or(0, |r| r.value_dim as c_int),
            shared_expert: c.routed.is_some_and(|r| r.shared) as c_int,
            rope_freqs: g.rope_freqs as c_int,
            v_norm: g.v_norm.is_some() as c_int,
            v_eps: g.v_norm.unwrap_or(0.0),
            k_eq_v: g.k_eq_v as c_int,
            kv_shared: g.kv_shared as c_int,
            per_layer_dim: g.per_layer.map_or(0, |p| p.dim as c_int),
            per_layer_index: g.per_layer.map_or(0, |p| p.index as c_int),
            layer_scalar: g.layer_scalar as c_int,
            gemma_moe: g.moe as c_int,
        };
        let handles: Vec<mlx_array> = inputs.iter().map(|a| a.as_ptr()).collect();
        // SAFETY: the handles come from live mlx-rs Arrays that outlive the
        // call; `slots`, `offsets` and `lens` hold `n` values each and are
        // copied; `res` holds three handles.
        let [h, k, v] = crate::cpu::build_ops(|res, s| unsafe {
            afm_decoder_layer(
                res,
                handles.as_ptr(),
                handles.len() as c_int,
                &cfg,
                rows.slots.as_ptr(),
                rows.offsets.as_ptr(),
                rows.lens.as_ptr(),
                n as c_int,
                s,
            )
        })?;
        Ok((h, k, v))
    }
}

#[cfg(target_os = "macos")]
mod ffi {
    use mlx_rs::Array;

    use super::{Config, Rows};
    use crate::error::{EngineError, Result};

    pub(super) fn decoder_layer(
        _: &[&Array],
        _: &Config,
        _: &Rows,
        _: i32,
    ) -> Result<(Array, Array, Array)> {
        Err(EngineError::Unsupported(
            "afm's CPU decoder layer on macOS".into(),
        ))
    }
}

#[cfg(all(test, not(target_os = "macos")))]
mod tests {
    use super::*;
    use crate::cpu::test_support::{max_diff, uniform};
    use crate::cpu::{attention, glu, qmm};
    use mlx_rs::fast::{rms_norm, rope};
    use mlx_rs::ops::indexing::{IndexOp, TryIndexMutOp};
    use mlx_rs::ops::{
        argsort_axis, concatenate, expand_dims_axes, quantize, softmax_axis, sum_axis,
    };

    const DIM: i32 = 64;
    const HEADS: usize = 4;
    const KV_HEADS: usize = 2;
    const D: usize = 16;
    const HIDDEN: i32 = 96;
    /// The routed layer's experts, choices per row and expert width.
    const EXPERTS: i32 = 6;
    const TOP_K: i32 = 2;
    const EXPERT_HIDDEN: i32 = 32;
    const SLOTS: i32 = 4;
    const CAP: i32 = 16;
    const EPS: f32 = 1e-5;

    /// The layer forms the tests cover.
    #[derive(Debug, Clone, Copy, PartialEq)]
    enum Kind {
        /// llama's plain form.
        Llama,
        /// q/k norms, output norms, GELU and a window of 4.
        Gemma,
        /// llama's attention, routed experts (Qwen3-MoE).
        Routed,
        /// Qwen3.5's attention: q/k norms, an output gate, RoPE over half
        /// of each head.
        Gated,
    }

    const KINDS: [Kind; 4] = [Kind::Llama, Kind::Gemma, Kind::Routed, Kind::Gated];

    /// A random layer: its packed products (with their formats), its norms
    /// and its config.
    struct Layer {
        products: Vec<(Array, Array, Array)>,
        norms: Vec<Array>,
        config: Config,
    }

    impl Layer {
        fn new(kind: Kind) -> Layer {
            let gemma = kind == Kind::Gemma;
            let gated = kind == Kind::Gated;
            let q_w = (HEADS * D) as i32;
            let qkv_n = ((HEADS + 2 * KV_HEADS) * D) as i32 + if gated { q_w } else { 0 };
            // [experts,] rows, columns; bits, group size.
            let mut shapes = vec![(vec![qkv_n, DIM], 4, 32), (vec![DIM, q_w], 8, 32)];
            if kind == Kind::Routed {
                shapes.extend([
                    (vec![EXPERTS, DIM], 8, 64),
                    (vec![EXPERTS, EXPERT_HIDDEN, DIM], 4, 32),
                    (vec![EXPERTS, EXPERT_HIDDEN, DIM], 4, 32),
                    (vec![EXPERTS, DIM, EXPERT_HIDDEN], 4, 32),
                ]);
            } else {
                shapes.extend([(vec![2 * HIDDEN, DIM], 4, 32), (vec![DIM, HIDDEN], 8, 32)]);
            }
            let formats = shapes
                .iter()
                .map(|&(_, bits, group_size)| Format { bits, group_size })
                .collect::<Vec<_>>();
            let products = shapes
                .iter()
                .enumerate()
                .map(|(j, (shape, bits, group_size))| {
                    let w = uniform(shape, 0.2, 10 + j as u64);
                    quantize(&w, *group_size, *bits).unwrap()
                })
                .collect();
            let norm = |n: i32, seed| uniform(&[n], 0.5, seed).add(Array::from_f32(1.0)).unwrap();
            let mut norms = vec![norm(DIM, 20), norm(DIM, 21)];
            if gemma || gated {
                norms.extend([norm(D as i32, 22), norm(D as i32, 23)]);
            }
            if gemma {
                norms.extend([norm(DIM, 24), norm(DIM, 25)]);
            }
            let config = Config {
                recurrent: None,
                heads: HEADS,
                kv_heads: KV_HEADS,
                head_dim: D,
                formats,
                routed: (kind == Kind::Routed).then_some(Routed {
                    experts: EXPERTS as usize,
                    top_k: TOP_K as usize,
                    normalize: true,
                    shared: false,
                }),
                eps: EPS,
                qk_norm: (gemma || gated).then_some(1e-6),
                attn_out_norm: gemma,
                ffn_out_norm: gemma,
                rope_base: 10_000.0,
                rope_dims: if gated { D / 2 } else { D },
                rope_traditional: false,
                output_gate: gated,
                scale: (D as f32).powf(-0.5),
                window: gemma.then_some(4),
                act: if gemma { Act::GeluTanh } else { Act::Silu },
                gemma4: Gemma4::default(),
            };
            Layer {
                products,
                norms,
                config,
            }
        }

        /// The primitive over `h` and the store, which it takes (so the op
        /// holds the store's only reference unless the caller kept a clone).
        fn run(&self, h: &Array, keys: Array, values: Array, rows: &Rows) -> (Array, Array, Array) {
            let inputs = self.inputs(h, &keys, &values);
            let out = decoder_layer(&inputs, &self.config, rows, 0).unwrap();
            drop(inputs);
            drop((keys, values));
            mlx_rs::transforms::eval([&out.0, &out.1, &out.2]).unwrap();
            out
        }

        /// The primitive's inputs in its order.
        fn inputs<'a>(
            &'a self,
            h: &'a Array,
            keys: &'a Array,
            values: &'a Array,
        ) -> Vec<&'a Array> {
            let mut inputs = vec![h, keys, values, &self.norms[0]];
            for (j, (w, s, b)) in self.products.iter().enumerate() {
                if j == 2 {
                    inputs.push(&self.norms[1]);
                }
                inputs.extend([w, s, b]);
            }
            inputs.extend(self.norms[2..].iter());
            inputs
        }

        fn product(&self, j: usize, x: &Array) -> Array {
            let (w, s, b) = &self.products[j];
            let f = self.config.formats[j];
            qmm::affine_qmm(x, w, s, b, f.group_size, f.bits, true).unwrap()
        }

        /// Routed experts from MLX ops and afm's gather primitive (`x`:
        /// `[l, DIM]`): the router's softmax, each row's top k by argsort,
        /// their weights renormalised, the experts' gated MLPs, the sum.
        fn experts(&self, x: &Array) -> Array {
            let l = x.dim(0);
            let probs = softmax_axis(self.product(2, x), -1, true).unwrap();
            let chosen = argsort_axis(probs.negative().unwrap(), -1)
                .unwrap()
                .index((.., ..TOP_K));
            let scores = probs.take_along_axis(&chosen, -1).unwrap();
            let scores = scores.divide(sum_axis(&scores, -1, true).unwrap()).unwrap();
            let gather = |j: usize, x: &Array, chosen: &Array| {
                let (w, s, b) = &self.products[j];
                let f = self.config.formats[j];
                qmm::gather_affine_qmm(x, w, s, b, chosen, f.group_size, f.bits, true).unwrap()
            };
            let gate = gather(3, x, &chosen);
            let up = gather(4, x, &chosen);
            let act = glu::gated(&gate, &up, Act::Silu)
                .unwrap()
                .reshape(&[l * TOP_K, EXPERT_HIDDEN])
                .unwrap();
            let down = gather(5, &act, &chosen.reshape(&[l * TOP_K, 1]).unwrap())
                .reshape(&[l, TOP_K, DIM])
                .unwrap();
            let weighted = down
                .multiply(expand_dims_axes(&scores, &[-1]).unwrap())
                .unwrap();
            sum_axis(&weighted, 1, false).unwrap()
        }

        /// The same layer from MLX ops and afm's single-step primitives, one
        /// item of `l` rows (`h`: `[l, DIM]`) at `offset` in `slot`; the
        /// store is updated as the primitive would.
        fn reference(
            &self,
            h: &Array,
            store: &mut (Array, Array),
            slot: i32,
            offset: i32,
        ) -> Array {
            let c = &self.config;
            let l = h.dim(0);
            let (hd, d) = ((HEADS * D) as i32, D as i32);
            let x = rms_norm(h, Some(&self.norms[0]), EPS).unwrap();
            let qkv = self.product(0, &x);
            let heads = |from: i32, n: usize| {
                qkv.index((.., from..from + n as i32 * d))
                    .reshape(&[1, l, n as i32, d])
                    .unwrap()
                    .transpose_axes(&[0, 2, 1, 3])
                    .unwrap()
            };
            let (mut q, mut k) = (heads(0, HEADS), heads(hd, KV_HEADS));
            let v = heads(hd + KV_HEADS as i32 * d, KV_HEADS);
            if let Some(eps) = c.qk_norm {
                q = rms_norm(&q, Some(&self.norms[2]), eps).unwrap();
                k = rms_norm(&k, Some(&self.norms[3]), eps).unwrap();
            }
            let rotate = |a: &Array| {
                let dims = c.rope_dims as i32;
                rope(
                    a,
                    dims,
                    false,
                    Some(c.rope_base),
                    1.0,
                    offset,
                    None::<&Array>,
                )
                .unwrap()
            };
            let (q, k) = (rotate(&q), rotate(&k));
            let at = || (slot..slot + 1, .., offset..offset + l, ..);
            store.0.try_index_mut(at(), &k).unwrap();
            store.1.try_index_mut(at(), &v).unwrap();
            let o = attention::attend(
                &q,
                &store.0,
                &store.1,
                &[slot],
                &[offset],
                c.window,
                c.scale,
            )
            .unwrap()
            .reshape(&[l, hd])
            .unwrap();
            let o = match c.output_gate {
                true => {
                    let from = hd + 2 * KV_HEADS as i32 * d;
                    let gate = qkv.index((.., from..from + hd));
                    o.multiply(mlx_rs::ops::sigmoid(&gate).unwrap()).unwrap()
                }
                false => o,
            };
            let mut o = self.product(1, &o);
            if c.attn_out_norm {
                o = rms_norm(&o, Some(&self.norms[4]), EPS).unwrap();
            }
            let h = h.add(&o).unwrap();
            let x = rms_norm(&h, Some(&self.norms[1]), EPS).unwrap();
            let mut down = match c.routed {
                Some(_) => self.experts(&x),
                None => {
                    let gu = self.product(2, &x);
                    let (gate, up) = (gu.index((.., ..HIDDEN)), gu.index((.., HIDDEN..)));
                    self.product(3, &glu::gated(&gate, &up, c.act).unwrap())
                }
            };
            if c.ffn_out_norm {
                down = rms_norm(&down, Some(&self.norms[5]), EPS).unwrap();
            }
            h.add(&down).unwrap()
        }
    }

    /// A store with earlier positions filled (so attention reads them).
    fn store() -> (Array, Array) {
        let shape = [SLOTS, KV_HEADS as i32, CAP, D as i32];
        (uniform(&shape, 1.0, 30), uniform(&shape, 1.0, 31))
    }

    /// A decode group of three (slots out of order), a prefill chunk of
    /// five, and a pass mixing the two, every layer form (llama's; Gemma's
    /// norms, GELU and window; routed experts), against the layer built
    /// from MLX ops: the hidden rows and the store agree to f32 rounding.
    #[test]
    fn matches_the_layer_built_from_mlx_ops() {
        assert!(path().is_primitive(), "{}", path());
        for kind in KINDS {
            let layer = Layer::new(kind);
            let cases = [
                Rows {
                    slots: vec![2, 0, 3],
                    offsets: vec![5, 1, 9],
                    lens: vec![1, 1, 1],
                },
                Rows {
                    slots: vec![1],
                    offsets: vec![3],
                    lens: vec![5],
                },
                // A mixed pass: decoding rows around a chunk.
                Rows {
                    slots: vec![2, 1, 0],
                    offsets: vec![5, 3, 1],
                    lens: vec![1, 5, 1],
                },
            ];
            for rows in cases {
                let n: i32 = rows.lens.iter().sum();
                let h = uniform(&[1, n, DIM], 1.0, 40);
                let (keys, values) = store();
                let (got, got_k, got_v) = layer.run(&h, keys, values, &rows);
                let mut want_store = store();
                let (mut want, mut r) = (Vec::new(), 0);
                for (i, (&slot, &offset)) in rows.slots.iter().zip(&rows.offsets).enumerate() {
                    let hi = h.index((0, r..r + rows.lens[i], ..));
                    want.push(layer.reference(&hi, &mut want_store, slot, offset));
                    r += rows.lens[i];
                }
                let want = concatenate(&want, 0)
                    .unwrap()
                    .reshape(&[1, n, DIM])
                    .unwrap();
                let scale = want.abs().unwrap().max(None).unwrap().item_exact::<f32>();
                let what = format!("{kind:?}, {rows:?}");
                let d = max_diff(&got, &want);
                assert!(d <= 1e-5 * scale, "{what}: hidden rows differ by {d}");
                assert!(max_diff(&got_k, &want_store.0) <= 1e-5, "{what}: keys");
                assert_eq!(max_diff(&got_v, &want_store.1), 0.0, "{what}: values");
            }
        }
    }

    /// Each row of a decode group is bit for bit what it gives alone, its
    /// keys and values too: no row reads a batch neighbour.
    #[test]
    fn a_row_is_what_it_gives_alone() {
        for kind in KINDS {
            let layer = Layer::new(kind);
            let rows = Rows {
                slots: vec![2, 0, 3],
                offsets: vec![5, 1, 9],
                lens: vec![1, 1, 1],
            };
            let h = uniform(&[1, 3, DIM], 1.0, 41);
            let (keys, values) = store();
            let (all, all_k, all_v) = layer.run(&h, keys, values, &rows);
            for i in 0..3 {
                let alone = Rows {
                    slots: vec![rows.slots[i]],
                    offsets: vec![rows.offsets[i]],
                    lens: vec![1],
                };
                let (keys, values) = store();
                let row = |a: &Array| a.index((.., i as i32..i as i32 + 1, ..));
                let (one, one_k, one_v) = layer.run(&row(&h), keys, values, &alone);
                let what = format!("{kind:?}, row {i}");
                assert_eq!(max_diff(&row(&all), &one), 0.0, "{what}: hidden row");
                let s = rows.slots[i];
                let slot = |a: &Array| a.index(s..s + 1);
                assert_eq!(max_diff(&slot(&all_k), &slot(&one_k)), 0.0, "{what}: keys");
                assert_eq!(
                    max_diff(&slot(&all_v), &slot(&one_v)),
                    0.0,
                    "{what}: values"
                );
            }
        }
    }

    /// The store is written where it lies when nothing else holds it, and
    /// copied first when something does (that holder keeps what it saw);
    /// a store still to be computed is computed first, whichever output is
    /// evaluated.
    #[test]
    fn the_store_is_updated_in_place_only_when_no_one_else_holds_it() {
        let layer = Layer::new(Kind::Llama);
        let rows = Rows {
            slots: vec![1],
            offsets: vec![2],
            lens: vec![1],
        };
        let h = uniform(&[1, 1, DIM], 1.0, 42);
        let (keys, values) = store();
        let before = keys.as_slice::<f32>().as_ptr();
        let (_, new_keys, _) = layer.run(&h, keys, values, &rows);
        assert_eq!(new_keys.as_slice::<f32>().as_ptr(), before, "not in place");

        // A holder (a prefix snapshot, say) keeps the store: it is copied.
        let (keys, values) = store();
        let held = keys.clone();
        let (_, new_keys, _) = layer.run(&h, keys, values, &rows);
        assert_ne!(
            new_keys.as_slice::<f32>().as_ptr(),
            held.as_slice::<f32>().as_ptr()
        );
        assert_eq!(max_diff(&held, &store().0), 0.0, "the held store changed");
        assert!(max_diff(&new_keys, &held) > 0.0, "the new row is missing");

        // A store not yet computed (just grown, or a prefix just restored),
        // evaluated through the keys alone: it is still computed first.
        let (keys, values) = store();
        let lazy = |a: &Array| a.multiply(Array::from_f32(1.0)).unwrap();
        let (lazy_k, lazy_v) = (lazy(&keys), lazy(&values));
        let inputs = layer.inputs(&h, &lazy_k, &lazy_v);
        let (_, got_k, _) = decoder_layer(&inputs, &layer.config, &rows, 0).unwrap();
        drop(inputs);
        drop((lazy_k, lazy_v));
        got_k.eval().unwrap();
        let (_, want_k, _) = layer.run(&h, keys, values, &rows);
        assert_eq!(max_diff(&got_k, &want_k), 0.0, "a lazy store");
    }

    /// Inputs the op cannot take are an error naming what is wrong, not a
    /// crash: a missing input, a slot outside the store, a position past
    /// its capacity.
    #[test]
    fn a_bad_call_is_an_error_naming_it() {
        let layer = Layer::new(Kind::Llama);
        let h = uniform(&[1, 1, DIM], 1.0, 43);
        let (keys, values) = store();
        let inputs = layer.inputs(&h, &keys, &values);
        let rows = |slot, offset| Rows {
            slots: vec![slot],
            offsets: vec![offset],
            lens: vec![1],
        };
        let err = |inputs: &[&Array], rows: &Rows| {
            decoder_layer(inputs, &layer.config, rows, 0)
                .map(|_| ())
                .expect_err("refused")
                .to_string()
        };
        assert!(err(&inputs[..inputs.len() - 1], &rows(0, 0)).contains("number of inputs"));
        assert!(err(&inputs, &rows(SLOTS, 0)).contains("outside the KV store"));
        assert!(err(&inputs, &rows(0, CAP)).contains("past the store's capacity"));

        // Gemma 4's inputs after the norms, each checked for its size.
        let mut config = layer.config.clone();
        config.gemma4.rope_freqs = true;
        config.gemma4.layer_scalar = true;
        let freqs = Array::from_slice(&[1.0f32; D / 2], &[(D / 2) as i32]);
        let (one, two) = (
            Array::from_slice(&[1.0f32], &[1]),
            Array::from_slice(&[1.0f32, 2.0], &[2]),
        );
        let with = |tail: &[&Array]| {
            let mut all = inputs.clone();
            all.extend(tail);
            decoder_layer(&all, &config, &rows(0, 0), 0).map(|_| ())
        };
        let refused = |tail: &[&Array]| with(tail).expect_err("refused").to_string();
        assert!(refused(&[&one, &one]).contains("RoPE's wavelengths"));
        assert!(refused(&[&freqs, &two]).contains("layer scalar must be one value"));
        with(&[&freqs, &one]).expect("the right sizes are taken");
    }
}
