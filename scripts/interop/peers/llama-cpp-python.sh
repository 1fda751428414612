#!/usr/bin/env bash
# Installs llama-cpp-python's OpenAI-compatible server (`python -m
# llama_cpp.server`) into its own virtual environment under .cache/peers/,
# building the llama.cpp it vendors from the source package with pip (minutes
# of CPU on two cores), and prints the environment's bin directory.
# Idempotent. LLAMA_CPP_PYTHON_VERSION picks another release.
#
# The server takes no template file. With no --chat_format it renders the
# GGUF's own template (the bundled model's offers no tools); the format that
# returns tool_calls is the package's own chatml-function-calling (its own
# ChatML prompt, calls constrained by a grammar), and only when a request
# sets tool_choice ("auto" or a named function: without one the tools are
# left out of the prompt). As afm-test starts it on the bundled GGUF, from
# the checkout's root (with a key, so the security cases run):
#   BIN/python -m llama_cpp.server --model {model} --port {port} --n_ctx 8192 \
#       --n_threads 2 --chat_format chatml-function-calling --api_key KEY
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
VERSION="${LLAMA_CPP_PYTHON_VERSION:-0.3.36}"
VENV="$ROOT/.cache/peers/llama-cpp-python-$VERSION"
if ! "$VENV/bin/python" -c "import llama_cpp.server" 2>/dev/null; then
    python3 -m venv "$VENV"
    # Same instruction set as scripts/interop/peers/llama-server.sh: not -march=native
    # (on processors with AMX the native build dies with an illegal
    # instruction), AVX2/FMA/F16C, which every x86-64 machine of this kind
    # runs. The multimodal library (mtmd) is left out: the bundled model is
    # text only, so it is not built.
    CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DLLAVA_BUILD=OFF" \
    CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)" \
        "$VENV/bin/pip" install -q --disable-pip-version-check --no-binary llama-cpp-python \
        "llama-cpp-python[server]==$VERSION" >&2
fi
echo "$VENV/bin"
