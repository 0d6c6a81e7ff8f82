//! Clients on the node: TCP connections opened from the node's network
//! namespace (as kube-proxy's and the kubelet's are), held open until the
//! test closes them.

use std::{
    io::Write,
    net::{SocketAddr, TcpStream},
    time::{Duration, Instant},
};

use super::Cluster;

pub struct Clients {
    conns: Vec<TcpStream>,
}

impl Clients {
    /// `n` connections to `addr`, each after one HTTP/1.1 request answered,
    /// so the server has accepted it and kept it (keep-alive).
    pub fn open(cluster: &Cluster, addr: SocketAddr, n: usize) -> Clients {
        let conns = cluster.on_node(move || {
            (0..n)
                .map(|_| {
                    // A pod is Ready once its container started, maybe
                    // before its server listens: retry a refusal a while.
                    let t0 = Instant::now();
                    let mut s = loop {
                        match TcpStream::connect_timeout(&addr, Duration::from_secs(5)) {
                            Ok(s) => break s,
                            Err(_) if t0.elapsed() < Duration::from_secs(10) => {
                                std::thread::sleep(Duration::from_millis(50))
                            }
                            Err(e) => panic!("connect to {addr} from the node: {e}"),
                        }
                    };
                    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
                    request(&mut s).unwrap_or_else(|e| panic!("a request to {addr}: {e}"));
                    s
                })
                .collect()
        });
        Clients { conns }
    }

    pub fn len(&self) -> usize {
        self.conns.len()
    }

    pub fn is_empty(&self) -> bool {
        self.conns.is_empty()
    }

    /// Closes them all; returns the moment the last one was closed.
    pub fn close(&mut self) -> Instant {
        self.conns.clear();
        Instant::now()
    }

    /// Closes `n` of them.
    pub fn close_some(&mut self, n: usize) {
        let keep = self.conns.len().saturating_sub(n);
        self.conns.truncate(keep);
    }
}

/// One `GET /` on a kept connection; its status.
fn request(s: &mut TcpStream) -> std::io::Result<u16> {
    s.write_all(b"GET / HTTP/1.1\r\nHost: e2e\r\n\r\n")?;
    // One request at a time: nothing follows the response to over-read.
    Ok(graceful_test_support::http_response::read(&mut std::io::BufReader::new(&*s))?.status)
}
