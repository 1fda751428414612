//! How many threads the BLAS library under MLX's CPU backend uses, and
//! which kernels OpenBLAS runs.
//!
//! On Linux, MLX's CPU matmuls go to whatever library answers to the wheel's
//! private `libblas` soname; `scripts/setup.sh` points it at OpenBLAS
//! (measured fastest from 8 rows on; it uses every core by itself) or, with
//! `AFM_BLAS=blis`, at BLIS. BLIS's pthreads build runs one thread unless
//! told otherwise, so when BLIS is the one loaded the engine tells it to use
//! every core, unless `BLIS_NUM_THREADS` already says.

use std::sync::Once;

/// The kernels OpenBLAS should use on this CPU when it chose worse ones.
///
/// OpenBLAS's DYNAMIC_ARCH build (Debian's) picks its kernels by CPU model
/// when it loads; a model newer than the release (Debian 12's 0.3.21 on
/// Emerald Rapids) falls back to "Prescott", its SSE3 kernels. Measured
/// here: a cold 1,068-token prefill of the bundled model took 6.7 s with
/// them, 4.6 s with Haswell's (AVX2) and 3.9 s with SkylakeX's (AVX-512).
/// `None` when OpenBLAS is not loaded, chose something else, or
/// `OPENBLAS_CORETYPE` already says.
pub fn openblas_core_override() -> Option<&'static str> {
    if std::env::var_os("OPENBLAS_CORETYPE").is_some() {
        return None;
    }
    if !openblas_core().is_some_and(|c| c.eq_ignore_ascii_case("prescott")) {
        return None;
    }
    #[cfg(target_arch = "x86_64")]
    {
        let skylake_x = is_x86_feature_detected!("avx512f")
            && is_x86_feature_detected!("avx512bw")
            && is_x86_feature_detected!("avx512dq")
            && is_x86_feature_detected!("avx512vl")
            && is_x86_feature_detected!("avx512cd");
        if skylake_x {
            return Some("SkylakeX");
        }
        if is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") {
            return Some("Haswell");
        }
    }
    None
}

/// Restarts the process with `OPENBLAS_CORETYPE` set when OpenBLAS chose
/// kernels older than the CPU ([`openblas_core_override`]): the library
/// reads the variable only when it loads, before `main`. Call it first in
/// the `main` of a binary that runs the engine. Returns only when nothing
/// needs changing or the restart failed (the process then goes on with the
/// slow kernels).
pub fn restart_for_openblas_core() {
    #[cfg(unix)]
    if let Some(core) = openblas_core_override() {
        use std::os::unix::process::CommandExt;
        let mut args = std::env::args_os();
        let Ok(exe) = std::env::current_exe() else {
            return;
        };
        let mut cmd = std::process::Command::new(exe);
        if let Some(arg0) = args.next() {
            cmd.arg0(arg0);
        }
        let err = cmd.args(args).env("OPENBLAS_CORETYPE", core).exec();
        eprintln!("warning: could not restart with OPENBLAS_CORETYPE={core}: {err}");
    }
}

/// The kernel family OpenBLAS runs ("Haswell", "SkylakeX", "Prescott"...),
/// when OpenBLAS is the BLAS loaded.
pub fn openblas_core() -> Option<String> {
    type CoreName = unsafe extern "C" fn() -> *const libc::c_char;
    let f = symbol("openblas_get_corename")?;
    // SAFETY: OpenBLAS's `char *openblas_get_corename(void)` returns a static
    // NUL-terminated string.
    let name = unsafe {
        let f = std::mem::transmute::<*mut libc::c_void, CoreName>(f);
        std::ffi::CStr::from_ptr(f())
    };
    Some(name.to_string_lossy().into_owned())
}

/// Sets the BLAS thread count once per process (before the first matmul).
pub fn configure_threads() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        if std::env::var_os("BLIS_NUM_THREADS").is_some() {
            return;
        }
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        if let Some(set) = blis_set_num_threads() {
            // SAFETY: BLIS's documented `void bli_thread_set_num_threads(dim_t)`;
            // dim_t is a 64-bit integer in BLIS's default configuration.
            unsafe { set(threads as i64) };
            tracing::debug!(threads, "BLIS threads set");
        }
    });
}

type SetThreads = unsafe extern "C" fn(i64);

fn blis_set_num_threads() -> Option<SetThreads> {
    // SAFETY: the symbol, when present, is BLIS's function of this signature.
    symbol("bli_thread_set_num_threads")
        .map(|p| unsafe { std::mem::transmute::<*mut libc::c_void, SetThreads>(p) })
}

/// Looks `name` up among the libraries already loaded (libmlx's BLAS is).
#[cfg(unix)]
fn symbol(name: &str) -> Option<*mut libc::c_void> {
    let name = std::ffi::CString::new(name).ok()?;
    // SAFETY: dlsym with RTLD_DEFAULT and a NUL-terminated name only reads.
    let p = unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr()) };
    (!p.is_null()).then_some(p)
}

#[cfg(not(unix))]
fn symbol(_name: &str) -> Option<*mut libc::c_void> {
    None
}
