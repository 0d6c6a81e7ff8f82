use std::collections::BTreeSet;

use super::*;

fn set(entries: &[&str]) -> BTreeSet<String> {
    entries.iter().map(|e| e.to_string()).collect()
}

#[test]
fn what_the_tools_make_on_any_machine_is_not_a_trace() {
    // A fresh machine: none of these before the run; iptables, ip netns and
    // a mounted bpffs made them, and a test left /run/graceful.
    let before = set(&["/run/lock", "/var/lib/dpkg"]);
    let after = set(&[
        "/run/lock",
        "/var/lib/dpkg",
        "/run/netns",
        "/run/mount",
        "/run/xtables.lock",
        "/sys/fs/bpf/maps.debug",
        "/sys/fs/bpf/progs.debug",
        "/run/graceful",
    ]);
    assert_eq!(added(&before, &after), ["/run/graceful"]);
}

#[test]
fn entries_are_read_from_every_watched_directory() {
    let now = entries();
    assert!(now.iter().any(|e| e.starts_with("/etc/")), "{now:?}");
    assert!(now
        .iter()
        .all(|e| WATCHED.iter().any(|d| e.starts_with(&format!("{d}/")))));
}
