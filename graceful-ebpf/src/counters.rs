//! Updates of the per-cgroup figures. Many CPUs update one cgroup's entry at
//! once, so every change is an atomic add.

use core::{
    ffi::c_void,
    intrinsics::{atomic_xadd, AtomicOrdering},
};

use aya_ebpf::{bindings::BPF_NOEXIST, helpers::bpf_ktime_get_ns};
use graceful_common::{control, event, field, role, stat, watch, CgroupCounters, Event, SockOwner};

use crate::{
    filter,
    maps::{bump, control, COUNTERS, EVENTS, WATCH},
};

/// Where a change lands: an entry that was there, to add to, or the one
/// just created with the change already in it.
enum Slot {
    Existing(*mut u64),
    Created(*mut u64),
}

/// The counters of `cgroup_id`, created on its first count from `first`,
/// which holds that count already. Never created zeroed and added to after:
/// the agent's garbage collector drops entries it reads as all-zero, and
/// one read between such an insert and its add would be dropped with the
/// add in it (a program can be preempted in between).
#[inline(always)]
fn entry(cgroup_id: u64, first: impl FnOnce() -> CgroupCounters) -> Option<Slot> {
    if let Some(p) = COUNTERS.get_ptr_mut(cgroup_id) {
        return Some(Slot::Existing(p.cast()));
    }
    // Two CPUs may race to create it: NOEXIST makes the loser add to the
    // winner's entry instead.
    let created = COUNTERS.insert(cgroup_id, first(), BPF_NOEXIST.into()).is_ok();
    match COUNTERS.get_ptr_mut(cgroup_id) {
        Some(p) if created => Some(Slot::Created(p.cast())),
        Some(p) => Some(Slot::Existing(p.cast())),
        None => {
            bump(stat::COUNTERS_FULL);
            None
        }
    }
}

/// The counters of `cgroup_id` for a decrement. A cgroup without an entry
/// has nothing to take away: counted as an underflow, not written.
#[inline(always)]
fn existing(cgroup_id: u64) -> Option<*mut u64> {
    match COUNTERS.get_ptr_mut(cgroup_id) {
        Some(p) => Some(p.cast()),
        None => {
            bump(stat::UNDERFLOW);
            None
        }
    }
}

#[inline(always)]
fn add(base: *mut u64, index: usize, delta: u64) {
    // SAFETY: base points at a live map value of CgroupCounters, all u64
    // fields, and index is one of `field::*`.
    // The BPF target has no compare-and-swap, so `AtomicU64::fetch_add` is
    // not offered; the intrinsic lowers to the BPF atomic add instruction.
    unsafe { atomic_xadd::<u64, u64, { AtomicOrdering::Relaxed }>(base.add(index), delta) };
}

#[inline(always)]
fn set(base: *mut u64, index: usize, value: u64) {
    // SAFETY: as in `add`. A plain store: the latest writer wins.
    unsafe { base.add(index).write_volatile(value) };
}

/// For the benches' lookup floor only: finds `cgroup_id`'s entry as a
/// count would, and adds nothing (an entry is made once, zeroed: the
/// floor runs without an agent to collect it).
#[inline(always)]
pub fn look(cgroup_id: u64) {
    if COUNTERS.get_ptr_mut(cgroup_id).is_none() {
        let _ = COUNTERS.insert(cgroup_id, CgroupCounters::default(), BPF_NOEXIST.into());
    }
}

/// The watch flags of `cgroup_id` (see `graceful_common::watch`): one hash
/// lookup, and none while the agent watches nothing.
#[inline(always)]
pub fn watched(cgroup_id: u64) -> u32 {
    if !control(control::WATCHING) {
        return 0;
    }
    unsafe { WATCH.get(cgroup_id) }.copied().unwrap_or(0)
}

/// A connection of `role` became live. For an inbound one, `flags` are
/// its owner's watch flags, and `ignored` says that the owner's drain
/// leaves it out (`filter.rs`): it is counted, and also in
/// `inbound_ignored_live`, but neither marks the last open nor wakes the
/// drain.
#[inline(always)]
pub fn open(cgroup_id: u64, role_: u8, flags: u32, ignored: bool) {
    if role_ != role::INBOUND {
        let first = || CgroupCounters {
            outbound_live: 1,
            outbound_total: 1,
            ..Default::default()
        };
        if let Some(Slot::Existing(c)) = entry(cgroup_id, first) {
            add(c, field::OUTBOUND_LIVE, 1);
            add(c, field::OUTBOUND_TOTAL, 1);
        }
        return;
    }
    if ignored {
        let first = || CgroupCounters {
            inbound_live: 1,
            inbound_total: 1,
            inbound_ignored_live: 1,
            ..Default::default()
        };
        if let Some(Slot::Existing(c)) = entry(cgroup_id, first) {
            add(c, field::INBOUND_LIVE, 1);
            add(c, field::INBOUND_TOTAL, 1);
            add(c, field::INBOUND_IGNORED_LIVE, 1);
        }
        return;
    }
    let now = unsafe { bpf_ktime_get_ns() };
    let first = || CgroupCounters {
        inbound_live: 1,
        inbound_total: 1,
        last_inbound_open_ns: now,
        ..Default::default()
    };
    let c = match entry(cgroup_id, first) {
        Some(Slot::Existing(c)) => {
            add(c, field::INBOUND_LIVE, 1);
            add(c, field::INBOUND_TOTAL, 1);
            set(c, field::LAST_INBOUND_OPEN_NS, now);
            c
        }
        Some(Slot::Created(c)) => c,
        None => return,
    };
    if flags & watch::CONNECTIONS != 0 {
        send(cgroup_id, c, event::INBOUND_OPEN, now);
    }
}

/// A tracked socket's connection became live: classified against its
/// owner's exclusions (an inbound one, if the owner drains with some) and
/// counted. Returns what its storage's `ignored` becomes.
#[inline(always)]
pub fn open_tracked(o: &mut SockOwner, sk: *const c_void) -> u8 {
    let flags = if o.role == role::INBOUND {
        watched(o.cgroup_id)
    } else {
        0
    };
    let ignored = if flags & watch::FILTER != 0 {
        let (r, generation) = filter::classify(o.cgroup_id, sk);
        if r != 0 {
            o.ignored_generation = generation;
        }
        r
    } else {
        0
    };
    open(o.cgroup_id, o.role, flags, ignored != 0);
    ignored
}

/// A connection of `role` stopped being live; `ignored` is its storage's
/// (see [`open`]). An ignored one neither marks the last close nor wakes
/// the drain.
#[inline(always)]
pub fn close(cgroup_id: u64, role_: u8, ignored: bool) {
    let Some(c) = existing(cgroup_id) else { return };
    if role_ != role::INBOUND {
        add(c, field::OUTBOUND_LIVE, u64::MAX);
        return;
    }
    // Adding 2^64-1 is subtracting one; a plain add keeps to the oldest
    // BPF atomics, which every supported kernel has.
    add(c, field::INBOUND_LIVE, u64::MAX);
    add(c, field::INBOUND_CLOSED_TOTAL, 1);
    if ignored {
        add(c, field::INBOUND_IGNORED_LIVE, u64::MAX);
        return;
    }
    let now = unsafe { bpf_ktime_get_ns() };
    set(c, field::LAST_INBOUND_CLOSE_NS, now);
    notify(cgroup_id, c, event::INBOUND_CLOSE, now);
}

/// A live connection's count taken back, to be counted again at once by
/// another program (see `sockops.rs`): its totals too, and no close, no
/// event.
#[inline(always)]
pub fn take_back(cgroup_id: u64, role_: u8, ignored: bool) {
    let Some(c) = existing(cgroup_id) else { return };
    if role_ != role::INBOUND {
        add(c, field::OUTBOUND_LIVE, u64::MAX);
        add(c, field::OUTBOUND_TOTAL, u64::MAX);
        return;
    }
    add(c, field::INBOUND_LIVE, u64::MAX);
    add(c, field::INBOUND_TOTAL, u64::MAX);
    if ignored {
        add(c, field::INBOUND_IGNORED_LIVE, u64::MAX);
    }
}

/// A live inbound connection found to be left out (`up`) or no longer
/// (by the agent's pass as a drain starts with other exclusions).
#[inline(always)]
pub fn ignored(cgroup_id: u64, up: bool) {
    if let Some(c) = existing(cgroup_id) {
        add(c, field::INBOUND_IGNORED_LIVE, if up { 1 } else { u64::MAX });
    }
}

#[inline(always)]
pub fn listener(cgroup_id: u64, up: bool) {
    if up {
        let first = || CgroupCounters {
            listeners: 1,
            ..Default::default()
        };
        if let Some(Slot::Existing(c)) = entry(cgroup_id, first) {
            add(c, field::LISTENERS, 1);
        }
    } else if let Some(c) = existing(cgroup_id) {
        add(c, field::LISTENERS, u64::MAX);
    }
}

/// Tells the agent, if it watches this cgroup. One hash lookup for the
/// cgroups it doesn't watch: nearly all of them.
#[inline(always)]
fn notify(cgroup_id: u64, c: *mut u64, kind: u32, now: u64) {
    if watched(cgroup_id) & watch::CONNECTIONS == 0 {
        return;
    }
    send(cgroup_id, c, kind, now);
}

#[inline(always)]
fn send(cgroup_id: u64, c: *mut u64, kind: u32, now: u64) {
    // SAFETY: c points at a live counters value.
    let inbound_live = unsafe { c.add(field::INBOUND_LIVE).read_volatile() };
    let ev = Event {
        cgroup_id,
        ts_ns: now,
        inbound_live,
        kind,
        _pad: 0,
    };
    if EVENTS.output(ev, 0).is_err() {
        bump(stat::EVENTS_LOST);
    }
}

/// Inbound payload reached a socket owned by `cgroup_id`: the "quiet" signal
/// for keep-alive connections. Only called for watched cgroups.
#[inline(always)]
pub fn payload(cgroup_id: u64, bytes: u64, flags: u32) {
    // Its inbound connections made the entry; without one, nothing to record.
    let Some(c) = COUNTERS.get_ptr_mut(cgroup_id).map(|p| p.cast::<u64>()) else {
        return;
    };
    let now = unsafe { bpf_ktime_get_ns() };
    add(c, field::INBOUND_RX_BYTES, bytes);
    // SAFETY: c points at a live counters value.
    let last = unsafe { c.add(field::LAST_INBOUND_RX_NS).read_volatile() };
    set(c, field::LAST_INBOUND_RX_NS, now);
    if flags & watch::PAYLOAD != 0 && now.wrapping_sub(last) >= watch::RX_EVENT_GAP_NS {
        send(cgroup_id, c, event::INBOUND_PAYLOAD, now);
    }
}
