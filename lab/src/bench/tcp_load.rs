//! The churn load: full TCP connections on loopback, as fast as N client
//! and N server threads can make them, through raw syscalls so the bench's
//! own (possibly unoptimised) code costs next to nothing beside the kernel.
//!
//! One connection: client socket() [+ bind to a source address] → connect()
//! → close() (FIN, or RST for the `rst_percent` share); server accept() →
//! read() until EOF → close(). The client closes first, so the whole close
//! path runs: FIN_WAIT1/2 → TIME_WAIT on the client, CLOSE_WAIT → LAST_ACK
//! → CLOSE on the server.

use std::{
    collections::HashMap,
    io,
    sync::{
        atomic::{AtomicBool, AtomicU64, Ordering::Relaxed},
        Arc,
    },
    thread::JoinHandle,
    time::{Duration, Instant},
};

#[derive(Debug, Clone)]
pub struct Config {
    /// Client threads, and as many accepting server threads.
    pub concurrency: usize,
    /// Client source addresses 127.0.0.2 … 127.0.0.(1+sources); 0: let the kernel choose (127.0.0.1).
    pub sources: u8,
    /// Share of connections the client aborts with RST (SO_LINGER 0), in percent.
    pub rst_percent: u8,
    pub warmup: Duration,
    pub window: Duration,
}

#[derive(Debug, Clone, Copy)]
pub struct Outcome {
    /// Connections completed (closed by the server after the client's close) in the window.
    pub completed: u64,
    pub elapsed: Duration,
    /// Failed connect() calls over the whole run (EADDRNOTAVAIL: out of ports).
    pub connect_errors: u64,
    /// CPU time of this process (all its threads, kernel time included) in the window.
    pub own_cpu: Duration,
    /// CPU time of every other user-space process in the window (kernel
    /// threads excluded: they also do this load's deferred work).
    pub others_cpu: Duration,
}

impl Outcome {
    pub fn per_second(&self) -> f64 {
        self.completed as f64 / self.elapsed.as_secs_f64()
    }

    /// CPU spent by the bench (client, server and kernel work on their
    /// behalf, the BPF programs included) per completed connection, in µs.
    pub fn cpu_us_per_conn(&self) -> f64 {
        self.own_cpu.as_secs_f64() * 1e6 / self.completed.max(1) as f64
    }

    /// Share of the machine's CPUs used by other processes during the
    /// window, in percent: work that disturbs the measurement.
    pub fn others_pct(&self) -> f64 {
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
        100.0 * self.others_cpu.as_secs_f64() / (self.elapsed.as_secs_f64() * cpus)
    }
}

/// CPU time of this process, all threads.
fn own_cpu() -> Duration {
    // SAFETY: a zeroed rusage is a valid buffer for getrusage.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: valid pointer.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// CPU time (utime + stime, in clock ticks) of every user-space process
/// but this one and its children.
fn other_processes() -> HashMap<u32, u64> {
    const PF_KTHREAD: u64 = 0x0020_0000;
    let me = std::process::id();
    let mut cpu = HashMap::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return cpu;
    };
    for entry in dir.flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // Fields after "(comm)": state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime
        let Some((_, rest)) = stat.rsplit_once(')') else {
            continue;
        };
        let f: Vec<&str> = rest.split_whitespace().collect();
        let num = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
        if pid == me || num(1) == u64::from(me) || num(6) & PF_KTHREAD != 0 {
            continue;
        }
        cpu.insert(pid, num(11) + num(12));
    }
    cpu
}

fn others_between(before: &HashMap<u32, u64>, after: &HashMap<u32, u64>) -> Duration {
    let ticks: u64 = after
        .iter()
        .map(|(pid, t)| t.saturating_sub(before.get(pid).copied().unwrap_or(0)))
        .sum();
    ticks_to_duration(ticks)
}

/// Clock ticks (`/proc` CPU times) as a duration.
pub(crate) fn ticks_to_duration(ticks: u64) -> Duration {
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    Duration::from_secs_f64(ticks as f64 / hz)
}

pub(crate) fn check(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

pub(crate) fn sockaddr(ip: [u8; 4], port: u16) -> libc::sockaddr_in {
    libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: port.to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from_ne_bytes(ip),
        },
        sin_zero: [0; 8],
    }
}

pub(crate) fn set_int(
    fd: libc::c_int,
    level: libc::c_int,
    opt: libc::c_int,
    v: libc::c_int,
) -> io::Result<()> {
    // SAFETY: a valid pointer to an int of the size we pass.
    check(unsafe {
        libc::setsockopt(
            fd,
            level,
            opt,
            (&raw const v).cast(),
            size_of::<libc::c_int>() as libc::socklen_t,
        )
    })
    .map(drop)
}

pub(crate) fn tcp_socket() -> io::Result<libc::c_int> {
    // SAFETY: plain syscall.
    check(unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) })
}

pub(crate) fn bind(fd: libc::c_int, addr: &libc::sockaddr_in) -> io::Result<()> {
    // SAFETY: `addr` is a valid sockaddr_in of the size we pass.
    check(unsafe {
        libc::bind(
            fd,
            (addr as *const libc::sockaddr_in).cast(),
            size_of::<libc::sockaddr_in>() as u32,
        )
    })
    .map(drop)
}

/// A listener on 127.0.0.1 and an ephemeral port, closed on drop.
pub(crate) struct Listener {
    pub(crate) fd: libc::c_int,
    pub(crate) addr: libc::sockaddr_in,
}

impl Listener {
    fn new() -> io::Result<Self> {
        Self::on([127, 0, 0, 1], 4096)
    }

    /// A listener on `ip` and an ephemeral port, with an accept queue of
    /// `backlog` (at most `net.core.somaxconn`).
    pub(crate) fn on(ip: [u8; 4], backlog: libc::c_int) -> io::Result<Self> {
        let fd = tcp_socket()?;
        let mut l = Self {
            fd,
            addr: sockaddr(ip, 0),
        };
        set_int(fd, libc::SOL_SOCKET, libc::SO_REUSEADDR, 1)?;
        bind(fd, &l.addr)?;
        // SAFETY: plain syscalls; `len` matches the buffer.
        unsafe {
            check(libc::listen(fd, backlog))?;
            let mut len = size_of::<libc::sockaddr_in>() as libc::socklen_t;
            check(libc::getsockname(fd, (&raw mut l.addr).cast(), &mut len))?;
        }
        Ok(l)
    }
}

impl Listener {
    /// Its address, as bound (the port the kernel chose).
    pub(crate) fn local(&self) -> std::net::SocketAddrV4 {
        std::net::SocketAddrV4::new(
            std::net::Ipv4Addr::from(self.addr.sin_addr.s_addr.to_ne_bytes()),
            u16::from_be(self.addr.sin_port),
        )
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        // SAFETY: our own descriptor, closed once.
        unsafe { libc::close(self.fd) };
    }
}

struct Shared {
    stop: AtomicBool,
    completed: AtomicU64,
    connect_errors: AtomicU64,
}

fn serve(listen_fd: libc::c_int, shared: &Shared) {
    let mut buf = [0u8; 64];
    loop {
        // SAFETY: plain syscalls on descriptors we own; `buf` is writable.
        unsafe {
            let fd = libc::accept4(
                listen_fd,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                libc::SOCK_CLOEXEC,
            );
            if fd < 0 {
                if shared.stop.load(Relaxed) {
                    return;
                }
                continue;
            }
            // Wait for the client's close (EOF, or ECONNRESET after an RST).
            while libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) > 0 {}
            libc::close(fd);
        }
        shared.completed.fetch_add(1, Relaxed);
    }
}

fn client(index: usize, server: libc::sockaddr_in, cfg: Config, shared: &Shared) {
    let linger = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    let mut n: u64 = 0;
    while !shared.stop.load(Relaxed) {
        n += 1;
        let Ok(fd) = tcp_socket() else {
            shared.connect_errors.fetch_add(1, Relaxed);
            continue;
        };
        if cfg.sources > 0 {
            let k = ((n as usize + index) % usize::from(cfg.sources)) as u8;
            // Bind the address only; the port is picked at connect() against the full 4-tuple.
            let _ = set_int(fd, libc::IPPROTO_IP, libc::IP_BIND_ADDRESS_NO_PORT, 1);
            let _ = bind(fd, &sockaddr([127, 0, 0, 2 + k], 0));
        }
        if cfg.rst_percent > 0 && (n % 100) < u64::from(cfg.rst_percent) {
            // SAFETY: a valid linger struct of the size we pass.
            unsafe {
                libc::setsockopt(
                    fd,
                    libc::SOL_SOCKET,
                    libc::SO_LINGER,
                    (&raw const linger).cast(),
                    size_of::<libc::linger>() as libc::socklen_t,
                );
            }
        }
        // SAFETY: plain syscalls; `server` is a valid sockaddr_in.
        unsafe {
            let r = libc::connect(
                fd,
                (&raw const server).cast(),
                size_of::<libc::sockaddr_in>() as libc::socklen_t,
            );
            if r < 0 {
                shared.connect_errors.fetch_add(1, Relaxed);
            }
            libc::close(fd);
        }
    }
}

/// Stops and joins the threads however the measurement ends.
struct Threads {
    shared: Arc<Shared>,
    listener: Listener,
    clients: Vec<JoinHandle<()>>,
    servers: Vec<JoinHandle<()>>,
}

impl Drop for Threads {
    fn drop(&mut self) {
        self.shared.stop.store(true, Relaxed);
        for t in self.clients.drain(..) {
            let _ = t.join();
        }
        // Wakes the server threads blocked in accept() (they get EINVAL).
        // SAFETY: our own listening descriptor.
        unsafe { libc::shutdown(self.listener.fd, libc::SHUT_RDWR) };
        for t in self.servers.drain(..) {
            let _ = t.join();
        }
    }
}

/// Runs the load for warm-up + window and counts what completed in the window.
pub fn measure(cfg: &Config) -> anyhow::Result<Outcome> {
    let listener = Listener::new()?;
    let server_addr = listener.addr;
    let shared = Arc::new(Shared {
        stop: AtomicBool::new(false),
        completed: AtomicU64::new(0),
        connect_errors: AtomicU64::new(0),
    });
    let mut threads = Threads {
        shared: shared.clone(),
        clients: Vec::new(),
        servers: Vec::new(),
        listener,
    };
    for _ in 0..cfg.concurrency {
        let (s, fd) = (shared.clone(), threads.listener.fd);
        threads.servers.push(std::thread::spawn(move || serve(fd, &s)));
    }
    for i in 0..cfg.concurrency {
        let (s, c) = (shared.clone(), cfg.clone());
        threads
            .clients
            .push(std::thread::spawn(move || client(i, server_addr, c, &s)));
    }
    super::sleep(cfg.warmup)?;
    let others0 = other_processes();
    let (c0, t0, own0) = (shared.completed.load(Relaxed), Instant::now(), own_cpu());
    super::sleep(cfg.window)?;
    let (c1, t1, own1) = (shared.completed.load(Relaxed), Instant::now(), own_cpu());
    let others1 = other_processes();
    drop(threads);
    Ok(Outcome {
        completed: c1 - c0,
        elapsed: t1 - t0,
        connect_errors: shared.connect_errors.load(Relaxed),
        own_cpu: own1.saturating_sub(own0),
        others_cpu: others_between(&others0, &others1),
    })
}

/// Sockets in TIME_WAIT on the machine (`/proc/net/sockstat`).
pub fn time_wait_sockets() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/net/sockstat").ok()?;
    let line = s.lines().find(|l| l.starts_with("TCP:"))?;
    let mut it = line.split_whitespace();
    while let Some(w) = it.next() {
        if w == "tw" {
            return it.next()?.parse().ok();
        }
    }
    None
}
