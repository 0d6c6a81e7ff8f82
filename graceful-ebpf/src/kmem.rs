//! Reading kernel memory at offsets the agent found in the running
//! kernel's BTF: Rust eBPF has no CO-RE relocations, so no struct offset is
//! compiled in. The loader patches each offset global in `.rodata`.

use core::ffi::c_void;

use aya_ebpf::helpers::generated::bpf_probe_read_kernel;

/// An offset global's value.
#[inline(always)]
pub fn global(v: &'static u32) -> u32 {
    // Volatile, or the compiler folds the placeholder 0 into the code
    // before the loader patches .rodata.
    unsafe { core::ptr::read_volatile(v) }
}

/// The `T` at `base + off`, where `base` is a pointer the verifier knows
/// the BTF type of (a program's typed argument, a `bpf_skc_to_*` result, or
/// a pointer field read this way) and `off` an offset global: a plain load,
/// which the verifier checks against the type and the kernel guards
/// against faults. Several times cheaper than [`read`], a helper call. The
/// field at `off` must be one the caller knows exists (see `sock.rs`).
#[inline(always)]
pub fn load<T: Copy>(base: *const c_void, off: u32) -> T {
    unsafe { core::ptr::read_volatile(base.cast::<u8>().add(off as usize).cast::<T>()) }
}

/// The `T` at `base + off` in kernel memory, if it can be read.
#[inline(always)]
pub fn read<T: Copy>(base: *const c_void, off: u32) -> Option<T> {
    if base.is_null() {
        return None;
    }
    // SAFETY: only integers and pointers are read, for which zero is valid.
    let mut v: T = unsafe { core::mem::zeroed() };
    let ret = unsafe {
        bpf_probe_read_kernel(
            core::ptr::from_mut(&mut v).cast(),
            core::mem::size_of::<T>() as u32,
            base.cast::<u8>().add(off as usize).cast(),
        )
    };
    (ret == 0).then_some(v)
}
