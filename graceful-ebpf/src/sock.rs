//! Socket-level helpers: our storage on a socket, and the two struct fields
//! we read, at offsets the agent found in the running kernel's BTF.

use core::ffi::c_void;

use aya_ebpf::{bindings::BPF_SK_STORAGE_GET_F_CREATE, helpers::generated::bpf_sk_storage_get};
use graceful_common::SockOwner;

use crate::{
    kmem::{global, read},
    maps::SOCKS,
};

/// Byte offset of `skc_state` in `struct sock_common`. Set by the loader
/// from `/sys/kernel/btf/vmlinux`: Rust eBPF has no CO-RE relocations, so no
/// struct offset is compiled in.
#[unsafe(no_mangle)]
static SKC_STATE_OFFSET: u32 = 0;
/// Byte offset of `sk_protocol` (u16) in `struct sock`; 0 means unknown.
#[unsafe(no_mangle)]
static SK_PROTOCOL_OFFSET: u32 = 0;

const IPPROTO_TCP: u16 = 6;

/// Our storage on `sk`, if any.
#[inline(always)]
pub fn owner(sk: *mut c_void) -> Option<&'static mut SockOwner> {
    let p = unsafe { bpf_sk_storage_get(SOCKS.as_ptr(), sk, core::ptr::null_mut(), 0) };
    unsafe { p.cast::<SockOwner>().as_mut() }
}

/// Our storage on `sk`, created zeroed if missing.
#[inline(always)]
pub fn owner_or_create(sk: *mut c_void) -> Option<&'static mut SockOwner> {
    let p = unsafe {
        bpf_sk_storage_get(
            SOCKS.as_ptr(),
            sk,
            core::ptr::null_mut(),
            BPF_SK_STORAGE_GET_F_CREATE.into(),
        )
    };
    unsafe { p.cast::<SockOwner>().as_mut() }
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
