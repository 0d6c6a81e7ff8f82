//! Adoption of sockets that existed before the agent attached.
//!
//! The agent dumps every TCP socket with sock_diag (which reports each
//! socket's cgroup and cookie), decides listener/inbound/outbound, and puts
//! cookie → owner into `GRACEFUL_ADOPT`. Then it runs this iterator in each
//! network namespace. The iterator holds each socket's lock while it runs,
//! so the state it reads can't change under it, and any later change goes
//! through `sock_set_state`, which sees the storage set here.
//!
//! A socket that already carries storage is checked instead: its counted
//! flag must agree with the state it is in. It disagrees only where both
//! copies of the state program missed a change (see `state.rs`), most
//! often a connection whose first live change was missed and which is
//! therefore live but uncounted. The pass settles it. The agent runs it at
//! start and then every `--repair-interval` with nothing offered to adopt,
//! so it repairs what the backstops could not catch.

use core::ffi::c_void;

use aya_ebpf::helpers::generated::{bpf_get_socket_cookie, bpf_seq_write, bpf_skc_to_tcp_sock};
use graceful_common::{role, stat, tcp, SockOwner};

use crate::{
    counters,
    maps::{bump, ADOPT},
    sock, state,
};

/// `struct bpf_iter_meta`: the start of it.
#[repr(C)]
pub struct IterMeta {
    seq: *mut c_void,
}

/// `struct bpf_iter__tcp`: the iterator's context.
#[repr(C)]
pub struct IterTcp {
    meta: *mut IterMeta,
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
    let Some(state) = sock::state(sk) else {
        return 0;
    };
    // Storage present: the tracepoint has seen this socket start, or an
    // earlier pass adopted it. Its counts only need checking.
    if let Some(o) = sock::owner(sk) {
        if reconcile(o, state) {
            bump(stat::CAUGHT);
            // One byte of output per repaired socket: the agent counts them.
            let seq = unsafe { (*(*ctx).meta).seq };
            let mark = b'r';
            unsafe { bpf_seq_write(seq.cast(), core::ptr::from_ref(&mark).cast(), 1) };
        }
        return 0;
    }
    let cookie = unsafe { bpf_get_socket_cookie(skc) };
    let Some(entry) = (unsafe { ADOPT.get(cookie) }) else {
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

/// Makes a tracked socket's count agree with its `state`, as its next state
/// change would. Returns whether anything changed.
#[inline(always)]
fn reconcile(o: &mut SockOwner, state: u32) -> bool {
    if o.role != role::LISTENER {
        return state::settle(o, state);
    }
    match state {
        tcp::LISTEN if o.counted == 0 => {
            o.counted = 1;
            counters::listener(o.cgroup_id, true);
            true
        }
        // A closed listener is unhashed, so the iterator does not reach
        // it; and a closed child still carrying its listener's copy could
        // not be told from one (as in `destroy.rs`): left alone.
        tcp::LISTEN | tcp::CLOSE => false,
        // A child still carrying its listener's copy: its clone and every
        // change since were missed. From here on it is an inbound
        // connection, as `state.rs` makes it on its next change.
        _ => {
            o.role = role::INBOUND;
            o.counted = 0;
            state::settle(o, state);
            true
        }
    }
}
