#!/usr/bin/env bash
# Installs the coding agents afm tests against, at the pinned versions, from
# npm into .cache/agents (idempotent; their native binaries ship inside the
# registry packages). Prints the folder of their commands.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
DIR="$ROOT/.cache/agents"
# The pinned clients; a new release is a change here, then capture.sh.
PACKAGES=(@openai/codex@0.171.0 @anthropic-ai/claude-code@2.1.332 opencode-ai@1.18.33)
mkdir -p "$DIR"
stamp="$DIR/.installed"
if [ "$(cat "$stamp" 2>/dev/null)" != "${PACKAGES[*]}" ]; then
    command -v npm >/dev/null || { echo "install.sh: npm is required (Debian: apt-get install npm)" >&2; exit 1; }
    echo "[agents] npm: installing ${PACKAGES[*]}" >&2
    (cd "$DIR" && npm install --silent --no-audit --no-fund --prefix "$DIR" "${PACKAGES[@]}" >&2)
    echo "${PACKAGES[*]}" > "$stamp"
fi
echo "$DIR/node_modules/.bin"
