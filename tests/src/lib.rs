//! Support for graceful's integration tests: real cgroups, network
//! namespaces, peer processes and the real agent, each cleaned up on drop.
//! The tests themselves are in `tests/kernel/` and `tests/cluster/`; the
//! one program here is their fixture, `graceful-peer`. The lab's programs
//! are crates of the lab's workspace: the benchmarks, the rollout and the
//! cluster demo (`lab/programs`) are built on this library.
pub mod agent;
pub mod cgroup;
pub mod cluster;
pub mod elf;
pub mod gate;
pub mod http_hook;
pub mod k8s;
pub mod mesh;
pub mod nested;
pub mod netns;
pub mod not_traffic;
pub mod oracle;
pub mod peer;
pub mod pod;
pub mod promtool;
pub mod rollout;
pub mod seccomp;
pub mod unix_http;

pub use graceful_test_support::{is_root, memcg, monotonic_ns, process, tinyfs, unique, which};

/// How late an event-driven release may land in a test. Tests prove *why*
/// a drain was released (the kernel's close event, a container's exit, the
/// end of a quiet window) and that it never came early; how fast is measured
/// side by side in `cargo xtask bench release-latency`, not asserted on a
/// machine that may be busy. A 1 s poll or a missed event, which these
/// tests exist to catch, lands far outside this slack: 400 ms on a host,
/// twice that in the kernel matrix's guests (`GRACEFUL_VM`), whose CPUs
/// qemu emulates on one host thread each beside the node's tests (a 6.1
/// guest once released a hook 414 ms after its container exited).
pub fn event_slack_ms() -> u64 {
    if std::env::var_os("GRACEFUL_VM").is_some() {
        800
    } else {
        400
    }
}

/// `name` as cargo built it into the running executable's target
/// directory, target/<profile>/: the directory of a binary of this crate,
/// or the one above a test's (target/<profile>/deps/).
pub fn built(name: &str) -> std::path::PathBuf {
    let exe = std::env::current_exe().expect("the running executable's path");
    let dir = exe.parent().expect("an executable in a directory");
    match dir.file_name() {
        Some(d) if d == "deps" => dir.parent().unwrap_or(dir).join(name),
        _ => dir.join(name),
    }
}

/// Runs `cmd` with `input` on its stdin; what it printed, and its status.
pub fn output_with_stdin(cmd: &mut std::process::Command, input: &str) -> std::process::Output {
    use std::{io::Write as _, process::Stdio};
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{:?}: {e}", cmd.get_program()));
    child.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
    child.wait_with_output().unwrap()
}

/// Runs a command, panicking with its output if it fails.
pub fn sh(cmd: &str, args: &[&str]) -> String {
    let out = std::process::Command::new(cmd)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{cmd}: {e}"));
    assert!(
        out.status.success(),
        "{cmd} {args:?} failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Polls `f` every 20 ms until it returns Some, for at most `secs`.
fn poll<T>(secs: u64, f: impl FnMut() -> Option<T>) -> Option<T> {
    use std::time::Duration;
    graceful_test_support::poll(Duration::from_secs(secs), Duration::from_millis(20), f)
}

/// Polls `f` until it returns Some, or panics after `secs` with `what`.
pub fn wait_for<T>(secs: u64, what: &str, f: impl FnMut() -> Option<T>) -> T {
    poll(secs, f).unwrap_or_else(|| panic!("timed out waiting for {what}"))
}

/// Polls `f` until what it returns is `want`, or panics after `secs`
/// with `what` and the last value seen.
pub fn wait_equal<T: PartialEq + std::fmt::Debug>(secs: u64, what: &str, want: T, mut f: impl FnMut() -> T) {
    let mut last = None;
    let done = poll(secs, || {
        let v = f();
        let hit = v == want;
        last = Some(v);
        hit.then_some(())
    });
    if done.is_none() {
        panic!("timed out waiting for {what}: {last:?} after {secs} s, not {want:?}");
    }
}
