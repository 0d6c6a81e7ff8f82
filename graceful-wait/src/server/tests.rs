use super::*;

#[test]
fn the_agent_is_root_outside_the_pods_pid_namespace() {
    let never = |_| panic!("a pid of 0 is not looked up");
    assert_eq!(check(Listener { pid: 0, uid: 0 }, never), Ok(()));
    // Visible, in another pid namespace (a hostPID pod sees the agent).
    assert_eq!(check(Listener { pid: 42, uid: 0 }, |_| false), Ok(()));
}

#[test]
fn another_uid_or_a_process_of_the_pod_is_refused() {
    let e = check(Listener { pid: 0, uid: 1000 }, |_| false).unwrap_err();
    assert!(e.contains("uid 1000, not root"), "{e}");
    let e = check(Listener { pid: 7, uid: 0 }, |p| p == 7).unwrap_err();
    assert!(e.contains("pid 7 of this pod's own processes"), "{e}");
}

#[test]
fn a_listener_of_this_process_is_seen_as_such() {
    let dir = std::env::temp_dir().join(format!("graceful-wait-server-{}", std::process::id()));
    let _ = std::fs::remove_file(&dir);
    let l = std::os::unix::net::UnixListener::bind(&dir).unwrap();
    let s = UnixStream::connect(&dir).unwrap();
    let who = listener(&s).unwrap();
    assert_eq!(who.pid, std::process::id() as i32);
    // The tests run in the node's pid namespace, where the agent runs too.
    assert!(in_the_nodes_pid_ns());
    assert!(!in_my_pid_ns(who.pid));
    assert_eq!(check(who, in_my_pid_ns), Ok(()));
    drop(l);
    let _ = std::fs::remove_file(&dir);
}
