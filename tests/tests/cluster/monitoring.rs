//! The agent on the node, watched as a platform team watches it: Debian's
//! Prometheus discovers the DaemonSet's pod through the API server (as the
//! chart's PodMonitor has it), scrapes its metrics address, and evaluates
//! the chart's alert rules.
//!
//! - the metrics address names no pod as shipped (it is on the pod
//!   network); with `--metrics-pods on`, a pod's series keep their
//!   `namespace` and `pod` (no `exported_`), and count what ss counts;
//! - every query of the chart's dashboard returns series;
//! - `promtool check metrics` passes on the agent pod's own scrape;
//! - an agent that stops answering fires `GracefulAgentDown`.

use std::{
    io::{Read as _, Write as _},
    net::TcpStream,
    time::Duration,
};

use graceful_tests::{
    cluster::{
        clients::Clients, helm, pod::Pod, prometheus::Prometheus, Cluster, Namespace, AGENT_METRICS_PORT,
        AGENT_NAMESPACE, AGENT_SELECTOR,
    },
    oracle,
    process::Stopped,
};
use serde_json::Value;

/// The chart's rules with the agent-down delay cut to 5 s, as a rules file.
fn rules(cluster: &Cluster) -> String {
    let groups = crate::helm::rule_groups(cluster, ",metrics.prometheusRule.for.agentDown=5s");
    serde_json::json!({ "groups": groups }).to_string()
}

/// Every query of the chart's dashboard, its `$instance` as "All".
fn dashboard_queries() -> Vec<String> {
    let path = helm::chart().join("files/dashboard.json");
    let d: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    d["panels"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|p| p["targets"].as_array().unwrap().iter())
        .map(|t| t["expr"].as_str().unwrap().replace("$instance", ".+"))
        .collect()
}

/// The agent pod's address.
fn agent_ip(cluster: &Cluster, agent: &str) -> String {
    cluster.kubectl(&[
        "-n",
        AGENT_NAMESPACE,
        "get",
        "pod",
        agent,
        "-o",
        "jsonpath={.status.podIP}",
    ])
}

/// The agent's `/metrics` on its metrics address, scraped from the node.
fn scrape(cluster: &Cluster, agent: &str) -> String {
    let addr = format!("{}:{AGENT_METRICS_PORT}", agent_ip(cluster, agent))
        .parse()
        .unwrap();
    cluster.get_on_node(addr, "/metrics").unwrap()
}

/// The agent's DaemonSet with `--metrics-pods on`, until dropped (then
/// deploy/base's again).
struct MetricsPods<'a>(&'a Cluster);

/// The agent's DaemonSet patched with the JSON patch `patch`, its rollout
/// waited for.
fn patch_agent(cluster: &Cluster, patch: &str) -> Result<(), String> {
    cluster.try_kubectl(&[
        "-n",
        AGENT_NAMESPACE,
        "patch",
        "ds/graceful",
        "--type=json",
        "-p",
        patch,
    ])?;
    cluster.agent_rollout()?;
    // The previous pod gone too: Prometheus discovers a terminating pod,
    // and its target, down, would fire the alert this test waits for.
    graceful_tests::wait_for(120, "the previous agent pod to be gone", || {
        let pods = cluster.json(&["-n", AGENT_NAMESPACE, "get", "pods", "-l", AGENT_SELECTOR]);
        (pods["items"].as_array().map(Vec::len) == Some(1)).then_some(())
    });
    Ok(())
}

impl<'a> MetricsPods<'a> {
    fn on(cluster: &'a Cluster) -> MetricsPods<'a> {
        let patch = r#"[{"op":"add","path":"/spec/template/spec/containers/0/args/-","value":"--metrics-pods"},
                        {"op":"add","path":"/spec/template/spec/containers/0/args/-","value":"on"}]"#;
        patch_agent(cluster, patch).unwrap();
        MetricsPods(cluster)
    }
}

impl Drop for MetricsPods<'_> {
    fn drop(&mut self) {
        // apply -k would leave the patched list be (its last-applied list
        // is unchanged): the args are put back as they were.
        let ds = self.0.json(&["-n", AGENT_NAMESPACE, "get", "ds/graceful"]);
        let args: Vec<Value> = ds["spec"]["template"]["spec"]["containers"][0]["args"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let mut kept = Vec::new();
        let mut it = args.into_iter().peekable();
        while let Some(a) = it.next() {
            if a == "--metrics-pods" {
                it.next();
                continue;
            }
            kept.push(a);
        }
        let patch = serde_json::json!([{"op": "replace", "path": "/spec/template/spec/containers/0/args", "value": kept}]);
        if let Err(e) = patch_agent(self.0, &patch.to_string()) {
            eprintln!("cannot put deploy/base's agent back: {e}");
        }
    }
}

#[test]
fn prometheus_scrapes_the_agent_the_dashboard_has_series_and_a_stopped_agent_alerts() {
    let (cluster, _serial) = crate::node();
    let ns = Namespace::create(&cluster, "monitoring");
    ns.apply(&crate::app_pod("server", None, 5));
    // A pod that opted in (graceful-wait's hook), deleted below: its report
    // is the per-workload series.
    ns.apply(&crate::app_pod("leaver", Some(&["--max", "3s"]), 5));
    let server = Pod::wait_ready(&ns, "app=server", 1, 60).remove(0);
    Pod::wait_ready(&ns, "app=leaver", 1, 60);
    let _clients = Clients::open(&cluster, format!("{}:8080", server.ip).parse().unwrap(), 4);
    let kernel = oracle::view(Some(&server.netns()), &server.container_cgroup("app"));
    assert_eq!(kernel.inbound_live, 4);

    // As shipped, the metrics address (on the pod network) names no pod.
    let shipped = scrape(&cluster, &cluster.agent_pod(60));
    assert!(
        !shipped.contains("graceful_pod_inbound_connections{") && !shipped.contains(&ns.name),
        "the metrics address names pods as shipped: {shipped}"
    );
    // The per-pod series on, as a platform team that scrapes them turns
    // them on (`agent.metricsPods`, with its NetworkPolicy).
    let _restore = MetricsPods::on(&cluster);
    // The agent started with them (the previous one is gone) reports a
    // termination.
    ns.kubectl(&["delete", "pod", "leaver", "--wait=false"]);

    // The agent pod's own scrape, as curl would read it: promtool finds nothing.
    let agent = cluster.agent_pod(60);
    let ip = agent_ip(&cluster, &agent);
    let addr = format!("{ip}:{AGENT_METRICS_PORT}").parse().unwrap();
    let scrape = cluster.on_node(move || {
        let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).unwrap();
        s.write_all(b"GET /metrics HTTP/1.0\r\nHost: agent\r\n\r\n")
            .unwrap();
        let mut raw = String::new();
        s.read_to_string(&mut raw).unwrap();
        raw
    });
    let (_, body) = scrape.split_once("\r\n\r\n").unwrap();
    let found = graceful_tests::promtool::check_metrics(body);
    assert!(
        found.trim().is_empty(),
        "promtool check metrics on {agent}: {found}"
    );

    let prom = Prometheus::start(&cluster, &rules(&cluster));
    let up = graceful_tests::wait_for(60, "Prometheus to scrape the agent", || {
        let r = prom.query("up{job=\"graceful\"} == 1");
        (r.len() == 1).then(|| r[0].clone())
    });
    assert_eq!(up["metric"]["pod"], agent.as_str(), "{up}");
    assert_eq!(up["metric"]["namespace"], AGENT_NAMESPACE, "{up}");
    assert!(up["metric"]["node"].is_string(), "{up}");

    // The pod's series, with its own namespace and pod, as ss counts it.
    let series = format!(
        "graceful_pod_inbound_connections{{namespace=\"{}\",pod=\"server\"}}",
        ns.name
    );
    let v = graceful_tests::wait_for(30, "the pod's series", || prom.query(&series).into_iter().next());
    assert_eq!(v["value"][1], "4", "{v}");
    assert!(
        prom.query("{__name__=~\"graceful_.+\", exported_namespace=~\".+\"}")
            .is_empty()
            && prom
                .query("{__name__=~\"graceful_.+\", exported_pod=~\".+\"}")
                .is_empty(),
        "a series arrived with exported_ labels"
    );
    let info = prom.query("graceful_build_info");
    assert_eq!(info.len(), 1, "{info:?}");
    assert_eq!(
        info[0]["metric"]["pod"],
        agent.as_str(),
        "the agent's own series name the agent's pod"
    );

    // The termination, by its namespace and workload (a pod without a
    // controller is `pod`).
    let series = format!(
        "graceful_workload_terminations_total{{namespace=\"{}\",workload=\"pod\",outcome=\"drained\"}}",
        ns.name
    );
    let v = graceful_tests::wait_for(30, "the workload's series", || {
        prom.query(&series).into_iter().next()
    });
    assert_eq!(v["value"][1], "1", "{v}");

    // Every dashboard query has series (rates need two scrapes: wait).
    for q in dashboard_queries() {
        let r = graceful_tests::wait_for(30, &format!("series for the dashboard's {q}"), || {
            let r = prom.query(&q);
            (!r.is_empty()).then_some(r)
        });
        eprintln!("dashboard: {} series  {q}", r.len());
    }

    // The agent stops answering (a hung process): up 0, and the alert
    // fires once its `for` (5 s here) has passed.
    assert!(prom
        .alerts()
        .iter()
        .all(|a| a["labels"]["alertname"] != "GracefulAgentDown"));
    let agent_pod = Pod::from_json(&cluster.json(&["-n", AGENT_NAMESPACE, "get", "pod", &agent]));
    let stopped = Stopped::stop(crate::crash::agent_pid(&agent_pod));
    let alert = graceful_tests::wait_for(60, "GracefulAgentDown to fire", || {
        prom.alerts().into_iter().find(|a| {
            a["labels"]["alertname"] == "GracefulAgentDown"
                && a["state"] == "firing"
                && a["labels"]["pod"] == agent.as_str()
        })
    });
    drop(stopped);
    eprintln!("fired: {}", alert["annotations"]["summary"]);
    assert_eq!(alert["labels"]["severity"], "critical", "{alert}");
    assert_eq!(alert["labels"]["pod"], agent.as_str(), "{alert}");
    assert_eq!(
        alert["labels"]["instance"],
        format!("{ip}:{AGENT_METRICS_PORT}"),
        "{alert}"
    );
    // Answering again, it resolves.
    graceful_tests::wait_for(60, "GracefulAgentDown to resolve", || {
        prom.alerts()
            .iter()
            .all(|a| a["labels"]["alertname"] != "GracefulAgentDown")
            .then_some(())
    });
    let _ = prom.log();
}
