//! The running kernel: its version, and the floor graceful supports.

/// The oldest kernel the VM tests prove (Debian bookworm's 6.1). Features
/// used: sock_ops at the cgroup v2 root with BTF-typed socket reads,
/// tp_btf, iter/tcp, socket storage from tracing programs, socket cookies
/// in iterators, ring buffers, and cgroup ids in sock_diag.
///
/// Why not lower: below 5.11 the sockets older than the agent cannot be
/// counted to their end, which graceful's counts promise from its first
/// second. The sock_ops program would count every new connection there,
/// but an adopted socket carries storage that a tracing program (the
/// adoption iterator, the state program) must reach, and tracing programs
/// may call `bpf_sk_storage_get` only from 5.11 on. On Debian bullseye's
/// 5.10.0-46-amd64 (5.10.262-1) the verifier stops at the first call:
/// `unknown func bpf_sk_storage_get#107` (`cargo xtask vm-test --kernel
/// bullseye:5.10`, with the floor lowered). 5.11 to 6.0 are untested, so
/// the floor stays where a VM proved it.
pub const FLOOR: (u32, u32) = (6, 1);

/// What a kernel older than [`MISSING_BEFORE`] lacks: the refusal names it.
pub const MISSING_FEATURE: &str =
    "socket storage in tracing programs (bpf_sk_storage_get from tp_btf and iter/tcp), which counting the connections older than the agent needs";
/// The release that brought [`MISSING_FEATURE`].
pub const MISSING_BEFORE: (u32, u32) = (5, 11);

/// `uname -r`.
pub fn release() -> String {
    let mut u: libc::utsname = unsafe { std::mem::zeroed() };
    // SAFETY: valid out-pointer.
    if unsafe { libc::uname(&mut u) } != 0 {
        return String::from("unknown");
    }
    let bytes: Vec<u8> = u
        .release
        .iter()
        .take_while(|c| **c != 0)
        .map(|c| *c as u8)
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// Major and minor of a release string such as `6.1.0-50-amd64`.
pub fn parse_version(release: &str) -> Option<(u32, u32)> {
    let mut it = release.split(|c: char| !c.is_ascii_digit());
    let major = it.next()?.parse().ok()?;
    let minor = it.next()?.parse().ok()?;
    Some((major, minor))
}

/// An error line if the running kernel is older than [`FLOOR`].
pub fn check_floor() -> Result<String, String> {
    let rel = release();
    floor_error(&rel).map_or(Ok(rel), Err)
}

/// The refusal line for release `rel`, if it is below [`FLOOR`]: it names
/// the missing feature where the kernel is older than that.
pub fn floor_error(rel: &str) -> Option<String> {
    let floor = format!("{}.{}", FLOOR.0, FLOOR.1);
    match parse_version(rel) {
        Some(v) if v >= FLOOR => None,
        Some(v) if v < MISSING_BEFORE => Some(format!(
            "kernel {rel} lacks {MISSING_FEATURE}, which Linux {}.{} brought; graceful needs {floor} or newer: \
             upgrade the node's kernel",
            MISSING_BEFORE.0, MISSING_BEFORE.1
        )),
        Some(_) => Some(format!(
            "kernel {rel} is older than {floor}, the oldest graceful is tested on: upgrade the node's kernel"
        )),
        None => Some(format!("cannot parse kernel release {rel:?}")),
    }
}

/// Whether the effective user is root.
pub fn is_root() -> bool {
    // SAFETY: no arguments, no failure.
    unsafe { libc::geteuid() == 0 }
}

/// Effective capability set, from /proc/self/status.
pub fn effective_caps() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("CapEff:"))
                .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        })
        .unwrap_or(0)
}

#[cfg(test)]
mod tests;
