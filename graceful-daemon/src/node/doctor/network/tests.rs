use std::net::IpAddr;

use super::*;

fn ips(list: &[&str]) -> Vec<IpAddr> {
    list.iter().map(|s| s.parse().unwrap()).collect()
}

#[test]
fn loopback_and_link_local_reach_no_probe() {
    let (v4, v6) = reachable(ips(&[
        "127.0.0.1",
        "::1",
        "fe80::1",
        "10.244.0.5",
        "fd00:10:244::5",
    ]));
    assert_eq!(v4, ips(&["10.244.0.5"]));
    assert_eq!(v6, ips(&["fd00:10:244::5"]));
}

#[test]
fn each_family_and_what_port_listens_on() {
    let v4 = ips(&["10.244.0.5"]);
    let v6 = ips(&["fd00:10:244::5"]);
    let (level, text) = judge(&[], &v6, Ok(true));
    assert_eq!(level, Level::Ok);
    assert!(text.starts_with("IPv6 only (fd00:10:244::5)"), "{text}");
    let (level, text) = judge(&v4, &[], Ok(false));
    assert_eq!(level, Level::Ok);
    assert!(text.contains("no IPv6 in this kernel"), "{text}");
    assert!(judge(&v4, &v6, Ok(true)).1.contains("both families"));
    assert_eq!(judge(&v4, &v6, Ok(false)).0, Level::Fail);
    assert_eq!(judge(&[], &[], Ok(true)).0, Level::Warn);
    assert_eq!(
        judge(&v4, &[], Err("Address already in use".into())).0,
        Level::Fail
    );
    let many = ips(&["10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4"]);
    assert!(judge(&many, &[], Ok(true))
        .1
        .contains("10.0.0.1, 10.0.0.2 and 2 more"));
}
