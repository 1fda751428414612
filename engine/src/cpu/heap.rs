//! The C heap under MLX's CPU backend: MLX allocates every array with
//! plain `malloc` there (no buffer cache of its own), and glibc's dynamic
//! mmap threshold rises after the first large block is freed, so KV
//! buffers of every size end up inside the heap, where freed ones
//! fragment it and resident memory creeps up for as long as the server
//! runs (measured: ~7 MiB/min under a mixed soak once the prefix cache
//! was full, and flat with the threshold fixed). Fixing the threshold at
//! 64 KiB maps every block from there up on its own and returns it whole
//! when freed. An explicit `MALLOC_MMAP_THRESHOLD_` in the environment
//! wins.

/// Blocks of this size and above are mapped on their own.
pub const MMAP_THRESHOLD: usize = 64 << 10;

/// Applies the heap policy once per process (glibc only; elsewhere the
/// system allocator is left as it is). Returns whether it was applied.
pub fn configure() -> bool {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        use std::sync::OnceLock;
        static APPLIED: OnceLock<bool> = OnceLock::new();
        *APPLIED.get_or_init(|| {
            if std::env::var_os("MALLOC_MMAP_THRESHOLD_").is_some() {
                return false;
            }
            // SAFETY: mallopt only changes the allocator's parameters.
            unsafe { libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD as libc::c_int) == 1 }
        })
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        false
    }
}
