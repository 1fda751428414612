#!/usr/bin/env bash
# afm-serve against mlx-lm's server on an NVIDIA GPU, on the same MLX (its
# CUDA build) and the same weights: a 1.07B llama of random weights (Llama
# 3.2 1B's shape, bf16), greedy, one stream of 256 tokens, then 8, 32 and
# 64 concurrent streams of 128 tokens each (afm-bench; replies not checked:
# random weights write noise), and the memory each server holds after
# every burst (scripts/speed/memory.sh). For a GPU machine without package access
# the run is packed on one that has it:
#
#   bash scripts/speed/gpu.sh pack DIR   # here: release binaries, the wheels, scripts
#   bash DIR/gpu.sh run DIR      # there: lays out MLX, makes the model, measures
#
# A machine with both the GPU and package access runs `bash scripts/speed/gpu.sh
# pack DIR && bash DIR/gpu.sh run DIR`. Results: DIR/results/ (afm-bench
# reports, server logs) and summary.md, printed at the end.
#
# The binaries are built against MLX's CPU wheel and load the CUDA build's
# libmlx.so at run time (same version, same symbols). The CUDA libraries it
# needs (cuBLAS, cuDNN, NVRTC, NCCL, the runtime) are large: `pack` leaves
# them out unless PACK_CUDA=1; `run` otherwise looks for them in
# NVIDIA_LIBS, else in the site-packages of any Python on the machine (a
# CUDA build of PyTorch installs them). PYTHON_VERSION (default 3.12): the
# GPU machine's Python, for mlx-lm's wheels; PYTHON names it there (default
# python3). RUN_SIZE=tiny makes a 4-layer
# 256-wide model and short runs, to try the script on any machine
# (MLX_RUNTIME=cpu there, to load the CPU build instead).
set -euo pipefail
MLX_VERSION=0.32.2
MLX_LM_VERSION=0.32.2
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
PYTHON="${PYTHON:-python3}"

pack() {
    local dir="$1" root
    root="$(cd "$HERE/../.." && pwd)"
    mkdir -p "$dir/bin" "$dir/wheels" "$dir/tokenizer"
    dir="$(cd "$dir" && pwd)"
    (cd "$root" && bash scripts/setup.sh &&
        cargo build --release -q -p afm-engine --bin afm-serve -p afm-harness --bin afm-bench)
    for b in afm-serve afm-bench; do
        cp "$root/target/release/$b" "$dir/bin/$b"
        strip --strip-unneeded "$dir/bin/$b"
    done
    local py=(--python-version "${PYTHON_VERSION:-3.12}" --platform manylinux_2_35_x86_64
        --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64
        --only-binary=:all:)
    local pip=("$root/.cache/venv/bin/python" -m pip download -q --disable-pip-version-check -d "$dir/wheels")
    "${pip[@]}" "${py[@]}" "mlx==$MLX_VERSION" "mlx-lm==$MLX_LM_VERSION" "mlx-cpu==$MLX_VERSION"
    if [ "${PACK_CUDA:-0}" = 1 ]; then
        "${pip[@]}" "${py[@]}" "mlx-cuda-13==$MLX_VERSION"
    else
        "${pip[@]}" "${py[@]}" --no-deps "mlx-cuda-13==$MLX_VERSION"
    fi
    local tok="$root/.cache/models/conformance/hf"
    for f in tokenizer.json tokenizer_config.json chat_template.jinja config.json; do
        [ -f "$tok/$f" ] && cp "$tok/$f" "$dir/tokenizer/"
    done
    cp "$HERE/gpu.sh" "$HERE/memory.sh" "$HERE/gpu/make_model.py" "$dir/"
    echo "packed $dir ($(du -sh "$dir" | cut -f1)); run: bash $dir/gpu.sh run $dir" >&2
}

# A folder holding nvidia/<lib>/lib for the CUDA libraries, or nothing.
find_nvidia() {
    if [ -n "${NVIDIA_LIBS:-}" ]; then echo "$NVIDIA_LIBS"; return; fi
    local py sp
    for py in $(compgen -c python3 | sort -u) /opt/*/.venv/bin/python* /opt/*/bin/python3; do
        command -v "$py" >/dev/null 2>&1 || [ -x "$py" ] || continue
        for sp in $("$py" -c 'import site, sys; print(" ".join(site.getsitepackages()))' 2>/dev/null); do
            [ -d "$sp/nvidia/cublas" ] && { echo "$sp/nvidia"; return; }
        done
    done
}

run() {
    local dir
    dir="$(cd "$1" && pwd)"
    local rt="$dir/rt" out="$dir/results" tiny=""
    [ "${RUN_SIZE:-full}" = tiny ] && tiny=1
    mkdir -p "$out"
    # MLX and mlx-lm from the packed wheels; then the CUDA build's libmlx
    # in the place MLX's own package loads it from, so both servers run it.
    if [ ! -d "$rt/mlx_lm" ]; then
        "$PYTHON" -m pip install -q --no-index --find-links "$dir/wheels" --target "$rt" \
            "mlx==$MLX_VERSION" "mlx-lm==$MLX_LM_VERSION" "mlx-cpu==$MLX_VERSION"
    fi
    local runtime="${MLX_RUNTIME:-cuda}"
    if [ "$runtime" = cuda ] && [ ! -e "$rt/.cuda" ]; then
        "$PYTHON" -m pip install -q --no-index --no-deps --find-links "$dir/wheels" --target "$rt/cuda" "mlx-cuda-13==$MLX_VERSION"
        cp -r "$rt/cuda/mlx/lib/." "$rt/mlx/lib/"
        cp -r "$rt/cuda/mlx/include" "$rt/mlx/" 2>/dev/null || true
        cp -r "$rt/cuda/mlx_cuda_13.libs" "$rt/" 2>/dev/null || true
        if [ ! -d "$rt/nvidia" ]; then
            local nv
            nv="$(find_nvidia)"
            [ -n "$nv" ] || { echo "gpu.sh: no CUDA libraries found (set NVIDIA_LIBS to a folder holding nvidia/cublas/lib..., or pack with PACK_CUDA=1)" >&2; exit 1; }
            ln -s "$nv" "$rt/nvidia"
        fi
        touch "$rt/.cuda"
    fi
    export PYTHONPATH="$rt${PYTHONPATH:+:$PYTHONPATH}"
    export LD_LIBRARY_PATH="$rt/mlx/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    "$PYTHON" -c 'import mlx.core as mx; print("MLX", mx.__version__, mx.default_device(), mx.device_info())' | tee "$out/device.txt"

    local model="$dir/model" shape=()
    [ -n "$tiny" ] && shape=(--layers 4 --hidden 256 --heads 4 --kv-heads 2 --intermediate 512)
    [ -f "$model/model.safetensors" ] ||
        "$PYTHON" "$dir/make_model.py" --tokenizer-from "$dir/tokenizer" --out "$model" "${shape[@]}"

    local single=256 each=128 levels=(8 32 64)
    [ -n "$tiny" ] && { single=16; each=8; levels=(8); }
    export AFM_BENCH="$dir/bin/afm-bench"
    local port=8090 name
    for name in afm-serve mlx-lm; do
        local server
        case "$name" in
        afm-serve) server=("$dir/bin/afm-serve" --model "$model" --port "$port" --concurrent 64 --max-queue 256) ;;
        mlx-lm) server=("$PYTHON" -m mlx_lm.server --model "$model" --port "$port" --decode-concurrency 64 --log-level WARNING) ;;
        esac
        "${server[@]}" >"$out/$name.log" 2>&1 &
        local pid=$!
        for _ in $(seq 1 600); do
            curl -sf "http://127.0.0.1:$port/v1/models" >/dev/null && break
            kill -0 "$pid" 2>/dev/null || { tail -20 "$out/$name.log" >&2; echo "gpu.sh: $name exited" >&2; exit 1; }
            sleep 1
        done
        "$AFM_BENCH" run --url "http://127.0.0.1:$port" --model "$model" --no-verify --ignore-eos \
            --concurrency 1 --requests 4 --output-len "$single" --max-tokens "$single" \
            --out "$out/$name-single" >"$out/$name-single.txt" 2>&1 || true
        "$AFM_BENCH" run --url "http://127.0.0.1:$port" --model "$model" --no-verify --ignore-eos \
            --concurrency "$(IFS=,; echo "${levels[*]}")" --requests 64 --output-len "$each" --max-tokens "$each" \
            --out "$out/$name-concurrent" >"$out/$name-concurrent.txt" 2>&1 || true
        kill "$pid"
        wait "$pid" 2>/dev/null || true
        # Memory over bursts of 64, on a fresh server.
        PORT=$port bash "$dir/memory.sh" --bursts "$([ -n "$tiny" ] && echo 2 || echo 5)" --concurrency 64 \
            --output-len "$each" --no-verify --model "$model" -- "${server[@]}" >"$out/$name-memory.md" 2>&1 || true
    done
    summarize "$out" | tee "$out/summary.md"
}

# Output tokens per second per level, requests served/sent, and memory.
summarize() {
    "$PYTHON" - "$1" <<'EOF'
import json, sys
from pathlib import Path
out = Path(sys.argv[1])
print("| server | level | served | output tok/s |")
print("|---|---:|---:|---:|")
for name in ("afm-serve", "mlx-lm"):
    for run in ("single", "concurrent"):
        f = out / f"{name}-{run}" / "bench.json"
        if not f.exists():
            print(f"| {name} | {run} | no report | |")
            continue
        for lv in json.load(open(f))["variants"][0]["levels"]:
            served = lv["requests"] - lv["errors"] - lv["corrupted"]
            print(f"| {name} | {lv['x']:.0f} | {served}/{lv['requests']} | {lv['output_tokens_per_s']:.0f} |")
for name in ("afm-serve", "mlx-lm"):
    f = out / f"{name}-memory.md"
    print(f"\n### {name}: memory after bursts of 64\n")
    print(f.read_text() if f.exists() else "no run")
EOF
}

case "${1:-}" in
pack) pack "${2:?usage: gpu.sh pack DIR}" ;;
run) run "${2:?usage: gpu.sh run DIR}" ;;
*) echo "usage: gpu.sh pack DIR | gpu.sh run DIR" >&2; exit 2 ;;
esac
