//! Parser robustness, no kernel involved.

use super::*;
use crate::kernel::adopt::sockdiag::tcp_state;

fn nlmsg(ty: u16, flags: u16, seq: u32, payload: &[u8]) -> Vec<u8> {
    let len = NLMSG_HDRLEN + payload.len();
    let mut b = Vec::new();
    b.extend_from_slice(&(len as u32).to_ne_bytes());
    b.extend_from_slice(&ty.to_ne_bytes());
    b.extend_from_slice(&flags.to_ne_bytes());
    b.extend_from_slice(&seq.to_ne_bytes());
    b.extend_from_slice(&0u32.to_ne_bytes());
    b.extend_from_slice(payload);
    b.resize(align4(b.len()), 0);
    b
}

fn diag_msg_v4(cookie: u64, attrs: &[u8]) -> Vec<u8> {
    let mut p = vec![0u8; INET_DIAG_MSG_LEN];
    p[0] = libc::AF_INET as u8;
    p[1] = tcp_state::ESTABLISHED;
    p[4..6].copy_from_slice(&8080u16.to_be_bytes());
    p[6..8].copy_from_slice(&443u16.to_be_bytes());
    p[8..12].copy_from_slice(&[10, 0, 0, 1]);
    p[24..28].copy_from_slice(&[10, 0, 0, 2]);
    p[44..48].copy_from_slice(&(cookie as u32).to_ne_bytes());
    p[48..52].copy_from_slice(&((cookie >> 32) as u32).to_ne_bytes());
    p[64..68].copy_from_slice(&1000u32.to_ne_bytes());
    p[68..72].copy_from_slice(&4242u32.to_ne_bytes());
    p.extend_from_slice(attrs);
    p
}

fn rta(ty: u16, v: &[u8]) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend_from_slice(&((4 + v.len()) as u16).to_ne_bytes());
    b.extend_from_slice(&ty.to_ne_bytes());
    b.extend_from_slice(v);
    b.resize(align4(b.len()), 0);
    b
}

#[test]
fn parses_handmade_multipart_reply() {
    let cookie = 0x1122_3344_5566_7788u64;
    let mut attrs = rta(20 /* INET_DIAG_PAD */, &[]);
    attrs.extend(rta(INET_DIAG_CGROUP_ID, &77u64.to_ne_bytes()));
    let mut d = nlmsg(SOCK_DIAG_BY_FAMILY, 2, 5, &diag_msg_v4(cookie, &attrs));
    d.extend(nlmsg(SOCK_DIAG_BY_FAMILY, 2, 4, &diag_msg_v4(1, &[]))); // stale seq
    d.extend(nlmsg(NLMSG_DONE, 2, 5, &0i32.to_ne_bytes()));
    let mut out = Vec::new();
    assert_eq!(
        parse_datagram(&d, 5, "IPv4", &mut |s| out.push(s)).unwrap(),
        Progress::Done
    );
    assert_eq!(
        out,
        vec![TcpSocket {
            cookie,
            family: libc::AF_INET as u8,
            state: tcp_state::ESTABLISHED,
            local: "10.0.0.1:8080".parse().unwrap(),
            remote: "10.0.0.2:443".parse().unwrap(),
            cgroup_id: Some(77),
            inode: 4242,
            uid: 1000,
        }]
    );
}

#[test]
fn odd_messages_are_errors_not_panics() {
    let mut out = Vec::new();
    // Short inet_diag_msg.
    let d = nlmsg(SOCK_DIAG_BY_FAMILY, 2, 1, &[2, 1, 0]);
    assert!(matches!(
        parse_datagram(&d, 1, "IPv4", &mut |s| out.push(s)),
        Err(SockDiagError::Malformed { .. })
    ));
    // nlmsg_len pointing past the datagram.
    let mut d = nlmsg(NLMSG_DONE, 2, 1, &0i32.to_ne_bytes());
    d[0] = 200;
    assert!(parse_datagram(&d, 1, "IPv4", &mut |s| out.push(s)).is_err());
    // A truncated attribute is ignored, the socket kept without cgroup.
    let bad_attr = [12u8, 0, 21, 0, 1, 2];
    let d = nlmsg(SOCK_DIAG_BY_FAMILY, 2, 1, &diag_msg_v4(3, &bad_attr));
    assert_eq!(
        parse_datagram(&d, 1, "IPv4", &mut |s| out.push(s)).unwrap(),
        Progress::More
    );
    assert_eq!(out.last().unwrap().cgroup_id, None);
    // Kernel error with an extended-ack message.
    let mut err = (-libc::ENOENT).to_ne_bytes().to_vec();
    err.extend_from_slice(&nlmsg(SOCK_DIAG_BY_FAMILY, 0, 1, &[])[..NLMSG_HDRLEN]);
    err.extend(rta(NLMSGERR_ATTR_MSG, b"no handler\0"));
    let d = nlmsg(NLMSG_ERROR, NLM_F_CAPPED | NLM_F_ACK_TLVS, 1, &err);
    let e = parse_datagram(&d, 1, "IPv6", &mut |s| out.push(s)).unwrap_err();
    let text = e.to_string();
    assert!(
        text.contains("no handler") && text.contains("modprobe tcp_diag"),
        "{text}"
    );
    // Trailing garbage shorter than a header is tolerated.
    assert_eq!(
        parse_datagram(&[1, 2, 3], 1, "IPv4", &mut |s| out.push(s)).unwrap(),
        Progress::More
    );
}

proptest::proptest! {
    #[test]
    fn parser_never_panics(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..600)) {
        let mut out = Vec::new();
        let _ = parse_datagram(&bytes, 0, "IPv4", &mut |s| out.push(s));
        let _ = parse_inet_diag_msg(&bytes);
        let _ = ext_ack_message(&bytes, NLM_F_ACK_TLVS);
    }

    #[test]
    fn parser_never_panics_on_mutated_messages(
        cut in 0usize..200,
        flip in proptest::collection::vec((0usize..200, proptest::num::u8::ANY), 0..8),
    ) {
        let attrs = rta(INET_DIAG_CGROUP_ID, &5u64.to_ne_bytes());
        let mut d = nlmsg(SOCK_DIAG_BY_FAMILY, 2, 0, &diag_msg_v4(1, &attrs));
        d.extend(nlmsg(NLMSG_DONE, 2, 0, &0i32.to_ne_bytes()));
        for (i, v) in flip {
            if let Some(b) = d.get_mut(i) { *b = v; }
        }
        d.truncate(cut.min(d.len()));
        let mut out = Vec::new();
        let _ = parse_datagram(&d, 0, "IPv4", &mut |s| out.push(s));
    }
}
