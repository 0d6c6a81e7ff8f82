//! graceful's chart on the node, every way the agent comes and goes with
//! helm, with drains in flight and connections counted throughout:
//!
//! 1. `helm install` over the agent applied from deploy/base (the chart
//!    adopts its objects, as docs/install.md says to): the
//!    DaemonSet rolls with surge, the new agent takes both held hooks
//!    over, no hook is cut, and the counts stay the kernel's;
//! 2. `helm upgrade` in the middle of two drains: the same;
//! 3. `helm uninstall`: the chart's objects go; the pinned programs stay
//!    (as documented) and count on with no agent;
//! 4. the documented removal of what stays, `graceful uninstall` on the
//!    node through `kubectl debug node`: pins and gate files go;
//! 5. a reinstall (deploy/base again, as the rest of the suite expects)
//!    counts every connection still open, as ss does.

use graceful_tests::{
    cluster::{
        clients::Clients,
        helm::{self, RELEASE},
        pod::Pod,
        Cluster, Namespace, AGENT_NAMESPACE,
    },
    oracle,
};

use crate::handover::TwoDrains;

/// deploy/base's objects, which the chart takes over.
const ADOPTED: [(&str, bool); 5] = [
    ("daemonset/graceful", true),
    ("serviceaccount/graceful", true),
    ("resourcequota/graceful-critical-pods", true),
    ("clusterrole/graceful", false),
    ("clusterrolebinding/graceful", false),
];

/// Puts the node back as the rest of the suite expects it, whatever
/// happened: no release, deploy/base's agent ready.
struct Restore<'a>(&'a Cluster);

impl Drop for Restore<'_> {
    fn drop(&mut self) {
        let c = self.0;
        if helm::try_helm(c, &["status", RELEASE, "-n", AGENT_NAMESPACE]).is_ok() {
            let _ = helm::try_helm(c, &["uninstall", RELEASE, "-n", AGENT_NAMESPACE, "--wait"]);
        }
        let _ = c.restore_agent();
    }
}

/// deploy/base's agent, as the suite runs it (tests/overlays/agent).
fn apply_deploy_base(c: &Cluster) -> Result<String, String> {
    let overlay = graceful_tests::cluster::workspace().join("tests/overlays/agent");
    c.try_kubectl(&["apply", "-k", overlay.to_str().unwrap()])
}

/// The new agent says it serves the hooks the old one held.
fn took_both_hooks(cluster: &Cluster, pod: &str, during: &str) {
    let log = cluster.kubectl(&["-n", AGENT_NAMESPACE, "logs", pod, "-c", "agent"]);
    assert!(
        log.contains("serving the hooks the previous agent held")
            && log.contains("exec_hooks=1 http_hooks=1"),
        "{during}: the new agent did not take both hooks over: {log}"
    );
}

/// The agent's count of `pod`'s app container (through `graceful pods`
/// in the agent's pod) equals ss's, which is `want`.
fn counts_match(cluster: &Cluster, ns: &Namespace, pod: &Pod, want: u64, when: &str) {
    let what = format!("{when}: ss in the pod's namespace to show {want} inbound");
    let kernel = oracle::view_settled(Some(&pod.netns()), &pod.container_cgroup("app"), want, 10, &what);
    graceful_tests::wait_for(20, &format!("{when}: graceful pods to show ss's count"), || {
        let out = cluster.agent(&["pods", "-o", "json"]);
        let pods: serde_json::Value = serde_json::from_slice(&out.stdout).ok()?;
        let p = pods
            .as_array()?
            .iter()
            .find(|p| p["namespace"] == ns.name.as_str() && p["name"] == pod.name.as_str())?
            .clone();
        (p["inbound_live"] == kernel.inbound_live).then_some(())
    });
}

/// The pinned maps' count of `pod`'s app container, read on the host with
/// no agent running (`graceful cgroups`).
fn pinned_count(pod: &Pod) -> u64 {
    let cgroup = pod.container_cgroup("app");
    let out = std::process::Command::new(graceful_tests::agent::graceful_bin())
        .args(["cgroups", "-o", "json", "--all", "--path", &cgroup])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let rows: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    rows.as_array()
        .unwrap()
        .iter()
        .find(|r| r["path"] == cgroup.as_str())
        .and_then(|r| r["inbound_live"].as_u64())
        .unwrap_or_else(|| panic!("no pinned counter for {cgroup}: {rows}"))
}

/// `graceful uninstall` on the node, from the agent's own image, as
/// `kubectl debug node` runs it (the host's root at /host; /var/run is a
/// link to /run, which would resolve inside the container). What it said.
fn remove_with_kubectl_debug(cluster: &Cluster, ns: &Namespace) -> String {
    let node = cluster.kubectl(&["get", "nodes", "-o", "jsonpath={.items[0].metadata.name}"]);
    let image = graceful_tests::cluster::AGENT_IMAGE;
    let out = ns.kubectl(&[
        "debug",
        &format!("node/{node}"),
        "--profile=sysadmin",
        &format!("--image={image}"),
        "--image-pull-policy=IfNotPresent",
        "--",
        "/graceful",
        "uninstall",
        "--pin-dir",
        "/host/sys/fs/bpf/graceful",
        "--gate-dir",
        "/host/run/graceful",
    ]);
    // "Creating debugging pod node-debugger-NODE-XXXXX with container debugger on node NODE."
    let pod = out
        .split_whitespace()
        .find(|w| w.starts_with("node-debugger-"))
        .unwrap_or_else(|| panic!("kubectl debug named no pod: {out}"))
        .to_string();
    graceful_tests::wait_for(120, "the removal to finish", || {
        let phase = ns.kubectl(&["get", "pod", &pod, "-o", "jsonpath={.status.phase}"]);
        assert_ne!(phase, "Failed", "{}", ns.kubectl(&["logs", &pod]));
        (phase == "Succeeded").then_some(())
    });
    let said = ns.kubectl(&["logs", &pod]);
    ns.kubectl(&["delete", "pod", &pod, "--wait=false"]);
    said
}

#[test]
fn helm_installs_over_deploy_base_upgrades_mid_drain_and_uninstalls_as_documented() {
    let (cluster, _serial) = crate::node();
    let _restore = Restore(&cluster);
    let ns = Namespace::create(&cluster, "helm");
    ns.apply(&crate::app_pod("server", None, 5));
    let server = Pod::wait_ready(&ns, "app=server", 1, 60).remove(0);
    let mut clients = Clients::open(&cluster, format!("{}:8080", server.ip).parse().unwrap(), 5);
    counts_match(&cluster, &ns, &server, 5, "before");

    // 1. helm install over deploy/base, mid-drain.
    let mut drains = TwoDrains::start(&cluster, &ns);
    let old = cluster.agent_pod(10);
    for (object, namespaced) in ADOPTED {
        let mut scope = vec![];
        if namespaced {
            scope.extend(["-n", AGENT_NAMESPACE]);
        }
        let label = [
            &scope[..],
            &[
                "label",
                "--overwrite",
                object,
                "app.kubernetes.io/managed-by=Helm",
            ],
        ]
        .concat();
        cluster.kubectl(&label);
        let ns_ann = format!("meta.helm.sh/release-namespace={AGENT_NAMESPACE}");
        let name_ann = format!("meta.helm.sh/release-name={RELEASE}");
        let annotate = [
            &scope[..],
            &["annotate", "--overwrite", object, &name_ann, &ns_ann],
        ]
        .concat();
        cluster.kubectl(&annotate);
    }
    let chart = helm::chart();
    let values = helm::node_values();
    let (chart, values) = (chart.to_str().unwrap(), values.to_str().unwrap());
    let out = helm::helm(
        &cluster,
        &[
            "install",
            RELEASE,
            chart,
            "-n",
            AGENT_NAMESPACE,
            "-f",
            values,
            "--wait",
            "--timeout",
            "180s",
        ],
    );
    assert!(out.contains("STATUS: deployed"), "{out}");
    let new = cluster.agent_replaced(&old);
    took_both_hooks(&cluster, &new, "helm install");
    drains.no_sigterm_yet("helm install");
    drains.finish(&ns, "helm install over deploy/base");
    counts_match(&cluster, &ns, &server, 5, "after helm install");
    let ds = cluster.json(&["-n", AGENT_NAMESPACE, "get", "ds/graceful"]);
    assert_eq!(
        ds["metadata"]["labels"]["app.kubernetes.io/instance"], RELEASE,
        "helm owns the DaemonSet"
    );

    // 2. helm upgrade, mid-drain: a new pod template rolls with surge.
    let mut drains = TwoDrains::start(&cluster, &ns);
    let old = new;
    helm::helm(
        &cluster,
        &[
            "upgrade",
            RELEASE,
            chart,
            "-n",
            AGENT_NAMESPACE,
            "--reuse-values",
            "--set-string",
            "podAnnotations.graceful\\.dev/revision=2",
            "--wait",
            "--timeout",
            "180s",
        ],
    );
    let new = cluster.agent_replaced(&old);
    took_both_hooks(&cluster, &new, "helm upgrade");
    drains.no_sigterm_yet("helm upgrade");
    drains.finish(&ns, "helm upgrade");
    counts_match(&cluster, &ns, &server, 5, "after helm upgrade");

    // 3. helm uninstall: the chart's objects go, the programs stay.
    helm::helm(
        &cluster,
        &[
            "uninstall",
            RELEASE,
            "-n",
            AGENT_NAMESPACE,
            "--wait",
            "--timeout",
            "120s",
        ],
    );
    graceful_tests::wait_for(120, "the agent pods to be gone", || {
        cluster.agent_pods().is_empty().then_some(())
    });
    let left = cluster.kubectl(&[
        "get",
        "daemonsets,serviceaccounts,services,configmaps,roles,clusterroles,clusterrolebindings,resourcequotas",
        "-A",
        "-l",
        &format!("app.kubernetes.io/instance={RELEASE}"),
        "-o",
        "name",
    ]);
    assert!(left.trim().is_empty(), "helm uninstall left: {left}");
    for object in ["clusterrole/graceful", "clusterrolebinding/graceful"] {
        assert!(
            cluster.try_kubectl(&["get", object]).is_err(),
            "{object} is still there"
        );
    }
    let pins = std::path::Path::new("/sys/fs/bpf/graceful");
    assert!(
        pins.is_dir(),
        "the pins are documented to stay after helm uninstall"
    );
    // With no agent at all, the kernel programs count on.
    assert_eq!(pinned_count(&server), 5, "the pinned count with no agent");
    clients.close_some(2);
    let what = "ss to show the 3 connections left";
    oracle::view_settled(
        Some(&server.netns()),
        &server.container_cgroup("app"),
        3,
        10,
        what,
    );
    graceful_tests::wait_for(10, "the pinned count to follow the closes", || {
        (pinned_count(&server) == 3).then_some(())
    });
    eprintln!("after helm uninstall: no agent, the pinned programs counted 5 -> 3 as ss did");

    // 4. What stays, removed as docs/install.md says.
    let said = remove_with_kubectl_debug(&cluster, &ns);
    eprintln!("graceful uninstall through kubectl debug node: {}", said.trim());
    assert!(!pins.exists(), "the pins are still there: {said}");
    assert!(
        !std::path::Path::new("/run/graceful/graceful-wait").exists()
            && !std::path::Path::new("/run/graceful/gate.sock").exists(),
        "the gate files are still there: {said}"
    );

    // 5. Reinstalled: the connections still open are counted (adopted).
    apply_deploy_base(&cluster).unwrap_or_else(|e| panic!("{e}"));
    cluster.agent_pod(180);
    counts_match(&cluster, &ns, &server, 3, "after the reinstall");
    clients.close();
    counts_match(&cluster, &ns, &server, 0, "all closed");
}
