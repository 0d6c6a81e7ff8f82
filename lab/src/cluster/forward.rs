//! The host's door to the API server: a TCP forwarder listening on the
//! host's loopback that connects, for each client, from inside the node's
//! network namespace. The host gets no interface or route of the
//! cluster's; its kubectl reaches `127.0.0.1:16443`, the components inside
//! reach the API server at the node's address.
//!
//! Run by `cluster up` as `cargo xtask __cluster-forward` (hidden).

use std::{
    fs::File,
    io,
    net::{Shutdown, SocketAddr, TcpListener, TcpStream},
    os::fd::AsRawFd as _,
    path::PathBuf,
};

use anyhow::Context as _;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Where to listen, in this process's (the host's) namespace.
    #[arg(long)]
    listen: SocketAddr,
    /// The network namespace to connect from (`/run/netns/NAME`).
    #[arg(long)]
    netns: PathBuf,
    /// Where to connect, inside that namespace.
    #[arg(long)]
    to: SocketAddr,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let listener =
        TcpListener::bind(args.listen).with_context(|| format!("cannot listen on {}", args.listen))?;
    eprintln!(
        "forwarding {} to {} in {}",
        args.listen,
        args.to,
        args.netns.display()
    );
    for conn in listener.incoming() {
        let client = match conn {
            Ok(c) => c,
            Err(e) => {
                eprintln!("accept: {e}");
                continue;
            }
        };
        let ns = File::open(&args.netns).with_context(|| format!("cannot open {}", args.netns.display()))?;
        let to = args.to;
        std::thread::spawn(move || {
            if let Err(e) = serve(client, &ns, to) {
                eprintln!("connection to {to}: {e}");
            }
        });
    }
    Ok(())
}

/// Joins the namespace on this connection's thread, connects, and copies
/// both ways until each side has closed.
fn serve(client: TcpStream, ns: &File, to: SocketAddr) -> io::Result<()> {
    // SAFETY: setns on this thread only, with an open namespace fd.
    if unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let upstream = TcpStream::connect(to)?;
    let (c2, u2) = (client.try_clone()?, upstream.try_clone()?);
    let back = std::thread::spawn(move || pipe(u2, c2));
    pipe(client, upstream)?;
    back.join()
        .map_err(|_| io::Error::other("copy thread panicked"))?
}

fn pipe(mut from: TcpStream, mut to: TcpStream) -> io::Result<()> {
    let r = io::copy(&mut from, &mut to);
    let _ = to.shutdown(Shutdown::Write);
    r.map(drop)
}
