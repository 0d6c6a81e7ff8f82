use super::*;

#[test]
fn mapped_ipv4_is_ipv4_and_loopback_is_never_the_node() {
    let v4: IpAddr = "10.88.0.1".parse().unwrap();
    assert_eq!("::ffff:10.88.0.1".parse::<IpAddr>().unwrap().to_canonical(), v4);
    assert_eq!(v4.to_canonical(), v4);
    let v6: IpAddr = "fd00::1".parse().unwrap();
    assert_eq!(v6.to_canonical(), v6);

    // This process's own namespace: its loopback interface has 127.0.0.1,
    // which a pod's namespace has too.
    let node = NodeAddrs::open(Path::new("/proc/self/ns/net")).unwrap();
    assert!(node.current().contains(&IpAddr::V4(Ipv4Addr::LOCALHOST)));
    assert!(!node.is_node(IpAddr::V4(Ipv4Addr::LOCALHOST)));
    assert!(!node.is_node("::1".parse().unwrap()));
    assert!(!node.is_node("::ffff:127.0.0.1".parse().unwrap()));
    // TEST-NET-3: on no interface here.
    assert!(!node.is_node("203.0.113.77".parse().unwrap()));
}
