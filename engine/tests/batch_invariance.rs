//! Batch-invariant mode: a sequence's logits do not depend on what else is
//! in the batch, on its slot, or on how its prompt was chunked. Compared bit
//! for bit. (In the default mode they differ in the last bits: BLAS picks
//! its blocking, and so its rounding, by matrix shape.)

use afm_engine::models::{BatchItem, CausalLm, KvStore};
use afm_engine::LoadedModel;

fn prompts(model: &LoadedModel) -> Vec<Vec<u32>> {
    [
        "What is the capital of France?",
        "Write a haiku about the sea.",
        "List three prime numbers.",
        "Why is the sky blue? Answer briefly.",
        "Translate 'good morning' to Spanish.",
        "Name a famous painter.",
        "What is 2 + 2?",
        "Tell me a fun fact about octopuses.",
    ]
    .iter()
    .map(|p| model.tokenizer.encode(p).unwrap())
    .collect()
}

/// Prefills each prompt (in `chunk`-token pieces, all sequences together),
/// then decodes `steps` greedy tokens for all of them in one batch per step.
/// Returns every sampled logit row per sequence.
fn run(
    model: &dyn CausalLm,
    prompts: &[Vec<u32>],
    chunk: usize,
    steps: usize,
) -> Vec<Vec<Vec<f32>>> {
    let mut kv = KvStore::new(model.kv_layout());
    let slots: Vec<usize> = prompts
        .iter()
        .map(|_| kv.open(Some(256)).unwrap())
        .collect();
    let mut rows: Vec<Vec<Vec<f32>>> = vec![Vec::new(); prompts.len()];
    let mut done = vec![0usize; prompts.len()];
    let mut next = vec![0u32; prompts.len()];
    // Chunked prefill: every sequence advances one chunk per pass.
    while done.iter().zip(prompts).any(|(d, p)| *d < p.len()) {
        let spans: Vec<(usize, usize)> = prompts
            .iter()
            .zip(&done)
            .map(|(p, &d)| (d, (d + chunk).min(p.len())))
            .collect();
        let active: Vec<usize> = (0..prompts.len())
            .filter(|&i| spans[i].0 < spans[i].1)
            .collect();
        let mut items: Vec<BatchItem> = Vec::new();
        let mut picked = Vec::new();
        for (i, &slot) in slots.iter().enumerate() {
            if active.contains(&i) {
                let (a, b) = spans[i];
                picked.push((i, b == prompts[i].len()));
                items.push(BatchItem {
                    tokens: &prompts[i][a..b],
                    slot,
                    sample: b == prompts[i].len(),
                });
            }
        }
        let logits = model.forward_batch(&mut kv, &items).unwrap();
        let logits = logits.as_slice::<f32>().to_vec();
        let vocab = model.config().vocab_size;
        let mut r = 0;
        for (i, sampled) in picked {
            done[i] = spans[i].1;
            if sampled {
                let row = logits[r * vocab..(r + 1) * vocab].to_vec();
                next[i] = afm_engine::runtime::argmax(&row);
                rows[i].push(row);
                r += 1;
            }
        }
    }
    for _ in 0..steps {
        let inputs: Vec<[u32; 1]> = next.iter().map(|&t| [t]).collect();
        let items: Vec<BatchItem> = slots
            .iter()
            .zip(&inputs)
            .map(|(&slot, t)| BatchItem {
                tokens: t,
                slot,
                sample: true,
            })
            .collect();
        let logits = model.forward_batch(&mut kv, &items).unwrap();
        let logits = logits.as_slice::<f32>().to_vec();
        let vocab = model.config().vocab_size;
        for (i, row) in logits.chunks(vocab).enumerate() {
            next[i] = afm_engine::runtime::argmax(row);
            rows[i].push(row.to_vec());
        }
    }
    rows
}

#[test]
fn batch_invariant_logits_are_identical_alone_in_any_slot_and_chunking() {
    let mut model = LoadedModel::load("smollm2").expect("run scripts/setup.sh first");
    model.model.set_batch_invariant(true).unwrap();
    let all = prompts(&model);
    let target = all[0].clone();
    let alone = run(
        model.model.as_ref(),
        std::slice::from_ref(&target),
        usize::MAX,
        6,
    )
    .remove(0);
    for slot in [0, 3, 7] {
        let mut batch = all[1..].to_vec();
        batch.insert(slot, target.clone());
        let rows = run(model.model.as_ref(), &batch, usize::MAX, 6).remove(slot);
        for (j, (a, b)) in rows.iter().zip(&alone).enumerate() {
            let d = a
                .iter()
                .zip(b)
                .map(|(x, y)| (x - y).abs())
                .fold(0f32, f32::max);
            eprintln!("slot {slot} row {j}: max diff {d}");
        }
        assert!(rows == alone, "slot {slot} of 8 differs from alone");
    }
    let chunked = run(model.model.as_ref(), &all, 5, 6).remove(0);
    assert!(
        chunked == alone,
        "5-token prefill chunks differ from one prefill"
    );
}
