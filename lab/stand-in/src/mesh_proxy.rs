//! The mesh proxy: Envoy in deploy/examples/mesh-proxy, in front of the app
//! (inbound: the Service's traffic to the app) and in its egress path
//! (outbound: the app's calls to its backend).
//!
//! A TCP forwarder: each accepted connection gets its own connection to the
//! upstream, and bytes are copied both ways until both sides have closed (a
//! FIN is passed on as a FIN). The upstream is `HOST:PORT`, resolved at
//! each connect with the system resolver, so a pod's hostAliases
//! (/etc/hosts) and cluster DNS both work.
//!
//! On SIGTERM Envoy exits at once, dropping every connection: that is what
//! the example's hook guards against. So does this: one line on stderr,
//! exit 0.

use super::{
    server::{spawn, Listener},
    Signals,
};
use anyhow::{bail, Context, Result};
use std::{
    io,
    net::{Shutdown, TcpStream, ToSocketAddrs},
    sync::{
        atomic::{AtomicUsize, Ordering},
        Arc,
    },
    time::Duration,
};

/// Envoy's default cluster connect_timeout.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

#[derive(clap::Args, Debug)]
pub struct Args {
    /// LISTEN=UPSTREAM, e.g. 0.0.0.0:8080=127.0.0.1:8081: the Service's
    /// traffic to the app. Repeatable.
    #[arg(long, value_name = "LISTEN=UPSTREAM", value_parser = parse_forward)]
    inbound: Vec<Forward>,
    /// LISTEN=UPSTREAM, e.g. 127.0.0.1:15001=web:80: the app's calls to
    /// its backend. Repeatable.
    #[arg(long, value_name = "LISTEN=UPSTREAM", value_parser = parse_forward)]
    outbound: Vec<Forward>,
    /// LISTEN=SOURCE, e.g. 0.0.0.0:15006=127.0.0.6: a mesh's inbound
    /// passthrough. Accepts what the pod's capture redirected there and
    /// connects to where it was going (SO_ORIGINAL_DST), from SOURCE, as
    /// Envoy's inbound passthrough cluster does from 127.0.0.6; SOURCE `-`
    /// connects without binding, as Linkerd's proxy does (from the pod's
    /// own address).
    #[arg(long, value_name = "LISTEN=SOURCE", value_parser = parse_passthrough)]
    passthrough: Vec<(String, Option<std::net::Ipv4Addr>)>,
}

fn parse_passthrough(s: &str) -> Result<(String, Option<std::net::Ipv4Addr>), String> {
    let (listen, source) = s
        .split_once('=')
        .ok_or_else(|| format!("{s}: expected LISTEN=SOURCE"))?;
    let source = match source {
        "-" => None,
        ip => Some(ip.parse().map_err(|e| format!("{ip}: {e}"))?),
    };
    Ok((listen.to_string(), source))
}

#[derive(Clone, Debug)]
pub struct Forward {
    listen: String,
    upstream: String,
}

fn parse_forward(s: &str) -> Result<Forward, String> {
    let (listen, upstream) = s
        .split_once('=')
        .ok_or_else(|| format!("{s}: expected LISTEN=UPSTREAM"))?;
    for part in [listen, upstream] {
        let port = part.rsplit_once(':').map(|(_, p)| p.parse::<u16>());
        if !matches!(port, Some(Ok(_))) {
            return Err(format!("{part}: expected HOST:PORT"));
        }
    }
    Ok(Forward {
        listen: listen.into(),
        upstream: upstream.into(),
    })
}

/// Decrements the open count when the connection is over.
struct Open(Arc<AtomicUsize>);

impl Drop for Open {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

fn connect(upstream: &str) -> io::Result<TcpStream> {
    let mut last = io::Error::new(io::ErrorKind::NotFound, "no address");
    for addr in upstream.to_socket_addrs()? {
        match TcpStream::connect_timeout(&addr, CONNECT_TIMEOUT) {
            Ok(s) => return Ok(s),
            Err(e) => last = e,
        }
    }
    Err(last)
}

/// Copies `from` to `to` until EOF, then passes the FIN on. On an error
/// (a reset), shuts both down, which ends the other direction too.
fn pipe(mut from: TcpStream, mut to: TcpStream) {
    match io::copy(&mut from, &mut to) {
        Ok(_) => {
            let _ = to.shutdown(Shutdown::Write);
        }
        Err(_) => {
            let _ = from.shutdown(Shutdown::Both);
            let _ = to.shutdown(Shutdown::Both);
        }
    }
}

fn forward(client: TcpStream, upstream: &str, open: Open) {
    forward_to(client, upstream, || connect(upstream), open)
}

fn forward_to(
    client: TcpStream,
    upstream: &str,
    connect: impl FnOnce() -> io::Result<TcpStream>,
    _open: Open,
) {
    let server = match connect() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("mesh-proxy: connect to {upstream}: {e}");
            return;
        }
    };
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let (Ok(c), Ok(s)) = (client.try_clone(), server.try_clone()) else {
        return;
    };
    let Some(up) = spawn("mesh-proxy", move || pipe(c, s)) else {
        return;
    };
    pipe(server, client);
    let _ = up.join();
}

pub fn run(args: Args, signals: Signals) -> Result<()> {
    if args.inbound.is_empty() && args.outbound.is_empty() && args.passthrough.is_empty() {
        bail!("mesh-proxy: nothing to forward: give --inbound, --outbound or --passthrough");
    }
    let open = Arc::new(AtomicUsize::new(0));
    let mut listeners = Vec::new();
    let all = args.inbound.iter().map(|f| ("inbound", f));
    for (kind, f) in all.chain(args.outbound.iter().map(|f| ("outbound", f))) {
        let (open, upstream) = (open.clone(), f.upstream.clone());
        let l = Listener::bind(&f.listen, "mesh-proxy", move |client, _peer| {
            open.fetch_add(1, Ordering::SeqCst);
            let open = Open(open.clone());
            let upstream = upstream.clone();
            spawn("mesh-proxy", move || forward(client, &upstream, open));
        })
        .with_context(|| format!("{kind} {}={}", f.listen, f.upstream))?;
        eprintln!("mesh-proxy: {kind} {} -> {}", l.local_addr(), f.upstream);
        listeners.push(l);
    }
    for (listen, source) in &args.passthrough {
        let (open, source) = (open.clone(), *source);
        let l = Listener::bind(listen, "mesh-proxy", move |client, _peer| {
            open.fetch_add(1, Ordering::SeqCst);
            let open = Open(open.clone());
            spawn("mesh-proxy", move || {
                let dst = match graceful_test_support::sockets::original_dst(&client) {
                    Ok(d) => d,
                    Err(e) => return eprintln!("mesh-proxy: passthrough: no original destination: {e}"),
                };
                let to = format!("{dst} from {source:?}");
                forward_to(
                    client,
                    &to,
                    || graceful_test_support::sockets::connect_from(dst, source),
                    open,
                )
            });
        })
        .with_context(|| format!("passthrough {listen}={source:?}"))?;
        eprintln!(
            "mesh-proxy: passthrough {} -> the original destination, from {}",
            l.local_addr(),
            source.map_or("the pod's address".to_string(), |s| s.to_string())
        );
        listeners.push(l);
    }

    let sig = signals.wait()?;
    eprintln!(
        "mesh-proxy: {}, exiting at once, {} connections open",
        sig.name(),
        open.load(Ordering::SeqCst)
    );
    std::process::exit(0);
}
