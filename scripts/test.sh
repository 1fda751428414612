#!/usr/bin/env bash
# The project's test command: installs what is missing, checks formatting,
# runs every test of the workspace, then gates the engine's behaviour on the
# committed baseline report (scripts/gate.sh).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
bash scripts/setup.sh
cargo fmt --all -- --check
cargo test --workspace
bash scripts/gate.sh
