//! The process's limit on open files: raised to the hard limit at start
//! by the agent (its gates' bounds come from it) and by its keeper (which
//! holds a duplicate of every held hook).

use tracing::warn;

/// Raises the soft limit on open files to the hard one (which a container
/// runtime usually sets far above the soft 1024), and returns the limit in
/// effect: the gate's bounds are taken from it.
pub fn raise() -> u64 {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `lim` is a live rlimit for the kernel to fill, then read.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return 1024;
    }
    if lim.rlim_cur < lim.rlim_max {
        let raised = libc::rlimit {
            rlim_cur: lim.rlim_max,
            rlim_max: lim.rlim_max,
        };
        // SAFETY: as above; a refusal leaves the old limit, which is read back.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
            lim.rlim_cur = lim.rlim_max;
        } else {
            warn!(soft = lim.rlim_cur, hard = lim.rlim_max, error = %std::io::Error::last_os_error(), "cannot raise the open-file limit");
        }
    }
    lim.rlim_cur
}
