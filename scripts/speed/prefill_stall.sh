#!/usr/bin/env bash
# The streams' pace while a long prompt is read (prefill_stall.py), on
# afm-serve with the f32 SmolLM2 export and no prefix cache; extra
# arguments go to afm-serve (e.g. --prefill-share 0 for whole chunks).
# BIN=path/to/afm-serve measures another build; MODEL another model folder
# (the 16,000-token run: MODEL=.cache/peers/conformance-32k, which
# scripts/speed/agents.sh makes, and WORDS=4100). Not part of CI (minutes).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
BIN="${BIN:-target/release/afm-serve}"
[ -x "$BIN" ] || cargo build --release -q -p afm-engine --bin afm-serve
F32=.cache/peers/smollm2-f32
[ -f "$F32/model.safetensors" ] ||
    "$BIN" convert --model .cache/models/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf --out "$F32" --dtype f32
. scripts/speed/serving.sh
MODEL="${MODEL:-$F32}"
start_server target/prefill-stall.log "$BIN" --model "$MODEL" --port 8413 --no-prefix-caching "$@"
wait_up http://127.0.0.1:8413
python3 scripts/speed/prefill_stall.py http://127.0.0.1:8413 "$MODEL" "${WORDS:-1750}"
stop_server
