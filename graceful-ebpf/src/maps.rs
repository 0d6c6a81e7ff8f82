//! The maps, as the kernel sees them. Names and value types come from
//! `graceful-common`, so the agent can't drift from them.

use aya_ebpf::{
    bindings::{bpf_map_type::BPF_MAP_TYPE_SK_STORAGE, BPF_F_CLONE, BPF_F_NO_PREALLOC},
    btf_maps::{Array, HashMap, PerCpuArray, RingBuf},
    macros::btf_map,
};
use graceful_common::{
    stat, AdoptEntry, CgroupCounters, Event, Filter, Meta, SockOwner, EVENTS_BYTES, MAX_ADOPT, MAX_CGROUPS,
    MAX_FILTERS, MAX_WATCH,
};

/// Flags of the tracepoint design's socket-storage map. `BPF_F_CLONE` is
/// what makes its attribution work: a connection accepted by a listener is
/// cloned from it in softirq context, where the current cgroup means
/// nothing, and inherits the listener's owner through this flag.
const SOCKS_FLAGS: usize = (BPF_F_NO_PREALLOC | BPF_F_CLONE) as usize;
/// Flags of the notes map: no clone, so a child of a listener that carries
/// a note starts without one (the sock_ops program counts it).
const NOTES_FLAGS: usize = BPF_F_NO_PREALLOC as usize;

/// A BTF definition of a `BPF_MAP_TYPE_SK_STORAGE` map with our own flags.
/// aya-ebpf's ready-made `SkStorage` fixes the flags (no `BPF_F_CLONE`) and
/// only takes sock_addr contexts, so this spells the same BTF layout out:
/// each field's *type* carries the attribute, the pointers are never used.
#[repr(C)]
pub struct SockStorage<const FLAGS: usize> {
    r#type: *const [i32; BPF_MAP_TYPE_SK_STORAGE as usize],
    key: *const i32,
    value: *const SockOwner,
    max_entries: *const [i32; 0],
    map_flags: *const [i32; FLAGS],
}

// SAFETY: the fields are placeholders that the loader reads from BTF; they
// are never dereferenced.
unsafe impl<const FLAGS: usize> Sync for SockStorage<FLAGS> {}

impl<const FLAGS: usize> SockStorage<FLAGS> {
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

/// Owner, role and counted flag of every TCP socket the tracepoint design
/// tracks: every socket when the agent counts with tracepoints
/// (`--counting tracepoint`), otherwise those that an agent of that design
/// (before 0.2) started to track, until they end.
#[btf_map(name = "GRACEFUL_SOCKS")]
pub static SOCKS: SockStorage<SOCKS_FLAGS> = SockStorage::new();

/// Notes on sockets the sock_ops program does not see start: with a role,
/// a socket adopted by the iterator, which the tracepoint programs count
/// until it ends; with role 0, a socket the sock_ops program counts, and
/// only its exclusion mark (`ignored`) is kept here. Created for those
/// sockets only.
#[btf_map(name = "GRACEFUL_NOTES")]
pub static NOTES: SockStorage<NOTES_FLAGS> = SockStorage::new();

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

/// Draining cgroups with exclusions → what they leave out (see `filter.rs`).
/// Not preallocated: only the agent inserts, and there are few.
#[btf_map(name = "GRACEFUL_FILTERS")]
pub static FILTERS: HashMap<u64, Filter, { MAX_FILTERS as usize }, { BPF_F_NO_PREALLOC as usize }> =
    HashMap::new();

/// What the agent tells the programs: `graceful_common::control` bits.
#[btf_map(name = "GRACEFUL_CONTROL")]
pub static CONTROL: Array<u32, 1> = Array::new();

/// Whether `bit` of the control map is set. An array lookup with a
/// constant key, which the verifier turns into a plain load.
#[inline(always)]
pub fn control(bit: u32) -> bool {
    CONTROL.get(0).is_some_and(|v| *v & bit != 0)
}

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
