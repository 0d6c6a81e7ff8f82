//! The demo's client: one process, in its own cgroup, that holds keep-alive
//! HTTP connections and closes them when told.
//!
//! It is xtask itself (`cargo xtask __demo-client`), driven over stdin/stdout
//! one line at a time:
//! - `open N`  → opens N connections, each sends `GET /` and reads the whole
//!   response, then keeps the connection open. Answers `opened <open> <status line>`.
//! - `close K` → closes K connections. Answers `closed <open> <t>`, t being
//!   CLOCK_MONOTONIC in ns just before the last close(2).
//! - `hold`    → keep the connections when stdin closes (for `demo --keep`).
//!
//! On end of input it exits, closing everything, unless told to hold.

use std::{
    io::{BufRead, BufReader, Read, Write},
    net::{SocketAddr, TcpStream},
    path::PathBuf,
    process::{ChildStdin, ChildStdout},
    time::Duration,
};

use anyhow::{bail, Context as _};
use graceful_test_support::monotonic_ns;

use super::procs::Proc;
use xtask::util;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The server to connect to.
    #[arg(long)]
    connect: SocketAddr,
}

/// One keep-alive request: `GET /`, read the response to its end.
fn request(addr: SocketAddr) -> anyhow::Result<(TcpStream, String)> {
    let stream = TcpStream::connect(addr).with_context(|| format!("cannot connect to {addr}"))?;
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    write!(
        &stream,
        "GET / HTTP/1.1\r\nHost: {addr}\r\nConnection: keep-alive\r\n\r\n"
    )?;
    let mut reader = BufReader::new(&stream);
    let mut status = String::new();
    reader.read_line(&mut status)?;
    let mut length = 0usize;
    loop {
        let mut header = String::new();
        if reader.read_line(&mut header)? == 0 {
            bail!("{addr} closed the connection mid-response");
        }
        let header = header.trim_end();
        if header.is_empty() {
            break;
        }
        if let Some((name, value)) = header.split_once(':') {
            if name.eq_ignore_ascii_case("content-length") {
                length = value.trim().parse().context("bad Content-Length")?;
            }
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body)?;
    drop(reader);
    Ok((stream, status.trim_end().to_string()))
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let mut streams: Vec<TcpStream> = Vec::new();
    let mut hold = false;
    let stdin = std::io::stdin();
    let mut out = std::io::stdout();
    for line in stdin.lock().lines() {
        let line = line?;
        let mut words = line.split_whitespace();
        match (words.next(), words.next().map(str::parse::<usize>)) {
            (Some("open"), Some(Ok(n))) => {
                let mut status = String::new();
                for _ in 0..n {
                    let (s, st) = request(args.connect)?;
                    streams.push(s);
                    status = st;
                }
                writeln!(out, "opened {} {status}", streams.len())?;
            }
            (Some("close"), Some(Ok(k))) => {
                let mut at = monotonic_ns();
                for _ in 0..k.min(streams.len()) {
                    at = monotonic_ns();
                    drop(streams.pop());
                }
                writeln!(out, "closed {} {at}", streams.len())?;
            }
            (Some("hold"), None) => {
                hold = true;
                writeln!(out, "holding {}", streams.len())?;
            }
            _ => bail!("unknown command {line:?}"),
        }
        out.flush()?;
    }
    if hold {
        // Keep the connections until killed.
        loop {
            std::thread::park();
        }
    }
    Ok(())
}

/// The demo's side of the client process.
pub struct Client {
    pub proc: Proc,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    /// Its stderr.
    log: PathBuf,
}

impl Client {
    pub fn new(proc: Proc, stdin: ChildStdin, stdout: ChildStdout, log: PathBuf) -> Self {
        Self {
            proc,
            stdin,
            stdout: BufReader::new(stdout),
            log,
        }
    }

    fn ask(&mut self, command: &str) -> anyhow::Result<String> {
        writeln!(self.stdin, "{command}")?;
        self.stdin.flush()?;
        let mut answer = String::new();
        self.stdout.read_line(&mut answer)?;
        if answer.is_empty() {
            let log = std::fs::read_to_string(&self.log).unwrap_or_default();
            bail!(
                "the demo client (pid {}) exited: {}",
                self.proc.pid,
                util::tail(log.trim(), 10)
            );
        }
        Ok(answer.trim_end().to_string())
    }

    /// Opens `n` more connections; returns how many are open and the last
    /// response's status line.
    pub fn open(&mut self, n: usize) -> anyhow::Result<(usize, String)> {
        let answer = self.ask(&format!("open {n}"))?;
        let rest = answer.strip_prefix("opened ").context("unexpected answer")?;
        let (count, status) = rest.split_once(' ').unwrap_or((rest, ""));
        Ok((count.parse()?, status.to_string()))
    }

    /// Closes `k` connections; returns how many stay open and when the last
    /// close began (CLOCK_MONOTONIC ns).
    pub fn close(&mut self, k: usize) -> anyhow::Result<(usize, u64)> {
        let answer = self.ask(&format!("close {k}"))?;
        let mut f = answer
            .strip_prefix("closed ")
            .context("unexpected answer")?
            .split(' ');
        let open = f.next().context("short answer")?.parse()?;
        let at = f.next().context("short answer")?.parse()?;
        Ok((open, at))
    }

    pub fn hold(&mut self) -> anyhow::Result<()> {
        self.ask("hold").map(drop)
    }
}
