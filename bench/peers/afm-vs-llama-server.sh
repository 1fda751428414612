#!/usr/bin/env bash
# afm-serve and llama.cpp's llama-server on the same machine and the same
# GGUF file (the bundled model), measured one after the other with the same
# afm-bench workload, then compared. Run on a quiet machine; not part of CI.
# Extra arguments go to both afm-bench runs (e.g. --concurrency 1,8).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
bash scripts/setup.sh
LLAMA_SERVER="$(bash bench/peers/llama-server.sh)"
cargo build --release -q -p afm-engine -p afm-harness --bins
GGUF="$(ls .cache/models/smollm2/*.gguf | head -1)"
OUT="${OUT:-target/peers}"
BENCH=(--concurrency 1,2,4,8 --requests 16 --max-tokens 64 --warmup 2 "$@")
mkdir -p "$OUT"

wait_healthy() {
    for _ in $(seq 1 120); do
        curl -sf "$1/health" >/dev/null && return 0
        sleep 1
    done
    echo "no healthy server at $1" >&2
    return 1
}

AFM_FLAGS=(--model smollm2 --enable-prefix-caching --enable-grammar-constraints --concurrent 8 --port 9999)
target/release/afm-serve "${AFM_FLAGS[@]}" >"$OUT/afm-serve.log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null || true' EXIT
wait_healthy http://127.0.0.1:9999
target/release/afm-bench --url http://127.0.0.1:9999 \
    --server-flags "afm-serve ${AFM_FLAGS[*]}" "${BENCH[@]}" --out "$OUT/afm-serve"
kill $pid; wait $pid 2>/dev/null || true

LLAMA_FLAGS=(-m "$GGUF" --port 8080 -np 8 -c 16384 -t "$(nproc)" --metrics)
LD_LIBRARY_PATH="$(dirname "$LLAMA_SERVER")" "$LLAMA_SERVER" "${LLAMA_FLAGS[@]}" \
    >"$OUT/llama-server.log" 2>&1 &
pid=$!
wait_healthy http://127.0.0.1:8080
target/release/afm-bench --url http://127.0.0.1:8080 \
    --server-flags "llama-server ${LLAMA_FLAGS[*]}" "${BENCH[@]}" --out "$OUT/llama-server"
kill $pid; wait $pid 2>/dev/null || true

target/release/afm-bench compare "$OUT/afm-serve" "$OUT/llama-server"
