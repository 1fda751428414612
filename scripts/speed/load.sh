#!/usr/bin/env bash
# afm-bench's load runs against afm-serve, mlx-lm's server and llama.cpp's
# llama-server on the bundled SmolLM2 (mlx-lm on its f32 export), one
# server at a time, every reply checked:
#   sweep:    an open-loop sweep (Poisson arrivals at each rate, synthetic
#             prompts of 128 tokens, 32 output tokens) with one SLO set and
#             a search for the highest rate that keeps 90% correct goodput
#             (afm-serve, mlx-lm);
#   turns:    4-turn conversations, 4 users: cached tokens reported against
#             the history the client sent before (afm-serve, mlx-lm,
#             llama-server);
#   protocols: Anthropic Messages and OpenAI Responses (afm-serve).
# Not part of CI (tens of minutes). RUNS="sweep turns protocols" and
# PEERS="afm-serve mlx-lm llama-server" pick some; AFM_BENCH / AFM_SERVE
# point at prebuilt binaries. Results: $OUT/<run>-<server>/bench.{json,html}
# and requests.jsonl.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
AFM_BENCH="${AFM_BENCH:-target/release/afm-bench}"
AFM_SERVE="${AFM_SERVE:-target/release/afm-serve}"
if [ ! -x "$AFM_BENCH" ] || [ ! -x "$AFM_SERVE" ]; then
    bash scripts/setup.sh
    cargo build --release -q -p afm-engine -p afm-harness --bins
fi
LLAMA_SERVER="$(bash scripts/interop/peers/llama-server.sh)"
MLX_LM_BIN="$(bash scripts/interop/peers/mlx-lm.sh)"
GGUF="$(ls .cache/models/smollm2/*.gguf | head -1)"
F32_DIR=.cache/peers/smollm2-f32
[ -f "$F32_DIR/model.safetensors" ] ||
    "$AFM_SERVE" convert --model "$GGUF" --out "$F32_DIR" --dtype f32
OUT="${OUT:-target/bench-load}"
SLOTS=8
SLO=(--goodput ttft:2000 tpot:150 e2el:8000)
mkdir -p "$OUT"

. scripts/speed/serving.sh

# server NAME: the command that serves NAME on its port, and its port.
server() {
    case "$1" in
    afm-serve) PORT=9999 MODEL=() TOKENIZER=()
        CMD=("$AFM_SERVE" --model "$GGUF" --concurrent "$SLOTS" --port 9999) ;;
    # mlx-lm labels its streamed usage chunk "chat.completion" (afm-test's
    # known failure): tolerated, so it does not hide the rest.
    mlx-lm) PORT=8081 MODEL=(--model "$F32_DIR" --tolerate stream)
        TOKENIZER=(--tokenizer "$F32_DIR/tokenizer.json")
        CMD=("$MLX_LM_BIN/mlx_lm.server" --model "$F32_DIR" --port 8081
            --decode-concurrency "$SLOTS" --log-level WARNING) ;;
    llama-server) PORT=8080 MODEL=() TOKENIZER=()
        CMD=("$LLAMA_SERVER" -m "$GGUF" --port 8080 -np "$SLOTS" -c $((SLOTS * 4096))
            -t "$(nproc)" --metrics --jinja) ;;
    esac
}

# bench RUN NAME TAG ARGS...: starts NAME's server, runs afm-bench into
# $OUT/TAG, stops it.
bench() {
    local run="$1" name="$2" tag="$3"
    shift 3
    [[ " ${RUNS:-sweep turns protocols} " == *" $run "* ]] || return 0
    [[ " ${PEERS:-afm-serve mlx-lm llama-server} " == *" $name "* ]] || return 0
    server "$name"
    start_server "$OUT/$tag.log" env LD_LIBRARY_PATH="$(dirname "$LLAMA_SERVER")" "${CMD[@]}"
    wait_up "http://127.0.0.1:$PORT" /v1/models
    "$AFM_BENCH" --url "http://127.0.0.1:$PORT" "${MODEL[@]}" --server-flags "${CMD[*]}" \
        --save-requests --out "$OUT/$tag" "$@" | tee "$OUT/$tag.txt"
    stop_server
}

for name in afm-serve mlx-lm; do
    server "$name"
    bench sweep "$name" "sweep-$name" --request-rate 0.5,1,2,4 --max-concurrency 16 --requests 24 \
        --input-len 128 "${TOKENIZER[@]}" --max-tokens 32 --warmup 2 "${SLO[@]}" \
        --schema-share 0.25 --verify-alone 4
    bench sweep "$name" "search-$name" --request-rate 0.5 --max-concurrency 16 --requests 16 \
        --input-len 128 "${TOKENIZER[@]}" --max-tokens 32 --warmup 1 "${SLO[@]}" \
        --slo-search 90 --search-steps 5
done
for name in afm-serve mlx-lm llama-server; do
    bench turns "$name" "turns-$name" --concurrency 4 --turns 4 --requests 32 --max-tokens 24 --warmup 0
done
for endpoint in messages responses; do
    bench protocols afm-serve "protocols-$endpoint" --endpoint "$endpoint" --concurrency 1,4 \
        --requests 8 --max-tokens 24 --schema-share 0.25
done
