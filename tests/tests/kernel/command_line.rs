//! The command lines, as an operator meets them: every command answers
//! `--help` on stdout with exit 0, and every duration flag, of the agent
//! and of the hook, takes the one syntax (graceful_api::duration) and
//! refuses anything else in one line that says what it accepts.

use std::process::{Command, Output};

use graceful_tests::agent::graceful_bin;

fn run(bin: &str, args: &[&str]) -> Output {
    let path = graceful_bin().with_file_name(bin);
    Command::new(&path)
        .args(args)
        .env_remove("RUST_LOG")
        .output()
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The subcommands `graceful --help` lists.
fn subcommands() -> Vec<String> {
    let out = run("graceful", &["--help"]);
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    text.lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .map(str::to_string)
        .collect()
}

#[test]
fn every_command_answers_help_on_stdout_with_exit_0() {
    let subs = subcommands();
    assert!(subs.len() >= 8 && subs.iter().any(|s| s == "daemon"), "{subs:?}");
    let mut calls: Vec<(&str, Vec<String>)> = vec![
        ("graceful", vec!["--help".into()]),
        ("graceful", vec!["-h".into()]),
        ("graceful-wait", vec!["--help".into()]),
        ("graceful-keeper", vec!["--help".into()]),
        ("graceful-wait", vec!["-h".into()]),
    ];
    calls.extend(
        subs.iter()
            .map(|s| ("graceful", vec![s.clone(), "--help".into()])),
    );
    for (bin, args) in calls {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = run(bin, &args);
        assert_eq!(out.status.code(), Some(0), "{bin} {args:?}: {out:?}");
        assert!(
            String::from_utf8_lossy(&out.stdout).contains("sage"),
            "{bin} {args:?}: no usage on stdout: {out:?}"
        );
        assert!(out.stderr.is_empty(), "{bin} {args:?} wrote to stderr: {out:?}");
    }
}

#[test]
fn every_duration_flag_takes_one_syntax_and_refuses_the_rest_in_one_line() {
    let flags: [(&str, &[&str], &str); 10] = [
        ("graceful", &["daemon"], "--gc-interval"),
        ("graceful", &["daemon"], "--repair-interval"),
        ("graceful", &["daemon"], "--repin-interval"),
        ("graceful", &["daemon"], "--stop-hold"),
        ("graceful", &["daemon"], "--shutdown-budget"),
        ("graceful-wait", &[], "--min"),
        ("graceful-wait", &[], "--max"),
        ("graceful-wait", &[], "--settle"),
        ("graceful-wait", &[], "--connect-timeout"),
        ("graceful-wait", &[], "--fallback-sleep"),
    ];
    for (bin, before, flag) in flags {
        for bad in ["5x", "1.5", "s", "1m30", "ten"] {
            let mut args = before.to_vec();
            args.extend([flag, bad]);
            let out = run(bin, &args);
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{bin} {args:?}: {out:?}");
            assert_eq!(
                err.trim_end().lines().count(),
                1,
                "{bin} {args:?}: not one line: {err}"
            );
            assert!(err.contains(flag), "{bin} {args:?}: does not name {flag}: {err}");
            assert!(
                err.contains("ms, s, m or h") || err.contains("like 500ms"),
                "{bin} {args:?}: does not say what is accepted: {err}"
            );
        }
    }
}

#[test]
fn the_keeper_run_by_hand_says_in_one_line_what_starts_it() {
    let out = run("graceful-keeper", &[]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("`graceful daemon --keeper on`"), "{err}");
    assert!(out.stdout.is_empty(), "{out:?}");
}

#[test]
fn a_keeper_of_another_build_than_its_agent_refuses_in_one_line() {
    let path = graceful_bin().with_file_name("graceful-keeper");
    let out = Command::new(&path)
        .args(["graceful", "daemon", "--keeper", "on"])
        .env("GRACEFUL_KEEPER_EXE_FD", "0")
        .env("GRACEFUL_KEEPER_SCRATCH", std::env::temp_dir())
        .env("GRACEFUL_KEEPER_VERSION", "0.0.1 (0123456789ab)")
        .env_remove("RUST_LOG")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("\"0.0.1 (0123456789ab)\": install the two from one build"),
        "{err}"
    );
}
