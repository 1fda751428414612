//! Which kernels a process runs its models with, chosen once: afm's CPU
//! primitives (the quantized matmul, attention, gated activation and the
//! whole-layer op: MLX ops that only MLX's CPU stream runs) or MLX's own
//! ops alone, the path Metal and CUDA take. `--kernels` on afm-serve,
//! `AFM_KERNELS` elsewhere (afm-test's in-process engine, benches); `auto`
//! takes the primitives where they run (a Linux CPU with the MLX they were
//! built for) and MLX's ops everywhere else. The older per-primitive
//! switches (`AFM_QMM`, `AFM_ATTENTION`, `AFM_GLU`, `AFM_LAYER` = `off`)
//! still turn single primitives off under `auto`, for profiling.
//! Depends on nothing else in `cpu`: the primitives' paths read it.

use std::sync::OnceLock;

/// The kernels a process asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Kernels {
    /// afm's primitives where they run, MLX's ops elsewhere.
    #[default]
    Auto,
    /// MLX's own ops only (what Metal and CUDA run).
    Mlx,
    /// afm's CPU primitives; an error where they cannot run.
    Afm,
}

impl Kernels {
    pub const NAMES: &'static str = "auto, mlx or afm";

    pub fn name(self) -> &'static str {
        match self {
            Kernels::Auto => "auto",
            Kernels::Mlx => "mlx",
            Kernels::Afm => "afm",
        }
    }
}

impl std::str::FromStr for Kernels {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "auto" => Ok(Kernels::Auto),
            "mlx" => Ok(Kernels::Mlx),
            "afm" => Ok(Kernels::Afm),
            other => Err(format!(
                "unknown kernels '{other}' (expected {})",
                Self::NAMES
            )),
        }
    }
}

impl std::fmt::Display for Kernels {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

static CHOSEN: OnceLock<Kernels> = OnceLock::new();

/// Sets the process's kernels (`Engine::start` does, from its config).
/// Must come before a model loads: the paths (and the default weight
/// mode) are decided once, at their first use.
/// Choosing again the same is fine; another choice is an error naming
/// both.
pub fn choose(kernels: Kernels) -> Result<(), String> {
    let now = *CHOSEN.get_or_init(|| kernels);
    if now != kernels {
        return Err(format!(
            "kernels already chosen as '{now}' in this process, cannot switch to '{kernels}'"
        ));
    }
    Ok(())
}

/// The process's kernels: what [`choose`] set, else `AFM_KERNELS`, else
/// `auto` (an unknown `AFM_KERNELS` value is reported when the engine
/// loads, through `cpu::check_kernels`).
pub fn chosen() -> Kernels {
    *CHOSEN.get_or_init(|| {
        std::env::var("AFM_KERNELS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or_default()
    })
}

/// Why every primitive is off, when the process runs MLX's ops alone:
/// the reason the start-up line gives.
pub(super) fn off_reason() -> Option<&'static str> {
    (chosen() == Kernels::Mlx).then_some("--kernels mlx")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_unknown_names_are_refused() {
        for k in [Kernels::Auto, Kernels::Mlx, Kernels::Afm] {
            assert_eq!(k.name().parse::<Kernels>(), Ok(k));
        }
        let err = "metal".parse::<Kernels>().unwrap_err();
        assert!(
            err.contains("metal") && err.contains("auto, mlx or afm"),
            "{err}"
        );
    }
}
