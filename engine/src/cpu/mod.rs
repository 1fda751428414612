//! What the engine adds under MLX's CPU backend (Linux): the BLAS library's
//! thread count; [`qmm`], a quantized matmul primitive that keeps quantized
//! weights packed (MLX's own is a scalar loop on x86); [`attention`],
//! which reads the batch KV store in place with a vectorized softmax;
//! [`glu`], the MLP's gated activation with a vectorized `exp`; [`layer`],
//! a whole decoder layer as one primitive over those kernels;
//! [`delta_net`], the Gated DeltaNet recurrence of a chunk as one; which of
//! them a process runs ([`kernels`]: `--kernels auto|mlx|afm`); and the C
//! heap's policy ([`heap`]), since MLX's CPU arrays are plain `malloc`.
//! Depends on `device` (on a GPU every primitive steps aside) and the
//! error type, nothing else in the engine; `layers`, `loading`, `models`,
//! `runtime` and `api` call it.

pub mod attention;
pub mod blas;
pub mod delta_net;
pub mod glu;
pub mod heap;
pub mod kernels;
pub mod layer;
pub mod qmm;

/// Why a primitive is off by choice: the process runs MLX's ops alone
/// ([`kernels`]), or the environment variable `switch` is `off` or `0`
/// (one primitive off, for profiling).
fn switched_off(switch: &str) -> Option<String> {
    if let Some(why) = kernels::off_reason() {
        return Some(why.into());
    }
    std::env::var(switch)
        .is_ok_and(|v| v == "off" || v == "0")
        .then(|| format!("{switch}=off"))
}

/// The path of a primitive riding on the quantized matmul's build and
/// checks ([`qmm::path`]), unless it is [`switched_off`].
fn switched_path(switch: &str) -> qmm::Path {
    match switched_off(switch) {
        Some(why) => qmm::Path::Unavailable(why),
        None => qmm::path().clone(),
    }
}

/// Checks that the kernels asked for can be honoured once the paths are
/// decided: an unknown `AFM_KERNELS`, or `afm` where the primitives cannot
/// run, is an error that says why.
pub fn check_kernels() -> crate::error::Result<()> {
    let unsupported = crate::error::EngineError::Unsupported;
    if let Ok(v) = std::env::var("AFM_KERNELS") {
        v.parse::<kernels::Kernels>()
            .map_err(|e| unsupported(format!("AFM_KERNELS: {e}")))?;
    }
    if kernels::chosen() == kernels::Kernels::Afm {
        if let qmm::Path::Unavailable(why) = layer::path() {
            return Err(unsupported(format!(
                "--kernels afm: afm's CPU primitives cannot run here ({why})"
            )));
        }
    }
    Ok(())
}

/// What runs, in a word: `afm` when decoder layers take the primitive,
/// `mlx` when nothing of afm's does, `mixed` between (single primitives
/// switched off).
pub fn active_kernels() -> &'static str {
    let any = qmm::path().is_primitive()
        || attention::path().is_primitive()
        || glu::path().is_primitive();
    match (layer::path().is_primitive(), any) {
        (true, _) => "afm",
        (false, false) => "mlx",
        (false, true) => "mixed",
    }
}

/// Runs one of `cpu-kernels`' C entry points: `call` gets an empty mlx-c
/// handle for the result (mlx-c's convention for outputs) and a NULL stream
/// (the default CPU stream); a non-zero status is an error whose reason the
/// library keeps for the calling thread.
#[cfg(not(target_os = "macos"))]
fn build_op(
    call: impl FnOnce(*mut mlx_sys::mlx_array, mlx_sys::mlx_stream) -> std::ffi::c_int,
) -> crate::error::Result<mlx_rs::Array> {
    let [a] = build_ops(call)?;
    Ok(a)
}

/// [`build_op`] for an entry point with `N` outputs: `call` gets `N` empty
/// handles in a row.
#[cfg(not(target_os = "macos"))]
fn build_ops<const N: usize>(
    call: impl FnOnce(*mut mlx_sys::mlx_array, mlx_sys::mlx_stream) -> std::ffi::c_int,
) -> crate::error::Result<[mlx_rs::Array; N]> {
    extern "C" {
        fn afm_qmm_last_error() -> *const std::ffi::c_char;
    }
    // SAFETY: `res` starts as N empty handles and on success each holds a
    // new array that `Array::from_ptr` takes ownership of; on failure they
    // are freed. The error text is NUL-terminated and lives until this
    // thread's next call.
    unsafe {
        let mut res: [mlx_sys::mlx_array; N] = std::array::from_fn(|_| mlx_sys::mlx_array_new());
        let stream = mlx_sys::mlx_stream {
            ctx: std::ptr::null_mut(),
        };
        if call(res.as_mut_ptr(), stream) != 0 {
            res.into_iter().for_each(|r| {
                mlx_sys::mlx_array_free(r);
            });
            let why = std::ffi::CStr::from_ptr(afm_qmm_last_error()).to_string_lossy();
            return Err(crate::error::EngineError::Mlx(why.into_owned()));
        }
        Ok(res.map(|r| mlx_rs::Array::from_ptr(r)))
    }
}

/// The MLX operations evaluating `a` would run (its graph's primitives not
/// yet computed; a multi-output op once), only those of primitive `name`
/// (MLX's `Primitive::name`, e.g. `AfmDecoderLayer`) when given: what a
/// step pays in dispatches to MLX's stream thread. `None` where the CPU
/// primitives are not built.
pub fn graph_ops(a: &mlx_rs::Array, name: Option<&str>) -> Option<usize> {
    graph_query(a, name, Query::Ops)
}

/// Bytes the not-yet-computed ops of primitive `name` in `a`'s graph
/// write (every output): what a step copies through, e.g., `Gather` or
/// `Concatenate`. `None` where the CPU primitives are not built.
pub fn graph_bytes(a: &mlx_rs::Array, name: &str) -> Option<usize> {
    graph_query(a, Some(name), Query::Bytes)
}

/// What [`graph_query`] counts over the matching ops.
#[cfg_attr(target_os = "macos", allow(dead_code))]
enum Query {
    Ops,
    Bytes,
}

fn graph_query(a: &mlx_rs::Array, name: Option<&str>, query: Query) -> Option<usize> {
    #[cfg(not(target_os = "macos"))]
    {
        type Entry =
            unsafe extern "C" fn(mlx_sys::mlx_array, *const std::ffi::c_char) -> std::ffi::c_long;
        extern "C" {
            fn afm_graph_ops(
                a: mlx_sys::mlx_array,
                name: *const std::ffi::c_char,
            ) -> std::ffi::c_long;
            fn afm_graph_bytes(
                a: mlx_sys::mlx_array,
                name: *const std::ffi::c_char,
            ) -> std::ffi::c_long;
        }
        let entry: Entry = match query {
            Query::Ops => afm_graph_ops,
            Query::Bytes => afm_graph_bytes,
        };
        let name = name.map(|n| std::ffi::CString::new(n).expect("no NUL in a name"));
        // SAFETY: the handle comes from a live Array and the name is
        // NUL-terminated (or NULL); the C side only reads the graph.
        let n = unsafe {
            entry(
                a.as_ptr(),
                name.as_ref().map_or(std::ptr::null(), |n| n.as_ptr()),
            )
        };
        usize::try_from(n).ok()
    }
    #[cfg(target_os = "macos")]
    {
        let _ = (a, name, query);
        None
    }
}

#[cfg(all(test, not(target_os = "macos")))]
mod test_support {
    use mlx_rs::Array;
    use rand_core::{RngCore, SeedableRng};

    /// `shape` filled from U(-half, half) with a fixed seed.
    pub fn uniform(shape: &[i32], half: f32, seed: u64) -> Array {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        let n: i32 = shape.iter().product();
        let v: Vec<f32> = (0..n)
            .map(|_| half * ((rng.next_u32() >> 8) as f32 / (1u32 << 23) as f32 - 1.0))
            .collect();
        Array::from_slice(&v, shape)
    }

    /// The largest `|a - b|` over all elements.
    pub fn max_diff(a: &Array, b: &Array) -> f32 {
        a.subtract(b)
            .unwrap()
            .abs()
            .unwrap()
            .max(None)
            .unwrap()
            .item_exact::<f32>()
    }
}
