use std::net::SocketAddr;

use super::*;

fn sock(state: u8, local: &str, remote: &str, cgroup: Option<u64>, cookie: u64) -> TcpSocket {
    let local: SocketAddr = local.parse().unwrap();
    TcpSocket {
        cookie,
        family: if local.is_ipv4() {
            libc::AF_INET
        } else {
            libc::AF_INET6
        } as u8,
        state,
        local,
        remote: remote.parse().unwrap(),
        cgroup_id: cgroup,
        inode: 1,
        uid: 0,
    }
}

#[test]
fn role_heuristic_rules() {
    use tcp_state::*;
    let any6 = sock(LISTEN, "[::]:80", "[::]:0", Some(1), 1);
    let any4 = sock(LISTEN, "0.0.0.0:81", "0.0.0.0:0", Some(1), 2);
    let one4 = sock(LISTEN, "10.0.0.1:82", "0.0.0.0:0", Some(1), 3);
    let ls = [&any6, &any4, &one4];
    let role = |s: &str, st| role_of(&sock(st, s, "10.9.9.9:5555", Some(1), 9), &ls);
    assert_eq!(role_of(&any6, &ls), Role::Listener);
    assert_eq!(role("10.0.0.5:80", ESTABLISHED), Role::Inbound); // :: covers v4
    assert_eq!(role("[::ffff:10.0.0.5]:80", ESTABLISHED), Role::Inbound);
    assert_eq!(role("[fe80::1]:80", CLOSE_WAIT), Role::Inbound);
    assert_eq!(role("10.0.0.5:81", FIN_WAIT1), Role::Inbound);
    assert_eq!(role("[2001:db8::1]:81", ESTABLISHED), Role::Outbound); // 0.0.0.0 is v4 only
    assert_eq!(role("[::ffff:10.0.0.5]:81", ESTABLISHED), Role::Inbound);
    assert_eq!(role("10.0.0.1:82", ESTABLISHED), Role::Inbound);
    assert_eq!(role("[::ffff:10.0.0.1]:82", ESTABLISHED), Role::Inbound);
    assert_eq!(role("10.0.0.2:82", ESTABLISHED), Role::Outbound); // other address
    assert_eq!(role("10.0.0.1:83", ESTABLISHED), Role::Outbound); // no listener
    assert_eq!(role("10.0.0.5:80", SYN_SENT), Role::Outbound); // active open
                                                               // Non-LISTEN entries in `listeners` are ignored.
    let est = sock(ESTABLISHED, "10.0.0.1:84", "10.0.0.2:1", Some(1), 4);
    assert_eq!(
        role_of(&sock(ESTABLISHED, "10.0.0.1:84", "10.0.0.3:1", None, 5), &[&est]),
        Role::Outbound
    );
}

#[test]
fn classify_filters_and_dedupes() {
    use tcp_state::*;
    let dump = vec![
        sock(LISTEN, "0.0.0.0:80", "0.0.0.0:0", Some(7), 1),
        sock(ESTABLISHED, "10.0.0.1:80", "10.0.0.2:1000", Some(7), 2),
        sock(ESTABLISHED, "10.0.0.1:80", "10.0.0.2:1000", Some(7), 2), // dup
        sock(ESTABLISHED, "10.0.0.1:40000", "10.0.0.3:443", Some(8), 3),
        sock(ESTABLISHED, "10.0.0.1:40001", "10.0.0.3:443", None, 4), // no cgroup
        sock(TIME_WAIT, "10.0.0.1:80", "10.0.0.2:999", Some(7), 5),
        sock(NEW_SYN_RECV, "10.0.0.1:80", "10.0.0.2:998", Some(7), 6),
        sock(BOUND_INACTIVE, "10.0.0.1:40002", "0.0.0.0:0", Some(7), 7),
        sock(CLOSE_WAIT, "10.0.0.1:80", "10.0.0.2:997", Some(9), 8),
    ];
    let got = classify(&dump);
    let want = vec![
        Classified {
            cookie: 1,
            cgroup_id: 7,
            state: LISTEN,
            role: Role::Listener,
        },
        Classified {
            cookie: 2,
            cgroup_id: 7,
            state: ESTABLISHED,
            role: Role::Inbound,
        },
        Classified {
            cookie: 3,
            cgroup_id: 8,
            state: ESTABLISHED,
            role: Role::Outbound,
        },
        Classified {
            cookie: 8,
            cgroup_id: 9,
            state: CLOSE_WAIT,
            role: Role::Inbound,
        },
    ];
    assert_eq!(got, want);
}
