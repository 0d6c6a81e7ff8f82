//! Types and names shared by the kernel programs (`graceful-ebpf`) and the agent.
//!
//! Everything here crosses the user/kernel boundary through BPF maps, so each
//! struct is `#[repr(C)]`, made of fixed-width integers with explicit padding.
//! Changing any of them changes the pinned map layout: bump [`LAYOUT_VERSION`].
//!
//! With the `std` feature (implied by `user`) it also holds what user space
//! shares beyond those types: [`clock`], the programs' clock, and
//! [`mountinfo`], the one parser of `/proc/*/mountinfo`.
#![cfg_attr(not(feature = "std"), no_std)]

#[cfg(feature = "std")]
pub mod clock;
#[cfg(feature = "std")]
pub mod mountinfo;

/// Version of the pinned map layout. A running node keeps its pinned maps
/// across agent upgrades; an agent finding a different version refuses to
/// read them rather than misread them.
pub const LAYOUT_VERSION: u32 = 1;
/// Magic in the meta map, so a stray map pinned at our path is not mistaken for ours.
pub const LAYOUT_MAGIC: u32 = 0x6772_6331; // "grc1"

/// Map names, as they appear in the object file and under the pin directory.
pub mod names {
    pub const COUNTERS: &str = "GRACEFUL_COUNTERS";
    pub const SOCKS: &str = "GRACEFUL_SOCKS";
    pub const ADOPT: &str = "GRACEFUL_ADOPT";
    pub const STATS: &str = "GRACEFUL_STATS";
    pub const META: &str = "GRACEFUL_META";
    pub const WATCH: &str = "GRACEFUL_WATCH";
    pub const EVENTS: &str = "GRACEFUL_EVENTS";
    /// Added after layout 1 was released, so an agent creates it beside
    /// older pins instead of calling them incompatible.
    pub const FILTERS: &str = "GRACEFUL_FILTERS";
    /// Added after layout 1 was released, likewise: notes on sockets the
    /// sock_ops program did not see start (see graceful-ebpf's `maps.rs`).
    pub const NOTES: &str = "GRACEFUL_NOTES";
    /// Added after layout 1 was released, likewise: what the agent tells
    /// the programs (see [`control`](crate::control)).
    pub const CONTROL: &str = "GRACEFUL_CONTROL";
    /// Program names (the Rust function names in graceful-ebpf).
    pub const PROG_STATE: &str = "sock_set_state";
    pub const PROG_STATE_TWIN: &str = "sock_state_twin";
    pub const PROG_SOCK_OPS: &str = "sock_ops";
    /// Programs that do nothing, for the benches' floors.
    pub const PROG_FLOOR_SOCK_OPS: &str = "floor_sock_ops";
    pub const PROG_FLOOR_STATE: &str = "floor_state";
    pub const PROG_FLOOR_DESTROYED: &str = "floor_destroyed";
    /// sock_ops's dispatch, flags and lookups without its adds.
    pub const PROG_FLOOR_LOOKUP: &str = "floor_lookup_sock_ops";
    pub const PROG_DESTROYED: &str = "sock_destroyed";
    pub const PROG_ADOPT: &str = "adopt_tcp";
    pub const PROG_INGRESS: &str = "inbound_rx";
    pub const PROG_POPULATED: &str = "cgroup_populated";
    /// Global set by the loader: byte offset of `skc_state` in `struct sock_common`, from BTF.
    pub const GLOBAL_SKC_STATE_OFFSET: &str = "SKC_STATE_OFFSET";
    /// Global set by the loader: byte offset of `sk_protocol` in `struct sock`, from BTF.
    pub const GLOBAL_SK_PROTOCOL_OFFSET: &str = "SK_PROTOCOL_OFFSET";
    /// Global set by the loader: byte offset of the cgroup pointer in
    /// `struct sock` (`sk_cgrp_data.cgroup`, or `.val` on older kernels).
    pub const GLOBAL_SK_CGROUP_OFFSET: &str = "SK_CGROUP_OFFSET";
    /// Global set by the loader: byte offset of `bpf_sock_ops_cb_flags` in
    /// `struct tcp_sock`.
    pub const GLOBAL_TCP_CB_FLAGS_OFFSET: &str = "TCP_CB_FLAGS_OFFSET";
    /// Global set by the loader: 1 when the cgroup pointer in `struct
    /// sock` is a typed field (`sk_cgrp_data.cgroup`).
    pub const GLOBAL_SK_CGROUP_TYPED: &str = "SK_CGROUP_TYPED";
    /// Global set by the loader: byte offset of `sk_bpf_storage` in `struct sock`.
    pub const GLOBAL_SK_STORAGE_OFFSET: &str = "SK_STORAGE_OFFSET";
    /// Global set by the loader: 1 when the state program counts every
    /// socket (the tracepoint design), 0 when the sock_ops program does.
    pub const GLOBAL_TRACK_NEW: &str = "TRACK_NEW";
    /// Globals set by the loader for the exclusions, from BTF: `skc_family`,
    /// `skc_num` (the local port), `skc_daddr` and `skc_v6_daddr` (the
    /// peer) in `struct sock_common`.
    pub const GLOBAL_SKC_FAMILY_OFFSET: &str = "SKC_FAMILY_OFFSET";
    pub const GLOBAL_SKC_NUM_OFFSET: &str = "SKC_NUM_OFFSET";
    pub const GLOBAL_SKC_DADDR_OFFSET: &str = "SKC_DADDR_OFFSET";
    pub const GLOBAL_SKC_V6_DADDR_OFFSET: &str = "SKC_V6_DADDR_OFFSET";
    /// Globals set by the loader for `cgroup_populated`, from BTF: `kn` and
    /// `root` in `struct cgroup`, `id` in `struct kernfs_node`,
    /// `hierarchy_id` in `struct cgroup_root`.
    pub const GLOBAL_CGROUP_KN_OFFSET: &str = "CGROUP_KN_OFFSET";
    pub const GLOBAL_CGROUP_ROOT_OFFSET: &str = "CGROUP_ROOT_OFFSET";
    pub const GLOBAL_KERNFS_NODE_ID_OFFSET: &str = "KERNFS_NODE_ID_OFFSET";
    pub const GLOBAL_ROOT_HIERARCHY_ID_OFFSET: &str = "ROOT_HIERARCHY_ID_OFFSET";
}

/// Capacity of the per-cgroup counter map: every container of every pod on a
/// node plus system services, with a wide margin.
pub const MAX_CGROUPS: u32 = 16384;
/// Capacity of the adoption map (one entry per pre-existing socket, filled
/// and emptied once at start-up).
pub const MAX_ADOPT: u32 = 1 << 20;

/// TCP states as the kernel numbers them (include/net/tcp_states.h).
pub mod tcp {
    pub const ESTABLISHED: u32 = 1;
    pub const SYN_SENT: u32 = 2;
    pub const SYN_RECV: u32 = 3;
    pub const FIN_WAIT1: u32 = 4;
    pub const FIN_WAIT2: u32 = 5;
    pub const TIME_WAIT: u32 = 6;
    pub const CLOSE: u32 = 7;
    pub const CLOSE_WAIT: u32 = 8;
    pub const LAST_ACK: u32 = 9;
    pub const LISTEN: u32 = 10;
    pub const CLOSING: u32 = 11;
    pub const NEW_SYN_RECV: u32 = 12;

    /// Live: the local application can still write. A connection counts
    /// while in one of these states, and stops counting when it leaves them.
    #[inline(always)]
    pub const fn is_live(state: u32) -> bool {
        state == ESTABLISHED || state == CLOSE_WAIT
    }
}

/// What a socket is to the cgroup that owns it.
pub mod role {
    /// A listening socket. Its clones (accepted connections) inherit this
    /// value through `BPF_F_CLONE`, and become [`INBOUND`] on first sight.
    pub const LISTENER: u8 = 1;
    pub const INBOUND: u8 = 2;
    pub const OUTBOUND: u8 = 3;
}

/// Per-socket state, kept in socket-local storage (`BPF_MAP_TYPE_SK_STORAGE`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SockOwner {
    /// cgroup v2 id of the process that called listen() or connect().
    pub cgroup_id: u64,
    /// One of [`role`].
    pub role: u8,
    /// 1 while this socket is included in its owner's live count (or
    /// listener count). Makes counting idempotent: a socket is counted once
    /// and uncounted once, whatever path it takes.
    pub counted: u8,
    /// For a counted inbound connection that a draining cgroup's
    /// exclusions leave out: 1 + the index of the rule that matched, and
    /// the connection is in its owner's `inbound_ignored_live`. 0 otherwise.
    /// Set and cleared under the same rules as `counted`, so it too is
    /// idempotent. (Was padding in layout 1, always zero.)
    pub ignored: u8,
    /// The [`Filter::generation`] whose tally counts this connection, so a
    /// connection is tallied once per drain however often it is matched.
    pub ignored_generation: u8,
    /// On a note (role 0) while `control::RECOUNT` is set: 1 once this
    /// install counts the socket, which the sock_ops program flagged
    /// (see `control::RECOUNT`). (Was padding in layout 1, always zero.)
    pub recounted: u8,
    pub _pad: [u8; 3],
}

/// Per-cgroup figures. All times are CLOCK_MONOTONIC nanoseconds (`bpf_ktime_get_ns`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CgroupCounters {
    pub inbound_live: u64,
    pub outbound_live: u64,
    pub listeners: u64,
    pub inbound_total: u64,
    pub outbound_total: u64,
    pub inbound_closed_total: u64,
    pub last_inbound_open_ns: u64,
    pub last_inbound_close_ns: u64,
    /// Inbound payload seen while the cgroup drains (cgroup_skb/ingress).
    pub inbound_rx_bytes: u64,
    pub last_inbound_rx_ns: u64,
    /// Of `inbound_live`, those the cgroup's exclusions leave out (see
    /// [`Filter`]). Was reserved in layout 1, always zero.
    pub inbound_ignored_live: u64,
    /// Room for figures to come without a layout change. Always zero.
    pub _reserved: [u64; 3],
}

/// Field offsets for atomic updates from the kernel side, in u64 units.
pub mod field {
    pub const INBOUND_LIVE: usize = 0;
    pub const OUTBOUND_LIVE: usize = 1;
    pub const LISTENERS: usize = 2;
    pub const INBOUND_TOTAL: usize = 3;
    pub const OUTBOUND_TOTAL: usize = 4;
    pub const INBOUND_CLOSED_TOTAL: usize = 5;
    pub const LAST_INBOUND_OPEN_NS: usize = 6;
    pub const LAST_INBOUND_CLOSE_NS: usize = 7;
    pub const INBOUND_RX_BYTES: usize = 8;
    pub const LAST_INBOUND_RX_NS: usize = 9;
    pub const INBOUND_IGNORED_LIVE: usize = 10;
}

/// What userspace tells the adoption iterator about a pre-existing socket,
/// keyed by socket cookie.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AdoptEntry {
    pub cgroup_id: u64,
    pub role: u8,
    pub _pad: [u8; 7],
}

/// Cgroups the agent watches (terminating or draining pods): their inbound
/// changes are sent on the event ring as they happen.
pub const MAX_WATCH: u32 = 4096;
/// Size of the event ring in bytes (a power of two, a multiple of the page size).
pub const EVENTS_BYTES: u32 = 256 * 1024;

/// Bits of the one-entry control map, which the agent writes and the
/// programs read.
pub mod control {
    /// Sockets may carry storage that the state programs count (adopted
    /// ones, or those an agent of the tracepoint design started to track),
    /// and those programs are attached. The sock_ops program then takes
    /// such a socket over when it sees it established (or listening), and
    /// does no storage lookup at all while the bit is clear.
    pub const STORAGE: u32 = 1;
    /// The watch map has entries (a drain, a terminating pod): the
    /// programs look a cgroup up there only while this is set, so a node
    /// with nothing draining pays no lookup per connection for it.
    pub const WATCHING: u32 = 2;
    /// The maps are new (a first install, a reinstall after `graceful
    /// uninstall`, pins lost or replaced) while sockets that an earlier
    /// install's sock_ops program flagged may still live: flagged, so no
    /// program of ours counts them from the start, and their counts went
    /// with the earlier maps. While the bit is set, a flagged socket whose
    /// note does not say `recounted` has no count in these maps; whichever
    /// sees it first, the adoption iterator or its next state change,
    /// counts it as its state stands and marks it, and every count this
    /// install makes of a flagged socket marks it too. The agent clears the
    /// bit after a pass over every network namespace.
    pub const RECOUNT: u32 = 4;
}

/// Watch flags (values of the watch map).
pub mod watch {
    /// Send inbound opens and closes.
    pub const CONNECTIONS: u32 = 1;
    /// Also send inbound payload (`cgroup_skb/ingress`), at most one event
    /// per `RX_EVENT_GAP_NS` per cgroup.
    pub const PAYLOAD: u32 = 2;
    pub const RX_EVENT_GAP_NS: u64 = 1_000_000;
    /// Send the moment the cgroup's last process exits (`--after-containers`).
    pub const EXITS: u32 = 4;
    /// The cgroup has exclusions in the filter map: classify its inbound
    /// connections as they open.
    pub const FILTER: u32 = 8;
}

/// Room in one cgroup's [`Filter`]. `node` alone may take many nets (one
/// per address of the node).
pub const MAX_IGNORE_PORTS: usize = 8;
pub const MAX_IGNORE_NETS: usize = 32;
/// Rules (one per port, one per peer written) a filter can count apart.
pub const MAX_IGNORE_RULES: usize = 16;
/// Cgroups with exclusions at once: draining ones only.
pub const MAX_FILTERS: u32 = 1024;

/// A peer network an exclusion leaves out, as 128 bits: IPv4 as mapped
/// IPv6 (`::ffff:a.b.c.d`), which is how the programs see IPv4 peers too.
/// The two words are the address's 16 bytes in memory order, read as
/// native integers, so matching needs no byte swapping on either side.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IgnoreNet {
    pub addr: [u64; 2],
    pub mask: [u64; 2],
    /// Index of the rule it came from.
    pub rule: u32,
    pub _pad: u32,
}

/// What a draining cgroup's inbound connections are matched against:
/// connections to one of `ports` (local port, host order; 0 is unused), or
/// from one of `nets`, are left out of its live count. The programs add
/// each connection they leave out to `ignored` at its rule's index.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Filter {
    pub ports: [u16; MAX_IGNORE_PORTS],
    pub port_rules: [u8; MAX_IGNORE_PORTS],
    pub nets_len: u32,
    /// Set by the agent anew each time it sets a filter on a cgroup (never
    /// 0): a connection left out under an earlier filter is tallied again
    /// under this one.
    pub generation: u8,
    pub _pad: [u8; 3],
    pub nets: [IgnoreNet; MAX_IGNORE_NETS],
    pub ignored: [u64; MAX_IGNORE_RULES],
}

impl Default for Filter {
    fn default() -> Self {
        Filter {
            ports: [0; MAX_IGNORE_PORTS],
            port_rules: [0; MAX_IGNORE_PORTS],
            nets_len: 0,
            generation: 0,
            _pad: [0; 3],
            nets: [IgnoreNet::default(); MAX_IGNORE_NETS],
            ignored: [0; MAX_IGNORE_RULES],
        }
    }
}

/// What happened, in an [`Event`].
pub mod event {
    pub const INBOUND_OPEN: u32 = 1;
    pub const INBOUND_CLOSE: u32 = 2;
    pub const INBOUND_PAYLOAD: u32 = 3;
    /// The cgroup's last process exited (`populated 1` → `0`).
    pub const EMPTIED: u32 = 4;
}

/// One change of a watched cgroup, on the event ring. A wake-up with
/// enough to act on: the counters map stays the source of truth.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Event {
    pub cgroup_id: u64,
    pub ts_ns: u64,
    /// The cgroup's inbound_live right after the change.
    pub inbound_live: u64,
    /// One of [`event`].
    pub kind: u32,
    pub _pad: u32,
}

/// The agent's own figures, per CPU (`BPF_MAP_TYPE_PERCPU_ARRAY`, one index each).
pub mod stat {
    /// State changes handled.
    pub const EVENTS: u32 = 0;
    /// State changes of sockets we never saw start (neither created after
    /// attach nor adopted): ignored.
    pub const UNTRACKED: u32 = 1;
    /// Socket storage could not be allocated.
    pub const STORAGE_FAILED: u32 = 2;
    /// The counter map was full.
    pub const COUNTERS_FULL: u32 = 3;
    /// Sockets adopted by the start-up iterator.
    pub const ADOPTED: u32 = 4;
    /// Transitions that would have made a live count negative (never expected).
    pub const UNDERFLOW: u32 = 5;
    /// Events dropped because the ring was full.
    pub const EVENTS_LOST: u32 = 6;
    /// State changes the state program missed (the kernel skips a tracing
    /// program that is already running on the CPU) and its backstops
    /// handled: its second copy, the socket's destruction, or a repair pass
    /// of the agent (at its start, periodic, or before a drain).
    pub const CAUGHT: u32 = 7;
    pub const COUNT: u32 = 8;
}

/// Contents of the one-entry meta map pinned beside the others.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Meta {
    pub magic: u32,
    pub layout_version: u32,
    pub counters_size: u32,
    pub owner_size: u32,
    /// CLOCK_MONOTONIC ns when the programs were first attached on this boot.
    pub attached_ns: u64,
}

#[cfg(feature = "user")]
mod pod_impls {
    use super::*;
    unsafe impl aya::Pod for SockOwner {}
    unsafe impl aya::Pod for CgroupCounters {}
    unsafe impl aya::Pod for AdoptEntry {}
    unsafe impl aya::Pod for Meta {}
    unsafe impl aya::Pod for Event {}
    unsafe impl aya::Pod for Filter {}
}
