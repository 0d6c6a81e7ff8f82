//! A cgroup's v2 id, read from kernel memory at offsets the loader found
//! in the running kernel's BTF: the id is the inode number of the
//! cgroup's directory, `cgroup->kn->id`.

use core::ffi::c_void;

use crate::kmem::{global, load, read};

/// Offsets from the running kernel's BTF, set by the loader: `kn` in
/// `struct cgroup`, `id` in `struct kernfs_node`. Neither field is first
/// in its struct, so 0 means "unknown".
#[unsafe(no_mangle)]
static CGROUP_KN_OFFSET: u32 = 0;
#[unsafe(no_mangle)]
static KERNFS_NODE_ID_OFFSET: u32 = 0;

/// Whether the loader set the offsets [`id`] needs.
#[inline(always)]
pub fn known() -> bool {
    global(&CGROUP_KN_OFFSET) != 0 && global(&KERNFS_NODE_ID_OFFSET) != 0
}

/// [`id`] for a pointer the verifier types as `struct cgroup *`: two
/// plain loads (see `kmem::load`).
#[inline(always)]
pub fn id_typed(cgrp: *const c_void) -> u64 {
    let kn: *const c_void = load(cgrp, global(&CGROUP_KN_OFFSET));
    load(kn, global(&KERNFS_NODE_ID_OFFSET))
}

/// The v2 id of the `struct cgroup` at `cgrp`.
#[inline(always)]
pub fn id(cgrp: *const c_void) -> Option<u64> {
    let kn = read::<*const c_void>(cgrp, global(&CGROUP_KN_OFFSET))?;
    read::<u64>(kn, global(&KERNFS_NODE_ID_OFFSET))
}
