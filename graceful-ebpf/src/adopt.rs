//! Adoption of sockets that existed before the agent attached.
//!
//! The agent dumps every TCP socket with sock_diag (which reports each
//! socket's cgroup and cookie), decides listener/inbound/outbound, and puts
//! cookie → owner into `GRACEFUL_ADOPT`. Then it runs this iterator in each
//! network namespace. The iterator holds each socket's lock while it runs,
//! so the state it reads can't change under it, and any later change goes
//! through `sock_set_state`, which sees the storage set here.

use core::ffi::c_void;

use aya_ebpf::helpers::generated::{bpf_get_socket_cookie, bpf_skc_to_tcp_sock};
use graceful_common::{role, stat, tcp};

use crate::{
    counters,
    maps::{bump, ADOPT},
    sock,
};

/// `struct bpf_iter__tcp`: the iterator's context.
#[repr(C)]
pub struct IterTcp {
    meta: *mut c_void,
    sk_common: *mut c_void,
    uid: u32,
}

#[unsafe(link_section = "iter/tcp")]
#[unsafe(no_mangle)]
pub extern "C" fn adopt_tcp(ctx: *mut IterTcp) -> i32 {
    let skc = unsafe { (*ctx).sk_common };
    if skc.is_null() {
        return 0;
    }
    // Full TCP sockets only: request and time-wait minisocks are not live
    // and carry no storage.
    let tp = unsafe { bpf_skc_to_tcp_sock(skc) };
    if tp.is_null() {
        return 0;
    }
    let sk: *mut c_void = tp.cast();
    let cookie = unsafe { bpf_get_socket_cookie(skc) };
    let Some(entry) = (unsafe { ADOPT.get(cookie) }) else {
        return 0;
    };
    // Storage present: the tracepoint has seen this socket start, or an
    // earlier pass adopted it. Either way it is already right.
    if sock::owner(sk).is_some() {
        return 0;
    }
    let Some(state) = sock::state(sk) else {
        return 0;
    };
    let Some(o) = sock::owner_or_create(sk) else {
        bump(stat::STORAGE_FAILED);
        return 0;
    };
    o.cgroup_id = entry.cgroup_id;
    o.role = entry.role;
    o.counted = 0;
    if entry.role == role::LISTENER {
        if state == tcp::LISTEN {
            o.counted = 1;
            counters::listener(o.cgroup_id, true);
        }
    } else if tcp::is_live(state) {
        o.counted = 1;
        counters::open(o.cgroup_id, o.role);
    }
    bump(stat::ADOPTED);
    0
}
