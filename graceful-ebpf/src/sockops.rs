//! `sockops` at the cgroup v2 root: how every TCP connection made after it
//! was attached is counted.
//!
//! The kernel runs the root's sock_ops programs for every full TCP socket
//! of every cgroup, and marks no socket for it: a socket's own
//! `bpf_sock_ops_cb_flags` decide which of its events reach the programs.
//! So the socket itself carries what the count needs, and nothing is
//! allocated per socket:
//! - `STATE_CB_FLAG` set: every later state change of the socket reaches
//!   the program (`BPF_SOCK_OPS_STATE_CB`, from `tcp_set_state`), and is
//!   counted there. Unlike a tracing program, a cgroup program has no
//!   per-CPU recursion guard, so no change is ever skipped.
//! - `RTO_CB_FLAG` set: its role is inbound (accepted by a listener); clear:
//!   outbound. The flag only adds a call on a retransmission timeout, where
//!   the program returns at once.
//! - the owner is the socket's own cgroup (`sk_cgrp_data`), which a child
//!   copies from its listener: read, not stored.
//!
//! Counts move only with the changes themselves: a change into a live
//! state counts the connection, one out of it uncounts it, a listener's
//! close uncounts the listener. So the flags are set before a socket can
//! become live:
//! - `listen()` (`TCP_LISTEN_CB`, in LISTEN): the listener is counted (its
//!   one signal) and flagged inbound, so that every child it clones starts
//!   flagged inbound;
//! - `connect()` (`TCP_CONNECT_CB`, in SYN_SENT): flagged outbound, also a
//!   socket reused after it closed;
//! - a child of a listener that was never flagged
//!   (`PASSIVE_ESTABLISHED_CB`, which comes while it is still in SYN_RECV,
//!   the Fast Open child's too): flagged inbound.
//!
//! Nothing is decided from who set the flags: several programs at the root
//! (two graceful agents in the tests, each with its own maps) all see each
//! change of a flagged socket, and each counts it.
//!
//! Sockets that carry storage of the state programs (adopted ones, or
//! those an agent of the tracepoint design started to track) are counted
//! by those programs. When such a socket is seen connecting, established
//! or listening here, this program takes it over: it takes back the
//! storage's count unless it is already right, deletes the storage, and
//! counts the socket as its own. The two never run at once for one socket
//! (both run under the socket's lock), so the count moves exactly once.
//! The lookups cost nothing once no socket carries storage: the agent then
//! clears `control::STORAGE`.

use core::ffi::c_void;

use aya_ebpf::{
    bindings::{
        BPF_SOCK_OPS_ACTIVE_ESTABLISHED_CB, BPF_SOCK_OPS_PASSIVE_ESTABLISHED_CB, BPF_SOCK_OPS_RTO_CB_FLAG,
        BPF_SOCK_OPS_STATE_CB, BPF_SOCK_OPS_STATE_CB_FLAG, BPF_SOCK_OPS_TCP_CONNECT_CB,
        BPF_SOCK_OPS_TCP_LISTEN_CB,
    },
    helpers::generated::bpf_skc_to_tcp_sock,
    macros::sock_ops,
    programs::SockOpsContext,
};
use graceful_common::{control, role, stat, tcp, watch};

use crate::{
    counters, filter,
    maps::{bump, control},
    sock,
};

/// Counted here.
pub const COUNTED: u32 = BPF_SOCK_OPS_STATE_CB_FLAG;
/// Counted here, inbound.
pub const INBOUND: u32 = BPF_SOCK_OPS_RTO_CB_FLAG;

#[sock_ops]
pub fn sock_ops(ctx: SockOpsContext) -> u32 {
    match ctx.op() {
        BPF_SOCK_OPS_STATE_CB => changed(&ctx, ctx.arg(0), ctx.arg(1)),
        BPF_SOCK_OPS_TCP_CONNECT_CB => connecting(&ctx),
        BPF_SOCK_OPS_PASSIVE_ESTABLISHED_CB => accepted(&ctx),
        BPF_SOCK_OPS_ACTIVE_ESTABLISHED_CB => connected(&ctx),
        BPF_SOCK_OPS_TCP_LISTEN_CB => listening(&ctx),
        _ => {}
    }
    // Let the socket go on as it would without us (1: no verdict).
    1
}

/// The floor under the counts, for `cargo xtask bench designs` only (the
/// agent never loads it): [`sock_ops`]'s dispatch, its flags and its
/// owner lookups, and the counters entry looked up wherever that counts,
/// without the atomic adds. Its cost against [`sock_ops`]'s is the adds'.
#[sock_ops]
pub fn floor_lookup_sock_ops(ctx: SockOpsContext) -> u32 {
    match ctx.op() {
        BPF_SOCK_OPS_STATE_CB => {
            bump(stat::EVENTS);
            let (old, new) = (ctx.arg(0), ctx.arg(1));
            let moved = old == tcp::LISTEN || tcp::is_live(old) != tcp::is_live(new);
            if old != new && moved {
                if let Some((_, owner)) = owned(&ctx) {
                    if ctx.cb_flags() & INBOUND != 0 {
                        let _ = counters::watched(owner);
                    }
                    counters::look(owner);
                }
            }
        }
        BPF_SOCK_OPS_TCP_CONNECT_CB => flag(&ctx, (ctx.cb_flags() | COUNTED) & !INBOUND),
        BPF_SOCK_OPS_PASSIVE_ESTABLISHED_CB if ctx.cb_flags() & COUNTED == 0 => {
            if owned(&ctx).is_some() {
                flag(&ctx, ctx.cb_flags() | COUNTED | INBOUND);
            }
        }
        BPF_SOCK_OPS_TCP_LISTEN_CB => {
            if let Some((_, owner)) = owned(&ctx) {
                flag(&ctx, ctx.cb_flags() | COUNTED | INBOUND);
                counters::look(owner);
            }
        }
        _ => {}
    }
    1
}

/// The socket of a callback, as a pointer the kernel's BTF types (the
/// offset reads need one), or null.
#[inline(always)]
fn socket(ctx: &SockOpsContext) -> *mut c_void {
    let sk = unsafe { (*ctx.ops).__bindgen_anon_2.sk };
    if sk.is_null() {
        return core::ptr::null_mut();
    }
    unsafe { bpf_skc_to_tcp_sock(sk.cast()) }.cast()
}

/// Takes `sk` over from the state programs if it carries their storage
/// (see the module docs), as a socket of `owner` and `role_` in `state`.
/// Returns whether its count stays as it is: already counted for that
/// owner and role. Otherwise the storage's count is taken back (no close,
/// no event a drain would take for one), and the caller counts.
#[inline(always)]
pub fn take_over(sk: *mut c_void, state: u32, owner: u64, role_: u8) -> bool {
    if !control(control::STORAGE) {
        return false;
    }
    let Some(o) = sock::owner(sk) else {
        return false;
    };
    let listening = state == tcp::LISTEN;
    let kept = o.counted != 0
        && o.cgroup_id == owner
        && o.role == role_
        && o.ignored == 0
        && (listening || tcp::is_live(state));
    if o.counted != 0 && !kept {
        match o.role {
            role::LISTENER if listening => counters::listener(o.cgroup_id, false),
            // A child carrying its listener's copy (its clone was missed):
            // the listener's count is not the child's to take.
            role::LISTENER => {}
            // No connection ended: no close, no event.
            r => counters::take_back(o.cgroup_id, r, o.ignored != 0),
        }
    }
    o.counted = 0;
    sock::forget(sk);
    kept
}

/// The callback's socket and its owner, the cgroup it belongs to.
#[inline(always)]
fn owned(ctx: &SockOpsContext) -> Option<(*mut c_void, u64)> {
    let sk = socket(ctx);
    if sk.is_null() {
        return None;
    }
    match sock::cgroup_id(sk) {
        Some(owner) => Some((sk, owner)),
        None => {
            bump(stat::UNTRACKED);
            None
        }
    }
}

#[inline(always)]
fn flag(ctx: &SockOpsContext, flags: u32) {
    // Only fails for a flag this kernel does not know: ours are all old.
    let _ = ctx.set_cb_flags(flags as i32);
}

#[inline(always)]
fn state(ctx: &SockOpsContext) -> u32 {
    unsafe { (*ctx.ops).state }
}

/// `listen()` succeeded: the socket is in LISTEN.
#[inline(always)]
fn listening(ctx: &SockOpsContext) {
    let Some((sk, owner)) = owned(ctx) else {
        return;
    };
    let counted = take_over(sk, tcp::LISTEN, owner, role::LISTENER);
    // Other programs' flags stay; ours say: counted, and the children
    // (which copy the listener's flags) inbound.
    flag(ctx, ctx.cb_flags() | COUNTED | INBOUND);
    if !counted {
        counters::listener(owner, true);
    }
    mark_recounted(sk);
}

/// `connect()`: the socket is in SYN_SENT, and is counted when it
/// becomes established.
#[inline(always)]
fn connecting(ctx: &SockOpsContext) {
    if control(control::STORAGE) {
        // An adopted socket reused: not theirs any more.
        if let Some((sk, owner)) = owned(ctx) {
            take_over(sk, tcp::SYN_SENT, owner, role::OUTBOUND);
        }
    }
    flag(ctx, (ctx.cb_flags() | COUNTED) & !INBOUND);
}

/// A child of a listener, still in SYN_RECV (see the module docs).
#[inline(always)]
fn accepted(ctx: &SockOpsContext) {
    if ctx.cb_flags() & COUNTED != 0 {
        // Flagged from its listener: its change into ESTABLISHED counts it.
        return;
    }
    let Some((sk, owner)) = owned(ctx) else {
        return;
    };
    let now = state(ctx);
    let counted = take_over(sk, now, owner, role::INBOUND);
    flag(ctx, ctx.cb_flags() | COUNTED | INBOUND);
    // Live already: its change came before any flag (not on the kernels
    // graceful runs on, which call this in SYN_RECV).
    let live = tcp::is_live(now);
    if !counted && live {
        open(owner, role::INBOUND, sk);
    }
    if counted || live {
        mark_recounted(sk);
    }
}

/// A `connect()` established. Flagged when it began, and counted by its
/// change into ESTABLISHED; unless the state programs counted it (it began
/// before the sock_ops program was attached): then it is taken over.
#[inline(always)]
fn connected(ctx: &SockOpsContext) {
    if !control(control::STORAGE) {
        return;
    }
    let Some((sk, owner)) = owned(ctx) else {
        return;
    };
    if sock::owner(sk).is_none() {
        return;
    }
    let counted = take_over(sk, tcp::ESTABLISHED, owner, role::OUTBOUND);
    flag(ctx, (ctx.cb_flags() | COUNTED) & !INBOUND);
    if !counted {
        open(owner, role::OUTBOUND, sk);
    }
    mark_recounted(sk);
}

/// A counted socket changes state from `old` to `new`.
#[inline(always)]
fn changed(ctx: &SockOpsContext, old: u32, new: u32) {
    bump(stat::EVENTS);
    if old == new {
        return;
    }
    let listener = old == tcp::LISTEN;
    let (was, is) = (tcp::is_live(old), tcp::is_live(new));
    if !listener && was == is {
        return;
    }
    let Some((sk, owner)) = owned(ctx) else {
        return;
    };
    if listener {
        // A listener only ever leaves LISTEN for CLOSE.
        counters::listener(owner, false);
        return;
    }
    let role_ = if ctx.cb_flags() & INBOUND != 0 {
        role::INBOUND
    } else {
        role::OUTBOUND
    };
    if control(control::RECOUNT) && !sock::recounted(sk) {
        // Flagged by an earlier install, and not yet counted by this one
        // (see `control::RECOUNT`): its count here is 0, so only a change
        // into a live state counts it, as its state now stands.
        if !listener && is {
            open(owner, role_, sk);
            mark_recounted(sk);
        }
        return;
    }
    if is {
        open(owner, role_, sk);
    } else {
        let ignored = role_ == role::INBOUND && left_out(sk);
        counters::close(owner, role_, ignored);
    }
}

/// While `control::RECOUNT` is set: notes that this install counts `sk`,
/// flagged, as its state stands (every count of a flagged socket calls
/// this, so a socket without the mark has no count in these maps).
#[inline(always)]
pub fn mark_recounted(sk: *mut c_void) {
    if control(control::RECOUNT) && !sock::mark_recounted(sk) {
        bump(stat::STORAGE_FAILED);
    }
}

/// Counts a connection of `owner` that became live; an inbound one is first
/// matched against the owner's exclusions, if it drains with some, and
/// one left out gets a note that says so.
#[inline(always)]
pub fn open(owner: u64, role_: u8, sk: *mut c_void) {
    let flags = if role_ == role::INBOUND {
        counters::watched(owner)
    } else {
        0
    };
    let mut ignored = false;
    if flags & watch::FILTER != 0 {
        let (r, generation) = filter::classify(owner, sk);
        if r != 0 {
            if let Some(n) = sock::note_or_create(sk) {
                n.ignored = r;
                n.ignored_generation = generation;
                ignored = true;
            } else {
                bump(stat::STORAGE_FAILED);
            }
        }
    }
    counters::open(owner, role_, flags, ignored);
}

/// Whether a counted inbound connection is one its owner's exclusions left
/// out: it has a note saying so, which ends here with it.
#[inline(always)]
fn left_out(sk: *mut c_void) -> bool {
    let Some(n) = sock::note_of(sk) else {
        return false;
    };
    let r = n.ignored;
    n.ignored = 0;
    n.ignored_generation = 0;
    r != 0
}
