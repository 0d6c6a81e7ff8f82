use std::net::IpAddr;

use super::*;

fn net(a: &str, prefix: u8) -> Peer {
    Peer::Net {
        addr: a.parse::<IpAddr>().unwrap(),
        prefix,
    }
}

#[test]
fn ports_parse_trim_and_dedupe() {
    assert_eq!(parse_ports("9090, 15020,,9090").unwrap(), vec![9090, 15020]);
    assert_eq!(parse_ports("1").unwrap(), vec![1]);
    assert_eq!(parse_ports("65535").unwrap(), vec![65535]);
}

#[test]
fn bad_ports_say_which() {
    for (s, want) in [
        ("0", "\"0\" is not a port"),
        ("65536", "\"65536\" is not a port"),
        ("90x", "\"90x\" is not a port"),
        ("-1", "\"-1\" is not a port"),
        ("", "no port given"),
        (" , ", "no port given"),
        ("1,2,3,4,5,6,7,8,9", "at most 8 ports, not 9"),
    ] {
        let e = parse_ports(s).unwrap_err();
        assert!(e.contains(want), "{s:?}: {e}");
        assert!(!e.contains('\n'));
    }
}

#[test]
fn peers_parse_node_addresses_and_networks() {
    assert_eq!(
        parse_peers("node, 10.0.0.0/8,fd00::/8,192.168.1.7,::1").unwrap(),
        vec![
            Peer::Node,
            net("10.0.0.0", 8),
            net("fd00::", 8),
            net("192.168.1.7", 32),
            net("::1", 128)
        ]
    );
    assert_eq!(parse_peers("0.0.0.0/0").unwrap(), vec![net("0.0.0.0", 0)]);
}

#[test]
fn bad_peers_say_what_to_write() {
    for (s, want) in [
        ("10.0.0.0/33", "the prefix length must be 0 to 32"),
        ("fd00::/129", "the prefix length must be 0 to 128"),
        ("10.0.0.0/x", "the prefix length must be 0 to 32"),
        ("10.1.2.3/8", "write 10.0.0.0/8"),
        ("fd00::1/8", "write fd00::/8"),
        ("nodes", "is not a peer"),
        ("10.0.0/8", "is not a peer"),
        ("", "no peer given"),
    ] {
        let e = parse_peers(s).unwrap_err();
        assert!(e.contains(want), "{s:?}: {e}");
    }
}

#[test]
fn v4_rules_match_as_mapped_v6() {
    let (a, p) = net("10.0.0.0", 8).as_v6().unwrap();
    assert_eq!(p, 104);
    assert_eq!(a.to_string(), "::ffff:10.0.0.0");
    assert_eq!(Peer::Node.as_v6(), None);
    assert_eq!(mask(0), 0);
    assert_eq!(mask(128), u128::MAX);
    assert_eq!(mask(1), 1u128 << 127);
}

#[test]
fn peers_round_trip_as_written() {
    for s in ["node", "10.0.0.0/8", "fd00::/8", "192.168.1.7/32"] {
        let p = peer(s).unwrap();
        assert_eq!(p.to_string(), s);
        let json = serde_json::to_string(&p).unwrap();
        assert_eq!(serde_json::from_str::<Peer>(&json).unwrap(), p);
    }
    assert!(serde_json::from_str::<Peer>("\"10.1.0.0/8\"").is_err());
}
