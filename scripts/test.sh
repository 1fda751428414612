#!/usr/bin/env bash
# The project's test command: installs what is missing, checks formatting,
# runs every test of the workspace (the conformance runner a second time
# with attention through MLX, the CPU attention's tests a second time on
# its AVX2 rows), then the harness's tests again built
# without the engine (afm-test as a server's CI installs it), then gates the
# engine's behaviour on the committed baseline reports, in-process and
# through a flagless afm-serve (scripts/gate.sh), a short schemathesis pass
# with OpenAI's published spec, and afm-test's verdicts
# on a real peer: the standard tier against mlx-lm's server, diffed with its
# committed report (scripts/interop/peers/afm-test.sh; installs mlx-lm on first use),
# the GitHub Action's step as a runner runs it (scripts/action-test.sh),
# and a 2-minute soak of afm-serve (scripts/soak.sh).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
bash scripts/setup.sh
cargo fmt --all -- --check
cargo test --workspace
# MLX's own ops alone (AFM_KERNELS=mlx: the path Metal and CUDA take, and
# the fixed-shape attention of batch-invariant mode there) instead of afm's
# CPU primitives: the conformance runner, batch invariance and the step
# counts again.
AFM_KERNELS=mlx cargo test -p afm-engine --test integration -- model_conformance:: batch_invariance:: step_ops::
# The AVX2 attention rows where the CPU would take the AVX-512 ones
# (AFM_QMM_KERNEL=avx2 caps every kernel's path): both forms stay tested.
AFM_QMM_KERNEL=avx2 cargo test -p afm-engine --lib -- cpu::attention::
cargo test -p afm-harness --no-default-features
bash scripts/gate.sh
# OpenAI's published spec against a flagless afm-serve, by schemathesis:
# a short fixed-seed pass, failing on a 5xx, a reply off the spec's schema
# or a wrong media type (scripts/interop/schemathesis/run.sh; the full run is not CI).
AFM_SERVE=target/debug/afm-serve \
    SCHEMATHESIS_CHECKS=not_a_server_error,response_schema_conformance,content_type_conformance \
    bash scripts/interop/schemathesis/run.sh --quick
bash scripts/interop/peers/afm-test.sh mlx-lm standard
# The GitHub Action's step (scripts/action.sh) as a runner runs it, against
# afm-serve (a baseline, then a regression) and mlx-lm (scripts/action-test.sh).
bash scripts/action-test.sh
# A 2-minute soak of a flagless afm-serve (but a 32 MiB prefix cache, full
# within the warm-up): no 5xx, flat memory, no descriptor growth, steady
# p99 (scripts/soak.sh; the 30-minute run is in docs/hostile.md).
DURATION=120 WARMUP=40 SPAN=40 SAMPLE=5 OUT=target/soak-ci bash scripts/soak.sh --prefix-cache-mb 32
