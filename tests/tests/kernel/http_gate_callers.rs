//! Who may hold a pod's drain through its httpGet gate, decided for each
//! request: only the pod's own declared hook, and, relayed (a mesh proxy
//! in the pod), only during the pod's termination.
//! - A proxy's pooled connection, opened and answered 403 before the
//!   deletion, carries the kubelet's hook after it: the hook is held (it
//!   was refused with its connection before, and SIGTERM came at once).
//! - A stray relayed request during the termination: other settings are
//!   refused; the pod's own settings run a drain of their own, and the
//!   kubelet's hook is still held to the pod's last close (a stray took
//!   the pod's one drain before, and the kubelet's hook got 429: SIGTERM
//!   at once).
//! - A pod on the host network shares the node's addresses, not its
//!   cgroups: refused, though it calls from the node's address.

use std::{
    io::{Read, Write},
    net::{SocketAddr, TcpStream},
    os::fd::FromRawFd,
    time::Duration,
};

use graceful_tests::{
    gate::wait_draining,
    http_hook::{get, wait_listening, Answer, Scene, PORT},
    peer::place,
};
use serde_json::{json, Value};

use crate::require_root;

const HOOK: &str = "/drain?policy=drained&settle=100ms&min=0s&max=20s";

fn istio() -> Value {
    json!({"graceful.dev/gate": "http", "sidecar.istio.io/status": "{}"})
}

/// A connection to the gate from inside the pod, from Istio's 127.0.0.6,
/// as its proxy relays (and pools) them.
fn relay_conn(s: &Scene) -> TcpStream {
    let gate: SocketAddr = s.gate();
    s.net.b.run(move || {
        // SAFETY: plain socket calls on a descriptor owned by the stream.
        unsafe {
            let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
            assert!(fd >= 0);
            let mut from: libc::sockaddr_in = std::mem::zeroed();
            from.sin_family = libc::AF_INET as _;
            from.sin_addr.s_addr = u32::from_ne_bytes([127, 0, 0, 6]);
            let len = std::mem::size_of::<libc::sockaddr_in>() as u32;
            assert_eq!(libc::bind(fd, (&from as *const libc::sockaddr_in).cast(), len), 0);
            let stream = TcpStream::from_raw_fd(fd);
            let SocketAddr::V4(to) = gate else { panic!() };
            let mut sa: libc::sockaddr_in = std::mem::zeroed();
            sa.sin_family = libc::AF_INET as _;
            sa.sin_port = to.port().to_be();
            sa.sin_addr.s_addr = u32::from_ne_bytes(to.ip().octets());
            assert_eq!(
                libc::connect(fd, (&sa as *const libc::sockaddr_in).cast(), len),
                0
            );
            stream
        }
    })
}

/// One keep-alive request on `c` and its answer.
fn request(c: &mut TcpStream, path: &str, limit: Duration) -> Answer {
    c.set_read_timeout(Some(limit)).unwrap();
    write!(c, "GET {path} HTTP/1.1\r\nhost: gate\r\n\r\n").unwrap();
    let mut buf = Vec::new();
    let mut byte = [0u8; 1];
    while !buf.ends_with(b"\r\n\r\n") {
        assert_eq!(c.read(&mut byte).unwrap(), 1, "closed mid-head: {buf:?}");
        buf.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&buf).to_string();
    let status = head.split_whitespace().nth(1).unwrap().parse().unwrap();
    let len: usize = head
        .lines()
        .find_map(|l| {
            l.to_ascii_lowercase()
                .strip_prefix("content-length: ")
                .map(|v| v.trim().parse().unwrap())
        })
        .unwrap();
    let mut body = vec![0u8; len];
    c.read_exact(&mut body).unwrap();
    Answer {
        status,
        body: String::from_utf8_lossy(&body).into_owned(),
    }
}

#[test]
fn a_pooled_relay_connection_from_before_the_deletion_carries_the_kubelets_hook() {
    require_root!();
    let mut s = Scene::new(istio());
    wait_listening(&s.net.b, PORT, 10);
    let (_lb, mut clients) = s.clients(2);
    let mut pooled = relay_conn(&s);
    let a = request(&mut pooled, HOOK, Duration::from_secs(10));
    assert_eq!(a.status, 403, "{a:?}");
    assert!(a.body.contains("the pod is not terminating"), "{a:?}");

    s.update(istio(), true);
    let answer = std::thread::scope(|t| {
        let h = t.spawn(move || request(&mut pooled, HOOK, Duration::from_secs(30)));
        wait_draining(&s.agent, 1);
        std::thread::sleep(Duration::from_millis(300));
        assert!(!h.is_finished(), "answered with 2 clients connected");
        clients.cmd("close-out 2 fin");
        h.join().unwrap()
    });
    assert_eq!(answer.status, 200, "{answer:?}");
    assert_eq!(answer.json()["reason"], "drained", "{answer:?}");
    eprintln!("the hook on a pooled relay connection answered 403 before the deletion was held after it, then released drained");
}

#[test]
fn a_stray_relayed_drain_neither_takes_nor_shortens_the_kubelets_hook() {
    require_root!();
    let mut s = Scene::new(istio());
    wait_listening(&s.net.b, PORT, 10);
    let (_lb, mut clients) = s.clients(2);
    s.update(istio(), true);

    // Another caller through the mesh, during the termination: settings
    // the pod never declared are refused...
    let mut stray = relay_conn(&s);
    let a = request(
        &mut stray,
        "/drain?policy=drained&min=0s&max=1s",
        Duration::from_secs(10),
    );
    assert_eq!(a.status, 403, "{a:?}");
    assert!(a.body.contains("not the pod's own hook"), "{a:?}");
    // ...and the pod's own run a drain of their own, first.
    let (stray_answer, hook_answer) = std::thread::scope(|t| {
        let st = t.spawn(move || request(&mut stray, HOOK, Duration::from_secs(30)));
        wait_draining(&s.agent, 1);
        // The kubelet's hook (from the node), while the stray one runs.
        let node = &s.net.a;
        let gate = s.gate();
        let hk = t.spawn(move || get(node, gate, HOOK, Duration::from_secs(30)).unwrap());
        wait_draining(&s.agent, 2);
        std::thread::sleep(Duration::from_millis(300));
        assert!(
            !hk.is_finished(),
            "the kubelet's hook was answered with 2 clients connected"
        );
        clients.cmd("close-out 2 fin");
        (st.join().unwrap(), hk.join().unwrap())
    });
    assert_eq!(hook_answer.status, 200, "{hook_answer:?}");
    assert_eq!(hook_answer.json()["reason"], "drained", "{hook_answer:?}");
    assert_eq!(stray_answer.status, 200, "{stray_answer:?}");
    eprintln!("a stray relayed drain ran beside the kubelet's; the kubelet's hook held until the last close");
}

#[test]
fn a_pod_on_the_host_network_is_not_the_kubelet() {
    require_root!();
    let s = Scene::new(json!({"graceful.dev/gate": "http"}));
    wait_listening(&s.net.b, PORT, 10);
    // A process of a pod (its cgroup), in the node's namespace: the node's
    // address, a pod's socket.
    let other = graceful_tests::pod::SimPod::create(1);
    let mut cmd = std::process::Command::new(graceful_tests::peer::peer_bin());
    cmd.args([
        "get",
        &s.gate().to_string(),
        "/drain?policy=drained&settle=100ms&min=0s&max=20s",
    ])
    .stdout(std::process::Stdio::piped());
    place(&mut cmd, other.container(0), Some(&s.net.a));
    let out = cmd.output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.starts_with("HTTP/1.1 403"), "{text}");
    assert!(
        text.contains(&format!("used by pod {} on the host network", other.uid)),
        "{text}"
    );
    eprintln!(
        "a hostNetwork pod's hook request: {}",
        text.lines().next().unwrap_or_default()
    );
}
