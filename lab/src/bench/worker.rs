//! `cargo xtask bench memory-worker` (hidden): one process of the memory
//! bench, started inside its cgroup. It listens on its own loopback address,
//! connects to itself N times and accepts each connection, so its cgroup
//! owns N inbound and N outbound live connections and one listener. It says
//! `ready N` on stdout and holds everything until its stdin closes (the
//! bench ended, or died).

use std::{
    io::{Read as _, Write as _},
    net::{SocketAddrV4, TcpListener, TcpStream},
};

use anyhow::Context as _;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Address to listen on and connect to.
    #[arg(long)]
    pub listen: SocketAddrV4,
    /// Connections to open.
    #[arg(long)]
    pub connections: usize,
}

/// Raises RLIMIT_NOFILE (soft, and hard if need be) to at least `need`.
/// Room for `need` descriptors, or an error saying so.
pub(crate) fn raise_nofile(need: u64) -> anyhow::Result<()> {
    graceful_test_support::sockets::raise_nofile(need).context(format!("raise RLIMIT_NOFILE to {need}"))
}

pub fn run(args: Args) -> anyhow::Result<()> {
    raise_nofile(2 * args.connections as u64 + 64)?;
    let listener = TcpListener::bind(args.listen).with_context(|| format!("listen on {}", args.listen))?;
    let mut held = Vec::with_capacity(2 * args.connections);
    for i in 0..args.connections {
        let out =
            TcpStream::connect(args.listen).with_context(|| format!("connection {i} to {}", args.listen))?;
        let (inb, _) = listener.accept().context("accept")?;
        held.push(out);
        held.push(inb);
    }
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "ready {}", args.connections)?;
    stdout.flush()?;
    let mut buf = [0u8; 64];
    while matches!(std::io::stdin().read(&mut buf), Ok(n) if n > 0) {}
    drop(held);
    drop(listener);
    Ok(())
}
