//! `kubectl port-forward` to a pod: how an operator (and `kubectl
//! graceful`) reaches what the agent serves on its pod's loopback only,
//! through the API server with their own RBAC.

use std::{
    io::{BufRead, BufReader},
    net::SocketAddr,
    process::{Child, Stdio},
    sync::mpsc,
    time::Duration,
};

use super::Cluster;

/// A running `kubectl port-forward`; stopped on drop.
pub struct PortForward {
    child: Child,
    /// The local end, on this machine's loopback.
    pub local: SocketAddr,
}

impl PortForward {
    /// Forwards a free loopback port to `port` of `namespace/pod`.
    pub fn start(cluster: &Cluster, namespace: &str, pod: &str, port: u16) -> anyhow::Result<PortForward> {
        let target = format!("pod/{pod}");
        let ports = format!("0:{port}");
        let mut child = cluster
            .kubectl_cmd(&[
                "-n",
                namespace,
                "port-forward",
                "--address",
                "127.0.0.1",
                &target,
                &ports,
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()?;
        let stdout = child.stdout.take().expect("piped");
        let stderr = child.stderr.take().expect("piped");
        let (tx, rx) = mpsc::channel();
        // "Forwarding from 127.0.0.1:41235 -> 9465"
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let addr = line
                    .strip_prefix("Forwarding from ")
                    .and_then(|r| r.split_whitespace().next())
                    .and_then(|a| a.parse::<SocketAddr>().ok());
                if let Some(a) = addr {
                    let _ = tx.send(a);
                }
            }
        });
        let errors = std::thread::spawn(move || {
            let mut text = String::new();
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                text.push_str(&line);
                text.push('\n');
            }
            text
        });
        match rx.recv_timeout(Duration::from_secs(30)) {
            Ok(local) => Ok(PortForward { child, local }),
            Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                let err = errors.join().unwrap_or_default();
                anyhow::bail!("kubectl port-forward {namespace}/{pod} {port} did not start: {err}")
            }
        }
    }
}

impl Drop for PortForward {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
