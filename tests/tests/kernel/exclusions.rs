//! Drains that wait for real traffic only (`graceful.dev/ignore-ports`,
//! `ignore-peers`), on the real kernel: a scraper on the pod's metrics port
//! and probes from the node's address beside five real clients, the drain
//! asked through the httpGet gate as the kubelet asks it. The agent's
//! counts are checked against `ss` with the exclusions' own filter.

use std::{
    sync::atomic::{AtomicBool, Ordering},
    time::{Duration, Instant},
};

use graceful_tests::{
    event_slack_ms,
    gate::wait_draining,
    http_hook::{get, wait_listening, Scene, PORT},
    not_traffic::{noise, ss_inbound, Noisy, StopOnDrop, METRICS_PORT},
};
use serde_json::{json, Value};

use crate::require_root;

const CLIENTS: u64 = 5;

fn annotations(extra: Value) -> Value {
    let mut a = json!({"graceful.dev/gate": "http"});
    a.as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    a
}

/// The agent's view of the app's cgroup: (counted, left out).
fn agent_inbound(s: &Scene) -> (u64, u64) {
    let c = s.agent.counters(s.pod.container(0).id());
    (c.inbound_live - c.inbound_ignored_live, c.inbound_ignored_live)
}

/// Waits until the agent's (counted, left out) equal `ss`'s with `filter`
/// and `want(counts)` holds, and returns them.
fn agree(s: &Scene, filter: &str, want: impl Fn((u64, u64)) -> bool) -> (u64, u64) {
    let mut last = ((0, 0), (0, 0));
    for _ in 0..250 {
        let kernel = ss_inbound(&s.net.b, filter);
        let agent = agent_inbound(s);
        if kernel == agent && want(agent) {
            return agent;
        }
        last = (agent, kernel);
        std::thread::sleep(Duration::from_millis(20));
    }
    // What both ends hold, to tell a count gone wrong from connections gone.
    let pod = s.net.b.exec("ss", &["-Htan"]);
    let clients = s.net.a.exec("ss", &["-Htan"]);
    panic!(
        "agent (counted, left out) {:?}, ss with {filter:?} {:?}\nthe pod's sockets:\n{pod}\nthe clients' side:\n{clients}",
        last.0, last.1
    );
}

/// What one drain of the scene showed.
struct Seen {
    report: Value,
    /// From the real clients' close (or the hook's start, when they stay)
    /// to the hook's answer.
    answered_after: Duration,
    /// Whether the hook was still held 1 s into the drain.
    held: bool,
    /// The agent's (counted, left out) in the middle, equal to ss's.
    middle: Option<(u64, u64)>,
}

/// The scene's drain asked with `query`, while the scraper and the probes
/// go on. With `close`, the real clients close 1 s in; with `filter` (ss's
/// spelling of the exclusions), the agent's counts are checked against
/// ss's before.
fn drain(n: &mut Noisy, query: &str, close: bool, filter: Option<&str>) -> Seen {
    wait_listening(&n.scene.net.b, PORT, 10);
    let gate = n.scene.gate();
    let stop = AtomicBool::new(false);
    let Noisy {
        scene,
        clients,
        noise: peers,
        ..
    } = n;
    let scene = &*scene;
    let at_pod = AtomicBool::new(true);
    let (answer, answered_after, held, middle, made) = std::thread::scope(|t| {
        let [scrapes, probes] = noise(t, peers, &at_pod, &stop);
        let _stop = StopOnDrop(&stop);
        // Some of each before the drain, so its start has them too.
        std::thread::sleep(Duration::from_millis(700));
        let node = &scene.net.a;
        let path = format!("/drain?{query}");
        let started = Instant::now();
        let hook = t.spawn(move || get(node, gate, &path, Duration::from_secs(30)));
        let mut held = true;
        let mut middle = None;
        let mut from = started;
        if close {
            wait_draining(&scene.agent, 1);
            std::thread::sleep(Duration::from_secs(1));
            middle = filter.map(|f| {
                agree(scene, f, |(counted, left_out)| {
                    counted == CLIENTS && left_out >= 1
                })
            });
            held = !hook.is_finished();
            from = Instant::now();
            clients.cmd(&format!("close-out {CLIENTS} fin"));
        }
        let answer = hook.join().unwrap();
        let answered_after = from.elapsed();
        stop.store(true, Ordering::SeqCst);
        let made = (scrapes.join().unwrap(), probes.join().unwrap());
        (answer, answered_after, held, middle, made)
    });
    assert!(made.0 >= 5 && made.1 >= 3, "scrapes and probes made: {made:?}");
    let answer = answer.expect("the hook's answer");
    assert_eq!(answer.status, 200, "{answer:?}");
    Seen {
        report: answer.json(),
        answered_after,
        held,
        middle,
    }
}

fn excluding() -> Value {
    annotations(json!({
        "graceful.dev/ignore-ports": METRICS_PORT.to_string(),
        "graceful.dev/ignore-peers": "node",
    }))
}

#[test]
fn a_drain_waits_for_its_real_clients_only() {
    require_root!();
    let mut n = Noisy::new(excluding(), CLIENTS as usize);
    let filter = format!("sport = :{METRICS_PORT} or dst {}", n.node_v4());
    let seen = drain(
        &mut n,
        "policy=drained&settle=0s&min=0s&max=20s",
        true,
        Some(&filter),
    );
    assert!(
        seen.held,
        "released with {CLIENTS} real clients connected: {}",
        seen.report
    );
    assert_eq!(seen.middle.map(|m| m.0), Some(CLIENTS));
    let r = &seen.report;
    assert_eq!(r["reason"], "drained", "{r}");
    // Every figure is the real clients': no probe ever shows.
    assert_eq!(
        (
            &r["inbound_at_start"],
            &r["peak_inbound"],
            &r["inbound_at_release"],
            &r["new_connections"]
        ),
        (&json!(CLIENTS), &json!(CLIENTS), &json!(0), &json!(0)),
        "{r}"
    );
    let ignored = r["ignored"]
        .as_array()
        .unwrap_or_else(|| panic!("no ignored in {r}"));
    assert_eq!(ignored.len(), 2, "{r}");
    assert_eq!(
        (&ignored[0]["rule"], &ignored[0]["connections"]),
        (&json!("9090"), &json!(1)),
        "{r}"
    );
    assert_eq!(ignored[1]["rule"], "node", "{r}");
    let probes = ignored[1]["connections"].as_u64().unwrap();
    assert!(probes >= 3, "{probes} probes left out in {r}");
    // The scraper's connection is still there at the release.
    assert!(r["ignored_at_release"].as_u64().unwrap() >= 1, "{r}");
    let after = r["after_last_close_ms"].as_u64().unwrap();
    assert!(
        after <= event_slack_ms(),
        "released {after} ms after the last real close: {r}"
    );
    assert!(
        seen.answered_after <= Duration::from_millis(2 * event_slack_ms()),
        "answered {:?} after the close",
        seen.answered_after
    );
    eprintln!(
        "released {after} ms after the last real close, answered {:?} after it; left out {probes} probes and 1 scrape",
        seen.answered_after
    );
}

#[test]
fn without_exclusions_the_same_scene_runs_to_the_deadline() {
    require_root!();
    let mut n = Noisy::new(annotations(json!({})), CLIENTS as usize);
    let seen = drain(&mut n, "policy=drained&settle=0s&min=0s&max=3s", true, None);
    let r = &seen.report;
    assert_eq!(r["reason"], "deadline", "{r}");
    assert!(r["waited_ms"].as_u64().unwrap() >= 3000, "{r}");
    // The scraper, and whatever probe was in flight.
    assert!(r["inbound_at_release"].as_u64().unwrap() >= 1, "{r}");
    assert!(r["new_connections"].as_u64().unwrap() >= 3, "the probes: {r}");
    assert!(r.get("ignored").is_none(), "{r}");
}

#[test]
fn quiet_leaves_out_a_chatty_scraper() {
    require_root!();
    let mut n = Noisy::new(excluding(), CLIENTS as usize);
    let seen = drain(&mut n, "policy=quiet&quiet=500ms&min=0s&max=20s", false, None);
    let r = &seen.report;
    assert_eq!(r["reason"], "quiet", "{r}");
    let waited = r["waited_ms"].as_u64().unwrap();
    assert!(
        (500..=500 + 2 * event_slack_ms()).contains(&waited),
        "released after {waited} ms (quiet 500 ms) with a scrape every 200 ms: {r}"
    );
    // Idle real clients stay: quiet does not wait for them to close.
    assert_eq!(r["inbound_at_release"], json!(CLIENTS), "{r}");

    // The same, without the exclusions: the scrapes and the probes are
    // traffic, and the drain never goes quiet.
    let mut n = Noisy::new(annotations(json!({})), CLIENTS as usize);
    let seen = drain(&mut n, "policy=quiet&quiet=500ms&min=0s&max=3s", false, None);
    assert_eq!(seen.report["reason"], "deadline", "{}", seen.report);
}

#[test]
fn bad_exclusions_are_one_line_each_and_the_drain_runs_without_them() {
    require_root!();
    let mut n = Noisy::new(
        annotations(json!({"graceful.dev/ignore-peers.app": "10.0.0.0/33"})),
        CLIENTS as usize,
    );
    let seen = drain(
        &mut n,
        "container=app&ignore-ports=0&policy=drained&settle=0s&min=0s&max=3s",
        true,
        None,
    );
    let r = &seen.report;
    // Nothing left out: the scraper holds the drain to its deadline.
    assert_eq!(r["reason"], "deadline", "{r}");
    assert!(r.get("ignored").is_none(), "{r}");
    let events = n.scene.api.events();
    let wrong: Vec<&Value> = events
        .iter()
        .filter(|e| e["reason"] == "DrainMisconfigured")
        .collect();
    assert_eq!(wrong.len(), 1, "{events:?}");
    let message = wrong[0]["message"].as_str().unwrap();
    for line in [
        "annotation graceful.dev/ignore-peers.app: \"10.0.0.0/33\": the prefix length must be 0 to 32; ignored",
        "the hook's ignore-ports: \"0\" is not a port (1 to 65535); ignored",
    ] {
        assert!(message.contains(line), "{line:?} not in {message:?}");
    }
    assert!(!message.contains('\n'), "{message:?}");
}

#[test]
fn a_second_drain_of_the_pod_tallies_what_is_still_left_out() {
    require_root!();
    let mut n = Noisy::new(excluding(), CLIENTS as usize);
    let query = "policy=drained&settle=0s&min=0s&max=20s";
    let first = drain(&mut n, query, true, None);
    n.clients.cmd(&format!(
        "connect {} {CLIENTS}",
        graceful_tests::peer::addr(&n.scene.net.b_v6, graceful_tests::not_traffic::APP_PORT)
    ));
    let filter = format!("sport = :{METRICS_PORT} or dst {}", n.node_v4());
    let second = drain(&mut n, query, true, Some(&filter));
    for r in [&first.report, &second.report] {
        assert_eq!(
            (&r["reason"], &r["inbound_at_start"]),
            (&json!("drained"), &json!(CLIENTS)),
            "{r}"
        );
        // The scraper's one connection, live through both drains.
        assert_eq!(r["ignored"][0], json!({"rule": "9090", "connections": 1}), "{r}");
    }
}
