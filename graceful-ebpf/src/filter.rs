//! The exclusions of a draining cgroup (`graceful.dev/ignore-ports`,
//! `ignore-peers`): which of its inbound connections its drain leaves out.
//!
//! Looked up only for cgroups the agent marked with `watch::FILTER`, so a
//! pod that does not drain with exclusions pays nothing past the watch
//! lookup its opens already make. A connection is matched once, when it
//! becomes live (or when the agent's pass over the pod's sockets finds it
//! live as the drain starts), and carries the result in its storage until
//! it closes: its addresses never change in between.

use core::{
    ffi::c_void,
    intrinsics::{atomic_xadd, AtomicOrdering},
};

use graceful_common::{Filter, MAX_IGNORE_NETS, MAX_IGNORE_RULES};

use crate::{
    kmem::{global, read},
    maps::FILTERS,
};

/// Byte offsets in `struct sock_common`, set by the loader from BTF (see
/// `sock.rs`). Always set: `skc_daddr` is legitimately at 0.
#[unsafe(no_mangle)]
static SKC_FAMILY_OFFSET: u32 = 0;
#[unsafe(no_mangle)]
static SKC_NUM_OFFSET: u32 = 0;
#[unsafe(no_mangle)]
static SKC_DADDR_OFFSET: u32 = 0;
#[unsafe(no_mangle)]
static SKC_V6_DADDR_OFFSET: u32 = 0;

const AF_INET: u16 = 2;
const AF_INET6: u16 = 10;

/// For a connection of `cgroup_id` becoming live: 1 + the index of the
/// rule of the cgroup's filter that leaves `sk` out, counted in that
/// rule's tally, or 0 when none does (or the cgroup has no filter); and
/// the filter's generation, which the connection's mark keeps (see
/// [`tally`]).
///
/// Out of line: only connections of a cgroup that drains with exclusions
/// get here, and inlined into the state program it made every other
/// connection's path longer (more spills), which the softirq stress test
/// (`nested`) showed as more changes missed.
#[inline(never)]
pub fn classify(cgroup_id: u64, sk: *const c_void) -> (u8, u8) {
    let r = rule(cgroup_id, sk);
    let mut generation = 0;
    tally(cgroup_id, r, &mut generation);
    (r, generation)
}

/// [`classify`] without the tally.
#[inline(always)]
pub fn rule(cgroup_id: u64, sk: *const c_void) -> u8 {
    let Some(f) = (unsafe { FILTERS.get(cgroup_id) }) else {
        return 0;
    };
    match rule_of(f, sk) {
        Some(r) if r < MAX_IGNORE_RULES => r as u8 + 1,
        _ => 0,
    }
}

/// Counts a connection of `cgroup_id` in the tally of rule `r` (1-based;
/// 0 is none) of the cgroup's filter, unless `generation`, the
/// connection's mark, says it is counted there already; then marks it.
#[inline(always)]
pub fn tally(cgroup_id: u64, r: u8, generation: &mut u8) {
    let Some(i) = usize::from(r).checked_sub(1) else {
        return;
    };
    let Some(f) = FILTERS.get_ptr_mut(cgroup_id) else {
        return;
    };
    // SAFETY: a live map value; its tallies are only ever added to atomically.
    let f = unsafe { &mut *f };
    if *generation == f.generation {
        return;
    }
    let Some(tally) = f.ignored.get_mut(i) else {
        return;
    };
    unsafe { atomic_xadd::<u64, u64, { AtomicOrdering::Relaxed }>(tally, 1) };
    *generation = f.generation;
}

#[inline(always)]
fn rule_of(f: &Filter, sk: *const c_void) -> Option<usize> {
    if let Some(port) = read::<u16>(sk, global(&SKC_NUM_OFFSET)) {
        for (p, rule) in f.ports.iter().zip(f.port_rules.iter()) {
            if *p != 0 && *p == port {
                return Some(usize::from(*rule));
            }
        }
    }
    let n = f.nets_len as usize;
    if n == 0 {
        return None;
    }
    let (a0, a1) = peer(sk)?;
    for net in f.nets.iter().take(n.min(MAX_IGNORE_NETS)) {
        if (a0 ^ net.addr[0]) & net.mask[0] == 0 && (a1 ^ net.addr[1]) & net.mask[1] == 0 {
            return Some(net.rule as usize);
        }
    }
    None
}

/// The peer's address as the two words of its IPv6 form: an IPv4 peer as
/// `::ffff:a.b.c.d`, as a dual-stack socket would see it.
#[inline(always)]
fn peer(sk: *const c_void) -> Option<(u64, u64)> {
    match read::<u16>(sk, global(&SKC_FAMILY_OFFSET))? {
        AF_INET => {
            let d = read::<u32>(sk, global(&SKC_DADDR_OFFSET))?;
            // Bytes 8..16 of ::ffff:a.b.c.d are 0, 0, ff, ff, a, b, c, d;
            // the BPF target is little-endian.
            Some((0, 0xffff_0000 | (u64::from(d) << 32)))
        }
        AF_INET6 => {
            let off = global(&SKC_V6_DADDR_OFFSET);
            Some((read::<u64>(sk, off)?, read::<u64>(sk, off + 8)?))
        }
        _ => None,
    }
}
