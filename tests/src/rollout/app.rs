//! The pod's app: a plain HTTP/1.1 server (std only, a thread per
//! connection), run as `graceful-peer rollout-app` inside a pod's container
//! cgroup and network namespace. Each request takes `latency`, then gets
//! `200 ok`.
//!
//! On SIGTERM it does what a well-behaved app does (Go's
//! `http.Server.Shutdown`, for one): it stops accepting (new connections are
//! refused), closes its idle keep-alive connections, finishes the requests in
//! flight (answering them with `Connection: close`), and exits. It prints
//! `listening ADDR` once it accepts, and at exit one JSON line:
//! `{"served":N,"last_response_ns":T}` (CLOCK_MONOTONIC, 0 if none).

use std::{
    collections::HashMap,
    io::{BufRead, BufReader, Read, Write},
    net::{SocketAddr, TcpListener, TcpStream},
    os::fd::{AsRawFd, RawFd},
    sync::{
        atomic::{AtomicBool, AtomicU64, Ordering},
        Arc, Mutex,
    },
    time::Duration,
};

use crate::monotonic_ns;
use anyhow::Context as _;

#[derive(Default)]
struct Shared {
    stopping: AtomicBool,
    /// Open connections: their fd, and whether they wait for a request.
    conns: Mutex<HashMap<u64, (RawFd, bool)>>,
    served: AtomicU64,
    last_response_ns: AtomicU64,
}

impl Shared {
    fn set_idle(&self, id: u64, idle: bool) {
        if let Some(c) = self.conns.lock().unwrap().get_mut(&id) {
            c.1 = idle;
        }
    }

    /// SIGTERM: refuse new connections, close the idle ones. A connection
    /// is removed from the map before its fd is closed, so every fd here
    /// is still open.
    fn stop(&self, listener: RawFd) {
        self.stopping.store(true, Ordering::SeqCst);
        // SAFETY: shutdown(2) on fds that are open (see above); it wakes
        // accept() and read() in the other threads.
        unsafe {
            libc::shutdown(listener, libc::SHUT_RDWR);
            for (fd, idle) in self.conns.lock().unwrap().values() {
                if *idle {
                    libc::shutdown(*fd, libc::SHUT_RDWR);
                }
            }
        }
    }
}

/// One request's head: whether the client wants the connection closed after.
fn read_request(r: &mut BufReader<TcpStream>) -> std::io::Result<Option<bool>> {
    let mut line = String::new();
    if r.read_line(&mut line)? == 0 {
        return Ok(None);
    }
    let mut close = line.trim_end().ends_with("HTTP/1.0");
    let mut length = 0u64;
    loop {
        line.clear();
        if r.read_line(&mut line)? == 0 {
            return Ok(None);
        }
        let header = line.trim_end();
        if header.is_empty() {
            break;
        }
        let Some((name, value)) = header.split_once(':') else {
            continue;
        };
        let value = value.trim();
        if name.eq_ignore_ascii_case("connection") {
            close = value.eq_ignore_ascii_case("close");
        } else if name.eq_ignore_ascii_case("content-length") {
            length = value.parse().unwrap_or(0);
        }
    }
    std::io::copy(&mut r.by_ref().take(length), &mut std::io::sink())?;
    Ok(Some(close))
}

fn serve_conn(shared: &Shared, id: u64, stream: &TcpStream, latency: Duration) -> std::io::Result<()> {
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut writer = stream;
    loop {
        shared.set_idle(id, true);
        if shared.stopping.load(Ordering::SeqCst) {
            return Ok(());
        }
        let Some(client_close) = read_request(&mut reader)? else {
            return Ok(());
        };
        shared.set_idle(id, false);
        std::thread::sleep(latency);
        let close = client_close || shared.stopping.load(Ordering::SeqCst);
        write!(
            writer,
            "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 3\r\n{}\r\nok\n",
            if close { "Connection: close\r\n" } else { "" }
        )?;
        writer.flush()?;
        shared.served.fetch_add(1, Ordering::SeqCst);
        shared.last_response_ns.store(monotonic_ns(), Ordering::SeqCst);
        if close {
            return Ok(());
        }
    }
}

/// Serves on `listen` until SIGTERM, then shuts down as described above.
pub fn serve(listen: SocketAddr, latency: Duration) -> anyhow::Result<()> {
    // SIGTERM is blocked in every thread (they inherit the mask) and taken
    // by one, with sigwait.
    // SAFETY: plain sigset operations on a local set.
    let set = unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGTERM);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        set
    };
    let listener = TcpListener::bind(listen).with_context(|| format!("cannot listen on {listen}"))?;
    let shared = Arc::new(Shared::default());
    let listener_fd = listener.as_raw_fd();
    std::thread::spawn({
        let shared = shared.clone();
        move || {
            let mut sig = 0;
            // SAFETY: valid set and out-pointer.
            unsafe { libc::sigwait(&set, &mut sig) };
            shared.stop(listener_fd);
        }
    });
    println!("listening {}", listener.local_addr()?);
    std::io::stdout().flush()?;

    let mut next_id = 0u64;
    for conn in listener.incoming() {
        if shared.stopping.load(Ordering::SeqCst) {
            break;
        }
        let Ok(stream) = conn else { continue };
        next_id += 1;
        let id = next_id;
        shared
            .conns
            .lock()
            .unwrap()
            .insert(id, (stream.as_raw_fd(), false));
        let shared = shared.clone();
        std::thread::spawn(move || {
            let _ = stream.set_read_timeout(Some(Duration::from_secs(120)));
            let _ = serve_conn(&shared, id, &stream, latency);
            // Out of the map first, then closed.
            shared.conns.lock().unwrap().remove(&id);
            drop(stream);
        });
    }
    drop(listener);
    while !shared.conns.lock().unwrap().is_empty() {
        std::thread::sleep(Duration::from_millis(2));
    }
    println!(
        "{{\"served\":{},\"last_response_ns\":{}}}",
        shared.served.load(Ordering::SeqCst),
        shared.last_response_ns.load(Ordering::SeqCst)
    );
    Ok(())
}
