"""How MLX's CPU backend times a float32 `x @ W.T` by the row count of `x`,
as it is and with the rows padded with zeros to a multiple of 16: the
products of one decode step of SmolLM2-135M (its fused q/k/v and gate/up
shapes, the down and output projections, the tied head), at the row
counts a batch of streams gives. Best of three runs of 30 products each.

    python blas_rows.py [--rows 1,2,4,8,12,16,24,32]

Run with the Python of a peer that has MLX's CPU build (e.g.
.cache/peers/mlx-lm-*/bin/python, whose MLX uses the system OpenBLAS).
"""

import argparse
import time

import mlx.core as mx

# (out, in) of each product in a SmolLM2-135M decode step.
SHAPES = {"qkv": (960, 576), "gate_up": (3072, 576), "down": (576, 1536), "o": (576, 576), "head": (49152, 576)}


def best_us(f, runs=3, n=30):
    for _ in range(3):
        mx.eval(f())
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        for _ in range(n):
            mx.eval(f())
        times.append((time.perf_counter() - start) / n * 1e6)
    return min(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", default="1,2,4,8,12,16,24,32")
    args = ap.parse_args()
    mx.set_default_device(mx.cpu)
    print("| product | rows | as is (us) | padded to 16k (us) | as is / padded |")
    print("|---|---:|---:|---:|---:|")
    for name, (out, inp) in SHAPES.items():
        w = mx.random.normal((out, inp))
        mx.eval(w)
        for rows in (int(r) for r in args.rows.split(",")):
            x = mx.random.normal((rows, inp))
            padded = -(-rows // 16) * 16
            z = mx.zeros((padded - rows, inp))
            mx.eval(x, z)
            plain = best_us(lambda: x @ w.T)
            pad = best_us(lambda: (mx.concatenate([x, z]) @ w.T)[:rows]) if padded > rows else plain
            print(f"| {name} [{out}, {inp}] | {rows} | {plain:.0f} | {pad:.0f} | {plain / pad:.2f} |")


if __name__ == "__main__":
    main()
