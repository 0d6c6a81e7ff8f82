//! What `graceful doctor --json` says in the environments that stop an
//! agent after an install, each made on purpose: what `kubectl graceful
//! preflight` relays from every node before one. A runtime's seccomp
//! profile that refuses bpf(), a node without a bpffs at /sys/fs/bpf, and
//! pod networks of one family or none.

use std::{
    os::unix::process::CommandExt,
    process::{Command, Output},
};

use graceful_tests::{agent::graceful_bin, netns::NetNs, unique};
use serde_json::Value;

use crate::require_root;

/// The doctor's findings and exit code, run as `cmd` says.
fn findings(mut cmd: Command) -> (Vec<Value>, Option<i32>) {
    let pins = format!("/sys/fs/bpf/{}", unique("doctor"));
    let out: Output = cmd.env("GRACEFUL_PIN_DIR", &pins).output().unwrap();
    assert!(!std::path::Path::new(&pins).exists(), "the doctor made {pins}");
    let text = String::from_utf8_lossy(&out.stdout);
    let list: Vec<Value> = serde_json::from_str(text.trim()).unwrap_or_else(|e| {
        panic!(
            "not one JSON array ({e}): {text}{}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (list, out.status.code())
}

/// The finding named `check`: its level and message.
fn finding<'a>(list: &'a [Value], check: &str) -> (&'a str, &'a str) {
    let f = list
        .iter()
        .find(|f| f["check"] == check)
        .unwrap_or_else(|| panic!("no {check} finding: {list:?}"));
    (f["level"].as_str().unwrap(), f["message"].as_str().unwrap())
}

#[test]
fn a_seccomp_profile_that_refuses_bpf_is_named_in_one_finding() {
    require_root!();
    let (here, code) = findings({
        let mut c = Command::new(graceful_bin());
        c.args(["doctor", "--json"]);
        c
    });
    assert_eq!(code, Some(0), "{here:?}");
    assert_eq!(finding(&here, "seccomp").0, "ok");

    let mut cmd = Command::new(graceful_bin());
    cmd.args(["doctor", "--json"]);
    // SAFETY: the filter's installation makes only prctl calls.
    unsafe {
        cmd.pre_exec(|| graceful_tests::seccomp::refuse(libc::SYS_bpf));
    }
    let (list, code) = findings(cmd);
    assert_eq!(code, Some(1), "{list:?}");
    let (level, message) = finding(&list, "seccomp");
    assert_eq!(level, "fail", "{message}");
    assert!(
        message.contains("refuses bpf()") && message.contains("seccompProfile to Unconfined"),
        "{message}"
    );
    assert!(!message.contains("setns"), "setns() was let through: {message}");
    // The trial load meets the same refusal; the seccomp line says why.
    assert_eq!(finding(&list, "programs").0, "fail", "{list:?}");
    eprintln!("seccomp refusing bpf(): {message}");
}

#[test]
fn no_bpffs_at_sys_fs_bpf_fails_the_bpffs_finding() {
    require_root!();
    // A private mount namespace whose /sys/fs/bpf is a tmpfs: the node's
    // mounts are untouched, and it goes with the process.
    let script = format!(
        "mount -t tmpfs graceful-test-not-bpffs /sys/fs/bpf && exec {} doctor --json --no-load",
        graceful_bin().display()
    );
    let mut cmd = Command::new("unshare");
    cmd.args(["-m", "--propagation", "private", "sh", "-c", &script]);
    let (list, code) = findings(cmd);
    assert_eq!(code, Some(1), "{list:?}");
    let (level, message) = finding(&list, "bpffs");
    assert_eq!(level, "fail", "{message}");
    eprintln!("no bpffs: {message}");
}

#[test]
fn each_address_family_and_none_in_a_pods_namespace() {
    require_root!();
    let doctor = |ns: &NetNs| {
        let mut c = Command::new("nsenter");
        c.arg(format!("--net={}", ns.path()))
            .arg(graceful_bin())
            .args(["doctor", "--json", "--no-load"]);
        findings(c)
    };
    // Loopback alone: nothing can reach a probe (a warning: a host
    // without a network runs the agent).
    let bare = NetNs::create();
    let (list, _) = doctor(&bare);
    let (level, message) = finding(&list, "network");
    assert_eq!(level, "warn", "{message}");
    assert!(message.contains("no address but loopback"), "{message}");

    // One family each, on a veth pair whose both ends are inside the
    // namespace (this kernel has no dummy interfaces).
    for (family, addr, says) in [
        ("-6", "fd00:6773::5/64", "IPv6 only (fd00:6773::5)"),
        ("-4", "10.214.0.5/24", "IPv4 only (10.214.0.5)"),
    ] {
        let ns = NetNs::create();
        ns.exec(
            "ip",
            &["link", "add", "gtd0", "type", "veth", "peer", "name", "gtd1"],
        );
        let mut add = vec![family, "addr", "add", addr, "dev", "gtd0"];
        if family == "-6" {
            add.push("nodad");
        }
        ns.exec("ip", &add);
        ns.exec("ip", &["link", "set", "gtd0", "up"]);
        ns.exec("ip", &["link", "set", "gtd1", "up"]);
        let (list, _) = doctor(&ns);
        let (level, message) = finding(&list, "network");
        assert_eq!(level, "ok", "{message}");
        assert!(message.starts_with(says), "{message}");
        assert!(message.contains("both families"), "{message}");
        eprintln!("{family}: {message}");
    }
}
