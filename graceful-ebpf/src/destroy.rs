//! `tp_btf/tcp_destroy_sock`: the end of a TCP socket, the state program's
//! backstop for counts that would otherwise never come down.
//!
//! A connection is uncounted by its last live-to-not-live state change. If
//! both copies of the state program missed that change (each is skipped
//! while it is itself running on the CPU, and a task preempted inside one
//! keeps it running), the socket would die still counted, and its pod's
//! inbound count would never reach zero: a drain held to its deadline.
//! A socket is destroyed only in CLOSE, so one still counted here missed
//! that change; it is uncounted now.
//!
//! Listener counts are left alone: a child whose clone was missed carries a
//! copy of its listener's storage, and here the two can't be told apart.

use core::ffi::c_void;

use aya_ebpf::{macros::btf_tracepoint, programs::BtfTracePointContext};
use graceful_common::{role, stat, tcp};

use crate::{maps::bump, state};

#[btf_tracepoint(function = "tcp_destroy_sock")]
pub fn sock_destroyed(ctx: BtfTracePointContext) -> i32 {
    let sk: *mut c_void = ctx.arg(0);
    let Some(o) = state::ours(sk) else {
        return 0;
    };
    // CLOSE is not live: this uncounts it if a change was missed.
    if o.role != role::LISTENER && state::settle(o, tcp::CLOSE, sk) {
        bump(stat::CAUGHT);
    }
    0
}
