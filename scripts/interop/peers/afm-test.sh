#!/usr/bin/env bash
# afm-test against a peer server on the bundled model, gated like afm's own
# engine: the run is compared with the committed report of that peer
# (reports/baselines/peers/PEER.json), whose failures are each attributed in
# reports/baselines/peers/PEER.known.toml to the peer's documented behaviour.
#
#   scripts/interop/peers/afm-test.sh PEER [TIER] [--refresh]
#
# PEER: mlx-lm (mlx_lm.server, the CPU build of MLX, on the bundled model
# exported by `afm-serve convert --dtype f32`) or llama-server (llama.cpp's
# server built from source, on the GGUF itself). Both get the tools-aware
# ChatML template of fixtures/templates/, since the bundled model's own
# template offers no tools. afm-test starts and stops the server itself.
# With MODEL=conformance the peer serves the conformance model instead
# (fixtures/models/conformance/: it thinks and calls tools, with its own Qwen3-style
# template): mlx-lm its HF folder, llama-server its GGUF, each with its
# defaults (both parse `<think>` and Hermes calls unasked); the committed
# report is then reports/baselines/peers/PEER-conformance.json.
# TIER defaults to full. `--refresh` replaces the committed report with
# this run instead of diffing (commit it with the reasons of any new
# failure). Exit status: afm-test diff's (1 on a regression).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
cd "$ROOT"
PEER="${1:?usage: scripts/interop/peers/afm-test.sh mlx-lm|llama-server [TIER] [--refresh]}"
TIER="${2:-full}"
REFRESH="${3:-}"
TEMPLATE=fixtures/templates/chatml-tools.jinja
GGUF="$(ls .cache/models/smollm2/*.gguf | head -1)"
# AFM_TEST / AFM_SERVE: prebuilt binaries to use instead of `cargo run`
# (afm-test built without its engine feature tests peers as well).
afm_test() { if [ -n "${AFM_TEST:-}" ]; then "$AFM_TEST" "$@"; else cargo run -q -p afm-harness --bin afm-test -- "$@"; fi; }
afm_serve() { if [ -n "${AFM_SERVE:-}" ]; then "$AFM_SERVE" "$@"; else cargo run -q -p afm-engine --bin afm-serve -- "$@"; fi; }

CONFORMANCE=.cache/models/conformance
case "$PEER:${MODEL:-smollm2}" in
mlx-lm:conformance)
    BIN="$(bash scripts/interop/peers/mlx-lm.sh)"
    MODEL="$CONFORMANCE/hf"
    SERVER="$BIN/mlx_lm.server --model {model} --port {port} --log-level WARNING"
    SUFFIX=-conformance
    ;;
llama-server:conformance)
    BIN="$(bash scripts/interop/peers/llama-server.sh)"
    MODEL="$CONFORMANCE/afm-conformance.Q8_0.gguf"
    export LD_LIBRARY_PATH="$(dirname "$BIN")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    KEY=afm-peer-key
    SERVER="$BIN -m {model} --port {port} --jinja -np 8 -c 16384 -t $(nproc) --api-key $KEY"
    SUFFIX=-conformance
    ;;
mlx-lm:smollm2)
    BIN="$(bash scripts/interop/peers/mlx-lm.sh)"
    MODEL=.cache/peers/smollm2-f32
    [ -f "$MODEL/model.safetensors" ] ||
        afm_serve convert --model "$GGUF" \
            --out "$MODEL" --dtype f32 >&2
    # mlx_lm.server takes the template's text, not a file.
    SERVER="$BIN/mlx_lm.server --model {model} --port {port} --log-level WARNING --chat-template \"\$(cat $TEMPLATE)\""
    ;;
llama-server:smollm2)
    BIN="$(bash scripts/interop/peers/llama-server.sh)"
    MODEL="$GGUF"
    export LD_LIBRARY_PATH="$(dirname "$BIN")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    # With a key, so the security cases run (mlx_lm.server has no key option).
    KEY=afm-peer-key
    SERVER="$BIN -m {model} --port {port} --jinja --chat-template-file $TEMPLATE -np 8 -c 16384 -t $(nproc) --api-key $KEY"
    ;;
*)
    echo "unknown peer '$PEER' (mlx-lm or llama-server) or MODEL '${MODEL:-}' (smollm2 or conformance)" >&2
    exit 2
    ;;
esac

OUT="target/peers-test/$PEER${SUFFIX:-}-$TIER"
BASELINE="reports/baselines/peers/$PEER${SUFFIX:-}.json"
KNOWN="reports/baselines/peers/$PEER.known.toml"
rc=0
# Graded by what the official clients do with each reply that fails a
# rule (`--clients`: the project's venv has openai and anthropic).
afm_test run --tier "$TIER" --seed 1 --server "$SERVER" --model "$MODEL" ${KEY:+--api-key "$KEY"} \
    --clients "${AFM_CLIENTS:-$ROOT/.cache/venv/bin/python}" \
    --known-failures "$KNOWN" --out "$OUT" || rc=$?
[ "$rc" -le 1 ] || exit "$rc"
if [ "$REFRESH" = "--refresh" ]; then
    # The committed copy names the checkout ".", not where it was made.
    sed "s|$ROOT|.|g" "$OUT/report.json" >"$BASELINE"
    echo "peers: $BASELINE replaced by this run"
else
    afm_test diff "$BASELINE" "$OUT/report.json" --known-failures "$KNOWN" \
        --html "$OUT/diff.html"
fi
