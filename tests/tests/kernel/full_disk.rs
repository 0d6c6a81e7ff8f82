//! A full disk at start-up: the agent stops in one line naming the file
//! it could not write, and leaves no half-copied binary behind.

use std::process::Output;

use graceful_tests::{
    agent::{graceful, graceful_bin, Agent},
    tinyfs::TinyFs,
};

use crate::require_root;

/// The last line of the daemon's stderr: its error.
fn last_line(out: &Output) -> String {
    let stderr = String::from_utf8_lossy(&out.stderr);
    stderr.lines().last().unwrap_or_default().to_string()
}

#[test]
fn a_full_gate_dir_names_its_file_and_leaves_no_temporary_copy() {
    require_root!();
    let fs = TinyFs::mount("tinyfs");
    let gate = fs.dir().join("gate");
    let wait_bin = graceful_bin().with_file_name("graceful-wait");
    let agent = Agent::new();
    let out = graceful(
        &agent.pin_dir,
        &[
            "daemon",
            "--api-addr",
            "127.0.0.1:0",
            "--gate-dir",
            gate.to_str().unwrap(),
            "--wait-bin",
            wait_bin.to_str().unwrap(),
        ],
    );
    let last = last_line(&out);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let tmp = gate.join(".graceful-wait.tmp");
    assert!(
        last.contains(&tmp.display().to_string()) && last.contains("No space left on device"),
        "{last}"
    );
    assert!(!tmp.exists(), "the failed copy was left at {}", tmp.display());
    assert!(!gate.join("graceful-wait").exists());
}
