//! Debian's Prometheus (the `prometheus` package's server, which `cargo
//! xtask setup` unpacks beside promtool) run on the test node: in the
//! node's network namespace, where pod addresses route, scraping graceful's
//! agent pods and evaluating the chart's rules. Stopped, and its data
//! removed, on drop.
//!
//! Debian builds Prometheus without its Kubernetes discovery (2.42: "field
//! kubernetes_sd_configs not found"), so the targets come from the API
//! server through a file_sd file, written from the agent pods as a
//! PodMonitor's relabelings would label them: `namespace`, `pod`, `node`,
//! and honor_labels.

use std::{
    path::PathBuf,
    process::{Child, Command, Stdio},
    time::Duration,
};

use serde_json::Value;

use super::{Cluster, NODE_NETNS};

/// Where it listens, inside the node's namespace (the node is the test's
/// own: nothing else binds there).
const LISTEN: &str = "127.0.0.1:19190";

pub struct Prometheus<'a> {
    cluster: &'a Cluster,
    child: Child,
    dir: PathBuf,
}

/// The scrape config: the job the chart's alerts select, honor_labels as
/// the chart's monitors set it, targets from [`TARGETS`].
const CONFIG: &str = r#"global:
  scrape_interval: 1s
  scrape_timeout: 900ms
  evaluation_interval: 1s
rule_files: [rules.yaml]
scrape_configs:
  - job_name: graceful
    honor_labels: true
    file_sd_configs:
      - files: [targets.json]
        refresh_interval: 1s
"#;
const TARGETS: &str = "targets.json";

/// The server binary, unpacked by setup beside `promtool`.
fn binary() -> PathBuf {
    let promtool = crate::promtool::command().get_program().to_owned();
    PathBuf::from(promtool).with_file_name("prometheus")
}

impl<'a> Prometheus<'a> {
    /// Starts it with `rules` (a rules file's text) and waits until it
    /// answers.
    pub fn start(cluster: &'a Cluster, rules: &str) -> Prometheus<'a> {
        let dir = std::env::temp_dir().join(format!("graceful-prometheus-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("data")).unwrap();
        std::fs::write(dir.join("rules.yaml"), rules).unwrap();
        std::fs::write(dir.join("prometheus.yml"), CONFIG).unwrap();
        let log = std::fs::File::create(dir.join("log")).unwrap();
        let netns = NODE_NETNS.rsplit('/').next().unwrap();
        let child = Command::new("ip")
            .args(["netns", "exec", netns])
            .arg(binary())
            .arg(format!("--config.file={}", dir.join("prometheus.yml").display()))
            .arg(format!("--storage.tsdb.path={}", dir.join("data").display()))
            .arg(format!("--web.listen-address={LISTEN}"))
            .arg("--web.console.templates=/nonexistent")
            .arg("--web.console.libraries=/nonexistent")
            .current_dir(&dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start prometheus");
        let p = Prometheus { cluster, child, dir };
        p.discover();
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while !p.get("/-/ready").is_ok_and(|b| b.contains("Ready")) {
            assert!(
                std::time::Instant::now() < deadline,
                "Prometheus did not start: {}",
                p.log()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        p
    }

    /// Writes the targets: every agent pod's metrics port, labelled as
    /// the chart's PodMonitor labels them.
    pub fn discover(&self) {
        let pods = self.cluster.json(&[
            "-n",
            super::AGENT_NAMESPACE,
            "get",
            "pods",
            "-l",
            super::AGENT_SELECTOR,
        ]);
        let groups: Vec<Value> = pods["items"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|p| p["status"]["podIP"].is_string())
            .map(|p| {
                serde_json::json!({
                    "targets": [format!("{}:{}", p["status"]["podIP"].as_str().unwrap(), super::AGENT_METRICS_PORT)],
                    "labels": {
                        "namespace": p["metadata"]["namespace"],
                        "pod": p["metadata"]["name"],
                        "node": p["spec"]["nodeName"],
                    }
                })
            })
            .collect();
        // Renamed into place: Prometheus never reads half a file.
        let tmp = self.dir.join("targets.json.tmp");
        std::fs::write(&tmp, Value::Array(groups).to_string()).unwrap();
        std::fs::rename(&tmp, self.dir.join(TARGETS)).unwrap();
    }

    /// Its log so far, for a failing assertion.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("log")).unwrap_or_default()
    }

    /// `GET path` on its web port, from inside the node; the body.
    pub fn get(&self, path: &str) -> Result<String, String> {
        self.cluster.get_on_node(LISTEN.parse().unwrap(), path)
    }

    /// An instant query: its result vector (each element's `metric` and
    /// `value`).
    pub fn query(&self, promql: &str) -> Vec<Value> {
        let body = self
            .get(&format!("/api/v1/query?query={}", encode(promql)))
            .unwrap_or_else(|e| panic!("query {promql}: {e}"));
        let v: Value = serde_json::from_str(&body).unwrap_or_else(|e| panic!("{e}: {body}"));
        assert_eq!(v["status"], "success", "query {promql}: {v}");
        v["data"]["result"].as_array().cloned().unwrap_or_default()
    }

    /// The alerts it holds now (pending or firing).
    pub fn alerts(&self) -> Vec<Value> {
        let body = self.get("/api/v1/alerts").unwrap();
        let v: Value = serde_json::from_str(&body).unwrap();
        v["data"]["alerts"].as_array().cloned().unwrap_or_default()
    }
}

impl Drop for Prometheus<'_> {
    fn drop(&mut self) {
        // `ip netns exec` execs the server: this is its pid.
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Percent-encoding of a query parameter (everything but unreserved
/// characters).
fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}
