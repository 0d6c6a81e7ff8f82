//! `cgroup_skb/ingress`: inbound payload of a draining pod.
//!
//! Attached only to the cgroups of pods that drain with the `quiet`
//! policy, and detached when they are released: no cost for anyone else.
//! It records bytes and the time of the last inbound payload on the pod's
//! inbound connections, so idle keep-alive connections can be told from
//! busy ones.

use aya_ebpf::{macros::cgroup_skb, programs::SkBuffContext};
use graceful_common::role;

use crate::{counters, maps::WATCH, sock};

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
    if let Some(o) = sock::owner(sk.cast()) {
        if o.role == role::INBOUND {
            let flags = unsafe { WATCH.get(o.cgroup_id) }.copied().unwrap_or(0);
            counters::payload(o.cgroup_id, len as u64, flags);
        }
    }
    // Never drop anything: this program only watches.
    1
}
