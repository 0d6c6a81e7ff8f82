//! graceful's kernel programs.
//!
//! - `sock_ops` (sockops, at the cgroup v2 root) counts every TCP
//!   connection made after it was attached: each cgroup's live inbound,
//!   outbound and listener counts (see `sockops.rs`).
//! - `sock_set_state` (tp_btf/inet_sock_set_state) counts the sockets that
//!   carry our storage: those adopted at the first start, and those an
//!   earlier agent's design tracked, until they end; with
//!   `--counting tracepoint`, every socket, as that design did.
//!   `sock_state_twin` is the same program attached again for that design,
//!   for the changes the kernel skips for the first (see `state.rs`).
//! - `sock_destroyed` (tp_btf/tcp_destroy_sock) uncounts such a socket
//!   whose last state change both copies missed.
//! - `adopt_tcp` (iter/tcp) adopts sockets that existed before the agent
//!   started, from the owners the agent found with sock_diag.
//! - `inbound_rx` (cgroup_skb/ingress) sees inbound payload of pods that
//!   drain with the `quiet` policy.
//! - `cgroup_populated` (tp_btf/cgroup_notify_populated) reports the exit
//!   of containers that a drain outlives (`--after-containers`).
//! - `floor_*` do nothing: the benches' measure of what attaching any
//!   program costs (see `floor.rs`); `floor_lookup_sock_ops` does all of
//!   `sock_ops` but its adds (see `sockops.rs`).
#![no_std]
#![no_main]
// Atomic adds: the BPF target offers no atomic types with fetch_add.
#![allow(internal_features)]
#![feature(core_intrinsics)]

mod adopt;
mod cgroup;
mod counters;
mod destroy;
mod exits;
mod filter;
mod floor;
mod ingress;
mod kmem;
mod maps;
mod sock;
mod sockops;
mod state;

#[cfg(not(test))]
#[panic_handler]
fn panic(_info: &core::panic::PanicInfo) -> ! {
    loop {}
}

#[unsafe(link_section = "license")]
#[unsafe(no_mangle)]
static LICENSE: [u8; 4] = *b"GPL\0";
