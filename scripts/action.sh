#!/usr/bin/env bash
# afm-test as one step of a server's CI: what the GitHub Action
# (action.yml, at the top of this repository) runs after installing
# afm-test, and what runs here the same way with the variables a runner
# sets (scripts/action-test.sh). Inputs, as action.yml passes them:
#   AFM_TEST              the afm-test binary (default: afm-test on PATH)
#   INPUT_SERVER          the server's command, with {port} and {model}
#                         (afm-test starts it, waits for it, stops it)
#   INPUT_URL             or a server already running (waited for up to
#                         INPUT_WAIT seconds, default 300)
#   INPUT_MODEL           the model requests name (--model)
#   INPUT_TIER            smoke, standard (default) or full
#   INPUT_SECTIONS        sections to run, by comma or space (default all)
#   INPUT_BASELINE        a committed report to diff against
#   INPUT_KNOWN_FAILURES  the known-failures file
#   INPUT_API_KEY         the server's key
#   INPUT_CLIENTS         a Python with openai and anthropic: grade by the
#                         official clients (--clients)
#   INPUT_ARGS            more afm-test flags (--repeat 3, --seed 1, ...)
#   INPUT_OUT             the report folder (default afm-report)
# Writes the Markdown summary (the diff's, then the run's) to
# $GITHUB_STEP_SUMMARY and `report`, `regressions`, `fixed` and
# `unexplained` to $GITHUB_OUTPUT. Exits 1 on a regression against the
# baseline (a case that passed there fails now and nothing explains it; a
# fixed case is good news in the summary, never a failure), or without a
# baseline on any unexplained failure; 2 when the run could not happen.
set -uo pipefail
AFM_TEST="${AFM_TEST:-afm-test}"
OUT="${INPUT_OUT:-afm-report}"
TIER="${INPUT_TIER:-standard}"
SUMMARY="${GITHUB_STEP_SUMMARY:-/dev/null}"
OUTPUT="${GITHUB_OUTPUT:-/dev/null}"
say() { printf 'afm-test action: %s\n' "$*" >&2; }
fail_run() {
    say "$1"
    printf '## afm-test could not run\n\n%s\n' "$1" >>"$SUMMARY"
    exit 2
}

[ -n "${INPUT_SERVER:-}" ] || [ -n "${INPUT_URL:-}" ] || fail_run "give the server's command (server) or its URL (url)"
[ -z "${INPUT_SERVER:-}" ] || [ -z "${INPUT_URL:-}" ] || fail_run "give server or url, not both"
command -v "$AFM_TEST" >/dev/null || fail_run "no afm-test at '$AFM_TEST'"

args=(run --tier "$TIER" --out "$OUT" --junit "$OUT/junit.xml" --summary "$OUT/run.md")
if [ -n "${INPUT_SERVER:-}" ]; then
    args+=(--server "$INPUT_SERVER")
else
    url="${INPUT_URL%/}"
    waited=0
    until curl -fsS -o /dev/null "$url/v1/models" 2>/dev/null; do
        [ "$waited" -lt "${INPUT_WAIT:-300}" ] || fail_run "$url/v1/models did not answer within ${INPUT_WAIT:-300} s"
        sleep 2
        waited=$((waited + 2))
    done
    args+=(--url "$url")
fi
[ -z "${INPUT_MODEL:-}" ] || args+=(--model "$INPUT_MODEL")
sections="${INPUT_SECTIONS:-}"
for s in ${sections//,/ }; do args+=(--section "$s"); done
[ -z "${INPUT_KNOWN_FAILURES:-}" ] || args+=(--known-failures "$INPUT_KNOWN_FAILURES")
[ -z "${INPUT_API_KEY:-}" ] || args+=(--api-key "$INPUT_API_KEY")
[ -z "${INPUT_CLIENTS:-}" ] || args+=(--clients "$INPUT_CLIENTS")
# Word-split on purpose: several flags in one input.
# shellcheck disable=SC2206
extra=(${INPUT_ARGS:-})
args+=("${extra[@]}")

mkdir -p "$OUT"
say "$AFM_TEST ${args[*]}"
"$AFM_TEST" "${args[@]}"
rc=$?
[ "$rc" -le 1 ] || fail_run "afm-test exited $rc (see the log above)"
echo "report=$OUT/report.json" >>"$OUTPUT"
unexplained=$(python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(sum(1 for c in r["cases"] if c["status"] in ("fail","error","flaky") and not c.get("known_issue")))' "$OUT/report.json")
echo "unexplained=$unexplained" >>"$OUTPUT"

if [ -n "${INPUT_BASELINE:-}" ]; then
    [ -f "$INPUT_BASELINE" ] || fail_run "no baseline report at $INPUT_BASELINE"
    diff_args=(diff "$INPUT_BASELINE" "$OUT/report.json" --html "$OUT/diff.html" --summary "$OUT/diff.md")
    [ -z "${INPUT_KNOWN_FAILURES:-}" ] || diff_args+=(--known-failures "$INPUT_KNOWN_FAILURES")
    "$AFM_TEST" "${diff_args[@]}" | tee "$OUT/diff.txt"
    diff_rc=${PIPESTATUS[0]}
    [ "$diff_rc" -le 1 ] || fail_run "afm-test diff exited $diff_rc"
    count() { sed -n "s/^  $1 *\([0-9][0-9]*\)\$/\1/p" "$OUT/diff.txt" | head -1; }
    echo "regressions=$(count Regressions)" >>"$OUTPUT"
    echo "fixed=$(count Fixed)" >>"$OUTPUT"
    cat "$OUT/diff.md" "$OUT/run.md" >>"$SUMMARY"
    exit "$diff_rc"
fi
cat "$OUT/run.md" >>"$SUMMARY"
exit "$rc"
