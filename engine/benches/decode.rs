//! Single-stream decode speed of the engine's `generate` against a bare MLX
//! forward loop (forward + argmax, nothing else) on the same model, prompt
//! and token count, in one run. The difference is the engine's overhead:
//! sampling on the host, EOS checks, incremental detokenization.
//!
//! `cargo bench -p afm-engine --bench decode [-- --model M --tokens N --runs R]`

use std::time::Instant;

use afm_engine::loading::TemplateInput;
use afm_engine::{generate, GenerationSettings, LoadedModel};

struct Args {
    model: String,
    tokens: usize,
    runs: usize,
}

fn parse_args() -> Args {
    let mut args = Args {
        model: "smollm2".into(),
        tokens: 64,
        runs: 5,
    };
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        let mut value = || it.next().expect("flag needs a value");
        match a.as_str() {
            "--model" => args.model = value(),
            "--tokens" => args.tokens = value().parse().expect("--tokens N"),
            "--runs" => args.runs = value().parse().expect("--runs N"),
            _ => {} // cargo bench passes --bench
        }
    }
    args
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn bare_loop(model: &LoadedModel, prompt: &[u32], n: usize) -> f64 {
    let start = Instant::now();
    let mut cache = model.model.new_cache();
    let mut input = prompt.to_vec();
    for _ in 0..n {
        let logits = model.model.forward(&input, &mut cache).unwrap();
        let next = mlx_rs::ops::indexing::argmax(&logits, None).unwrap();
        input = vec![next.item_exact::<u32>()];
    }
    n as f64 / start.elapsed().as_secs_f64()
}

fn engine(model: &LoadedModel, prompt: &[u32], n: usize) -> f64 {
    let params = GenerationSettings {
        max_tokens: n,
        ..Default::default()
    };
    let start = Instant::now();
    let out = generate(
        model.model.as_ref(),
        &model.tokenizer,
        &model.eos,
        prompt,
        &params,
        |_| {},
    )
    .unwrap();
    assert_eq!(
        out.tokens.len(),
        n,
        "the prompt must not end before {n} tokens"
    );
    n as f64 / start.elapsed().as_secs_f64()
}

fn main() {
    let args = parse_args();
    let model = LoadedModel::load(&args.model).unwrap_or_else(|e| panic!("{e}"));
    // Greedy output of this prompt runs well past 64 tokens on SmolLM2.
    let prompt = model
        .prompt_tokens(&TemplateInput {
            messages: vec![serde_json::json!({
                "role": "user",
                "content": "Write a long, detailed story about a lighthouse keeper and a storm."
            })],
            add_generation_prompt: true,
            ..Default::default()
        })
        .unwrap();
    // Warm-up: first-call allocations and page faults.
    bare_loop(&model, &prompt, 8);
    let (mut bare, mut eng) = (Vec::new(), Vec::new());
    for _ in 0..args.runs {
        bare.push(bare_loop(&model, &prompt, args.tokens));
        eng.push(engine(&model, &prompt, args.tokens));
    }
    let (bare, eng) = (median(bare), median(eng));
    println!(
        "model {}, prompt {} tokens, {} generated tokens, median of {} runs (prefill included)",
        model.name,
        prompt.len(),
        args.tokens,
        args.runs
    );
    println!("bare MLX forward loop: {bare:7.2} tok/s");
    println!("engine generate():     {eng:7.2} tok/s");
    println!(
        "engine overhead:       {:6.2} %",
        (bare / eng - 1.0) * 100.0
    );
}
