#!/usr/bin/env bash
# afm-serve under a soak: mixed traffic over the four protocols (streams
# and whole replies, grammar, tools, n > 1, disconnects, cancels, fuzzed
# bodies) for DURATION seconds, judged by afm-bench soak's rule (no 5xx,
# resident memory flat after the warm-up, no descriptor growth, p99
# steady). Extra arguments go to afm-serve.
#   bash scripts/soak.sh                   # 30 minutes, afm-serve's defaults
#   DURATION=120 WARMUP=40 SPAN=40 SAMPLE=5 bash scripts/soak.sh --prefix-cache-mb 32
# (CI's 2-minute form: a 32 MiB prefix cache fills within its warm-up, so
# the memory rule judges leaks, not the cache filling to its budget.)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
DURATION="${DURATION:-1800}"
WARMUP="${WARMUP:-600}"
SPAN="${SPAN:-600}"
SAMPLE="${SAMPLE:-10}"
OUT="${OUT:-target/soak}"
PORT="${PORT:-18900}"
cargo build -q -p afm-engine --bin afm-serve
cargo build -q -p afm-harness --bin afm-bench
target/debug/afm-serve --port "$PORT" --log-level warn "$@" &
SERVER=$!
trap 'kill "$SERVER" 2>/dev/null; wait "$SERVER" 2>/dev/null || true' EXIT
# afm-serve listens once its model is loaded.
for _ in $(seq 1 240); do
    (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null && break
    sleep 0.5
done
target/debug/afm-bench soak --url "http://127.0.0.1:$PORT" --server-pid "$SERVER" \
    --duration "$DURATION" --warmup "$WARMUP" --span "$SPAN" --sample "$SAMPLE" --out "$OUT"
