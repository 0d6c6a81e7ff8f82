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
//! and two copies of this program (an agent upgrade, attach before detach)
//! never count twice.

use core::ffi::c_void;

use aya_ebpf::{helpers::bpf_get_current_cgroup_id, macros::btf_tracepoint, programs::BtfTracePointContext};
use graceful_common::{role, stat, tcp};

use crate::{counters, maps::bump, sock};

#[btf_tracepoint(function = "inet_sock_set_state")]
pub fn sock_set_state(ctx: BtfTracePointContext) -> i32 {
    let sk: *mut c_void = ctx.arg(0);
    let old: i32 = ctx.arg(1);
    let new: i32 = ctx.arg(2);
    handle(sk, old as u32, new as u32);
    0
}

#[inline(always)]
fn handle(sk: *mut c_void, old: u32, new: u32) {
    bump(stat::EVENTS);

    // connect() and listen(): the socket starts, in its owner's context.
    if old == tcp::CLOSE && (new == tcp::SYN_SENT || new == tcp::LISTEN) {
        if !sock::is_tcp(sk) {
            return;
        }
        let Some(o) = sock::owner_or_create(sk) else {
            bump(stat::STORAGE_FAILED);
            return;
        };
        // A socket reused after disconnect: settle its past first.
        if o.counted != 0 {
            uncount(o.cgroup_id, o.role);
            o.counted = 0;
        }
        o.cgroup_id = unsafe { bpf_get_current_cgroup_id() };
        if new == tcp::LISTEN {
            o.role = role::LISTENER;
            o.counted = 1;
            counters::listener(o.cgroup_id, true);
        } else {
            o.role = role::OUTBOUND;
        }
        return;
    }

    let Some(o) = sock::owner(sk) else {
        bump(stat::UNTRACKED);
        return;
    };

    if o.role == role::LISTENER {
        if old == tcp::LISTEN && new != tcp::CLOSE && new != tcp::LISTEN {
            // A child being cloned from its listener (LISTEN → SYN_RECV):
            // it carries the listener's storage, counted flag included.
            o.role = role::INBOUND;
            o.counted = 0;
        } else {
            if new != tcp::LISTEN && o.counted != 0 {
                o.counted = 0;
                counters::listener(o.cgroup_id, false);
            }
            return;
        }
    }

    let live = tcp::is_live(new);
    if live && o.counted == 0 {
        o.counted = 1;
        counters::open(o.cgroup_id, o.role);
    } else if !live && o.counted != 0 {
        o.counted = 0;
        counters::close(o.cgroup_id, o.role);
    }
}

#[inline(always)]
fn uncount(cgroup_id: u64, role_: u8) {
    if role_ == role::LISTENER {
        counters::listener(cgroup_id, false);
    } else {
        counters::close(cgroup_id, role_);
    }
}
