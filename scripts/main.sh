#!/usr/bin/env bash
# The project's main job: installs what is missing, builds in release mode
# and runs the full tier of the assertion suites against the in-process
# engine with the conformance model (fixtures/models/conformance/: the bundled
# base taught to think and call tools, so every reasoning case runs;
# AFM_MODEL picks another; extra arguments go to afm-test). Failures the
# model causes are explained in reports/baselines/known-failures.toml.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
bash scripts/setup.sh
cargo run --release -q -p afm-harness --bin afm-test -- --tier full --model "${AFM_MODEL:-conformance}" \
    --known-failures reports/baselines/known-failures.toml "$@"
