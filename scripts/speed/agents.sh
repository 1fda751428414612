#!/usr/bin/env bash
# Coding-agent sessions as load (afm-bench --prompts agents): Codex's,
# Claude Code's and OpenCode's instructions and tools, whole, each session
# growing by a shell call and its output per turn, with streams decoding
# beside them (--background-streams) so the report gives their pace while
# a long prompt is read. Every server runs the same weights: the
# conformance model (its HF folder for afm-serve and mlx-lm, its Q8_0 GGUF
# of the same numbers for llama-server) with its context stretched to
# 32,768 positions (NTK-aware RoPE, rope_theta 100,000 to 418,294: the
# agents' prompts pass 8,192 tokens; speed only, the answers do not count).
# Not part of CI: a cold agent prompt takes minutes on a 2-core CPU.
#   SERVERS="afm-serve afm-serve-mlx llama-server mlx-lm" (default: all)
#   LEVELS=1,4 TURNS=3 BACKGROUND=4: afm-bench's --concurrency, --turns,
#   --background-streams. Results: target/agents-bench/NAME/bench.{json,html}
#   LONG_PROMPT="8000 16000": instead of the sessions, one prompt of each
#   length, cold and then as a cached turn (long_prompt.py), on each server;
#   prints the table of all of them (target/agents-bench/NAME.long.json).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
bash scripts/setup.sh
cargo build --release -q -p afm-engine -p afm-harness --bins
OUT="${OUT:-target/agents-bench}"
LEVELS="${LEVELS:-1,4}"
TURNS="${TURNS:-3}"
BACKGROUND="${BACKGROUND:-4}"
SERVERS="${SERVERS:-afm-serve afm-serve-mlx llama-server mlx-lm}"
HF=".cache/models/conformance/hf"
GGUF=".cache/models/conformance/afm-conformance.Q8_0.gguf"
LONG=".cache/peers/conformance-32k"
THETA=418294
mkdir -p "$OUT" "$LONG"
for f in model.safetensors tokenizer.json tokenizer_config.json chat_template.jinja generation_config.json; do
    [ -e "$HF/$f" ] && ln -sf "$ROOT/$HF/$f" "$LONG/$f"
done
python3 - "$HF/config.json" "$LONG/config.json" "$THETA" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
c["max_position_embeddings"] = 32768
c["rope_theta"] = float(sys.argv[3])
json.dump(c, open(sys.argv[2], "w"), indent=1)
PY
. scripts/speed/serving.sh

# run NAME PORT MODEL COMMAND...: starts the server, plays the sessions
# naming MODEL ("-": the one the server lists), stops it.
run() {
    local name="$1" port="$2" served="$3" model=()
    [ "$served" = - ] || model=(--model "$served")
    shift 3
    [[ " $SERVERS " == *" $name "* ]] || return 0
    start_server "$OUT/$name.log" "$@"
    wait_up "http://127.0.0.1:$port" /v1/models
    if [ -n "${LONG_PROMPT:-}" ]; then
        # shellcheck disable=SC2086
        python3 scripts/speed/long_prompt.py "http://127.0.0.1:$port" "$served" \
            "$OUT/$name.long.json" $LONG_PROMPT
        stop_server
        return 0
    fi
    target/release/afm-bench --url "http://127.0.0.1:$port" "${model[@]}" \
        --server-flags "$*" --prompts agents --turns "$TURNS" \
        --concurrency "$LEVELS" --requests "$(( (${LEVELS##*,} > 3 ? ${LEVELS##*,} : 3) * TURNS ))" \
        --max-tokens 32 --warmup 0 --schema-share 0 --verify-alone 0 \
        --background-streams "$BACKGROUND" --out "$OUT/$name"
    stop_server
}

run afm-serve 8431 - target/release/afm-serve --model "$LONG" --port 8431 --concurrent 8
run afm-serve-mlx 8432 - target/release/afm-serve --model "$LONG" --port 8432 --concurrent 8 --kernels mlx
if [[ " $SERVERS " == *" llama-server "* ]]; then
    LLAMA_SERVER="$(bash scripts/interop/peers/llama-server.sh)"
    # Its slots are capped at the GGUF's training context unless the
    # metadata says 32,768 too.
    run llama-server 8433 - "$LLAMA_SERVER" -m "$GGUF" --port 8433 --jinja -np 8 -c 262144 \
        --rope-freq-base "$THETA" --override-kv llama.context_length=int:32768 -t 2
fi
if [[ " $SERVERS " == *" mlx-lm "* ]]; then
    MLX_LM_BIN="$(bash scripts/interop/peers/mlx-lm.sh)"
    run mlx-lm 8434 "$LONG" "$MLX_LM_BIN/mlx_lm.server" --model "$LONG" --port 8434 --log-level WARNING
fi
if [ -n "${LONG_PROMPT:-}" ]; then
    python3 - "$OUT" $SERVERS <<'PY'
import json, pathlib, sys
out = pathlib.Path(sys.argv[1])
print("| server | prompt tokens | cold | prompt tok/s | cached turn | cached (reported) | cached / cold |")
print("|---|---:|---:|---:|---:|---:|---:|")
for name in sys.argv[2:]:
    f = out / f"{name}.long.json"
    if not f.exists():
        continue
    for r in json.loads(f.read_text()):
        c, t = r["cold"], r["cached"]
        print(f"| {name} | {c['prompt_tokens']:,} | {c['seconds']:.1f} s | {r['cold_prompt_tok_s']} "
              f"| {t['seconds']:.2f} s | {t['cached_tokens']} of {t['prompt_tokens']} | {100 * r['cached_share']:.1f}% |")
PY
    exit 0
fi
echo "results: $OUT/*/bench.html" >&2
