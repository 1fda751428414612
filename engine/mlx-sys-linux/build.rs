//! Linux build script for the upstream `mlx-sys` crate.
//!
//! `scripts/setup.sh` copies the published `mlx-sys` source out of cargo's
//! registry, puts this file in place of its `build.rs` and points
//! `[patch.crates-io]` at the copy. Upstream's script targets Apple only
//! (it fetches MLX from git and links Foundation/Metal); this one builds
//! mlx-c against the MLX shipped in the `mlx-cpu` wheel instead.
//!
//! Inputs (set by the generated `.cargo/config.toml`):
//! - `MLX_DIR`: the wheel's `share/cmake/MLX` folder;
//! - `AFM_MLX_COMPAT_HEADER`: the forced-include header beside this file.

use std::{
    env,
    path::{Path, PathBuf},
};

#[allow(dead_code)] // upstream helpers this script does not call
#[path = "src/bindgen_config.rs"]
mod bindgen_config;

fn required_env(name: &str) -> String {
    println!("cargo:rerun-if-env-changed={name}");
    env::var(name).unwrap_or_else(|_| {
        panic!("{name} is not set: run scripts/setup.sh to generate .cargo/config.toml")
    })
}

fn main() {
    let mlx_dir = PathBuf::from(required_env("MLX_DIR"));
    let compat = required_env("AFM_MLX_COMPAT_HEADER");
    println!("cargo:rerun-if-changed={compat}");
    let mlx_c_root = Path::new("src/mlx-c");

    let include_flag = format!("-include {compat}");
    let dst = cmake::Config::new(mlx_c_root)
        .define("MLX_C_USE_SYSTEM_MLX", "ON")
        .define("MLX_DIR", &mlx_dir)
        .define("MLX_C_BUILD_EXAMPLES", "OFF")
        .define("CMAKE_BUILD_TYPE", "Release")
        .define("CMAKE_INSTALL_PREFIX", ".")
        .cflag(&include_flag)
        .cxxflag(&include_flag)
        .build();

    // The wheel keeps libmlx.so in <site-packages>/mlx/lib; MLX_DIR is
    // <site-packages>/mlx/share/cmake/MLX.
    let mlx_lib = mlx_dir
        .ancestors()
        .nth(3)
        .expect("MLX_DIR must be <prefix>/share/cmake/MLX")
        .join("lib");
    for dir in [dst.join("lib"), dst.join("build")] {
        println!("cargo:rustc-link-search=native={}", dir.display());
    }
    println!("cargo:rustc-link-search=native={}", mlx_lib.display());
    println!("cargo:rustc-link-lib=static=mlxc");
    println!("cargo:rustc-link-lib=dylib=mlx");
    println!("cargo:rustc-link-lib=dylib=stdc++");
    println!("cargo:lib_dir={}", mlx_lib.display());

    let headers = bindgen_config::discover_headers(mlx_c_root).expect("mlx-c headers");
    for header in &headers {
        println!("cargo:rerun-if-changed={}", header.display());
    }
    let bindings = bindgen_config::builder(mlx_c_root, &headers)
        .clang_arg("-include")
        .clang_arg(&compat)
        .parse_callbacks(Box::new(bindgen::CargoCallbacks::new()))
        .generate()
        .expect("generating mlx-c bindings");
    let out = PathBuf::from(env::var("OUT_DIR").unwrap());
    bindings
        .write_to_file(out.join("bindings.rs"))
        .expect("writing mlx-c bindings");
}
