use super::*;

#[test]
fn sidecars_stop_after_the_apps_the_last_first() {
    let r = ranks(["app", "worker"], &["mesh", "log"]);
    assert_eq!(
        r.into_iter().collect::<Vec<_>>(),
        [
            ("app".to_string(), 0),
            ("log".to_string(), 1),
            ("mesh".to_string(), 2),
            ("worker".to_string(), 0)
        ]
    );
}

fn names(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

#[test]
fn a_wait_for_a_container_stopped_later_is_left_out_with_a_warning() {
    let r = ranks(["app", "worker"], &["mesh", "log"]);
    // The app waits for the mesh sidecar: it would wait for its deadline.
    let (kept, w) = check(names(&["mesh", "worker"]), Some("app"), &r);
    assert_eq!(kept, names(&["worker"]));
    assert_eq!(w.len(), 1);
    assert!(
        w[0].contains("after-containers names mesh") && w[0].contains("after app has exited"),
        "{w:?}"
    );
    // The log sidecar (stopped first of the two) waits for mesh, stopped after it.
    let (kept, w) = check(names(&["mesh"]), Some("log"), &r);
    assert!(kept.is_empty() && w.len() == 1);
    // Redundant but possible: a sidecar waiting for the app, or mesh for log.
    for (after, caller) in [
        (&["app"][..], "mesh"),
        (&["log"][..], "mesh"),
        (&["app"][..], "log"),
    ] {
        let (kept, w) = check(names(after), Some(caller), &r);
        assert_eq!((kept, w), (names(after), vec![]));
    }
}

#[test]
fn without_the_pods_spec_or_for_an_id_prefix_nothing_is_left_out() {
    let r = ranks(["app"], &["mesh"]);
    let (kept, w) = check(names(&["mesh"]), None, &r);
    assert_eq!((kept, w), (names(&["mesh"]), vec![]));
    let (kept, w) = check(names(&["4f1e"]), Some("app"), &r);
    assert_eq!((kept, w), (names(&["4f1e"]), vec![]));
    let (kept, w) = check(names(&["mesh"]), Some("app"), &Ranks::new());
    assert_eq!((kept, w), (names(&["mesh"]), vec![]));
}
