//! What the servers share: a listener whose accept loop can be stopped, a
//! table of open connections that a graceful shutdown drains, and thread
//! spawning that a failure can't bring down. A thread per connection: the
//! stand-ins serve a handful of pods, not the internet.

use anyhow::{Context, Result};
use std::{
    collections::HashMap,
    io::Write,
    net::{Shutdown, SocketAddr, TcpListener, TcpStream},
    os::fd::AsRawFd,
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc, Condvar, Mutex, MutexGuard,
    },
    thread::JoinHandle,
    time::{Duration, Instant},
};

/// Starts a thread with a small stack; on failure, logs and returns None
/// (the caller drops what it was for, e.g. the connection).
pub fn spawn(name: &str, f: impl FnOnce() + Send + 'static) -> Option<JoinHandle<()>> {
    match std::thread::Builder::new()
        .name(name.into())
        .stack_size(512 * 1024)
        .spawn(f)
    {
        Ok(h) => Some(h),
        Err(e) => {
            eprintln!("{name}: cannot start a thread: {e}");
            None
        }
    }
}

/// A listening socket and the thread that accepts on it.
pub struct Listener {
    socket: Arc<TcpListener>,
    closed: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    addr: SocketAddr,
}

impl Listener {
    /// Binds `addr` and calls `on_accept` (on the accept thread) for each
    /// accepted connection.
    pub fn bind(
        addr: &str,
        role: &'static str,
        on_accept: impl Fn(TcpStream, SocketAddr) + Send + 'static,
    ) -> Result<Listener> {
        let socket = TcpListener::bind(addr).with_context(|| format!("{role}: bind {addr}"))?;
        let addr = socket.local_addr().context("local_addr")?;
        let socket = Arc::new(socket);
        let closed = Arc::new(AtomicBool::new(false));
        let (s, c) = (socket.clone(), closed.clone());
        let thread = std::thread::Builder::new()
            .name(format!("{role} accept"))
            .spawn(move || loop {
                match s.accept() {
                    Ok((stream, peer)) => on_accept(stream, peer),
                    Err(_) if c.load(Ordering::SeqCst) => return,
                    // ECONNABORTED and the like concern one connection; EMFILE
                    // passes as connections close.
                    Err(e) => {
                        eprintln!("{role}: accept on {addr}: {e}");
                        std::thread::sleep(Duration::from_millis(50));
                    }
                }
            })
            .context("spawn the accept thread")?;
        Ok(Listener {
            socket,
            closed,
            thread: Some(thread),
            addr,
        })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops accepting, as a server that closes its listener does: on Linux
    /// shutdown(2) takes a listening socket out of LISTEN at once, which
    /// wakes the blocked accept(2), resets connections still in the accept
    /// queue and refuses new ones. Returns once the accept loop is over.
    pub fn close(mut self) {
        self.closed.store(true, Ordering::SeqCst);
        // SAFETY: the fd is open: `self.socket` holds it.
        unsafe { libc::shutdown(self.socket.as_raw_fd(), libc::SHUT_RD) };
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The open connections of a server that drains on shutdown. A connection
/// is idle between requests (or frames) and busy while one is being read
/// and answered; a shutdown closes idle ones at once and busy ones once
/// answered, as Go's `http.Server.Shutdown` does.
pub struct Conns {
    table: Mutex<Table>,
    emptied: Condvar,
}

#[derive(Default)]
struct Table {
    next: u64,
    stopping: bool,
    open: HashMap<u64, Slot>,
}

struct Slot {
    stream: TcpStream,
    busy: bool,
}

/// One connection's entry in [`Conns`], removed on drop.
pub struct Conn {
    conns: Arc<Conns>,
    id: u64,
}

impl Conns {
    pub fn new() -> Arc<Conns> {
        Arc::new(Conns {
            table: Mutex::new(Table::default()),
            emptied: Condvar::new(),
        })
    }

    fn table(&self) -> MutexGuard<'_, Table> {
        // A panicked connection thread leaves a consistent table.
        self.table.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Registers an accepted connection, idle. None once stopping, or if
    /// the socket can't be duplicated: the caller then drops it.
    pub fn add(self: &Arc<Self>, stream: &TcpStream) -> Option<Conn> {
        let stream = stream.try_clone().ok()?;
        let mut t = self.table();
        if t.stopping {
            return None;
        }
        let id = t.next;
        t.next += 1;
        t.open.insert(id, Slot { stream, busy: false });
        Some(Conn {
            conns: self.clone(),
            id,
        })
    }

    pub fn open(&self) -> usize {
        self.table().open.len()
    }

    /// Starts the drain: from now on busy connections close once answered,
    /// and idle ones are closed now, after `farewell` is written to them
    /// (SPOP's AGENT-DISCONNECT; nothing for HTTP).
    pub fn stop(&self, farewell: &[u8]) {
        let mut t = self.table();
        t.stopping = true;
        for slot in t.open.values_mut().filter(|s| !s.busy) {
            if !farewell.is_empty() {
                let _ = slot.stream.set_write_timeout(Some(Duration::from_secs(1)));
                let _ = slot.stream.write_all(farewell);
            }
            // Wakes the connection's thread, blocked reading: it sees EOF.
            let _ = slot.stream.shutdown(Shutdown::Both);
        }
    }

    /// Waits until every connection is gone, or `grace` has passed, then
    /// closes what is left. Returns how many were left.
    pub fn wait_empty(&self, grace: Duration) -> usize {
        let deadline = Instant::now() + grace;
        let mut t = self.table();
        while !t.open.is_empty() {
            let now = Instant::now();
            if now >= deadline {
                break;
            }
            t = self
                .emptied
                .wait_timeout(t, deadline - now)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        for slot in t.open.values() {
            let _ = slot.stream.shutdown(Shutdown::Both);
        }
        t.open.len()
    }
}

impl Conn {
    /// A request (or frame) has begun to arrive.
    pub fn busy(&self) {
        if let Some(s) = self.conns.table().open.get_mut(&self.id) {
            s.busy = true;
        }
    }

    /// The request is answered. False if the server is stopping: the
    /// caller closes the connection.
    pub fn idle(&self) -> bool {
        let mut t = self.conns.table();
        if let Some(s) = t.open.get_mut(&self.id) {
            s.busy = false;
        }
        !t.stopping
    }

    pub fn stopping(&self) -> bool {
        self.conns.table().stopping
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        let mut t = self.conns.table();
        t.open.remove(&self.id);
        if t.open.is_empty() {
            self.conns.emptied.notify_all();
        }
    }
}
