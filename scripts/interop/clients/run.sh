#!/usr/bin/env bash
# Real clients against afm-serve: the official openai SDK (tool loop,
# content parts, developer role), instructor (structured output), GuideLLM
# and AIPerf (short streamed chat load), and afm-bench on the same load.
#
#   scripts/interop/clients/run.sh [--no-capture] [openai|instructor|guidellm|aiperf|afm-bench]...
#
# Starts target/release/afm-serve itself (free port, no flags: grammar
# constraints and the prefix cache are on by default), installs the clients pinned in their
# own virtual environments (scripts/interop/clients/install.sh), runs each, and writes
# target/clients/: summary.md (the table), shapes.md (every request shape
# each client sent, with the server's status and error text), and one
# folder per client (its output, LABEL.log, LABEL.cmd, LABEL.time: CPU and
# wall time).
#
# Capture (default): every request of the openai and instructor scripts,
# and a short extra pass of each load client (file prompts and synthetic
# prompts, CAPTURE_REQUESTS requests), goes through capture_proxy.py, a
# logging proxy. The measured GuideLLM, AIPerf and afm-bench runs talk to
# the server directly. --no-capture runs everything directly.
#
# Exits 1 if a client failed a check, counted an error or exited non-zero.
# Linux: reads /proc and uses GNU time (scripts/interop/clients/install.sh installs it).
#
# openai_client.py and protocol_clients.py beside this script are not run
# here: cargo test runs them (engine/tests/openai_client.rs).
#
# Environment: REQUESTS (32), CONCURRENCY (4), MAX_TOKENS (32),
# CAPTURE_REQUESTS (4), AIPERF_FLAGS (--no-server-metrics; empty for
# AIPerf's defaults), AFM_SERVE / AFM_BENCH (the binaries), OUT.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../../.." && pwd)"
CACHE="$ROOT/.cache/clients"
OUT="${OUT:-$ROOT/target/clients}"
SERVE="${AFM_SERVE:-$ROOT/target/release/afm-serve}"
BENCH="${AFM_BENCH:-$ROOT/target/release/afm-bench}"
REQUESTS="${REQUESTS:-32}"
CONCURRENCY="${CONCURRENCY:-4}"
MAX_TOKENS="${MAX_TOKENS:-32}"
CAPTURE_REQUESTS="${CAPTURE_REQUESTS:-4}"
SYNTH_PROMPT_TOKENS=96
CAPTURE=1
CLIENTS=()
for a in "$@"; do
    case "$a" in
    --no-capture) CAPTURE=0 ;;
    openai | instructor | guidellm | aiperf | afm-bench) CLIENTS+=("$a") ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed -n 's/^# \{0,1\}//p'; exit 0 ;;
    *) echo "unknown argument '$a'" >&2; exit 2 ;;
    esac
done
((${#CLIENTS[@]})) || CLIENTS=(openai instructor guidellm aiperf afm-bench)

log() { printf '[clients] %s\n' "$*" >&2; }
for bin in "$SERVE" "$BENCH"; do
    [ -x "$bin" ] || { echo "missing $bin: cargo build --release first" >&2; exit 2; }
done

"$HERE/install.sh" "${CLIENTS[@]}"

rm -rf "$OUT"
mkdir -p "$OUT/data" "$OUT/bin"
# Copies, so a rebuild during the run changes nothing under it.
cp "$SERVE" "$OUT/bin/afm-serve"
cp "$BENCH" "$OUT/bin/afm-bench"
{
    echo "afm-serve: $(ls -l --time-style=+%FT%T "$SERVE" | awk '{print $6}') $("$SERVE" --version)"
    echo "git: $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null)$(git -C "$ROOT" diff --quiet HEAD -- engine harness 2>/dev/null || echo ' + uncommitted changes under engine/ or harness/')"
} >"$OUT/binary.txt"
SERVE="$OUT/bin/afm-serve"
BENCH="$OUT/bin/afm-bench"
python3 "$HERE/prompts.py" "$OUT/data" "$REQUESTS"

# GuideLLM's synthetic prompts and AIPerf need the model's tokenizer as a
# local folder (nothing is fetched from a hub): afm-serve exports one.
TOKENIZER="$CACHE/smollm2-hf"
if [ ! -s "$TOKENIZER/tokenizer.json" ]; then
    log "exporting the smollm2 tokenizer to $TOKENIZER"
    rm -rf "$TOKENIZER"
    "$SERVE" convert --model smollm2 --out "$TOKENIZER" --dtype keep >"$OUT/convert.log" 2>&1
fi

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
PORT="$(free_port)"
URL="http://127.0.0.1:$PORT"
SERVER_FLAGS="--model smollm2 --port $PORT"
PIDS=()
cleanup() {
    local p
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
}
trap cleanup EXIT
# shellcheck disable=SC2086
"$SERVE" $SERVER_FLAGS >"$OUT/server.log" 2>&1 &
SPID=$!
PIDS+=("$SPID")
for _ in $(seq 1 240); do
    curl -sf "$URL/health" >/dev/null 2>&1 && break
    kill -0 "$SPID" 2>/dev/null || { cat "$OUT/server.log" >&2; echo "afm-serve exited" >&2; exit 2; }
    sleep 0.5
done
curl -sf "$URL/health" >/dev/null || { echo "afm-serve did not answer /health" >&2; exit 2; }
MODEL="$(curl -sf "$URL/v1/models" | python3 -c 'import json,sys; print(json.load(sys.stdin)["data"][0]["id"])')"
log "afm-serve on $URL (model $MODEL)"
printf '%s\n' "target/release/afm-serve $SERVER_FLAGS" >"$OUT/server_command.txt"

TICK="$(getconf CLK_TCK)"
server_cpu() { # the server's user+sys CPU seconds so far
    awk -v t="$TICK" '{ printf "%.2f\n", ($14 + $15) / t }' "/proc/$SPID/stat" 2>/dev/null || echo 0
}
machine_cpu() { # busy CPU seconds of the whole machine so far (all processes)
    awk -v t="$TICK" '/^cpu / { printf "%.2f\n", ($2 + $3 + $4 + $7 + $8 + $9) / t }' /proc/stat 2>/dev/null || echo 0
}

# run NAME LABEL CMD...: runs CMD under /usr/bin/time, logs to
# $OUT/NAME/LABEL.log, records "user sys wall maxrss_kb exit server_cpu
# machine_cpu" (the last two: CPU seconds of afm-serve and of the whole
# machine over the run) in $OUT/NAME/LABEL.time and the command in LABEL.cmd.
run() {
    local name="$1" label="$2"
    shift 2
    local dir="$OUT/$name" before after mbefore mafter rc=0
    mkdir -p "$dir"
    printf '%q ' "$@" | sed "s#$ROOT/##g" >"$dir/$label.cmd"
    echo >>"$dir/$label.cmd"
    before="$(server_cpu)"
    mbefore="$(machine_cpu)"
    /usr/bin/time -o "$dir/$label.rusage" -f '%U %S %e %M' timeout 900 "$@" >"$dir/$label.log" 2>&1 || rc=$?
    after="$(server_cpu)"
    mafter="$(machine_cpu)"
    echo "$(tail -n1 "$dir/$label.rusage") $rc $(awk -v a="$after" -v b="$before" 'BEGIN { printf "%.2f", a - b }')" \
        "$(awk -v a="$mafter" -v b="$mbefore" 'BEGIN { printf "%.2f", a - b }')" >"$dir/$label.time"
    log "$name/$label: exit $rc, $(cut -d' ' -f3 "$dir/$label.time") s wall"
    return 0
}

# with_proxy NAME: starts a capture proxy tagged NAME; sets PROXY_URL.
PROXY_PID=""
with_proxy() {
    local pf="$OUT/.proxy-port"
    rm -f "$pf"
    python3 "$HERE/capture_proxy.py" --port 0 --upstream "$URL" --log "$OUT/capture.jsonl" \
        --tag "$1" --port-file "$pf" 2>>"$OUT/proxy.log" &
    PROXY_PID=$!
    PIDS+=("$PROXY_PID")
    for _ in $(seq 1 100); do [ -s "$pf" ] && break; sleep 0.1; done
    PROXY_URL="http://127.0.0.1:$(cat "$pf")"
}
stop_proxy() {
    [ -n "$PROXY_PID" ] && { kill "$PROXY_PID" 2>/dev/null || true; wait "$PROXY_PID" 2>/dev/null || true; }
    PROXY_PID=""
}

GUIDELLM="$CACHE/guidellm-venv/bin/guidellm"
AIPERF="$CACHE/aiperf-venv/bin/aiperf"
# Offline: GuideLLM's datasets/transformers must not look for a hub. (AIPerf
# is left online: with HF_HUB_OFFLINE it refuses a local tokenizer folder,
# and it resolves a local path without the network anyway.)
export HF_HOME="$CACHE/hf-home"
OFFLINE=(env HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TRANSFORMERS_OFFLINE=1)

# Each *_cmd sets CMD, the command line of one client run: URL OUTDIR N C.
guidellm_file_cmd() {
    CMD=("${OFFLINE[@]}" "$GUIDELLM" run \
        --backend "kind=openai_http,target=$1,model=$MODEL,max_tokens=$MAX_TOKENS" \
        --profile "kind=concurrent,streams=$4" \
        --constraint "kind=max_requests,count=$3" \
        --data "kind=json_file,path=$OUT/data/prompts.jsonl" \
        --output "kind=json,path=$2/benchmarks.json" \
        --disable-console-interactive)
}
guidellm_synthetic_cmd() {
    CMD=("${OFFLINE[@]}" "$GUIDELLM" run \
        --backend "kind=openai_http,target=$1,model=$MODEL" \
        --profile "kind=concurrent,streams=$4" \
        --constraint "kind=max_requests,count=$3" \
        --tokenizer "kind=huggingface_auto,model=$TOKENIZER" \
        --data "kind=synthetic_text,prompt_tokens=$SYNTH_PROMPT_TOKENS,output_tokens=$MAX_TOKENS" \
        --output "kind=json,path=$2/benchmarks-synthetic.json" \
        --disable-console-interactive)
}
# The measured AIPerf run passes --no-server-metrics (AIPERF_FLAGS): AIPerf's
# default scraping of the server's /metrics (every ~0.5 s, then parsed)
# about doubles its own CPU time, which on two cores comes out of the
# server's. The capture passes keep AIPerf's defaults.
AIPERF_FLAGS="${AIPERF_FLAGS---no-server-metrics}"
aiperf_file_cmd() { # ... [EXTRA FLAGS]
    CMD=("$AIPERF" profile --model "$MODEL" --url "$1" --endpoint-type chat --streaming \
        --input-file "$OUT/data/aiperf.jsonl" --custom-dataset-type single_turn \
        --dataset-sampling-strategy sequential \
        --concurrency "$4" --request-count "$3" --osl "$MAX_TOKENS" \
        --tokenizer "$TOKENIZER" --use-server-token-count --random-seed 7 \
        --no-gpu-telemetry --ui-type none --output-artifact-dir "$2")
    # shellcheck disable=SC2206 # flags are words
    [ -z "${5:-}" ] || CMD+=($5)
}
aiperf_synthetic_cmd() {
    CMD=("$AIPERF" profile --model "$MODEL" --url "$1" --endpoint-type chat --streaming \
        --isl "$SYNTH_PROMPT_TOKENS" --osl "$MAX_TOKENS" \
        --concurrency "$4" --request-count "$3" \
        --tokenizer "$TOKENIZER" --random-seed 7 \
        --no-gpu-telemetry --ui-type none --output-artifact-dir "$2")
}
afm_bench_cmd() { # ... [WARMUP]
    # --no-verify: the other clients' exact prompts, without isolation
    # markers appended.
    CMD=("$BENCH" --url "$1" --concurrency "$4" --requests "$3" --max-tokens "$MAX_TOKENS" \
        --prompts "$OUT/data/prompts.jsonl" --out "$2" --no-verify \
        --server-flags "afm-serve $SERVER_FLAGS")
    [ -z "${5:-}" ] || CMD+=(--warmup "$5")
}

for c in "${CLIENTS[@]}"; do
    log "== $c"
    case "$c" in
    openai | instructor)
        py="$CACHE/$c-venv/bin/python"
        script="$HERE/openai_sdk.py"
        [ "$c" = instructor ] && script="$HERE/instructor_city.py"
        target="$URL"
        if ((CAPTURE)); then with_proxy "$c"; target="$PROXY_URL"; fi
        run "$c" run "$py" "$script" "$target" --json "$OUT/$c/results.json"
        stop_proxy
        ;;
    guidellm)
        guidellm_file_cmd "$URL" "$OUT/guidellm" "$REQUESTS" "$CONCURRENCY"
        run guidellm run "${CMD[@]}"
        if ((CAPTURE)); then
            with_proxy guidellm
            guidellm_file_cmd "$PROXY_URL" "$OUT/guidellm/capture" "$CAPTURE_REQUESTS" 2
            run guidellm capture-file "${CMD[@]}"
            stop_proxy
            with_proxy guidellm-synthetic
            guidellm_synthetic_cmd "$PROXY_URL" "$OUT/guidellm/capture" "$CAPTURE_REQUESTS" 2
            run guidellm capture-synthetic "${CMD[@]}"
            stop_proxy
        fi
        ;;
    aiperf)
        aiperf_file_cmd "$URL" "$OUT/aiperf/artifacts" "$REQUESTS" "$CONCURRENCY" "$AIPERF_FLAGS"
        run aiperf run "${CMD[@]}"
        if ((CAPTURE)); then
            with_proxy aiperf
            aiperf_file_cmd "$PROXY_URL" "$OUT/aiperf/capture-file" "$CAPTURE_REQUESTS" 2
            run aiperf capture-file "${CMD[@]}"
            stop_proxy
            with_proxy aiperf-synthetic
            aiperf_synthetic_cmd "$PROXY_URL" "$OUT/aiperf/capture-synthetic" "$CAPTURE_REQUESTS" 2
            run aiperf capture-synthetic "${CMD[@]}"
            stop_proxy
        fi
        ;;
    afm-bench)
        afm_bench_cmd "$URL" "$OUT/afm-bench" "$REQUESTS" "$CONCURRENCY"
        run afm-bench run "${CMD[@]}"
        if ((CAPTURE)); then
            with_proxy afm-bench
            afm_bench_cmd "$PROXY_URL" "$OUT/afm-bench/capture" "$CAPTURE_REQUESTS" 2 0
            run afm-bench capture-file "${CMD[@]}"
            stop_proxy
        fi
        ;;
    esac
done

rc=0
python3 "$HERE/summary.py" "$OUT" "${CLIENTS[@]}" || rc=$?
log "wrote $OUT/summary.md and $OUT/shapes.md"
exit "$rc"
