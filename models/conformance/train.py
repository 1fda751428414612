"""Trains afm-conformance's deltas on the CPU with MLX and mlx-lm.

LoRA pairs on the seven projections of every layer, and the embedding rows
of the six added tokens (their gradient only: every other row is masked, so
the base rows stay as they are and only the new rows are committed). Loss on
each example's completion only (the assistant's reply, from after the
generation prompt to its `<|im_end|>`), the prompt and completion tokenized
apart as a server sees them. Seeded; writes deltas.safetensors in the form
assemble.py reads.

    python train.py --start HF_FOLDER --data train.jsonl --out deltas.safetensors
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
import time
from pathlib import Path

import mlx.core as mx
import mlx.nn as nn
import mlx.optimizers as optim
import numpy as np
from mlx.utils import tree_flatten
from mlx_lm.tuner.utils import linear_to_lora_layers
from mlx_lm.utils import load
from safetensors.numpy import save_file

KEYS = ["self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
        "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"]
BASE_VOCAB = 49152


def encode(tokenizer, examples):
    """(ids, first completion index) per example."""
    out = []
    for ex in examples:
        p = tokenizer.encode(ex["prompt"], add_special_tokens=False)
        c = tokenizer.encode(ex["completion"], add_special_tokens=False)
        out.append((p + c, len(p)))
    return out


def batches(encoded, tokens_per_batch, rng):
    """Length-sorted batches of at most tokens_per_batch (padded) tokens, in
    random order: little padding, every example once per epoch."""
    order = sorted(range(len(encoded)), key=lambda i: len(encoded[i][0]))
    groups, cur = [], []
    for i in order:
        longest = max([len(encoded[j][0]) for j in cur] + [len(encoded[i][0])])
        if cur and longest * (len(cur) + 1) > tokens_per_batch:
            groups.append(cur)
            cur = []
        cur.append(i)
    if cur:
        groups.append(cur)
    rng.shuffle(groups)
    return groups


def to_arrays(encoded, group):
    """Padded ids, and the flat positions whose next token is a target:
    only those go through the 49k-row head (prompts need no logits)."""
    width = max(len(encoded[i][0]) for i in group)
    ids = np.zeros((len(group), width), np.int32)
    mask = np.zeros((len(group), width - 1), bool)
    for row, i in enumerate(group):
        seq, start = encoded[i]
        ids[row, : len(seq)] = seq
        # Position t predicts token t+1: the completion's tokens are targets.
        mask[row, start - 1 : len(seq) - 1] = True
    where = np.nonzero(mask.reshape(-1))[0].astype(np.uint32)
    targets = ids[:, 1:].reshape(-1)[where]
    return mx.array(ids[:, :-1]), mx.array(where), mx.array(targets)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--start", type=Path, required=True, help="the untrained HF folder (assemble.py --type f32 --hf)")
    ap.add_argument("--data", type=Path, required=True)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--rank", type=int, default=16)
    ap.add_argument("--scale", type=float, default=4.0)
    ap.add_argument("--lr", type=float, default=2e-4)
    ap.add_argument("--epochs", type=float, default=3.0)
    ap.add_argument("--tokens-per-batch", type=int, default=2048)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--max-steps", type=int, default=0,
                    help="stop after this many steps, the schedule unchanged (0: all)")
    ap.add_argument("--max-minutes", type=float, default=0, help="stop early after this long (0: no limit)")
    args = ap.parse_args(argv)

    mx.random.seed(args.seed)
    rng = random.Random(args.seed)
    model, tokenizer = load(str(args.start))
    model.freeze()
    linear_to_lora_layers(model, len(model.layers),
                          {"rank": args.rank, "scale": args.scale, "dropout": 0.0, "keys": KEYS})
    embed = model.model.embed_tokens
    embed.unfreeze()
    row_mask = mx.array((np.arange(embed.weight.shape[0]) >= BASE_VOCAB).astype(np.float32))[:, None]
    trainable = sum(v.size for _, v in tree_flatten(model.trainable_parameters()))
    print(f"trainable parameters: {trainable:,}", flush=True)

    examples = [json.loads(line) for line in args.data.read_text().splitlines() if line.strip()]
    encoded = encode(tokenizer, examples)
    total_tokens = sum(len(s) for s, _ in encoded)
    print(f"{len(encoded)} examples, {total_tokens:,} tokens, longest {max(len(s) for s, _ in encoded)}", flush=True)

    def loss_fn(model, inputs, where, targets):
        h = model.model(inputs)
        h = h.reshape(-1, h.shape[-1])[where]
        logits = model.model.embed_tokens.as_linear(h)
        return nn.losses.cross_entropy(logits, targets).mean()

    loss_and_grad = nn.value_and_grad(model, loss_fn)
    plan = []
    epochs = math.ceil(args.epochs)
    for e in range(epochs):
        groups = batches(encoded, args.tokens_per_batch, rng)
        if e == epochs - 1 and args.epochs < epochs:
            groups = groups[: int(len(groups) * (args.epochs - e))]
        plan += groups
    schedule = optim.join_schedules(
        [optim.linear_schedule(1e-6, args.lr, 20), optim.cosine_decay(args.lr, max(1, len(plan) - 20), args.lr * 0.1)], [20])
    opt = optim.Adam(learning_rate=schedule)

    def step(inputs, where, targets):
        loss, grads = loss_and_grad(model, inputs, where, targets)
        grads["model"]["embed_tokens"]["weight"] = grads["model"]["embed_tokens"]["weight"] * row_mask
        opt.update(model, grads)
        return loss

    start = time.time()
    seen, window = 0, []
    for n, group in enumerate(plan, 1):
        inputs, where, targets = to_arrays(encoded, group)
        loss = step(inputs, where, targets)
        mx.eval(loss, model.trainable_parameters(), opt.state)
        seen += inputs.size
        window.append(loss.item())
        if n % 10 == 0 or n == len(plan):
            el = time.time() - start
            print(f"step {n}/{len(plan)} loss {np.mean(window):.3f} {seen / el:.0f} tok/s {el / 60:.1f} min", flush=True)
            window = []
        if n == args.max_steps:
            print(f"stopping at step {n}", flush=True)
            break
        if args.max_minutes and time.time() - start > args.max_minutes * 60:
            print(f"stopping after {args.max_minutes} minutes at step {n}", flush=True)
            break

    deltas = {"new_token_rows": np.array(embed.weight[BASE_VOCAB:], dtype=np.float32)}
    for i, layer in enumerate(model.layers):
        for key in KEYS:
            mod = layer
            for part in key.split("."):
                mod = getattr(mod, part)
            deltas[f"layers.{i}.{key}.lora_a"] = np.array(mod.lora_a.astype(mx.float16))
            deltas[f"layers.{i}.{key}.lora_b"] = np.array(mod.lora_b.astype(mx.float16))
            deltas[f"layers.{i}.{key}.scale"] = np.array([mod.scale], np.float32)
    save_file(deltas, str(args.out), metadata={"rank": str(args.rank), "steps": str(n)})
    print(f"wrote {args.out} after {(time.time() - start) / 60:.1f} min", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
