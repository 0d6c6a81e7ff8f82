//! One connection's system calls, both sides: connect from a cgroup's own
//! 127.x source address (or over ::1), accept, and the ways to end it.
//! The raw socket calls are the churn bench's (`bench::tcp_load`).

use std::{
    io::{self, Read as _, Write as _},
    net::{SocketAddr, TcpStream},
    os::fd::FromRawFd as _,
    time::Duration,
};

use crate::bench::tcp_load::{bind, check, set_int, sockaddr, tcp_socket, Listener};

/// No step of one connection waits longer than this: a stuck peer fails
/// the soak instead of hanging it.
const STEP_TIMEOUT: Duration = Duration::from_secs(30);

/// Connects to `dst`; over IPv4 from `src` (any port), so each cgroup's
/// connections have a source address of their own.
pub fn connect(src: [u8; 4], dst: SocketAddr) -> io::Result<TcpStream> {
    let s = match dst {
        SocketAddr::V6(_) => TcpStream::connect_timeout(&dst, STEP_TIMEOUT)?,
        SocketAddr::V4(v4) => {
            let fd = tcp_socket()?;
            // SAFETY: a descriptor we just made and own from here on.
            let s = unsafe { TcpStream::from_raw_fd(fd) };
            // Bind the address only: the port is chosen at connect() against the 4-tuple.
            set_int(fd, libc::IPPROTO_IP, libc::IP_BIND_ADDRESS_NO_PORT, 1)?;
            bind(fd, &sockaddr(src, 0))?;
            let to = sockaddr(v4.ip().octets(), v4.port());
            // SAFETY: a valid sockaddr_in of the size passed.
            check(unsafe {
                libc::connect(
                    fd,
                    (&raw const to).cast(),
                    size_of::<libc::sockaddr_in>() as libc::socklen_t,
                )
            })?;
            s
        }
    };
    s.set_read_timeout(Some(STEP_TIMEOUT))?;
    Ok(s)
}

/// Sends the one byte that tells the server how to end (a failure is the
/// server's reset, which the caller's ending expects anyway).
pub fn tell(s: &mut TcpStream, byte: u8) {
    let _ = s.write_all(&[byte]);
}

/// Reads until EOF, a reset or the step's timeout.
pub fn drain(s: &mut TcpStream) {
    let mut buf = [0u8; 64];
    while matches!(s.read(&mut buf), Ok(n) if n > 0) {}
}

/// Closes with RST (SO_LINGER 0) instead of FIN.
pub fn abort(s: TcpStream) {
    graceful_test_support::sockets::linger_zero(&s);
    drop(s);
}

/// The next connection on an IPv4 listener of `bench::tcp_load`.
pub fn accept(l: &Listener) -> io::Result<TcpStream> {
    // SAFETY: plain syscall on our listening descriptor.
    let fd = check(unsafe {
        libc::accept4(
            l.fd,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            libc::SOCK_CLOEXEC,
        )
    })?;
    // SAFETY: a descriptor accept4 just gave us.
    let s = unsafe { TcpStream::from_raw_fd(fd) };
    s.set_read_timeout(Some(STEP_TIMEOUT))?;
    Ok(s)
}

/// A cgroup's own loopback address, 127.77.x.y, for worker `i` (< 250 × 250).
pub fn own_ip(i: usize) -> [u8; 4] {
    [127, 77, (i / 250) as u8, (i % 250 + 1) as u8]
}
