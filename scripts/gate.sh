#!/usr/bin/env bash
# The regression gate on the project's own engine: runs the standard tier
# of the suites with a fixed seed, twice, on the conformance model (the
# bundled base taught to think and call tools, so the reasoning and
# thinking-budget cases run rather than skip), and compares each report
# with its committed baseline; any case that passed there and fails now
# fails the gate:
#   1. in-process (the engine started with afm-serve's own flag reader and
#      defaults, batch-invariant: reports/baselines/standard.json);
#   2. against `afm-serve` as users start it, with no flags, through
#      `--server` (reports/baselines/afm-serve.json), so what CI tests is what a
#      flagless afm-serve does over HTTP.
# `--refresh` instead replaces the baselines with these runs (commit them
# on their own, when behaviour deliberately changed).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
KNOWN=reports/baselines/known-failures.toml
afm_test() { cargo run -q -p afm-harness --bin afm-test -- "$@"; }
cargo build -q -p afm-engine --bin afm-serve

# gate NAME BASELINE [afm-test target flags...]
gate() {
    local name="$1" baseline="$2" out="target/afm-test-gate/$1"
    shift 2
    # Exit 1 means some case failed: the diff below decides whether that is new.
    local rc=0
    afm_test run --tier standard --seed 1 --out "$out" --junit "$out/junit.xml" \
        --known-failures "$KNOWN" "$@" || rc=$?
    [ "$rc" -le 1 ] || exit "$rc"
    if [ "${REFRESH:-}" = 1 ]; then
        # The committed copy names the checkout ".", not where it was made.
        sed "s|$ROOT|.|g" "$out/report.json" >"$baseline"
        echo "gate: $baseline replaced by the $name run"
    else
        afm_test diff "$baseline" "$out/report.json" --known-failures "$KNOWN" \
            --html "$out/diff.html"
    fi
}

[ "${1:-}" = "--refresh" ] && REFRESH=1
gate in-process reports/baselines/standard.json --model conformance
gate afm-serve reports/baselines/afm-serve.json --model conformance \
    --server "target/debug/afm-serve --model {model} --port {port}"
