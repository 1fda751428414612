#!/usr/bin/env bash
# The regression gate on the project's own engine: runs the standard tier
# of the suites in-process with a fixed seed and compares the report with
# the committed baseline; any case that passed there and fails now fails
# the gate. `--refresh` instead replaces the baseline with this run (commit
# it on its own, when behaviour deliberately changed).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
OUT=target/afm-test-gate
BASELINE=baselines/standard.json
KNOWN=baselines/known-failures.toml
afm_test() { cargo run -q -p afm-harness --bin afm-test -- "$@"; }

# Exit 1 means some case failed: the diff below decides whether that is new.
rc=0
afm_test run --tier standard --seed 1 --out "$OUT" --junit "$OUT/junit.xml" \
    --known-failures "$KNOWN" || rc=$?
[ "$rc" -le 1 ] || exit "$rc"

if [ "${1:-}" = "--refresh" ]; then
    cp "$OUT/report.json" "$BASELINE"
    echo "gate: baseline replaced by this run ($BASELINE)"
else
    afm_test diff "$BASELINE" "$OUT/report.json" --known-failures "$KNOWN" \
        --html "$OUT/diff.html"
fi
