//! The programs' clock, read from user space: CLOCK_MONOTONIC in
//! nanoseconds, what `bpf_ktime_get_ns()` returns, so a timestamp in a map
//! and one taken here compare directly.

/// CLOCK_MONOTONIC now, in the programs' unit.
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid out-pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}
