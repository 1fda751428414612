//! Batch engine figures, printed (not asserted):
//! 1. aggregate decode tokens/s at several concurrency levels, for the
//!    engine (scheduler, sampling, detokenization, events), for a bare
//!    loop of the same model's batched forward pass on the same prompts,
//!    and, given `--reference PYTHON WEIGHTS`, for the independent padded
//!    batch loop of `scripts/speed/reference/padded_decode.py` (mlx-lm's model code
//!    on the same f32 weights), measured in the same run;
//! 2. time to first token of a request whose ~1,000-token prefix is in the
//!    prefix cache, against the same request cold.
//!
//! `cargo bench -p afm-engine --bench batch_decode [-- --tokens N --levels 1,8,16,32
//! --reference PYTHON WEIGHTS]` (`scripts/speed/reference/compare.sh` sets up the reference)

use std::time::Instant;

use afm_engine::api::ChatRequest;
use afm_engine::models::{BatchItem, KvStore};
use afm_engine::EngineEvent;
use afm_engine::{Engine, EngineConfig, GenerationRequest, LoadedModel};
use serde_json::json;

struct Args {
    tokens: usize,
    levels: Vec<usize>,
    /// The Python that has mlx-lm, and the f32 weights directory.
    reference: Option<(String, String)>,
}

fn parse_args() -> Args {
    let mut args = Args {
        tokens: 64,
        levels: vec![1, 8, 16, 32],
        reference: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        match a.as_str() {
            "--tokens" => args.tokens = it.next().and_then(|v| v.parse().ok()).expect("--tokens N"),
            "--levels" => {
                args.levels = it
                    .next()
                    .expect("--levels 1,2,4")
                    .split(',')
                    .map(|v| v.parse().expect("level"))
                    .collect()
            }
            "--reference" => {
                let python = it.next().expect("--reference PYTHON WEIGHTS");
                let weights = it.next().expect("--reference PYTHON WEIGHTS");
                args.reference = Some((python, weights));
            }
            _ => {}
        }
    }
    args
}

/// The padded reference's tokens/s per batch size, measured now.
fn reference(args: &Args) -> Vec<Option<f64>> {
    let Some((python, weights)) = &args.reference else {
        return vec![None; args.levels.len()];
    };
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../scripts/speed/reference/padded_decode.py"
    );
    let out = std::env::temp_dir().join(format!("afm-padded-{}.json", std::process::id()));
    let levels: Vec<String> = args.levels.iter().map(|l| l.to_string()).collect();
    let status = std::process::Command::new(python)
        .args([script, weights, "--levels", &levels.join(",")])
        .args(["--tokens", &args.tokens.to_string(), "--json"])
        .arg(&out)
        .status()
        .expect("run the padded reference");
    assert!(status.success(), "the padded reference failed");
    let figures: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&out).expect("reference figures")).unwrap();
    let _ = std::fs::remove_file(&out);
    args.levels
        .iter()
        .map(|l| figures[l.to_string()].as_f64())
        .collect()
}

fn user_request(i: usize, max_tokens: usize) -> GenerationRequest {
    openai(json!({
        "messages": [{"role": "user", "content": format!("Tell me story number {i} about a lighthouse.")}],
        "max_tokens": max_tokens,
        "temperature": 0,
        // Ban the end token so every request decodes exactly max_tokens.
        "logit_bias": {"2": -100}
    }))
}

/// An OpenAI chat body as the engine's request.
fn openai(body: serde_json::Value) -> GenerationRequest {
    ChatRequest::from_json(body.to_string().as_bytes())
        .unwrap()
        .to_generation()
        .unwrap()
}

/// The model's batched forward alone: prefill each prompt, then `tokens`
/// greedy steps with every sequence in one pass.
fn bare_loop(model: &LoadedModel, prompts: &[Vec<u32>], tokens: usize) -> f64 {
    let start = Instant::now();
    let mut kv = KvStore::new(model.model.kv_layout());
    let slots: Vec<usize> = prompts.iter().map(|_| kv.open(None).unwrap()).collect();
    let mut next: Vec<[u32; 1]> = Vec::new();
    for (p, &slot) in prompts.iter().zip(&slots) {
        let item = [BatchItem {
            tokens: p,
            slot,
            sample: true,
        }];
        let logits = model.model.forward_batch(&mut kv, &item).unwrap();
        next.push([mlx_rs::ops::indexing::argmax(&logits, None)
            .unwrap()
            .item_exact::<u32>()]);
    }
    for _ in 1..tokens {
        let items: Vec<BatchItem> = slots
            .iter()
            .zip(&next)
            .map(|(&slot, t)| BatchItem {
                tokens: t,
                slot,
                sample: true,
            })
            .collect();
        let logits = model.model.forward_batch(&mut kv, &items).unwrap();
        let ids = mlx_rs::ops::indexing::argmax_axis(&logits, 1, None).unwrap();
        for (n, id) in next.iter_mut().zip(ids.as_slice::<u32>()) {
            *n = [*id];
        }
    }
    (prompts.len() * tokens) as f64 / start.elapsed().as_secs_f64()
}

fn engine_run(engine: &Engine, level: usize, tokens: usize) -> f64 {
    let start = Instant::now();
    let streams: Vec<_> = (0..level)
        .map(|i| engine.submit(&user_request(i, tokens)).unwrap())
        .collect();
    let mut produced = 0;
    for s in streams {
        let c = s.collect_blocking().unwrap();
        produced += c.usage.completion_tokens;
    }
    assert_eq!(
        produced,
        level * tokens,
        "every request decodes {tokens} tokens"
    );
    produced as f64 / start.elapsed().as_secs_f64()
}

fn time_to_first_token(engine: &Engine, request: &GenerationRequest) -> (f64, usize) {
    let start = Instant::now();
    let mut stream = engine.submit(request).unwrap();
    let mut cached = 0;
    while let Some(e) = stream.next_blocking() {
        match e {
            EngineEvent::Started { cached_tokens, .. } => cached = cached_tokens,
            EngineEvent::Delta { .. } => return (start.elapsed().as_secs_f64(), cached),
            other => panic!("unexpected {other:?}"),
        }
    }
    panic!("no token")
}

fn main() {
    let args = parse_args();
    let model = LoadedModel::load("smollm2").unwrap_or_else(|e| panic!("{e}"));
    let padded = reference(&args);
    println!(
        "aggregate decode tokens/s, {} tokens per request (prefill included)",
        args.tokens
    );
    println!(
        "{:>11} {:>10} {:>10} {:>10} {:>9} {:>9} {:>14} {:>16}",
        "concurrency",
        "padded ref",
        "bare loop",
        "engine",
        "% of ref",
        "engine %",
        "deterministic",
        "determ. cost %"
    );
    for (&level, padded) in args.levels.iter().zip(padded) {
        let prompts: Vec<Vec<u32>> = (0..level)
            .map(|i| {
                let afm_engine::Prompt::Chat { messages, .. } = user_request(i, args.tokens).prompt
                else {
                    unreachable!("a chat request")
                };
                model
                    .prompt_tokens(&afm_engine::loading::TemplateInput {
                        messages,
                        add_generation_prompt: true,
                        ..Default::default()
                    })
                    .unwrap()
            })
            .collect();
        let bare = bare_loop(&model, &prompts, args.tokens);
        let run = |deterministic| {
            let engine = Engine::start(
                "smollm2",
                EngineConfig {
                    concurrent: level,
                    deterministic,
                    ..Default::default()
                },
            )
            .unwrap();
            engine_run(&engine, level, 4); // warm-up
            engine_run(&engine, level, args.tokens)
        };
        let (eng, det) = (run(false), run(true));
        let (padded, of_ref) = match padded {
            Some(p) => (format!("{p:.1}"), format!("{:.1}%", eng / p * 100.0)),
            None => ("-".into(), "-".into()),
        };
        println!(
            "{level:>11} {padded:>10} {bare:>10.1} {eng:>10.1} {of_ref:>9} {:>8.1}% {det:>14.1} {:>15.1}%",
            eng / bare * 100.0,
            (eng / det - 1.0) * 100.0
        );
    }

    let engine = Engine::start(
        "smollm2",
        EngineConfig {
            prefix_caching: true,
            ..Default::default()
        },
    )
    .unwrap();
    let system: String = (0..100)
        .map(|i| format!("Rule {i}: answer politely and briefly. "))
        .collect();
    let ask = |q: &str| -> GenerationRequest {
        openai(json!({
            "messages": [{"role": "system", "content": system}, {"role": "user", "content": q}],
            "max_tokens": 1
        }))
    };
    let (cold, _) = time_to_first_token(&engine, &ask("What is a lighthouse?"));
    let (warm, cached) = time_to_first_token(&engine, &ask("What is a harbour?"));
    let prompt = engine
        .prompt_tokens(&ask("What is a harbour?"))
        .unwrap()
        .len();
    println!(
        "time to first token, {prompt}-token prompt: cold {:.1} ms, {cached} tokens cached {:.1} ms ({:.1}% of cold)",
        cold * 1e3,
        warm * 1e3,
        warm / cold * 100.0
    );
}
