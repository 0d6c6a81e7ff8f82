//! Socket-level helpers: our storage on a socket, and the struct fields we
//! read, at offsets the agent found in the running kernel's BTF.

use core::ffi::c_void;

use aya_ebpf::{
    bindings::BPF_SK_STORAGE_GET_F_CREATE,
    helpers::generated::{bpf_sk_storage_delete, bpf_sk_storage_get},
};
use graceful_common::SockOwner;

use crate::{
    cgroup,
    kmem::{global, load, read},
    maps::{NOTES, SOCKS},
};

/// Byte offset of `skc_state` in `struct sock_common`. Set by the loader
/// from `/sys/kernel/btf/vmlinux`: Rust eBPF has no CO-RE relocations, so no
/// struct offset is compiled in.
#[unsafe(no_mangle)]
static SKC_STATE_OFFSET: u32 = 0;
/// Byte offset of `sk_protocol` (u16) in `struct sock`; 0 means unknown.
#[unsafe(no_mangle)]
static SK_PROTOCOL_OFFSET: u32 = 0;

/// Byte offset in `struct sock` of the pointer to the socket's cgroup v2
/// (`sk_cgrp_data.cgroup`; on kernels before that field, `sk_cgrp_data.val`,
/// which holds the same pointer while its low two bits are clear). Set by
/// the loader; 0 means unknown.
#[unsafe(no_mangle)]
static SK_CGROUP_OFFSET: u32 = 0;

/// 1 when [`SK_CGROUP_OFFSET`] is a `struct cgroup *` field of its own
/// (5.15 on), so the verifier types what it loads and the chain to the id
/// is three plain loads; 0: read with helper calls.
#[unsafe(no_mangle)]
static SK_CGROUP_TYPED: u32 = 0;
/// Byte offset of `sk_bpf_storage` in `struct sock`: whether a socket has
/// any storage at all, without a helper call. 0: unknown.
#[unsafe(no_mangle)]
static SK_STORAGE_OFFSET: u32 = 0;

/// Byte offset of `bpf_sock_ops_cb_flags` in `struct tcp_sock`: the flags
/// by which the sock_ops program marks the sockets it counts. Set by the
/// loader; 0 means unknown.
#[unsafe(no_mangle)]
static TCP_CB_FLAGS_OFFSET: u32 = 0;

const IPPROTO_TCP: u16 = 6;
/// The root cgroup's id, where the kernel itself puts a socket whose
/// cgroup data it cannot use (see [`cgroup_id`]).
const ROOT_CGROUP_ID: u64 = 1;

/// The cgroup v2 id of the socket's own cgroup: the cgroup of the task
/// that created it, and for a connection accepted by a listener, the
/// listener's (the kernel copies it into the child). Stable for the
/// socket's life, so its opening and its close name the same owner.
#[inline(always)]
pub fn cgroup_id(sk: *const c_void) -> Option<u64> {
    if global(&SK_CGROUP_TYPED) != 0 {
        let cgrp: *const c_void = load(sk, global(&SK_CGROUP_OFFSET));
        if cgrp.is_null() {
            return Some(ROOT_CGROUP_ID);
        }
        return Some(cgroup::id_typed(cgrp));
    }
    let p = read::<u64>(sk, global(&SK_CGROUP_OFFSET))?;
    // Low bits set: an old kernel's cgroup v1 tagging (net_cls, net_prio)
    // took the field over, and the kernel runs the root's programs for it.
    if p == 0 || p & 3 != 0 {
        return Some(ROOT_CGROUP_ID);
    }
    cgroup::id(p as *const c_void)
}

#[inline(always)]
fn storage<const F: usize>(
    map: &crate::maps::SockStorage<F>,
    sk: *mut c_void,
    flags: u64,
) -> Option<&'static mut SockOwner> {
    let p = unsafe { bpf_sk_storage_get(map.as_ptr(), sk, core::ptr::null_mut(), flags) };
    unsafe { p.cast::<SockOwner>().as_mut() }
}

/// The storage of a socket the tracepoint programs count, if any: the
/// tracepoint design's own (`SOCKS`), or an adopted socket's note.
#[inline(always)]
pub fn owner(sk: *mut c_void) -> Option<&'static mut SockOwner> {
    if let Some(o) = storage(&SOCKS, sk, 0) {
        return Some(o);
    }
    storage(&NOTES, sk, 0).filter(|o| o.role != 0)
}

/// Deletes the state programs' storage on `sk`: the tracepoint design's,
/// and an adopted socket's note (an exclusion mark stays).
#[inline(always)]
pub fn forget(sk: *mut c_void) {
    unsafe { bpf_sk_storage_delete(SOCKS.as_ptr(), sk) };
    if note(sk).is_some_and(|n| n.role != 0) {
        unsafe { bpf_sk_storage_delete(NOTES.as_ptr(), sk) };
    }
}

/// The tracepoint design's storage on `sk`, if any.
#[inline(always)]
pub fn design_storage(sk: *mut c_void) -> Option<&'static mut SockOwner> {
    storage(&SOCKS, sk, 0)
}

/// Deletes the tracepoint design's storage on `sk`.
#[inline(always)]
pub fn forget_design_storage(sk: *mut c_void) {
    unsafe { bpf_sk_storage_delete(SOCKS.as_ptr(), sk) };
}

/// The tracepoint design's storage on `sk`, created zeroed if missing.
#[inline(always)]
pub fn owner_or_create(sk: *mut c_void) -> Option<&'static mut SockOwner> {
    storage(&SOCKS, sk, BPF_SK_STORAGE_GET_F_CREATE.into())
}

/// The note on `sk`, if any (see `maps::NOTES`).
#[inline(always)]
pub fn note(sk: *mut c_void) -> Option<&'static mut SockOwner> {
    storage(&NOTES, sk, 0)
}

/// [`note`] for a typed TCP socket, with a plain load first: nearly every
/// socket carries no storage at all.
#[inline(always)]
pub fn note_of(sk: *mut c_void) -> Option<&'static mut SockOwner> {
    let off = global(&SK_STORAGE_OFFSET);
    if off != 0 && load::<*const c_void>(sk, off).is_null() {
        return None;
    }
    note(sk)
}

/// The note on `sk`, created zeroed if missing.
#[inline(always)]
pub fn note_or_create(sk: *mut c_void) -> Option<&'static mut SockOwner> {
    storage(&NOTES, sk, BPF_SK_STORAGE_GET_F_CREATE.into())
}

/// Whether this install counts the flagged socket `sk` (its note says
/// so; see `control::RECOUNT`).
#[inline(always)]
pub fn recounted(sk: *mut c_void) -> bool {
    note_of(sk).is_some_and(|n| n.recounted != 0)
}

/// Notes that this install counts the flagged socket `sk`. Returns false
/// if the note could not be made.
#[inline(always)]
pub fn mark_recounted(sk: *mut c_void) -> bool {
    match note_or_create(sk) {
        Some(n) => {
            n.recounted = 1;
            true
        }
        None => false,
    }
}

/// Drops the recount mark of `sk` once `control::RECOUNT` is clear, and
/// the note with it if nothing else is noted there.
#[inline(always)]
pub fn unmark_recounted(sk: *mut c_void) {
    let Some(n) = note_of(sk) else {
        return;
    };
    if n.recounted == 0 {
        return;
    }
    n.recounted = 0;
    if n.role == 0 && n.ignored == 0 && n.ignored_generation == 0 {
        unsafe { bpf_sk_storage_delete(NOTES.as_ptr(), sk) };
    }
}

/// The sock_ops callback flags of the TCP socket `tp` (see `sockops.rs`);
/// 0 when unknown.
#[inline(always)]
pub fn ops_flags(tp: *const c_void) -> u32 {
    let off = global(&TCP_CB_FLAGS_OFFSET);
    if off == 0 {
        return 0;
    }
    read::<u8>(tp, off).map_or(0, u32::from)
}

/// Whether `sk` is a TCP socket. `inet_sock_set_state` also fires for other
/// protocols built on inet connection sockets (MPTCP's parent socket);
/// counting those would count one connection twice. Unknown offset: assume TCP.
#[inline(always)]
pub fn is_tcp(sk: *const c_void) -> bool {
    let off = global(&SK_PROTOCOL_OFFSET);
    if off == 0 {
        return true;
    }
    // Unreadable: assume TCP, as when the offset is unknown.
    read::<u16>(sk, off).is_none_or(|p| p == IPPROTO_TCP)
}

/// The socket's TCP state, read directly: the iterator has no tracepoint
/// argument to give it.
#[inline(always)]
pub fn state(sk: *const c_void) -> Option<u32> {
    let off = global(&SKC_STATE_OFFSET);
    if off == 0 {
        return None;
    }
    read::<u8>(sk, off).map(u32::from)
}
