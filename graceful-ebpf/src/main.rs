//! graceful's kernel programs.
//!
//! - `sock_set_state` (tp_btf/inet_sock_set_state) follows every TCP state
//!   change and keeps each cgroup's live inbound/outbound/listener counts.
//! - `adopt_tcp` (iter/tcp) adopts sockets that existed before the agent
//!   started, from the owners the agent found with sock_diag.
#![no_std]
#![no_main]
// Atomic adds: the BPF target offers no atomic types with fetch_add.
#![allow(internal_features)]
#![feature(core_intrinsics)]

mod adopt;
mod counters;
mod ingress;
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
