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
//!   permission, exit 1.

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
        ns.kubectl(&["create", "serviceaccount", name]);
        let manifest = format!(
            "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata: {{name: {role}, namespace: {AGENT_NAMESPACE}}}\nrules:\n{rules}\n---\n\
             apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata: {{name: {role}, namespace: {AGENT_NAMESPACE}}}\n\
             roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: Role, name: {role}}}\n\
             subjects: [{{kind: ServiceAccount, name: {name}, namespace: {ns}}}]\n",
            ns = ns.name
        );
        let out = cluster.kubectl_stdin(&["apply", "-f", "-"], &manifest);
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
}
