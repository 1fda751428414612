#!/usr/bin/env bash
# afm-serve, mlx-lm's server and llama.cpp's llama-server on the same
# machine and the same weights (a GGUF: the bundled SmolLM2, or Gemma 3 270M
# with MODEL=gemma3-270m; mlx-lm gets it through `afm-serve convert --dtype
# f32`, since MLX reads neither file's quantization), measured one after
# the other with the same afm-bench workload, then
# compared. For each server: a cold first request right after start-up (a
# ~1,000-token prompt, `--prompts long`: time to first token is prefill),
# then the sweep at 1, 8 and 32 concurrent requests, 32 slots each. Run on a quiet machine; not part of CI
# (it takes tens of minutes, more the first time: llama-server is built from
# source). Extra arguments go to every sweep (e.g. --concurrency 1,8);
# PEERS="mlx-lm llama-server" re-measures some servers only.
# Results: $OUT/<server>/bench.{json,html}, $OUT/<server>-cold/, and the
# comparisons printed at the end ($OUT: target/peers, or
# target/peers/gemma3-270m).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
bash scripts/setup.sh
cargo build --release -q -p afm-engine -p afm-harness --bins
LLAMA_SERVER="$(bash scripts/interop/peers/llama-server.sh)"
MLX_LM_BIN="$(bash scripts/interop/peers/mlx-lm.sh)"
MODEL="${MODEL:-smollm2}"
case "$MODEL" in
smollm2) OUT="${OUT:-target/peers}" ;;
gemma3-270m) OUT="${OUT:-target/peers/$MODEL}" ;;
*) echo "MODEL must be smollm2 or gemma3-270m, not '$MODEL'" >&2; exit 2 ;;
esac
GGUF="$(ls .cache/models/"$MODEL"/*.gguf | head -1)"
F32_DIR=".cache/peers/$MODEL-f32"
[ -f "$F32_DIR/model.safetensors" ] ||
    target/release/afm-serve convert --model "$GGUF" --out "$F32_DIR" --dtype f32
# mlx-lm runs MLX on the same OpenBLAS as afm: give it the same kernels
# (afm-serve restarts itself with this when OpenBLAS picked its SSE3 ones).
core="$(sed -n 's/^OPENBLAS_CORETYPE = "\(.*\)"$/\1/p' .cargo/config.toml 2>/dev/null)"
[ -z "$core" ] || [ -n "${OPENBLAS_CORETYPE:-}" ] || export OPENBLAS_CORETYPE="$core"
MAX_SEQS=32
SWEEP=(--concurrency 1,8,32 --requests 32 --max-tokens 64 --warmup 2 "$@")
COLD=(--concurrency 1 --requests 1 --max-tokens 8 --warmup 0 --prompts long)
mkdir -p "$OUT"

. scripts/speed/serving.sh

# run NAME PORT MODEL COMMAND...: starts the server, measures with requests
# naming MODEL ("-": the one the server lists), stops it.
run() {
    local name="$1" port="$2" model=()
    [ "$3" = - ] || model=(--model "$3")
    shift 3
    [[ " ${PEERS:-afm-serve mlx-lm llama-server} " == *" $name "* ]] || return 0
    start_server "$OUT/$name.log" "$@"
    wait_up "http://127.0.0.1:$port"
    local flags="$*"
    target/release/afm-bench --url "http://127.0.0.1:$port" "${model[@]}" \
        --server-flags "$flags" "${COLD[@]}" --out "$OUT/$name-cold"
    target/release/afm-bench --url "http://127.0.0.1:$port" "${model[@]}" \
        --server-flags "$flags" "${SWEEP[@]}" --out "$OUT/$name"
    stop_server
}

run afm-serve 9999 - target/release/afm-serve --model "$GGUF" --enable-prefix-caching \
    --concurrent "$MAX_SEQS" --port 9999
# mlx-lm loads the model a request names; it lists none of its own.
run mlx-lm 8081 "$F32_DIR" "$MLX_LM_BIN/mlx_lm.server" --model "$F32_DIR" --port 8081 \
    --decode-concurrency "$MAX_SEQS" --log-level WARNING
LD_LIBRARY_PATH="$(dirname "$LLAMA_SERVER")" run llama-server 8080 - "$LLAMA_SERVER" \
    -m "$GGUF" --port 8080 -np "$MAX_SEQS" -c $((MAX_SEQS * 2048)) -t "$(nproc)" --metrics

# Each server's kernels, as it said at start-up: afm-serve's quantized
# matmul and attention, llama.cpp's system_info, mlx-lm's BLAS core.
echo "ISA on this machine:"
[ ! -f "$OUT/afm-serve.log" ] ||
    echo "  afm-serve: $(grep -m1 -o 'quantized matmul on the CPU: .*' "$OUT/afm-serve.log" || echo '?')"
# llama.cpp's server no longer logs its system_info line at the default
# verbosity: then the ISA options its build was configured with.
llama_isa() {
    grep -m1 -o 'CPU : .*' "$OUT/llama-server.log" || grep -m1 'system_info' "$OUT/llama-server.log" ||
        sed -n 's/^GGML_\([A-Z0-9_]*\):BOOL=ON$/\1/p' \
            "$(dirname "$(dirname "$LLAMA_SERVER")")/CMakeCache.txt" 2>/dev/null | grep -E '^(SSE|AVX|FMA|F16C|BMI|AMX)' |
        tr '\n' ' ' || echo '?'
}
[ ! -f "$OUT/llama-server.log" ] ||
    echo "  llama-server ($(basename "$(dirname "$(dirname "$(dirname "$LLAMA_SERVER")")")")): built for $(llama_isa)"
[ ! -f "$OUT/mlx-lm.log" ] ||
    echo "  mlx-lm: MLX's CPU backend, OpenBLAS core ${OPENBLAS_CORETYPE:-as detected}"
for peer in mlx-lm llama-server; do
    # Only the servers measured (PEERS), and those of an earlier run.
    [ -f "$OUT/afm-serve/bench.json" ] && [ -f "$OUT/$peer/bench.json" ] || continue
    target/release/afm-bench compare "$OUT/afm-serve" "$OUT/$peer"
    target/release/afm-bench compare "$OUT/afm-serve-cold" "$OUT/$peer-cold"
done
