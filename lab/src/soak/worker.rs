//! `cargo xtask __soak-worker` (hidden): one cgroup's process of the soak.
//! It serves connections on its own 127.77.x.y and on ::1 (endings as each
//! client's first byte asks), and on the coordinator's word churns
//! connections to the other cgroups' listeners, counting every one that was
//! established, by target. One command a line on stdin, one answer a line
//! on stdout:
//!
//! - `peers V4,… V6,…`: every worker's listeners, by index → `ok`
//! - `open` → `queue ADDR`: a new listener that never accepts
//! - `churn START COUNT VICTIMS QUEUE,…` → `done ERRORS ENDINGS TARGETS`
//! - `close` → `closed` (the queue listener); `release` → `released`
//!   (the connections left queued on the others' queue listeners)
//! - `hold COUNT` → `held TARGETS`: connections kept open to the end
//!
//! ENDINGS and TARGETS are comma-separated counts (by [`Ending::ALL`], by
//! worker index). It exits when its stdin closes.

use std::{
    io::{BufRead as _, Write as _},
    net::{SocketAddr, SocketAddrV4, TcpListener, TcpStream},
    sync::{Arc, Mutex},
};

use anyhow::{bail, Context as _};

use super::{
    conn::{accept, own_ip},
    ending::{server_does, ServerDoes},
    tally::csv,
};
use crate::bench::tcp_load::Listener;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// This worker's index (its cgroup's).
    #[arg(long)]
    pub index: usize,
    /// Workers in all.
    #[arg(long)]
    pub workers: usize,
    /// The mix's seed.
    #[arg(long)]
    pub seed: u64,
}

/// The accept threads per listener.
const SERVERS: usize = 2;

/// Connections the server side keeps open, unread, to the end.
type Held = Arc<Mutex<Vec<TcpStream>>>;

/// The server's part of one accepted connection.
fn serve_one(mut s: TcpStream, held: &Held) {
    let mut b = [0u8; 1];
    let byte = match std::io::Read::read(&mut s, &mut b) {
        Ok(1) => b[0],
        _ => 0,
    };
    match server_does(byte) {
        ServerDoes::Drain => super::conn::drain(&mut s),
        ServerDoes::Close => {}
        ServerDoes::Abort => super::conn::abort(s),
        ServerDoes::Hold => held.lock().expect("not poisoned").push(s),
        ServerDoes::DrainAside => {
            std::thread::spawn(move || super::conn::drain(&mut s));
        }
    }
}

fn start_servers(v4: Arc<Listener>, v6: TcpListener, held: &Held) -> anyhow::Result<()> {
    for _ in 0..SERVERS {
        let (l, h) = (v4.clone(), held.clone());
        std::thread::spawn(move || loop {
            if let Ok(s) = accept(&l) {
                serve_one(s, &h);
            }
        });
        let (l, h) = (v6.try_clone()?, held.clone());
        std::thread::spawn(move || loop {
            if let Ok((s, _)) = l.accept() {
                serve_one(s, &h);
            }
        });
    }
    Ok(())
}

/// The worker's side of the churn, between commands.
pub(super) struct Client {
    pub(super) index: usize,
    pub(super) workers: usize,
    pub(super) seed: u64,
    pub(super) src: [u8; 4],
    /// Every worker's IPv4 and IPv6 listener, by index.
    pub(super) v4: Vec<SocketAddrV4>,
    pub(super) v6: Vec<SocketAddr>,
    /// Connections left in the others' queue listeners until `release`.
    pub(super) queued: Vec<TcpStream>,
    /// Connections held open to the end.
    pub(super) kept: Vec<TcpStream>,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    crate::bench::worker::raise_nofile(8192)?;
    let src = own_ip(args.index);
    let v4 = Arc::new(Listener::on(src, 4096).context("listen on the worker's own address")?);
    let v6 = TcpListener::bind("[::1]:0").context("listen on ::1")?;
    let (v4_addr, v6_addr) = (v4.local(), v6.local_addr()?);
    let held: Held = Arc::default();
    start_servers(v4, v6, &held)?;
    let mut client = Client {
        index: args.index,
        workers: args.workers,
        seed: args.seed,
        src,
        v4: Vec::new(),
        v6: Vec::new(),
        queued: Vec::new(),
        kept: Vec::new(),
    };
    let mut queue: Option<Listener> = None;
    let mut out = std::io::stdout().lock();
    writeln!(out, "ready {v4_addr} {v6_addr}")?;
    out.flush()?;
    for line in std::io::stdin().lock().lines() {
        let line = line?;
        let words: Vec<&str> = line.split_whitespace().collect();
        let answer = match words.as_slice() {
            ["peers", v4s, v6s] => {
                client.v4 = v4s.split(',').map(str::parse).collect::<Result<_, _>>()?;
                client.v6 = v6s.split(',').map(str::parse).collect::<Result<_, _>>()?;
                "ok".to_string()
            }
            ["open"] => {
                let l = Listener::on(src, 4096).context("open a queue listener")?;
                let a = l.local();
                queue = Some(l);
                format!("queue {a}")
            }
            ["churn", start, count, victims, queues] => {
                let queues: Vec<SocketAddrV4> =
                    queues.split(',').map(str::parse).collect::<Result<_, _>>()?;
                let mut done = client.churn(start.parse()?, count.parse()?, &queues);
                let (e, t) = (&mut done.errors, &mut done.targets);
                client.kill_peer(victims.parse()?, t, e)?;
                format!(
                    "done {} {} {}",
                    done.errors,
                    csv(&done.endings),
                    csv(&done.targets)
                )
            }
            ["close"] => {
                // With whatever was left in its accept queue.
                drop(queue.take());
                "closed".to_string()
            }
            ["release"] => {
                client.queued.clear();
                "released".to_string()
            }
            ["hold", count] => format!("held {}", csv(&client.hold(count.parse()?)?)),
            _ => bail!("unknown command {line:?}"),
        };
        writeln!(out, "{answer}")?;
        out.flush()?;
    }
    Ok(())
}
