#!/usr/bin/env bash
# clients_on.sh URL CONCURRENCY REQUESTS OUTDIR
#
# Runs (a) AIPerf 0.13.0 and (b) GuideLLM 0.8.1, one after the other, against an
# OpenAI-compatible server at URL: streamed /v1/chat/completions, a fixed
# concurrency of CONCURRENCY, REQUESTS requests in total, short fixed prompts
# (~25 words; the same REQUESTS prompts for both clients but for a leading
# client name), max output MAX_TOKENS (32) tokens (max_completion_tokens).
# Each client runs under `/usr/bin/time -v`. Then prints
# one JSON line per client (also written to OUTDIR/results.jsonl):
#   {"client", "ttft_p50_ms", "ttft_p99_ms", "itl_p50_ms", "itl_p99_ms",
#    "e2e_p50_ms", "e2e_p99_ms", "requests_ok", "requests_err", "cpu_s",
#    "max_rss_kb", "tree_rss_peak_kb", "wall_s", "exit", "chunks",
#    "output_tokens", "bench_s", "server_cpu_s", "machine_cpu_s", "other_cpu_s"}
# read from each client's own export files (the files and fields are listed
# in aiperf() and guidellm() in the Python block at the end).
#
# Offline: no hub is contacted. GuideLLM runs with HF_HUB_OFFLINE=1
# HF_DATASETS_OFFLINE=1 TRANSFORMERS_OFFLINE=1 (as scripts/interop/clients/run.sh);
# its prompts come from a local JSON file so it needs no tokenizer. AIPerf
# always loads a tokenizer: a local folder (TOKENIZER, default the SmolLM2
# tokenizer exported from the bundled GGUF by `afm-serve convert`), which
# AIPerf resolves without the network. AIPerf runs WITHOUT HF_HUB_OFFLINE, as
# in run.sh: with it, AIPerf 0.13 looks the folder up as a cached hub repo and
# fails (HFValidationError). Both clients were checked inside a network
# namespace with only loopback (unshare -n): they run, nothing is fetched.
# HF_HOME points at a private folder, so no user cache is read or written.
#
# Environment:
#   MODEL          model name sent (default: first id of URL/v1/models, else "mock")
#   MAX_TOKENS     32
#   CLIENTS        "aiperf guidellm" (either or both, in this order)
#   TOKENIZER      local HF tokenizer folder for AIPerf (default: .cache/clients/smollm2-tokenizer;
#                  exported from the bundled model with afm-serve convert if absent)
#   SERVER_TOKENS  1 (default): AIPerf --use-server-token-count (token counts
#                  from the server's `usage`, needs usage in the last chunk);
#                  0: AIPerf tokenizes the streamed text itself.
#   AIPERF_FLAGS   extra AIPerf flags (default: --no-server-metrics, as run.sh)
#   GUIDELLM_FLAGS extra GuideLLM flags (default: none)
#   GUIDELLM_BACKEND_EXTRA  appended to GuideLLM's --backend string, e.g.
#                  ",validate_backend=false" for a server without GET /health
#   SERVER_PID     the server's pid, if local: adds its CPU seconds (server_cpu_s)
#   TIMEOUT        seconds per client run (900)
#   WARMUP         rounds of CONCURRENCY curl requests before each client (1; 0: none)
#   AFM_SERVE      afm-serve binary, only to export the tokenizer (target/release/afm-serve)
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
[ $# -eq 4 ] || { sed -n '2,/^set -euo/p' "$0" | sed -n 's/^# \{0,1\}//p' >&2; exit 2; }
URL="${1%/}"
URL="${URL%/v1}"
CONC="$2"
N="$3"
OUT="$(mkdir -p "$4" && cd "$4" && pwd)"
MAX_TOKENS="${MAX_TOKENS:-32}"
CLIENTS="${CLIENTS:-aiperf guidellm}"
TOKENIZER="${TOKENIZER:-$ROOT/.cache/clients/smollm2-tokenizer}"
SERVER_TOKENS="${SERVER_TOKENS:-1}"
AIPERF_FLAGS="${AIPERF_FLAGS---no-server-metrics}"
GUIDELLM_FLAGS="${GUIDELLM_FLAGS:-}"
TIMEOUT="${TIMEOUT:-900}"
CACHE="$ROOT/.cache/clients"
AIPERF="$CACHE/aiperf-venv/bin/aiperf"
GUIDELLM="$CACHE/guidellm-venv/bin/guidellm"
log() { printf '[clients_on] %s\n' "$*" >&2; }

[ -x /usr/bin/time ] || { log "missing /usr/bin/time (apt-get install time)"; exit 2; }
for c in $CLIENTS; do
    case "$c" in
    aiperf) [ -x "$AIPERF" ] || { log "missing $AIPERF: bash scripts/interop/clients/install.sh aiperf"; exit 2; } ;;
    guidellm) [ -x "$GUIDELLM" ] || { log "missing $GUIDELLM: bash scripts/interop/clients/install.sh guidellm"; exit 2; } ;;
    *) log "unknown client '$c'"; exit 2 ;;
    esac
done

# AIPerf's tokenizer: a local folder, exported once from the bundled GGUF.
if [[ " $CLIENTS " == *" aiperf "* ]] && [ ! -s "$TOKENIZER/tokenizer.json" ]; then
    serve="${AFM_SERVE:-$ROOT/target/release/afm-serve}"
    log "exporting the smollm2 tokenizer to $TOKENIZER"
    tmp="$(mktemp -d "$ROOT/.cache/clients/.tok.XXXXXX")"
    rmdir "$tmp"
    "$serve" convert --model smollm2 --out "$tmp" --dtype keep >"$OUT/convert.log" 2>&1
    rm -f "$tmp/model.safetensors" # only the tokenizer files are needed
    mv "$tmp" "$TOKENIZER"
fi

if [ -z "${MODEL:-}" ]; then
    MODEL="$(curl -sf --max-time 5 "$URL/v1/models" |
        python3 -c 'import json,sys; print(json.load(sys.stdin)["data"][0]["id"])' 2>/dev/null || echo mock)"
fi
log "server $URL, model $MODEL, concurrency $CONC, $N requests, max $MAX_TOKENS tokens"

# Short fixed prompts, one per request: {"text"} for AIPerf (single_turn),
# {"prompt"} for GuideLLM (json_file). Each starts with the client's name, so
# the second client shares no prompt prefix (beyond the chat template) with
# the first one in a server's prefix cache.
python3 - "$OUT" "$N" <<'EOF2'
import json, os, sys
out, n = sys.argv[1], int(sys.argv[2])
topics = ["a lighthouse", "a river", "a bakery", "an old clock", "a railway", "a library",
          "a harbour", "a garden", "a jazz band", "a paper kite", "a village", "a night market"]
def prompt(client, i):
    return (f"{client} request {i + 1}. Write three plain sentences about {topics[i % len(topics)]} "
            f"for a curious child, in the present tense, without lists or headings.")
with open(os.path.join(out, "prompts.jsonl"), "w") as g, open(os.path.join(out, "aiperf.jsonl"), "w") as a:
    for i in range(n):
        g.write(json.dumps({"prompt": prompt("GuideLLM", i)}) + "\n")
        a.write(json.dumps({"text": prompt("AIPerf", i)}) + "\n")
EOF2

# warmup: WARMUP (1) rounds of CONCURRENCY parallel streamed requests (curl,
# 8 tokens each, prompts unlike the clients') before each client, so neither
# client measures a cold server. Failures are ignored (WARMUP=0 skips).
warmup() {
    local r i
    for ((r = 0; r < ${WARMUP:-1}; r++)); do
        for ((i = 0; i < CONC; i++)); do
            curl -s -o /dev/null --max-time 120 "$URL/v1/chat/completions" -H 'content-type: application/json' \
                -d "{\"model\":\"$MODEL\",\"stream\":true,\"max_tokens\":8,\"messages\":[{\"role\":\"user\",\"content\":\"Warmup $r.$i: name a colour.\"}]}" &
        done
        wait
    done
}

export HF_HOME="$OUT/hf-home"
OFFLINE=(env HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TRANSFORMERS_OFFLINE=1)

# tree_rss PID FILE: samples the summed VmRSS of PID and all its descendants
# every 0.5 s and writes the peak (kB) to FILE. /usr/bin/time's "Maximum
# resident set size" is the largest single process only, and both clients
# are multi-process.
tree_rss() {
    python3 - "$1" "$2" <<'EOF'
import os, sys, time
root, out = int(sys.argv[1]), sys.argv[2]
peak = 0
def kids():
    ch = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
                ch.setdefault(ppid, []).append(int(d))
            except (OSError, ValueError, IndexError):
                pass
    return ch
while os.path.exists(f"/proc/{root}"):
    ch, todo, tot = kids(), [root], 0
    while todo:
        p = todo.pop()
        todo += ch.get(p, [])
        try:
            with open(f"/proc/{p}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        tot += int(line.split()[1])
        except OSError:
            pass
    peak = max(peak, tot)
    with open(out, "w") as f:
        f.write(f"{peak}\n")
    time.sleep(0.5)
EOF
}

# run NAME CMD...: CMD under /usr/bin/time -v (rusage of CMD and all the
# children it waited for) and timeout; OUT/NAME/{cmd,log,time.txt,rc,tree_rss_kb}.
TICK="$(getconf CLK_TCK)"
machine_cpu() { # busy CPU seconds of the whole machine so far (all processes)
    awk -v t="$TICK" '/^cpu / { printf "%.2f\n", ($2 + $3 + $4 + $7 + $8 + $9) / t }' /proc/stat
}
server_cpu() { # user+sys CPU seconds of SERVER_PID so far, if given
    if [ -n "${SERVER_PID:-}" ] && [ -r "/proc/$SERVER_PID/stat" ]; then
        awk -v t="$TICK" '{ printf "%.2f\n", ($14 + $15) / t }' "/proc/$SERVER_PID/stat"
    else echo ""; fi
}
run() {
    local name="$1" rc=0 pid sampler m0 s0
    shift
    mkdir -p "$OUT/$name"
    printf '%q ' "$@" >"$OUT/$name/cmd"
    echo >>"$OUT/$name/cmd"
    m0="$(machine_cpu)"
    s0="$(server_cpu)"
    /usr/bin/time -v -o "$OUT/$name/time.txt" timeout "$TIMEOUT" "$@" >"$OUT/$name/log" 2>&1 &
    pid=$!
    tree_rss "$pid" "$OUT/$name/tree_rss_kb" &
    sampler=$!
    wait "$pid" || rc=$?
    wait "$sampler" 2>/dev/null || true
    echo "$rc" >"$OUT/$name/rc"
    awk -v a="$(machine_cpu)" -v b="$m0" 'BEGIN { printf "%.2f\n", a - b }' >"$OUT/$name/machine_cpu_s"
    s1="$(server_cpu)"
    if [ -n "$s0" ] && [ -n "$s1" ]; then
        awk -v a="$s1" -v b="$s0" 'BEGIN { printf "%.2f\n", a - b }' >"$OUT/$name/server_cpu_s"
    fi
    log "$name: exit $rc ($(grep -o 'Elapsed (wall clock) time.*' "$OUT/$name/time.txt" | cut -d' ' -f8))"
}

for c in $CLIENTS; do
    warmup
    case "$c" in
    aiperf)
        rm -rf "$OUT/aiperf"
        tok=()
        [ "$SERVER_TOKENS" = 1 ] && tok=(--use-server-token-count)
        # --export-level records (the default) writes the per-request
        # profile_export.jsonl that the chunk count is read from.
        # shellcheck disable=SC2086 # flags are words
        run aiperf "$AIPERF" profile --model "$MODEL" --url "$URL" --endpoint-type chat --streaming \
            --input-file "$OUT/aiperf.jsonl" --custom-dataset-type single_turn \
            --dataset-sampling-strategy sequential \
            --concurrency "$CONC" --request-count "$N" --osl "$MAX_TOKENS" \
            --tokenizer "$TOKENIZER" "${tok[@]}" --random-seed 7 \
            --no-gpu-telemetry --ui-type none --export-level records \
            --output-artifact-dir "$OUT/aiperf/artifacts" $AIPERF_FLAGS
        ;;
    guidellm)
        rm -rf "$OUT/guidellm"
        # shellcheck disable=SC2086
        run guidellm "${OFFLINE[@]}" "$GUIDELLM" run \
            --backend "kind=openai_http,target=$URL,model=$MODEL,max_tokens=$MAX_TOKENS${GUIDELLM_BACKEND_EXTRA:-}" \
            --profile "kind=concurrent,streams=$CONC" \
            --constraint "kind=max_requests,count=$N" \
            --data "kind=json_file,path=$OUT/prompts.jsonl" \
            --output "kind=json,path=$OUT/guidellm/benchmarks.json" \
            --disable-console-interactive $GUIDELLM_FLAGS
        ;;
    esac
done

# One JSON line per client, from the clients' own exports.
python3 - "$OUT" $CLIENTS <<'EOF' | tee "$OUT/results.jsonl"
import json, os, re, statistics, sys

out, clients = sys.argv[1], sys.argv[2:]


def rusage(name):
    """/usr/bin/time -v: user+sys CPU s (CMD and the children it reaped),
    peak RSS kB of the largest single process, wall s."""
    r = {"cpu_s": None, "max_rss_kb": None, "wall_s": None}
    try:
        t = open(os.path.join(out, name, "time.txt")).read()
    except OSError:
        return r
    u = re.search(r"User time \(seconds\): ([\d.]+)", t)
    s = re.search(r"System time \(seconds\): ([\d.]+)", t)
    m = re.search(r"Maximum resident set size \(kbytes\): (\d+)", t)
    w = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): ([\d:.]+)", t)
    if u and s:
        r["cpu_s"] = round(float(u.group(1)) + float(s.group(1)), 2)
    if m:
        r["max_rss_kb"] = int(m.group(1))
    if w:
        sec = 0.0
        for part in w.group(1).split(":"):
            sec = sec * 60 + float(part)
        r["wall_s"] = round(sec, 2)
    return r


def small(name):
    def read(f, conv=int):
        try:
            return conv(open(os.path.join(out, name, f)).read().strip())
        except (OSError, ValueError):
            return None
    # machine_cpu_s: busy CPU s of every process on the machine over the run
    # (/proc/stat), client and server included; server_cpu_s: SERVER_PID's.
    return {"tree_rss_peak_kb": read("tree_rss_kb"), "exit": read("rc"),
            "machine_cpu_s": read("machine_cpu_s", float), "server_cpu_s": read("server_cpu_s", float)}


def rnd(x, nd=2):
    return None if x is None else round(x, nd)


def aiperf():
    # File: OUT/aiperf/artifacts/profile_export_aiperf.json (summary). Each
    # metric is an object {"unit": "ms", "avg", "p50", "p99", ...}; used:
    #   time_to_first_token.p50/.p99            (ms)
    #   inter_token_latency.p50/.p99            (ms; per request
    #       (request_latency - ttft) / (output_sequence_length - 1))
    #   request_latency.p50/.p99                (ms, end to end)
    #   request_count.avg                       (successful requests)
    #   error_request_count.avg / error_summary[].count  (failed requests)
    #   output_sequence_length.avg * request_count.avg   (output tokens; the
    #       server's usage.completion_tokens with --use-server-token-count)
    # Chunks: OUT/aiperf/artifacts/profile_export.jsonl, one record per
    # request, metrics.inter_chunk_latency.value (a list of gaps between
    # content chunks, ms): chunks = len(list) + 1, summed over requests.
    art = os.path.join(out, "aiperf", "artifacts")
    row = {"client": "aiperf"}
    try:
        d = json.load(open(os.path.join(art, "profile_export_aiperf.json")))
    except (OSError, ValueError):
        d = {}

    def g(k, s):
        v = d.get(k)
        return v.get(s) if isinstance(v, dict) else None

    ok = g("request_count", "avg")
    err = g("error_request_count", "avg")
    if err is None:
        err = sum(int(e.get("count", 0)) for e in d.get("error_summary") or []) if d else None
    osl = g("output_sequence_length", "avg")
    row.update(ttft_p50_ms=rnd(g("time_to_first_token", "p50")), ttft_p99_ms=rnd(g("time_to_first_token", "p99")),
               itl_p50_ms=rnd(g("inter_token_latency", "p50")), itl_p99_ms=rnd(g("inter_token_latency", "p99")),
               e2e_p50_ms=rnd(g("request_latency", "p50")), e2e_p99_ms=rnd(g("request_latency", "p99")),
               requests_ok=None if ok is None else int(ok), requests_err=None if err is None else int(err),
               output_tokens=None if osl is None or ok is None else round(osl * ok),
               bench_s=rnd(g("benchmark_duration", "avg")))  # s, the measured window
    chunks, n = 0, 0
    try:
        with open(os.path.join(art, "profile_export.jsonl")) as f:
            for line in f:
                rec = json.loads(line)
                icl = (rec.get("metrics") or {}).get("inter_chunk_latency")
                if isinstance(icl, dict) and isinstance(icl.get("value"), list):
                    chunks += len(icl["value"]) + 1
                    n += 1
    except (OSError, ValueError):
        pass
    row["chunks"] = chunks if n else None
    return row


def guidellm():
    # File: OUT/guidellm/benchmarks.json; benchmarks[0].metrics.<name>
    # .successful is a distribution {count, mean, total_sum, percentiles:
    # {p50, p99, ...}}; used:
    #   time_to_first_token_ms.successful.percentiles.p50/.p99   (ms)
    #   inter_token_latency_ms.successful.percentiles.p50/.p99   (ms; per request
    #       (last_token - first_token) / (output_tokens - 1))
    #   request_latency.successful.percentiles.p50/.p99          (s, x1000 here)
    #   request_totals.successful / .errored (+ .incomplete)     (requests)
    #   output_token_count.successful.total_sum  (usage.completion_tokens, or the
    #       number of content chunks when the server sends no usage)
    # Chunks: benchmarks[0].requests.successful[].info.timings.token_iterations
    # (content-bearing SSE events per request), summed. GuideLLM keeps every
    # request only up to its sampling limit, so this is null if some were
    # dropped from the export.
    row = {"client": "guidellm"}
    try:
        d = json.load(open(os.path.join(out, "guidellm", "benchmarks.json")))
        b = d["benchmarks"][0]
    except (OSError, ValueError, KeyError, IndexError):
        return row
    m = b["metrics"]

    def p(name, q, scale=1.0):
        s = (m.get(name) or {}).get("successful") or {}
        v = (s.get("percentiles") or {}).get(q) if s.get("count") else None
        return None if v is None else v * scale

    tot = m.get("request_totals") or {}
    out_tok = ((m.get("output_token_count") or {}).get("successful") or {}).get("total_sum")
    row.update(ttft_p50_ms=rnd(p("time_to_first_token_ms", "p50")), ttft_p99_ms=rnd(p("time_to_first_token_ms", "p99")),
               itl_p50_ms=rnd(p("inter_token_latency_ms", "p50")), itl_p99_ms=rnd(p("inter_token_latency_ms", "p99")),
               e2e_p50_ms=rnd(p("request_latency", "p50", 1000)), e2e_p99_ms=rnd(p("request_latency", "p99", 1000)),
               requests_ok=tot.get("successful"),
               requests_err=(tot.get("errored") or 0) + (tot.get("incomplete") or 0),
               output_tokens=None if out_tok is None else round(out_tok),
               bench_s=rnd(b.get("duration")))  # s, the measured window
    reqs = (b.get("requests") or {}).get("successful") or []
    its = [((r.get("info") or {}).get("timings") or {}).get("token_iterations") for r in reqs]
    row["chunks"] = sum(its) if reqs and None not in its and len(reqs) == tot.get("successful") else None
    return row


for c in clients:
    row = aiperf() if c == "aiperf" else guidellm()
    row.update(rusage(c))
    row.update(small(c))
    # other_cpu_s: every other process's CPU over the run (the machine's
    # quietness), when the server's own CPU is known (SERVER_PID).
    if None not in (row.get("machine_cpu_s"), row.get("cpu_s"), row.get("server_cpu_s")):
        row["other_cpu_s"] = round(max(0.0, row["machine_cpu_s"] - row["cpu_s"] - row["server_cpu_s"]), 2)
    keys = ["client", "ttft_p50_ms", "ttft_p99_ms", "itl_p50_ms", "itl_p99_ms", "e2e_p50_ms", "e2e_p99_ms",
            "requests_ok", "requests_err", "cpu_s", "max_rss_kb", "tree_rss_peak_kb", "wall_s", "exit",
            "chunks", "output_tokens", "bench_s", "server_cpu_s", "machine_cpu_s", "other_cpu_s"]
    print(json.dumps({k: row.get(k) for k in keys}))
EOF
