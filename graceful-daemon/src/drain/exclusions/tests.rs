use std::net::IpAddr;

use graceful_api::exclusions::{parse_peers, parse_ports};

use super::*;

/// What the programs do with a peer: the same match, in user space.
fn matches(f: &Filter, peer: IpAddr) -> Option<u32> {
    let v = u128::from(mapped(peer)).to_be_bytes();
    let a = [
        u64::from_ne_bytes(v[..8].try_into().unwrap()),
        u64::from_ne_bytes(v[8..].try_into().unwrap()),
    ];
    f.nets[..f.nets_len as usize]
        .iter()
        .find(|n| (a[0] ^ n.addr[0]) & n.mask[0] == 0 && (a[1] ^ n.addr[1]) & n.mask[1] == 0)
        .map(|n| n.rule)
}

#[test]
fn nothing_to_leave_out_is_no_filter() {
    assert!(compile(&[], &[], None, &mut vec![]).is_none());
}

#[test]
fn rules_are_numbered_ports_first_in_the_order_written() {
    let mut w = vec![];
    let e = compile(
        &parse_ports("9090,15020").unwrap(),
        &parse_peers("10.0.0.0/8,node,fd00::/8").unwrap(),
        Some(&["192.168.5.1".parse().unwrap(), "fe80::1".parse().unwrap()]),
        &mut w,
    )
    .unwrap();
    assert!(w.is_empty(), "{w:?}");
    assert_eq!(e.rules, ["9090", "15020", "10.0.0.0/8", "node", "fd00::/8"]);
    assert_eq!(&e.filter.ports[..3], &[9090, 15020, 0]);
    assert_eq!(&e.filter.port_rules[..2], &[0, 1]);
    assert_eq!(e.filter.nets_len, 4);
    let f = &e.filter;
    assert_eq!(matches(f, "10.200.3.4".parse().unwrap()), Some(2));
    assert_eq!(matches(f, "::ffff:10.0.0.9".parse().unwrap()), Some(2));
    assert_eq!(matches(f, "11.0.0.1".parse().unwrap()), None);
    assert_eq!(matches(f, "192.168.5.1".parse().unwrap()), Some(3));
    assert_eq!(matches(f, "192.168.5.2".parse().unwrap()), None);
    assert_eq!(matches(f, "fe80::1".parse().unwrap()), Some(3));
    assert_eq!(matches(f, "fd12::7".parse().unwrap()), Some(4));
    assert_eq!(matches(f, "fe00::7".parse().unwrap()), None);
}

#[test]
fn a_node_rule_without_the_nodes_addresses_says_so() {
    let mut w = vec![];
    let e = compile(&[], &parse_peers("node").unwrap(), None, &mut w).unwrap();
    assert_eq!(e.rules, ["node"]);
    assert_eq!(e.filter.nets_len, 0);
    assert_eq!(w.len(), 1);
    assert!(w[0].contains("does not know the node's addresses"), "{w:?}");
}

#[test]
fn too_many_node_addresses_are_cut_with_a_warning() {
    let addrs: Vec<IpAddr> = (0..40u8).map(|i| IpAddr::from([10, 1, 0, i])).collect();
    let mut w = vec![];
    let e = compile(&[], &parse_peers("node").unwrap(), Some(&addrs), &mut w).unwrap();
    assert_eq!(e.filter.nets_len as usize, MAX_IGNORE_NETS);
    assert!(w[0].contains("the last 8 are not left out"), "{w:?}");
}

#[test]
fn everything_v4_matches_v4_only() {
    let e = compile(&[], &parse_peers("0.0.0.0/0").unwrap(), None, &mut vec![]).unwrap();
    assert_eq!(matches(&e.filter, "1.2.3.4".parse().unwrap()), Some(0));
    assert_eq!(matches(&e.filter, "2001:db8::1".parse().unwrap()), None);
}
