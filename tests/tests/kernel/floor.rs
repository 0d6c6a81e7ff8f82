//! The kernel floor (`graceful::kernel::version::FLOOR`). Below it, the agent and
//! `graceful doctor` refuse the kernel in one line that names what it
//! lacks. `cargo xtask vm-test` boots bullseye's 5.10 to run only these
//! tests. At or above the floor, doctor accepts the kernel.

use std::process::Command;

use graceful::kernel::version::{self, FLOOR, MISSING_BEFORE, MISSING_FEATURE};
use graceful_tests::agent::{graceful, graceful_bin, Agent};

use crate::require_root;

/// This kernel's release and `(major, minor)`.
fn running() -> (String, (u32, u32)) {
    let rel = version::release();
    let v = version::parse_version(&rel).unwrap_or_else(|| panic!("cannot parse {rel:?}"));
    (rel, v)
}

/// What the refusal must say on a kernel of version `v`.
fn refusal_names(v: (u32, u32)) -> String {
    if v < MISSING_BEFORE {
        MISSING_FEATURE.to_string()
    } else {
        format!("older than {}.{}", FLOOR.0, FLOOR.1)
    }
}

#[test]
fn the_agent_refuses_a_kernel_below_the_floor_in_one_line_and_starts_above_it() {
    require_root!();
    let (rel, v) = running();
    if v >= FLOOR {
        // The other side of the same line: this kernel is accepted, and
        // the agent comes up (`start` fails the test if it exits instead
        // of logging that it is ready).
        let mut agent = Agent::started();
        agent.stop();
        return;
    }
    let agent = Agent::new();
    let out = graceful(&agent.pin_dir, &["daemon"]);
    let err = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert_eq!(lines.len(), 1, "expected one line, got:\n{err}");
    let want = refusal_names(v);
    assert!(lines[0].contains(&want), "expected {want:?} in {:?}", lines[0]);
    assert!(lines[0].contains(&rel), "{:?} does not name {rel}", lines[0]);
    eprintln!("refused as it should be: {}", lines[0]);
}

#[test]
fn doctor_checks_the_kernel_against_the_floor() {
    require_root!();
    let (rel, v) = running();
    let out = Command::new(graceful_bin()).args(["doctor"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .find(|l| l.split_whitespace().nth(1) == Some("kernel"))
        .unwrap_or_else(|| panic!("doctor printed no kernel line:\n{text}"));
    if v >= FLOOR {
        assert!(line.starts_with("ok"), "{line}");
        assert!(line.contains(&format!("floor {}.{}", FLOOR.0, FLOOR.1)), "{line}");
        return;
    }
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(line.starts_with("FAIL"), "{line}");
    let want = refusal_names(v);
    assert!(
        line.contains(&want) && line.contains(&rel),
        "expected {want:?} and {rel} in {line:?}"
    );
    eprintln!("doctor: {line}");
}
