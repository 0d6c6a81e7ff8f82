//! Programs that do nothing, for `cargo xtask bench designs` only: attached
//! where each design's programs attach, they measure what the kernel
//! charges for running any program there (its dispatch), the floor under
//! each design's cost. The agent never loads them.

use aya_ebpf::{
    macros::{btf_tracepoint, sock_ops},
    programs::{BtfTracePointContext, SockOpsContext},
};

#[sock_ops]
pub fn floor_sock_ops(_ctx: SockOpsContext) -> u32 {
    1
}

#[btf_tracepoint(function = "inet_sock_set_state")]
pub fn floor_state(_ctx: BtfTracePointContext) -> i32 {
    0
}

#[btf_tracepoint(function = "tcp_destroy_sock")]
pub fn floor_destroyed(_ctx: BtfTracePointContext) -> i32 {
    0
}
