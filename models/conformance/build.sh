#!/usr/bin/env bash
# Builds afm-conformance from nothing but the bundled base, on the CPU
# (about 50 minutes on 2 cores), and replaces the committed deltas and sums:
#   1. the untrained start: the base with the six marker tokens added (their
#      rows the mean of their spellings' pieces), as an f32 HF folder;
#   2. the seeded training and held-out data (data.py);
#   3. training (train.py: LoRA on every projection and the new token rows,
#      with MLX and mlx-lm, the peer environment interop/peers/mlx-lm.sh
#      installs);
#   4. the deltas merged as set-up merges them (assemble.py), and the
#      SHA-256 sums set-up checks written.
# Needs scripts/setup.sh run first. Work files go to target/conformance/.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
HERE=models/conformance
WORK=target/conformance
BASE=.cache/models/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
PY=.cache/venv/bin/python
TRAIN_PY="$(bash interop/peers/mlx-lm.sh)/python"
mkdir -p "$WORK"
t0=$(date +%s)
"$PY" "$HERE/assemble.py" --base "$BASE" --type f32 --gguf "$WORK/start.gguf" --hf "$WORK/start"
"$TRAIN_PY" "$HERE/data.py" --train "$WORK/train.jsonl" --heldout "$WORK/heldout.jsonl"
# 1.75 epochs (259 steps of at most 2,048 tokens): what fits the hour.
"$TRAIN_PY" "$HERE/train.py" --start "$WORK/start" --data "$WORK/train.jsonl" --out "$WORK/deltas.safetensors" \
    --epochs 1.75 "$@"
cp "$WORK/deltas.safetensors" "$HERE/deltas.safetensors"
rm -rf "$WORK/model"
"$PY" "$HERE/assemble.py" --base "$BASE" --deltas "$HERE/deltas.safetensors" \
    --gguf "$WORK/model/afm-conformance.Q8_0.gguf" --hf "$WORK/model/hf"
(cd "$WORK/model" && sha256sum afm-conformance.Q8_0.gguf hf/*) >"$HERE/SHA256SUMS"
echo "conformance: built in $(( ($(date +%s) - t0) / 60 )) min; $(du -h "$HERE/deltas.safetensors" | cut -f1) of deltas" >&2
