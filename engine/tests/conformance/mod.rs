//! The conformance runner every architecture goes through: properties of
//! the engine's forward pass that must hold whatever the weights, checked
//! on a model built in the test (random small weights), so no model file
//! is needed.
//!
//! 1. A batched pass gives each sequence what it gets alone (ragged batch:
//!    prefill chunks and one-token decodes mixed in one pass).
//! 2. A prompt prefilled in chunks gives what it gives whole.
//! 3. A sequence started from a prefix-cache hit gives what a cold one does
//!    (for a model with recurrent layers: from a state snapshot, which the
//!    filling sequence's later steps must not have changed, and falling
//!    back to an earlier snapshot when the match runs past the last one).
//! 4. Where the model claims batch invariance: bit-identical logits at any
//!    batch position, with any chunking, from a cached prefix.
//!
//! Teacher forcing: every run feeds the same scripted tokens, so a near
//! tie in the logits can never fork two runs onto different texts.
#![allow(dead_code)]

use afm_engine::models::{BatchItem, CausalLm, KvCache, KvStore};
use afm_engine::runtime::PrefixCache;

/// Largest |difference| accepted between runs of the default mode, whose
/// matmul shapes (and so BLAS rounding) change with the batch.
pub const TOLERANCE: f32 = 1e-3;

/// Logits of every sampled step of one sequence: the prompt's last token,
/// then each forced continuation token.
type Rows = Vec<Vec<f32>>;

/// A sequence to run: its prompt and the tokens fed after it.
#[derive(Debug, Clone)]
pub struct Script {
    pub prompt: Vec<u32>,
    pub continuation: Vec<u32>,
}

/// Scripts of different lengths over `vocab` (deterministic).
pub fn scripts(vocab: u32, lens: &[usize], continuation: usize) -> Vec<Script> {
    let mut state = 0x9e37_79b9_u32;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 17;
        state ^= state << 5;
        state % vocab
    };
    lens.iter()
        .map(|&n| Script {
            prompt: (0..n).map(|_| next()).collect(),
            continuation: (0..continuation).map(|_| next()).collect(),
        })
        .collect()
}

fn rows_of(logits: &mlx_rs::Array) -> Vec<Vec<f32>> {
    let n = logits.dim(0) as usize;
    if n == 0 {
        return Vec::new();
    }
    let logits = logits.as_type::<f32>().unwrap();
    logits.eval().unwrap();
    let flat = logits.as_slice::<f32>();
    let vocab = flat.len() / n;
    flat.chunks(vocab).map(<[f32]>::to_vec).collect()
}

/// Runs `scripts` together: each step gives every sequence up to `chunk`
/// prompt tokens, or its next forced token once its prompt is done, all in
/// one `forward_batch`. Sequences start with what `caches` hold, each in
/// its own slot (in order) of one store.
pub fn run_batched(
    model: &dyn CausalLm,
    scripts: &[Script],
    caches: Vec<KvCache>,
    chunk: usize,
) -> Vec<Rows> {
    let mut kv = KvStore::new(model.kv_layout());
    let mut slots = Vec::new();
    for c in &caches {
        let slot = kv.open(c.store.fixed(c.slot)).unwrap();
        if c.offset() > 0 {
            let state = c.snapshot().unwrap();
            kv.load(
                slot,
                &[c.segment(0, c.offset()).unwrap()],
                c.offset(),
                Some(&state),
            )
            .unwrap();
        }
        slots.push(slot);
    }
    let mut rows: Vec<Rows> = vec![Vec::new(); scripts.len()];
    // Position in prompt + continuation of each sequence.
    let mut done: Vec<usize> = caches.iter().map(KvCache::offset).collect();
    loop {
        let mut spans = Vec::new();
        for (i, s) in scripts.iter().enumerate() {
            let all = s.prompt.len() + s.continuation.len();
            if done[i] >= all {
                continue;
            }
            let end = if done[i] < s.prompt.len() {
                done[i].saturating_add(chunk).min(s.prompt.len())
            } else {
                done[i] + 1
            };
            spans.push((i, done[i], end));
        }
        if spans.is_empty() {
            return rows;
        }
        let tokens: Vec<Vec<u32>> = spans
            .iter()
            .map(|&(i, s, e)| {
                let full: Vec<u32> = scripts[i]
                    .prompt
                    .iter()
                    .chain(&scripts[i].continuation)
                    .copied()
                    .collect();
                full[s..e].to_vec()
            })
            .collect();
        let samples: Vec<bool> = spans
            .iter()
            .map(|&(i, _, e)| e >= scripts[i].prompt.len())
            .collect();
        let logits = {
            let items: Vec<BatchItem<'_>> = spans
                .iter()
                .zip(&tokens)
                .zip(&samples)
                .map(|((&(i, _, _), t), &sample)| BatchItem {
                    tokens: t,
                    slot: slots[i],
                    sample,
                })
                .collect();
            model.forward_batch(&mut kv, &items).unwrap()
        };
        let mut out = rows_of(&logits).into_iter();
        for (&(i, _, e), &sample) in spans.iter().zip(&samples) {
            if sample {
                rows[i].push(out.next().expect("a row per sampled item"));
            }
            done[i] = e;
        }
        assert!(out.next().is_none(), "more logits rows than sampled items");
    }
}

/// Runs one script alone, its prompt whole.
pub fn run_alone(model: &dyn CausalLm, script: &Script, cache: KvCache) -> Rows {
    run_batched(model, std::slice::from_ref(script), vec![cache], usize::MAX)
        .pop()
        .unwrap()
}

/// Largest |a - b| over two runs' rows (which must have the same shape).
pub fn max_diff(a: &[Vec<f32>], b: &[Vec<f32>]) -> f32 {
    assert_eq!(a.len(), b.len(), "sampled steps differ");
    a.iter()
        .zip(b)
        .flat_map(|(x, y)| {
            assert_eq!(x.len(), y.len(), "vocab differs");
            x.iter().zip(y).map(|(p, q)| (p - q).abs())
        })
        .fold(0.0, f32::max)
}

fn close(what: &str, a: &[Vec<f32>], b: &[Vec<f32>]) {
    let d = max_diff(a, b);
    eprintln!("{what}: max |difference| {d:e}");
    assert!(
        d <= TOLERANCE,
        "{what}: logits differ by {d} (tolerance {TOLERANCE})"
    );
}

fn identical(what: &str, a: &[Vec<f32>], b: &[Vec<f32>]) {
    let d = max_diff(a, b);
    assert!(
        d == 0.0,
        "{what}: logits differ by {d}, must be bit-identical"
    );
}

/// Check 1: every sequence of a ragged batch (prompts of different lengths
/// prefilled in chunks of 3 while others decode) matches its run alone.
pub fn batched_matches_alone(model: &dyn CausalLm, scripts: &[Script]) {
    let alone: Vec<Rows> = scripts
        .iter()
        .map(|s| run_alone(model, s, model.new_cache()))
        .collect();
    let caches = scripts.iter().map(|_| model.new_cache()).collect();
    let batched = run_batched(model, scripts, caches, 3);
    for (i, (a, b)) in alone.iter().zip(&batched).enumerate() {
        close(&format!("sequence {i} batched vs alone"), a, b);
    }
}

/// Check 2: a prompt prefilled in chunks of 1, 2 and 5 matches it whole.
pub fn chunked_prefill_matches_whole(model: &dyn CausalLm, script: &Script) {
    let whole = run_alone(model, script, model.new_cache());
    for chunk in [1, 2, 5] {
        let chunked = run_batched(
            model,
            std::slice::from_ref(script),
            vec![model.new_cache()],
            chunk,
        );
        close(
            &format!("chunks of {chunk} vs whole prompt"),
            &whole,
            &chunked[0],
        );
    }
}

/// Check 3: a sequence whose first `shared` prompt tokens come from the
/// prefix cache (filled by another sequence with that prefix) matches a
/// cold run. `capacity`: fixed-capacity caches (batch-invariant mode).
pub fn prefix_hit_matches_cold(
    model: &dyn CausalLm,
    script: &Script,
    shared: usize,
    capacity: Option<usize>,
) -> (Rows, Rows) {
    prefix_hit(model, script, shared, 0, capacity)
}

/// Check 3 where the filling sequence shares `shared + beyond` tokens with
/// the script but stopped (a chunk end) only at `shared`: a model with
/// recurrent layers must resume from the snapshot at `shared` and
/// recompute the rest; others reuse all `shared + beyond` tokens of KV.
pub fn prefix_hit(
    model: &dyn CausalLm,
    script: &Script,
    shared: usize,
    beyond: usize,
    capacity: Option<usize>,
) -> (Rows, Rows) {
    let fresh = || match capacity {
        Some(c) => KvCache::with_capacity(model.kv_layout(), c),
        None => model.new_cache(),
    };
    let cold = run_alone(model, script, fresh());

    // Another prompt with the same first `common` tokens fills the cache
    // in two chunks, the first ending at `shared`, each inserted as the
    // scheduler does after a step. Its second chunk moves its own state on
    // after the first insert: a snapshot that followed it would be wrong.
    let common = shared + beyond;
    let mut other = script.prompt[..common].to_vec();
    other.extend(script.prompt[common..].iter().map(|t| t ^ 1));
    let mut filler = fresh();
    let mut prefix = PrefixCache::new(model.kv_layout(), 1 << 30, 1 << 30);
    model
        .forward(&other[..shared], &mut filler)
        .unwrap()
        .eval()
        .unwrap();
    prefix
        .insert(&other[..shared], &filler.store, filler.slot)
        .unwrap();
    model
        .forward(&other[shared..], &mut filler)
        .unwrap()
        .eval()
        .unwrap();
    prefix.insert(&other, &filler.store, filler.slot).unwrap();

    let reusable = match model.kv_layout().has_recurrent() {
        true => shared,
        false => common,
    };
    assert_eq!(prefix.cached_len(&script.prompt[..common]), reusable);
    let found = prefix.lookup(&script.prompt, common).unwrap();
    assert_eq!(found.len, reusable, "the reusable shared prefix is found");
    let cache = KvCache::from_segments(
        model.kv_layout(),
        &found.segments,
        found.len,
        found.state.as_ref(),
        capacity,
    )
    .unwrap();
    let warm = run_batched(model, std::slice::from_ref(script), vec![cache], usize::MAX)
        .pop()
        .unwrap();
    (cold, warm)
}

/// Checks 1-3 in the default mode.
pub fn default_mode(model: &dyn CausalLm, scripts: &[Script]) {
    batched_matches_alone(model, scripts);
    let longest = scripts
        .iter()
        .max_by_key(|s| s.prompt.len())
        .expect("a script");
    chunked_prefill_matches_whole(model, longest);
    let half = longest.prompt.len() / 2;
    let (cold, warm) = prefix_hit_matches_cold(model, longest, half, None);
    close("prefix-cache hit vs cold", &cold, &warm);
    let (cold, warm) = prefix_hit(model, longest, half, 3, None);
    close(
        "prefix-cache hit past the last snapshot vs cold",
        &cold,
        &warm,
    );
}

/// Check 4, for a model in batch-invariant mode: `scripts[0]` alone, in
/// slots 0, 3 and 7 of a batch of 8 (and in batches of 16, 24 and 32 given
/// 32 scripts),
/// chunked, and from a cached prefix, all bit-identical.
pub fn batch_invariant_mode(model: &dyn CausalLm, scripts: &[Script], capacity: usize) {
    assert!(scripts.len() >= 8, "eight scripts to fill a batch");
    let fixed = || KvCache::with_capacity(model.kv_layout(), capacity);
    let target = &scripts[0];
    let alone = run_alone(model, target, fixed());
    for (size, slot) in [(8, 0), (8, 3), (8, 7), (16, 9), (24, 5), (32, 20), (32, 31)] {
        if scripts.len() < size {
            continue;
        }
        let mut batch: Vec<Script> = scripts[1..size].to_vec();
        batch.insert(slot, target.clone());
        let caches = (0..size).map(|_| fixed()).collect();
        let rows = run_batched(model, &batch, caches, 4);
        identical(
            &format!("slot {slot} of {size} vs alone"),
            &alone,
            &rows[slot],
        );
    }
    let chunked = run_batched(model, std::slice::from_ref(target), vec![fixed()], 5);
    identical("chunks of 5 vs whole prompt", &alone, &chunked[0]);
    let (cold, warm) =
        prefix_hit_matches_cold(model, target, target.prompt.len() / 2, Some(capacity));
    identical("prefix-cache hit vs cold", &cold, &warm);
}
