#!/usr/bin/env bash
# Builds mistral.rs's server (the `mistralrs` binary of crate mistralrs-cli
# on crates.io, CPU only: no cuda, metal, mkl or accelerate feature) into
# .cache/peers/, with the crate's own Cargo.lock, and prints the binary's
# path. Idempotent: nothing is built when the binary is there.
# MISTRALRS_VERSION picks another release.
#
# Its PyPI wheel (mistralrs) is the in-process Python SDK, with no server,
# and its prebuilt binaries are not in a package registry, so it is built
# from source. Measured (2026-12-02, 2 x86_64 cores shared with another
# build, under nice -n 19, rustc 1.95): 529 crates compiled in 29 min 40 s
# wall (cargo's own figure 29 min 10 s), 3.3 GB peak memory; the binary is
# 94 MB and the build folder is removed after it. CARGO_BUILD_JOBS limits
# the build's parallelism.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
VERSION="${MISTRALRS_VERSION:-0.8.1}"
DEST="$ROOT/.cache/peers/mistralrs-$VERSION"
BIN="$DEST/bin/mistralrs"
if [ ! -x "$BIN" ]; then
    mkdir -p "$DEST"
    CARGO_TARGET_DIR="$DEST/target" cargo install --locked --root "$DEST" \
        --version "=$VERSION" mistralrs-cli >&2
    # The build folder is only needed to build again.
    rm -rf "$DEST/target"
fi
echo "$BIN"
