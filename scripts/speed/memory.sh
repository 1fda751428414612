#!/usr/bin/env bash
# Memory a server holds across bursts of concurrent requests: after each
# burst, the server process's resident memory, the GPU memory it holds
# (nvidia-smi, where there is one) and, for afm-serve, MLX's own counters
# from /metrics (live arrays, freed-but-cached buffers, the cache's bound).
# Memory that keeps growing burst after burst is a leak or an unbounded
# cache; a bound shows as a flat line after the first burst.
#
#   scripts/speed/memory.sh [--bursts N] [--concurrency C] [--output-len T] [--no-verify]
#                   [--model NAME] [--tolerate CHECK] [--agents TURNS] -- SERVER...
#
# SERVER is the command that serves on $PORT (default 8090), for example
#   scripts/speed/memory.sh -- target/release/afm-serve --model smollm2 --port 8090
#   scripts/speed/memory.sh -- target/release/afm-serve --kernels mlx --model smollm2 --port 8090
# (the second runs afm-serve on MLX's own ops alone, the path a GPU takes).
# Each burst is one afm-bench level: C requests at once, T tokens each
# (end of text ignored), none asking for a JSON schema (so servers that
# enforce schemas and servers that do not get the same workload), every
# reply checked (unless --no-verify, for
# random weights); --model is the name requests send (default: the first
# id the server lists; --tolerate CHECK passes afm-bench's flag, e.g.
# `--tolerate stream` for mlx-lm's `chat.completion` usage label, so its
# replies count as served). --agents TURNS makes each burst C coding-agent
# sessions of TURNS turns instead (afm-bench --prompts agents: the agents'
# whole instructions and tools, each turn adding a shell call and its
# output, replies of --output-len tokens, answers not checked), new sessions
# every burst, so the prefix cache keeps taking conversations it must
# evict. Prints one row per burst;
# AFM_BENCH names the afm-bench binary (default target/release/afm-bench).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BURSTS=5
CONCURRENCY=64
OUTPUT_LEN=128
BENCH_FLAGS=()
AGENT_TURNS=0
while [ $# -gt 0 ]; do
    case "$1" in
    --bursts) BURSTS="$2"; shift 2 ;;
    --concurrency) CONCURRENCY="$2"; shift 2 ;;
    --output-len) OUTPUT_LEN="$2"; shift 2 ;;
    --no-verify) BENCH_FLAGS+=(--no-verify); shift ;;
    --model) BENCH_FLAGS+=(--model "$2"); shift 2 ;;
    --tolerate) BENCH_FLAGS+=(--tolerate "$2"); shift 2 ;;
    --agents) AGENT_TURNS="$2"; shift 2 ;;
    --) shift; break ;;
    *) echo "memory.sh: unknown argument '$1' (--bursts N, --concurrency C, --output-len T, --model NAME, --tolerate CHECK, --agents TURNS, -- SERVER...)" >&2; exit 2 ;;
    esac
done
[ $# -gt 0 ] || { echo "memory.sh: no server command after --" >&2; exit 2; }
PORT="${PORT:-8090}"
URL="http://127.0.0.1:$PORT"
AFM_BENCH="${AFM_BENCH:-$ROOT/target/release/afm-bench}"
[ -x "$AFM_BENCH" ] || { echo "memory.sh: no afm-bench at $AFM_BENCH (cargo build --release -p afm-harness --bin afm-bench)" >&2; exit 2; }
WORK="$(mktemp -d)"
"$@" >"$WORK/server.log" 2>&1 &
PID=$!
trap 'kill $PID 2>/dev/null || true; wait $PID 2>/dev/null || true; rm -rf "$WORK"' EXIT
for _ in $(seq 1 600); do
    curl -sf "$URL/v1/models" >/dev/null && break
    kill -0 "$PID" 2>/dev/null || { cat "$WORK/server.log" >&2; echo "memory.sh: the server exited" >&2; exit 1; }
    sleep 1
done
curl -sf "$URL/v1/models" >/dev/null || { echo "memory.sh: no server at $URL" >&2; exit 1; }

# Resident memory of the server and its children, MiB.
rss() {
    local total=0 p
    for p in $PID $(pgrep -P "$PID" || true); do
        total=$((total + $(awk '/^VmRSS:/ {print $2}' "/proc/$p/status" 2>/dev/null || echo 0)))
    done
    echo $((total / 1024))
}
# GPU memory held by the server's processes, MiB ("-" without nvidia-smi).
gpu() {
    command -v nvidia-smi >/dev/null || { echo -; return; }
    local pids used
    pids="$PID $(pgrep -P "$PID" | tr '\n' ' ')"
    used="$(nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits 2>/dev/null |
        awk -F', *' -v pids=" $pids " 'index(pids, " " $1 " ") {s += $2} END {print s + 0}')"
    echo "$used"
}
# MLX's counter STATE from afm-serve's /metrics, MiB ("-" for other servers).
mlx() {
    curl -sf "$URL/metrics" 2>/dev/null |
        awk -v s="$1" '$1 == "afm_device_memory_bytes{state=\"" s "\"}" {printf "%d", $2 / 1048576; f = 1} END {if (!f) print "-"}'
}
row() {
    printf '| %s | %s | %s | %s | %s | %s | %s |\n' "$1" "$2" "$(rss)" "$(gpu)" "$(mlx active)" "$(mlx cached)" "$(mlx cache_limit)"
}
echo "| burst | served | RSS MiB | GPU MiB | MLX active MiB | MLX cached MiB | cache bound MiB |"
echo "|---:|---:|---:|---:|---:|---:|---:|"
row "after load" -
for b in $(seq 1 "$BURSTS"); do
    if [ "$AGENT_TURNS" -gt 0 ]; then
        # One level's salt per run: each burst's sessions are new ones.
        "$AFM_BENCH" run --url "$URL" --prompts agents --turns "$AGENT_TURNS" \
            --concurrency "$CONCURRENCY" --requests "$((CONCURRENCY * AGENT_TURNS))" \
            --max-tokens "$OUTPUT_LEN" --seed "$b" --warmup 0 --schema-share 0 --verify-alone 0 \
            "${BENCH_FLAGS[@]}" --out "$WORK/bench-$b" >"$WORK/bench-$b.txt" 2>&1 || true
    else
        "$AFM_BENCH" run --url "$URL" --concurrency "$CONCURRENCY" --requests "$CONCURRENCY" \
            --output-len "$OUTPUT_LEN" --max-tokens "$OUTPUT_LEN" --ignore-eos --seed "$b" \
            --warmup 0 --schema-share 0 "${BENCH_FLAGS[@]}" --out "$WORK/bench-$b" >"$WORK/bench-$b.txt" 2>&1 || true
    fi
    served="$(python3 -c 'import json, sys
lv = json.load(open(sys.argv[1]))["variants"][0]["levels"][0]
print("%d/%d" % (lv["requests"] - lv["errors"] - lv["corrupted"], lv["requests"]))' "$WORK/bench-$b/bench.json" 2>/dev/null || echo "?")"
    row "$b" "$served"
done
