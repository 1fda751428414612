//! The C heap under MLX's CPU backend: MLX allocates every array with
//! plain `malloc` there (no buffer cache of its own), and glibc's dynamic
//! mmap threshold rises after the first large block is freed, so KV
//! buffers of every size end up inside the heap, where freed ones
//! fragment it and resident memory creeps up for as long as the server
//! runs (measured: ~7 MiB/min under a mixed soak once the prefix cache
//! was full, and flat with the threshold fixed). Fixing the threshold
//! maps every block from there up on its own and returns it whole when
//! freed. It sits at 1 MiB, not lower, because a decode step's own
//! arrays (a layer's projections of a batch: 60-800 KiB on SmolLM2 at 8
//! to 64 rows) are allocated and freed every layer of every step: mapped
//! alone, each cost an mmap, its page faults and an munmap with its TLB
//! shootdown (MLX's ops at 8 streams: 59.5 tok/s at 64 KiB against 65.7
//! at 1 MiB; at 32 streams 98.0 against 109.4). An explicit
//! `MALLOC_MMAP_THRESHOLD_` in the environment wins.

/// Blocks of this size and above are mapped on their own.
pub const MMAP_THRESHOLD: usize = 1 << 20;

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
