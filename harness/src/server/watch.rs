//! A server process seen from outside: resident memory and open file
//! descriptors from `/proc/PID` (Linux), for the attacks' and the soak's
//! figures. Elsewhere, or without a pid, there are no figures.

use serde::Serialize;

/// One reading of the server process.
#[derive(Debug, Clone, Copy, Serialize, PartialEq)]
pub struct ProcessSample {
    pub rss_mib: f64,
    pub fds: usize,
}

/// The process `pid`, read now; `None` when it is gone or unreadable.
pub fn sample(pid: u32) -> Option<ProcessSample> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let kib: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).ok()?.count();
    Some(ProcessSample {
        rss_mib: kib / 1024.0,
        fds,
    })
}

/// The most this process may open, raised to the hard limit: the idle and
/// burst attacks hold thousands of sockets at once.
pub fn raise_fd_limit() {
    #[cfg(unix)]
    // SAFETY: getrlimit/setrlimit on a stack value of the right type.
    unsafe {
        let mut lim = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0 && lim.rlim_cur < lim.rlim_max {
            lim.rlim_cur = lim.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_is_read_and_a_missing_one_is_none() {
        let me = sample(std::process::id()).expect("own /proc entry");
        assert!(me.rss_mib > 1.0 && me.fds >= 3, "{me:?}");
        assert_eq!(sample(u32::MAX), None);
    }
}
