//! graceful's kernel programs.
//!
//! - `sock_set_state` (tp_btf/inet_sock_set_state) follows every TCP state
//!   change and keeps each cgroup's live inbound/outbound/listener counts.
//!   `sock_state_twin` is the same program attached again, for the changes
//!   the kernel skips for the first (see `state.rs`).
//! - `sock_destroyed` (tp_btf/tcp_destroy_sock) uncounts a connection whose
//!   last state change both copies missed.
//! - `adopt_tcp` (iter/tcp) adopts sockets that existed before the agent
//!   started, from the owners the agent found with sock_diag.
//! - `inbound_rx` (cgroup_skb/ingress) sees inbound payload of pods that
//!   drain with the `quiet` policy.
//! - `cgroup_populated` (tp_btf/cgroup_notify_populated) reports the exit
//!   of containers that a drain outlives (`--after-containers`).
#![no_std]
#![no_main]
// Atomic adds: the BPF target offers no atomic types with fetch_add.
#![allow(internal_features)]
#![feature(core_intrinsics)]

mod adopt;
mod counters;
mod destroy;
mod exits;
mod ingress;
mod kmem;
mod maps;
mod sock;
mod state;

#[cfg(not(test))]
#[panic_handler]
fn panic(_info: &core::panic::PanicInfo) -> ! {
    loop {}
}

#[unsafe(link_section = "license")]
#[unsafe(no_mangle)]
static LICENSE: [u8; 4] = *b"GPL\0";
