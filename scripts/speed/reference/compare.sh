#!/usr/bin/env bash
# The engine's batch decode against the independent padded-batch reference,
# in one run: installs mlx-lm (scripts/interop/peers/mlx-lm.sh, same BLAS as the
# engine), exports the bundled model's f32 weights once, then runs
# `cargo bench --bench batch_decode` with the reference. Not part of CI.
# Extra arguments go to the bench (e.g. --levels 1,8 --tokens 32).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
cd "$ROOT"
MLX_LM_BIN="$(bash scripts/interop/peers/mlx-lm.sh)"
GGUF="$(ls .cache/models/smollm2/*.gguf | head -1)"
F32_DIR="$ROOT/.cache/peers/smollm2-f32"
if [ ! -f "$F32_DIR/model.safetensors" ]; then
    cargo build --release -q -p afm-engine --bin afm-serve
    target/release/afm-serve convert --model "$GGUF" --out "$F32_DIR" --dtype f32
fi
cargo bench -p afm-engine --bench batch_decode -- --reference "$MLX_LM_BIN/python" "$F32_DIR" "$@"
