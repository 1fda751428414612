//! criterion benchmarks of the host-side work around each decode step:
//! the grammar mask, the radix prefix cache and the sampler. Each of these
//! runs for every sequence of every step, so their cost adds to the step
//! time directly (the model's forward pass is measured by `decode` and
//! `batch_decode`; the output parsers by `parsers`).
//!
//! `cargo bench -p afm-engine --bench hot_paths`

use std::hint::black_box;
use std::time::Duration;

use afm_engine::models::KvCache;
use afm_engine::runtime::PrefixCache;
use afm_engine::runtime::{argmax, Sampler, SamplingParams};
use afm_engine::runtime::{Constraint, GrammarCompiler};
use afm_engine::LoadedModel;
use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use mlx_rs::transforms::eval;
use rand_chacha::ChaCha8Rng;
use rand_core::{RngCore, SeedableRng};
use serde_json::json;

/// Tokens of a cached prompt (a long shared system prompt).
const PROMPT: usize = 512;
/// Constrained tokens generated per grammar iteration.
const GRAMMAR_STEPS: u64 = 40;

fn random_logits(vocab: usize, seed: u64) -> Vec<f32> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    (0..vocab)
        .map(|_| (rng.next_u32() % 10_000) as f32 / 1000.0 - 5.0)
        .collect()
}

fn benches(c: &mut Criterion) {
    let model = LoadedModel::load("smollm2").unwrap_or_else(|e| panic!("{e}"));
    let config = model.model.config().clone();
    let vocab = config.vocab_size;

    // Grammar: mask + apply + consume per token along a schema-constrained
    // generation (argmax of random logits under the mask).
    let compiler = GrammarCompiler::new(&model.tokenizer, &model.eos, vocab).unwrap();
    let schema = json!({
        "type": "object",
        "properties": {
            "name": {"type": "string", "maxLength": 40},
            "age": {"type": "integer"},
            "tags": {"type": "array", "items": {"type": "string"}},
            "role": {"enum": ["admin", "user", "guest"]}
        },
        "required": ["name", "age", "tags", "role"]
    });
    let constraint = Constraint::JsonSchema(schema);
    let logits_rows: Vec<Vec<f32>> = (0..GRAMMAR_STEPS)
        .map(|s| random_logits(vocab, s))
        .collect();
    let mut group = c.benchmark_group("grammar");
    group.bench_function("compile_schema", |b| {
        b.iter(|| black_box(compiler.compile(&constraint, None).unwrap()))
    });
    group.throughput(Throughput::Elements(GRAMMAR_STEPS));
    group.bench_function("mask_and_consume_per_token", |b| {
        b.iter_batched(
            || compiler.compile(&constraint, None).unwrap(),
            |mut state| {
                for row in &logits_rows {
                    let mut logits = row.clone();
                    if state.apply_mask(&mut logits).is_err() {
                        break;
                    }
                    let token = argmax(&logits);
                    if model.eos.contains(token) || state.consume(token).is_err() {
                        break;
                    }
                }
                state
            },
            BatchSize::SmallInput,
        )
    });
    group.finish();

    // Radix cache over real KV of the bundled model: a 512-token prompt
    // prefilled once; then prompts that share 400 of its tokens.
    let prompt: Vec<u32> = (0..PROMPT as u32).map(|i| 100 + (i * 7) % 5000).collect();
    let mut kv: KvCache = model.model.new_cache();
    model
        .model
        .forward(&prompt, &mut kv)
        .unwrap()
        .eval()
        .unwrap();
    let layout = model.model.kv_layout().clone();
    let budget = 1 << 30;
    let mut sharing = prompt.clone();
    for t in sharing[400..].iter_mut() {
        *t += 1;
    }
    let mut group = c.benchmark_group("radix_cache");
    group.bench_function("insert_512_into_empty", |b| {
        b.iter_batched(
            || PrefixCache::new(&layout, budget, 0),
            |mut cache| {
                cache.insert(&prompt, &kv.store, kv.slot).unwrap();
                cache
            },
            BatchSize::SmallInput,
        )
    });
    group.bench_function("insert_sharing_400_of_512", |b| {
        b.iter_batched(
            || {
                let mut cache = PrefixCache::new(&layout, budget, 0);
                cache.insert(&prompt, &kv.store, kv.slot).unwrap();
                cache
            },
            |mut cache| {
                cache.insert(&sharing, &kv.store, kv.slot).unwrap();
                cache
            },
            BatchSize::SmallInput,
        )
    });
    let mut filled = PrefixCache::new(&layout, budget, 0);
    filled.insert(&prompt, &kv.store, kv.slot).unwrap();
    group.bench_function("lookup_400_of_512", |b| {
        b.iter(|| black_box(filled.lookup(&sharing, sharing.len()).unwrap().len))
    });
    // The copy a hit costs: the matched KV made real (MLX is lazy).
    group.bench_function("lookup_400_of_512_and_copy_kv", |b| {
        b.iter(|| {
            let m = filled.lookup(&sharing, sharing.len()).unwrap();
            let arrays: Vec<_> = m
                .segments
                .iter()
                .flatten()
                .flat_map(|(k, v)| [k, v])
                .collect();
            eval(arrays).unwrap();
            m.len
        })
    });
    group.finish();

    // Sampler over a full-vocabulary row.
    let logits = random_logits(vocab, 99);
    let history: Vec<u32> = (0..256).map(|i| (i * 13) % vocab as u32).collect();
    let mut group = c.benchmark_group("sampler");
    let sampler_with = |params: SamplingParams| {
        let mut s = Sampler::new(SamplingParams {
            seed: Some(7),
            ..params
        })
        .with_prompt(&history);
        for &t in &history {
            s.observe(t);
        }
        s
    };
    let greedy = sampler_with(SamplingParams::default());
    group.bench_function("greedy", |b| {
        b.iter(|| black_box(greedy.sample(black_box(&logits), 10)))
    });
    let nucleus = sampler_with(SamplingParams {
        temperature: 0.8,
        top_p: 0.9,
        ..Default::default()
    });
    group.bench_function("temperature_top_p", |b| {
        b.iter(|| black_box(nucleus.sample(black_box(&logits), 10)))
    });
    let full = sampler_with(SamplingParams {
        temperature: 0.8,
        top_k: 50,
        top_p: 0.9,
        min_p: 0.05,
        repetition_penalty: 1.1,
        presence_penalty: 0.5,
        frequency_penalty: 0.5,
        logit_bias: vec![(5, 2.0)],
        ..Default::default()
    });
    group.bench_function("penalties_top_k_top_p_min_p", |b| {
        b.iter(|| {
            let mut row = logits.clone();
            full.process(&mut row);
            black_box(full.sample(&row, 10))
        })
    });
    group.finish();
}

criterion_group! {
    name = hot_paths;
    config = Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    targets = benches
}
criterion_main!(hot_paths);
