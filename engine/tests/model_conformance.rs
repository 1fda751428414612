//! Every architecture through the conformance runner, on random small
//! weights built here (no model file needed).

use std::collections::HashMap;

use afm_engine::loading::{HyperParams, ModelConfig, TensorMap, WeightMode};
use afm_engine::models::{registry, CausalLm};
use afm_engine::EngineError;
use mlx_rs::Array;

use crate::conformance::{batch_invariant_mode, default_mode, scripts};

const VOCAB: usize = 96;

fn llama_config() -> ModelConfig {
    ModelConfig {
        architecture: "llama".into(),
        vocab_size: VOCAB,
        hidden_size: 256,
        intermediate_size: 768,
        num_layers: 2,
        num_heads: 4,
        num_kv_heads: 2,
        head_dim: 64,
        rms_norm_eps: 1e-5,
        rope_theta: 10_000.0,
        rope_traditional: false,
        max_position_embeddings: 512,
        tie_word_embeddings: false,
    }
}

/// Random weights under HF names: matrices with entries of variance
/// 1/cols (uniform), so activations stay O(1) through the layers; norm
/// weights near 1. Drawn on the host from a seeded generator, so every run
/// builds the same model.
struct Weights {
    rng: rand_chacha::ChaCha8Rng,
    tensors: HashMap<String, Array>,
}

impl Weights {
    fn new(seed: u64) -> Self {
        Weights {
            rng: rand_core::SeedableRng::seed_from_u64(seed),
            tensors: HashMap::new(),
        }
    }

    /// `n` values uniform in `center ± half`.
    fn uniform(&mut self, n: usize, center: f32, half: f32) -> Vec<f32> {
        use rand_core::RngCore;
        (0..n)
            .map(|_| {
                let unit = (self.rng.next_u32() >> 8) as f32 / (1u32 << 24) as f32;
                center + half * (2.0 * unit - 1.0)
            })
            .collect()
    }

    fn matrix(&mut self, name: &str, rows: usize, cols: usize) {
        // Uniform(-a, a) has variance a^2 / 3.
        let half = (3.0 / cols as f32).sqrt();
        let values = self.uniform(rows * cols, 0.0, half);
        let w = Array::from_slice(&values, &[rows as i32, cols as i32]);
        self.tensors.insert(format!("{name}.weight"), w);
    }

    fn norm(&mut self, name: &str, dim: usize) {
        let values = self.uniform(dim, 1.0, 0.2);
        self.tensors
            .insert(name.to_string(), Array::from_slice(&values, &[dim as i32]));
    }

    fn into_map(self) -> TensorMap {
        TensorMap::from_tensors(self.tensors, 64, WeightMode::Dequantize)
    }

    /// Every matrix MLX-quantized (`bits`, groups of 64, f16 scales as
    /// checkpoints have them), loaded as the CPU loads quantized models:
    /// packed, multiplied by afm's primitive.
    fn into_packed_map(self, bits: i32) -> TensorMap {
        let mut tensors = HashMap::new();
        for (name, t) in self.tensors {
            match name.strip_suffix(".weight") {
                Some(stem) if t.ndim() == 2 => {
                    let (q, s, b) = mlx_rs::ops::quantize(&t, 64, bits).unwrap();
                    let half = |a: Array| a.as_dtype(mlx_rs::Dtype::Float16).unwrap();
                    tensors.insert(format!("{stem}.weight"), q);
                    tensors.insert(format!("{stem}.scales"), half(s));
                    tensors.insert(format!("{stem}.biases"), half(b));
                }
                _ => {
                    tensors.insert(name, t);
                }
            }
        }
        TensorMap::from_tensors(tensors, 64, WeightMode::PackedForCpu)
    }
}

fn llama_weights(c: &ModelConfig, seed: u64) -> TensorMap {
    let mut w = Weights::new(seed);
    llama_tensors(&mut w, c);
    w.into_map()
}

/// The tensors of a llama checkpoint (the base other architectures add to).
fn llama_tensors(w: &mut Weights, c: &ModelConfig) {
    let (d, q, kv) = (
        c.hidden_size,
        c.num_heads * c.head_dim,
        c.num_kv_heads * c.head_dim,
    );
    w.matrix("model.embed_tokens", c.vocab_size, d);
    for i in 0..c.num_layers {
        let p = format!("model.layers.{i}");
        w.norm(&format!("{p}.input_layernorm.weight"), d);
        w.matrix(&format!("{p}.self_attn.q_proj"), q, d);
        w.matrix(&format!("{p}.self_attn.k_proj"), kv, d);
        w.matrix(&format!("{p}.self_attn.v_proj"), kv, d);
        w.matrix(&format!("{p}.self_attn.o_proj"), d, q);
        w.norm(&format!("{p}.post_attention_layernorm.weight"), d);
        w.matrix(&format!("{p}.mlp.gate_proj"), c.intermediate_size, d);
        w.matrix(&format!("{p}.mlp.up_proj"), c.intermediate_size, d);
        w.matrix(&format!("{p}.mlp.down_proj"), d, c.intermediate_size);
    }
    w.norm("model.norm.weight", d);
    w.matrix("lm_head", c.vocab_size, d);
}

/// 32 scripts of mixed prompt lengths: a batch as full as the runner's
/// largest.
fn batch_of_32() -> Vec<crate::conformance::Script> {
    let lens: Vec<usize> = [11, 4, 9, 6, 13, 2, 8, 5]
        .iter()
        .cycle()
        .take(32)
        .copied()
        .collect();
    scripts(VOCAB as u32, &lens, 4)
}

fn load(config: ModelConfig, weights: &TensorMap) -> Box<dyn CausalLm> {
    registry::load(config, &HyperParams::default(), weights).unwrap()
}

#[test]
fn llama_conforms_in_the_default_mode() {
    let config = llama_config();
    let model = load(config.clone(), &llama_weights(&config, 1));
    default_mode(model.as_ref(), &scripts(VOCAB as u32, &[7, 12, 3, 9], 4));
}

#[test]
fn llama_conforms_in_batch_invariant_mode() {
    let config = llama_config();
    let mut model = load(config.clone(), &llama_weights(&config, 2));
    model.set_batch_invariant(true).unwrap();
    batch_invariant_mode(model.as_ref(), &batch_of_32(), 64);
}

/// Quantized weights kept packed and multiplied by afm's CPU primitive
/// (4- and 8-bit): both modes' properties hold. In batch-invariant mode the
/// projections skip the fixed-shape row blocks (the primitive's rows are
/// independent by construction), so this is what proves that claim.
#[test]
fn llama_with_packed_quantized_weights_conforms_in_both_modes() {
    // Under `AFM_KERNELS=mlx` the primitive is off by choice.
    if afm_engine::cpu::kernels::chosen() == afm_engine::cpu::kernels::Kernels::Mlx {
        return;
    }
    assert!(
        afm_engine::cpu::qmm::path().is_primitive(),
        "afm's CPU quantized matmul is unavailable: {}",
        afm_engine::cpu::qmm::path()
    );
    let config = llama_config();
    for bits in [4, 8] {
        let packed = || {
            let mut w = Weights::new(10 + bits as u64);
            llama_tensors(&mut w, &config);
            w.into_packed_map(bits)
        };
        let weights = packed();
        assert!(
            matches!(
                weights.linear("model.layers.0.mlp.down_proj").unwrap(),
                afm_engine::layers::Linear::Quantized(_)
            ),
            "{bits}-bit matrices stay packed"
        );
        let model = load(config.clone(), &weights);
        default_mode(model.as_ref(), &scripts(VOCAB as u32, &[7, 12, 3, 9], 4));

        let mut model = load(config.clone(), &packed());
        model.set_batch_invariant(true).unwrap();
        batch_invariant_mode(model.as_ref(), &batch_of_32(), 64);
    }
}

/// Interleaved ("traditional") RoPE, as GGUF llama files run: the same
/// properties hold.
#[test]
fn llama_with_interleaved_rope_conforms() {
    let config = ModelConfig {
        rope_traditional: true,
        ..llama_config()
    };
    let model = load(config.clone(), &llama_weights(&config, 3));
    default_mode(model.as_ref(), &scripts(VOCAB as u32, &[5, 10, 8], 3));
}

/// Gemma 3 with a sliding window of 4 (layer 0; layer 1 global) on prompts
/// of up to 13 tokens: the decode group's window masks (chunks of 1 put
/// every prompt token through it) must give what the prefill chunk's own
/// window mask gives on the whole prompt, batched and from a cached prefix
/// too; and the same bit for bit in batch-invariant mode.
#[test]
fn gemma3_with_a_sliding_window_conforms() {
    let config = ModelConfig {
        architecture: "gemma3_text".into(),
        ..llama_config()
    };
    let mut hyper = HyperParams::default();
    hyper.values.insert("sliding_window".into(), 4.into());
    hyper.values.insert(
        "layer_types".into(),
        serde_json::json!(["sliding_attention", "full_attention"]),
    );
    let weights = || {
        let mut w = Weights::new(6);
        let head = config.head_dim;
        for i in 0..config.num_layers {
            let p = format!("model.layers.{i}");
            w.norm(&format!("{p}.self_attn.q_norm.weight"), head);
            w.norm(&format!("{p}.self_attn.k_norm.weight"), head);
            w.norm(
                &format!("{p}.pre_feedforward_layernorm.weight"),
                config.hidden_size,
            );
            w.norm(
                &format!("{p}.post_feedforward_layernorm.weight"),
                config.hidden_size,
            );
        }
        llama_tensors(&mut w, &config);
        w.into_map()
    };
    let model = registry::load(config.clone(), &hyper, &weights()).unwrap();
    default_mode(model.as_ref(), &scripts(VOCAB as u32, &[7, 12, 3, 9], 4));
    let mut model = registry::load(config.clone(), &hyper, &weights()).unwrap();
    model.set_batch_invariant(true).unwrap();
    let lens = [11, 4, 9, 6, 13, 2, 8, 5];
    batch_invariant_mode(model.as_ref(), &scripts(VOCAB as u32, &lens, 4), 64);
}

/// An LM head whose rows are not the vocabulary is refused at load: the
/// engine reads logits rows with the vocabulary's stride.
#[test]
fn a_head_that_is_not_the_vocabulary_is_refused() {
    let config = llama_config();
    let weights = llama_weights(&config, 4);
    let wrong = ModelConfig {
        vocab_size: VOCAB - 1,
        ..config
    };
    let err = registry::load(wrong, &HyperParams::default(), &weights)
        .err()
        .expect("a mismatched head must not load");
    assert!(
        matches!(&err, EngineError::InvalidModel { reason, .. } if reason.contains("96 rows") && reason.contains("95")),
        "{err}"
    );
}

/// An architecture name no entry spells is named with the supported ones.
#[test]
fn an_unknown_architecture_names_the_supported_ones() {
    let config = ModelConfig {
        architecture: "mamba".into(),
        ..llama_config()
    };
    let err = registry::load(
        config,
        &HyperParams::default(),
        &llama_weights(&llama_config(), 5),
    )
    .err()
    .expect("unknown architecture");
    assert!(
        err.to_string().contains("'mamba'") && err.to_string().contains("llama"),
        "{err}"
    );
}
