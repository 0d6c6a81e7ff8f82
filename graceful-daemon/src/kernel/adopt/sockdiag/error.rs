//! What can go wrong talking sock_diag to the kernel; each message says
//! what to check.

use std::io;

use super::uapi::RECV_TIMEOUT_SECS;

/// Errors from [`dump_tcp`](super::dump_tcp). Each message says what to check.
#[derive(Debug, thiserror::Error)]
pub enum SockDiagError {
    #[error(
        "cannot open a NETLINK_SOCK_DIAG socket: {0} \
         (needs CONFIG_INET_DIAG; in a restricted sandbox, check seccomp/LSM policy)"
    )]
    Open(#[source] io::Error),
    #[error("sending the {family} TCP sock_diag dump request failed: {source}")]
    Send {
        family: &'static str,
        #[source]
        source: io::Error,
    },
    #[error("receiving the {family} TCP sock_diag dump failed: {source}")]
    Recv {
        family: &'static str,
        #[source]
        source: io::Error,
    },
    #[error(
        "the kernel sent no {family} TCP sock_diag data for {RECV_TIMEOUT_SECS}s; \
         the dump was abandoned (is the system overloaded?)"
    )]
    Timeout { family: &'static str },
    #[error("the kernel rejected the {family} TCP sock_diag dump: {source}{}{hint}",
        ext_ack.as_deref().map(|m| format!(" (kernel says: {m})")).unwrap_or_default())]
    Kernel {
        family: &'static str,
        #[source]
        source: io::Error,
        ext_ack: Option<String>,
        hint: &'static str,
    },
    #[error(
        "a {family} sock_diag datagram of {len} bytes did not fit the receive buffer; \
         this is a bug in graceful's sock_diag client"
    )]
    Truncated { family: &'static str, len: usize },
    #[error("the kernel reported lost {family} sock_diag data (NLMSG_OVERRUN); retry the dump")]
    Overrun { family: &'static str },
    #[error(
        "malformed {family} sock_diag reply: {detail}; \
         this kernel speaks a sock_diag dialect graceful does not understand"
    )]
    Malformed { family: &'static str, detail: String },
}
