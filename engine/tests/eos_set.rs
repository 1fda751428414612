//! The EOS set is the union of every place a model declares end tokens, and
//! generation stops on each member (the turn-end bug class of seed 004).

use std::path::PathBuf;

use afm_engine::loading::eos_for_dir;
use afm_engine::loading::EosSet;
use afm_engine::loading::ModelConfig;
use afm_engine::loading::TextTokenizer;
use afm_engine::models::{BatchItem, CausalLm, KvLayout, KvStore, Overlap};
use afm_engine::{generate, FinishReason, GenerationSettings, Result};
use mlx_rs::Array;

const VOCAB: usize = 128;

fn fixture_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fixtures/models/gemma4-style-eos")
}

/// A model that emits a fixed token sequence, one per step.
struct Scripted {
    config: ModelConfig,
    kv_layout: KvLayout,
    script: Vec<u32>,
}

impl Scripted {
    fn new(script: Vec<u32>) -> Self {
        Scripted {
            config: ModelConfig {
                architecture: "llama".into(),
                vocab_size: VOCAB,
                hidden_size: 8,
                intermediate_size: 8,
                num_layers: 0,
                num_heads: 1,
                num_kv_heads: 1,
                head_dim: 8,
                rms_norm_eps: 1e-5,
                rope_theta: 1e4,
                rope_traditional: false,
                max_position_embeddings: 64,
                tie_word_embeddings: true,
            },
            kv_layout: KvLayout::uniform(0, 1, 8),
            script,
        }
    }
}

impl CausalLm for Scripted {
    fn config(&self) -> &ModelConfig {
        &self.config
    }

    fn forward_pass(&self, kv: &mut KvStore, items: &[BatchItem<'_>], _: Overlap) -> Result<Array> {
        let mut logits = Vec::new();
        for item in items {
            // The prompt is one token here, so steps taken = offset.
            let step = kv.offset(item.slot);
            kv.advance(item.slot, item.tokens.len());
            let mut row = vec![0f32; VOCAB];
            row[self.script[step] as usize] = 10.0;
            logits.extend(row);
        }
        Ok(Array::from_slice(
            &logits,
            &[items.len() as i32, VOCAB as i32],
        ))
    }

    fn kv_layout(&self) -> &KvLayout {
        &self.kv_layout
    }
}

fn eos_and_tokenizer() -> (EosSet, TextTokenizer) {
    let dir = fixture_dir();
    let tokenizer = TextTokenizer::from_file(&dir.join("tokenizer.json")).unwrap();
    (eos_for_dir(&dir, &tokenizer).unwrap(), tokenizer)
}

#[test]
fn eos_set_is_the_union_of_tokenizer_and_config_lists() {
    let (eos, _) = eos_and_tokenizer();
    assert_eq!(eos.ids().collect::<Vec<_>>(), vec![1, 50, 106]);
}

#[test]
fn generation_stops_on_each_end_id() {
    let (eos, tokenizer) = eos_and_tokenizer();
    let params = GenerationSettings {
        max_tokens: 10,
        ..Default::default()
    };
    for stop in [1, 106, 50] {
        let model = Scripted::new(vec![10, 11, stop, 12, 13, 14, 15, 16, 17, 18]);
        let out = generate(&model, &tokenizer, &eos, &[2], &params, |_| {}).unwrap();
        assert_eq!(out.tokens, vec![10, 11], "stop id {stop}");
        assert_eq!(out.finish_reason, FinishReason::Stop, "stop id {stop}");
        assert_eq!(
            out.text, "w10 w11",
            "stop id {stop}: end token must not leak"
        );
    }
}

#[test]
fn without_an_end_id_generation_runs_to_max_tokens() {
    let (eos, tokenizer) = eos_and_tokenizer();
    let model = Scripted::new((20..40).collect());
    let params = GenerationSettings {
        max_tokens: 5,
        ..Default::default()
    };
    let out = generate(&model, &tokenizer, &eos, &[2], &params, |_| {}).unwrap();
    assert_eq!(out.tokens, vec![20, 21, 22, 23, 24]);
    assert_eq!(out.finish_reason, FinishReason::Length);
}

/// `generate` honours the one settings type whole: a stop string ends the
/// output and is never emitted, even across tokens ("w11 w12" spans two),
/// and the settings it cannot honour (logprobs, tool-call limits) are an
/// error that names the field, never silently dropped.
#[test]
fn generate_ends_at_a_stop_string_and_refuses_what_it_cannot_report() {
    let (eos, tokenizer) = eos_and_tokenizer();
    let model = Scripted::new((10..20).collect());
    let settings = GenerationSettings {
        max_tokens: 8,
        stop: vec!["1 w12".into()],
        ..Default::default()
    };
    let mut streamed = String::new();
    let out = generate(&model, &tokenizer, &eos, &[2], &settings, |t| {
        streamed.push_str(t)
    })
    .unwrap();
    assert_eq!(out.text, "w10 w1");
    assert_eq!(streamed, out.text, "the stop string leaked into the stream");
    assert_eq!(out.finish_reason, FinishReason::Stop);
    assert_eq!(out.tokens, vec![10, 11, 12]);
    for (field, settings) in [
        (
            "logprobs",
            GenerationSettings {
                logprobs: Some(2),
                ..Default::default()
            },
        ),
        (
            "max_tool_calls",
            GenerationSettings {
                max_tool_calls: Some(1),
                ..Default::default()
            },
        ),
    ] {
        let err = generate(&model, &tokenizer, &eos, &[2], &settings, |_| {}).unwrap_err();
        assert!(err.to_string().contains(field), "{field}: {err}");
    }
}
