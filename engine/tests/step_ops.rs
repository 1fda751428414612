//! What one decode step of each bundled model (and of a routed-experts
//! model: the 4-bit Qwen3-MoE fixture) costs in MLX operations, each
//! a dispatch to MLX's stream thread and usually a thread wake: with afm's
//! whole-layer CPU primitive every layer is ONE op, and what remains is
//! around the layers (the packed embedding rows' lookup, one op too, the
//! final norm, the LM head). Run with `--nocapture` to read the counts;
//! `AFM_LAYER=off` gives the op-graph form's.

use afm_engine::models::{BatchItem, KvStore, Overlap};
use afm_engine::LoadedModel;

/// A store with a short prompt prefilled in one slot: (store, slot,
/// prompt).
fn prefilled(model: &LoadedModel) -> (KvStore, usize, Vec<u32>) {
    let m = model.model.as_ref();
    let mut kv = KvStore::new(m.kv_layout());
    let slot = kv.open(None).unwrap();
    let prompt = model
        .tokenizer
        .encode("Write a haiku about the sea.")
        .unwrap();
    let logits = m.forward_batch(&mut kv, &[item(slot, &prompt)]).unwrap();
    logits.eval().unwrap();
    (kv, slot, prompt)
}

/// A random fixture model (`fixtures/models/random/<name>`).
fn fixture(name: &str) -> LoadedModel {
    let path = format!(
        "{}/../fixtures/models/random/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    LoadedModel::load(&path).unwrap()
}

fn item(slot: usize, tokens: &[u32]) -> BatchItem<'_> {
    BatchItem {
        tokens,
        slot,
        sample: true,
    }
}

/// The graph of one decode step after a short prompt: (all its ops, those
/// of primitive `name`).
fn decode_step_ops(model: &LoadedModel, name: &str) -> (usize, usize) {
    let (mut kv, slot, prompt) = prefilled(model);
    let m = model.model.as_ref();
    let logits = m
        .forward_batch(&mut kv, &[item(slot, &[prompt[0]])])
        .unwrap();
    let count = |name| afm_engine::cpu::graph_ops(&logits, name).expect("counted here");
    let ops = (count(None), count(Some(name)));
    logits.eval().unwrap();
    ops
}

#[test]
fn a_decode_step_is_one_op_per_layer() {
    let layered = afm_engine::cpu::layer::path().is_primitive();
    let moe = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../fixtures/models/random/qwen3_moe_4bit"
    );
    for name in ["smollm2", "gemma3-270m", moe] {
        let model = LoadedModel::load(name).expect("run scripts/setup.sh first");
        let layers = model.model.config().num_layers;
        let (ops, layer_ops) = decode_step_ops(&model, "AfmDecoderLayer");
        eprintln!(
            "{}: {ops} MLX ops per decode step, {layer_ops} of them whole layers, \
             {layers} layers ({})",
            name.rsplit('/').next().unwrap_or(name),
            afm_engine::cpu::layer::describe()
        );
        if layered {
            assert_eq!(layer_ops, layers, "{name}: a layer is not one op");
            // Around the layers: the embedding rows (one op; MLX's take
            // and dequantize were 45-68), the final norm, the LM head;
            // nothing per layer.
            assert!(
                ops - layer_ops < 24,
                "{name}: {} ops outside the layers",
                ops - layer_ops
            );
        }
    }
}

/// Gemma 4 (its 4-bit fixtures, dense and MoE): every layer is one op,
/// the KV-shared ones (reading their owner's store), the full ones (K = V,
/// proportional RoPE), the per-layer input and scalar, and the MoE's
/// dense MLP and routed experts side by side included. Outside the
/// layers: the per-layer inputs' computation (once a pass) and the
/// soft-capped head.
#[test]
fn a_gemma4_step_is_one_op_per_layer() {
    for name in ["gemma4_4bit", "gemma4_moe_4bit"] {
        let model = fixture(name);
        let layers = model.model.config().num_layers;
        let (ops, layer_ops) = decode_step_ops(&model, "AfmDecoderLayer");
        eprintln!(
            "{name}: {ops} MLX ops per decode step, {layer_ops} of them whole layers, \
             {layers} layers ({})",
            afm_engine::cpu::layer::describe()
        );
        if afm_engine::cpu::layer::path().is_primitive() {
            assert_eq!(layer_ops, layers, "{name}: a layer is not one op");
            assert!(
                ops - layer_ops < 50,
                "{name}: {} ops outside the layers",
                ops - layer_ops
            );
        }
    }
}

/// Hybrid models (the 4-bit Qwen3.5 fixtures, dense and with routed and
/// shared experts): every layer, gated attention and Gated DeltaNet alike,
/// is one op (a recurrent layer's is ~140 as MLX ops, ~55 with the
/// recurrence alone as one op).
#[test]
fn a_hybrid_step_is_one_op_per_layer() {
    for name in ["qwen3_5_4bit", "qwen3_5_moe_4bit"] {
        let model = fixture(name);
        let layout = model.model.kv_layout();
        let (attention, recurrent) = (layout.layers.len(), layout.recurrent.len());
        let (ops, layer_ops) = decode_step_ops(&model, "AfmDecoderLayer");
        let (_, recurrences) = decode_step_ops(&model, "AfmDeltaNet");
        eprintln!(
            "{name}: {ops} MLX ops per decode step; {layer_ops} whole layers of \
             {attention} attention and {recurrent} recurrent layers, {recurrences} \
             recurrences outside them ({})",
            afm_engine::cpu::layer::describe()
        );
        if afm_engine::cpu::layer::path().is_primitive() {
            assert_eq!(
                layer_ops,
                attention + recurrent,
                "{name}: a layer is not one op"
            );
            assert_eq!(recurrences, 0, "{name}: a recurrence ran outside its layer");
            assert!(
                ops - layer_ops < 24,
                "{name}: {} ops outside the layers",
                ops - layer_ops
            );
        }
    }
}

/// A decode step writes every layer's KV store and recurrent states where
/// they lie (the whole-layer op takes their buffers when nothing else holds
/// them): a copy would cost a whole store, or `[slots, value_heads,
/// value_dim, key_dim]` floats, per layer per step. Gemma 4's KV-shared
/// layers pass their owner's store through their op without a copy too.
#[test]
fn a_decode_step_updates_the_kv_store_and_the_states_in_place() {
    if !afm_engine::cpu::layer::path().is_primitive() {
        return;
    }
    for name in ["qwen3_5_4bit", "gemma4_4bit"] {
        let model = fixture(name);
        let m = model.model.as_ref();
        let buffers = |kv: &KvStore| -> Vec<usize> {
            kv.arrays()
                .map(|a| a.as_slice::<f32>().as_ptr() as usize)
                .collect()
        };
        let (mut kv, slot, prompt) = prefilled(&model);
        let before = buffers(&kv);
        let layout = m.kv_layout();
        assert_eq!(
            before.len(),
            2 * (layout.owners().count() + layout.recurrent.len()),
            "{name}: keys and values, conv and delta states"
        );
        for token in prompt.chunks(1).take(3) {
            m.forward_batch(&mut kv, &[item(slot, token)])
                .unwrap()
                .eval()
                .unwrap();
            assert_eq!(buffers(&kv), before, "{name}: a buffer was copied");
        }
    }
}

/// On MLX's own ops (`AFM_KERNELS=mlx`: the path Metal and CUDA take; the
/// test script runs this file so), a decode step of sequences at different
/// positions, passed in slot order as the scheduler passes them, reads
/// every layer's keys and values where they lie: no gather but the
/// embedding's rows and the sampled rows' (a gather of the group's slots
/// copied `n x kv_heads x positions x head_dim` floats twice per layer and
/// step), and at most as many MLX ops as measured when this was written
/// (126.7 per layer on SmolLM2 with MLX's CPU fallbacks; mlx-lm's own
/// step: `scripts/speed/reference/step_ops.py`). With a hole among the slots (a
/// sequence between them prefilling, or a free slot) the store is still
/// read in place: per layer, only the queries (spread over the slots) and
/// the attention rows (taken back) are gathered, `hidden` floats a row.
/// Counted, not timed, so the machine's speed cannot fool it.
#[test]
fn an_mlx_ops_decode_step_reads_the_store_in_place() {
    if afm_engine::cpu::active_kernels() != "mlx" {
        return;
    }
    let model = LoadedModel::load("smollm2").expect("run scripts/setup.sh first");
    let m = model.model.as_ref();
    let config = m.config();
    let (layers, row) = (config.num_layers, config.hidden_size * 4);
    let prompts = [
        "Write a haiku about the sea.",
        "Name three colours.",
        "Why is the sky blue? Answer in one sentence, please.",
        "Hello",
        "Count from one to ten, in words, separated by commas.",
    ];
    // (label, decoding slots, gathered bytes allowed, ops per layer
    // allowed): the embedding's rows and the rows the head samples, `n`
    // rows each; with the hole, per layer the five spread queries and the
    // four rows taken back, four ops (a take and its reshape each). On the
    // CPU each of a layer's four dense products also pads its rows to 16
    // and cuts them back (`layers::linear`: OpenBLAS's row block), 12 ops
    // a layer that a GPU's graph does not have, and the decode read
    // groups the queries by KV head instead of MLX's attention fallback
    // (`attention::grouped_rows`), 5 ops a layer fewer.
    let cases: [(&str, &[usize], usize, usize); 2] = [
        ("4 streams", &[0, 1, 2, 3], 2 * 4 * row, 134),
        (
            "4 streams around a hole",
            &[0, 1, 3, 4],
            (8 + layers * 9) * row,
            138,
        ),
    ];
    for (label, decoding, allowed, per_layer) in cases {
        let mut kv = KvStore::new(m.kv_layout());
        let mut next = Vec::new();
        for p in prompts {
            let tokens = model.tokenizer.encode(p).unwrap();
            let slot = kv.open(None).unwrap();
            m.forward_batch(&mut kv, &[item(slot, &tokens)])
                .unwrap()
                .eval()
                .unwrap();
            next.push((slot, [tokens[0]]));
        }
        let items: Vec<_> = next
            .iter()
            .filter(|(slot, _)| decoding.contains(slot))
            .map(|(slot, t)| item(*slot, t))
            .collect();
        let logits = m.forward_batch(&mut kv, &items).unwrap();
        let ops = afm_engine::cpu::graph_ops(&logits, None).expect("counted here");
        let gathers = afm_engine::cpu::graph_ops(&logits, Some("Gather")).unwrap();
        let gathered = afm_engine::cpu::graph_bytes(&logits, "Gather").unwrap();
        let concatenated = afm_engine::cpu::graph_bytes(&logits, "Concatenate").unwrap();
        eprintln!(
            "smollm2 on MLX ops, {label}: {ops} MLX ops per decode step ({:.1} per layer), \
             {gathers} gathers ({gathered} bytes), {concatenated} bytes concatenated",
            ops as f64 / layers as f64
        );
        logits.eval().unwrap();
        assert!(
            gathered <= allowed,
            "{label}: the decode group's keys were gathered: {gathers} gathers, \
             {gathered} bytes (at most {allowed})"
        );
        assert!(
            ops <= per_layer * layers,
            "{label}: {ops} ops for {layers} layers"
        );
    }
}

/// The engine's steps hand each layer to MLX before building the next
/// (`Overlap::Layers`: the device computes while the host builds). For
/// each forward loop (the shared decoder, Gemma 3's, Gemma 4's) on either
/// kernel path: the logits are the same bits as the whole graph's; what is
/// still unscheduled at the end is at most the last layer and the head,
/// so every layer before it was handed over (the whole graph has at least
/// one op per layer more); and the store is still written in place.
#[test]
fn an_overlapped_step_hands_each_layer_over_and_computes_the_same_logits() {
    let models = [
        LoadedModel::load("smollm2").expect("run scripts/setup.sh first"),
        LoadedModel::load("gemma3-270m").expect("run scripts/setup.sh first"),
        fixture("gemma4_4bit"),
    ];
    for model in &models {
        let m = model.model.as_ref();
        let name = &m.config().architecture;
        let layers = m.config().num_layers;
        let mut runs = Vec::new();
        for overlap in [Overlap::None, Overlap::Layers] {
            let (mut kv, slot, prompt) = prefilled(model);
            let stores = |kv: &KvStore| -> Vec<usize> {
                kv.arrays()
                    .map(|a| a.as_slice::<f32>().as_ptr() as usize)
                    .collect()
            };
            let before = stores(&kv);
            let logits = m
                .forward_pass(&mut kv, &[item(slot, &[prompt[0]])], overlap)
                .unwrap();
            let ops = afm_engine::cpu::graph_ops(&logits, None).expect("counted here");
            logits.eval().unwrap();
            if afm_engine::cpu::layer::path().is_primitive() {
                assert_eq!(
                    stores(&kv),
                    before,
                    "{name} {overlap:?}: a store was copied"
                );
            }
            runs.push((ops, logits.as_slice::<f32>().to_vec()));
        }
        let [(whole, expected), (left, got)] = &runs[..] else {
            unreachable!("two runs")
        };
        eprintln!(
            "{name}: {whole} MLX ops in the whole graph, {left} left after the \
             layers were handed over ({layers} layers)"
        );
        assert!(
            left + (layers - 1) <= *whole,
            "{name}: {left} of {whole} ops were never handed over ({layers} layers)"
        );
        assert!(
            expected == got,
            "{name}: overlapped logits differ from the whole graph's"
        );
    }
}
