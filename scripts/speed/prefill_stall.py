#!/usr/bin/env python3
"""The pace of running streams while a long prompt is read.

Starts 4 streams (`ignore_eos`, 4,000 tokens each) against URL, waits
12 s, sends one prompt of WORDS x 2 words ("wordN alpha"; 6,846 tokens of
SmolLM2's chat template at 1,750) answered with one token, and prints, as
JSON, the time it took and the streams' inter-token gaps before it was
sent and while it was read. Standard library only.

    prefill_stall.py URL MODEL [WORDS]
"""
import json
import sys
import threading
import time
import urllib.request

URL, MODEL = sys.argv[1], sys.argv[2]
WORDS = int(sys.argv[3]) if len(sys.argv) > 3 else 1750
STREAMS = 4
t0 = time.time()
arrivals = [[] for _ in range(STREAMS)]
stop = threading.Event()


def post(body):
    return urllib.request.urlopen(urllib.request.Request(
        URL + "/v1/chat/completions", json.dumps(body).encode(),
        {"content-type": "application/json"}))


def delta_text(line):
    """Whether an SSE data line carries text: the answer's or, from a model
    that thinks first, the reasoning's."""
    choices = json.loads(line[6:]).get("choices") or [{}]
    delta = choices[0].get("delta") or {}
    return bool(delta.get("content") or delta.get("reasoning_content") or delta.get("reasoning"))


def stream(i):
    r = post({"model": MODEL, "stream": True, "max_tokens": 4000, "ignore_eos": True,
              "messages": [{"role": "user", "content": f"Tell me story number {i}."}]})
    for line in r:
        if stop.is_set():
            break
        if line.startswith(b"data: {") and delta_text(line):
            arrivals[i].append(time.time() - t0)
    r.close()


for i in range(STREAMS):
    threading.Thread(target=stream, args=(i,), daemon=True).start()
time.sleep(12)
words = " ".join(f"word{i % 97} alpha" for i in range(WORDS))
sent = time.time() - t0
reply = json.load(post({"model": MODEL, "max_tokens": 1,
                        "messages": [{"role": "user", "content": words}]}))
done = time.time() - t0
time.sleep(3)
stop.set()


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))] if xs else float("nan")


before, during = [], []
for a in arrivals:
    for x, y in zip(a, a[1:]):
        if y < sent and x > 2:  # past the streams' own start
            before.append((y - x) * 1000)
        elif x >= sent and y <= done:
            during.append((y - x) * 1000)
print(json.dumps({
    "prompt_tokens": reply["usage"]["prompt_tokens"],
    "prefill_s": round(done - sent, 1),
    "itl_before_ms": {"n": len(before), "p50": round(pct(before, 50)), "p99": round(pct(before, 99))},
    "itl_during_ms": {"n": len(during), "p50": round(pct(during, 50)), "p99": round(pct(during, 99)),
                      "max": round(max(during or [0]))},
}))
