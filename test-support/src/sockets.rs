//! Socket helpers the test peers, benches, soak and stand-ins share: an
//! RST close, room for many descriptors, and a mesh proxy's two socket
//! calls (where a redirected connection was going; a connection from a
//! chosen source address).

use std::{
    io,
    net::{Ipv4Addr, SocketAddr, SocketAddrV4, TcpStream},
    os::fd::{AsRawFd, FromRawFd, OwnedFd},
    time::Duration,
};

/// Sets the SOL_SOCKET option `name` of `s` to `value`, a plain C struct
/// of the kind that option takes.
fn set_socket_option<T>(s: &impl AsRawFd, name: libc::c_int, value: &T) -> io::Result<()> {
    // SAFETY: a live value of the size passed, on a live descriptor.
    let rc = unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            name,
            (value as *const T).cast(),
            std::mem::size_of::<T>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Sets SO_LINGER 0, so that closing `s` sends RST instead of FIN.
pub fn linger_zero(s: &impl AsRawFd) {
    let linger = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // A test that wants RST and gets FIN says so by what it counts.
    let _ = set_socket_option(s, libc::SO_LINGER, &linger);
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

/// Where a redirected connection was going (SO_ORIGINAL_DST, IPv4).
pub fn original_dst(s: &TcpStream) -> io::Result<SocketAddr> {
    const SO_ORIGINAL_DST: libc::c_int = 80;
    // SAFETY: zeroed sockaddr_in is valid; `len` matches it.
    let mut sa: libc::sockaddr_in = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
    // SAFETY: `sa` and `len` are live and sized for an IPv4 address.
    let rc = unsafe {
        libc::getsockopt(
            s.as_raw_fd(),
            libc::SOL_IP,
            SO_ORIGINAL_DST,
            (&raw mut sa).cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(SocketAddr::V4(SocketAddrV4::new(
        Ipv4Addr::from(u32::from_be(sa.sin_addr.s_addr)),
        u16::from_be(sa.sin_port),
    )))
}

/// How long [`connect_from`] waits for the handshake.
const CONNECT_LIMIT: Duration = Duration::from_secs(5);

/// Connects to `dst`, from `from` if given (bound first, as Envoy binds
/// its inbound passthrough address), else from wherever the route says.
/// IPv4 only, as the meshes' rules it stands behind.
pub fn connect_from(dst: SocketAddr, from: Option<Ipv4Addr>) -> io::Result<TcpStream> {
    let Some(src) = from else {
        return TcpStream::connect_timeout(&dst, CONNECT_LIMIT);
    };
    let SocketAddr::V4(dst) = dst else {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "connect_from: IPv4 only",
        ));
    };
    // SAFETY: socket(2) has no memory preconditions.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a descriptor socket(2) just returned, owned by nothing else.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let sockaddr = |a: SocketAddrV4| libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: a.port().to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from(*a.ip()).to_be(),
        },
        sin_zero: [0; 8],
    };
    let len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
    // SO_SNDTIMEO bounds a blocking connect(2) (it fails with EINPROGRESS
    // once the time is up), as connect_timeout bounds std's.
    let limit = libc::timeval {
        // time_t's width is the C library's (musl's is deprecated by name).
        tv_sec: CONNECT_LIMIT.as_secs().try_into().unwrap_or(5),
        tv_usec: 0,
    };
    set_socket_option(&fd, libc::SO_SNDTIMEO, &limit)?;
    let (local, remote) = (sockaddr(SocketAddrV4::new(src, 0)), sockaddr(dst));
    // SAFETY: live structs of the sizes passed, on a live descriptor.
    let failed = unsafe {
        libc::bind(fd.as_raw_fd(), (&raw const local).cast(), len) != 0
            || libc::connect(fd.as_raw_fd(), (&raw const remote).cast(), len) != 0
    };
    if failed {
        return Err(io::Error::last_os_error());
    }
    let stream = TcpStream::from(fd);
    // Back to no send limit, as a std stream starts.
    stream.set_write_timeout(None)?;
    Ok(stream)
}
