//! Qwen3, Qwen3-MoE, the hybrid Qwen3-Next and Qwen3.5 (dense and MoE;
//! MLX and HF layouts; 4-bit with 8-bit routers) and Gemma 3 (text, and a
//! multimodal checkpoint's text part) against mlx-lm: small random-weight
//! folders (fixtures/models/random, made by its make.py with mlx-lm) give
//! the same logits (within [`TOLERANCE`]) and the same 32 greedy ids as
//! mlx-lm does; and every one passes the conformance runner.

use std::path::PathBuf;

use afm_engine::cpu::qmm;
use afm_engine::loading::{convert, ExportDtype, ModelSource, WeightMode};
use afm_engine::models::registry;
use afm_engine::runtime::argmax;
use afm_engine::LoadedModel;
use serde_json::Value;

use crate::conformance::{batch_invariant_mode, default_mode, scripts};

/// Largest |difference| of a logit accepted against mlx-lm (both f32 on
/// the same MLX; the order of some reductions differs).
const TOLERANCE: f32 = 1e-4;

fn folder(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../fixtures/models/random")
        .join(name)
}

fn load(name: &str) -> (LoadedModel, Value) {
    let dir = folder(name);
    let model = LoadedModel::load(dir.to_str().unwrap()).unwrap_or_else(|e| panic!("{name}: {e}"));
    let reference: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("reference.json")).unwrap())
            .unwrap();
    (model, reference)
}

fn ids(v: &Value) -> Vec<u32> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap() as u32)
        .collect()
}

/// The prompt's last logits and 32 greedy ids, decoded one token per step.
fn agrees_with_mlx_lm(name: &str) {
    let (loaded, reference) = load(name);
    agrees(name, &loaded, &reference);
}

fn agrees(name: &str, loaded: &LoadedModel, reference: &Value) {
    let model = loaded.model.as_ref();
    let prompt = ids(&reference["prompt"]);
    let mut cache = model.new_cache();
    let logits = model.forward(&prompt, &mut cache).unwrap();
    let logits = logits.as_slice::<f32>().to_vec();
    let expected: Vec<f32> = reference["last_logits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap() as f32)
        .collect();
    assert_eq!(logits.len(), expected.len(), "{name}: vocabulary");
    let diff = logits
        .iter()
        .zip(&expected)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0f32, f32::max);
    eprintln!("{name}: max |logit - mlx-lm| = {diff:e}");
    assert!(
        diff <= TOLERANCE,
        "{name}: logits differ from mlx-lm by {diff}"
    );

    let want = ids(&reference["greedy"]);
    let mut got = Vec::new();
    let mut next = argmax(&logits);
    for _ in 0..want.len() {
        got.push(next);
        let step = model.forward(&[next], &mut cache).unwrap();
        next = argmax(step.as_slice::<f32>());
    }
    assert_eq!(got, want, "{name}: greedy ids differ from mlx-lm");
}

fn conforms(name: &str, batch_invariant: bool) {
    let (mut loaded, _) = load(name);
    let vocab = loaded.model.config().vocab_size as u32;
    // Prompts longer than Gemma's window of 6, so windows are crossed
    // in prefill chunks, in decoding and from a cached prefix.
    default_mode(loaded.model.as_ref(), &scripts(vocab, &[9, 14, 3, 11], 6));
    let invariant = loaded.model.set_batch_invariant(true);
    if batch_invariant {
        invariant.unwrap();
        // 32 sequences: the target alone and in slots of batches of 8, 16,
        // 24 and 32.
        let lens: Vec<usize> = (0..32).map(|i| 2 + (i * 7) % 14).collect();
        batch_invariant_mode(loaded.model.as_ref(), &scripts(vocab, &lens, 4), 64);
    } else {
        let err = invariant.expect_err("batch invariance must be refused");
        assert!(err.to_string().contains("--deterministic"), "{err}");
    }
}

/// `afm-serve convert` writes the folder again (every hyper-parameter the
/// architecture reads included); it loads as the same network.
fn round_trips_through_convert(name: &str) {
    let (original, reference) = load(name);
    let out = std::env::temp_dir().join(format!("afm-convert-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    convert(
        folder(name).to_str().unwrap(),
        &out,
        ExportDtype::F32,
        registry::family,
    )
    .unwrap();
    let copy = LoadedModel::load(out.to_str().unwrap()).unwrap();
    assert_eq!(
        copy.model.config(),
        original.model.config(),
        "{name}: config"
    );
    assert_eq!(
        copy.model.kv_layout(),
        original.model.kv_layout(),
        "{name}: KV layout"
    );
    let prompt = ids(&reference["prompt"]);
    let logits = |m: &LoadedModel| {
        let mut cache = m.model.new_cache();
        m.model
            .forward(&prompt, &mut cache)
            .unwrap()
            .as_slice::<f32>()
            .to_vec()
    };
    assert_eq!(
        logits(&copy),
        logits(&original),
        "{name}: logits after convert"
    );
    std::fs::remove_dir_all(&out).unwrap();
}

#[test]
fn every_architecture_round_trips_through_convert() {
    for name in ["qwen3", "qwen3_moe", "gemma3_text", "gemma3"] {
        round_trips_through_convert(name);
    }
}

#[test]
fn qwen3_agrees_with_mlx_lm() {
    agrees_with_mlx_lm("qwen3");
}

#[test]
fn qwen3_moe_agrees_with_mlx_lm() {
    agrees_with_mlx_lm("qwen3_moe");
}

/// Quantized by mlx-lm (4 bits, routers at 8): on the CPU every layer,
/// routed or dense, is afm's whole-layer primitive.
#[test]
fn qwen3_moe_4bit_agrees_with_mlx_lm() {
    agrees_in_every_weight_mode("qwen3_moe_4bit");
}

#[test]
fn gemma3_agrees_with_mlx_lm() {
    agrees_with_mlx_lm("gemma3_text");
}

/// Gemma 3's multimodal layout (`model_type: gemma3`, settings in
/// `text_config`, tensors under `language_model`): its text model.
#[test]
fn gemma3_multimodal_text_part_agrees_with_mlx_lm() {
    agrees_with_mlx_lm("gemma3");
}

#[test]
fn qwen3_conforms() {
    conforms("qwen3", true);
}

/// Routed experts: batched == alone holds, and on the CPU (experts through
/// `gather_mm`, one product per row) batch invariance too.
#[test]
fn qwen3_moe_conforms() {
    conforms("qwen3_moe", true);
}

/// Packed experts inside the layer primitive: batched == alone, and
/// batch-invariant where the primitive runs them.
#[test]
fn qwen3_moe_4bit_conforms() {
    conforms("qwen3_moe_4bit", qmm::path().is_primitive());
}

#[test]
fn gemma3_conforms() {
    conforms("gemma3_text", true);
}

#[test]
fn qwen3_next_agrees_with_mlx_lm() {
    agrees_with_mlx_lm("qwen3_next");
}

/// The same weights in the HF layout: zero-centred norms, the
/// convolution as `[channels, 1, kernel]`, experts one by one, an `mtp.`
/// tensor to drop.
#[test]
fn qwen3_next_hf_layout_agrees_with_mlx_lm() {
    agrees_with_mlx_lm("qwen3_next_hf");
}

/// Qwen3.5 dense in its multimodal MLX layout (`text_config`,
/// `language_model.*`, `rope_parameters` with partial RoPE).
#[test]
fn qwen3_5_agrees_with_mlx_lm() {
    agrees_with_mlx_lm("qwen3_5");
}

/// Qwen3.5-MoE in the HF layout (`model.language_model.*`, fused
/// `experts.gate_up_proj`, zero-centred norms).
#[test]
fn qwen3_5_moe_agrees_with_mlx_lm() {
    agrees_with_mlx_lm("qwen3_5_moe");
}

/// Quantized by mlx-lm: 4-bit in groups of 32, the router and the shared
/// expert's gate 8-bit in groups of 64 (per-module settings in config.json).
/// As the platform loads it (on the CPU: packed, the experts through afm's
/// gather primitive), dequantized at load, and kept quantized as on Metal
/// (every projection through `quantized_matmul` or the primitive, the
/// experts through one gather each).
/// Quantized by mlx-lm (4 bits): on the CPU its gated attention layers
/// (output gate, RoPE over a quarter of each head) are afm's whole-layer
/// primitive and its recurrences one op each.
#[test]
fn qwen3_5_4bit_agrees_with_mlx_lm() {
    agrees_in_every_weight_mode("qwen3_5_4bit");
}

#[test]
fn qwen3_5_4bit_conforms() {
    conforms("qwen3_5_4bit", true);
}

#[test]
fn qwen3_5_moe_4bit_agrees_with_mlx_lm() {
    agrees_in_every_weight_mode("qwen3_5_moe_4bit");
}

fn agrees_in_every_weight_mode(name: &str) {
    agrees_with_mlx_lm(name);
    let source = ModelSource::from_path(&folder(name)).unwrap();
    let (_, reference) = load(name);
    for mode in [WeightMode::Dequantize, WeightMode::KeepQuantized] {
        let loaded = LoadedModel::load_source(&source, mode).unwrap();
        agrees(&format!("{name} {mode:?}"), &loaded, &reference);
    }
}

/// Packed experts are batch-invariant where afm's primitive multiplies
/// them (its gather keeps each row's product its own); MLX's `gather_qmm`
/// (Metal, or `AFM_QMM=off`) does not promise it: refused with the reason.
#[test]
fn qwen3_5_moe_4bit_conforms() {
    conforms("qwen3_5_moe_4bit", qmm::path().is_primitive());
}

#[test]
fn gemma4_moe_4bit_conforms() {
    conforms("gemma4_moe_4bit", qmm::path().is_primitive());
}

/// The hybrid stack: ragged batch == alone, chunked == whole (the state
/// carried from chunk to chunk), a prefix hit from a snapshot == cold, and
/// one that must fall back to an earlier snapshot; batch-invariant too.
#[test]
fn qwen3_next_conforms() {
    conforms("qwen3_next", true);
}

#[test]
fn qwen3_5_conforms() {
    conforms("qwen3_5", true);
}

#[test]
fn qwen3_5_moe_conforms() {
    conforms("qwen3_5_moe", true);
}

/// Gemma 4 (text): sliding and full layers with their own head sizes, KV
/// head counts and RoPE (proportional on full layers), K = V on full
/// layers, a weightless v norm, KV-shared last layers, per-layer
/// embeddings, layer scalars, a soft-capped head.
#[test]
fn gemma4_agrees_with_mlx_lm() {
    agrees_with_mlx_lm("gemma4_text");
}

/// Gemma 4's multimodal layout (`text_config`, `language_model.*`).
#[test]
fn gemma4_multimodal_text_part_agrees_with_mlx_lm() {
    agrees_with_mlx_lm("gemma4");
}

/// Gemma 4's MoE (26B-A4B style): a dense GeGLU MLP and routed GeGLU
/// experts side by side, Gemma's router (normed input, softmax over the
/// chosen k, per-expert scale).
#[test]
fn gemma4_moe_agrees_with_mlx_lm() {
    agrees_with_mlx_lm("gemma4_moe");
}

/// That MoE quantized by mlx-lm: 4-bit in groups of 32, each router 8-bit
/// in groups of 64 (per-module settings in config.json), in every weight
/// mode.
#[test]
fn gemma4_moe_4bit_agrees_with_mlx_lm() {
    agrees_in_every_weight_mode("gemma4_moe_4bit");
}

/// Windows crossed in chunks, shared layers reading their owners' KV,
/// a prefix hit == cold; batch-invariant.
#[test]
fn gemma4_conforms() {
    conforms("gemma4_text", true);
}

/// The dense text model quantized by mlx-lm, in every weight mode: its
/// layers run as afm's whole-layer CPU primitive (KV-shared, K = V,
/// proportional RoPE, value norms, the per-layer input and scalar inside
/// the op).
#[test]
fn gemma4_4bit_agrees_with_mlx_lm() {
    agrees_in_every_weight_mode("gemma4_4bit");
}

#[test]
fn gemma4_4bit_conforms() {
    conforms("gemma4_4bit", true);
}

#[test]
fn gemma4_moe_conforms() {
    conforms("gemma4_moe", true);
}

/// KV-shared layers hold no buffers of their own: the prefix cache keeps
/// each owner once.
#[test]
fn gemma4_shared_layers_keep_no_kv_of_their_own() {
    let (loaded, _) = load("gemma4_text");
    let layout = loaded.model.kv_layout();
    let shared: Vec<Option<usize>> = layout.layers.iter().map(|l| l.shares).collect();
    assert_eq!(shared, [None, None, None, None, Some(2), Some(3)]);
    assert_eq!(layout.owners().count(), 4);
}
