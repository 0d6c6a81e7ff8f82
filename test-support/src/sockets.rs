//! Socket helpers the test peers, benches and soak share: an RST close,
//! and room for many descriptors.

use std::{io, os::fd::AsRawFd};

/// Sets SO_LINGER 0, so that closing `s` sends RST instead of FIN.
pub fn linger_zero(s: &impl AsRawFd) {
    let linger = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: a valid linger struct of the size passed, on a live descriptor.
    unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&raw const linger).cast(),
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        );
    }
}

/// Raises the soft open-file limit to at least `need` (and to the hard
/// limit, raising that too where `need` is above it: root may).
pub fn raise_nofile(need: u64) -> io::Result<()> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: a live rlimit, filled then passed back.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) != 0 {
            return Err(io::Error::last_os_error());
        }
        lim.rlim_max = lim.rlim_max.max(need);
        lim.rlim_cur = lim.rlim_max;
        if libc::setrlimit(libc::RLIMIT_NOFILE, &lim) != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}
