"""The reference the engine's batch decode is measured against: a plain
padded-batch loop in MLX, independent of the engine.

mlx-lm's own model code and KV cache (batch dimension first, so every layer
runs ONE attention call for the whole batch), the same f32 weights as the
engine (`afm-serve convert --dtype f32`), greedy, no scheduler. Each row gets
the same chat prompt shape the engine's `batch_decode` bench sends ("Tell me
story number i about a lighthouse."), left-padded to the longest (the pad
positions are attended: the loop measures speed, not text); the timing
includes the batched prefill, as the engine's figures do.

    python padded_decode.py WEIGHTS_DIR --levels 1,8,16,32 --tokens 64 [--json OUT]

Prints one line per batch size; `--json` writes {"batch": tokens_per_s}.
"""

import argparse
import json
import time

import mlx.core as mx
from mlx_lm import load
from mlx_lm.models.cache import make_prompt_cache


def prompts(tokenizer, n):
    out = []
    for i in range(n):
        messages = [{"role": "user", "content": f"Tell me story number {i} about a lighthouse."}]
        out.append(tokenizer.apply_chat_template(messages, add_generation_prompt=True))
    return out


def run(model, tokenizer, batch, tokens):
    rows = prompts(tokenizer, batch)
    width = max(len(r) for r in rows)
    pad = [width - len(r) for r in rows]
    ids = mx.array([[0] * p + r for p, r in zip(pad, rows)])
    start = time.perf_counter()
    cache = make_prompt_cache(model)
    logits = model(ids, cache=cache)
    nxt = mx.argmax(logits[:, -1, :], axis=-1)
    mx.eval(nxt)
    for step in range(1, tokens):
        logits = model(nxt[:, None], cache=cache)
        nxt = mx.argmax(logits[:, -1, :], axis=-1)
        mx.eval(nxt)
    return batch * tokens / (time.perf_counter() - start)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("weights")
    ap.add_argument("--levels", default="1,8,16,32")
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--json")
    args = ap.parse_args()
    model, tokenizer = load(args.weights)
    run(model, tokenizer, 1, 4)  # warm-up
    figures = {}
    for batch in [int(b) for b in args.levels.split(",")]:
        figures[batch] = run(model, tokenizer, batch, args.tokens)
        print(f"padded reference, batch {batch:>2}: {figures[batch]:7.1f} tok/s", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(figures, f)


if __name__ == "__main__":
    main()
