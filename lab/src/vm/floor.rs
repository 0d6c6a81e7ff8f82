//! graceful's kernel floor, read from the agent's own source
//! (`graceful-daemon/src/kernel/version.rs`, `FLOOR`), so that vm-test and the
//! agent cannot disagree on which guests run the suite and which only
//! check the refusal.

/// The kernel tests a guest below the floor runs (libtest's filter): the
/// agent and `graceful doctor` refuse the kernel in one line.
pub const REFUSAL_TESTS: &str = "floor::";

const KERNEL_RS: &str = include_str!("../../../graceful-daemon/src/kernel/version.rs");

/// `(major, minor)` from `pub const FLOOR: (u32, u32) = (6, 1);` in `source`.
fn parse_floor(source: &str) -> Option<(u32, u32)> {
    let line = source.lines().find(|l| l.starts_with("pub const FLOOR:"))?;
    let tuple = line.rsplit_once('=')?.1.trim().trim_end_matches(';').trim();
    let (major, minor) = tuple.strip_prefix('(')?.strip_suffix(')')?.split_once(',')?;
    Some((major.trim().parse().ok()?, minor.trim().parse().ok()?))
}

pub fn floor() -> (u32, u32) {
    parse_floor(KERNEL_RS)
        .expect("graceful-daemon/src/kernel/version.rs defines `pub const FLOOR: (u32, u32) = (x, y);`")
}

/// Major and minor of a release such as `5.10.0-46-amd64`.
fn version(release: &str) -> Option<(u32, u32)> {
    let mut it = release.split(|c: char| !c.is_ascii_digit());
    Some((it.next()?.parse().ok()?, it.next()?.parse().ok()?))
}

/// Whether the agent refuses `release` (an unparsable one runs the suite).
pub fn below(release: &str) -> bool {
    version(release).is_some_and(|v| v < floor())
}

#[cfg(test)]
mod tests;
