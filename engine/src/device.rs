//! The device MLX runs the model on (its default device): what it is, how
//! much memory it has, and how much of that MLX holds.
//!
//! The engine sizes itself from here: the KV budget is a share of the
//! device's own memory (an H100's 80 GB, not the host's 128 GB), and MLX's
//! buffer cache gets a bound. MLX keeps freed buffers for reuse up to its
//! cache limit, which its CUDA allocator sets to 80% of the card (its CPU
//! allocator to 32 MiB). The KV store grows by copying into buffers of a
//! new size, and a burst of requests leaves many sizes behind, none reused:
//! unbounded, the cache held 57.6 GB of an H100 after one burst of 64
//! requests on a 2.15 GB model. Metal's default is as generous, and on a
//! Mac that memory is the whole machine's.
//!
//! Depends on nothing else in the engine.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;

/// Whether MLX's default device is the CPU or a GPU (CUDA or Metal).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Cpu,
    Gpu,
}

/// MLX's default device, as probed once per process.
#[derive(Debug, Clone)]
pub struct Device {
    pub kind: Kind,
    /// The name MLX gives it (a CPU model, a GPU's product name).
    pub name: String,
    /// Memory the device has: the card's own on a discrete GPU, the
    /// machine's physical memory for the CPU and for unified memory.
    pub memory_bytes: usize,
}

impl Device {
    /// The default device (probed on first use).
    pub fn current() -> &'static Device {
        static DEVICE: OnceLock<Device> = OnceLock::new();
        DEVICE.get_or_init(probe)
    }
}

impl std::fmt::Display for Device {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match self.kind {
            Kind::Cpu => "cpu",
            Kind::Gpu => "gpu",
        };
        write!(
            f,
            "{kind} ({}, {:.1} GB)",
            self.name,
            self.memory_bytes as f64 / 1e9
        )
    }
}

/// What MLX's allocator holds, in bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MemoryUse {
    /// In arrays that are alive.
    pub active: usize,
    /// Freed, kept by MLX for reuse.
    pub cache: usize,
    /// The most `active` has been since start.
    pub peak: usize,
    /// The bound on `cache` the engine set (0 before it set one).
    pub cache_limit: usize,
}

/// MLX's memory counters now.
pub fn memory_use() -> MemoryUse {
    MemoryUse {
        active: mlx_rs::memory::active_memory().unwrap_or(0),
        cache: mlx_rs::memory::cache_memory().unwrap_or(0),
        peak: mlx_rs::memory::peak_memory().unwrap_or(0),
        cache_limit: CACHE_LIMIT.load(Ordering::Relaxed),
    }
}

static CACHE_LIMIT: AtomicUsize = AtomicUsize::new(0);

/// The cache bound when none is asked for: 1 GiB, or MLX's own default
/// where that is smaller (the CPU's 32 MiB). A decode step's temporaries for
/// 64 sequences of a 1B model are tens of MB, so 1 GiB keeps every size a
/// step reuses; what it drops are the sizes the KV store grew out of.
pub const DEFAULT_CACHE_LIMIT: usize = 1 << 30;

/// Bounds MLX's buffer cache at `bytes` (freed buffers beyond it go back to
/// the device at once), or at the smaller of `bytes` and MLX's own default
/// when `only_lower`. Returns the bound now in force.
pub fn bound_cache(bytes: usize, only_lower: bool) -> usize {
    // MLX has no getter for the limit: setting returns the one before.
    let before = mlx_rs::memory::set_cache_limit(bytes).unwrap_or(usize::MAX);
    let limit = match only_lower && before < bytes {
        true => {
            let _ = mlx_rs::memory::set_cache_limit(before);
            before
        }
        false => bytes,
    };
    CACHE_LIMIT.store(limit, Ordering::Relaxed);
    limit
}

/// The machine's physical memory in bytes (4 GiB where it cannot be read).
pub fn physical_memory() -> usize {
    // SAFETY: sysconf only reads system constants.
    let (pages, size) = unsafe {
        (
            libc::sysconf(libc::_SC_PHYS_PAGES),
            libc::sysconf(libc::_SC_PAGESIZE),
        )
    };
    match pages > 0 && size > 0 {
        true => (pages as usize).saturating_mul(size as usize),
        false => 4 << 30,
    }
}

fn probe() -> Device {
    let kind = match mlx_rs::Device::try_default().and_then(|d| d.get_type()) {
        Ok(mlx_rs::DeviceType::Gpu) => Kind::Gpu,
        _ => Kind::Cpu,
    };
    let info = info::default_device();
    Device {
        kind,
        name: info.name.unwrap_or_else(|| "unnamed".into()),
        // A discrete GPU reports its own memory; the CPU and Metal (unified
        // memory) report none or the machine's.
        memory_bytes: info.memory.unwrap_or_else(physical_memory),
    }
}

/// What MLX says of its default device (each field where it says it).
#[derive(Default)]
struct Info {
    name: Option<String>,
    memory: Option<usize>,
}

/// MLX's device information (`mlx_device_info`): keys vary by backend;
/// CUDA reports `total_memory`, Metal `memory_size`, the CPU neither.
#[cfg(not(target_os = "macos"))]
mod info {
    use std::ffi::{CStr, CString};

    use super::Info;

    pub(super) fn default_device() -> Info {
        // SAFETY: mlx-c calls on handles created and freed here; a failed
        // call leaves the field unset.
        unsafe {
            let mut dev = mlx_sys::mlx_device_new();
            let mut info = mlx_sys::mlx_device_info_new();
            let mut out = Info::default();
            if mlx_sys::mlx_get_default_device(&mut dev) == 0
                && mlx_sys::mlx_device_info_get(&mut info, dev) == 0
            {
                let string = |key: &str| {
                    let key = CString::new(key).ok()?;
                    let mut value: *const std::os::raw::c_char = std::ptr::null();
                    (mlx_sys::mlx_device_info_get_string(&mut value, info, key.as_ptr()) == 0
                        && !value.is_null())
                    .then(|| CStr::from_ptr(value).to_string_lossy().into_owned())
                };
                let size = |key: &str| {
                    let key = CString::new(key).ok()?;
                    let mut value = 0usize;
                    (mlx_sys::mlx_device_info_get_size(&mut value, info, key.as_ptr()) == 0
                        && value > 0)
                        .then_some(value)
                };
                out.name = string("device_name");
                out.memory = size("total_memory").or_else(|| size("memory_size"));
            }
            mlx_sys::mlx_device_info_free(info);
            mlx_sys::mlx_device_free(dev);
            out
        }
    }
}

/// On macOS the engine reaches MLX through mlx-rs alone, which has no
/// device information: Metal's memory is the machine's (unified).
#[cfg(target_os = "macos")]
mod info {
    use super::Info;

    pub(super) fn default_device() -> Info {
        Info {
            name: Some("Metal".into()),
            memory: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_device_reports_its_own_memory() {
        let device = Device::current();
        assert!(!device.name.is_empty());
        match device.kind {
            // MLX's CPU build: the machine's memory.
            Kind::Cpu => {
                assert_eq!(device.memory_bytes, physical_memory());
                assert!(device.to_string().starts_with("cpu ("), "{device}");
            }
            // A GPU reports its own (CUDA) or the machine's (Metal).
            Kind::Gpu => {
                assert!(device.memory_bytes > 0);
                assert!(device.to_string().starts_with("gpu ("), "{device}");
            }
        }
    }

    /// Frees `n` arrays of growing sizes (about 8 MiB each), none of
    /// which can reuse a cached one, as the KV store's growth does.
    fn free_growing(n: usize) {
        for i in 0..n {
            let a = mlx_rs::Array::zeros::<f32>(&[(2 << 20) + (i as i32) * (64 << 10)]).unwrap();
            a.eval().unwrap();
        }
    }

    #[test]
    fn the_cache_bound_holds_freed_buffers_to_it() {
        // Unbounded (as CUDA's default is), the freed sizes pile up.
        bound_cache(1 << 30, false);
        free_growing(8);
        let unbounded = memory_use();
        assert!(unbounded.cache >= 48 << 20, "{unbounded:?}");
        // Bounded, the cache keeps at most the bound, however much is freed.
        assert_eq!(bound_cache(16 << 20, false), 16 << 20);
        free_growing(8);
        let bounded = memory_use();
        assert!(bounded.cache <= 16 << 20, "{bounded:?}");
        assert_eq!(bounded.cache_limit, 16 << 20);
        // only_lower keeps a smaller bound in force.
        assert_eq!(bound_cache(32 << 20, true), 16 << 20);
        assert_eq!(bound_cache(32 << 20, false), 32 << 20);
    }
}
