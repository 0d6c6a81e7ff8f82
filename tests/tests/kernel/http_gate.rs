//! The httpGet gate on the real kernel: the agent (told of the pods by a
//! fake API) listens inside each opted-in pod's network namespace; the
//! hook's `GET /drain`, sent from the node's namespace as the kubelet
//! sends it, is held until the pod's clients have gone. Refusals are
//! Warning Events (a declared port, a taken one, hostNetwork); strangers get 403, garbage 400; listeners come and go
//! with their pods and hold no namespace after them.

use std::{
    os::unix::fs::MetadataExt,
    time::{Duration, Instant},
};

use graceful_tests::{
    agent::Agent,
    event_slack_ms,
    gate::wait_draining,
    http_hook::{
        get, list, listening, pod_object, send, wait_listening, wait_watching, watch_line, Scene, PORT,
    },
    k8s::{
        fake_api::{FakeApi, Reply},
        with_api,
    },
    monotonic_ns,
    netns::NetNs,
    peer::Peer,
    pod::SimPod,
};
use serde_json::{json, Value};

use crate::{metric, require_root, settle};

const HOOK: &str = "/drain?policy=drained&settle=100ms&min=0s&max=20s";

#[test]
fn the_hook_is_held_until_the_last_client_closes_then_answered_with_the_report() {
    require_root!();
    let mut s = Scene::new(json!({"graceful.dev/gate": "http"}));
    wait_listening(&s.net.b, PORT, 10);
    let (_lb, mut clients) = s.clients(3);
    let gate = s.gate();
    let (answer, closed_ns, held) = std::thread::scope(|t| {
        let node = &s.net.a;
        let hook = t.spawn(move || get(node, gate, HOOK, Duration::from_secs(30)));
        wait_draining(&s.agent, 1);
        std::thread::sleep(Duration::from_millis(500));
        let held = !hook.is_finished();
        // Neither the agent's listener nor the hook's connection is the
        // pod's traffic: its counts are its app's, as ss sees them.
        let views = settle(&s.agent, &[s.pod.container(0)], &[Some(&s.net.b)]);
        assert_eq!((views[0].inbound_live, views[0].listeners), (3, 1));
        let hook_conns = s.net.b.exec(
            "ss",
            &["-Htn", "state", "established", &format!("sport = :{PORT}")],
        );
        assert_eq!(
            hook_conns.lines().count(),
            1,
            "the hook's connection: {hook_conns}"
        );
        clients.cmd("close-out 3 fin");
        let closed_ns = monotonic_ns();
        (hook.join().unwrap(), closed_ns, held)
    });
    let answered_ns = monotonic_ns();
    assert!(held, "the hook was answered while 3 clients were connected");
    let answer = answer.expect("the hook's answer");
    assert_eq!(answer.status, 200, "{answer:?}");
    let report = answer.json();
    assert_eq!(report["reason"], "drained", "{report}");
    assert_eq!(report["pod"], s.pod.uid.as_str());
    assert_eq!(report["inbound_at_start"], 3, "{report}");
    let after = report["after_last_close_ms"].as_u64().unwrap();
    assert!(
        (100..=100 + event_slack_ms()).contains(&after),
        "released {after} ms after the last close (settle 100 ms): {report}"
    );
    let answered_ms = (answered_ns - closed_ns) / 1_000_000;
    assert!(
        answered_ms <= 100 + 2 * event_slack_ms(),
        "answered {answered_ms} ms after the close"
    );
    // A path as a kubelet that adds its own slash sends it is the same.
    let a = get(&s.net.a, gate, &format!("/{HOOK}"), Duration::from_secs(10)).unwrap();
    assert_eq!(
        (a.status, a.json()["reason"].clone()),
        (200, json!("drained")),
        "{a:?}"
    );
    // The release is an Event on the pod, as for the exec hook.
    s.api.wait_event("DrainReleased");
    // The gate's own annotations are not drain settings gone wrong.
    let wrong: Vec<Value> = s
        .api
        .events()
        .into_iter()
        .filter(|e| e["reason"] == "DrainMisconfigured")
        .collect();
    assert!(wrong.is_empty(), "{wrong:?}");
    eprintln!("httpGet hook answered {answered_ms} ms after the last close (released {after} ms after it, settle 100 ms)");
}

#[test]
fn strangers_get_403_garbage_400_and_the_drain_in_flight_is_untouched() {
    require_root!();
    let mut s = Scene::new(json!({"graceful.dev/gate": "http"}));
    wait_listening(&s.net.b, PORT, 10);
    let (_lb, mut clients) = s.clients(1);
    let gate = s.gate();
    let quick = Duration::from_secs(5);
    let answer = std::thread::scope(|t| {
        let node = &s.net.a;
        let hook = t.spawn(move || get(node, gate, HOOK, Duration::from_secs(30)));
        wait_draining(&s.agent, 1);

        // The pod itself (its own address, and loopback inside it) is not the node.
        for (from, to) in [
            (&s.net.b, gate),
            (&s.net.b, format!("127.0.0.1:{PORT}").parse().unwrap()),
        ] {
            let a = get(from, to, HOOK, quick).unwrap();
            assert_eq!(a.status, 403, "{a:?}");
            assert!(
                a.json()["error"].as_str().unwrap().contains("is not this node"),
                "{a:?}"
            );
        }
        // From the node, what is not a drain request.
        for (path, status, says) in [
            ("/drain?max=soon", 400, "max: invalid duration \"soon\""),
            ("/drain?polcy=quiet", 400, "unknown setting \"polcy\""),
            (
                "/drain?scope=container",
                400,
                "scope=container needs container=<name>",
            ),
            ("/drain?container=nope", 400, "container=nope: no such container"),
            ("/metrics", 404, "the httpGet gate has GET /drain"),
        ] {
            let a = get(node, gate, path, quick).unwrap();
            assert_eq!(a.status, status, "{path}: {a:?}");
            assert!(
                a.json()["error"].as_str().unwrap().contains(says),
                "{path}: {a:?}"
            );
        }
        let a = send(node, gate, b"\x16\x03\x01 not http at all\r\n\r\n", quick).unwrap();
        assert_eq!(a.status, 400, "{a:?}");
        assert!(a.json()["error"].is_string(), "{a:?}");
        let a = send(
            node,
            gate,
            b"POST /drain HTTP/1.1\r\nhost: x\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
            quick,
        )
        .unwrap();
        assert_eq!(a.status, 405, "{a:?}");

        assert!(!hook.is_finished(), "the drain in flight ended early");
        clients.cmd("close-out 1 fin");
        hook.join().unwrap().unwrap()
    });
    assert_eq!(answer.status, 200, "{answer:?}");
    assert_eq!(answer.json()["reason"], "drained", "{answer:?}");
    let log = s.agent.log_text();
    assert!(log.contains("refused a peer that is not the node (403)"), "{log}");
    assert!(
        log.contains("httpGet gate: bad request: max: invalid duration"),
        "{log}"
    );
}

#[test]
fn a_pod_whose_port_is_declared_or_taken_gets_a_warning_event_and_no_listener() {
    require_root!();
    // The scene's pod asks for its own container port (8080 in the spec).
    let s = Scene::new(json!({"graceful.dev/gate": "http", "graceful.dev/gate-port": "8080"}));
    // A second pod, whose app already listens on the gate's port.
    let taken = SimPod::create(1);
    let ns = NetNs::create();
    let mut app = Peer::spawn(taken.container(0), Some(&ns));
    app.listen(&format!("0.0.0.0:{PORT}"), "hold");
    let mut obj = pod_object(&taken, json!({"graceful.dev/gate": "http"}));
    obj["metadata"]["name"] = json!("taken");
    s.api.push(&watch_line("ADDED", &obj));
    // A third, on the node's own network.
    let host = SimPod::create(1);
    let mut obj = pod_object(&host, json!({"graceful.dev/gate": "http"}));
    obj["metadata"]["name"] = json!("host");
    obj["spec"]["hostNetwork"] = json!(true);
    s.api.push(&watch_line("ADDED", &obj));

    let events = graceful_tests::wait_for(15, "three HttpGateRefused Events", || {
        let e: Vec<Value> = s
            .api
            .events()
            .into_iter()
            .filter(|e| e["reason"] == "HttpGateRefused")
            .collect();
        (e.len() >= 3).then_some(e)
    });
    let message = |uid: &str| -> String {
        let e = events
            .iter()
            .find(|e| e["involvedObject"]["uid"] == uid)
            .unwrap_or_else(|| panic!("no Event for {uid}: {events:?}"));
        assert_eq!(e["type"], "Warning");
        e["message"].as_str().unwrap().to_string()
    };
    let declared = message(&s.pod.uid);
    assert!(
        declared.contains("port 8080 is container app's port"),
        "{declared}"
    );
    let busy = message(&taken.uid);
    assert!(
        busy.contains(&format!("port {PORT} is taken in the pod's network namespace")),
        "{busy}"
    );
    assert!(!listening(&s.net.b, 8080) || s.app_port == 8080);
    assert!(!listening(&s.net.b, PORT));
    // Once each: the sweeps that follow do not post again.
    std::thread::sleep(Duration::from_millis(2500));
    let again = s
        .api
        .events()
        .iter()
        .filter(|e| e["reason"] == "HttpGateRefused")
        .count();
    assert_eq!(again, 3, "refusals posted again: {:?}", s.api.events());
    app.kill();
}

/// The network namespaces the agent's sockets are in, through a copy of
/// each descriptor (pidfd_getfd, then SIOCGSKNS), and those its
/// descriptors name directly (nsfs links).
fn agent_netns(pid: u32) -> Vec<u64> {
    const SIOCGSKNS: libc::c_ulong = 0x894C;
    let mut out = Vec::new();
    // SAFETY: plain syscalls on descriptors this function owns and closes.
    unsafe {
        let pidfd = libc::syscall(libc::SYS_pidfd_open, pid as libc::c_int, 0) as libc::c_int;
        assert!(pidfd >= 0, "pidfd_open: {}", std::io::Error::last_os_error());
        for e in std::fs::read_dir(format!("/proc/{pid}/fd")).unwrap().flatten() {
            let Ok(link) = std::fs::read_link(e.path()) else {
                continue;
            };
            let link = link.to_string_lossy().to_string();
            if let Some(ino) = link.strip_prefix("net:[").and_then(|l| l.strip_suffix(']')) {
                out.push(ino.parse().unwrap());
            }
            if !link.starts_with("socket:") {
                continue;
            }
            let target: libc::c_int = e.file_name().to_string_lossy().parse().unwrap();
            let fd = libc::syscall(libc::SYS_pidfd_getfd, pidfd, target, 0) as libc::c_int;
            if fd < 0 {
                continue; // closed meanwhile
            }
            let ns = libc::ioctl(fd, SIOCGSKNS as _);
            if ns >= 0 {
                let mut st: libc::stat = std::mem::zeroed();
                if libc::fstat(ns, &mut st) == 0 {
                    out.push(st.st_ino);
                }
                libc::close(ns);
            }
            libc::close(fd);
        }
        libc::close(pidfd);
    }
    out
}

#[test]
fn listeners_follow_a_hundred_pods_and_hold_no_namespace_after_them() {
    require_root!();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let api = rt.block_on(FakeApi::start());
    api.push_list(Reply::list(list(&[])));
    let node = NetNs::create();
    let mut agent = Agent::new();
    with_api(&mut agent, &api);
    agent
        .daemon_args
        .extend(["--node-netns".into(), node.path().to_string()]);
    agent.start();
    wait_watching(&api);
    let pid = agent.pid().unwrap();
    let fds_before = std::fs::read_dir(format!("/proc/{pid}/fd")).unwrap().count();

    let mut inodes = Vec::new();
    let mut names = Vec::new();
    for batch in 0..10 {
        let pods: Vec<(SimPod, NetNs, Peer, Value)> = (0..10)
            .map(|i| {
                let pod = SimPod::create(1);
                let ns = NetNs::create();
                let peer = Peer::spawn(pod.container(0), Some(&ns));
                let mut obj = pod_object(&pod, json!({"graceful.dev/gate": "http"}));
                obj["metadata"]["name"] = json!(format!("p-{batch}-{i}"));
                (pod, ns, peer, obj)
            })
            .collect();
        for (_, _, _, obj) in &pods {
            api.push(&watch_line("ADDED", obj));
        }
        for (_, ns, _, _) in &pods {
            wait_listening(ns, PORT, 10);
            inodes.push(std::fs::metadata(ns.path()).unwrap().ino());
            names.push(ns.name.clone());
        }
        assert_eq!(metric(&agent, "graceful_http_gates"), 10);
        // Half leave by the API first, half by their processes first: both
        // close the listener.
        for (i, (pod, ns, peer, obj)) in pods.into_iter().enumerate() {
            if i % 2 == 0 {
                api.push(&watch_line("DELETED", &obj));
                peer.kill();
            } else {
                peer.kill();
                api.push(&watch_line("DELETED", &obj));
            }
            drop(ns);
            drop(pod);
        }
    }
    let held = graceful_tests::wait_for(10, "the agent to let go of every pod's namespace", || {
        let held: Vec<u64> = agent_netns(pid)
            .into_iter()
            .filter(|i| inodes.contains(i))
            .collect();
        held.is_empty().then_some(held)
    });
    assert!(held.is_empty());
    assert_eq!(metric(&agent, "graceful_http_gates"), 0);
    // A wait, not one look: the scrapes above leave their connections
    // closing for a moment (seen under qemu on a busy host: 4 over).
    let fds = || std::fs::read_dir(format!("/proc/{pid}/fd")).unwrap().count();
    let deadline = Instant::now() + Duration::from_secs(10);
    while fds() > fds_before + 2 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        fds() <= fds_before + 2,
        "the agent had {fds_before} descriptors before 100 pods and {} after",
        fds()
    );
    let log = agent.log_text();
    assert_eq!(log.matches("httpGet gate listening").count(), 100, "{log}");
    assert_eq!(log.matches("httpGet gate closed").count(), 100, "{log}");
    // Only this test's namespaces: the tests beside it make their own.
    let left = graceful_tests::sh("ip", &["netns", "list"]);
    let left: Vec<&str> = left
        .lines()
        .filter(|l| names.iter().any(|n| l.split_whitespace().next() == Some(n)))
        .collect();
    assert!(left.is_empty(), "namespaces left: {left:?}");
}

#[test]
fn after_an_agent_restart_the_listeners_are_back_within_a_second() {
    require_root!();
    let mut s = Scene::new(json!({"graceful.dev/gate": "http"}));
    wait_listening(&s.net.b, PORT, 10);
    s.agent.stop();
    assert!(!listening(&s.net.b, PORT), "the listener outlived its agent");
    let started = Instant::now();
    s.agent.start();
    let ready = started.elapsed();
    let back = wait_listening(&s.net.b, PORT, 10);
    eprintln!(
        "listener back {} ms after the restarted agent was ready ({} ms to ready)",
        back.as_millis(),
        ready.as_millis()
    );
    let limit = if std::env::var_os("GRACEFUL_VM").is_some() {
        5000
    } else {
        1000
    };
    assert!(
        back.as_millis() <= limit,
        "listener back {} ms after ready",
        back.as_millis()
    );
    // And it serves: a drain with nothing connected is released at once.
    let a = get(&s.net.a, s.gate(), HOOK, Duration::from_secs(10)).unwrap();
    assert_eq!(
        (a.status, a.json()["reason"].clone()),
        (200, json!("drained")),
        "{a:?}"
    );
}

#[test]
fn a_stopping_agent_finishes_its_http_drains_before_it_goes() {
    require_root!();
    let mut s = Scene::new(json!({"graceful.dev/gate": "http"}));
    wait_listening(&s.net.b, PORT, 10);
    let (_lb, mut clients) = s.clients(1);
    let gate = s.gate();
    let pid = s.agent.pid().unwrap() as i32;
    let answer = std::thread::scope(|t| {
        let node = &s.net.a;
        let hook = t.spawn(move || get(node, gate, HOOK, Duration::from_secs(30)));
        wait_draining(&s.agent, 1);
        // SAFETY: a signal to the agent this test started.
        assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
        std::thread::sleep(Duration::from_millis(800));
        assert!(
            !hook.is_finished(),
            "the hook was cut when its agent was told to stop"
        );
        assert!(
            std::path::Path::new(&format!("/proc/{pid}")).exists(),
            "the agent left its drain"
        );
        clients.cmd("close-out 1 fin");
        hook.join().unwrap()
    });
    let answer = answer.expect("the hook's answer from the stopping agent");
    assert_eq!(
        (answer.status, answer.json()["reason"].clone()),
        (200, json!("drained")),
        "{answer:?}"
    );
    // Its first SIGTERM is enough: it goes once the drain is answered.
    graceful_tests::wait_for(10, "the agent to stop once its drain was answered", || {
        (!std::path::Path::new(&format!("/proc/{pid}/cmdline")).exists()
            || std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|st| st.contains(") Z ")))
        .then_some(())
    });
    s.agent.stop();
    let log = s.agent.log_text();
    assert!(
        log.contains("finishing the httpGet drains in progress before stopping"),
        "{log}"
    );
    assert!(
        log.contains("the httpGet drains in progress are finished"),
        "{log}"
    );
}
