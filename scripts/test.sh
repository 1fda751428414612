#!/usr/bin/env bash
# The project's test command: installs what is missing, checks formatting,
# runs every test of the workspace, then the harness's tests again built
# without the engine (afm-test as a server's CI installs it), then gates the
# engine's behaviour on the committed baseline reports, in-process and
# through a flagless afm-serve (scripts/gate.sh), and afm-test's verdicts
# on a real peer: the standard tier against mlx-lm's server, diffed with its
# committed report (bench/peers/afm-test.sh; installs mlx-lm on first use).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
bash scripts/setup.sh
cargo fmt --all -- --check
cargo test --workspace
cargo test -p afm-harness --no-default-features
bash scripts/gate.sh
bash bench/peers/afm-test.sh mlx-lm standard
