#!/usr/bin/env bash
# Builds the CPU primitives (quantized matmul, attention) against the MLX of the
# mlx-cpu wheel: libafm_cpu_kernels.so, test_qmm, bench_qmm and
# bench_attention in ./build.
#
#   MLX_DIR   the wheel's share/cmake/MLX folder (the variable
#             .cargo/config.toml sets for the mlx-sys overlay). If unset it
#             is derived from the Python that has the wheel: AFM_PYTHON, or
#             the repository's .cache/venv/bin/python.
#   CXX       compiler (default g++).
#
# Only the *_avx2.cpp files get -mavx2 -mfma -mf16c (the *_avx512.cpp ones
# -mavx512f too); the rest is built for
# the baseline ISA and picks the kernel with __builtin_cpu_supports, so the
# library runs on any x86-64. -ffp-contract=off everywhere: GCC would
# otherwise fuse multiply-adds differently per call site, and each output's
# rounding must follow the code as written (batch invariance).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
out="$here/build"
CXX="${CXX:-g++}"

if [ -z "${MLX_DIR:-}" ]; then
    py="${AFM_PYTHON:-$repo/.cache/venv/bin/python}"
    # The wheel's mlx is a namespace package (no __init__), hence __path__.
    prefix="$("$py" -c 'import mlx, os; print(os.path.realpath(list(mlx.__path__)[0]))')"
    MLX_DIR="$prefix/share/cmake/MLX"
fi
prefix="$(cd "$MLX_DIR/../../.." && pwd)"
inc="$prefix/include"
lib="$prefix/lib"
[ -f "$inc/mlx/mlx.h" ] || { echo "no MLX headers under $inc (set MLX_DIR)" >&2; exit 1; }
[ -f "$lib/libmlx.so" ] || { echo "no libmlx.so under $lib (set MLX_DIR)" >&2; exit 1; }

mkdir -p "$out"
common=(-std=c++20 -O3 -fPIC -pthread -ffp-contract=off -Wall -Wextra -Wno-unused-parameter)

set -x
"$CXX" "${common[@]}" -c "$here/qmm_affine.cpp" -o "$out/qmm_affine.o"
"$CXX" "${common[@]}" -mavx2 -mfma -mf16c -c "$here/qmm_affine_avx2.cpp" -o "$out/qmm_affine_avx2.o"
"$CXX" "${common[@]}" -mavx512f -mavx2 -mfma -mf16c -c "$here/qmm_affine_avx512.cpp" -o "$out/qmm_affine_avx512.o"
"$CXX" "${common[@]}" -c "$here/qmm_gather.cpp" -o "$out/qmm_gather.o"
"$CXX" "${common[@]}" -c "$here/attention.cpp" -o "$out/attention.o"
"$CXX" "${common[@]}" -mavx2 -mfma -mf16c -c "$here/attention_avx2.cpp" -o "$out/attention_avx2.o"
"$CXX" "${common[@]}" -mavx512f -mavx2 -mfma -mf16c -c "$here/attention_avx512.cpp" -o "$out/attention_avx512.o"
"$CXX" "${common[@]}" -c "$here/glu.cpp" -o "$out/glu.o"
"$CXX" "${common[@]}" -mavx2 -mfma -mf16c -c "$here/glu_avx2.cpp" -o "$out/glu_avx2.o"
"$CXX" "${common[@]}" -c "$here/thread_pool.cpp" -o "$out/thread_pool.o"
"$CXX" "${common[@]}" -c "$here/layer.cpp" -o "$out/layer.o"
"$CXX" "${common[@]}" -c "$here/delta_net.cpp" -o "$out/delta_net.o"
for f in primitive_support primitive_qmm primitive_attention primitive_layer primitive_c_api; do
    "$CXX" "${common[@]}" -I"$inc" -c "$here/$f.cpp" -o "$out/$f.o"
done
"$CXX" -shared -pthread -o "$out/libafm_cpu_kernels.so" \
    "$out/qmm_affine.o" "$out/qmm_affine_avx2.o" "$out/qmm_affine_avx512.o" "$out/qmm_gather.o" "$out/attention.o" "$out/attention_avx2.o" "$out/attention_avx512.o" \
    "$out/glu.o" "$out/glu_avx2.o" "$out/thread_pool.o" "$out/layer.o" "$out/delta_net.o" "$out"/primitive_*.o \
    -L"$lib" -lmlx -Wl,-rpath,"$lib"
for prog in test_qmm bench_qmm bench_attention; do
    "$CXX" "${common[@]}" -I"$inc" "$here/$prog.cpp" -o "$out/$prog" \
        -L"$out" -lafm_cpu_kernels -L"$lib" -lmlx \
        -Wl,-rpath,"$out" -Wl,-rpath,"$lib"
done
