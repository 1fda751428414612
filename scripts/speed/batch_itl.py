#!/usr/bin/env python3
"""Interactive streams' pace with and without a Batch API batch running.

Against URL (an afm-serve, or any server with /v1/files and /v1/batches):

1. without batch: rounds of STREAMS streaming chat requests started
   together (STREAM_TOKENS tokens each, `ignore_eos`, temperature 0,
   distinct prompts) for DURATION seconds;
2. with batch: a JSONL of LINES chat lines (custom_id req-0.., BATCH_TOKENS
   max_tokens, temperature 0, varied short prompts) is uploaded and a
   batch created; the same rounds run until the batch ends (polled every
   POLL seconds); only gaps between its creation and its end count;
3. the output file is checked: LINES lines, each custom_id once, status
   200, a chat.completion with non-empty content and usage; a few lines
   (SPOT) are posted again alone to show each reply is its own prompt's.

Every inter-token gap is the time between two content deltas of a stream;
TTFT is from sending a request to its first content delta. Prints a
table and writes OUT/summary.json, with the cores other processes kept
busy in each phase (from /proc; the server's is SERVER_PID's), since
anything else on the machine takes its cores. Standard library only.

    batch_itl.py URL OUT
    env: LINES (100) STREAMS (4) DURATION (60) STREAM_TOKENS (128)
         BATCH_TOKENS (64) POLL (0.25) SPOT (5) SERVER_PID
"""
import json
import os
import sys
import threading
import time
import urllib.request
import uuid

URL, OUT = sys.argv[1].rstrip("/"), sys.argv[2]
LINES = int(os.environ.get("LINES", 100))
STREAMS = int(os.environ.get("STREAMS", 4))
DURATION = float(os.environ.get("DURATION", 60))
STREAM_TOKENS = int(os.environ.get("STREAM_TOKENS", 128))
BATCH_TOKENS = int(os.environ.get("BATCH_TOKENS", 64))
POLL = float(os.environ.get("POLL", 0.25))
SPOT = int(os.environ.get("SPOT", 5))

TOPICS = ["the sea", "a lighthouse", "bread", "a red kite", "winter", "a train",
          "the moon", "a garden", "rain", "a violin", "mountains", "a library",
          "coffee", "a fox", "the desert", "a clock", "bees", "a bridge",
          "snow", "a market"]
ASKS = ["Write one sentence about {}.", "Give two facts about {}.",
        "Describe {} in a few words.", "Why do people like {}?",
        "Name three things that go with {}."]


def request(path, body=None, headers=None, method=None):
    data = json.dumps(body).encode() if isinstance(body, (dict, list)) else body
    h = {"content-type": "application/json"} if isinstance(body, (dict, list)) else {}
    h.update(headers or {})
    return urllib.request.urlopen(urllib.request.Request(URL + path, data, h, method=method),
                                  timeout=600)


def get_json(path):
    with request(path) as r:
        return json.load(r)


MODEL = get_json("/v1/models")["data"][0]["id"]


def stream(prompt, max_tokens):
    """(sent, [arrival of each content delta], usage) of one streamed chat."""
    body = {"model": MODEL, "stream": True, "max_tokens": max_tokens, "temperature": 0,
            "ignore_eos": True, "stream_options": {"include_usage": True},
            "messages": [{"role": "user", "content": prompt}]}
    sent = time.monotonic()
    arrivals, usage = [], None
    with request("/v1/chat/completions", body) as r:
        for line in r:
            if not line.startswith(b"data: {"):
                continue
            now = time.monotonic()
            chunk = json.loads(line[6:])
            for c in chunk.get("choices") or []:
                if (c.get("delta") or {}).get("content"):
                    arrivals.append(now)
            if chunk.get("usage"):
                usage = chunk["usage"]
    return sent, arrivals, usage


def rounds(phase, keep_going):
    """Rounds of STREAMS streams started together while keep_going();
    every stream's (sent, arrivals, usage)."""
    done, r = [], 0
    while keep_going():
        results = [None] * STREAMS

        def one(i, r=r):
            prompt = (f"[{phase} {r}.{i}] Tell a long story about "
                      f"{TOPICS[(r * STREAMS + i) % len(TOPICS)]}, number {i}.")
            results[i] = stream(prompt, STREAM_TOKENS)

        threads = [threading.Thread(target=one, args=(i,)) for i in range(STREAMS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if any(x is None for x in results):
            raise SystemExit(f"{phase}: a stream failed in round {r}")
        done.extend(results)
        r += 1
    return done, r


def cpu():
    """(busy CPU seconds of the machine, of the server (SERVER_PID), of this
    client): what else ran beside the measurement on the same cores."""
    tick = os.sysconf("SC_CLK_TCK")
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    busy = (sum(v[:8]) - v[3] - v[4]) / tick  # all but idle and iowait
    server = 0.0
    pid = os.environ.get("SERVER_PID")
    if pid:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        server = (int(fields[11]) + int(fields[12])) / tick
    t = os.times()
    return time.monotonic(), busy, server, t.user + t.system


def others(a, b):
    """Cores busy with other processes between two cpu() readings."""
    wall = b[0] - a[0]
    return {"wall_s": round(wall, 1), "machine_cores": round((b[1] - a[1]) / wall, 2),
            "server_cores": round((b[2] - a[2]) / wall, 2),
            "client_cores": round((b[3] - a[3]) / wall, 2),
            "other_cores": round(((b[1] - a[1]) - (b[2] - a[2]) - (b[3] - a[3])) / wall, 2)}


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))] if xs else float("nan")


def figures(results, lo=float("-inf"), hi=float("inf")):
    """ITL and TTFT (ms) of the streams, gaps and first tokens within [lo, hi]."""
    gaps, ttft = [], []
    for sent, arrivals, _ in results:
        if arrivals and lo <= sent and arrivals[0] <= hi:
            ttft.append((arrivals[0] - sent) * 1000)
        gaps += [(y - x) * 1000 for x, y in zip(arrivals, arrivals[1:]) if x >= lo and y <= hi]
    stat = lambda xs: {"n": len(xs), "p50": round(pct(xs, 50), 1), "p90": round(pct(xs, 90), 1),
                       "p99": round(pct(xs, 99), 1), "max": round(max(xs or [float("nan")]), 1)}
    return {"itl_ms": stat(gaps), "ttft_ms": stat(ttft)}


def line_body(i):
    topic, ask = TOPICS[i % len(TOPICS)], ASKS[(i // len(TOPICS)) % len(ASKS)]
    return {"model": MODEL, "max_tokens": BATCH_TOKENS, "temperature": 0,
            "messages": [{"role": "user", "content": f"{ask.format(topic)} (item {i})"}]}


def upload(content):
    boundary = uuid.uuid4().hex
    body = (f"--{boundary}\r\ncontent-disposition: form-data; name=\"purpose\"\r\n\r\nbatch\r\n"
            f"--{boundary}\r\ncontent-disposition: form-data; name=\"file\"; "
            f"filename=\"batch_itl.jsonl\"\r\ncontent-type: application/jsonl\r\n\r\n").encode()
    body += content + f"\r\n--{boundary}--\r\n".encode()
    with request("/v1/files", body,
                 {"content-type": f"multipart/form-data; boundary={boundary}"}) as r:
        return json.load(r)


def check_output(batch):
    """The output file's verdict: good lines, problems, output tokens."""
    problems, good, tokens, replies = [], 0, 0, {}
    if batch.get("error_file_id"):
        with request(f"/v1/files/{batch['error_file_id']}/content") as r:
            problems.append(f"error file: {r.read().decode()[:500]}")
    if not batch.get("output_file_id"):
        return good, problems + ["no output file"], tokens, replies
    with request(f"/v1/files/{batch['output_file_id']}/content") as r:
        lines = [l for l in r.read().decode().splitlines() if l.strip()]
    if len(lines) != LINES:
        problems.append(f"{len(lines)} output lines, not {LINES}")
    seen = set()
    for raw in lines:
        try:
            line = json.loads(raw)
            cid, resp = line["custom_id"], line["response"]
            body = resp["body"]
            choice = body["choices"][0]
            content = choice["message"]["content"]
            ok = (cid in {f"req-{i}" for i in range(LINES)} and cid not in seen
                  and resp["status_code"] == 200 and line.get("error") is None
                  and body["object"] == "chat.completion" and body["model"] == MODEL
                  and len(body["choices"]) == 1 and choice["message"]["role"] == "assistant"
                  and isinstance(content, str) and content.strip() != ""
                  and choice["finish_reason"] in ("stop", "length")
                  and 0 < body["usage"]["completion_tokens"] <= BATCH_TOKENS)
        except (KeyError, IndexError, TypeError, ValueError) as e:
            problems.append(f"malformed line ({e!r}): {raw[:200]}")
            continue
        seen.add(cid)
        if ok:
            good += 1
            tokens += body["usage"]["completion_tokens"]
            replies[cid] = (content, body["usage"]["prompt_tokens"])
        else:
            problems.append(f"bad line: {raw[:300]}")
    return good, problems, tokens, replies


def spot_check(replies):
    """A few lines posted again alone: same prompt size, same reply?"""
    out = []
    for k in range(SPOT):
        i = round(k * (LINES - 1) / max(1, SPOT - 1))
        cid = f"req-{i}"
        if cid not in replies:
            continue
        with request("/v1/chat/completions", line_body(i)) as r:
            alone = json.load(r)
        a, (b, prompt_tokens) = alone["choices"][0]["message"]["content"], replies[cid]
        common = next((j for j, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
        out.append({"custom_id": cid, "same_prompt_tokens":
                    alone["usage"]["prompt_tokens"] == prompt_tokens,
                    "identical": a == b, "common_prefix_chars": common,
                    "chars": [len(b), len(a)]})
    return out


def main():
    os.makedirs(OUT, exist_ok=True)
    # Warm-up: the first requests' one-off costs are not the streams' pace.
    rounds("warm-up", iter([True, False]).__next__)

    print(f"without batch: {STREAMS} streams x {STREAM_TOKENS} tokens, {DURATION:.0f} s", flush=True)
    end = time.monotonic() + DURATION
    c0 = cpu()
    alone, alone_rounds = rounds("alone", lambda: time.monotonic() < end)
    c1 = cpu()

    jsonl = "".join(json.dumps({"custom_id": f"req-{i}", "method": "POST",
                                "url": "/v1/chat/completions", "body": line_body(i)}) + "\n"
                    for i in range(LINES)).encode()
    with open(os.path.join(OUT, "batch_input.jsonl"), "wb") as f:
        f.write(jsonl)
    file = upload(jsonl)
    t_create = time.monotonic()
    with request("/v1/batches", {"input_file_id": file["id"], "endpoint": "/v1/chat/completions",
                                 "completion_window": "24h"}) as r:
        batch = json.load(r)
    print(f"with batch: {batch['id']}, {LINES} lines x {BATCH_TOKENS} max_tokens", flush=True)
    state = {"batch": batch, "end": None, "in_progress": None}

    def poll():
        while True:
            try:
                b = get_json(f"/v1/batches/{batch['id']}")
            except OSError as e:  # the rounds stop; the batch is then not completed
                print(f"polling the batch failed: {e}", file=sys.stderr)
                state["end"] = time.monotonic()
                return
            now = time.monotonic()
            if b["status"] == "in_progress" and state["in_progress"] is None:
                state["in_progress"] = now
            state["batch"] = b
            if b["status"] in ("completed", "failed", "cancelled", "expired"):
                state["end"] = now
                return
            time.sleep(POLL)

    poller = threading.Thread(target=poll)
    poller.start()
    c2 = cpu()
    beside, beside_rounds = rounds("beside", lambda: state["end"] is None)
    poller.join()
    c3 = cpu()
    t_end, batch = state["end"], state["batch"]
    wall = t_end - t_create

    good, problems, tokens, replies = check_output(batch)
    spots = spot_check(replies) if batch["status"] == "completed" else []
    summary = {
        "model": MODEL, "streams": STREAMS, "stream_tokens": STREAM_TOKENS,
        "lines": LINES, "batch_tokens": BATCH_TOKENS,
        "without_batch": {"rounds": alone_rounds, **figures(alone), "cpu": others(c0, c1)},
        "with_batch": {"rounds": beside_rounds, **figures(beside, t_create, t_end),
                       "cpu": others(c2, c3)},
        "batch": {
            "id": batch["id"], "status": batch["status"],
            "request_counts": batch["request_counts"], "usage": batch.get("usage"),
            "wall_s": round(wall, 2),
            "lines_per_s": round(good / wall, 3),
            "output_tokens": tokens,
            "output_tokens_per_s": round(tokens / wall, 1),
            "verified_lines": good, "problems": problems[:20], "spot_check": spots,
        },
    }
    with open(os.path.join(OUT, "summary.json"), "w") as f:
        json.dump(summary, f, indent=2)

    print()
    print(f"{'':15} {'rounds':>6} {'gaps':>6} {'ITL p50':>8} {'p90':>7} {'p99':>7} {'max':>7}"
          f" {'TTFT p50':>9} {'p90':>7} {'p99':>7}  (ms)  other cores busy")
    for name, key in (("without batch", "without_batch"), ("with batch", "with_batch")):
        s = summary[key]
        i, t = s["itl_ms"], s["ttft_ms"]
        print(f"{name:15} {s['rounds']:>6} {i['n']:>6} {i['p50']:>8} {i['p90']:>7} {i['p99']:>7}"
              f" {i['max']:>7} {t['p50']:>9} {t['p90']:>7} {t['p99']:>7}"
              f"  {s['cpu']['other_cores']:>16}")
    b = summary["batch"]
    print(f"\nbatch {b['status']}: {b['request_counts']}, {b['wall_s']} s from create to "
          f"{b['status']} ({b['lines_per_s']} lines/s, {b['output_tokens']} output tokens, "
          f"{b['output_tokens_per_s']} tok/s)")
    print(f"output: {good}/{LINES} lines verified"
          + ("" if not problems else f"; {len(problems)} problems, first: {problems[0]}"))
    for s in spots:
        print(f"  alone again {s['custom_id']}: identical={s['identical']} "
              f"same_prompt_tokens={s['same_prompt_tokens']} "
              f"common prefix {s['common_prefix_chars']}/{s['chars'][0]} chars")
    print(f"summary: {os.path.join(OUT, 'summary.json')}")
    ok = (batch["status"] == "completed" and good == LINES and not problems
          and batch["request_counts"] == {"total": LINES, "completed": LINES, "failed": 0})
    sys.exit(0 if ok else 1)


main()
