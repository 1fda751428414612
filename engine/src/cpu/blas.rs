//! How many threads the BLAS library under MLX's CPU backend uses.
//!
//! On Linux, MLX's CPU matmuls go to whatever library answers to the wheel's
//! private `libblas` soname; `scripts/setup.sh` points it at OpenBLAS
//! (measured fastest from 8 rows on; it uses every core by itself) or, with
//! `AFM_BLAS=blis`, at BLIS. BLIS's pthreads build runs one thread unless
//! told otherwise, so when BLIS is the one loaded the engine tells it to use
//! every core, unless `BLIS_NUM_THREADS` already says.

use std::sync::Once;

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
