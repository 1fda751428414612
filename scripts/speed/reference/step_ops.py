"""MLX operations in one batched decode step of mlx-lm's own model code,
counted from the lazy graph (`mx.export_to_dot`, which names each op but
not its size), for comparison with afm's count (`engine/tests/step_ops.rs`,
`AFM_KERNELS=mlx`).

mlx-lm's server decodes a batch with `BatchKVCache` (left-padded rows, one
offset per row); this builds that cache for BATCH chat prompts of
different lengths, prefills them, and counts the graph of the next step, by primitive.

    python step_ops.py WEIGHTS_DIR [--batch 4]
"""

import argparse
import re
import tempfile
from collections import Counter

import mlx.core as mx
from mlx_lm import load
from mlx_lm.models.cache import BatchKVCache


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("weights")
    ap.add_argument("--batch", type=int, default=4)
    args = ap.parse_args()
    model, tokenizer = load(args.weights)
    texts = [
        "Write a haiku about the sea.",
        "Name three colours.",
        "Why is the sky blue? Answer in one sentence, please.",
        "Hello",
    ]
    rows = [
        tokenizer.apply_chat_template(
            [{"role": "user", "content": texts[i % len(texts)]}], add_generation_prompt=True
        )
        for i in range(args.batch)
    ]
    width = max(len(r) for r in rows)
    pad = [width - len(r) for r in rows]
    cache = [BatchKVCache(pad) for _ in model.layers]
    ids = mx.array([[0] * p + r for p, r in zip(pad, rows)])
    logits = model(ids, cache=cache)
    nxt = mx.argmax(logits[:, -1, :], axis=-1)
    mx.eval(nxt, [c.state for c in cache])
    step = model(nxt[:, None], cache=cache)
    with tempfile.NamedTemporaryFile("r", suffix=".dot") as f:
        mx.export_to_dot(f.name, step)
        dot = f.read()
    # Primitive nodes are rectangles labelled with the primitive's name;
    # evaluated arrays (weights, the cache) are sources, not ops.
    ops = Counter(re.findall(r'label\s*=\s*"(\w+)",\s*shape\s*=\s*rectangle', dot))
    total = sum(ops.values())
    layers = len(model.layers)
    print(
        f"mlx-lm {args.batch} streams: {total} MLX ops per decode step "
        f"({total / layers:.1f} per layer over {layers} layers)"
    )
    print("  by primitive: " + ", ".join(f"{k} {v}" for k, v in ops.most_common()))


if __name__ == "__main__":
    main()
