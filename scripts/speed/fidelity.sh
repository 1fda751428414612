#!/usr/bin/env bash
# afm-bench's default checks, cancellation and token counts against real
# servers on the bundled model (docs/bench.md, "Every reply checked"):
#  1. afm-serve, and a cross-talk proxy in front of it (`afm-bench mock
#     --upstream --fault cross-talk`), with afm-bench's default flags on the
#     four protocols: the proxy's replies are corrupted, afm-serve's not;
#  2. a quarter of requests cancelled after 0.3 s against afm-serve and
#     mlx-lm's server: what each did with them;
#  3. output tokens re-counted with the served tokenizer against afm-serve,
#     llama-server and mlx-lm.
#   bash scripts/speed/fidelity.sh [--out DIR] [--only checks,cancel,tokens]
# Needs target/release/{afm-serve,afm-bench} and the peers of
# scripts/interop/peers/{mlx-lm,llama-server}.sh (installed when missing).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
OUT="target/fidelity"
ONLY="checks,cancel,tokens"
while [ $# -gt 0 ]; do
    case "$1" in
    --out) OUT="$2"; shift 2 ;;
    --only) ONLY="$2"; shift 2 ;;
    *) echo "unknown flag $1" >&2; exit 2 ;;
    esac
done
want() { [[ ",$ONLY," == *",$1,"* ]]; }
BENCH=target/release/afm-bench
SERVE=target/release/afm-serve
[ -x "$BENCH" ] && [ -x "$SERVE" ] || cargo build --release -p afm-engine --bin afm-serve -p afm-harness --bin afm-bench
mkdir -p "$OUT"
log() { printf '[fidelity] %s\n' "$*" >&2; }
MLX_LM="${MLX_LM_VERSION:-0.32.2}"
MLX_SERVER=".cache/peers/mlx-lm-$MLX_LM/bin/mlx_lm.server"
LLAMA_BIN=""
peers() {
    [ -x "$MLX_SERVER" ] || bash scripts/interop/peers/mlx-lm.sh >/dev/null
    [ -f .cache/peers/smollm2-f32/model.safetensors ] ||
        "$SERVE" convert --model .cache/models/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf \
            --out .cache/peers/smollm2-f32 --dtype f32 >&2
    # Built once, with this CPU's widest kernels (its folder names the ISA).
    LLAMA_BIN="$(dirname "$(bash scripts/interop/peers/llama-server.sh)")"
}
# Each run's headline lines into the summary.
summary() { grep -E "served|schema nonce check|replayed alone|cross-talk|cancelled:|output tokens:|failures" "$1" | sed 's/^ *//'; }

if want checks; then
    port=8801
    "$SERVE" --model smollm2 --port "$port" >"$OUT/afm-serve.log" 2>&1 &
    SERVER=$!
    "$BENCH" mock --port 8802 --upstream "http://127.0.0.1:$port" --fault cross-talk >"$OUT/proxy.log" 2>&1 &
    PROXY=$!
    trap 'kill $SERVER $PROXY 2>/dev/null || true' EXIT
    for _ in $(seq 300); do curl -sf "http://127.0.0.1:$port/health" >/dev/null && break; sleep 0.2; done
    for ep in chat completions messages responses; do
        for who in afm-serve proxy; do
            url="http://127.0.0.1:$port"
            [ "$who" = proxy ] && url="http://127.0.0.1:8802"
            log "checks: $who, $ep, default flags"
            "$BENCH" --url "$url" --endpoint "$ep" --concurrency 4 --out "$OUT/checks-$who-$ep" \
                >"$OUT/checks-$who-$ep.log" 2>&1
            { echo "## $who $ep"; summary "$OUT/checks-$who-$ep.log"; } >>"$OUT/summary.txt"
        done
    done
    kill $SERVER $PROXY 2>/dev/null || true
    wait 2>/dev/null || true
    trap - EXIT
fi

if want cancel || want tokens; then peers; fi
# bench NAME SERVER-COMMAND FLAGS...: afm-bench starting the server itself.
bench() {
    local name="$1" server="$2"
    shift 2
    log "$name"
    "$BENCH" --server "$server" "$@" --out "$OUT/$name" >"$OUT/$name.log" 2>&1 || true
    { echo "## $name"; summary "$OUT/$name.log"; } >>"$OUT/summary.txt"
}
CANCEL=(--concurrency 4 --requests 32 --max-tokens 200 --request-cancellation-rate 25
    --request-cancellation-delay 0.3)
if want cancel; then
    bench cancel-afm-serve "$SERVE --model smollm2 --port {port}" "${CANCEL[@]}"
    bench cancel-mlx-lm "$MLX_SERVER --model .cache/peers/smollm2-f32 --port {port} --log-level WARNING" \
        --model .cache/peers/smollm2-f32 "${CANCEL[@]}"
fi
if want tokens; then
    # afm-serve counts with its count_tokens endpoint (a message around the
    # text) unless given the model's tokenizer file; both are shown.
    bench tokens-afm-serve "$SERVE --model smollm2 --port {port}" --concurrency 4 --requests 32
    bench tokens-afm-serve-file "$SERVE --model smollm2 --port {port}" \
        --tokenizer .cache/peers/smollm2-f32/tokenizer.json --concurrency 4 --requests 32
    bench tokens-llama-server "env LD_LIBRARY_PATH=$LLAMA_BIN $LLAMA_BIN/llama-server -m .cache/models/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf --port {port} -np 4 -c 8192 -t 2" \
        --concurrency 4 --requests 32
    bench tokens-mlx-lm "$MLX_SERVER --model .cache/peers/smollm2-f32 --port {port} --log-level WARNING" \
        --model .cache/peers/smollm2-f32 --tokenizer .cache/peers/smollm2-f32/tokenizer.json \
        --concurrency 4 --requests 32
fi
cat "$OUT/summary.txt"
