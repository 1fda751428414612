#!/usr/bin/env bash
# Installs vllm-mlx (an OpenAI- and Anthropic-compatible server on MLX, made
# for Apple silicon) with the CPU build of MLX into its own virtual
# environment under .cache/peers/, points that MLX at the same BLAS library
# afm uses (as scripts/interop/peers/mlx-lm.sh does), and prints the environment's
# bin directory. Idempotent. VLLM_MLX_VERSION picks another release.
#
# vllm-mlx takes no chat template option: it reads the model folder's, so it
# serves the conformance model's HF folder with that model's own template,
# parses its hermes-format calls (<tool_call>...</tool_call>) and its
# Qwen3-style reasoning with the flags below (without them, streamed calls
# are not parsed). Its default engine runs one generation at a time
# and answers 503 to a request that comes while one runs, unless
# VLLM_MLX_SIMPLE_ENGINE_LOCK_ADMISSION=wait makes it queue;
# --continuous-batching batches instead. The Anthropic endpoint is
# /v1/messages. As afm-test starts it, from the checkout's root (with a key,
# so the security cases run):
#   env HF_HUB_OFFLINE=1 BIN/vllm-mlx serve {model} --port {port} \
#       --reasoning-parser qwen3 --enable-auto-tool-choice --tool-call-parser hermes \
#       --api-key KEY
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
VERSION="${VLLM_MLX_VERSION:-0.6.0}"
VENV="$ROOT/.cache/peers/vllm-mlx-$VERSION"
BLAS=/usr/lib/x86_64-linux-gnu/openblas-pthread/libopenblas.so.0
[ -e "$BLAS" ] || { echo "missing $BLAS (apt-get install libopenblas0-pthread)" >&2; exit 1; }
if [ ! -x "$VENV/bin/vllm-mlx" ]; then
    python3 -m venv "$VENV"
    # vllm-mlx 0.6.0 wants mlx-lm below 0.32; MLX itself is the release
    # scripts/interop/peers/mlx-lm.sh pins. transformers pinned too: it renders the
    # chat template and tokenizes. Wheels only: the dependencies (torch and
    # torchvision among them, for the vision models: about 6 GB with their
    # CUDA libraries, unused) need no compiler.
    "$VENV/bin/pip" install -q --disable-pip-version-check --only-binary :all: \
        "vllm-mlx==$VERSION" "mlx-lm==${MLX_LM_VERSION:-0.31.3}" \
        "mlx[cpu]==${MLX_VERSION:-0.32.4}" \
        "transformers==${TRANSFORMERS_VERSION:-5.24.0}" >&2
fi
for lib in "$VENV"/lib/python3*/site-packages/mlx_cpu.libs/libblas-*.so*; do
    ln -sf "$BLAS" "$lib"
done
echo "$VENV/bin"
