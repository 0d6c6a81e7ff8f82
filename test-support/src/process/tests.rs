use std::{process::Command, time::Duration};

use super::*;

fn sh(script: &str) -> Command {
    let mut cmd = Command::new("sh");
    cmd.args(["-c", script]);
    cmd
}

#[test]
fn output_within_returns_what_the_child_wrote() {
    let child = sh("echo out; echo err >&2; exit 3")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let out = output_within(child, Duration::from_secs(10)).unwrap();
    assert_eq!(out.status.code(), Some(3));
    assert_eq!(out.stdout, b"out\n");
    assert_eq!(out.stderr, b"err\n");
}

#[test]
fn a_child_past_its_limit_is_killed_and_named_with_its_stderr() {
    let child = sh("echo started >&2; exec sleep 30")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let err = output_within(child, Duration::from_millis(300)).unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::TimedOut);
    assert!(err.to_string().contains("started"), "{err}");
    assert!(
        !std::path::Path::new(&format!("/proc/{pid}")).exists(),
        "pid {pid} still there"
    );
}

#[test]
fn terminate_stops_a_child_that_honours_sigterm() {
    let mut child = sh("exec sleep 30").spawn().unwrap();
    let status = terminate(&mut child, Duration::from_secs(10)).unwrap();
    use std::os::unix::process::ExitStatusExt as _;
    assert_eq!(status.signal(), Some(libc::SIGTERM));
}

#[test]
fn terminate_kills_a_child_that_ignores_sigterm_and_says_so() {
    // The shell ignores TERM, then says it is ready, so the signal cannot
    // arrive before the trap.
    let mut child = sh("trap '' TERM; echo ready; while :; do sleep 1; done")
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut ready = String::new();
    BufReader::new(child.stdout.as_mut().unwrap())
        .read_line(&mut ready)
        .unwrap();
    let err = terminate(&mut child, Duration::from_millis(300)).unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::TimedOut);
    assert!(child.try_wait().unwrap().is_some(), "reaped after the kill");
}

#[test]
fn a_line_child_answers_each_line_and_reports_its_end() {
    let mut c = LineChild::spawn(&mut sh("while read l; do echo \"got $l\"; done")).unwrap();
    assert_eq!(c.request("a").unwrap(), "got a");
    assert_eq!(c.request("b c").unwrap(), "got b c");
    let (mut child, stdin, _out) = c.into_parts();
    drop(stdin);
    assert!(child.wait().unwrap().success());

    let mut gone = LineChild::spawn(&mut sh("exit 0")).unwrap();
    let err = gone.request("x").unwrap_err();
    assert!(
        matches!(
            err.kind(),
            io::ErrorKind::UnexpectedEof | io::ErrorKind::BrokenPipe
        ),
        "{err}"
    );
}
