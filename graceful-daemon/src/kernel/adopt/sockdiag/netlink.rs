//! The netlink messages: the dump request built, and the kernel's replies
//! parsed, as plain byte slices with explicit offsets, so a short or odd
//! reply is an error, never an out-of-bounds read or a panic.

use std::io;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};

use super::{error::SockDiagError, tcp_socket::TcpSocket, uapi::*};

/// nlmsghdr + inet_diag_req_v2 asking for every TCP socket of `family`.
pub(super) fn build_request(seq: u32, family: u8, states: u32) -> Vec<u8> {
    let total = NLMSG_HDRLEN + INET_DIAG_REQ_V2_LEN;
    let mut b = Vec::with_capacity(total);
    // struct nlmsghdr
    b.extend_from_slice(&(total as u32).to_ne_bytes());
    b.extend_from_slice(&SOCK_DIAG_BY_FAMILY.to_ne_bytes());
    b.extend_from_slice(&(NLM_F_REQUEST | NLM_F_DUMP).to_ne_bytes());
    b.extend_from_slice(&seq.to_ne_bytes());
    b.extend_from_slice(&0u32.to_ne_bytes()); // nlmsg_pid: let the kernel fill it
                                              // struct inet_diag_req_v2
    b.push(family); // sdiag_family
    b.push(libc::IPPROTO_TCP as u8); // sdiag_protocol
    b.push(0); // idiag_ext: the base message + default attrs are enough
    b.push(0); // pad
               // idiag_states: one bit per TCP state (ALL_STATES: every one).
    b.extend_from_slice(&states.to_ne_bytes());
    // id: zero = no filtering by address/port/interface. idiag_cookie must
    // be INET_DIAG_NOCOOKIE only for exact lookups, not dumps.
    b.resize(total, 0);
    b
}

/// nlmsghdr + inet_diag_req_v2 asking for the one TCP socket whose own
/// address is `local` and whose peer is `remote` (both of one family).
pub(super) fn build_lookup(seq: u32, local: SocketAddr, remote: SocketAddr) -> Vec<u8> {
    let total = NLMSG_HDRLEN + INET_DIAG_REQ_V2_LEN;
    let family = match local {
        SocketAddr::V4(_) => libc::AF_INET as u8,
        SocketAddr::V6(_) => libc::AF_INET6 as u8,
    };
    let mut b = Vec::with_capacity(total);
    b.extend_from_slice(&(total as u32).to_ne_bytes());
    b.extend_from_slice(&SOCK_DIAG_BY_FAMILY.to_ne_bytes());
    b.extend_from_slice(&NLM_F_REQUEST.to_ne_bytes());
    b.extend_from_slice(&seq.to_ne_bytes());
    b.extend_from_slice(&0u32.to_ne_bytes());
    b.push(family);
    b.push(libc::IPPROTO_TCP as u8);
    b.push(0);
    b.push(0);
    b.extend_from_slice(&u32::MAX.to_ne_bytes()); // every state
                                                  // struct inet_diag_sockid: ports and addresses in network order.
    b.extend_from_slice(&local.port().to_be_bytes());
    b.extend_from_slice(&remote.port().to_be_bytes());
    for a in [local, remote] {
        let mut ip = [0u8; 16];
        match a {
            SocketAddr::V4(v4) => ip[..4].copy_from_slice(&v4.ip().octets()),
            SocketAddr::V6(v6) => ip.copy_from_slice(&v6.ip().octets()),
        }
        b.extend_from_slice(&ip);
    }
    b.extend_from_slice(&0u32.to_ne_bytes()); // idiag_if: any
                                              // idiag_cookie: INET_DIAG_NOCOOKIE, an exact lookup by address.
    b.extend_from_slice(&u32::MAX.to_ne_bytes());
    b.extend_from_slice(&u32::MAX.to_ne_bytes());
    debug_assert_eq!(b.len(), total);
    b
}

#[derive(Debug, PartialEq, Eq)]
pub(super) enum Progress {
    More,
    Done,
}

fn rd_u16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_ne_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

fn rd_u32(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

fn align4(len: usize) -> usize {
    (len + 3) & !3
}

/// Parses one received datagram (which may hold several netlink messages).
pub(super) fn parse_datagram(
    dgram: &[u8],
    seq: u32,
    name: &'static str,
    out: &mut impl FnMut(TcpSocket),
) -> Result<Progress, SockDiagError> {
    let malformed = |detail: String| SockDiagError::Malformed { family: name, detail };
    let mut off = 0usize;
    while dgram.len() - off >= NLMSG_HDRLEN {
        let msg_len = rd_u32(dgram, off).unwrap_or(0) as usize;
        let msg_type = rd_u16(dgram, off + 4).unwrap_or(0);
        let msg_flags = rd_u16(dgram, off + 6).unwrap_or(0);
        let msg_seq = rd_u32(dgram, off + 8).unwrap_or(0);
        if msg_len < NLMSG_HDRLEN || msg_len > dgram.len() - off {
            return Err(malformed(format!(
                "netlink message length {msg_len} at offset {off} of a {}-byte datagram",
                dgram.len()
            )));
        }
        let payload = &dgram[off + NLMSG_HDRLEN..off + msg_len];
        // Advance past the padded message; the last one may omit its padding.
        off = (off + align4(msg_len)).min(dgram.len());

        // Replies to an earlier, abandoned request on this socket: ignore.
        if msg_seq != seq {
            continue;
        }
        // inet_diag does not set this today; if it ever does, the tables
        // changed under the walk, which callers must tolerate anyway.
        if msg_flags & NLM_F_DUMP_INTR != 0 {
            tracing::debug!(family = name, "sock_diag dump interrupted by a table change");
        }
        match msg_type {
            NLMSG_NOOP => {}
            NLMSG_DONE => {
                // A dump's DONE carries the dump callback's final status.
                let status = rd_u32(payload, 0).map_or(0, |v| v as i32);
                if status < 0 {
                    return Err(kernel_error(name, -status, None));
                }
                return Ok(Progress::Done);
            }
            NLMSG_ERROR => {
                let errno = rd_u32(payload, 0).map_or(0, |v| v as i32);
                if errno == 0 {
                    continue; // an ACK; we never ask for one, harmless
                }
                let ext = ext_ack_message(payload, msg_flags);
                return Err(kernel_error(name, -errno, ext));
            }
            NLMSG_OVERRUN => return Err(SockDiagError::Overrun { family: name }),
            SOCK_DIAG_BY_FAMILY => match parse_inet_diag_msg(payload) {
                Some(sock) => out(sock),
                None => {
                    return Err(malformed(format!(
                        "inet_diag_msg of {} bytes (need {INET_DIAG_MSG_LEN}) or unknown address family {}",
                        payload.len(),
                        payload.first().copied().unwrap_or(0)
                    )))
                }
            },
            _ => {} // other control/unknown types carry nothing we need
        }
    }
    Ok(Progress::More)
}

fn kernel_error(name: &'static str, errno: i32, ext_ack: Option<String>) -> SockDiagError {
    let hint = match errno {
        libc::ENOENT => {
            "; the kernel has no TCP diag handler for this family: \
             load the tcp_diag module (`modprobe tcp_diag`) or enable CONFIG_INET_TCP_DIAG"
        }
        libc::EPERM | libc::EACCES => "; denied by an LSM or seccomp policy",
        libc::EINVAL => "; the kernel did not accept inet_diag_req_v2 (kernel too old?)",
        _ => "",
    };
    SockDiagError::Kernel {
        family: name,
        source: io::Error::from_raw_os_error(errno),
        ext_ack,
        hint,
    }
}

/// Pulls the NLMSGERR_ATTR_MSG string out of an NLMSG_ERROR payload, if any.
fn ext_ack_message(payload: &[u8], flags: u16) -> Option<String> {
    if flags & NLM_F_ACK_TLVS == 0 {
        return None;
    }
    // struct nlmsgerr { int error; struct nlmsghdr msg; } then, unless
    // CAPPED, the rest of the echoed request, then the TLVs.
    let echoed = if flags & NLM_F_CAPPED != 0 {
        NLMSG_HDRLEN
    } else {
        rd_u32(payload, 4)? as usize
    };
    let tlvs = payload.get(align4(4 + echoed)..)?;
    attrs(tlvs)
        .find(|(ty, _)| *ty == NLMSGERR_ATTR_MSG)
        .map(|(_, v)| {
            let v = v.split(|&c| c == 0).next().unwrap_or(v);
            String::from_utf8_lossy(v).into_owned()
        })
}

/// Iterates (type, payload) over a run of rtattr/nlattr TLVs, stopping at the
/// first one whose length does not fit rather than reading past the end.
fn attrs(mut b: &[u8]) -> impl Iterator<Item = (u16, &[u8])> {
    std::iter::from_fn(move || {
        let len = rd_u16(b, 0)? as usize;
        let ty = rd_u16(b, 2)? & NLA_TYPE_MASK;
        if len < 4 || len > b.len() {
            b = &[];
            return None;
        }
        let value = &b[4..len];
        b = b.get(align4(len)..).unwrap_or(&[]);
        Some((ty, value))
    })
}

/// Parses a `struct inet_diag_msg` plus its attributes.
fn parse_inet_diag_msg(p: &[u8]) -> Option<TcpSocket> {
    if p.len() < INET_DIAG_MSG_LEN {
        return None;
    }
    let family = p[0];
    let state = p[1];
    // struct inet_diag_sockid starts at 4. Ports and addresses are in
    // network byte order; interface and cookie are host order.
    let sport = u16::from_be_bytes([p[4], p[5]]);
    let dport = u16::from_be_bytes([p[6], p[7]]);
    let src: [u8; 16] = p[8..24].try_into().ok()?;
    let dst: [u8; 16] = p[24..40].try_into().ok()?;
    let ifindex = rd_u32(p, 40)?;
    let cookie = u64::from(rd_u32(p, 44)?) | (u64::from(rd_u32(p, 48)?) << 32);
    let uid = rd_u32(p, 64)?;
    let inode = rd_u32(p, 68)?;

    let (local, remote) = match family as libc::c_int {
        libc::AF_INET => {
            let ip = |a: &[u8; 16]| Ipv4Addr::new(a[0], a[1], a[2], a[3]);
            (
                SocketAddr::V4(SocketAddrV4::new(ip(&src), sport)),
                SocketAddr::V4(SocketAddrV4::new(ip(&dst), dport)),
            )
        }
        libc::AF_INET6 => {
            let mk = |a: [u8; 16], port| {
                let ip = Ipv6Addr::from(a);
                // idiag_if is the bound device; for link-local addresses that
                // is the scope, which SocketAddrV6 needs to be meaningful.
                let scope = if ip.is_unicast_link_local() { ifindex } else { 0 };
                SocketAddr::V6(SocketAddrV6::new(ip, port, 0, scope))
            };
            (mk(src, sport), mk(dst, dport))
        }
        _ => return None,
    };

    let cgroup_id = attrs(&p[INET_DIAG_MSG_LEN..])
        .filter(|(ty, _)| *ty == INET_DIAG_CGROUP_ID)
        .find_map(|(_, v)| Some(u64::from_ne_bytes(v.get(..8)?.try_into().ok()?)));

    Some(TcpSocket {
        cookie,
        family,
        state,
        local,
        remote,
        cgroup_id,
        inode,
        uid,
    })
}

#[cfg(test)]
mod tests;
