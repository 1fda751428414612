#!/usr/bin/env bash
# The project's test command: installs what is missing, then checks
# formatting and runs every test of the workspace.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
bash scripts/setup.sh
cargo fmt --all -- --check
cargo test --workspace
