//! The maps, as the kernel sees them. Names and value types come from
//! `graceful-common`, so the agent can't drift from them.

use aya_ebpf::{
    bindings::{bpf_map_type::BPF_MAP_TYPE_SK_STORAGE, BPF_F_CLONE, BPF_F_NO_PREALLOC},
    btf_maps::{Array, HashMap, PerCpuArray, RingBuf},
    macros::btf_map,
};
use graceful_common::{
    stat, AdoptEntry, CgroupCounters, Event, Meta, SockOwner, EVENTS_BYTES, MAX_ADOPT, MAX_CGROUPS, MAX_WATCH,
};

/// Flags of the socket-storage map. `BPF_F_CLONE` is what makes attribution
/// work: a connection accepted by a listener is cloned from it in softirq
/// context, where the current cgroup means nothing, and inherits the
/// listener's owner through this flag.
const SOCKS_FLAGS: usize = (BPF_F_NO_PREALLOC | BPF_F_CLONE) as usize;

/// A BTF definition of a `BPF_MAP_TYPE_SK_STORAGE` map with our own flags.
/// aya-ebpf's ready-made `SkStorage` fixes the flags (no `BPF_F_CLONE`) and
/// only takes sock_addr contexts, so this spells the same BTF layout out:
/// each field's *type* carries the attribute, the pointers are never used.
#[repr(C)]
pub struct SockStorage {
    r#type: *const [i32; BPF_MAP_TYPE_SK_STORAGE as usize],
    key: *const i32,
    value: *const SockOwner,
    max_entries: *const [i32; 0],
    map_flags: *const [i32; SOCKS_FLAGS],
}

// SAFETY: the fields are placeholders that the loader reads from BTF; they
// are never dereferenced.
unsafe impl Sync for SockStorage {}

impl SockStorage {
    const fn new() -> Self {
        Self {
            r#type: core::ptr::null(),
            key: core::ptr::null(),
            value: core::ptr::null(),
            max_entries: core::ptr::null(),
            map_flags: core::ptr::null(),
        }
    }

    #[inline(always)]
    pub fn as_ptr(&self) -> *mut core::ffi::c_void {
        core::ptr::from_ref(self).cast_mut().cast()
    }
}

/// Owner, role and counted flag of every TCP socket we track.
#[btf_map(name = "GRACEFUL_SOCKS")]
pub static SOCKS: SockStorage = SockStorage::new();

/// Figures per cgroup v2 id. Preallocated: the tracepoint never allocates.
#[btf_map(name = "GRACEFUL_COUNTERS")]
pub static COUNTERS: HashMap<u64, CgroupCounters, { MAX_CGROUPS as usize }> = HashMap::new();

/// Socket cookie → owner, filled by the agent before it runs the adoption
/// iterator, emptied after.
#[btf_map(name = "GRACEFUL_ADOPT")]
pub static ADOPT: HashMap<u64, AdoptEntry, { MAX_ADOPT as usize }, { BPF_F_NO_PREALLOC as usize }> =
    HashMap::new();

/// The agent's own figures (see `graceful_common::stat`).
#[btf_map(name = "GRACEFUL_STATS")]
pub static STATS: PerCpuArray<u64, { stat::COUNT as usize }> = PerCpuArray::new();

/// Layout version of the pinned maps, written by the agent when it creates them.
#[btf_map(name = "GRACEFUL_META")]
pub static META: Array<Meta, 1> = Array::new();

/// Watched cgroups → `graceful_common::watch` flags.
#[btf_map(name = "GRACEFUL_WATCH")]
pub static WATCH: HashMap<u64, u32, { MAX_WATCH as usize }> = HashMap::new();

/// Changes of watched cgroups, for the agent to act on at once.
#[btf_map(name = "GRACEFUL_EVENTS")]
pub static EVENTS: RingBuf<Event, { EVENTS_BYTES as usize }> = RingBuf::new();

#[inline(always)]
pub fn bump(index: u32) {
    if let Some(p) = STATS.get_ptr_mut(index) {
        // Per-CPU slot: no other writer.
        unsafe { *p += 1 };
    }
}
