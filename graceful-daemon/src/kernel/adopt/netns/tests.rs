use super::*;
use crate::kernel::adopt::sockdiag::{classify, dump_tcp, so_cookie, tcp_state, Role};
use std::net::{TcpListener, TcpStream};
use std::process::Command;

/// A named namespace made with `ip netns add`, deleted on drop (which
/// also runs while unwinding from a failed assertion).
struct TestNetns {
    name: String,
}

impl TestNetns {
    fn create() -> TestNetns {
        let name = format!("graceful-test-sd-{}", std::process::id());
        // A leftover from a killed run with a recycled pid would make `add` fail.
        let _ = Command::new("ip").args(["netns", "del", &name]).output();
        let ip = |args: &[&str]| {
            let out = Command::new("ip").args(args).output().expect("running ip");
            assert!(out.status.success(), "ip {args:?}: {out:?}");
        };
        ip(&["netns", "add", &name]);
        let guard = TestNetns { name };
        ip(&["-n", &guard.name, "link", "set", "lo", "up"]);
        guard
    }
}

impl Drop for TestNetns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.name]).output();
    }
}

#[test]
fn dump_inside_a_fresh_netns() {
    let guard = TestNetns::create();
    let ns = NetNs::open(format!("/run/netns/{}", guard.name)).expect("open netns");
    let home = NetNs::current().unwrap();
    assert_ne!(ns.inode, home.inode);

    let tag = String::from("borrowed by the closure");
    let (cookies, dump, inside) = run_in(&ns, || {
        assert_eq!(tag.len(), 23); // run_in accepts non-'static closures
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (a, _) = l.accept().unwrap();
        let inside = NetNs::current().unwrap().inode;
        let dump = dump_tcp().expect("dump_tcp in netns");
        ([so_cookie(&l), so_cookie(&c), so_cookie(&a)], dump, inside)
    })
    .expect("run_in");

    assert_eq!(inside, ns.inode, "closure ran in the target namespace");
    assert_eq!(NetNs::current().unwrap().inode, home.inode, "caller did not move");

    // A fresh namespace holds exactly our three sockets.
    assert_eq!(dump.len(), 3, "{dump:#?}");
    let state = |c: u64| dump.iter().find(|s| s.cookie == c).map(|s| s.state);
    assert_eq!(state(cookies[0]), Some(tcp_state::LISTEN));
    assert_eq!(state(cookies[1]), Some(tcp_state::ESTABLISHED));
    assert_eq!(state(cookies[2]), Some(tcp_state::ESTABLISHED));
    assert!(dump.iter().all(|s| s.cgroup_id.is_some()));
    let roles: Vec<_> = cookies
        .iter()
        .map(|c| classify(&dump).into_iter().find(|x| x.cookie == *c).unwrap().role)
        .collect();
    assert_eq!(roles, [Role::Listener, Role::Outbound, Role::Inbound]);

    // The host's own dump must not see them (cookies are host-unique).
    let host = dump_tcp().unwrap();
    assert!(host.iter().all(|s| !cookies.contains(&s.cookie)));

    // The scan finds the bind-mounted namespace and our own, once each.
    let scan = scan_netns();
    let inodes: Vec<_> = scan.namespaces.iter().map(|n| n.inode).collect();
    assert!(inodes.contains(&ns.inode), "{inodes:?}");
    assert!(inodes.contains(&home.inode), "{inodes:?}");
    let distinct: HashSet<_> = scan.namespaces.iter().map(|n| (n.dev, n.inode)).collect();
    assert_eq!(distinct.len(), scan.namespaces.len());
    assert!(all_netns().iter().any(|n| n.inode == ns.inode));

    let mount = format!("/run/netns/{}", guard.name);
    drop(guard);
    assert!(!Path::new(&mount).exists(), "netns cleaned up");
}

#[test]
fn open_rejects_non_namespaces_and_run_in_reports_setns_errors() {
    assert!(NetNs::open("/dev/null").is_err());
    assert!(NetNs::open("/proc/self/ns/uts").is_err());
    let bogus = NetNs {
        fd: File::open("/dev/null").unwrap().into(),
        dev: 0,
        inode: 0,
        origin: "/dev/null".into(),
    };
    let err = run_in(&bogus, || ()).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::EINVAL));
}

#[test]
fn run_in_propagates_panics() {
    let home = NetNs::current().unwrap();
    let r = std::panic::catch_unwind(|| run_in(&home, || panic!("boom")));
    assert!(r.is_err());
}
