//! MLX/HF safetensors folders: a tiny random llama saved twice, once with
//! plain f32 weights and once MLX-quantized (4-bit, group 32, with
//! `quantization` in config.json). The plain weights are the quantized ones
//! dequantized, so both folders must give the same logits; and the
//! quantized folder run with quantized kernels (the Metal path) must agree
//! closely.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use afm_engine::loading::ModelSource;
use afm_engine::loading::WeightMode;
use afm_engine::LoadedModel;
use mlx_rs::ops::{dequantize, quantize};
use mlx_rs::Array;
use rand_chacha::ChaCha8Rng;
use rand_core::{RngCore, SeedableRng};

const VOCAB: i32 = 128;
const HIDDEN: i32 = 64;
const INTER: i32 = 128;
const LAYERS: i32 = 2;
const HEADS: i32 = 4;
const KV_HEADS: i32 = 2;
const HEAD_DIM: i32 = HIDDEN / HEADS;
const GROUP: i32 = 32;
const BITS: i32 = 4;

fn fixture_tokenizer_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fixtures/models/gemma4-style-eos")
}

/// Linear weights by HF name, with their `[out, in]` shapes.
fn linear_shapes() -> Vec<(String, [i32; 2])> {
    let mut v = vec![
        ("model.embed_tokens".to_string(), [VOCAB, HIDDEN]),
        ("lm_head".to_string(), [VOCAB, HIDDEN]),
    ];
    for l in 0..LAYERS {
        let p = format!("model.layers.{l}");
        v.extend([
            (format!("{p}.self_attn.q_proj"), [HEADS * HEAD_DIM, HIDDEN]),
            (
                format!("{p}.self_attn.k_proj"),
                [KV_HEADS * HEAD_DIM, HIDDEN],
            ),
            (
                format!("{p}.self_attn.v_proj"),
                [KV_HEADS * HEAD_DIM, HIDDEN],
            ),
            (format!("{p}.self_attn.o_proj"), [HIDDEN, HEADS * HEAD_DIM]),
            (format!("{p}.mlp.gate_proj"), [INTER, HIDDEN]),
            (format!("{p}.mlp.up_proj"), [INTER, HIDDEN]),
            (format!("{p}.mlp.down_proj"), [HIDDEN, INTER]),
        ]);
    }
    v
}

fn norm_names() -> Vec<String> {
    let mut v = vec!["model.norm.weight".to_string()];
    for l in 0..LAYERS {
        v.push(format!("model.layers.{l}.input_layernorm.weight"));
        v.push(format!("model.layers.{l}.post_attention_layernorm.weight"));
    }
    v
}

fn write_folder(dir: &Path, tensors: &HashMap<String, Array>, quantized: bool) {
    std::fs::create_dir_all(dir).unwrap();
    Array::save_safetensors(tensors, None, dir.join("model.safetensors")).unwrap();
    let mut config = serde_json::json!({
        "model_type": "llama",
        "vocab_size": VOCAB,
        "hidden_size": HIDDEN,
        "intermediate_size": INTER,
        "num_hidden_layers": LAYERS,
        "num_attention_heads": HEADS,
        "num_key_value_heads": KV_HEADS,
        "rms_norm_eps": 1e-5,
        "rope_theta": 10000.0,
        "tie_word_embeddings": false,
        "eos_token_id": [1, 106]
    });
    if quantized {
        config["quantization"] = serde_json::json!({"group_size": GROUP, "bits": BITS});
    }
    std::fs::write(dir.join("config.json"), config.to_string()).unwrap();
    for f in ["tokenizer.json", "tokenizer_config.json"] {
        std::fs::copy(fixture_tokenizer_dir().join(f), dir.join(f)).unwrap();
    }
}

/// Builds both folders; returns (plain, quantized).
fn build_folders(root: &Path) -> (PathBuf, PathBuf) {
    // Host-side random weights: mlx-rs's random ops reference a macOS-only
    // clock and cannot be linked on Linux.
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let mut next = |shape: &[i32], scale: f32| {
        let n = shape.iter().product::<i32>() as usize;
        let values: Vec<f32> = (0..n)
            .map(|_| ((rng.next_u32() as f32 / u32::MAX as f32) * 2.0 - 1.0) * scale)
            .collect();
        Array::from_slice(&values, shape)
    };
    let (mut plain, mut quant) = (HashMap::new(), HashMap::new());
    for (name, shape) in linear_shapes() {
        let w = next(&shape, 0.2);
        let (q, scales, biases) = quantize(&w, GROUP, BITS).unwrap();
        let deq = dequantize(&q, &scales, &biases, GROUP, BITS).unwrap();
        plain.insert(format!("{name}.weight"), deq);
        quant.insert(format!("{name}.weight"), q);
        quant.insert(format!("{name}.scales"), scales);
        quant.insert(format!("{name}.biases"), biases);
    }
    for name in norm_names() {
        let w = next(&[HIDDEN], 0.1).add(Array::from_f32(1.0)).unwrap();
        plain.insert(name.clone(), w.clone());
        quant.insert(name, w);
    }
    let (a, b) = (root.join("plain"), root.join("quantized"));
    write_folder(&a, &plain, false);
    write_folder(&b, &quant, true);
    (a, b)
}

fn logits(dir: &Path, mode: WeightMode, tokens: &[u32]) -> Vec<f32> {
    let source = ModelSource::from_path(dir).unwrap();
    assert_eq!(source, ModelSource::SafetensorsDir(dir.to_path_buf()));
    let model = LoadedModel::load_source(&source, mode).unwrap();
    assert_eq!(model.eos.ids().collect::<Vec<_>>(), vec![1, 106]);
    let mut cache = model.model.new_cache();
    // Prefill all but the last token, then one decode step: covers both paths.
    model
        .model
        .forward(&tokens[..tokens.len() - 1], &mut cache)
        .unwrap();
    let out = model
        .model
        .forward(&tokens[tokens.len() - 1..], &mut cache)
        .unwrap();
    out.as_slice::<f32>().to_vec()
}

fn max_abs_diff(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

#[test]
fn plain_and_mlx_quantized_folders_agree() {
    let root = std::env::temp_dir().join(format!("afm-st-{}", std::process::id()));
    let (plain, quant) = build_folders(&root);
    let tokens = [5, 9, 17, 33, 64, 100];

    let a = logits(&plain, WeightMode::Dequantize, &tokens);
    assert_eq!(a.len(), VOCAB as usize);
    assert!(a.iter().all(|x| x.is_finite()));
    let spread =
        a.iter().copied().fold(f32::MIN, f32::max) - a.iter().copied().fold(f32::MAX, f32::min);
    assert!(spread > 0.1, "logits should not be flat: spread {spread}");

    let b = logits(&quant, WeightMode::Dequantize, &tokens);
    assert!(
        max_abs_diff(&a, &b) < 1e-4,
        "dequantized at load: {}",
        max_abs_diff(&a, &b)
    );

    let c = logits(&quant, WeightMode::KeepQuantized, &tokens);
    assert!(
        max_abs_diff(&a, &c) < 1e-2,
        "quantized kernels: {}",
        max_abs_diff(&a, &c)
    );

    std::fs::remove_dir_all(root).unwrap();
}
