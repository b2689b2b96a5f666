//! The real clock the forwarder feeds to the model: CLOCK_MONOTONIC in nanoseconds.

/// Nanoseconds on CLOCK_MONOTONIC (the clock `ppoll` timeouts run on).
pub fn now_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid, writable timespec that outlives the call; CLOCK_MONOTONIC always
    // exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Makes this thread's timed sleeps wake within 1 ns of their target instead of the default
/// 50 µs slack; the spin phase then has less to cover.
pub fn tighten_timer_slack() {
    // SAFETY: PR_SET_TIMERSLACK takes an integer and no pointers; it affects only this thread.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0) };
}

/// CPU time (user, system) of the whole process, in seconds.
pub fn process_cpu_seconds() -> (f64, f64) {
    // SAFETY: `rusage` is plain integers and timevals; all zeroes is a valid value.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `ru` is a valid, writable `rusage` that outlives the call.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let s = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6;
    (s(ru.ru_utime), s(ru.ru_stime))
}
