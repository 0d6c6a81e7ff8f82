//! The one hot path: every TCP state change on the node.
//!
//! A socket is *tracked* once it carries our storage. It gets it in process
//! context, where the current cgroup is the owner: at connect() (CLOSE →
//! SYN_SENT) or listen() (CLOSE → LISTEN). Accepted connections inherit
//! the listener's storage through `BPF_F_CLONE`. Sockets that existed
//! before the agent get theirs from the adoption iterator. Everything else
//! is ignored.
//!
//! Counting is idempotent through `SockOwner::counted`: entering a live
//! state counts only if not counted, leaving uncounts only if counted. So a
//! connection is counted once and uncounted once whatever path it takes,
//! and two copies of this program never count twice.
//!
//! There are two copies on purpose. The kernel runs a tracing program at
//! most once per CPU at a time: a state change in a softirq that interrupts
//! the program's own run in process context (a connect(), a close()) is
//! skipped, and counted only in the program's `recursion_misses`. A churn
//! of 100,000 connections loses tens to hundreds of changes that way, among
//! them a child's first one and a connection's last one. The twin is a
//! separate program with its own per-CPU guard, attached to the same
//! tracepoint: whichever copy a softirq interrupts, the other one runs.
//! The twin usually finds the work done, at the cost of one storage lookup.
//!
//! Measured, the two can still both miss a change, about one in 20,000
//! under a stress of timer-driven softirqs (`tests/.../nested.rs`; a third
//! copy caught none of those, so they are not simply nested one deeper).
//! A missed last change is caught at the socket's destruction
//! (`destroy.rs`); a missed first one leaves the connection uncounted until
//! its next change, which counts it if it is still live, or until the
//! agent's next pass over every socket (`adopt.rs`: at its start, then
//! every `--repair-interval`), which counts it.

use core::ffi::c_void;

use aya_ebpf::{helpers::bpf_get_current_cgroup_id, macros::btf_tracepoint, programs::BtfTracePointContext};
use graceful_common::{role, stat, tcp, SockOwner};

use crate::{counters, kmem::global, maps::bump, sock, sockops};

/// Set by the loader: 1 when these programs count every socket (the
/// tracepoint design, `--counting tracepoint`): they start tracking a
/// socket at connect() and listen(). 0 when the sock_ops program counts
/// the sockets made since it was attached (`sockops.rs`): then these count
/// only the sockets that carry storage already, and create none.
#[unsafe(no_mangle)]
static TRACK_NEW: u32 = 0;

/// Whether these programs count every socket (see [`TRACK_NEW`]).
#[inline(always)]
pub fn tracks_new() -> bool {
    global(&TRACK_NEW) != 0
}

#[btf_tracepoint(function = "inet_sock_set_state")]
pub fn sock_set_state(ctx: BtfTracePointContext) -> i32 {
    bump(stat::EVENTS);
    match handle(ctx.arg(0), ctx.arg::<i32>(1) as u32, ctx.arg::<i32>(2) as u32) {
        // Expected for most sockets when the sock_ops program counts them.
        Handled::Untracked if tracks_new() => bump(stat::UNTRACKED),
        Handled::Untracked => {}
        Handled::NoStorage => bump(stat::STORAGE_FAILED),
        Handled::Changed | Handled::Unchanged => {}
    }
    0
}

/// The second copy (see the module docs). It counts only what it did that
/// the first had not: changes the first missed.
#[btf_tracepoint(function = "inet_sock_set_state")]
pub fn sock_state_twin(ctx: BtfTracePointContext) -> i32 {
    if let Handled::Changed = handle(ctx.arg(0), ctx.arg::<i32>(1) as u32, ctx.arg::<i32>(2) as u32) {
        bump(stat::CAUGHT);
    }
    0
}

enum Handled {
    /// Storage or counts changed.
    Changed,
    /// Nothing left to do: the other copy did it, or nothing was due.
    Unchanged,
    /// A socket we never saw start.
    Untracked,
    NoStorage,
}

#[inline(always)]
fn handle(sk: *mut c_void, old: u32, new: u32) -> Handled {
    // connect() and listen(): the socket starts, in its owner's context.
    if old == tcp::CLOSE && (new == tcp::SYN_SENT || new == tcp::LISTEN) {
        if !sock::is_tcp(sk) {
            return Handled::Unchanged;
        }
        if !tracks_new() {
            // An adopted socket reused after it closed stays ours.
            return match ours(sk) {
                Some(o) => start(o, new),
                None => Handled::Untracked,
            };
        }
        let Some(o) = sock::owner_or_create(sk) else {
            return Handled::NoStorage;
        };
        return start(o, new);
    }

    let Some(o) = ours(sk) else {
        return Handled::Untracked;
    };

    if o.role == role::LISTENER {
        // The listener itself only ever leaves LISTEN for CLOSE (close(),
        // shutdown(), a failed listen()).
        if old == tcp::LISTEN && new == tcp::CLOSE {
            if o.counted == 0 {
                return Handled::Unchanged;
            }
            o.counted = 0;
            counters::listener(o.cgroup_id, false);
            return Handled::Changed;
        }
        // A closed listener closed again (shutdown() then close()), or a
        // child that dies before anything else: nothing to count.
        if new == tcp::CLOSE {
            return Handled::Unchanged;
        }
        // Anything else is a child cloned from a listener, carrying a copy
        // of its storage, counted flag included: normally LISTEN → SYN_RECV,
        // but a child cloned as its listener closes may copy CLOSE as its
        // old state (the clone reads the listener without its lock). From
        // here on it is an inbound connection, not yet counted.
        o.role = role::INBOUND;
        o.counted = 0;
        o.ignored = 0;
        o.ignored_generation = 0;
        settle(o, new, sk);
        return Handled::Changed;
    }
    if settle(o, new, sk) {
        Handled::Changed
    } else {
        Handled::Unchanged
    }
}

/// The storage of `sk` if these programs count it: it has storage, and
/// (when the sock_ops program counts the new sockets) that program has not
/// taken it over: storage left on a socket it flagged is stale.
#[inline(always)]
pub fn ours(sk: *mut c_void) -> Option<&'static mut SockOwner> {
    let o = sock::owner(sk)?;
    if !tracks_new() && sock::ops_flags(sk) & sockops::COUNTED != 0 {
        return None;
    }
    Some(o)
}

/// A socket starts as a listener or a client, owned by the current cgroup.
#[inline(always)]
fn start(o: &mut SockOwner, new: u32) -> Handled {
    let cgroup_id = unsafe { bpf_get_current_cgroup_id() };
    let role_ = if new == tcp::LISTEN {
        role::LISTENER
    } else {
        role::OUTBOUND
    };
    // The other copy has been here for this very change.
    if o.role == role_ && o.cgroup_id == cgroup_id && (o.counted != 0) == (new == tcp::LISTEN) {
        return Handled::Unchanged;
    }
    // A socket reused after disconnect: settle its past first.
    if o.counted != 0 {
        uncount(o.cgroup_id, o.role, o.ignored);
        o.counted = 0;
    }
    o.ignored = 0;
    o.ignored_generation = 0;
    o.cgroup_id = cgroup_id;
    o.role = role_;
    if new == tcp::LISTEN {
        o.counted = 1;
        counters::listener(cgroup_id, true);
    }
    Handled::Changed
}

/// Counts or uncounts connection `sk` as `new` is live or not. Returns
/// whether anything changed.
#[inline(always)]
pub fn settle(o: &mut SockOwner, new: u32, sk: *const c_void) -> bool {
    let live = tcp::is_live(new);
    if live && o.counted == 0 {
        o.counted = 1;
        o.ignored = counters::open_tracked(o, sk);
        true
    } else if !live && o.counted != 0 {
        o.counted = 0;
        counters::close(o.cgroup_id, o.role, o.ignored != 0);
        o.ignored = 0;
        true
    } else {
        false
    }
}

#[inline(always)]
fn uncount(cgroup_id: u64, role_: u8, ignored: u8) {
    if role_ == role::LISTENER {
        counters::listener(cgroup_id, false);
    } else {
        counters::close(cgroup_id, role_, ignored != 0);
    }
}
