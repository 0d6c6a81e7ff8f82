//! Handover: a running agent gives a new one on the same node everything
//! its pods' hooks depend on, and closes nothing. A rolling update of the
//! DaemonSet (surge: the new pod starts beside the old) and a restart of
//! the agent beside the old process both take this path.
//!
//! What is carried, each with its descriptors (see [`wire`]):
//! - the gate's listening socket, with the connections queued in it;
//! - each pod's httpGet listener, with its network namespace;
//! - each held hook's connection (exec and httpGet) and what its drain
//!   was asked: the request, the caller, its original start; and what its
//!   report has so far (the count at its start, its peak, its timeline),
//!   which the drain's points keep up to date in the registry ([`held`]).
//!
//! How (one taker at a time, over a unix SOCK_SEQPACKET socket in the gate
//! directory's `.handover/`, see [`fds`]):
//! 1. the new agent ([`take`]) finds the pins held, connects, and proves
//!    it holds this node's pins ([`peer`]);
//! 2. the old agent ([`give`]) stops accepting, waits for accepted
//!    connections to become held hooks, freezes every answer ([`held`]),
//!    and sends everything;
//! 3. the new agent checks it all and says whether it took it: if so, the
//!    old agent retires ([`retire`]: it execs into a process that holds
//!    nothing, so its locks and descriptors go at once and none of its
//!    drains cleans up); if not, it thaws and serves on;
//! 4. the new agent takes the node's claim, attaches, and serves: the
//!    handed-over listeners, and each held hook from its original start,
//!    answered once (the gate's [`crate::serve::gate::exec_resume`], the httpGet
//!    gate's [`crate::serve::httpgate::http_resume`]).
//!
//! The pinned programs count throughout; the counts need no handing over.
//! A hook is answered by exactly one agent: by the old one before the
//! freeze, or by the new one after it. What is not carried: connections
//! still sending their request at the pause (their `graceful-wait`
//! reconnects) and the local API's connections.
//!
//! Releases: the frames carry a format version, and each side reads the
//! formats before its own (see [`wire`]), so an upgrade and a rollback
//! both hand over. A taker that cannot read what it is offered refuses in
//! one line, says so in an Event on its own pod once the API is reached,
//! and waits for the node as before handovers.

pub mod fds;
pub mod give;
pub mod held;
pub mod peer;
pub mod retire;
pub mod take;
pub mod wire;
