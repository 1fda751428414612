#!/usr/bin/env bash
# Interactive streams' inter-token latency with and without a Batch API
# batch running beside them (batch_itl.py), on afm-serve (release) with
# the bundled SmolLM2. Prints p50/p90/p99 ITL and TTFT for both phases,
# the batch's wall time and throughput, and the check of its output file;
# writes OUT/summary.json. Extra arguments go to afm-serve. Not part of CI
# (minutes).
#   PORT (8415)  OUT (target/batch-itl)  LINES (100)  STREAMS (4)
#   BATCH_CONCURRENCY (afm-serve's --batch-concurrency when set)
#   DURATION (60 s without batch)  STREAM_TOKENS (128)  BATCH_TOKENS (64)
#   BIN=path/to/afm-serve measures another build.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
BIN="${BIN:-target/release/afm-serve}"
PORT="${PORT:-8415}"
OUT="${OUT:-target/batch-itl}"
export LINES="${LINES:-100}" STREAMS="${STREAMS:-4}"
[ -x "$BIN" ] || cargo build --release -q -p afm-engine --bin afm-serve
mkdir -p "$OUT"
args=(--model smollm2 --port "$PORT")
[ -z "${BATCH_CONCURRENCY:-}" ] || args+=(--batch-concurrency "$BATCH_CONCURRENCY")
. scripts/speed/serving.sh
start_server "$OUT/server.log" "$BIN" "${args[@]}" "$@"
# The EXIT trap (serving.sh) stops the server; a signal exits through it.
trap 'exit 130' INT
trap 'exit 143' TERM
echo "afm-serve ${args[*]} $* (log: $OUT/server.log)"
wait_up "http://127.0.0.1:$PORT"
rc=0
SERVER_PID="$SERVER_PID" python3 scripts/speed/batch_itl.py "http://127.0.0.1:$PORT" "$OUT" || rc=$?
stop_server
exit "$rc"
