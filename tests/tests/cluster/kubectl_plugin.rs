//! `kubectl graceful`, run as kubectl runs a plugin (`kubectl-graceful` on
//! PATH), against the node: it reaches the agent through the API server's
//! pods/portforward, with the caller's own RBAC.
//!
//! - as the cluster's admin: `pods` counts a pod as ss does, `cgroups`
//!   the same from the pins, `drains` shows a held drain, `doctor` passes,
//!   each for `--node` and for every node;
//! - as a user granted only `list` pods and `get`, `create` pods/portforward in
//!   graceful-system: the same answers;
//! - as a user without pods/portforward: one line that names the
//!   permission, exit 1;
//! - as an app team with `view` in its own namespace alone: the agents
//!   refuse it in one line, and `history` and `at-risk --events` read its
//!   drains from the Events the agent posted, with their annotations.

use std::{path::PathBuf, process::Command};

use graceful_tests::{
    cluster::{pod::Pod, Cluster, Namespace, AGENT_NAMESPACE},
    oracle,
};
use serde_json::Value;

use crate::gate::{deleted_with_clients, held_until_the_last_close};

/// `kubectl graceful ARGS`, the plugin found on PATH: as the admin
/// through KUBECONFIG (kubectl takes no flag before a plugin's name, and
/// the plugin inherits its environment), or as another user through the
/// plugin's own `--kubeconfig`.
pub(crate) fn kubectl_graceful(
    cluster: &Cluster,
    kubeconfig: Option<&PathBuf>,
    args: &[&str],
) -> (i32, String, String) {
    let plugin_dir = graceful_tests::agent::graceful_bin()
        .parent()
        .unwrap()
        .to_path_buf();
    assert!(
        plugin_dir.join("kubectl-graceful").is_file(),
        "kubectl-graceful is not built beside {} (cargo xtask test builds it)",
        plugin_dir.display()
    );
    let path = format!(
        "{}:{}",
        plugin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut cmd = Command::new("kubectl");
    cmd.env("PATH", path)
        .env("KUBECONFIG", &cluster.kubeconfig)
        .arg("graceful");
    if let Some(k) = kubeconfig {
        cmd.arg("--kubeconfig").arg(k);
    }
    let out = cmd.args(args).output().expect("kubectl");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The JSON array of `-o json`: each node's answer.
fn answers(out: &str) -> Vec<Value> {
    serde_json::from_str::<Value>(out)
        .unwrap_or_else(|e| panic!("{e}: {out}"))
        .as_array()
        .unwrap()
        .clone()
}

/// A service account of the test namespace with `rules` on graceful's
/// namespace, and a kubeconfig that authenticates as it. The Role and its
/// binding live in graceful-system: removed on drop.
struct User<'a> {
    cluster: &'a Cluster,
    name: String,
    kubeconfig: PathBuf,
}

impl<'a> User<'a> {
    fn new(cluster: &'a Cluster, ns: &Namespace, name: &str, rules: &str) -> User<'a> {
        let role = format!("{}-{name}", ns.name);
        let manifest = format!(
            "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata: {{name: {role}, namespace: {AGENT_NAMESPACE}}}\nrules:\n{rules}\n---\n\
             apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata: {{name: {role}, namespace: {AGENT_NAMESPACE}}}\n\
             roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: Role, name: {role}}}\n\
             subjects: [{{kind: ServiceAccount, name: {name}, namespace: {ns}}}]\n",
            ns = ns.name
        );
        User::bound(cluster, ns, name, &manifest)
    }

    /// An app team's member: `view` in its own namespace (a RoleBinding
    /// there to the ClusterRole), nothing in graceful's.
    fn team(cluster: &'a Cluster, ns: &Namespace, name: &str) -> User<'a> {
        let manifest = format!(
            "apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata: {{name: {name}-view, namespace: {ns}}}\n\
             roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: view}}\n\
             subjects: [{{kind: ServiceAccount, name: {name}, namespace: {ns}}}]\n",
            ns = ns.name
        );
        User::bound(cluster, ns, name, &manifest)
    }

    /// The service account `name`, `manifest` applied (its grants), and a
    /// kubeconfig with its token.
    fn bound(cluster: &'a Cluster, ns: &Namespace, name: &str, manifest: &str) -> User<'a> {
        let role = format!("{}-{name}", ns.name);
        ns.kubectl(&["create", "serviceaccount", name]);
        let out = cluster.kubectl_stdin(&["apply", "-f", "-"], manifest);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let user = User {
            cluster,
            name: role,
            kubeconfig: std::env::temp_dir().join(format!("graceful-kubeconfig-{}-{name}", ns.name)),
        };
        let token = ns.kubectl(&["create", "token", name, "--duration=10m"]);
        let server = cluster.kubectl(&[
            "config",
            "view",
            "--minify",
            "-o",
            "jsonpath={.clusters[0].cluster.server}",
        ]);
        let ca = cluster.kubectl(&[
            "config",
            "view",
            "--minify",
            "-o",
            "jsonpath={.clusters[0].cluster.certificate-authority}",
        ]);
        std::fs::write(
            &user.kubeconfig,
            format!(
                "apiVersion: v1\nkind: Config\nclusters: [{{name: node, cluster: {{server: \"{server}\", certificate-authority: \"{ca}\"}}}}]\n\
                 users: [{{name: {name}, user: {{token: \"{}\"}}}}]\n\
                 contexts: [{{name: {name}, context: {{cluster: node, user: {name}}}}}]\ncurrent-context: {name}\n",
                token.trim()
            ),
        )
        .unwrap();
        user
    }
}

impl Drop for User<'_> {
    fn drop(&mut self) {
        for kind in ["rolebinding", "role"] {
            let _ = self.cluster.try_kubectl(&[
                "-n",
                AGENT_NAMESPACE,
                "delete",
                kind,
                &self.name,
                "--ignore-not-found",
            ]);
        }
        let _ = std::fs::remove_file(&self.kubeconfig);
    }
}

#[test]
fn kubectl_graceful_reaches_every_agent_with_the_callers_own_rbac() {
    let (cluster, _serial) = crate::node();
    let ns = Namespace::create(&cluster, "plugin");
    let node = cluster.kubectl(&["get", "nodes", "-o", "jsonpath={.items[0].metadata.name}"]);
    let hook = [
        "--policy", "drained", "--settle", "200ms", "--min", "0s", "--max", "60s",
    ];
    ns.apply(&crate::app_pod("held", Some(&hook), 70));
    let pod = Pod::wait_ready(&ns, "app=held", 1, 60).remove(0);
    let (clients, mut log) = deleted_with_clients(&cluster, &ns, &pod, "held");
    let kernel = oracle::view(Some(&pod.netns()), &pod.container_cgroup("app"));
    assert_eq!(kernel.inbound_live, 3);

    let viewer = User::new(
        &cluster,
        &ns,
        "viewer",
        "- {apiGroups: [\"\"], resources: [pods], verbs: [list]}\n- {apiGroups: [\"\"], resources: [pods/portforward], verbs: [get, create]}",
    );
    for (who, kubeconfig) in [("admin", None), ("viewer", Some(&viewer.kubeconfig))] {
        for scope in [vec!["--node", node.as_str()], vec![]] {
            fn with<'s>(cmd: &[&'s str], scope: &[&'s str]) -> Vec<&'s str> {
                [cmd, scope, &["-o", "json"]].concat()
            }
            // pods: the held pod, Draining, counted as ss counts it.
            let (code, out, err) =
                kubectl_graceful(&cluster, kubeconfig, &with(&["pods", "-n", &ns.name], &scope));
            assert_eq!(code, 0, "{who} {scope:?}: {err}");
            let a = answers(&out);
            assert_eq!(a.len(), 1, "{out}");
            assert_eq!(a[0]["node"], node.as_str());
            let p = &a[0]["answer"][0];
            assert_eq!(p["name"], "held", "{out}");
            assert_eq!(p["inbound_live"], kernel.inbound_live, "{who}: {p}");
            assert_eq!(p["state"], "Draining", "{who}: {p}");
            // drains: its drain, held.
            let (code, out, err) = kubectl_graceful(&cluster, kubeconfig, &with(&["drains"], &scope));
            assert_eq!(code, 0, "{who}: {err}");
            let active = &answers(&out)[0]["answer"]["active"];
            assert!(
                active
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|d| d["pod"] == pod.uid.as_str()),
                "{who}: no active drain of {}: {out}",
                pod.uid
            );
            // cgroups: the pinned count of its container.
            let cgroup = pod.container_cgroup("app");
            let (code, out, err) = kubectl_graceful(
                &cluster,
                kubeconfig,
                &with(&["cgroups", "--path", &cgroup], &scope),
            );
            assert_eq!(code, 0, "{who}: {err}");
            let rows = &answers(&out)[0]["answer"];
            assert_eq!(rows[0]["path"], cgroup.as_str(), "{out}");
            assert_eq!(rows[0]["inbound_live"], kernel.inbound_live, "{who}: {out}");
            // doctor: every check passes.
            let (code, out, err) = kubectl_graceful(&cluster, kubeconfig, &with(&["doctor"], &scope));
            assert_eq!(code, 0, "{who}: {err}{out}");
            let findings = answers(&out)[0]["answer"].as_array().unwrap().clone();
            assert!(
                findings
                    .iter()
                    .any(|f| f["check"] == "kernel" && f["level"] == "ok"),
                "{out}"
            );
            assert!(findings.iter().all(|f| f["level"] != "fail"), "{out}");
        }
    }
    // The table, as a user reads it.
    let (code, out, _) = kubectl_graceful(&cluster, Some(&viewer.kubeconfig), &["pods", "-n", &ns.name]);
    assert_eq!(code, 0);
    let row = out
        .lines()
        .find(|l| l.contains(" held "))
        .unwrap_or_else(|| panic!("{out}"));
    assert!(row.starts_with(&node) && row.contains("Draining"), "{out}");
    eprintln!("{out}");

    // Without pods/portforward: refused, in one line that says what is needed.
    let lister = User::new(
        &cluster,
        &ns,
        "lister",
        "- {apiGroups: [\"\"], resources: [pods], verbs: [list]}",
    );
    let (code, out, err) = kubectl_graceful(&cluster, Some(&lister.kubeconfig), &["pods"]);
    assert_eq!(code, 1, "{out}{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("forbidden") || err.contains("Forbidden"), "{err}");
    assert!(err.contains("pods/portforward"), "{err}");
    eprintln!("without pods/portforward: {}", err.trim());
    // Without even list: the same, for list.
    let nobody = User::new(
        &cluster,
        &ns,
        "nobody",
        "- {apiGroups: [\"\"], resources: [configmaps], verbs: [get]}",
    );
    let (code, _, err) = kubectl_graceful(&cluster, Some(&nobody.kubeconfig), &["pods"]);
    assert_eq!(code, 1);
    assert!(err.contains("needs `list` on pods"), "{err}");

    held_until_the_last_close(
        &ns,
        &pod,
        clients,
        &mut log,
        "held",
        "held through kubectl graceful: ",
    );
    an_app_team_reads_its_drains_with_view_alone(&cluster, &ns, &pod);
}

/// An app team with `view` in its namespace and nothing in graceful's:
/// the agents are closed to it (one line), its own drains are not: the
/// Events the agent posted, annotated with the workload and the report's
/// figures, in one LIST.
fn an_app_team_reads_its_drains_with_view_alone(cluster: &Cluster, ns: &Namespace, pod: &Pod) {
    let team = User::team(cluster, ns, "team");
    let (code, _, err) = kubectl_graceful(cluster, Some(&team.kubeconfig), &["drains"]);
    assert_eq!((code, err.trim().lines().count()), (1, 1), "{err}");
    assert!(err.contains("needs `list` on pods"), "{err}");

    let t0 = std::time::Instant::now();
    let (code, out, err) = kubectl_graceful(
        cluster,
        Some(&team.kubeconfig),
        &["history", "-n", &ns.name, "-o", "json"],
    );
    let history_ms = t0.elapsed().as_secs_f64() * 1000.0;
    assert_eq!(code, 0, "{err}");
    let events: Vec<Value> = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    let of = |reason: &str| {
        events
            .iter()
            .find(|e| e["reason"] == reason && e["involvedObject"]["uid"] == pod.uid.as_str())
            .unwrap_or_else(|| panic!("no {reason} Event of {}: {out}", pod.uid))
    };
    assert_eq!(
        of("DrainReleased")["metadata"]["annotations"]["graceful.dev/workload"],
        "pod"
    );
    let report = &of("InboundDrained")["metadata"]["annotations"];
    assert_eq!(
        (
            &report["graceful.dev/workload"],
            &report["graceful.dev/inbound-open"],
            &report["graceful.dev/opted-in"]
        ),
        (&"pod".into(), &"0".into(), &"true".into()),
        "{report}"
    );
    assert!(
        events.iter().all(|e| e["reportingComponent"] == "graceful"),
        "{out}"
    );
    let (code, table, _) = kubectl_graceful(cluster, Some(&team.kubeconfig), &["history", "-n", &ns.name]);
    assert_eq!(code, 0);
    assert!(
        table
            .lines()
            .any(|l| l.contains("InboundDrained") && l.contains(" held ")),
        "{table}"
    );
    eprintln!("{table}");
    // Its one drain, and what it calls for: the hook's max was 60 s, the
    // pod's grace period 70 s.
    let (code, out, err) = kubectl_graceful(
        cluster,
        Some(&team.kubeconfig),
        &["recommend", "-n", &ns.name, "-o", "json"],
    );
    assert_eq!(code, 0, "{err}");
    let rows: Vec<Value> = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    let r = &rows[0];
    assert_eq!(rows.len(), 1, "{out}");
    assert_eq!(
        (
            &r["workload"],
            &r["drains"],
            &r["at_deadline"],
            &r["max_now_ms"],
            &r["grace_period_now_s"]
        ),
        (&"pod".into(), &1.into(), &0.into(), &60_000.into(), &70.into()),
        "{out}"
    );
    let (max_s, grace_s) = (
        r["max_s"].as_u64().unwrap(),
        r["grace_period_s"].as_u64().unwrap(),
    );
    assert!(
        max_s >= 5 && max_s * 1000 >= 2 * r["p99_ms"].as_u64().unwrap() && grace_s == max_s + 5,
        "{out}"
    );
    let (_, table, _) = kubectl_graceful(cluster, Some(&team.kubeconfig), &["recommend", "-n", &ns.name]);
    eprintln!("{table}");
    // Its one pod drained: no workload of the namespace at risk.
    let (code, out, err) = kubectl_graceful(
        cluster,
        Some(&team.kubeconfig),
        &["at-risk", "--events", "-n", &ns.name, "-o", "json"],
    );
    assert_eq!((code, out.trim()), (0, "[]"), "{err}");
    // The same namespace, asked of the agents with an administrator's rights.
    let t0 = std::time::Instant::now();
    let (code, _, err) = kubectl_graceful(cluster, None, &["drains", "-o", "json"]);
    assert_eq!(code, 0, "{err}");
    eprintln!(
        "history from Events (one LIST, view): {history_ms:.0} ms; drains from the agents (a port-forward a node): {:.0} ms",
        t0.elapsed().as_secs_f64() * 1000.0
    );
}
