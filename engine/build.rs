//! Builds the CPU primitives (`cpu-kernels/`: quantized matmul, attention,
//! gated activations) into the
//! engine on Linux, against the MLX headers of the `mlx-cpu` wheel that the
//! mlx-sys overlay links (`MLX_DIR`, set by the generated
//! `.cargo/config.toml`). macOS runs MLX on Metal, whose own quantized
//! matmul is fast, and builds none of it.

use std::env;
use std::path::PathBuf;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    if env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("macos") {
        return;
    }
    println!("cargo:rerun-if-env-changed=MLX_DIR");
    let mlx_dir = PathBuf::from(env::var("MLX_DIR").unwrap_or_else(|_| {
        panic!("MLX_DIR is not set: run scripts/setup.sh to generate .cargo/config.toml")
    }));
    // MLX_DIR is <prefix>/share/cmake/MLX; headers are in <prefix>/include.
    let prefix = mlx_dir
        .ancestors()
        .nth(3)
        .expect("MLX_DIR must be <prefix>/share/cmake/MLX");
    let include = prefix.join("include");
    println!(
        "cargo:rerun-if-changed={}",
        include.join("mlx/version.h").display()
    );

    let src = PathBuf::from("cpu-kernels");
    for f in [
        "primitive.h",
        "primitive_support.h",
        "primitive_support.cpp",
        "primitive_qmm.cpp",
        "primitive_attention.cpp",
        "primitive_layer.cpp",
        "primitive_c_api.cpp",
        "qmm_affine.cpp",
        "qmm_affine.h",
        "qmm_affine_impl.h",
        "qmm_gather.cpp",
        "qmm_gather.h",
        "qmm_affine_avx2.cpp",
        "qmm_affine_avx512.cpp",
        "thread_pool.cpp",
        "thread_pool.h",
        "attention.cpp",
        "attention.h",
        "attention_impl.h",
        "attention_avx2.cpp",
        "attention_avx512.cpp",
        "glu.cpp",
        "glu.h",
        "glu_avx2.cpp",
        "layer.cpp",
        "layer.h",
        "delta_net.cpp",
        "delta_net.h",
        "simd_avx2.h",
        "simd_avx512.h",
    ] {
        println!("cargo:rerun-if-changed={}", src.join(f).display());
    }

    // Always optimized, even in test builds: an -O0 kernel would make every
    // debug-profile test of a quantized model crawl. -ffp-contract=off keeps
    // each output's rounding exactly as written (batch invariance).
    let base = || {
        let mut b = cc::Build::new();
        b.cpp(true)
            .std("c++20")
            .opt_level(3)
            .debug(false)
            .flag("-ffp-contract=off")
            .flag("-pthread")
            .flag_if_supported("-Wno-unused-parameter")
            .warnings(false);
        b
    };
    let x86 = env::var("CARGO_CFG_TARGET_ARCH").as_deref() == Ok("x86_64");
    // Only the AVX2 files get the ISA flags; the dispatcher checks the CPU
    // at run time, so the library runs on any x86-64 (and off x86, the
    // portable kernel alone is built).
    if x86 {
        base()
            .files(
                ["qmm_affine_avx2.cpp", "attention_avx2.cpp", "glu_avx2.cpp"].map(|f| src.join(f)),
            )
            .flag("-mavx2")
            .flag("-mfma")
            .flag("-mf16c")
            .compile("afm_qmm_avx2");
        base()
            .files(["qmm_affine_avx512.cpp", "attention_avx512.cpp"].map(|f| src.join(f)))
            .flag("-mavx512f")
            .flag("-mavx2")
            .flag("-mfma")
            .flag("-mf16c")
            .compile("afm_qmm_avx512");
    }
    base()
        .files(
            [
                "qmm_affine.cpp",
                "qmm_gather.cpp",
                "attention.cpp",
                "glu.cpp",
                "layer.cpp",
                "delta_net.cpp",
                "thread_pool.cpp",
                "primitive_support.cpp",
                "primitive_qmm.cpp",
                "primitive_attention.cpp",
                "primitive_layer.cpp",
                "primitive_c_api.cpp",
            ]
            .map(|f| src.join(f)),
        )
        .include(&include)
        .compile("afm_qmm");
}
