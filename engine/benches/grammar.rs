//! Grammar cost per decode step at batch 8, printed (not asserted): eight
//! sequences each constrained by a JSON schema; per step, every sequence's
//! mask is computed and applied to a full-vocabulary logits row and the
//! chosen token consumed, exactly as the scheduler does. Compared with the
//! time of one batch-8 decode forward pass of the bundled model.
//!
//! `cargo bench -p afm-engine --bench grammar`

use std::time::Instant;

use afm_engine::models::{BatchItem, KvStore};
use afm_engine::runtime::argmax;
use afm_engine::runtime::{Constraint, GrammarCompiler, GrammarState};
use afm_engine::LoadedModel;
use rand_chacha::ChaCha8Rng;
use rand_core::{RngCore, SeedableRng};
use serde_json::json;

const BATCH: usize = 8;
const STEPS: usize = 60;

fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn main() {
    let model = LoadedModel::load("smollm2").unwrap_or_else(|e| panic!("{e}"));
    let vocab = model.model.config().vocab_size;
    let compiler = GrammarCompiler::new(&model.tokenizer, &model.eos, vocab).unwrap();
    let schema = json!({
        "type": "object",
        "properties": {
            "name": {"type": "string", "maxLength": 40},
            "age": {"type": "integer"},
            "tags": {"type": "array", "items": {"type": "string"}},
            "address": {"type": "object", "properties": {"street": {"type": "string"}, "zip": {"type": "string"}}},
            "role": {"enum": ["admin", "user", "guest"]}
        },
        "required": ["name", "age", "tags", "address", "role"]
    });
    let compile_start = Instant::now();
    let mut states: Vec<GrammarState> = (0..BATCH)
        .map(|_| {
            compiler
                .compile(&Constraint::JsonSchema(schema.clone()), None)
                .unwrap()
        })
        .collect();
    let compile_ms = compile_start.elapsed().as_secs_f64() * 1e3 / BATCH as f64;

    // Random logits stand in for the model's: the mask work does not depend
    // on their values, only on the grammar state.
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    let mut mask_us = Vec::new();
    let mut step_grammar_us = Vec::new();
    for _ in 0..STEPS {
        let mut step = 0.0;
        for state in states.iter_mut() {
            let mut logits: Vec<f32> = (0..vocab)
                .map(|_| (rng.next_u32() % 1000) as f32 / 100.0)
                .collect();
            let t = Instant::now();
            if state.apply_mask(&mut logits).is_err() {
                continue;
            }
            let token = argmax(&logits);
            let masked = t.elapsed().as_secs_f64() * 1e6;
            let t = Instant::now();
            if model.eos.contains(token) {
                continue;
            }
            state.consume(token).unwrap();
            let total = masked + t.elapsed().as_secs_f64() * 1e6;
            mask_us.push(masked);
            step += total;
        }
        step_grammar_us.push(step);
    }

    // One batch-8 decode step of the model, after a short prefill.
    let prompt = model
        .tokenizer
        .encode("Describe a person as JSON.")
        .unwrap();
    let mut kv = KvStore::new(model.model.kv_layout());
    let slots: Vec<usize> = (0..BATCH).map(|_| kv.open(None).unwrap()).collect();
    for &slot in &slots {
        let item = [BatchItem {
            tokens: &prompt,
            slot,
            sample: true,
        }];
        model
            .model
            .forward_batch(&mut kv, &item)
            .unwrap()
            .eval()
            .unwrap();
    }
    let mut forward_us = Vec::new();
    let input = [prompt[0]];
    for _ in 0..20 {
        let t = Instant::now();
        let items: Vec<BatchItem> = slots
            .iter()
            .map(|&slot| BatchItem {
                tokens: &input,
                slot,
                sample: true,
            })
            .collect();
        let logits = model.model.forward_batch(&mut kv, &items).unwrap();
        logits.eval().unwrap();
        let _host = logits.as_slice::<f32>().len();
        forward_us.push(t.elapsed().as_secs_f64() * 1e6);
    }

    mask_us.sort_by(f64::total_cmp);
    step_grammar_us.sort_by(f64::total_cmp);
    forward_us.sort_by(f64::total_cmp);
    let grammar_step = percentile(&step_grammar_us, 0.5);
    let forward_step = percentile(&forward_us, 0.5);
    println!("schema compile: {compile_ms:.2} ms per request (on the submitting thread)");
    println!(
        "mask compute+apply per sequence ({} samples): p50 {:.0} us, p99 {:.0} us",
        mask_us.len(),
        percentile(&mask_us, 0.5),
        percentile(&mask_us, 0.99)
    );
    println!(
        "batch {BATCH}: grammar {:.2} ms per step (median) vs forward {:.1} ms -> {:.1}% of step time",
        grammar_step / 1e3,
        forward_step / 1e3,
        grammar_step / (grammar_step + forward_step) * 100.0
    );
}
