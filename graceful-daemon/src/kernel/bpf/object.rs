//! The kernel programs, embedded at build time (see build.rs).

/// The eBPF object built from `graceful-ebpf`. Empty when the crate was
/// built with `AYA_BUILD_SKIP=1`.
pub static OBJECT: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/graceful-ebpf"));

/// A short, stable fingerprint of the object. Link pins carry it in their
/// name, so an agent can tell its own programs from an older version's.
pub fn fingerprint() -> String {
    // FNV-1a: no dependency, and collisions only matter between versions of
    // this one object.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in OBJECT {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{h:016x}")
}
