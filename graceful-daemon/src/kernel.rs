//! The running kernel: its version, and the floor graceful supports.

/// The oldest kernel the VM tests prove (Debian bookworm's 6.1). Features
/// used: tp_btf, BPF_F_CLONE socket storage, socket storage and socket
/// cookies from tracing programs, iter/tcp, and cgroup ids in sock_diag.
pub const FLOOR: (u32, u32) = (6, 1);

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
    match parse_version(&rel) {
        Some(v) if v >= FLOOR => Ok(rel),
        Some(_) => Err(format!(
            "kernel {rel} is older than {}.{}, the oldest graceful supports: upgrade the node's kernel",
            FLOOR.0, FLOOR.1
        )),
        None => Err(format!("cannot parse kernel release {rel:?}")),
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
