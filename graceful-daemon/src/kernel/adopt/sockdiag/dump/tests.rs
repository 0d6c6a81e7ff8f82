use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::process::Command;

use super::*;
use crate::kernel::adopt::sockdiag::{classify, tcp_state, Role};

/// This thread's cgroup v2 id (inode of its cgroup2 directory), if a
/// cgroup2 hierarchy is mounted.
fn own_cgroup_id() -> Option<u64> {
    use std::os::unix::fs::MetadataExt;
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    // "... mount-point opts - fstype source superopts"
    let mount = mountinfo.lines().find_map(|l| {
        let (pre, post) = l.split_once(" - ")?;
        if post.split(' ').next()? != "cgroup2" {
            return None;
        }
        pre.split(' ').nth(4).map(String::from)
    })?;
    let cg = std::fs::read_to_string("/proc/thread-self/cgroup").ok()?;
    let rel = cg.lines().find_map(|l| l.strip_prefix("0::"))?;
    let dir = format!("{mount}{}", rel.trim_end_matches('/'));
    Some(std::fs::metadata(dir).ok()?.ino())
}

struct Fixture {
    listener: TcpListener,
    clients: Vec<TcpStream>,
    accepted: Vec<TcpStream>,
    /// Connected but deliberately left in the accept queue.
    pending: TcpStream,
}

fn fixture(addr: &str, n: usize) -> Fixture {
    let listener = TcpListener::bind(addr).unwrap();
    let target = listener.local_addr().unwrap();
    let mut clients = Vec::new();
    let mut accepted = Vec::new();
    for _ in 0..n {
        clients.push(TcpStream::connect(target).unwrap());
        accepted.push(listener.accept().unwrap().0);
    }
    let pending = TcpStream::connect(target).unwrap();
    Fixture {
        listener,
        clients,
        accepted,
        pending,
    }
}

fn ss_established(port: u16) -> usize {
    let out = Command::new("ss")
        .args(["-tnH", "state", "established"])
        .arg(format!("( sport = :{port} or dport = :{port} )"))
        .output()
        .expect("running ss");
    assert!(out.status.success(), "ss failed: {out:?}");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| !l.trim().is_empty())
        .count()
}

fn find(dump: &[TcpSocket], local: SocketAddr, remote: SocketAddr) -> &TcpSocket {
    let hits: Vec<_> = dump
        .iter()
        .filter(|s| s.local == local && s.remote == remote)
        .collect();
    assert_eq!(hits.len(), 1, "{local} -> {remote}: {hits:?}");
    hits[0]
}

fn check_fixture(f: &Fixture, dump: &[TcpSocket], family: u8, cgroup: Option<u64>) {
    let laddr = f.listener.local_addr().unwrap();
    let port = laddr.port();
    let unspec = match laddr {
        SocketAddr::V4(_) => SocketAddr::from((Ipv4Addr::UNSPECIFIED, 0)),
        SocketAddr::V6(_) => SocketAddr::from((Ipv6Addr::UNSPECIFIED, 0)),
    };
    let uid = unsafe { libc::geteuid() };
    let check = |s: &TcpSocket, state: u8, cookie: u64, what: &str| {
        assert_eq!(s.state, state, "{what}: {s:?}");
        assert_eq!(s.family, family, "{what}: {s:?}");
        assert_eq!(s.cookie, cookie, "{what}: cookie differs from SO_COOKIE");
        assert_ne!(s.cookie, 0, "{what}");
        assert!(s.cgroup_id.is_some(), "{what}: no cgroup id: {s:?}");
        if let Some(cg) = cgroup {
            assert_eq!(s.cgroup_id, Some(cg), "{what}: wrong cgroup");
        }
        assert_eq!(s.uid, uid, "{what}");
    };

    let l = find(dump, laddr, unspec);
    check(l, tcp_state::LISTEN, so_cookie(&f.listener), "listener");
    assert_ne!(l.inode, 0);
    for (c, a) in f.clients.iter().zip(&f.accepted) {
        let (cl, cr) = (c.local_addr().unwrap(), c.peer_addr().unwrap());
        let cs = find(dump, cl, cr);
        check(cs, tcp_state::ESTABLISHED, so_cookie(c), "client");
        assert_ne!(cs.inode, 0);
        let as_ = find(dump, cr, cl);
        check(as_, tcp_state::ESTABLISHED, so_cookie(a), "accepted");
        assert_ne!(as_.inode, 0);
    }
    // The not-yet-accepted server side exists, ESTABLISHED, without inode.
    let p = &f.pending;
    let queued = find(dump, p.peer_addr().unwrap(), p.local_addr().unwrap());
    assert_eq!(queued.state, tcp_state::ESTABLISHED);
    assert_eq!(queued.inode, 0, "accept-queue socket has no file yet");
    assert!(queued.cgroup_id.is_some());

    let ours = dump
        .iter()
        .filter(|s| s.state == tcp_state::ESTABLISHED)
        .filter(|s| s.local.port() == port || s.remote.port() == port)
        .count();
    // n clients + n accepted + pending client + its queued server side.
    assert_eq!(ours, 2 * f.clients.len() + 2);
    assert_eq!(ours, ss_established(port), "dump disagrees with ss");
}

#[test]
fn dump_sees_loopback_v4_and_v6() {
    let v4 = fixture("127.0.0.1:0", 3);
    let v6 = fixture("[::1]:0", 2);
    let cgroup = own_cgroup_id();
    let dump = dump_tcp().expect("dump_tcp");
    check_fixture(&v4, &dump, libc::AF_INET as u8, cgroup);
    check_fixture(&v6, &dump, libc::AF_INET6 as u8, cgroup);
    // Cookies are unique among full sockets.
    let mut cookies: Vec<_> = dump
        .iter()
        .filter(|s| s.state != tcp_state::TIME_WAIT && s.state != tcp_state::NEW_SYN_RECV)
        .map(|s| s.cookie)
        .collect();
    let n = cookies.len();
    cookies.sort_unstable();
    cookies.dedup();
    assert_eq!(cookies.len(), n, "duplicate cookies in one dump");
}

#[test]
fn classify_roles_on_real_sockets() {
    for addr in ["127.0.0.1:0", "[::1]:0"] {
        let f = fixture(addr, 2);
        let dump = dump_tcp().expect("dump_tcp");
        let roles: HashMap<u64, Role> = classify(&dump).into_iter().map(|c| (c.cookie, c.role)).collect();
        assert_eq!(roles.get(&so_cookie(&f.listener)), Some(&Role::Listener));
        for c in &f.clients {
            assert_eq!(roles.get(&so_cookie(c)), Some(&Role::Outbound), "{addr}");
        }
        assert_eq!(roles.get(&so_cookie(&f.pending)), Some(&Role::Outbound));
        for a in &f.accepted {
            assert_eq!(roles.get(&so_cookie(a)), Some(&Role::Inbound), "{addr}");
        }
    }
}

#[test]
fn dual_stack_listener_accepts_v4_as_mapped_v6() {
    // An IPv4 client of a `::` listener: the accepted side is an AF_INET6
    // socket with a v4-mapped local address, and must count as Inbound.
    let Ok(listener) = TcpListener::bind("[::]:0") else {
        return; // IPv6 disabled on this host
    };
    let port = listener.local_addr().unwrap().port();
    let client = TcpStream::connect(("127.0.0.1", port)).unwrap();
    let (accepted, _) = listener.accept().unwrap();
    let dump = dump_tcp().unwrap();
    let acc = dump.iter().find(|s| s.cookie == so_cookie(&accepted)).unwrap();
    assert_eq!(acc.family, libc::AF_INET6 as u8);
    assert_eq!(
        acc.local.ip(),
        IpAddr::V6(Ipv4Addr::LOCALHOST.to_ipv6_mapped()),
        "reported faithfully as v4-mapped"
    );
    let cli = dump.iter().find(|s| s.cookie == so_cookie(&client)).unwrap();
    assert_eq!(cli.family, libc::AF_INET as u8);
    let roles: HashMap<u64, Role> = classify(&dump).into_iter().map(|c| (c.cookie, c.role)).collect();
    assert_eq!(roles[&acc.cookie], Role::Inbound);
    assert_eq!(roles[&cli.cookie], Role::Outbound);
}

#[test]
fn request_sockets_are_syn_recv_without_cgroup() {
    // With TCP_DEFER_ACCEPT the server drops the client's bare final ACK,
    // so the server side stays a request mini-socket while the client is
    // already ESTABLISHED.
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let secs: libc::c_int = 30;
    // SAFETY: valid fd, pointer/len describe a live c_int.
    let rc = unsafe {
        libc::setsockopt(
            l.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_DEFER_ACCEPT,
            (&secs as *const libc::c_int).cast(),
            4,
        )
    };
    assert_eq!(rc, 0);
    let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
    let (cl, cr) = (c.local_addr().unwrap(), c.peer_addr().unwrap());
    let dump = dump_tcp().unwrap();
    let req = find(&dump, cr, cl);
    assert_eq!(req.state, tcp_state::SYN_RECV, "not NEW_SYN_RECV: {req:?}");
    assert_eq!((req.cgroup_id, req.inode), (None, 0));
    assert!(classify(&dump).iter().all(|x| x.cookie != req.cookie));
}

#[test]
fn a_lookup_finds_one_connection_by_its_addresses_and_nothing_else() {
    for addr in ["127.0.0.1:0", "[::1]:0"] {
        let f = fixture(addr, 2);
        let mut lookup = Lookup::open().unwrap();
        for c in &f.clients {
            let (local, remote) = (c.local_addr().unwrap(), c.peer_addr().unwrap());
            let s = lookup.find(local, remote).unwrap().expect("the client's socket");
            assert_eq!((s.local, s.remote), (local, remote));
            assert_eq!(s.cookie, so_cookie(c), "{addr}");
            assert_eq!(s.state, tcp_state::ESTABLISHED);
            assert_eq!(s.cgroup_id, own_cgroup_id());
            // The other end, looked up from its side.
            let server = lookup.find(remote, local).unwrap().expect("the accepted socket");
            assert_eq!((server.local, server.remote), (remote, local));
        }
        // A port nobody has: nothing, not an error.
        let local = f.clients[0].local_addr().unwrap();
        let mut gone = f.clients[0].peer_addr().unwrap();
        gone.set_port(1);
        assert_eq!(lookup.find(local, gone).unwrap(), None);
    }
}
