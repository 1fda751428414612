#!/usr/bin/env bash
# Runs the steps of the GitHub Actions workflow in docs/ci.md, in order,
# on this machine, against mlx-lm's server on the bundled model:
#   1. install afm-test alone as a Python server's job does: `pip install
#      ./harness` into a fresh virtual environment (target/ci-recipe/venv;
#      maturin builds the wheel of the engine-less binaries);
#   2. install the server under test (mlx-lm, scripts/interop/peers/mlx-lm.sh);
#   3. run the standard tier through --server;
#   4. diff against the committed baseline with its known failures;
#   5. write the job summary (the diff's and the run's Markdown) and keep
#      the report folder (the artifact).
# The baseline and known failures are reports/baselines/peers/mlx-lm.{json,known.toml}.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
WORK=target/ci-recipe
OUT="$WORK/afm-report"
export GITHUB_STEP_SUMMARY="${GITHUB_STEP_SUMMARY:-$WORK/summary.md}"
mkdir -p "$WORK"
step() { printf '\n== %s\n' "$*"; }

step "Install afm-test (harness only, no engine)"
rm -rf "$WORK/venv"
python3 -m venv "$WORK/venv"
"$WORK/venv/bin/pip" install --quiet --disable-pip-version-check ./harness openai anthropic
AFM_TEST="$WORK/venv/bin/afm-test"

step "Install the server under test"
BIN="$(bash scripts/interop/peers/mlx-lm.sh)"
MODEL=.cache/peers/smollm2-f32
if [ ! -f "$MODEL/model.safetensors" ]; then
    cargo run -q --release -p afm-engine --bin afm-serve -- convert \
        --model "$(ls .cache/models/smollm2/*.gguf | head -1)" --out "$MODEL" --dtype f32
fi
TEMPLATE=fixtures/templates/chatml-tools.jinja

step "Run the standard tier against the server"
rm -rf "$OUT"
rc=0
"$AFM_TEST" --tier standard --seed 1 \
    --server "$BIN/mlx_lm.server --model {model} --port {port} --log-level WARNING --chat-template \"\$(cat $TEMPLATE)\"" \
    --model "$MODEL" --known-failures reports/baselines/peers/mlx-lm.known.toml \
    --clients "$WORK/venv/bin/python" \
    --out "$OUT" --junit "$OUT/junit.xml" --summary "$OUT/run.md" 2>&1 | tee "$WORK/run.log" || rc=$?
[ "$rc" -le 1 ]

step "Diff against the committed baseline"
diff_rc=0
"$AFM_TEST" diff reports/baselines/peers/mlx-lm.json "$OUT/report.json" \
    --known-failures reports/baselines/peers/mlx-lm.known.toml --html "$OUT/diff.html" \
    --summary "$OUT/diff.md" | tee "$OUT/diff.txt" || diff_rc=$?

step "Job summary"
cat "$OUT/diff.md" "$OUT/run.md" >>"$GITHUB_STEP_SUMMARY"
cat "$GITHUB_STEP_SUMMARY"

step "Upload the report"
ls -l "$OUT"
exit "$diff_rc"
