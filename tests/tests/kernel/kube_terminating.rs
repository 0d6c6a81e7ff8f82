//! The terminating-pod report, on the real kernel with the real agent: a
//! recorded MODIFIED event (tests/fixtures/k8s/, served by the fake API)
//! sets deletionTimestamp on a simulated pod that holds real connections,
//! and the agent reports the pod on its last inbound close, or when its
//! container exits first.

use std::time::Duration;

use graceful_tests::{
    agent::{graceful, Agent},
    event_slack_ms,
    k8s::{
        fake_api::{FakeApi, Reply},
        fixture, lines,
        terminating::{field, num, scene, Reach, Scene},
        with_api, NODE,
    },
};

use crate::{metric, require_root};

/// The Event the agent POSTed for the pod, checked for what every such Event carries.
fn event(s: &Scene) -> k8s_openapi::api::core::v1::Event {
    let v = graceful_tests::wait_for(10, "the Event POST", || s.api.events().into_iter().next());
    let ev: k8s_openapi::api::core::v1::Event =
        serde_json::from_value(v.clone()).unwrap_or_else(|e| panic!("not an Event: {e}: {v}"));
    assert_eq!(v["apiVersion"], "v1", "{v}");
    assert_eq!(v["kind"], "Event", "{v}");
    let posted = s.api.seen().into_iter().find(|s| s.method == "POST").unwrap();
    assert_eq!(posted.path, "/api/v1/namespaces/shop/events");
    let io = &ev.involved_object;
    assert_eq!(io.uid.as_deref(), Some(s.pod.uid.as_str()));
    assert_eq!(io.kind.as_deref(), Some("Pod"));
    assert_eq!(io.api_version.as_deref(), Some("v1"));
    assert_eq!(io.name.as_deref(), Some("checkout-84b7c9d5f6-n7x4r"));
    assert_eq!(io.namespace.as_deref(), Some("shop"));
    assert_eq!(ev.metadata.namespace.as_deref(), Some("shop"));
    assert!(ev
        .metadata
        .name
        .as_deref()
        .is_some_and(|n| n.starts_with("checkout-84b7c9d5f6-n7x4r.")));
    let src = ev.source.as_ref().unwrap();
    assert_eq!(src.component.as_deref(), Some("graceful"));
    assert_eq!(src.host.as_deref(), Some(NODE));
    assert_eq!(ev.reporting_component.as_deref(), Some("graceful"));
    assert_eq!(ev.reporting_instance.as_deref(), Some(NODE));
    assert!(ev.action.as_deref().is_some_and(|a| !a.is_empty()));
    assert_eq!(ev.count, Some(1));
    assert!(ev.first_timestamp.is_some() && ev.last_timestamp.is_some() && ev.event_time.is_some());
    let msg = ev.message.as_deref().unwrap();
    assert!(!msg.contains('\n') && msg.len() <= 1024, "{msg}");
    ev
}

#[test]
fn terminating_pod_is_reported_on_its_last_inbound_close() {
    require_root!();
    let mut s = scene(3, Reach::OptedIn);
    s.delete(3);
    // `graceful pods` (asking the agent) shows it Terminating, named, with
    // the time since its deletion.
    let out = graceful(&s.agent.pin_dir, &["pods", "-o", "json"]);
    let pods: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let p = pods
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["uid"] == s.pod.uid.as_str())
        .unwrap();
    assert_eq!(p["state"], "Terminating", "{p}");
    assert_eq!(p["name"], "checkout-84b7c9d5f6-n7x4r");
    let since = p["since_deletion_s"].as_f64().unwrap();
    assert!((0.0..10.0).contains(&since), "{p}");
    let table =
        String::from_utf8_lossy(&graceful(&s.agent.pin_dir, &["pods", "-n", "shop"]).stdout).into_owned();
    assert!(
        table.contains("checkout-84b7c9d5f6-n7x4r") && table.contains("Terminating ("),
        "{table}"
    );
    // The app finishes its connections one by one, 50 ms apart.
    for _ in 0..3 {
        std::thread::sleep(Duration::from_millis(50));
        s.app.as_mut().unwrap().cmd("close-in 1 fin");
    }
    let line = s.report();
    assert_eq!(field(&line, "outcome"), Some("drained"), "{line}");
    assert_eq!(field(&line, "uid"), Some(s.pod.uid.as_str()), "{line}");
    assert_eq!(num(&line, "inbound_at_deletion"), 3);
    assert_eq!(num(&line, "inbound_open"), 0);
    // On the last inbound close, by the kernel's own clock.
    let last_close = num(&line, "last_inbound_close_ns");
    let counters = s.agent.counters(s.pod.container(0).id());
    assert_eq!(counters.last_inbound_close_ns, last_close, "not the last close");
    assert_eq!(counters.inbound_live, 0);
    let after_ms = (num(&line, "report_ns") - last_close) as f64 / 1e6;
    assert!(
        (0.0..=event_slack_ms() as f64).contains(&after_ms),
        "reported {after_ms:.1} ms after the last close: {line}"
    );
    let since = field(&line, "seconds_since_deletion")
        .unwrap()
        .parse::<f64>()
        .unwrap();
    assert!((0.15..5.0).contains(&since), "{since} s since deletion: {line}");

    let ev = event(&s);
    assert_eq!(ev.reason.as_deref(), Some("InboundDrained"));
    assert_eq!(ev.type_.as_deref(), Some("Normal"));
    let msg = ev.message.unwrap();
    assert!(
        msg.contains("drained") && msg.contains("3 open at deletion") && msg.contains("s after deletion"),
        "{msg}"
    );
    let d: serde_json::Value =
        serde_json::from_slice(&graceful(&s.agent.pin_dir, &["drains", "-o", "json"]).stdout).unwrap();
    let t = &d["terminated"][0];
    assert_eq!(
        (&t["opted_in"], &t["workload"]),
        (&true.into(), &"deployment/checkout".into()),
        "{d}"
    );
    eprintln!("terminating report {after_ms:.1} ms after the last close: {msg}");
}

#[test]
fn terminating_pod_whose_container_exits_first_is_reported_as_exited() {
    require_root!();
    // A pod that never opted in, in a namespace the report scope names:
    // reported as any other, and ranked by `graceful at-risk`.
    let mut s = scene(2, Reach::Widened);
    s.delete(2);
    std::thread::sleep(Duration::from_millis(100));
    // SIGKILL with both connections open: the kernel closes them.
    s.app.take().unwrap().kill();
    let line = s.report();
    assert_eq!(field(&line, "outcome"), Some("exited"), "{line}");
    assert_eq!(num(&line, "inbound_at_deletion"), 2);
    assert_eq!(num(&line, "inbound_open"), 2, "{line}");
    let ev = event(&s);
    assert_eq!(ev.reason.as_deref(), Some("ExitedBeforeDrain"));
    assert_eq!(ev.type_.as_deref(), Some("Warning"));
    // What `kubectl graceful history` and `at-risk --events` read.
    let notes: Vec<(&str, &str)> = ev
        .metadata
        .annotations
        .iter()
        .flatten()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    assert_eq!(
        notes,
        [
            ("graceful.dev/inbound-open", "2"),
            ("graceful.dev/opted-in", "false"),
            ("graceful.dev/workload", "deployment/checkout")
        ]
    );
    let msg = ev.message.unwrap();
    assert!(
        msg.contains("exited") && msg.contains("2 inbound connection(s) still open"),
        "{msg}"
    );
    let out = graceful(&s.agent.pin_dir, &["at-risk", "-o", "json"]);
    let ranked: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        ranked,
        serde_json::json!([{
            "namespace": "shop", "workload": "deployment/checkout", "terminations": 1,
            "before_drain": 1, "connections_cut": 2, "opted_in": 0,
            "last_pod": "checkout-84b7c9d5f6-n7x4r"
        }]),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        metric(
            &s.agent,
            "graceful_workload_terminations_total{namespace=\"shop\",workload=\"deployment/checkout\",outcome=\"exited\"}"
        ),
        1
    );
}

#[test]
fn a_pod_that_never_opted_in_gets_no_report_no_event_and_no_alert() {
    require_root!();
    let mut s = scene(2, Reach::Neither);
    s.push_deletion();
    // The agent's decision, counted at the deletion.
    graceful_tests::wait_for(10, "the unreported count", || {
        (metric(&s.agent, "graceful_unreported_terminations_total") == 1).then_some(())
    });
    // Its connections cut by the container's exit, as the widened scene's
    // are: no report, no Event, nothing for the alert's series.
    s.app.take().unwrap().kill();
    std::thread::sleep(Duration::from_millis(300));
    let log = s.agent.log_text();
    assert!(
        !log.contains("pod terminating: watching") && !log.contains("report="),
        "{log}"
    );
    assert!(s.api.events().is_empty(), "{:?}", s.api.events());
    assert_eq!(
        metric(&s.agent, "graceful_terminations_total{outcome=\"exited\"}"),
        0
    );
    let d: serde_json::Value =
        serde_json::from_slice(&graceful(&s.agent.pin_dir, &["drains", "-o", "json"]).stdout).unwrap();
    assert_eq!(d["terminated"], serde_json::json!([]), "{d}");
}

#[test]
fn the_agent_logs_the_api_once_per_state_change_and_keeps_running() {
    require_root!();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let addr = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let mut api = rt.block_on(FakeApi::start_on(addr));
    api.stop();
    let mut agent = Agent::new();
    with_api(&mut agent, &api);
    agent.start();
    let count = |agent: &Agent, what: &str| agent.log_text().lines().filter(|l| l.contains(what)).count();
    // Retries at 0.5, 1, 2 s...: one line for all of them, none from kube-rs.
    std::thread::sleep(Duration::from_millis(2500));
    assert_eq!(
        count(&agent, "Kubernetes API unreachable"),
        1,
        "{}",
        agent.log_text()
    );
    assert_eq!(count(&agent, "kube_client"), 0, "{}", agent.log_text());

    api.push_list(Reply::list(fixture("pods-list.json")));
    rt.block_on(api.resume());
    graceful_tests::wait_for(10, "connected", || {
        (count(&agent, "Kubernetes API connected") == 1).then_some(())
    });
    graceful_tests::wait_for(10, "the watch", || (api.open_watches() == 1).then_some(()));
    api.stop();
    graceful_tests::wait_for(10, "lost", || {
        (count(&agent, "Kubernetes API lost") == 1).then_some(())
    });
    std::thread::sleep(Duration::from_millis(1500));
    api.push_watch(Reply::lines(lines("watch-2.jsonl")[2..].to_vec()));
    rt.block_on(api.resume());
    graceful_tests::wait_for(15, "back", || {
        (count(&agent, "Kubernetes API answers again") == 1).then_some(())
    });
    // The recorded stream ends in 410 Gone: the agent relists (after it
    // has logged that the API answers again, so wait for it).
    graceful_tests::wait_for(15, "the relist after 410", || {
        (count(&agent, "relisting") >= 1).then_some(())
    });
    let log = agent.log_text();
    assert_eq!(count(&agent, "Kubernetes API lost"), 1, "{log}");
    assert_eq!(count(&agent, "Kubernetes API unreachable"), 1, "{log}");
    assert_eq!(count(&agent, "kube_client"), 0, "{log}");
}
