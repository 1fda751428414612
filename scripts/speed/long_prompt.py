#!/usr/bin/env python3
"""One long prompt, cold and then as a cached turn, on one server.

For each length asked for: a prompt of about that many tokens, new to the
server (salted), answered with one token (cold); then the same prompt with
the one-token reply and a new user message after it, answered with one
token (a cached turn: a perfect cache holds all but the new message).
Each request's wall time stands for its time to first token (a one-token
answer is the prompt's prefill and one step). Prints and writes, as JSON,
per length: prompt tokens, cached tokens as the server reports them
(`prompt_tokens_details.cached_tokens`; null where it reports none),
seconds and prompt tokens per second of the cold request. Standard
library only.

    long_prompt.py URL MODEL OUT.json LENGTH...   (MODEL "-": the first listed)
"""
import json
import sys
import time
import urllib.request

URL, MODEL, OUT = sys.argv[1], sys.argv[2], sys.argv[3]
LENGTHS = [int(n) for n in sys.argv[4:]]
if MODEL == "-":
    with urllib.request.urlopen(URL + "/v1/models", timeout=60) as r:
        MODEL = json.load(r)["data"][0]["id"]
# "wordN alpha" pairs: about 3.9 tokens a pair in SmolLM2's tokenizer
# (prefill_stall.py's prompt; 1,750 pairs are 6,846 tokens).
TOKENS_PER_PAIR = 3.91


def ask(messages):
    body = {"model": MODEL, "messages": messages, "max_tokens": 1, "temperature": 0}
    req = urllib.request.Request(URL + "/v1/chat/completions", json.dumps(body).encode(),
                                 {"content-type": "application/json"})
    t = time.time()
    with urllib.request.urlopen(req, timeout=3600) as r:
        reply = json.load(r)
    took = time.time() - t
    usage = reply.get("usage") or {}
    details = usage.get("prompt_tokens_details") or {}
    return {"seconds": round(took, 3), "prompt_tokens": usage.get("prompt_tokens"),
            "cached_tokens": details.get("cached_tokens")}


def prompt(length, salt):
    pairs = max(1, round(length / TOKENS_PER_PAIR))
    words = " ".join(f"word{i % 97} alpha" for i in range(pairs))
    return f"[{salt}] Read this list, then answer the question after it.\n{words}"


ask([{"role": "user", "content": "Hi."}])  # load and warm up
rows = []
for length in LENGTHS:
    salt = f"{time.time_ns()}"
    first = [{"role": "user", "content": prompt(length, salt)}]
    cold = ask(first)
    turn = first + [{"role": "assistant", "content": "The"},
                    {"role": "user", "content": "Which word comes last in the list?"}]
    cached = ask(turn)
    row = {"length": length, "cold": cold, "cached": cached,
           "cold_prompt_tok_s": round(cold["prompt_tokens"] / cold["seconds"], 1)
           if cold["prompt_tokens"] else None,
           "cached_share": round(cached["seconds"] / cold["seconds"], 4)}
    rows.append(row)
    print(json.dumps(row), flush=True)
json.dump(rows, open(OUT, "w"), indent=1)
