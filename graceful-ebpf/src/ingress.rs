//! `cgroup_skb/ingress`: inbound payload of a draining pod.
//!
//! Attached only to the cgroups of pods that drain with the `quiet`
//! policy, and detached when they are released: no cost for anyone else.
//! It records bytes and the time of the last inbound payload on the pod's
//! inbound connections, so idle keep-alive connections can be told from
//! busy ones.

use core::ffi::c_void;

use aya_ebpf::{helpers::generated::bpf_skc_to_tcp_sock, macros::cgroup_skb, programs::SkBuffContext};
use graceful_common::role;

use crate::{counters, maps::WATCH, sock, sockops, state};

#[cgroup_skb(ingress)]
pub fn inbound_rx(ctx: SkBuffContext) -> i32 {
    let skb = unsafe { &*ctx.skb.skb };
    let len = skb.len;
    // Pure ACKs and FINs carry no payload worth waking anyone for; a TCP
    // header is at least 20 bytes, plus 20 (v4) or 40 (v6) of IP.
    if len <= 60 {
        return 1;
    }
    let sk = unsafe { skb.__bindgen_anon_2.sk };
    if sk.is_null() {
        return 1;
    }
    let sk = unsafe { aya_ebpf::helpers::generated::bpf_sk_fullsock(sk) };
    if sk.is_null() {
        return 1;
    }
    if let Some((owner, true)) = inbound(sk.cast()) {
        let flags = unsafe { WATCH.get(owner) }.copied().unwrap_or(0);
        counters::payload(owner, len as u64, flags);
    }
    // Never drop anything: this program only watches.
    1
}

/// The owner of a counted TCP socket `sk`, and whether it is an inbound
/// connection the owner's drain does not leave out (a connection the
/// exclusions leave out is no traffic).
#[inline(always)]
fn inbound(sk: *mut c_void) -> Option<(u64, bool)> {
    let tp: *mut c_void = unsafe { bpf_skc_to_tcp_sock(sk) }.cast();
    if tp.is_null() {
        return None;
    }
    let flags = sock::ops_flags(tp);
    if state::tracks_new() || flags & sockops::COUNTED == 0 {
        let o = sock::owner(sk)?;
        return Some((o.cgroup_id, o.role == role::INBOUND && o.ignored == 0));
    }
    let owner = sock::cgroup_id(tp)?;
    let left_out = sock::note(sk).is_some_and(|n| n.ignored != 0);
    Some((owner, flags & sockops::INBOUND != 0 && !left_out))
}
