#!/usr/bin/env bash
# afm-bench's timing proven against a mock whose timing is known: the mock
# (`afm-bench mock`) records when it sent every token; each client's TTFT,
# ITL and E2E percentiles are set beside the mock's own over the same
# requests, at each number of concurrent streams, for afm-bench, AIPerf and
# GuideLLM (scripts/interop/clients/install.sh aiperf guidellm). Also: afm-bench's
# open-loop schedule delay and each client's CPU per streamed chunk.
#   bash scripts/speed/mock_timing.sh [--streams 1,64,256,1024] [--clients afm-bench,aiperf,guidellm] [--out DIR]
# Writes DIR/timing.md (default target/mock-timing). Run it on a quiet
# machine: the clients and the mock share its cores.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
STREAMS="1,64,256,1024"
CLIENTS="afm-bench,aiperf,guidellm"
OUT="$ROOT/target/mock-timing"
while [ $# -gt 0 ]; do
    case "$1" in
    --streams) STREAMS="$2"; shift 2 ;;
    --clients) CLIENTS="$2"; shift 2 ;;
    --out) OUT="$2"; shift 2 ;;
    *) echo "unknown flag $1" >&2; exit 2 ;;
    esac
done
BENCH="${AFM_BENCH:-$ROOT/target/release/afm-bench}"
[ -x "$BENCH" ] || (cd "$ROOT" && cargo build --release -p afm-harness --bin afm-bench)
PORT="${PORT:-8790}"
# The mock's schedule: 50 ms to the first token, 10 ms between tokens, 32
# tokens a reply.
TTFT="${TTFT:-50}" ITL="${ITL:-10}" TOKENS="${TOKENS:-32}"
URL="http://127.0.0.1:$PORT"
mkdir -p "$OUT"
"$BENCH" mock --port "$PORT" --ttft "$TTFT" --itl "$ITL" --output-tokens "$TOKENS" >"$OUT/mock.log" 2>&1 &
MOCK=$!
trap 'kill $MOCK 2>/dev/null || true' EXIT
for _ in $(seq 50); do curl -sf "$URL/health" >/dev/null && break; sleep 0.1; done
log() { printf '[mock-timing] %s\n' "$*" >&2; }
reset() { curl -sf -X POST "$URL/mock/reset" >/dev/null; }
timing() { curl -sf "$URL/mock/timing" >"$1"; }

IFS=, read -ra LEVELS <<<"$STREAMS"
IFS=, read -ra WHO <<<"$CLIENTS"
for s in "${LEVELS[@]}"; do
    n=$((s * 2 > 32 ? s * 2 : 32))
    for c in "${WHO[@]}"; do
        dir="$OUT/$c-$s"
        rm -rf "$dir"
        mkdir -p "$dir"
        log "$c: $s streams, $n requests"
        reset
        case "$c" in
        afm-bench)
            # The checks stay on; the replays and nonce schemas would add
            # requests of another shape to the mock's record. Connections
            # are kept alive, as the other two clients keep theirs.
            "$BENCH" --url "$URL" --model mock --concurrency "$s" --requests "$n" --warmup 0 --keep-alive \
                --max-tokens "$TOKENS" --verify-alone 0 --schema-share 0 --out "$dir" \
                >"$dir/log" 2>&1
            ;;
        aiperf | guidellm)
            MODEL=mock WARMUP=0 CLIENTS="$c" MAX_TOKENS="$TOKENS" \
                bash "$ROOT/scripts/speed/clients_on.sh" "$URL" "$s" "$n" "$dir" >"$dir/log" 2>&1
            ;;
        *) log "unknown client $c"; exit 2 ;;
        esac
        timing "$dir/mock-timing.json"
    done
done
if [[ ",$CLIENTS," == *",afm-bench,"* ]]; then
    # The open loop: how late afm-bench starts requests against its own
    # schedule (Poisson arrivals at 200 req/s, about 70 in flight).
    dir="$OUT/afm-bench-open"
    rm -rf "$dir"
    "$BENCH" --url "$URL" --model mock --request-rate 200 --requests 2000 --warmup 0 --keep-alive \
        --max-tokens "$TOKENS" --verify-alone 0 --schema-share 0 --out "$dir" >"$dir.log" 2>&1
fi

python3 - "$OUT" "$STREAMS" "$CLIENTS" <<'PY' | tee "$OUT/timing.md"
import json, os, sys

out, streams, clients = sys.argv[1], sys.argv[2].split(","), sys.argv[3].split(",")


def mock(path):
    # The mock's own percentiles (GET /mock/timing), in ms.
    t = json.load(open(path))
    return {k: (t[k]["p50"], t[k]["p99"]) for k in ("ttft", "itl", "e2e")} | {"n": t["streams"]}


def client(c, dir):
    if c == "afm-bench":
        lv = json.load(open(os.path.join(dir, "bench.json")))["variants"][0]["levels"][0]
        cpu = lv.get("client_cpu") or {}
        return {"ttft": (lv["ttft"]["p50"], lv["ttft"]["p99"]), "itl": (lv["itl"]["p50"], lv["itl"]["p99"]),
                "e2e": (lv["e2e"]["p50"], lv["e2e"]["p99"]), "ok": lv["requests"] - lv["errors"],
                "us_chunk": cpu.get("us_per_chunk"), "us_process": cpu.get("process_us_per_chunk"), "note": ""}
    row = json.loads(open(os.path.join(dir, "results.jsonl")).readline())
    us = None
    if row.get("cpu_s") and row.get("chunks"):
        us = row["cpu_s"] * 1e6 / row["chunks"]
    return {"ttft": (row["ttft_p50_ms"], row["ttft_p99_ms"]), "itl": (row["itl_p50_ms"], row["itl_p99_ms"]),
            "e2e": (row["e2e_p50_ms"], row["e2e_p99_ms"]), "ok": row.get("requests_ok"), "us_chunk": None,
            "us_process": us, "note": "process CPU incl. start-up"}


def f(x):
    return "-" if x is None else f"{x:.1f}"


def d(a, b):
    return "-" if a is None or b is None else f"{a - b:+.1f}"


print("| streams | client | served | TTFT p50 client / mock (diff) | TTFT p99 | ITL p50 | ITL p99 | E2E p50 | E2E p99 "
      "| CPU per chunk: reading thread / process |")
print("|---:|---|---:|---|---|---|---|---|---|---:|")
for s in streams:
    for c in clients:
        dir = os.path.join(out, f"{c}-{s}")
        try:
            m, k = mock(os.path.join(dir, "mock-timing.json")), client(c, dir)
        except (OSError, ValueError, KeyError, IndexError, TypeError) as e:
            print(f"| {s} | {c} | failed: {type(e).__name__} {e} | | | | | | | |")
            continue
        cells = []
        for key in ("ttft", "itl", "e2e"):
            for i in (0, 1):
                cells.append(f"{f(k[key][i])} / {f(m[key][i])} ({d(k[key][i], m[key][i])})")
        us = f"{f(k['us_chunk'])} / {f(k['us_process'])} us"
        print(f"| {s} | {c} | {k['ok']} | " + " | ".join(cells) + f" | {us} |")
open_dir = os.path.join(out, "afm-bench-open")
if os.path.exists(os.path.join(open_dir, "bench.json")):
    lv = json.load(open(os.path.join(open_dir, "bench.json")))["variants"][0]["levels"][0]
    sd = lv.get("schedule_delay") or {}
    print()
    print(f"afm-bench open loop, {lv['label']}, {lv['requests']} requests: schedule delay "
          f"p50 {f(sd.get('p50'))} ms, p99 {f(sd.get('p99'))} ms, max {f(sd.get('max'))} ms; "
          f"CPU per chunk {f((lv.get('client_cpu') or {}).get('us_per_chunk'))} us (reading thread), "
          f"{f((lv.get('client_cpu') or {}).get('process_us_per_chunk'))} us (process).")
print()
print("Client: its own figures. Mock: the same requests as the mock sent them (TTFT from the "
      "request's arrival in its handler). ITL: AIPerf's is per request ((E2E - TTFT) / (tokens - 1)), "
      "GuideLLM's weighted by tokens, afm-bench's and the mock's every gap. CPU: afm-bench's reading "
      "thread (every stream is read on it) and its whole process; the others' whole process.")
PY
