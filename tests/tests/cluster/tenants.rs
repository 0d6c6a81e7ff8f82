//! What ordinary pods on the node can do to the agent, tried on the real
//! kubelet and API server, each with its figure:
//! - pods that hold the metrics port's connections cost the agent no probe
//!   (the probes count apart, in a table only the node's own processes
//!   enter);
//! - a hook padded to the gate's bound is handed over in a rollout of the
//!   agent, which finishes as fast as without it;
//! - a pod that starts and abandons drains in a loop is paced, and its
//!   Events are aggregated: a few API writes, a bounded agent;
//! - a pod that mounts the gate directory read-write is refused at
//!   admission (deploy/admission's policy, on the real API server).

use std::time::{Duration, Instant};

use graceful_tests::{
    cluster::{
        clients::Clients, pod::Pod, pod_head, Cluster, Namespace, AGENT_IMAGE, AGENT_METRICS_PORT,
        AGENT_NAMESPACE, BUSYBOX_IMAGE,
    },
    gate::padded_hook,
};

use crate::{crash::agent_pid, gate::wait_drain_engaged};

/// The node's gate directory (deploy/base's hostPath).
const GATE_SOCK: &str = "/var/run/graceful/gate.sock";

/// How long the flood lasts.
const FLOOD: Duration = Duration::from_secs(100);

/// The agent container's restarts, and its pod's `Unhealthy` Events.
fn restarts_and_unhealthy(cluster: &Cluster, name: &str) -> (u64, usize) {
    let p = cluster.json(&["-n", AGENT_NAMESPACE, "get", "pod", name]);
    let restarts = p["status"]["containerStatuses"][0]["restartCount"]
        .as_u64()
        .unwrap();
    let selector = format!("involvedObject.name={name}");
    let ev = cluster.json(&[
        "-n",
        AGENT_NAMESPACE,
        "get",
        "events",
        "--field-selector",
        &selector,
    ]);
    let unhealthy = ev["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| e["reason"] == "Unhealthy")
        .count();
    (restarts, unhealthy)
}

/// A busybox pod that keeps `conns` connections to `addr`'s metrics port
/// busy, each sending a request every 2 s and connecting again whenever
/// the agent closes it.
fn flooder(name: &str, addr: &str, conns: usize) -> String {
    format!(
        r#"{head}spec:
  terminationGracePeriodSeconds: 1
  containers:
    - name: flood
      image: {BUSYBOX_IMAGE}
      command: ["sh", "-c"]
      args:
        - |
          for i in $(seq {conns}); do
            (while true; do
              (while true; do printf 'GET /metrics HTTP/1.1\r\nHost: agent\r\n\r\n'; sleep 2; done) | nc {addr} {AGENT_METRICS_PORT} > /dev/null
            done) &
          done
          wait
"#,
        head = pod_head(name, "{app: flood}")
    )
}

#[test]
fn eight_pods_holding_the_metrics_port_never_cost_the_agent_a_probe() {
    let (cluster, _serial) = crate::node();
    let ns = Namespace::create(&cluster, "flood");
    let agent = cluster.agent_pod(60);
    let ip = cluster.json(&["-n", AGENT_NAMESPACE, "get", "pod", &agent])["status"]["podIP"]
        .as_str()
        .unwrap()
        .to_string();
    let before = restarts_and_unhealthy(&cluster, &agent);
    for i in 0..8 {
        ns.apply(&flooder(&format!("flood-{i}"), &ip, 32));
    }
    Pod::wait_ready(&ns, "app=flood", 8, 60);
    // Past three liveness periods (30 s each: three failures in a row
    // restart the agent) and nine readiness ones. 150 s took CI 50 s more
    // and showed the same.
    let t = Instant::now();
    let mut refused = 0;
    while t.elapsed() < FLOOD {
        std::thread::sleep(Duration::from_secs(10));
        // From the node, as the kubelet's probes come: always answered.
        let addr = format!("{ip}:{AGENT_METRICS_PORT}").parse().unwrap();
        let health = cluster.get_on_node(addr, "/healthz");
        assert!(
            health.is_ok(),
            "a probe from the node failed under the flood: {health:?}"
        );
        if let Ok(m) = cluster.get_on_node(addr, "/metrics") {
            refused = m
                .lines()
                .find_map(|l| l.strip_prefix("graceful_errors_total{kind=\"api_busy\"} "))
                .and_then(|v| v.trim().parse::<f64>().ok())
                .unwrap_or(0.0) as u64;
        }
    }
    let after = restarts_and_unhealthy(&cluster, &agent);
    assert_eq!(cluster.agent_pod(10), agent, "the agent pod was replaced");
    assert_eq!(
        after,
        before,
        "(restarts, Unhealthy Events) before and after {} s of flood",
        FLOOD.as_secs()
    );
    assert!(
        refused > 0,
        "the flood never met the public table's bound: it tested nothing"
    );
    eprintln!(
        "8 pods x 32 connections on the metrics port for {} s: 0 restarts, 0 Unhealthy Events, {refused} connections turned away past their share",
        FLOOD.as_secs()
    );
}

#[test]
fn a_padded_hook_is_handed_over_and_the_agents_rollout_is_not_stalled() {
    let (cluster, _serial) = crate::node();
    let ns = Namespace::create(&cluster, "padded");
    ns.apply(&crate::app_pod("padded", None, 60));
    let pod = Pod::wait_ready(&ns, "app=padded", 1, 60).remove(0);
    let mut clients = Clients::open(&cluster, format!("{}:8080", pod.ip).parse().unwrap(), 2);
    // The pod's own process, as the exec gate knows it (its container's
    // cgroup), posts a request padded to just under the body's bound.
    let hook = padded_hook(
        std::path::Path::new(GATE_SOCK),
        &pod.container_cgroup_dir("app"),
        graceful_api::MAX_BODY - 16,
    );
    wait_drain_engaged(&cluster, &pod.uid, 30);

    let next = format!("{AGENT_IMAGE}-next");
    cluster.images(&["tag", "--force", AGENT_IMAGE, &next]);
    let t = Instant::now();
    let new = cluster.roll_agent_to(&next);
    let rolled = t.elapsed();
    let log = cluster.kubectl(&["-n", AGENT_NAMESPACE, "logs", &new]);
    assert!(
        log.contains("serving the hooks the previous agent held") && log.contains("exec_hooks=1"),
        "the new agent did not take the padded hook over: {log}"
    );
    clients.close();
    let out = hook.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.lines()
            .any(|l| l.contains("\"type\":\"report\"") && l.contains("\"reason\":\"drained\"")),
        "the padded hook was not answered: {text}"
    );
    cluster.roll_agent_to(AGENT_IMAGE);
    cluster.images(&["rm", &next]);
    assert!(rolled < Duration::from_secs(60), "the rollout took {rolled:?}");
    eprintln!(
        "a hook padded to {} bytes, held: the agent's rollout took {rolled:?}, the new agent answered it",
        graceful_api::MAX_BODY - 16
    );
}

/// The API server's count of writes to Events (`apiserver_request_total`,
/// POST and PATCH on events).
fn event_writes(cluster: &Cluster) -> u64 {
    let m = cluster.kubectl(&["get", "--raw", "/metrics"]);
    m.lines()
        .filter(|l| l.starts_with("apiserver_request_total{") && l.contains("resource=\"events\""))
        .filter(|l| l.contains("verb=\"POST\"") || l.contains("verb=\"PATCH\""))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>() as u64
}

/// The CPU time (user and system) of process `pid`, in clock ticks.
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let after = &stat[stat.rfind(')').unwrap() + 2..];
    let f: Vec<&str> = after.split_whitespace().collect();
    f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap()
}

#[test]
fn a_thousand_drains_started_and_abandoned_in_a_minute_cost_a_few_events() {
    let (cluster, _serial) = crate::node();
    let ns = Namespace::create(&cluster, "abandon");
    ns.apply(&crate::app_pod("loop", None, 30));
    let pod = Pod::wait_ready(&ns, "app=loop", 1, 60).remove(0);
    let agent = Pod::from_json(&cluster.json(&["-n", AGENT_NAMESPACE, "get", "pod", &cluster.agent_pod(30)]));
    let pid = agent_pid(&agent);
    let (cpu0, writes0) = (cpu_ticks(pid), event_writes(&cluster));
    // A deadline past the pod's grace period: each drain's settings are
    // corrected, a DrainMisconfigured Event each, were they not aggregated.
    let script = "import socket, sys, time\n\
                  body = b'{\"max_ms\":3600000,\"started_unix_ms\":%d}' % int(time.time()*1000)\n\
                  req = b'POST /v1/drain HTTP/1.1\\r\\nhost: g\\r\\ncontent-length: %d\\r\\n\\r\\n' % len(body) + body\n\
                  counts = {}\n\
                  t0 = time.time()\n\
                  for i in range(1000):\n\
                  \x20   time.sleep(max(0, t0 + i * 0.06 - time.time()))\n\
                  \x20   s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); s.sendall(req)\n\
                  \x20   status = s.makefile('rb').readline().split()[1].decode()\n\
                  \x20   counts[status] = counts.get(status, 0) + 1\n\
                  \x20   s.close()\n\
                  print(' '.join('%s=%d' % kv for kv in sorted(counts.items())))\n";
    let mut cmd = std::process::Command::new("python3");
    cmd.args(["-c", script, GATE_SOCK])
        .stdout(std::process::Stdio::piped());
    graceful_tests::cgroup::start_in(&mut cmd, &pod.container_cgroup_dir("app"));
    let t = Instant::now();
    let out = cmd.output().unwrap();
    let took = t.elapsed();
    let statuses = String::from_utf8_lossy(&out.stdout).trim().to_string();
    // Let the last flush of a repeated Event's count happen.
    std::thread::sleep(Duration::from_secs(35));
    let cpu_s = (cpu_ticks(pid) - cpu0) as f64 / 100.0;
    let writes = event_writes(&cluster) - writes0;
    let events = ns.json(&[
        "get",
        "events",
        "--field-selector",
        &format!("involvedObject.uid={}", pod.uid),
    ]);
    let ours: Vec<&serde_json::Value> = events["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| e["reportingComponent"] == "graceful")
        .collect();
    let counted: u64 = ours.iter().map(|e| e["count"].as_u64().unwrap_or(1)).sum();
    eprintln!(
        "1000 drains started and abandoned in {took:?} ({statuses}): {} Event object(s) of the agent's on the pod, counting {counted}; {writes} Event writes to the API server; the agent's CPU {cpu_s:.2} s over {:.0} s",
        ours.len(),
        (took + Duration::from_secs(35)).as_secs_f64()
    );
    assert!(statuses.contains("429="), "no drain was paced: {statuses}");
    let accepted: u64 = statuses
        .split_whitespace()
        .find_map(|kv| kv.strip_prefix("200="))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    assert!(
        (32..=120).contains(&accepted),
        "{accepted} drains started: the pace is 32, then one a second"
    );
    // Its messages differ (each names how late its request was): the
    // first SIMILAR - 1 are posted as they are, the rest combined into one;
    // and the drain that ran to its release, one more.
    use graceful::node::kube::events::correlate::{BURST, SIMILAR};
    assert!(ours.len() <= SIMILAR + 1, "{ours:#?}");
    assert!(
        ours.iter().any(|e| e["message"]
            .as_str()
            .unwrap_or_default()
            .starts_with("(combined from similar events)")),
        "{ours:#?}"
    );
    // Creates and count updates together, within the pod's budget.
    assert!(writes <= BURST as u64 + 1, "{writes} Event writes");
    assert!(cpu_s < 10.0, "the agent spent {cpu_s} s of CPU");
}

/// The suite's app pod (which mounts the gate directory read-only at
/// /graceful), its gate volume's `hostPath` made `path` and its mount
/// read-only or not.
fn mounting(name: &str, path: &str, read_only: bool) -> String {
    crate::app_pod(name, None, 5)
        .replace("readOnly: true", &format!("readOnly: {read_only}"))
        .replace(
            "hostPath: {path: /var/run/graceful, type: DirectoryOrCreate}",
            &format!("hostPath: {{path: {path}}}"),
        )
}

#[test]
fn a_pod_mounting_the_gate_directory_read_write_is_refused_at_admission() {
    let (cluster, _serial) = crate::node();
    let policy = graceful_tests::cluster::workspace().join("deploy/admission");
    cluster.kubectl(&["apply", "-k", policy.to_str().unwrap()]);
    let ns = Namespace::create(&cluster, "gatemount");
    // The policy takes a moment to be in force after it is made.
    let dry = |yaml: &str| -> Result<String, String> {
        let yaml = yaml.replace("NAMESPACE", &ns.name);
        let out = cluster.kubectl_stdin(&["apply", "--dry-run=server", "-f", "-"], &yaml);
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        } else {
            Err(String::from_utf8_lossy(&out.stderr).into_owned())
        }
    };
    let refused = graceful_tests::wait_for(30, "the admission policy to be in force", || {
        dry(&mounting("writer", "/var/run/graceful", false)).err()
    });
    let result = || {
        assert!(
            refused.contains("container app mounts volume graceful, the host directory of graceful's gate, without readOnly: true"),
            "{refused}"
        );
        for (path, ro) in [
            ("/run", false),
            ("/var", false),
            ("/", false),
            ("/var/run/graceful/", false),
        ] {
            let e = dry(&mounting("writer", path, ro)).expect_err(path);
            assert!(e.contains("without readOnly: true"), "{path}: {e}");
        }
        for (path, ro) in [
            ("/var/run/graceful", true),
            ("/run/graceful", true),
            ("/var/run/other", false),
        ] {
            dry(&mounting("reader", path, ro))
                .unwrap_or_else(|e| panic!("{path} read-only {ro}: refused: {e}"));
        }
    };
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(result));
    cluster.kubectl(&["delete", "-k", policy.to_str().unwrap(), "--ignore-not-found"]);
    if let Err(e) = outcome {
        std::panic::resume_unwind(e);
    }
    eprintln!(
        "a pod mounting the gate directory (or /run, /var, /) read-write: refused by the API server: {}",
        refused.lines().next().unwrap_or_default()
    );
}
