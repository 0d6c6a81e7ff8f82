//! Scopes of the gate: a sidecar held by its pod's traffic, a container
//! released by its own connections, a proxy outliving named containers.

use std::time::Duration;

use graceful_tests::monotonic_ns;
use graceful_tests::{
    agent::Agent,
    cgroup::Cgroup,
    event_slack_ms,
    gate::{engaged, finish, finish_engaged, hook},
    peer::{addr, held_connections, Peer},
    pod::SimPod,
};

use crate::require_root;

#[test]
fn a_sidecar_with_scope_pod_is_held_until_the_app_has_drained() {
    require_root!();
    let agent = Agent::started_with_gate();
    let pod = SimPod::create(2); // 0: the app, 1: a policy-engine sidecar
    let lb = Cgroup::unique("lb");
    let (mut app, _clients) = held_connections(pod.container(0), &lb, 4);

    let mut sidecar = hook(
        &agent,
        pod.container(1),
        &[
            "--scope", "pod", "--min", "0s", "--settle", "100ms", "--max", "10s",
        ],
    );
    // The app drains once the drain is engaged, however slowly the hook
    // started (qemu), and a while after: the sidecar must be held meanwhile.
    let stdout = engaged(&mut sidecar);
    std::thread::sleep(Duration::from_millis(300));
    let closing = monotonic_ns();
    app.cmd("close-in 4 fin");
    let (report, out) = finish_engaged(sidecar, stdout);
    assert_eq!(report["reason"], "drained", "{out}");
    assert_eq!(report["inbound_at_start"], 4, "{out}");
    assert!(
        report["release_ns"].as_u64().unwrap() >= closing,
        "released before the app drained: {out}"
    );
    let after = report["after_last_close_ms"].as_u64().unwrap();
    assert!((100..=100 + event_slack_ms()).contains(&after), "{out}");
}

#[test]
fn a_container_with_scope_container_is_released_when_its_own_connections_close() {
    require_root!();
    let agent = Agent::started_with_gate();
    let pod = SimPod::create(2); // 0: HAProxy, 1: a WAF agent it calls over loopback
    let lb = Cgroup::unique("lb");
    let mut proxy = Peer::spawn(pod.container(0), None);
    let front = proxy.listen("127.0.0.1:0", "hold");
    let mut waf = Peer::spawn(pod.container(1), None);
    let spoa = waf.listen("127.0.0.1:0", "hold");
    let mut clients = Peer::spawn(&lb, None);
    clients.connect(&addr("127.0.0.1", front), 5); // the pod stays busy
    proxy.connect(&addr("127.0.0.1", spoa), 3); // the proxy's connections to the WAF
    graceful_tests::wait_for(10, "accepts", || {
        (waf.accepted() == 3 && proxy.accepted() == 5).then_some(())
    });

    let mut waf_hook = hook(
        &agent,
        pod.container(1),
        &[
            "--scope",
            "container",
            "--min",
            "0s",
            "--settle",
            "100ms",
            "--max",
            "10s",
        ],
    );
    // Close only once the drain is engaged: a hook slow to start (qemu)
    // would otherwise begin after the closes and see nothing to wait for.
    let stdout = engaged(&mut waf_hook);
    proxy.cmd("close-out 3 fin");
    waf.cmd("close-in 3 fin");
    let (report, out) = finish_engaged(waf_hook, stdout);
    assert_eq!(report["reason"], "drained", "{out}");
    assert_eq!(report["scope"], "container");
    assert_eq!(
        report["inbound_at_start"], 3,
        "only the WAF's own connections count: {out}"
    );
    // The proxy's own inbound connections were still open: a pod-scope
    // drain would have waited for them.
    assert_eq!(
        graceful_tests::oracle::view(None, pod.container(0).path()).inbound_live,
        5
    );
}

#[test]
fn after_containers_releases_when_they_exit() {
    require_root!();
    let agent = Agent::started_with_gate();
    let pod = SimPod::create(2); // 0: the app, 1: a mesh proxy
    let app_id = pod.containers[0].0.clone();
    let app = Peer::spawn(pod.container(0), None);
    let mut mesh = hook(
        &agent,
        pod.container(1),
        &[
            "--after-containers",
            &app_id[..12],
            "--min",
            "0s",
            "--settle",
            "0s",
            "--max",
            "10s",
        ],
    );
    let stdout = engaged(&mut mesh);
    let before = monotonic_ns();
    app.kill();
    let after = monotonic_ns();
    let (report, out) = finish_engaged(mesh, stdout);
    assert_eq!(report["reason"], "containers-exited", "{out}");
    let release = report["release_ns"].as_u64().unwrap();
    assert!(release >= before, "{out}");
    assert!(
        release.saturating_sub(after) <= event_slack_ms() * 1_000_000,
        "released {} ms after the app exited: {out}",
        (release - after) / 1_000_000
    );

    // An unknown container is a clear error, and the hook fails open.
    let other = hook(
        &agent,
        pod.container(1),
        &["--after-containers", "nosuchcontainer", "--max", "5s"],
    );
    let (report, out) = finish(other);
    assert_eq!(report["reason"], "agent-unreachable", "{out}");
    assert!(
        out.contains("no container \\\"nosuchcontainer\\\"") || out.contains("no container"),
        "{out}"
    );
}
