//! The bench's own CPU time (user + system), so a report can say what one
//! streamed event cost the client: a load generator that saturates its own
//! cores measures itself, not the server.
//!
//! Two clocks. The process's counts every thread, start-up work included
//! (the BLAS pool a linked engine starts spins for a while after loading).
//! The reading thread's counts the event path alone: against a server over
//! HTTP every stream is read on the one thread that drives the runtime,
//! so its clock is what one event costs and what, once saturated, delays
//! the timings.

/// CPU seconds this process has used so far (None where unknown).
fn process_cpu_s() -> Option<f64> {
    #[cfg(unix)]
    {
        usage(libc::RUSAGE_SELF)
    }
    #[cfg(not(unix))]
    {
        None
    }
}

/// CPU seconds the calling thread has used so far (None where the
/// platform cannot tell one thread's time).
fn thread_cpu_s() -> Option<f64> {
    #[cfg(target_os = "linux")]
    {
        usage(libc::RUSAGE_THREAD)
    }
    #[cfg(not(target_os = "linux"))]
    {
        None
    }
}

#[cfg(unix)]
fn usage(who: libc::c_int) -> Option<f64> {
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: getrusage fills the struct it is given; `who` is one of the
    // constants above.
    let rc = unsafe { libc::getrusage(who, usage.as_mut_ptr()) };
    if rc != 0 {
        return None;
    }
    // SAFETY: initialised by the successful call above.
    let u = unsafe { usage.assume_init() };
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    Some(secs(u.ru_utime) + secs(u.ru_stime))
}

/// CPU seconds spent over some stretches of a run, by both clocks.
#[derive(Debug, Clone, Copy)]
pub struct Spent {
    pub process_s: f64,
    /// None where the reading thread's clock is unknown.
    pub thread_s: Option<f64>,
}

impl Spent {
    /// Nothing spent yet.
    pub fn zero() -> Spent {
        Spent {
            process_s: 0.0,
            thread_s: thread_cpu_s().map(|_| 0.0),
        }
    }

    /// Runs `f` on this thread and adds what it spent.
    pub fn during<T>(&mut self, f: impl FnOnce() -> T) -> T {
        let (process, thread) = (process_cpu_s(), thread_cpu_s());
        let out = f();
        let since = |now: Option<f64>, then: Option<f64>| now.zip(then).map(|(n, t)| n - t);
        self.process_s += since(process_cpu_s(), process).unwrap_or(0.0);
        self.thread_s = self
            .thread_s
            .zip(since(thread_cpu_s(), thread))
            .map(|(a, b)| a + b);
        out
    }
}
