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

use aya_ebpf::helpers::generated::{
    bpf_get_socket_cookie, bpf_seq_write, bpf_setsockopt, bpf_skc_to_tcp_sock,
};
use graceful_common::{control, role, stat, tcp, watch, SockOwner};

use crate::{
    counters, filter,
    maps::{bump, control, ADOPT},
    sock, sockops, state,
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
    let seq = unsafe { (*(*ctx).meta).seq };
    // Flagged: the sock_ops program counts it, exactly; storage left on it
    // is stale. Only a drain's exclusions may need to look at it, and,
    // with maps newer than its flag, its count (`control::RECOUNT`).
    let flags = sock::ops_flags(sk);
    if !state::tracks_new() && flags & sockops::COUNTED != 0 {
        if sock::owner(sk).is_some() {
            sock::forget(sk);
        }
        if control(control::RECOUNT) {
            if !sock::recounted(sk) && recount(sk, state, flags) {
                mark(seq, b'c');
            }
        } else {
            sock::unmark_recounted(sk);
        }
        if flags & sockops::INBOUND != 0 && tcp::is_live(state) {
            reclassify_counted(sk);
        }
        return 0;
    }
    // Storage present: the state programs count this socket (it was
    // adopted, or started under the tracepoint design). Its counts only
    // need checking.
    if let Some(o) = sock::owner(sk) {
        let repaired = reconcile(o, state, sk);
        reclassify(o, sk);
        if repaired {
            bump(stat::CAUGHT);
        }
        let kept = if hand_over(sk, state, o.role) {
            false
        } else {
            if !state::tracks_new() && o.role == role::LISTENER {
                move_listener(sk);
            }
            true
        };
        // One byte of output per socket seen with storage: `s`, or `r` if
        // it was repaired; `h` for one repaired and then handed over to
        // the sock_ops program (and `c` above, for a flagged socket
        // recounted). The agent counts them.
        match (repaired, kept) {
            (false, true) => mark(seq, b's'),
            (true, true) => mark(seq, b'r'),
            (true, false) => mark(seq, b'h'),
            (false, false) => {}
        }
        return 0;
    }
    let cookie = unsafe { bpf_get_socket_cookie(skc) };
    let Some(entry) = (unsafe { ADOPT.get(cookie) }) else {
        return 0;
    };
    if hand_over(sk, state, entry.role) {
        bump(stat::ADOPTED);
        return 0;
    }
    // The tracepoint design's storage, or a note the tracepoint programs
    // count by while the sock_ops program counts everything new.
    let o = if state::tracks_new() {
        sock::owner_or_create(sk)
    } else {
        sock::note_or_create(sk)
    };
    let Some(o) = o else {
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
        o.ignored = counters::open_tracked(o, sk);
    }
    bump(stat::ADOPTED);
    mark(seq, b's');
    0
}

/// `TCP_BPF_SOCK_OPS_CB_FLAGS` (include/uapi/linux/bpf.h): a socket's
/// sock_ops flags, set through `bpf_setsockopt`. Kernels before it (6.12)
/// refuse it with EINVAL, and the socket gets storage instead.
const TCP_BPF_SOCK_OPS_CB_FLAGS: i32 = 1008;
const SOL_TCP: i32 = 6;

/// Hands a socket of `role_` in `state` that the sock_ops program did not
/// see start over to it, where this kernel lets the iterator set its
/// flags: flagged as that program flags its own, and counted (or its
/// storage's count moved) as that program counts. Then it needs no
/// storage, and no state program. Returns whether it did.
#[inline(always)]
fn hand_over(sk: *mut c_void, state: u32, role_: u8) -> bool {
    if state::tracks_new() {
        return false;
    }
    let Some(owner) = sock::cgroup_id(sk) else {
        return false;
    };
    let mut flags = (sock::ops_flags(sk) | sockops::COUNTED) as i32;
    if role_ == role::OUTBOUND {
        flags &= !(sockops::INBOUND as i32);
    } else {
        flags |= sockops::INBOUND as i32;
    }
    let set = unsafe {
        bpf_setsockopt(
            sk,
            SOL_TCP,
            TCP_BPF_SOCK_OPS_CB_FLAGS,
            core::ptr::from_mut(&mut flags).cast(),
            4,
        )
    };
    if set != 0 {
        return false;
    }
    if !sockops::take_over(sk, state, owner, role_) {
        if role_ == role::LISTENER {
            if state == tcp::LISTEN {
                counters::listener(owner, true);
            }
        } else if tcp::is_live(state) {
            sockops::open(owner, role_, sk);
        }
    }
    sockops::mark_recounted(sk);
    true
}

/// Counts a socket that an earlier install's sock_ops program flagged and
/// these maps never counted (`control::RECOUNT`), as its state stands, the
/// way that program counts: a listener in LISTEN, a connection in a live
/// state with the role its flags say. Returns whether it counted it.
#[inline(always)]
fn recount(sk: *mut c_void, state: u32, flags: u32) -> bool {
    let Some(owner) = sock::cgroup_id(sk) else {
        return false;
    };
    if state == tcp::LISTEN {
        counters::listener(owner, true);
    } else if tcp::is_live(state) {
        let role_ = if flags & sockops::INBOUND != 0 {
            role::INBOUND
        } else {
            role::OUTBOUND
        };
        sockops::open(owner, role_, sk);
    } else {
        return false;
    }
    sockops::mark_recounted(sk);
    true
}

#[inline(always)]
fn mark(seq: *mut c_void, byte: u8) {
    unsafe { bpf_seq_write(seq.cast(), core::ptr::from_ref(&byte).cast(), 1) };
}

/// Moves a listener's storage from the tracepoint design's map, which its
/// children clone (and then carry, at a cost, until the sock_ops program
/// takes them over), to a note, which they don't. The iterator holds the
/// listener's lock; a child cloned meanwhile is taken over like any other.
#[inline(always)]
fn move_listener(sk: *mut c_void) {
    let Some(old) = sock::design_storage(sk) else {
        return;
    };
    let copy = *old;
    let Some(n) = sock::note_or_create(sk) else {
        bump(stat::STORAGE_FAILED);
        return;
    };
    *n = copy;
    sock::forget_design_storage(sk);
}

/// Makes a tracked socket's count agree with its `state`, as its next state
/// change would. Returns whether anything changed.
#[inline(always)]
fn reconcile(o: &mut SockOwner, state: u32, sk: *const c_void) -> bool {
    if o.role != role::LISTENER {
        return state::settle(o, state, sk);
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
            o.ignored = 0;
            o.ignored_generation = 0;
            state::settle(o, state, sk);
            true
        }
    }
}

/// Matches a live inbound connection of a cgroup that drains with
/// exclusions against them, as its opening would have if the exclusions
/// had been there: the agent runs this pass over the pod's sockets when
/// the drain starts. The iterator holds the socket's lock, so no state
/// change can come between the match and the count. Not a repair.
#[inline(always)]
fn reclassify(o: &mut SockOwner, sk: *const c_void) {
    if o.role != role::INBOUND || o.counted == 0 {
        return;
    }
    if counters::watched(o.cgroup_id) & watch::FILTER == 0 {
        return;
    }
    let r = filter::rule(o.cgroup_id, sk);
    retally(o.cgroup_id, o, r);
}

/// Moves a live inbound connection of `owner` to the side rule `r` (0:
/// none) puts it on, and tallies it under the drain's filter; `mark` is
/// where the connection keeps its rule.
#[inline(always)]
fn retally(owner: u64, mark: &mut SockOwner, r: u8) {
    match (mark.ignored, r) {
        (0, 0) => {}
        (0, _) => counters::ignored(owner, true),
        (_, 0) => counters::ignored(owner, false),
        _ => {}
    }
    // Left out under an earlier drain's filter: this one's tally too.
    filter::tally(owner, r, &mut mark.ignored_generation);
    mark.ignored = r;
}

/// [`reclassify`] for a live inbound connection the sock_ops program
/// counts: its mark is a note, made only for a connection left out.
#[inline(always)]
fn reclassify_counted(sk: *mut c_void) {
    let Some(owner) = sock::cgroup_id(sk) else {
        return;
    };
    if counters::watched(owner) & watch::FILTER == 0 {
        return;
    }
    let r = filter::rule(owner, sk);
    let note = if r != 0 {
        sock::note_or_create(sk)
    } else {
        sock::note(sk)
    };
    let Some(n) = note else {
        if r != 0 {
            bump(stat::STORAGE_FAILED);
        }
        return;
    };
    retally(owner, n, r);
}
