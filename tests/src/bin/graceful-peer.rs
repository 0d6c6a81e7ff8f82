//! A test peer: a process the tests place in a cgroup (and a network
//! namespace) before it starts, so every socket it opens belongs there.
//! It reads one command per line on stdin and answers one line on stdout:
//! `ok ...` or `err ...`.
//!
//! Commands:
//! - `listen ADDR MODE` → `ok PORT`. MODE is what happens to accepted
//!   connections: `hold` (kept open), `echo-close` (read to EOF, then close:
//!   the client's FIN ends it), `close-now` (closed at once: server FIN),
//!   `noaccept` (never accepted; they wait in the accept queue).
//! - `connect ADDR N` → `ok`: opens and holds N connections.
//! - `close-out N fin|rst`, `close-in N fin|rst` → `ok`: closes N held
//!   outbound / accepted connections, with FIN or with RST (SO_LINGER 0).
//! - `close-listeners` → `ok`.
//! - `churn ADDR[,ADDR..] N fin|rst|wait-fin` → `ok DONE`: opens and closes
//!   N connections one by one, round-robin over the addresses. `fin`
//!   closes first; `rst` resets; `wait-fin` waits for the server's FIN.
//! - `accepted [PORT]` → `ok N`: connections accepted so far (by one listener).
//! - `held` → `ok OUT IN`.
//! - `fds-in` → `ok FD...`: the descriptors of the held accepted connections.
//! - `traffic ADDR MS HOLD_MS [CONC]` → `ok DONE FAILED LAST_FIN_NS`: requests for MS ms.
//! - `send-out N BYTES` → `ok`: payload on N held outbound connections.
//! - `gate SOCKET HEX` → `ok HEX`: a raw request to a unix socket, and its answer.
//! - `gate-flood SOCKET N HEX|-` → `ok HELD S429 S503 VANISHED OTHER FAILED`:
//!   opens N connections to a unix socket, each sending the request (`-`:
//!   nothing), and tallies the answers: HELD counts a drain's 200 (the
//!   connection kept) and the 408 of a connection the agent held until its
//!   head timeout. `gate-release` → `ok`: closes the kept ones.
//!   The answer ends with SPAN_MS, how long the agent took to admit the
//!   flood (see [`gate_flood`]).
//!
//! With arguments, it runs one command of [`once`] instead and exits.

use graceful_test_support::sockets::{linger_zero, raise_nofile};
use std::{
    io::{BufRead, Read, Write},
    net::{Shutdown, SocketAddr, TcpListener, TcpStream},
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc, Mutex,
    },
    time::Duration,
};

#[path = "graceful-peer/once.rs"]
mod once;

#[derive(Default)]
struct State {
    out: Vec<TcpStream>,
    held_in: Arc<Mutex<Vec<TcpStream>>>,
    listeners: Vec<Arc<TcpListener>>,
    accepted: Arc<AtomicU64>,
    per_port: std::collections::HashMap<u16, Arc<AtomicU64>>,
    gate: Vec<std::os::unix::net::UnixStream>,
}

fn close(s: TcpStream, how: &str) {
    if how == "rst" {
        linger_zero(&s);
    }
    drop(s);
}

fn listen(st: &mut State, addr: &str, mode: &str) -> Result<String, String> {
    let addr: SocketAddr = addr.parse().map_err(|e| format!("bad address {addr}: {e}"))?;
    let l = std::net::TcpListener::bind(addr).map_err(|e| e.to_string())?;
    let port = l.local_addr().map_err(|e| e.to_string())?.port();
    let l = Arc::new(l);
    st.listeners.push(l.clone());
    let count = Arc::new(AtomicU64::new(0));
    st.per_port.insert(port, count.clone());
    if mode == "noaccept" {
        return Ok(format!("ok {port}"));
    }
    let held = st.held_in.clone();
    let accepted = st.accepted.clone();
    let mode = mode.to_string();
    std::thread::spawn(move || loop {
        let s = match l.accept() {
            Ok((s, _)) => s,
            // Closed by close-listeners.
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) || e.raw_os_error() == Some(libc::EBADF) => {
                return
            }
            // Aborted connections and the like: keep serving.
            Err(_) => continue,
        };
        accepted.fetch_add(1, Ordering::SeqCst);
        count.fetch_add(1, Ordering::SeqCst);
        match mode.as_str() {
            "hold" => held.lock().unwrap().push(s),
            "echo-close" => {
                readers().spawn(read_to_eof(s));
            }
            // close-now
            _ => drop(s),
        }
    });
    Ok(format!("ok {port}"))
}

/// The runtime that reads `echo-close` connections ([`read_to_eof`]) and
/// `gate-flood` answers, one task each, started with the first one: churn costs
/// no thread per connection, no connection waits unread behind another,
/// and one stays open for as long as its client keeps it, however idle.
fn readers() -> &'static tokio::runtime::Handle {
    static READERS: std::sync::OnceLock<tokio::runtime::Handle> = std::sync::OnceLock::new();
    READERS.get_or_init(|| {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .enable_time()
            .build()
            .expect("graceful-peer: the readers' runtime");
        let handle = rt.handle().clone();
        std::thread::spawn(move || rt.block_on(std::future::pending::<()>()));
        handle
    })
}

/// `echo-close`: reads `s` to EOF (the client's FIN), then closes it.
async fn read_to_eof(s: TcpStream) {
    use tokio::io::AsyncReadExt;
    if s.set_nonblocking(true).is_err() {
        return;
    }
    let Ok(mut s) = tokio::net::TcpStream::from_std(s) else {
        return;
    };
    let mut buf = [0u8; 256];
    while matches!(s.read(&mut buf).await, Ok(n) if n > 0) {}
}

fn churn(addrs: &str, n: u64, how: &str) -> Result<String, String> {
    let addrs: Vec<SocketAddr> = addrs
        .split(',')
        .map(|a| a.parse().map_err(|e| format!("bad address {a}: {e}")))
        .collect::<Result<_, _>>()?;
    let mut done = 0;
    for i in 0..n {
        let a = addrs[(i as usize) % addrs.len()];
        let s = TcpStream::connect_timeout(&a, Duration::from_secs(5))
            .map_err(|e| format!("connect {a}: {e}"))?;
        match how {
            "rst" => close(s, "rst"),
            "wait-fin" => {
                let mut s = s;
                let mut buf = [0u8; 16];
                let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
                while matches!(s.read(&mut buf), Ok(n) if n > 0) {}
                drop(s);
            }
            _ => {
                let _ = s.shutdown(Shutdown::Write);
                drop(s);
            }
        }
        done += 1;
    }
    Ok(format!("ok {done}"))
}

/// Request traffic for `ms` milliseconds from `conc` threads: each request
/// is a connection that sends a line, stays open `hold_ms` (the request's
/// latency), then closes and waits for the server to close. Replies
/// `ok DONE FAILED LAST_FIN_NS`: the last is CLOCK_MONOTONIC just before
/// the last request that completed sent its FIN, so its close came after
/// (a drain's report is on the same clock).
fn traffic(addr: &str, ms: u64, hold_ms: u64, conc: u64) -> Result<String, String> {
    let addr: SocketAddr = addr.parse().map_err(|e| format!("bad address {addr}: {e}"))?;
    let until = std::time::Instant::now() + Duration::from_millis(ms);
    let done = Arc::new(AtomicU64::new(0));
    let failed = Arc::new(AtomicU64::new(0));
    let last_fin = Arc::new(AtomicU64::new(0));
    let threads: Vec<_> = (0..conc)
        .map(|_| {
            let (done, failed, last_fin) = (done.clone(), failed.clone(), last_fin.clone());
            std::thread::spawn(move || {
                while std::time::Instant::now() < until {
                    let ok = (|| -> std::io::Result<u64> {
                        let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
                        s.write_all(b"GET\n")?;
                        std::thread::sleep(Duration::from_millis(hold_ms));
                        let fin = graceful_test_support::monotonic_ns();
                        s.shutdown(Shutdown::Write)?;
                        s.set_read_timeout(Some(Duration::from_secs(5)))?;
                        let mut buf = [0u8; 64];
                        while s.read(&mut buf)? > 0 {}
                        Ok(fin)
                    })();
                    match ok {
                        Ok(fin) => {
                            last_fin.fetch_max(fin, Ordering::SeqCst);
                            done.fetch_add(1, Ordering::SeqCst)
                        }
                        Err(_) => failed.fetch_add(1, Ordering::SeqCst),
                    };
                }
            })
        })
        .collect();
    for t in threads {
        let _ = t.join();
    }
    Ok(format!(
        "ok {} {} {}",
        done.load(Ordering::SeqCst),
        failed.load(Ordering::SeqCst),
        last_fin.load(Ordering::SeqCst)
    ))
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn unhex(s: &str) -> Result<Vec<u8>, String> {
    (0..s.len() / 2)
        .map(|i| u8::from_str_radix(&s[2 * i..2 * i + 2], 16).map_err(|e| e.to_string()))
        .collect()
}

fn handle(st: &mut State, line: &str) -> Result<String, String> {
    let w: Vec<&str> = line.split_whitespace().collect();
    let num = |i: usize| -> Result<u64, String> {
        w.get(i)
            .ok_or("missing number")?
            .parse::<u64>()
            .map_err(|e| e.to_string())
    };
    match w.first().copied() {
        Some("listen") => listen(
            st,
            w.get(1).ok_or("missing address")?,
            w.get(2).copied().unwrap_or("hold"),
        ),
        Some("connect") => {
            let addr: SocketAddr = w
                .get(1)
                .ok_or("missing address")?
                .parse()
                .map_err(|e| format!("{e}"))?;
            for _ in 0..num(2)? {
                let s =
                    TcpStream::connect_timeout(&addr, Duration::from_secs(5)).map_err(|e| e.to_string())?;
                st.out.push(s);
            }
            Ok("ok".into())
        }
        Some("close-out") => {
            let how = w.get(2).copied().unwrap_or("fin");
            for _ in 0..num(1)? {
                let s = st.out.pop().ok_or("no outbound connection left")?;
                close(s, how);
            }
            Ok("ok".into())
        }
        Some("close-in") => {
            let how = w.get(2).copied().unwrap_or("fin");
            let mut held = st.held_in.lock().unwrap();
            for _ in 0..num(1)? {
                let s = held.pop().ok_or("no accepted connection left")?;
                close(s, how);
            }
            Ok("ok".into())
        }
        Some("close-listeners") => {
            for l in st.listeners.drain(..) {
                use std::os::fd::AsRawFd;
                // The accept thread holds a clone of the Arc: shut the
                // socket down so the listener closes now, not when that
                // thread notices.
                // SAFETY: valid fd.
                unsafe { libc::shutdown(l.as_raw_fd(), libc::SHUT_RDWR) };
            }
            Ok("ok".into())
        }
        Some("churn") => churn(
            w.get(1).ok_or("missing addresses")?,
            num(2)?,
            w.get(3).copied().unwrap_or("fin"),
        ),
        Some("traffic") => traffic(
            w.get(1).ok_or("missing address")?,
            num(2)?,
            num(3)?,
            w.get(4).map_or(Ok(1), |_| num(4))?,
        ),
        Some("send-out") => {
            let bytes = vec![b'x'; num(2)? as usize];
            for s in st.out.iter_mut().take(num(1)? as usize) {
                s.write_all(&bytes).map_err(|e| e.to_string())?;
            }
            Ok("ok".into())
        }
        Some("gate") => {
            // `gate SOCKET HEX`: raw bytes to a unix socket, from inside this
            // peer's cgroup; replies `ok HEX` with everything read back.
            let sock = w.get(1).ok_or("missing socket")?;
            let req = unhex(w.get(2).ok_or("missing request")?)?;
            let mut s = std::os::unix::net::UnixStream::connect(sock).map_err(|e| e.to_string())?;
            s.set_read_timeout(Some(Duration::from_secs(10)))
                .map_err(|e| e.to_string())?;
            let _ = s.write_all(&req);
            let mut out = Vec::new();
            let _ = s.read_to_end(&mut out);
            Ok(format!("ok {}", hex(&out)))
        }
        Some("gate-flood") => {
            let sock = w.get(1).ok_or("missing socket")?;
            let n: usize = w
                .get(2)
                .ok_or("missing count")?
                .parse()
                .map_err(|e| format!("{e}"))?;
            let req = match w.get(3).copied() {
                Some("-") | None => Vec::new(),
                Some(h) => unhex(h)?,
            };
            Ok(gate_flood(st, sock, n, &req))
        }
        Some("gate-release") => {
            st.gate.clear();
            Ok("ok".into())
        }
        Some("accepted") => match w.get(1) {
            // `accepted PORT`: by one listener.
            Some(p) => {
                let port: u16 = p.parse().map_err(|e| format!("{e}"))?;
                let n = st
                    .per_port
                    .get(&port)
                    .ok_or("no such listener")?
                    .load(Ordering::SeqCst);
                Ok(format!("ok {n}"))
            }
            None => Ok(format!("ok {}", st.accepted.load(Ordering::SeqCst))),
        },
        Some("fds-in") => {
            // The descriptors of the held accepted connections, for a test
            // that reaches a socket's storage through pidfd_getfd.
            use std::os::fd::AsRawFd;
            let held = st.held_in.lock().unwrap();
            let fds: Vec<String> = held.iter().map(|s| s.as_raw_fd().to_string()).collect();
            Ok(format!("ok {}", fds.join(" ")))
        }
        Some("held") => Ok(format!(
            "ok {} {}",
            st.out.len(),
            st.held_in.lock().unwrap().len()
        )),
        Some(other) => Err(format!("unknown command {other}")),
        None => Err("empty command".into()),
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if !args.is_empty() {
        std::process::exit(once::run(&args));
    }
    let mut st = State::default();
    let stdin = std::io::stdin();
    let mut out = std::io::stdout();
    for line in stdin.lock().lines() {
        let Ok(line) = line else { break };
        let reply = handle(&mut st, &line).unwrap_or_else(|e| format!("err {e}"));
        let _ = writeln!(out, "{reply}");
        let _ = out.flush();
    }
}

/// `gate-flood`: see the module's doc. Every connection is opened (and its
/// request sent) in turn, and each one's answer is read on its own task
/// as soon as it comes, waiting as long as the agent takes (under qemu,
/// seconds): a drain's 200, kept; a 429 or 503, turned away; or, for a
/// connection that sent nothing, the 408 of the agent's head timeout,
/// which it held until then.
///
/// SPAN_MS bounds when the agent can have accepted the last of them, in
/// ms after the first connect: an answer's arrival for a 200, 429 or 503,
/// and a 408's arrival less the head timeout (the agent starts its timer
/// after the accept). Below the head timeout, no held connection had been
/// let go while any of the flood was still being admitted, so HELD is how
/// many the agent held at once; past it, a 408 may have freed a place that
/// a later connection took.
fn gate_flood(st: &mut State, sock: &str, n: usize, req: &[u8]) -> String {
    let _ = raise_nofile(0);
    let first = std::time::Instant::now();
    let mut failed = 0;
    let mut answers = Vec::new();
    for _ in 0..n {
        match std::os::unix::net::UnixStream::connect(sock) {
            Ok(mut s) => {
                if !req.is_empty() {
                    let _ = s.write_all(req);
                }
                answers.push(readers().spawn(answer(s)));
            }
            Err(_) => failed += 1,
        }
    }
    let head = graceful::serve::http_conn::HEAD_TIMEOUT;
    let (mut held, mut s429, mut s503, mut vanished, mut other) = (0, 0, 0, 0, 0);
    let mut last_accept = first;
    for a in answers {
        let Ok(a) = readers().block_on(a) else {
            other += 1;
            continue;
        };
        if a.text.contains("vanished") {
            vanished += 1;
        }
        let status = a.text.split_whitespace().nth(1);
        match status {
            Some("200" | "408") => held += 1,
            Some("429") => s429 += 1,
            Some("503") => s503 += 1,
            _ => other += 1,
        }
        if status == Some("200") {
            st.gate.extend(a.conn);
        }
        // A 408 comes a head timeout after the accept; the rest at once.
        let accepted_by = match status {
            Some("408") => a.at.checked_sub(head).unwrap_or(first),
            _ => a.at,
        };
        last_accept = last_accept.max(accepted_by);
    }
    let span_ms = last_accept.duration_since(first).as_millis();
    format!("ok {held} {s429} {s503} {vanished} {other} {failed} {span_ms}")
}

/// One `gate-flood` connection's answer: its text (or what went wrong),
/// when it came, and the connection, which a drain's 200 keeps.
struct Answer {
    text: String,
    at: std::time::Instant,
    conn: Option<std::os::unix::net::UnixStream>,
}

/// Reads `s`'s answer as soon as it comes, waiting up to 60 s.
async fn answer(s: std::os::unix::net::UnixStream) -> Answer {
    use tokio::io::AsyncReadExt;
    let mut buf = [0u8; 4096];
    let read = async {
        s.set_nonblocking(true)?;
        let mut s = tokio::net::UnixStream::from_std(s)?;
        let n = s.read(&mut buf).await?;
        Ok::<_, std::io::Error>((n, s))
    };
    let (text, conn) = match tokio::time::timeout(Duration::from_secs(60), read).await {
        Ok(Ok((n, s))) => (String::from_utf8_lossy(&buf[..n]).into_owned(), s.into_std().ok()),
        Ok(Err(e)) => (format!("error {e}"), None),
        Err(_) => ("error no answer in 60 s".to_string(), None),
    };
    Answer {
        text,
        at: std::time::Instant::now(),
        conn,
    }
}
