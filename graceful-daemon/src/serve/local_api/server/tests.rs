use super::*;

#[test]
fn a_peer_keeps_one_share_whichever_family_its_listener_shows_it_in() {
    let local = "[::ffff:10.0.0.1]:9464".parse().unwrap();
    let key = |peer: &str| {
        Peer::Tcp {
            peer: peer.parse().unwrap(),
            local,
        }
        .key()
    };
    // A dual-stack listener shows an IPv4 peer IPv4-mapped: the same share
    // as that peer on an IPv4 listener, not a second one.
    assert_eq!(key("[::ffff:10.0.0.5]:40000"), key("10.0.0.5:40001"));
    assert_eq!(key("[::ffff:10.0.0.5]:40000"), "10.0.0.5");
    // A real IPv6 peer is its own.
    assert_eq!(key("[fd00::5]:40000"), "fd00::5");
    assert_ne!(key("[::ffff:10.0.0.5]:40000"), key("10.0.0.6:40000"));
}
