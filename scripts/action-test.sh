#!/usr/bin/env bash
# Tests the GitHub Action's step (scripts/action.sh) as a runner runs it:
# GITHUB_ACTIONS, CI, GITHUB_WORKSPACE, RUNNER_TEMP, GITHUB_STEP_SUMMARY and
# GITHUB_OUTPUT set as GitHub sets them, each run in its own folder under
# target/action-test:
#   1. afm-serve (smoke tier, no baseline): exit 0, the summary written,
#      the report named in the outputs; its report becomes the baseline;
#   2. the same server against that baseline: exit 0, 0 regressions;
#   3. afm-serve with --no-grammar-constraints against it: exit 1, three
#      regressions (it refuses response_format and forced tool calls, so
#      grammar.json_object and the two forced-call cases skip), named in
#      the job summary;
#   4. mlx-lm's server (smoke tier) against its committed standard-tier
#      baseline and known failures, graded by the clients: exit 0;
#   5. a server already running, by URL (afm-bench's mock, started a
#      moment later than the step, which waits for it): exit 0.
# AFM_TEST, AFM_SERVE: the binaries (default the debug builds).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
W=target/action-test
rm -rf "$W"
mkdir -p "$W"
export AFM_TEST="${AFM_TEST:-$ROOT/target/debug/afm-test}"
AFM_SERVE="${AFM_SERVE:-$ROOT/target/debug/afm-serve}"
[ -x "$AFM_TEST" ] || cargo build -q -p afm-harness --bin afm-test
[ -x "$AFM_SERVE" ] || cargo build -q -p afm-engine --bin afm-serve

# runner NAME VAR=VALUE...: the step in a fresh runner environment; its
# exit code in $W/NAME/rc.
runner() {
    local d="$W/$1"
    shift
    mkdir -p "$d/tmp"
    : >"$d/summary.md"
    : >"$d/output"
    local rc=0
    env GITHUB_ACTIONS=true CI=true GITHUB_WORKSPACE="$ROOT" RUNNER_TEMP="$d/tmp" \
        GITHUB_STEP_SUMMARY="$d/summary.md" GITHUB_OUTPUT="$d/output" \
        INPUT_OUT="$d/afm-report" "$@" bash scripts/action.sh >"$d/log" 2>&1 || rc=$?
    echo "$rc" >"$d/rc"
    echo "action-test: $(basename "$d"): exit $rc; outputs: $(tr '\n' ' ' <"$d/output")"
}
expect() { # NAME RC [OUTPUT=VALUE] [TEXT in the summary]
    local d="$W/$1"
    [ "$(cat "$d/rc")" = "$2" ] || { echo "action-test: $1 exited $(cat "$d/rc"), expected $2" >&2; tail -20 "$d/log" >&2; exit 1; }
    [ -z "${3:-}" ] || grep -qx "$3" "$d/output" || { echo "action-test: $1: no $3 in its outputs" >&2; exit 1; }
    [ -s "$d/summary.md" ] || { echo "action-test: $1 wrote no job summary" >&2; exit 1; }
    [ -z "${4:-}" ] || grep -q "$4" "$d/summary.md" || { echo "action-test: $1: summary lacks $4" >&2; exit 1; }
}

SERVE="$AFM_SERVE --model {model} --port {port}"
runner baseline INPUT_SERVER="$SERVE" INPUT_MODEL=smollm2 INPUT_TIER=smoke INPUT_ARGS="--seed 1"
expect baseline 0 "report=$W/baseline/afm-report/report.json"
cp "$W/baseline/afm-report/report.json" "$W/baseline.json"

runner same INPUT_SERVER="$SERVE" INPUT_MODEL=smollm2 INPUT_TIER=smoke INPUT_ARGS="--seed 1" \
    INPUT_BASELINE="$W/baseline.json"
expect same 0 "regressions=0"

runner regressed INPUT_SERVER="$SERVE --no-grammar-constraints" INPUT_MODEL=smollm2 \
    INPUT_TIER=smoke INPUT_ARGS="--seed 1" INPUT_BASELINE="$W/baseline.json"
expect regressed 1 "regressions=3" "grammar.json\\\\_object\|grammar.json_object"

BIN="$(bash scripts/interop/peers/mlx-lm.sh)"
runner mlx-lm INPUT_SERVER="$BIN/mlx_lm.server --model {model} --port {port} --log-level WARNING --chat-template \"\$(cat fixtures/templates/chatml-tools.jinja)\"" \
    INPUT_MODEL=.cache/peers/smollm2-f32 INPUT_TIER=smoke INPUT_ARGS="--seed 1" \
    INPUT_BASELINE=reports/baselines/peers/mlx-lm.json \
    INPUT_KNOWN_FAILURES=reports/baselines/peers/mlx-lm.known.toml \
    INPUT_CLIENTS="$ROOT/.cache/venv/bin/python"
expect mlx-lm 0 "regressions=0"
MOCK_BIN="$(dirname "$AFM_TEST")/afm-bench"
[ -x "$MOCK_BIN" ] || cargo build -q -p afm-harness --bin afm-bench
PORT=$((20000 + RANDOM % 20000))
(sleep 3; exec "$MOCK_BIN" mock --port "$PORT" --ttft 5 --itl 2 --output-tokens 12) >"$W/mock.log" 2>&1 &
MOCK=$!
runner url INPUT_URL="http://127.0.0.1:$PORT" INPUT_SECTIONS=preflight INPUT_TIER=smoke
kill "$MOCK" 2>/dev/null || true
expect url 0 "unexplained=0"
echo "action-test: the regressed run's job summary:"
head -30 "$W/regressed/summary.md"
