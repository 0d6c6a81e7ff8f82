//! The peers that are killed: `cargo xtask __soak-peer` (hidden), started
//! by a worker in its own cgroup at each round. It listens on the
//! cgroup's address, opens connections to the other cgroups' listeners,
//! says `ready ADDR TARGETS` and waits; the worker then opens as many
//! connections to it (which it accepts and never reads: the kernel resets
//! them when it dies, with data unread) and SIGKILLs it while it holds all
//! of them. The worker reads its own ends to EOF or the reset
//! (`Client::kill_peer`).

use std::{
    io::{Read as _, Write as _},
    net::{SocketAddr, SocketAddrV4},
};

use super::{
    conn::{accept, connect, own_ip, tell},
    ending::KILLED,
    tally::csv,
};
use crate::bench::tcp_load::Listener;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Its cgroup's worker index (its source and listening address).
    #[arg(long)]
    pub index: usize,
    /// Every worker's IPv4 listener, by index (comma-separated).
    #[arg(long)]
    pub targets: String,
    /// Connections to open to the others (and to accept).
    #[arg(long)]
    pub count: u64,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let targets: Vec<SocketAddrV4> = args
        .targets
        .split(',')
        .map(str::parse)
        .collect::<Result<_, _>>()?;
    let k = targets.len();
    let src = own_ip(args.index);
    let listener = Listener::on(src, 1024)?;
    let mut held = Vec::new();
    let mut per_target = vec![0u64; k];
    for n in 0..args.count as usize {
        let t = (args.index + 1 + n % (k - 1)) % k;
        let mut s = connect(src, SocketAddr::V4(targets[t]))?;
        tell(&mut s, KILLED);
        per_target[t] += 1;
        held.push(s);
    }
    let (count, addr) = (args.count, listener.local());
    std::thread::spawn(move || {
        let mut inbound = Vec::new();
        while (inbound.len() as u64) < count {
            if let Ok(s) = accept(&listener) {
                inbound.push(s);
            }
        }
        // Held, unread, until the process is killed.
        loop {
            std::thread::park();
        }
    });
    let mut out = std::io::stdout().lock();
    writeln!(out, "ready {addr} {}", csv(&per_target))?;
    out.flush()?;
    let mut buf = [0u8; 16];
    while matches!(std::io::stdin().read(&mut buf), Ok(n) if n > 0) {}
    drop(held);
    Ok(())
}
