//! Facts about the run's machine and checkout, recorded in every report.

use std::process::Command;

/// The checkout's commit (`git rev-parse --short HEAD`), if any.
pub fn git_commit() -> Option<String> {
    let out = Command::new("git")
        .args(["rev-parse", "--short", "HEAD"])
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
        .filter(|s| !s.is_empty())
}

/// Host name, OS, architecture and core count.
pub fn host() -> String {
    let name = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|| "unknown".into());
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    format!(
        "{name} ({} {}, {cores} cores)",
        std::env::consts::OS,
        std::env::consts::ARCH
    )
}

/// What served the run: afm's engine in this process, or not known.
pub fn engine_version(remote: bool) -> String {
    if remote {
        "not known (remote server)".into()
    } else {
        format!("afm-engine {}", env!("CARGO_PKG_VERSION"))
    }
}

/// A seed from the clock, for runs given none.
pub fn clock_seed() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |d| d.as_secs())
}

/// The clock's milliseconds: unique per run, to salt prompts so that
/// nothing an earlier run cached helps this one.
pub fn clock_millis() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis())
}

pub fn now() -> String {
    chrono::Local::now()
        .format("%Y-%m-%dT%H:%M:%S%z")
        .to_string()
}

/// CPU model and memory size, from /proc on Linux ("unknown" elsewhere).
pub fn hardware() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let memory = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("MemTotal:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<f64>().ok())
        })
        .map_or("unknown memory".into(), |kb| {
            format!("{:.1} GiB", kb / 1024.0 / 1024.0)
        });
    format!("{cpu}, {memory}")
}
