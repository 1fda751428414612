#!/usr/bin/env bash
# The project's main job: installs what is missing, builds in release mode
# and answers a question with the bundled model.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
bash scripts/setup.sh
cargo run --release -q -p afm-engine --bin afm-serve -- \
    generate --model smollm2 --prompt "What is the capital of France?" \
    --max-tokens 32 --temperature 0 "$@"
