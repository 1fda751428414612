#!/usr/bin/env bash
# Installs mlx-lm (MLX's own Python LLM server) with the CPU build of MLX into
# its own virtual environment under .cache/peers/, points that MLX at the same
# BLAS library afm uses (OpenBLAS; MLX_LM_BLAS=blis picks Debian's BLIS),
# and prints the environment's bin directory. Idempotent.
# MLX_LM_VERSION picks another release.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
VERSION="${MLX_LM_VERSION:-0.32.2}"
VENV="$ROOT/.cache/peers/mlx-lm-$VERSION"
case "${MLX_LM_BLAS:-openblas}" in
blis) BLAS=/usr/lib/x86_64-linux-gnu/blis-pthread/libblis.so.4 ;;
openblas) BLAS=/usr/lib/x86_64-linux-gnu/openblas-pthread/libopenblas.so.0 ;;
*) echo "MLX_LM_BLAS must be blis or openblas" >&2; exit 1 ;;
esac
[ -e "$BLAS" ] || { echo "missing $BLAS (apt-get install libblis4-pthread or libopenblas0-pthread)" >&2; exit 1; }
if [ ! -x "$VENV/bin/mlx_lm.server" ]; then
    python3 -m venv "$VENV"
    # MLX and transformers pinned too: the committed peer report
    # (reports/baselines/peers/mlx-lm.json) was taken with these.
    "$VENV/bin/pip" install -q --disable-pip-version-check "mlx-lm==$VERSION" \
        "mlx[cpu]==${MLX_VERSION:-0.32.4}" "transformers==${TRANSFORMERS_VERSION:-5.23.0}" >&2
fi
for lib in "$VENV"/lib/python3*/site-packages/mlx_cpu.libs/libblas-*.so*; do
    ln -sf "$BLAS" "$lib"
done
echo "$VENV/bin"
