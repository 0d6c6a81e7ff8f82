//! A host user's attack with a delegated cgroup subtree (as systemd gives
//! `user@UID.service`), in which they make cgroups named like a victim
//! pod's (`kubepods.slice/.../kubepods-burstable-pod<victim>.slice/...`):
//! outside the kubelet's pod cgroup roots, such a name is no pod. The
//! gate takes its process for no pod at all, and its connections count
//! in no drain of the victim's.

use std::time::Instant;

use graceful_tests::{
    agent::Agent,
    cgroup::Cgroup,
    gate::{finish, hook},
    peer::held_connections,
    pod::SimPod,
};

use crate::require_root;

#[test]
fn a_pod_shaped_cgroup_outside_the_kubelets_roots_is_no_pod() {
    require_root!();
    let agent = Agent::started_with_gate();
    let victim = SimPod::create(1);
    let slice_uid = victim.uid.replace('-', "_");
    let crafted = Cgroup::create(&format!(
        "/graceful-test-crafted-{}/user.slice/user-1000.slice/user@1000.service/kubepods.slice/\
         kubepods-burstable.slice/kubepods-burstable-pod{slice_uid}.slice/cri-containerd-{:0>64}.scope",
        std::process::id(),
        "c0ffee"
    ));

    // Its process asks the gate: not a pod, refused at once, and the hook
    // fails open.
    let t = Instant::now();
    let (report, out) = finish(hook(
        &agent,
        &crafted,
        &["--max", "20s", "--fallback-sleep", "0s"],
    ));
    let took = t.elapsed();
    assert_eq!(report["reason"], "agent-unreachable", "{out}");
    assert!(out.contains("is not in a Kubernetes pod"), "{out}");
    eprintln!("the crafted cgroup's hook was refused in {took:?}: {out}");

    // Its connections count in no drain of the victim's: 3 held open there,
    // and the victim's own drain (no connection of its own) releases as
    // drained at its settle, not at its deadline.
    let lb = Cgroup::unique("lb");
    let (_server, _clients) = held_connections(&crafted, &lb, 3);
    let out = graceful_tests::agent::graceful(&agent.pin_dir, &["pods", "-o", "json"]);
    let views: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let v = views
        .as_array()
        .and_then(|all| all.iter().find(|p| p["uid"] == victim.uid.as_str()))
        .unwrap_or_else(|| panic!("the victim in `graceful pods`: {views}"));
    assert_eq!(
        v["inbound_live"], 0,
        "the crafted cgroup counted as the victim's: {v}"
    );
    let (report, out) = finish(hook(
        &agent,
        victim.container(0),
        &[
            "--policy", "drained", "--min", "0s", "--settle", "100ms", "--max", "10s",
        ],
    ));
    assert_eq!(report["reason"], "drained", "{out}");
    assert!(report["waited_ms"].as_u64().unwrap() < 2000, "{out}");
    eprintln!(
        "the victim's drain, with 3 connections held in the crafted cgroup: {} after {} ms",
        report["reason"], report["waited_ms"]
    );
}
