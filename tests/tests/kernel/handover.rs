//! A second agent started where one runs (the DaemonSet's surge pod, a
//! restart beside the old process) takes the node over: the gate's
//! listener, each pod's own gate (httpGet or socket) and every held hook. The hooks see
//! nothing of it: an exec hook's `graceful-wait` does not reconnect, a
//! kubelet's httpGet hook gets its one answer, each after its own last
//! close; the counts stay exact. The old agent retires. A peer that is not
//! this node's agent, or speaks another format, is refused in one line,
//! and the old agent serves on.

use std::{
    os::fd::AsFd as _,
    time::{Duration, Instant},
};

use graceful::continuity::handover::{fds, give, peer, wire};
use graceful_tests::{
    agent::{since_pause_ms, Agent},
    gate::{engaged, finish_engaged, hook, hook_at, pod_holding, pod_socket, wait_draining},
    http_hook::{wait_listening, Scene, PORT},
    pod::SimPod,
};
use serde_json::json;

use crate::{
    carried_over, drains, held_hook, held_http_hook, http_answered_once, http_still_held, released_across,
    require_root, still_held, HELD,
};

/// The first agent's process is the retired one now (it exec'd).
fn retired(first: &Agent) {
    let pid = first.pid().unwrap();
    graceful_tests::wait_for(10, "the old agent to retire", || {
        let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
        String::from_utf8_lossy(&cmd).contains("__retired").then_some(())
    });
    let log = first.log_text();
    assert!(log.contains("this agent retires"), "{log}");
}

#[test]
fn a_successor_takes_a_held_exec_hook_which_never_reconnects() {
    require_root!();
    let first = Agent::started_with_gate();
    let (pod, lb, mut app, _pool) = pod_holding(4);
    let (child, stdout) = held_hook(&first, &pod);
    // What the first agent's report has so far goes with the hook.
    app.cmd("close-in 1 fin");
    std::thread::sleep(Duration::from_millis(200));

    let mut second = first.successor();
    second.start();
    retired(&first);
    let pause = since_pause_ms(&second.log_text());
    eprintln!("the gate paused {pause:.1} ms until the successor served the held hook");
    if std::env::var_os("GRACEFUL_SHOW_LOG").is_some() {
        eprintln!("{}", second.log_text());
    }
    // The successor counts the same connections, holds the drain, and
    // serves new hooks.
    carried_over(&second, &pod, &lb, &mut app, child, stdout);
    drop(second);
}

#[test]
fn a_successor_takes_a_held_http_hook_and_answers_it_once() {
    require_root!();
    let mut s = Scene::with_gate_dir(json!({"graceful.dev/gate": "http"}));
    wait_listening(&s.net.b, PORT, 10);
    let (_lb, mut clients) = s.clients(3);
    let mut second = s.agent.successor();
    let (answer, closed_ns) = std::thread::scope(|t| {
        // What the first agent's report has so far goes with the hook.
        let hook = held_http_hook(t, &s, &mut clients);
        second.start();
        retired(&s.agent);
        eprintln!(
            "the gate paused {:.1} ms until the successor served the held hook",
            since_pause_ms(&second.log_text())
        );
        let closed_ns = http_still_held(&second, &s.net.b, &hook, &mut clients);
        (hook.join().unwrap(), closed_ns)
    });
    let answer = answer.expect("the hook's answer, from the successor");
    // The successor serves the pod's gate from the listener it took.
    http_answered_once(&s, &second, answer, closed_ns);
    drop(second);
}

/// Speaks to the giver as a taker would, up to `hello`.
fn knock(first: &Agent, hello: &[u8], proof: bool) -> fds::Channel {
    let chan = fds::connect(&give::socket_path(first.gate_dir.as_ref().unwrap())).unwrap();
    chan.set_timeout(Duration::from_secs(10)).unwrap();
    let pins = graceful::kernel::bpf::paths::PinDir::new(&first.pin_dir);
    let p = proof.then(|| peer::proof(&pins).unwrap());
    let fds: Vec<_> = p.iter().map(|f| f.as_fd()).collect();
    chan.send(hello, &fds).unwrap();
    chan
}

fn hello(version: u32) -> Vec<u8> {
    let h = wire::Hello {
        version: wire::VERSION,
        pid: std::process::id(),
        agent: "test".into(),
        reads: None,
    };
    let json = serde_json::to_string(&h).unwrap().replace(
        &format!("\"version\":{}", wire::VERSION),
        &format!("\"version\":{version}"),
    );
    let mut b = (json.len() as u32).to_be_bytes().to_vec();
    b.extend_from_slice(json.as_bytes());
    b
}

#[test]
fn strangers_and_other_formats_are_refused_and_a_refusal_thaws_the_giver() {
    require_root!();
    let first = Agent::started_with_gate();
    let (pod, _lb, mut app, _pool) = pod_holding(2);
    let (child, stdout) = held_hook(&first, &pod);

    // No proof of the node's pins; garbage; another format.
    let checks: [(Vec<u8>, bool, &str); 3] = [
        (hello(wire::VERSION), false, "sent no proof"),
        (b"\x00\x00\x00\x05hello".to_vec(), true, "not a handover frame"),
        (
            hello(wire::VERSION + 1),
            true,
            "handover format 4, this agent reads 1 to 3",
        ),
    ];
    for (frame, proof, says) in checks {
        let chan = knock(&first, &frame, proof);
        assert!(
            chan.recv().unwrap().is_none(),
            "the giver answered a refused peer"
        );
        graceful_tests::wait_for(10, "the refusal's log line", || {
            first
                .log_text()
                .lines()
                .any(|l| l.contains("handover refused") && l.contains(says))
                .then_some(())
        });
    }

    // A taker of the release before (format 1, whose hello says no
    // more) reads everything in its own format, then refuses: the giver
    // thaws.
    let chan = knock(&first, &hello(1), true);
    let offer = chan.recv().unwrap().unwrap();
    let offer: wire::Offer = wire::decode(&offer.bytes).unwrap();
    assert_eq!(offer.version, 1, "{offer:?}");
    assert_eq!(offer.records, 2, "the gate's listener and the held hook");
    for _ in 0..=offer.records {
        let f = chan.recv().unwrap().unwrap();
        let json = String::from_utf8_lossy(&f.bytes[4..]).into_owned();
        assert!(
            json.starts_with("{\"version\":1,") && !json.contains("progress"),
            "not format 1: {json}"
        );
    }
    let v = wire::Verdict {
        version: 1,
        taken: false,
        why: Some("a test".into()),
    };
    chan.send(&wire::encode(&v), &[]).unwrap();
    graceful_tests::wait_for(10, "the giver to thaw", || {
        first
            .log_text()
            .contains("refused what this agent sent; it serves on")
            .then_some(())
    });
    // Its held hook is still its own, and answered once its clients go.
    let started = Instant::now();
    app.cmd("close-in 2 fin");
    let (report, out) = finish_engaged(child, stdout);
    assert_eq!(report["reason"], "drained", "{out}");
    assert!(started.elapsed() < Duration::from_secs(5), "{out}");
    // And new hooks come in.
    drains(hook(&first, pod.container(0), &["--min", "0s", "--max", "10s"]));
    let pid = first.pid().unwrap();
    let cmd = std::fs::read_to_string(format!("/proc/{pid}/cmdline")).unwrap();
    assert!(!cmd.contains("__retired"), "the giver retired after a refusal");
}

/// A running agent of a later release offers the node in a format this one
/// cannot read: this one refuses in one line (the giver serves on), waits
/// for the node as before handovers, and, once the API is reached, says
/// why in a Warning Event on its own pod.
#[test]
fn a_successor_that_cannot_read_the_offer_says_so_on_its_own_pod_and_waits_for_the_node() {
    use graceful_tests::k8s::{
        fake_api::{FakeApi, Reply},
        with_api,
    };
    use std::os::fd::AsRawFd as _;
    require_root!();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let api = rt.block_on(FakeApi::start());
    api.push_list(Reply::list(
        json!({"kind": "PodList", "apiVersion": "v1", "metadata": {"resourceVersion": "1"}, "items": []})
            .to_string(),
    ));
    let mut first = Agent::started_with_gate();
    first.stop();
    first.handed_over();

    // The test stands in for that agent: it holds the pin directory's lock
    // and listens on the handover socket, as a running agent does.
    let lock = std::fs::File::open(&first.pin_dir).unwrap();
    // SAFETY: `lock` is open for the call.
    assert_eq!(
        unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) },
        0
    );
    let socket = give::socket_path(first.gate_dir.as_ref().unwrap());
    std::fs::create_dir_all(socket.parent().unwrap()).unwrap();
    let listener = fds::listen(&socket).unwrap();
    let giver = std::thread::spawn(move || {
        let chan = fds::accept(&listener).unwrap();
        chan.set_timeout(Duration::from_secs(20)).unwrap();
        let hello = chan.recv().unwrap().unwrap();
        let hello: wire::Hello = wire::decode(&hello.bytes).unwrap();
        let later = json!({"version": wire::VERSION + 1, "pid": std::process::id(),
            "agent": "9.9.9", "paused_ns": 1, "records": 0})
        .to_string();
        let mut frame = (later.len() as u32).to_be_bytes().to_vec();
        frame.extend_from_slice(later.as_bytes());
        chan.send(&frame, &[]).unwrap();
        let verdict = chan.recv().unwrap().unwrap();
        let verdict: wire::Verdict = wire::decode(&verdict.bytes).unwrap();
        // The refused giver serves on a while, then stops: the node is free.
        std::thread::sleep(Duration::from_millis(300));
        drop(lock);
        let _ = std::fs::remove_file(&socket);
        (hello, verdict)
    });

    let mut second = first.successor();
    with_api(&mut second, &api);
    let me = "graceful-7xk2p";
    let uid = "5d2c1f0e-9a7b-4c3d-8e6f-0a1b2c3d4e5f";
    second.daemon_args.extend(
        [
            "--pod-name",
            me,
            "--pod-namespace",
            "graceful-system",
            "--pod-uid",
            uid,
        ]
        .map(String::from),
    );
    second.start();
    let (hello, verdict) = giver.join().unwrap();
    assert_eq!(
        (hello.version, hello.reads),
        (1, Some(wire::VERSION)),
        "{hello:?}"
    );
    let says = format!(
        "handover format {}, this agent reads 1 to {}",
        wire::VERSION + 1,
        wire::VERSION
    );
    assert!(
        !verdict.taken && verdict.why.as_deref().is_some_and(|w| w.contains(&says)),
        "{verdict:?}"
    );
    let log = second.log_text();
    let lines: Vec<&str> = log.lines().filter(|l| l.contains("handover failed")).collect();
    assert_eq!(lines.len(), 1, "{log}");
    assert!(lines[0].contains(&says), "{log}");

    // The node is its own: it serves a drain.
    let pod = SimPod::create(1);
    drains(hook(&second, pod.container(0), &["--min", "0s", "--max", "10s"]));

    let event = graceful_tests::wait_for(10, "the Event on the agent's own pod", || {
        api.events().into_iter().find(|e| e["reason"] == "HandoverFailed")
    });
    assert_eq!(event["type"], "Warning", "{event}");
    assert_eq!(
        (
            &event["involvedObject"]["name"],
            &event["involvedObject"]["namespace"],
            &event["involvedObject"]["uid"]
        ),
        (&json!(me), &json!("graceful-system"), &json!(uid)),
        "{event}"
    );
    assert!(event["message"].as_str().unwrap().contains(&says), "{event}");
    drop(second);
    drop(api);
}

/// A pod's socket gate (`graceful.dev/gate: socket`) goes with the node:
/// the successor serves the abstract socket it took, and the exec hook
/// held through it, which never reconnects. A taker of format 2 (the
/// release before the socket gate) is offered everything but it.
#[test]
fn a_successor_takes_a_pods_socket_gate_and_the_hook_held_through_it() {
    require_root!();
    let mut s = Scene::with_gate_dir(json!({"graceful.dev/gate": "socket"}));
    graceful_tests::gate::wait_socket_gate(&s.net.b);
    let (_lb, mut clients) = s.clients(3);
    let mut child = hook_at(&s.agent, s.pod.container(0), Some(&s.net.b), &pod_socket(), &HELD);
    let stdout = engaged(&mut child);
    wait_draining(&s.agent, 1);

    // Format 2: the gate's listener and the held hook, not the pod's socket.
    let chan = knock(&s.agent, &hello(2), true);
    let offer: wire::Offer = wire::decode(&chan.recv().unwrap().unwrap().bytes).unwrap();
    assert_eq!((offer.version, offer.records), (2, 2), "{offer:?}");
    for _ in 0..=offer.records {
        let f = chan.recv().unwrap().unwrap();
        let json = String::from_utf8_lossy(&f.bytes[4..]).into_owned();
        assert!(!json.contains("pod_socket"), "{json}");
    }
    let v = wire::Verdict {
        version: 2,
        taken: false,
        why: Some("a test".into()),
    };
    chan.send(&wire::encode(&v), &[]).unwrap();
    graceful_tests::wait_for(10, "the giver to thaw", || {
        let log = s.agent.log_text();
        (log.contains("reads an older format, with no socket gate")
            && log.contains("refused what this agent sent; it serves on"))
        .then_some(())
    });

    clients.cmd("close-out 1 fin");
    std::thread::sleep(Duration::from_millis(200));
    let mut second = s.agent.successor();
    second.start();
    retired(&s.agent);
    still_held(&second, &mut child);
    clients.cmd("close-out 2 fin");
    released_across(child, stdout, &[3, 2]);

    // A new hook goes through the socket the successor took.
    assert!(
        second
            .log_text()
            .contains("socket gate: serving the listener handed over"),
        "{}",
        second.log_text()
    );
    drains(hook_at(
        &second,
        s.pod.container(0),
        Some(&s.net.b),
        &pod_socket(),
        &["--min", "0s", "--max", "10s"],
    ));
    drop(second);
}
