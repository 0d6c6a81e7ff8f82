use std::{
    io::{Read as _, Write as _},
    net::{Ipv6Addr, SocketAddr, TcpStream},
};

use super::*;

/// What a peer of `family` reaches on the listener's port.
fn reach(listener: &TcpListener, to: std::net::IpAddr) -> SocketAddr {
    let port = listener.local_addr().unwrap().port();
    let mut c = TcpStream::connect((to, port)).unwrap();
    let (mut s, peer) = listener.accept().unwrap();
    s.write_all(b"x").unwrap();
    let mut b = [0u8; 1];
    c.read_exact(&mut b).unwrap();
    peer
}

#[test]
fn one_socket_answers_ipv4_and_ipv6() {
    let l = any_address(0).unwrap();
    let local = l.local_addr().unwrap();
    assert_eq!(local.ip(), std::net::IpAddr::V6(Ipv6Addr::UNSPECIFIED), "{local}");
    let v6 = reach(&l, Ipv6Addr::LOCALHOST.into());
    assert_eq!(v6.ip(), std::net::IpAddr::V6(Ipv6Addr::LOCALHOST));
    // IPv4 peers arrive as IPv4-mapped IPv6 addresses.
    let v4 = reach(&l, Ipv4Addr::LOCALHOST.into());
    assert_eq!(
        v4.ip(),
        std::net::IpAddr::V6(Ipv4Addr::LOCALHOST.to_ipv6_mapped()),
        "{v4}"
    );
}

#[test]
fn a_port_taken_is_reported_taken() {
    let first = any_address(0).unwrap();
    let port = first.local_addr().unwrap().port();
    let e = any_address(port).unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::AddrInUse, "{e}");
    // An IPv4 listener takes the port for a dual-stack one too.
    let v4 = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    let e = any_address(v4.local_addr().unwrap().port()).unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::AddrInUse, "{e}");
}

#[tokio::test]
async fn an_address_as_written_or_every_address_for_a_bare_port() {
    let l = tcp("127.0.0.1:0").await.unwrap();
    assert!(l.local_addr().unwrap().ip().is_loopback());
    let l = tcp(":0").await.unwrap();
    assert_eq!(
        l.local_addr().unwrap().ip(),
        std::net::IpAddr::V6(Ipv6Addr::UNSPECIFIED)
    );
    for bad in [":", ":70000", "nowhere:1"] {
        assert!(tcp(bad).await.is_err(), "{bad}");
    }
}
