"""Measures afm-conformance on held-out prompts, through a server's
/v1/completions (the prompt rendered by the model's own template, the raw
text back, so nothing a server's parsers do hides what the model wrote).

At temperature 0 (one sample) and 0.7 (--samples seeded samples), per
reply:

- think: with thinking on, one `</think>` closes non-empty reasoning (the
  template opened the block, so no `<think>` is written) and an answer
  follows; with thinking off, neither marker appears;
- tools: every `<tool_call>` block parses as {"name", "arguments"}, names an
  offered tool and its arguments validate against that tool's JSON schema,
  and there are as many as asked; where no call is wanted, there is none;
- end: the turn ended with the end token (finish_reason "stop"; no stop
  strings are sent), not at max_tokens;
- long: asked to think at length, reasoning of more than 1,000 tokens;
- json: a JSON instruction answered with JSON.

    python evaluate.py --url http://127.0.0.1:PORT --heldout heldout.jsonl \
        --tokenizer HF_FOLDER/tokenizer.json [--samples 10] [--out rates.json]

With --agree URL [--agree-model M] it instead compares two servers on the
same weights: each held-out prompt greedily (128 tokens) on both, and how
many replies are the same token for token (and where the others part).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import jsonschema
from tokenizers import Tokenizer

CALL = re.compile(r"<tool_call>(.*?)</tool_call>", re.S)


def complete(url: str, model: str | None, prompt: str, max_tokens: int, temperature: float, seed: int) -> dict:
    body = {"prompt": prompt, "max_tokens": max_tokens, "temperature": temperature, "seed": seed}
    if model:
        body["model"] = model
    req = urllib.request.Request(url.rstrip("/") + "/v1/completions", json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=1800) as r:
        choice = json.load(r)["choices"][0]
    return {"text": choice["text"], "finish_reason": choice["finish_reason"]}


def split(text: str, thinking: bool) -> tuple[str | None, str]:
    if thinking and "</think>" in text:
        reasoning, _, content = text.partition("</think>")
        return reasoning, content
    return None, text


def judge(ex: dict, reply: dict, tok: Tokenizer) -> dict:
    text, thinking, expect = reply["text"], ex["thinking"], ex["expect"]
    out = {"end": reply["finish_reason"] == "stop"}
    reasoning, content = split(text, thinking)
    if thinking:
        out["think"] = (text.count("</think>") == 1 and "<think>" not in text and bool(reasoning.strip())
                        and bool(content.strip()))
    else:
        out["think"] = "<think>" not in text and "</think>" not in text
    if expect.get("long"):
        out["long"] = reasoning is not None and len(tok.encode(reasoning, add_special_tokens=False).ids) > 1000
    if expect.get("json"):
        try:
            json.loads(content.strip())
            out["json"] = True
        except ValueError:
            out["json"] = False
    if "calls" in expect:
        blocks = CALL.findall(content)
        if expect["calls"] == 0:
            out["no_call"] = not blocks and "<tool_call>" not in text
        else:
            schemas = {t["function"]["name"]: t["function"]["parameters"] for t in ex["tools"]}
            ok = len(blocks) == expect["calls"]
            for b in blocks:
                try:
                    call = json.loads(b)
                    jsonschema.validate(call["arguments"], schemas[call["name"]])
                except (ValueError, KeyError, TypeError, jsonschema.ValidationError):
                    ok = False
            out["tools"] = ok
    return out


def agreement(args, examples, tok) -> int:
    """Greedy replies of two servers, compared token by token."""
    def both(ex):
        a = complete(args.url, args.model, ex["prompt"], 128, 0.0, 0)["text"]
        b = complete(args.agree, args.agree_model, ex["prompt"], 128, 0.0, 0)["text"]
        return ex, a, b

    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(both, examples))
    same, parted = 0, []
    for ex, a, b in results:
        if args.agree_without_calls:
            # Some servers (mlx-lm) parse calls out of /v1/completions text
            # too: compare what is left on both sides.
            a, b = CALL.sub("", a).rstrip(), CALL.sub("", b).rstrip()
        ia, ib = tok.encode(a, add_special_tokens=False).ids, tok.encode(b, add_special_tokens=False).ids
        if ia == ib:
            same += 1
            continue
        at = next((i for i, (x, y) in enumerate(zip(ia, ib)) if x != y), min(len(ia), len(ib)))
        parted.append({"kind": ex["kind"], "at_token": at, "a": a, "b": b})
    print(f"{same}/{len(results)} greedy replies identical token for token")
    for p in parted:
        print(f"- {p['kind']}: part at token {p['at_token']}")
    if args.out:
        args.out.write_text(json.dumps({"identical": same, "of": len(results), "parted": parted}, indent=1) + "\n")
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--url", required=True)
    ap.add_argument("--model")
    ap.add_argument("--heldout", type=Path, required=True)
    ap.add_argument("--tokenizer", type=Path, required=True)
    ap.add_argument("--samples", type=int, default=10)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--out", type=Path)
    ap.add_argument("--agree", help="a second server on the same weights: compare greedy replies")
    ap.add_argument("--agree-model")
    ap.add_argument("--agree-without-calls", action="store_true",
                    help="drop <tool_call> blocks from both texts before comparing")
    args = ap.parse_args(argv)
    tok = Tokenizer.from_file(str(args.tokenizer))
    examples = [json.loads(line) for line in args.heldout.read_text().splitlines() if line.strip()]
    if args.agree:
        return agreement(args, examples, tok)
    jobs = [(ex, 0.0, 0) for ex in examples] + [(ex, 0.7, s) for ex in examples for s in range(args.samples)]

    def run(job):
        ex, temp, seed = job
        max_tokens = 2500 if ex["expect"].get("long") else 400
        reply = complete(args.url, args.model, ex["prompt"], max_tokens, temp, seed)
        return ex, temp, seed, reply, judge(ex, reply, tok)

    with ThreadPoolExecutor(args.concurrency) as pool:
        results = list(pool.map(run, jobs))
    rates, failures, by_tool = {}, [], {}
    for ex, temp, seed, reply, verdict in results:
        if "tools" in verdict:
            # The tools check by the tools the prompt asks for, at both
            # temperatures: which schemas the model reads wrong.
            for name in sorted(set(re.findall(r'"name": "([^"]+)"', ex["completion"]))):
                cell = by_tool.setdefault(name, [0, 0])
                cell[0] += verdict["tools"]
                cell[1] += 1
        for check, ok in verdict.items():
            cell = rates.setdefault(str(temp), {}).setdefault(check, [0, 0])
            cell[0] += ok
            cell[1] += 1
            if not ok:
                failures.append({"temperature": temp, "seed": seed, "kind": ex["kind"], "check": check,
                                 "thinking": ex["thinking"], "text": reply["text"][-600:], "finish": reply["finish_reason"]})
    print(f"{len(examples)} held-out prompts; {len(jobs)} replies")
    print("| check | temperature 0 | temperature 0.7 |")
    print("|---|---|---|")
    for check in sorted({c for t in rates.values() for c in t}):
        cells = []
        for temp in ("0.0", "0.7"):
            ok, n = rates.get(temp, {}).get(check, [0, 0])
            cells.append(f"{ok}/{n} ({100 * ok / n:.1f}%)" if n else "-")
        print(f"| {check} | {cells[0]} | {cells[1]} |")
    print("tools check by tool asked for (both temperatures): " +
          ", ".join(f"{name} {ok}/{n}" for name, (ok, n) in sorted(by_tool.items())))
    if args.out:
        args.out.write_text(json.dumps({"rates": rates, "by_tool": by_tool, "failures": failures}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
