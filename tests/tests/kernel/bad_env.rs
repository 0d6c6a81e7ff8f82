//! Bad environments: each gives one clear line and a non-zero exit, and
//! leaves nothing behind.

use std::{
    os::unix::process::CommandExt,
    path::Path,
    process::{Command, Output},
};

use aya::maps::{Array, Map, MapData};
use graceful_common::Meta;
use graceful_tests::agent::{graceful, graceful_bin, output_within, Agent};

use crate::require_root;

/// Exactly one non-empty line on stderr, containing `needle`; non-zero exit.
fn one_clear_line(out: &Output, needle: &str) {
    let err = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
    assert!(!out.status.success(), "expected failure, got success: {err}");
    assert_eq!(lines.len(), 1, "expected one line, got:\n{err}");
    assert!(lines[0].contains(needle), "expected {needle:?} in {:?}", lines[0]);
}

#[test]
fn pin_dir_off_the_bpffs_is_refused_and_left_alone() {
    require_root!();
    let dir = std::env::temp_dir().join(graceful_tests::unique("notbpf"));
    let out = graceful(&dir, &["daemon"]);
    one_clear_line(&out, "is not on a bpffs");
    assert!(!dir.exists(), "{} was created", dir.display());
}

#[test]
fn missing_cgroup_path_is_one_line() {
    require_root!();
    let agent = Agent::new();
    let out = graceful(
        &agent.pin_dir,
        &["cgroups", "--path", "/graceful-test-no-such-cgroup"],
    );
    one_clear_line(&out, "does not exist");
}

#[test]
fn not_root_is_one_line() {
    require_root!();
    let out = Command::new(graceful_bin())
        .args(["cgroups"])
        .process_group(0)
        .uid(65534)
        .gid(65534)
        .output()
        .unwrap();
    one_clear_line(&out, "needs root");
}

#[test]
fn unknown_argument_is_one_line() {
    let out = Command::new(graceful_bin())
        .args(["cgroups", "--bogus"])
        .output()
        .unwrap();
    one_clear_line(&out, "--bogus");
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn nothing_installed_is_one_line() {
    require_root!();
    let agent = Agent::new();
    let out = graceful(&agent.pin_dir, &["cgroups"]);
    one_clear_line(&out, "no graceful maps are pinned");
    assert!(!agent.pin_dir.exists());
}

/// In a mount namespace of its own with no bpffs at /sys/fs/bpf, the agent
/// mounts one itself and works; the host sees nothing of it.
#[test]
fn agent_mounts_a_missing_bpffs() {
    require_root!();
    let name = graceful_tests::unique("nobpffs");
    // Its API socket too, never the node's under /run/graceful.
    let sock = std::env::temp_dir().join(format!("{name}.api.sock"));
    // The daemon goes down with the script whatever happens: alive, it would
    // hold the script's output open and the test would wait for ever. The
    // pins are ready when `cgroups` reads them, not when the first file
    // appears: the agent writes the layout map just after pinning the maps.
    let script = format!(
        "export GRACEFUL_API_SOCKET={sock}; \
         umount -l /sys/fs/bpf 2>/dev/null; \
         if grep -q ' /sys/fs/bpf bpf' /proc/self/mounts; then echo still mounted; exit 3; fi; \
         GRACEFUL_PIN_DIR=/sys/fs/bpf/{name} {bin} daemon & pid=$!; \
         trap 'kill -TERM $pid 2>/dev/null' EXIT; \
         ok=; for i in $(seq 100); do \
           GRACEFUL_PIN_DIR=/sys/fs/bpf/{name} {bin} cgroups -a -o json >/dev/null 2>&1 && ok=1 && break; sleep 0.1; \
         done; \
         [ -n \"$ok\" ] || {{ GRACEFUL_PIN_DIR=/sys/fs/bpf/{name} {bin} cgroups -a -o json >/dev/null; exit 4; }}; \
         kill -TERM $pid; wait $pid; GRACEFUL_PIN_DIR=/sys/fs/bpf/{name} {bin} uninstall >/dev/null",
        bin = graceful_bin().display(),
        sock = sock.display(),
    );
    let child = Command::new("unshare")
        .args(["-m", "--propagation", "private", "sh", "-c", &script])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let out = output_within(child, std::time::Duration::from_secs(90), "the bpffs script");
    let _ = std::fs::remove_file(&sock);
    let _ = std::fs::remove_file(graceful::agent::claim::api_lock_path(&sock));
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!Path::new("/sys/fs/bpf").join(&name).exists());
}

/// Rewrites the layout record pinned at `meta_path`.
fn edit_meta(meta_path: &Path, edit: impl FnOnce(&mut Meta)) {
    let data = MapData::from_pin(meta_path).unwrap();
    let mut meta: Array<MapData, Meta> = Array::try_from(Map::Array(data)).unwrap();
    let mut m = meta.get(&0, 0).unwrap();
    edit(&mut m);
    meta.set(0, m, 0).unwrap();
}

/// Runs `graceful daemon` with `args` on `pin_dir` until its pinned maps
/// read well, stops it with SIGTERM, and returns what it logged (warnings
/// and up).
fn agent_log_until_readable(pin_dir: &Path, args: &[&str]) -> String {
    let mut child = Command::new(graceful_bin())
        .arg("daemon")
        .args(args)
        .env("GRACEFUL_PIN_DIR", pin_dir)
        .env(
            "GRACEFUL_API_SOCKET",
            graceful_tests::agent::api_sock_for(pin_dir),
        )
        .env("RUST_LOG", "warn")
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let limit = std::time::Duration::from_secs(graceful_tests::agent::start_limit_secs());
    let t0 = std::time::Instant::now();
    while !graceful(pin_dir, &["cgroups", "-a", "-o", "json"])
        .status
        .success()
    {
        if t0.elapsed() > limit {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "the agent's pins were not readable after {limit:?}; its log:\n{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let out = output_within(
        child,
        std::time::Duration::from_secs(60),
        "the agent after SIGTERM",
    );
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Pins of another layout are refused with a clear line and left as they
/// were, until the operator chooses to replace them.
#[test]
fn changed_map_layout_is_detected_not_misread() {
    require_root!();
    let mut agent = Agent::started();
    agent.stop();
    let meta_path = agent.pin_dir.join("maps/GRACEFUL_META");
    edit_meta(&meta_path, |m| m.layout_version = 999);

    for cmd in [&["daemon"][..], &["cgroups"][..]] {
        let out = graceful(&agent.pin_dir, cmd);
        one_clear_line(&out, "layout v999");
        assert!(String::from_utf8_lossy(&out.stderr).contains("graceful uninstall"));
    }
    assert!(meta_path.exists(), "refusing must not remove the pins");

    let log = agent_log_until_readable(&agent.pin_dir, &["--replace-incompatible-pins"]);
    assert!(log.contains("replacing incompatible pins"), "{log}");
}

#[test]
fn doctor_passes_here_and_fails_clearly_without_privileges() {
    require_root!();
    let out = Command::new(graceful_bin()).args(["doctor"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "doctor failed on this machine:\n{text}");
    for check in ["kernel", "privileges", "btf", "cgroup2", "programs", "exits"] {
        assert!(
            text.lines().any(|l| l.starts_with("ok") && l.contains(check)),
            "no ok line for {check}:\n{text}"
        );
    }
    let out = Command::new(graceful_bin())
        .args(["doctor"])
        .uid(65534)
        .gid(65534)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    let fails: Vec<&str> = text.lines().filter(|l| l.starts_with("FAIL")).collect();
    assert!(
        fails
            .iter()
            .any(|l| l.contains("privileges") && l.contains("CAP_BPF")),
        "{text}"
    );
    assert!(
        fails.iter().any(|l| l.contains("programs") && l.contains("sudo")),
        "{text}"
    );
}

/// The probes and Prometheus ask the API's address: an agent that cannot
/// serve it stops, in one line naming it, rather than run on without.
#[test]
fn a_busy_api_address_stops_the_start_in_one_line() {
    require_root!();
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let agent = Agent::new();
    let out = graceful(&agent.pin_dir, &["daemon", "--api-addr", &addr]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    let last = err.lines().last().unwrap_or_default();
    assert!(
        last.starts_with("graceful: cannot serve the local API on") && last.contains(&addr),
        "{err}"
    );
    assert!(!err.contains(" ready"), "the agent went on: {err}");
    drop(taken);
}

#[test]
fn a_malformed_api_address_is_one_line() {
    // A pin directory of its own, should the address pass and an agent
    // start (as it did before the flag was checked): never the node's.
    let agent = Agent::new();
    let child = Command::new(graceful_bin())
        .args(["daemon", "--api-addr", "notanaddr"])
        .env("GRACEFUL_PIN_DIR", &agent.pin_dir)
        .env("GRACEFUL_API_SOCKET", agent.api_sock())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let out = output_within(
        child,
        std::time::Duration::from_secs(20),
        "graceful daemon --api-addr notanaddr",
    );
    one_clear_line(&out, "\"notanaddr\" is not an address");
    assert_eq!(out.status.code(), Some(2));
}

/// An agent killed between pinning its maps and writing their layout
/// record leaves an empty record. A reader waits briefly for a starting
/// agent, then says what happened in one line; the next agent takes the
/// pins over by itself (nothing was ever attached to them).
#[test]
fn an_unfinished_start_is_explained_and_taken_over() {
    require_root!();
    let mut agent = Agent::started();
    agent.stop();
    let meta_path = agent.pin_dir.join("maps/GRACEFUL_META");
    edit_meta(&meta_path, |m| *m = Meta::default());

    let t0 = std::time::Instant::now();
    let out = graceful(&agent.pin_dir, &["cgroups"]);
    one_clear_line(&out, "still empty");
    assert!(String::from_utf8_lossy(&out.stderr).contains("graceful uninstall"));
    assert!(
        t0.elapsed() >= std::time::Duration::from_secs(2),
        "the reader should have waited for a starting agent first"
    );
    assert!(meta_path.exists(), "a reader must not remove the pins");

    let log = agent_log_until_readable(&agent.pin_dir, &[]);
    assert!(log.contains("died while starting"), "{log}");
}
