/*
 * Forced-include header for building mlx-c (and its bindings) on Linux/x86
 * with GCC 12 and libclang. Passed as `-include` to the C/C++ compiler and to
 * bindgen by this folder's build.rs, so no upstream source is edited.
 *
 * - GCC 12's libstdc++ has no <format>: mlx-c only uses std::format, which
 *   libfmt (header-only mode) provides with the same syntax.
 * - mlx-c's half.h declares float16_t/bfloat16_t only on ARM. Defining its
 *   include guard first and giving x86 equivalents keeps the API identical:
 *   _Float16 for IEEE half, and the raw 16-bit pattern for bfloat16.
 */
#ifndef AFM_MLX_COMPAT_H
#define AFM_MLX_COMPAT_H

#include <stdint.h>

#if defined(__cplusplus) && !defined(__cpp_lib_format)
#ifndef FMT_HEADER_ONLY
#define FMT_HEADER_ONLY
#endif
#include <fmt/format.h>
namespace std {
using fmt::format;
}
#endif

#if !defined(__aarch64__)
#define MLX_HALF_H
#define HAS_FLOAT16
#define HAS_BFLOAT16
typedef _Float16 float16_t;
typedef uint16_t bfloat16_t;
#endif

#endif
