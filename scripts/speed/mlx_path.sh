#!/usr/bin/env bash
# afm-serve's MLX-ops engine (`--kernels mlx`: the path Metal and CUDA
# take) beside mlx-lm's server and afm-serve's CPU primitives (`--kernels
# afm`, the Linux CPU default), on the same weights (the bundled SmolLM2 as
# f32, `afm-serve convert --dtype f32`, which both engines read as they
# are) and the same MLX CPU build and BLAS, one server after the other with
# the same afm-bench workload: 1, 8 and 32 concurrent requests of at most
# MAX_TOKENS tokens (128), REQUESTS at each level (32; REQUESTS_1 at one
# stream, default REQUESTS), every reply checked (VERIFY_ALONE of each
# level, 2, replayed alone too). No request asks for a JSON schema: afm-bench
# otherwise sends a quarter of them to a server that enforces schemas (afm)
# and none to one that does not (mlx-lm), and constrained decoding is not
# what this compares. Then one table of output tokens/s and the ratios to
# mlx-lm. Not part of CI: ~4 minutes a server on 2 cores. Run on a quiet
# machine.
#
#   bash scripts/speed/mlx_path.sh                 # the three servers
#   BEFORE=path/to/old/afm-serve bash scripts/speed/mlx_path.sh
#       # also an older afm-serve binary on both paths (through the
#       # AFM_* switches it had), in the same run, for a before/after table
#   SERVERS="afm-mlx mlx-lm" bash scripts/speed/mlx_path.sh   # some servers only
#
# Results: $OUT (target/mlx-path)/<server>/bench.{json,html}, its log, and
# table.md.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
bash scripts/setup.sh
cargo build --release -q -p afm-engine -p afm-harness --bins
MLX_LM_BIN="$(bash scripts/interop/peers/mlx-lm.sh)"
OUT="${OUT:-target/mlx-path}"
REQUESTS="${REQUESTS:-32}"
REQUESTS_1="${REQUESTS_1:-$REQUESTS}"
MAX_TOKENS="${MAX_TOKENS:-128}"
MAX_SEQS=32
GGUF="$(ls .cache/models/smollm2/*.gguf | head -1)"
F32_DIR=".cache/peers/smollm2-f32"
[ -f "$F32_DIR/model.safetensors" ] ||
    target/release/afm-serve convert --model "$GGUF" --out "$F32_DIR" --dtype f32
# mlx-lm runs MLX on the same OpenBLAS as afm: give it the same kernels
# (afm-serve restarts itself with this when OpenBLAS picked its SSE3 ones).
core="$(sed -n 's/^OPENBLAS_CORETYPE = "\(.*\)"$/\1/p' .cargo/config.toml 2>/dev/null)"
[ -z "$core" ] || [ -n "${OPENBLAS_CORETYPE:-}" ] || export OPENBLAS_CORETYPE="$core"
mkdir -p "$OUT"
SERVERS="${SERVERS:-afm-mlx mlx-lm afm-cpu${BEFORE:+ before-mlx before-cpu}}"
# The old switches, for a binary from before --kernels.
OLD_MLX=(AFM_QMM=off AFM_ATTENTION=off AFM_GLU=off AFM_LAYER=off)

. scripts/speed/serving.sh

# measure NAME PORT MODEL COMMAND...: starts the server, runs each level
# with requests naming MODEL ("-": the one the server lists), stops it.
measure() {
    local name="$1" port="$2" model=()
    [ "$3" = - ] || model=(--model "$3")
    shift 3
    [[ " $SERVERS " == *" $name "* ]] || return 0
    start_server "$OUT/$name.log" "$@"
    wait_up "http://127.0.0.1:$port"
    # mlx-lm labels its usage event `chat.completion` (a known deviation):
    # tolerated, so it does not hide the rest of the checks.
    local tolerate=()
    [ "$name" != mlx-lm ] || tolerate=(--tolerate stream)
    local bench=(target/release/afm-bench --url "http://127.0.0.1:$port" "${model[@]}" "${tolerate[@]}"
        --server-flags "$*" --max-tokens "$MAX_TOKENS" --warmup 2
        --schema-share 0 --verify-alone "${VERIFY_ALONE:-2}")
    "${bench[@]}" --concurrency 1 --requests "$REQUESTS_1" --out "$OUT/$name/c1"
    "${bench[@]}" --concurrency 8,32 --requests "$REQUESTS" --out "$OUT/$name/c8-32"
    stop_server
}

AFM=(--model "$F32_DIR" --concurrent "$MAX_SEQS")
measure afm-mlx 9101 - target/release/afm-serve "${AFM[@]}" --kernels mlx --port 9101
measure mlx-lm 9102 "$F32_DIR" "$MLX_LM_BIN/mlx_lm.server" --model "$F32_DIR" --port 9102 \
    --decode-concurrency "$MAX_SEQS" --log-level WARNING
measure afm-cpu 9103 - target/release/afm-serve "${AFM[@]}" --kernels afm --port 9103
if [ -n "${BEFORE:-}" ]; then
    measure before-mlx 9104 - env "${OLD_MLX[@]}" "$BEFORE" "${AFM[@]}" --port 9104
    measure before-cpu 9105 - "$BEFORE" "${AFM[@]}" --port 9105
fi

# One row per server: output tokens/s at each level, and against mlx-lm.
"$ROOT/.cache/venv/bin/python" - "$OUT" "$SERVERS" <<'EOF' | tee "$OUT/table.md"
import json, pathlib, sys
out, servers = pathlib.Path(sys.argv[1]), sys.argv[2].split()
def rates(name):
    got = {}
    for part in ("c1", "c8-32"):
        f = out / name / part / "bench.json"
        if not f.exists():
            continue
        for level in json.loads(f.read_text())["variants"][0]["levels"]:
            got[int(level["x"])] = level["output_tokens_per_s"]
    return got
table = {s: rates(s) for s in servers}
levels = [1, 8, 32]
ref = table.get("mlx-lm", {})
print("| server | " + " | ".join(f"c={c}" for c in levels) + " | " +
      " | ".join(f"x mlx-lm c={c}" for c in levels) + " |")
print("|---|" + "---:|" * (2 * len(levels)))
for s, r in table.items():
    cells = [f"{r[c]:.1f}" if c in r else "-" for c in levels]
    ratio = [f"{r[c] / ref[c]:.2f}" if c in r and ref.get(c) else "-" for c in levels]
    print(f"| {s} | " + " | ".join(cells) + " | " + " | ".join(ratio) + " |")
EOF
