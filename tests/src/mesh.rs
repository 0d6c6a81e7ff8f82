//! A service mesh's path to the httpGet gate, reproduced in namespaces the
//! test made: each mesh's interception rules, as the mesh writes them for
//! inbound traffic, and a relay in its proxy's place.
//!
//! - Istio, sidecar mode: every inbound TCP port redirected to Envoy's
//!   15006 (istio-iptables' `ISTIO_INBOUND` and `ISTIO_IN_REDIRECT`
//!   chains, its own ports left out); Envoy's part is a relay that
//!   connects to the original destination from 127.0.0.6, Envoy's inbound
//!   passthrough address.
//! - Linkerd: every inbound port redirected to the proxy's 4143
//!   (proxy-init's `PROXY_INIT_REDIRECT`, its own ports left out); the
//!   proxy's part is a relay that connects without binding, so from the
//!   pod's own address.
//! - Istio, ambient mode: the node's connections to the pod SNATed to
//!   169.254.7.127 (istio-cni's rule in the node's namespace), so the
//!   request reaches the gate directly from that address.

use std::{
    io::{Read, Write},
    net::{Ipv4Addr, TcpListener, TcpStream},
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc,
    },
    time::Duration,
};

use crate::netns::NetNs;
use graceful_test_support::sockets::{connect_from, original_dst};

/// Istio's inbound capture port and Envoy's passthrough source.
pub const ISTIO_INBOUND: u16 = 15006;
pub const ISTIO_PASSTHROUGH: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 6);
/// Linkerd's inbound proxy port.
pub const LINKERD_INBOUND: u16 = 4143;
/// Ambient's source for the node's connections.
pub const AMBIENT_SNAT: &str = "169.254.7.127";

fn iptables(ns: &NetNs, rules: &[&[&str]]) {
    for r in rules {
        let mut args = vec!["-w", "-t", "nat"];
        args.extend_from_slice(r);
        ns.exec("iptables", &args);
    }
}

/// Istio sidecar mode's inbound capture in the pod's namespace: every TCP
/// port but Istio's own (15008, 15090, 15021, 15020) to 15006.
pub fn istio_sidecar_capture(pod: &NetNs) {
    iptables(
        pod,
        &[
            &["-N", "ISTIO_INBOUND"],
            &["-N", "ISTIO_IN_REDIRECT"],
            &["-A", "PREROUTING", "-p", "tcp", "-j", "ISTIO_INBOUND"],
        ],
    );
    for own in ["15008", "15090", "15021", "15020"] {
        iptables(
            pod,
            &[&["-A", "ISTIO_INBOUND", "-p", "tcp", "--dport", own, "-j", "RETURN"]],
        );
    }
    iptables(
        pod,
        &[
            &["-A", "ISTIO_INBOUND", "-p", "tcp", "-j", "ISTIO_IN_REDIRECT"],
            &[
                "-A",
                "ISTIO_IN_REDIRECT",
                "-p",
                "tcp",
                "-j",
                "REDIRECT",
                "--to-ports",
                "15006",
            ],
        ],
    );
}

/// Linkerd's inbound capture in the pod's namespace: every TCP port but
/// the proxy's own (4190, 4191) and `skip` (`config.linkerd.io/skip-inbound-
/// ports`, comma-separated) to 4143.
pub fn linkerd_capture(pod: &NetNs, skip: &str) {
    let own = match skip {
        "" => "4190,4191".to_string(),
        more => format!("4190,4191,{more}"),
    };
    iptables(
        pod,
        &[
            &["-N", "PROXY_INIT_REDIRECT"],
            &[
                "-A",
                "PROXY_INIT_REDIRECT",
                "-p",
                "tcp",
                "-m",
                "multiport",
                "--dports",
                &own,
                "-j",
                "RETURN",
            ],
            &[
                "-A",
                "PROXY_INIT_REDIRECT",
                "-p",
                "tcp",
                "-j",
                "REDIRECT",
                "--to-port",
                "4143",
            ],
            &["-A", "PREROUTING", "-j", "PROXY_INIT_REDIRECT"],
        ],
    );
}

/// istio-cni's rule for ambient pods, in the nat table after its
/// operation (`-A`, `-I`, `-D`): what a process of the node sends to
/// `pod_ip` leaves from [`AMBIENT_SNAT`].
pub fn ambient_snat_rule(pod_ip: &str) -> Vec<String> {
    [
        "POSTROUTING",
        "-d",
        &format!("{pod_ip}/32"),
        "-p",
        "tcp",
        "-m",
        "owner",
        "--socket-exists",
        "-j",
        "SNAT",
        "--to-source",
        AMBIENT_SNAT,
    ]
    .map(String::from)
    .to_vec()
}

/// Istio ambient mode's rule in the node's namespace: what a process of
/// the node sends to `pod_ip` leaves from 169.254.7.127. The pod routes
/// its answer back through the node.
pub fn ambient_snat(node: &NetNs, pod: &NetNs, pod_ip: &str, node_ip: &str) {
    let rule = ambient_snat_rule(pod_ip);
    let mut add = vec!["-A"];
    add.extend(rule.iter().map(String::as_str));
    iptables(node, &[&add]);
    pod.exec(
        "ip",
        &["route", "add", &format!("{AMBIENT_SNAT}/32"), "via", node_ip],
    );
}

/// A mesh proxy's inbound part: accepts what the capture redirected to
/// `port` in the pod's namespace, and connects to where it was going, from
/// `from` (Envoy's passthrough address) or, with `None`, without binding
/// (Linkerd's). Relays until either side closes. Stops on drop.
pub struct Relay {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Relay {
    pub fn start(pod: &NetNs, port: u16, from: Option<Ipv4Addr>) -> Relay {
        let listener = pod.run(|| TcpListener::bind(("0.0.0.0", port)).expect("the relay's port"));
        listener.set_nonblocking(true).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let fd = pod.fd();
        let s = stop.clone();
        let thread = std::thread::spawn(move || {
            // Its outbound sockets are made here: in the pod's namespace.
            // SAFETY: `fd` is the namespace handle the caller keeps open.
            assert_eq!(unsafe { libc::setns(fd, libc::CLONE_NEWNET) }, 0);
            while !s.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((inbound, _)) => {
                        inbound.set_nonblocking(false).unwrap();
                        match original_dst(&inbound).and_then(|dst| connect_from(dst, from)) {
                            Ok(out) => splice(inbound, out),
                            Err(e) => eprintln!("relay: {e}"),
                        }
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
        });
        Relay {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Copies each way on a thread of its own; a side's close is passed on.
fn splice(a: TcpStream, b: TcpStream) {
    let (a2, b2) = (a.try_clone().unwrap(), b.try_clone().unwrap());
    std::thread::spawn(move || pipe(a, b2));
    std::thread::spawn(move || pipe(b, a2));
}

fn pipe(mut from: TcpStream, mut to: TcpStream) {
    let mut buf = [0u8; 16 * 1024];
    loop {
        match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                if to.write_all(&buf[..n]).is_err() {
                    break;
                }
            }
        }
    }
    let _ = to.shutdown(std::net::Shutdown::Write);
}
