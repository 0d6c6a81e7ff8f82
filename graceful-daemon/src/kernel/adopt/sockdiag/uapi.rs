//! The numbers and sizes of the kernel's netlink and inet_diag UAPI
//! (`linux/netlink.h`, `linux/sock_diag.h`, `linux/inet_diag.h`), and the
//! limits the dump receives under.

/// `NETLINK_SOCK_DIAG` protocol number (linux/netlink.h).
pub(super) const NETLINK_SOCK_DIAG: libc::c_int = 4;
/// `SOL_NETLINK` / `NETLINK_EXT_ACK`: ask for a human-readable error string.
pub(super) const SOL_NETLINK: libc::c_int = 270;
pub(super) const NETLINK_EXT_ACK: libc::c_int = 11;

pub(super) const NLMSG_HDRLEN: usize = 16;
pub(super) const NLMSG_NOOP: u16 = 0x1;
pub(super) const NLMSG_ERROR: u16 = 0x2;
pub(super) const NLMSG_DONE: u16 = 0x3;
pub(super) const NLMSG_OVERRUN: u16 = 0x4;
pub(super) const NLM_F_REQUEST: u16 = 0x01;
pub(super) const NLM_F_DUMP: u16 = 0x100 | 0x200; // NLM_F_ROOT | NLM_F_MATCH
pub(super) const NLM_F_DUMP_INTR: u16 = 0x10;
/// On NLMSG_ERROR: the echoed request was cut down to its header.
pub(super) const NLM_F_CAPPED: u16 = 0x100;
/// On NLMSG_ERROR: extended-ack TLVs follow the (possibly capped) request.
pub(super) const NLM_F_ACK_TLVS: u16 = 0x200;
pub(super) const NLMSGERR_ATTR_MSG: u16 = 1;

/// `SOCK_DIAG_BY_FAMILY` (linux/sock_diag.h): request and reply type.
pub(super) const SOCK_DIAG_BY_FAMILY: u16 = 20;

/// `sizeof(struct inet_diag_req_v2)`: 4 bytes of header fields + sockid.
pub(super) const INET_DIAG_REQ_V2_LEN: usize = 8 + INET_DIAG_SOCKID_LEN;
/// `sizeof(struct inet_diag_sockid)`: ports, 2x16 address bytes, if, cookie.
pub(super) const INET_DIAG_SOCKID_LEN: usize = 2 + 2 + 16 + 16 + 4 + 8;
/// `sizeof(struct inet_diag_msg)`: 4 bytes + sockid + 5 u32.
pub(super) const INET_DIAG_MSG_LEN: usize = 4 + INET_DIAG_SOCKID_LEN + 5 * 4;
/// `INET_DIAG_CGROUP_ID` response attribute (u64, host byte order).
pub(super) const INET_DIAG_CGROUP_ID: u16 = 21;
/// rtattr/nlattr type bits that are flags, not part of the type number.
pub(super) const NLA_TYPE_MASK: u16 = !(0x8000 | 0x4000);

/// Large enough for any dump chunk: the kernel sizes dump skbs after the
/// largest buffer seen in recvmsg, capped at ~32 KiB, so 64 KiB never
/// truncates. We still detect truncation via `MSG_TRUNC` instead of trusting it.
pub(super) const RECV_BUF_LEN: usize = 64 * 1024;
/// A dump must make progress; a silent kernel must not hang start-up forever.
pub(super) const RECV_TIMEOUT_SECS: u32 = 10;
