#!/usr/bin/env bash
# Installs mlx-omni-server (OpenAI- and Anthropic-compatible endpoints on
# MLX, made for Apple silicon) with the CPU build of MLX into its own virtual
# environment under .cache/peers/, points that MLX at the same BLAS library
# afm uses (as scripts/interop/peers/mlx-lm.sh does), and prints the environment's
# bin directory. Idempotent. MLX_OMNI_SERVER_VERSION picks another release.
#
# As published it does not install or start on Linux with MLX's CPU build:
# its image endpoint wants MLX's CUDA build, and its speech endpoint, imported
# at start, builds a Metal kernel and downloads a spaCy pipeline. Below, the
# dependencies are pinned around the first, and two stand-in packages take
# the place of the others, each confined to the speech endpoint (chat, what
# afm-test tests, runs the package's own code unchanged).
#
# The server loads no model at start: each request names one, and only an
# absolute path is taken for a local folder (a relative one is looked up as
# a Hugging Face repository id). The chat template comes from that folder,
# so it serves the conformance model's HF folder with that model's own
# template; tool calls are parsed in the hermes format
# (<tool_call>...</tool_call>), its default for a llama model. As afm-test
# starts it, from the checkout's root:
#   afm-test run --model "$PWD/.cache/models/conformance/hf" --server \
#     "env HF_HUB_OFFLINE=1 BIN/mlx-omni-server --host 127.0.0.1 --port {port} --log-level warning"
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
VERSION="${MLX_OMNI_SERVER_VERSION:-0.5.3}"
VENV="$ROOT/.cache/peers/mlx-omni-server-$VERSION"
BLAS=/usr/lib/x86_64-linux-gnu/openblas-pthread/libopenblas.so.0
[ -e "$BLAS" ] || { echo "missing $BLAS (apt-get install libopenblas0-pthread)" >&2; exit 1; }
# sounddevice, imported at start by the speech endpoint, needs PortAudio.
ldconfig -p | grep -q 'libportaudio\.so\.2' ||
    { echo "missing PortAudio (apt-get install libportaudio2)" >&2; exit 1; }
# .installed marks the end of both steps.
if [ ! -f "$VENV/.installed" ]; then
    python3 -m venv "$VENV"
    # Its image generator, mflux, requires MLX's CUDA 13 build on Linux,
    # which would overwrite the CPU build's files (both ship the mlx
    # package's libraries). So mlx-omni-server and mflux go in without their
    # dependencies, and then those dependencies go in, with MLX's CPU build
    # (the last release below 0.32: mflux and mlx-lm 0.31 want one), less
    # MLX's CUDA build, less mflux itself and less f5-tts-mlx (stand-in
    # below).
    "$VENV/bin/pip" install -q --disable-pip-version-check --no-deps \
        "mlx-omni-server==$VERSION" "mflux==${MFLUX_VERSION:-0.17.5}" >&2
    REQS="$VENV/dependencies.txt"
    "$VENV/bin/python" - >"$REQS" <<'EOF'
import re
from importlib.metadata import requires
for dist in ("mlx-omni-server", "mflux"):
    for req in requires(dist) or []:
        name = re.match(r"[A-Za-z0-9_.-]+", req).group(0).lower()
        if name not in ("mlx", "mflux", "f5-tts-mlx"):
            print(req)
EOF
    # Wheels only. transformers pinned (it renders the chat template and
    # tokenizes; mlx-omni-server wants it below 5.9). Pillow below 13:
    # 13.0's PIL._typing, which the server imports, fails on Python 3.11
    # (numbers._IntegralLike: no such name). pip reports f5-tts-mlx missing
    # as a conflict and goes on.
    "$VENV/bin/pip" install -q --disable-pip-version-check --only-binary :all: \
        -r "$REQS" "mlx[cpu]==${MLX_VERSION:-0.31.2}" \
        "mlx-lm==${MLX_LM_VERSION:-0.31.3}" "pillow==12.3.0" \
        "transformers==${TRANSFORMERS_VERSION:-5.8.1}" >&2
    touch "$VENV/.installed"
fi
SITE="$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
# Stand-in 1: f5-tts-mlx (a text-to-speech model) builds a Metal kernel when
# imported (through vocos-mlx), which MLX's CPU build refuses, and the
# speech endpoint imports it at start. In its place, a package of that name
# whose generate() says so.
if [ ! -f "$SITE/f5_tts_mlx/generate.py" ]; then
    mkdir -p "$SITE/f5_tts_mlx"
    echo '"""Stand-in for f5-tts-mlx (see scripts/interop/peers/mlx-omni-server.sh)."""' \
        >"$SITE/f5_tts_mlx/__init__.py"
    cat >"$SITE/f5_tts_mlx/generate.py" <<'EOF'
"""Stand-in for f5-tts-mlx (see scripts/interop/peers/mlx-omni-server.sh)."""


def generate(*args, **kwargs):
    raise RuntimeError("F5-TTS needs MLX's Metal back-end, not installed here")
EOF
fi
# Stand-in 2: at import the server builds the English phonemizer of its
# speech endpoint (misaki's G2P), which loads spaCy's en_core_web_sm
# pipeline and, when it is not installed, downloads it (spaCy's models are
# not on the package registries). In its place, a package of that name that
# gives spaCy's blank English pipeline: the speech endpoint's English
# phonemes get worse.
if [ ! -d "$SITE/en_core_web_sm" ]; then
    mkdir -p "$SITE/en_core_web_sm" "$SITE/en_core_web_sm-0.0.0.dist-info"
    cat >"$SITE/en_core_web_sm/__init__.py" <<'EOF'
"""Stand-in for spaCy's en_core_web_sm (see scripts/interop/peers/mlx-omni-server.sh)."""
import spacy


def load(**overrides):
    return spacy.blank("en")
EOF
    # spaCy takes a pipeline for installed when its distribution is.
    printf 'Metadata-Version: 2.1\nName: en_core_web_sm\nVersion: 0.0.0\nSummary: Stand-in: spacy.blank("en")\n' \
        >"$SITE/en_core_web_sm-0.0.0.dist-info/METADATA"
    printf '%s,,\n' en_core_web_sm/__init__.py en_core_web_sm-0.0.0.dist-info/METADATA \
        en_core_web_sm-0.0.0.dist-info/RECORD >"$SITE/en_core_web_sm-0.0.0.dist-info/RECORD"
fi
for lib in "$VENV"/lib/python3*/site-packages/mlx_cpu.libs/libblas-*.so*; do
    ln -sf "$BLAS" "$lib"
done
echo "$VENV/bin"
