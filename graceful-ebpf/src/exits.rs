//! `tp_btf/cgroup_notify_populated`: a watched container's last process
//! exited.
//!
//! `--after-containers` releases a drain once named containers have exited.
//! The kernel's own notice of that, an inotify event on `cgroup.events`, is
//! rate-limited to one per 10 ms per cgroup and delivered from a workqueue;
//! this tracepoint fires synchronously, in the exiting task, the moment the
//! cgroup becomes empty. It fires for every hierarchy (a hybrid host's v1
//! ones too) and every populated change, so it filters hard: v2 only, empty
//! only, watched cgroups only.

use core::ffi::c_void;

use aya_ebpf::{helpers::bpf_ktime_get_ns, macros::btf_tracepoint, programs::BtfTracePointContext};
use graceful_common::{event, stat, watch, Event};

use crate::{
    cgroup,
    kmem::{global, read},
    maps::{bump, EVENTS, WATCH},
};

/// Offsets from the running kernel's BTF, set by the loader (0: unknown,
/// and the program does nothing): `root` in `struct cgroup`,
/// `hierarchy_id` in `struct cgroup_root`.
#[unsafe(no_mangle)]
static CGROUP_ROOT_OFFSET: u32 = 0;
#[unsafe(no_mangle)]
static ROOT_HIERARCHY_ID_OFFSET: u32 = 0;

#[btf_tracepoint(function = "cgroup_notify_populated")]
pub fn cgroup_populated(ctx: BtfTracePointContext) -> i32 {
    // (struct cgroup *cgrp, const char *path, int val)
    let cgrp: *const c_void = ctx.arg(0);
    let populated: u64 = ctx.arg(2);
    if populated as u32 == 0 {
        emptied(cgrp);
    }
    0
}

#[inline(always)]
fn emptied(cgrp: *const c_void) {
    let (root_off, hier_off) = (global(&CGROUP_ROOT_OFFSET), global(&ROOT_HIERARCHY_ID_OFFSET));
    // None of these fields is first in its struct, so 0 means "not set".
    if !cgroup::known() || root_off == 0 || hier_off == 0 {
        return;
    }
    // The unified (v2) hierarchy is hierarchy 0, as in /proc/<pid>/cgroup.
    let Some(root) = read::<*const c_void>(cgrp, root_off) else {
        return;
    };
    if read::<i32>(root, hier_off) != Some(0) {
        return;
    }
    let Some(id) = cgroup::id(cgrp) else {
        return;
    };
    let Some(flags) = (unsafe { WATCH.get(id) }) else {
        return;
    };
    if *flags & watch::EXITS == 0 {
        return;
    }
    let ev = Event {
        cgroup_id: id,
        ts_ns: unsafe { bpf_ktime_get_ns() },
        inbound_live: 0,
        kind: event::EMPTIED,
        _pad: 0,
    };
    if EVENTS.output(ev, 0).is_err() {
        bump(stat::EVENTS_LOST);
    }
}
