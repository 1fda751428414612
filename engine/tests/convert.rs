//! `convert`: the bundled GGUF exported as an MLX/HF folder, in f32 and with
//! its quantized tensors kept, loads back into afm with the same config, EOS
//! set and chat template, and greedy generation gives the same tokens as the
//! GGUF. The GGUF runs interleaved RoPE on permuted q/k rows, the folder
//! rotate-half RoPE on HF rows, so equal tokens also check the un-permuting.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use afm_engine::loading::TemplateInput;
use afm_engine::loading::{convert, ExportDtype};
use afm_engine::loading::{ModelConfig, QuantizationConfig};
use afm_engine::models::registry;
use afm_engine::{generate, EngineError, GenerationSettings, LoadedModel};
use mlx_rs::{Array, Dtype};
use serde_json::Value;

/// What the GGUF model gives, computed once for all tests.
struct Reference {
    config: ModelConfig,
    eos: Vec<u32>,
    template: String,
    prompt: Vec<u32>,
    greedy: Vec<u32>,
    /// Next-token logits after the prompt.
    logits: Vec<f32>,
}

fn reference() -> &'static Reference {
    static REF: OnceLock<Reference> = OnceLock::new();
    REF.get_or_init(|| {
        let model = LoadedModel::load("smollm2").expect("run scripts/setup.sh first");
        let (prompt, greedy) = prompt_and_greedy(&model);
        let logits = prompt_logits(&model, &prompt);
        Reference {
            config: model.model.config().clone(),
            eos: model.eos.ids().collect(),
            template: model.template.source().to_string(),
            prompt,
            greedy,
            logits,
        }
    })
}

fn prompt_logits(model: &LoadedModel, prompt: &[u32]) -> Vec<f32> {
    let mut cache = model.model.new_cache();
    let logits = model.model.forward(prompt, &mut cache).unwrap();
    logits.as_type::<f32>().unwrap().as_slice::<f32>().to_vec()
}

fn prompt_and_greedy(model: &LoadedModel) -> (Vec<u32>, Vec<u32>) {
    let prompt = model
        .prompt_tokens(&TemplateInput {
            messages: vec![
                serde_json::json!({"role": "user", "content": "What is the capital of France?"}),
            ],
            add_generation_prompt: true,
            ..Default::default()
        })
        .unwrap();
    let params = GenerationSettings {
        max_tokens: 12,
        ..Default::default()
    };
    let out = generate(
        model.model.as_ref(),
        &model.tokenizer,
        &model.eos,
        &prompt,
        &params,
        |_| {},
    )
    .unwrap();
    (prompt, out.tokens)
}

/// A fresh path under the temp dir (not created).
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("afm-convert-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

fn read_json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// Converts the bundled model with `dtype` and checks the folder; returns it.
fn export_and_check(dtype: ExportDtype) -> PathBuf {
    let reference = reference();
    let out = scratch(dtype.name());
    let report = convert("smollm2", &out, dtype, registry::family).unwrap();
    let names: Vec<&str> = report.files.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "model.safetensors",
            "config.json",
            "tokenizer.json",
            "tokenizer_config.json",
            "generation_config.json"
        ]
    );
    assert!(report.rope_unpermuted, "GGUF q/k rows must be put back");
    assert!(report.skipped.is_empty(), "{:?}", report.skipped);

    // config.json round-trips, with HF's RoPE layout.
    let config = ModelConfig::from_config_json(&out.join("config.json")).unwrap();
    assert_eq!(
        config,
        ModelConfig {
            rope_traditional: false,
            ..reference.config.clone()
        }
    );
    let raw = read_json(&out.join("config.json"));
    assert_eq!(raw["model_type"], "llama");
    assert_eq!(raw["architectures"][0], "LlamaForCausalLM");
    assert_eq!(raw["rms_norm_eps"].as_f64(), Some(1e-5));

    let generation = read_json(&out.join("generation_config.json"));
    let eos: Vec<u32> = serde_json::from_value(generation["eos_token_id"].clone()).unwrap();
    assert_eq!(eos, reference.eos);
    let tok_cfg = read_json(&out.join("tokenizer_config.json"));
    assert_eq!(tok_cfg["tokenizer_class"], "PreTrainedTokenizerFast");
    assert_eq!(tok_cfg["chat_template"], reference.template.as_str());

    // Tensors under HF names; tied embeddings, so no lm_head.
    let (tensors, metadata) =
        Array::load_safetensors_with_metadata(out.join("model.safetensors")).unwrap();
    assert_eq!(metadata.get("format").map(String::as_str), Some("mlx"));
    assert_eq!(tensors.len(), report.tensors);
    assert!(tensors.contains_key("model.embed_tokens.weight"));
    assert!(tensors.contains_key("model.norm.weight"));
    assert!(tensors.contains_key("model.layers.29.self_attn.q_proj.weight"));
    assert!(!tensors.keys().any(|k| k.starts_with("lm_head")));
    let linears = 7 * reference.config.num_layers + 1;
    let norms = 2 * reference.config.num_layers + 1;
    match dtype {
        ExportDtype::Keep => {
            assert_eq!(tensors.len(), 3 * linears + norms);
            assert_eq!(
                tensors["model.layers.0.self_attn.q_proj.weight"].dtype(),
                Dtype::Uint32
            );
            // The GGUF's Q4_1 layers are 4-bit; its Q8_0 embedding is listed apart.
            assert_eq!(report.quantization, Some((32, 4)));
            assert_eq!(raw["quantization"]["group_size"], 32);
            assert_eq!(raw["quantization"]["bits"], 4);
            assert_eq!(raw["quantization"]["model.embed_tokens"]["bits"], 8);
            let q: QuantizationConfig =
                serde_json::from_value(raw["quantization"].clone()).unwrap();
            assert_eq!(
                q,
                QuantizationConfig {
                    group_size: 32,
                    bits: 4
                }
            );
        }
        _ => {
            assert_eq!(tensors.len(), linears + norms);
            assert!(tensors.values().all(|t| t.dtype() == Dtype::Float32));
            assert_eq!(report.quantization, None);
            assert!(raw.get("quantization").is_none());
            assert_eq!(raw["torch_dtype"], "float32");
        }
    }
    out
}

/// Loads the folder back and compares it with the GGUF model.
fn check_loads_back(out: &Path) {
    let reference = reference();
    let model = LoadedModel::load(out.to_str().unwrap()).unwrap();
    assert_eq!(
        model.model.config(),
        &ModelConfig {
            rope_traditional: false,
            ..reference.config.clone()
        }
    );
    assert_eq!(model.eos.ids().collect::<Vec<_>>(), reference.eos);
    assert_eq!(model.template.source(), reference.template);
    let (prompt, greedy) = prompt_and_greedy(&model);
    assert_eq!(
        prompt, reference.prompt,
        "tokenizer.json encodes differently"
    );
    assert_eq!(
        greedy, reference.greedy,
        "greedy tokens differ from the GGUF's"
    );
    let logits = prompt_logits(&model, &prompt);
    assert_eq!(logits.len(), reference.logits.len());
    let diff = logits
        .iter()
        .zip(&reference.logits)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0, f32::max);
    assert!(diff < 1e-2, "logits differ from the GGUF's by up to {diff}");
}

#[test]
fn f32_export_loads_back_and_generates_like_the_gguf() {
    let out = export_and_check(ExportDtype::F32);
    check_loads_back(&out);
    std::fs::remove_dir_all(out).unwrap();
}

#[test]
fn kept_quantized_export_loads_back_and_generates_like_the_gguf() {
    let out = export_and_check(ExportDtype::Keep);
    check_loads_back(&out);
    std::fs::remove_dir_all(out).unwrap();
}

#[test]
fn convert_refuses_a_non_empty_out_dir() {
    let out = scratch("occupied");
    std::fs::create_dir_all(&out).unwrap();
    std::fs::write(out.join("keep.txt"), "mine").unwrap();
    let err = convert("smollm2", &out, ExportDtype::F32, registry::family).unwrap_err();
    assert!(matches!(err, EngineError::Convert(_)), "{err}");
    assert!(err.to_string().contains("not empty"), "{err}");
    assert_eq!(
        std::fs::read_to_string(out.join("keep.txt")).unwrap(),
        "mine"
    );
    std::fs::remove_dir_all(out).unwrap();
}

/// Runs `afm-serve convert` with `args`; returns (exit success, stdout, stderr).
fn cli(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_afm-serve"))
        .arg("convert")
        .args(args)
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn cli_names_bad_input_in_one_line() {
    let occupied = scratch("cli-occupied");
    std::fs::create_dir_all(&occupied).unwrap();
    std::fs::write(occupied.join("x"), "").unwrap();
    let fresh = scratch("cli-fresh");
    let cases: [(&[&str], &str); 3] = [
        (
            &[
                "--model",
                "smollm2",
                "--out",
                fresh.to_str().unwrap(),
                "--dtype",
                "f8",
            ],
            "unknown dtype 'f8'",
        ),
        (
            &["--model", "smollm2", "--out", occupied.to_str().unwrap()],
            "is not empty",
        ),
        (
            &[
                "--model",
                "./nowhere/model.gguf",
                "--out",
                fresh.to_str().unwrap(),
            ],
            "nowhere/model.gguf",
        ),
    ];
    for (args, expected) in cases {
        let (ok, _, stderr) = cli(args);
        assert!(!ok, "{args:?} should fail");
        let lines: Vec<&str> = stderr.lines().collect();
        assert_eq!(lines.len(), 1, "{args:?}: {stderr}");
        assert!(lines[0].starts_with("afm-serve: error: "), "{stderr}");
        assert!(lines[0].contains(expected), "{args:?}: {stderr}");
    }
    assert!(!fresh.exists(), "nothing is written on bad input");
    std::fs::remove_dir_all(occupied).unwrap();
}
