//! The agent as the DaemonSet runs it: unprivileged, with the capabilities
//! it lists and no more; `graceful doctor` passes inside it; its operator
//! commands answer there; and `graceful pods` names real pods, with counts
//! equal to the kernel's own view.

use std::collections::BTreeSet;

use graceful_tests::{
    cluster::{clients::Clients, pod::Pod, Namespace, AGENT_NAMESPACE},
    oracle,
};

/// The capabilities deploy/base adds, by number (linux/capability.h).
const CAPS: &[(&str, u32)] = &[
    ("BPF", 39),
    ("PERFMON", 38),
    ("NET_ADMIN", 12),
    ("SYS_ADMIN", 21),
    ("SYS_PTRACE", 19),
];

fn status_field(pid: u32, field: &str) -> String {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .unwrap_or_else(|| panic!("no {field} in /proc/{pid}/status"))
        .trim()
        .to_string()
}

#[test]
fn the_agent_runs_unprivileged_with_exactly_its_listed_capabilities_and_doctor_passes() {
    let (cluster, _serial) = crate::node();
    let name = cluster.agent_pod(60);
    let json = cluster.json(&["-n", AGENT_NAMESPACE, "get", "pod", &name]);
    let sc = &json["spec"]["containers"][0]["securityContext"];
    assert_ne!(sc["privileged"], true, "the agent's container is privileged");
    let added: BTreeSet<&str> = sc["capabilities"]["add"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap())
        .collect();
    let listed: BTreeSet<&str> = CAPS.iter().map(|(n, _)| *n).collect();
    assert_eq!(
        added, listed,
        "the pod's capabilities are not the DaemonSet's list"
    );

    // What the kernel gave the running process: those bits and no other,
    // no privilege escalation, a seccomp filter (RuntimeDefault).
    let pod = Pod::from_json(&json);
    let pid = pod.container_pid("agent");
    let want: u64 = CAPS.iter().map(|(_, bit)| 1u64 << bit).sum();
    for set in ["CapEff", "CapPrm", "CapBnd"] {
        let have = u64::from_str_radix(&status_field(pid, set), 16).unwrap();
        assert_eq!(
            have, want,
            "{set} of the agent (pid {pid}) is {have:#x}, not exactly the listed capabilities {want:#x}"
        );
    }
    assert_eq!(
        status_field(pid, "NoNewPrivs"),
        "1",
        "allowPrivilegeEscalation: false"
    );
    assert_eq!(
        status_field(pid, "Seccomp"),
        "2",
        "the RuntimeDefault seccomp filter"
    );

    let out = cluster.agent(&["doctor"]);
    let text = String::from_utf8_lossy(&out.stdout);
    eprintln!(
        "graceful doctor in {name}:\n{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "graceful doctor failed in the agent's pod");
    assert!(!text.contains("FAIL"), "a doctor check failed:\n{text}");
    for check in [
        "kernel",
        "privileges",
        "btf",
        "cgroup2",
        "bpffs",
        "pins",
        "programs",
    ] {
        assert!(
            text.lines()
                .any(|l| l.starts_with("ok") && l.split_whitespace().nth(1) == Some(check)),
            "doctor's {check} line is not ok:\n{text}"
        );
    }
}

#[test]
fn the_operator_commands_answer_inside_the_agent_pod() {
    let (cluster, _serial) = crate::node();
    let name = cluster.agent_pod(60);
    // Through the API socket (an emptyDir: the root filesystem is read-only).
    let drains = cluster.agent(&["drains", "-o", "json"]);
    assert!(
        drains.status.success(),
        "graceful drains in the agent's pod: {}",
        String::from_utf8_lossy(&drains.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&drains.stdout).unwrap();
    assert!(v["active"].is_array() && v["released"].is_array(), "{v}");

    let pods = cluster.agent(&["pods"]);
    let text = String::from_utf8_lossy(&pods.stdout);
    let stderr = String::from_utf8_lossy(&pods.stderr);
    assert!(
        pods.status.success() && !stderr.contains("no graceful daemon"),
        "graceful pods fell back to the pins: {stderr}"
    );
    assert!(
        text.lines()
            .any(|l| l.split_whitespace().take(2).eq([AGENT_NAMESPACE, name.as_str()])),
        "graceful pods does not name the agent's own pod {AGENT_NAMESPACE}/{name}:\n{text}"
    );
}

#[test]
fn graceful_pods_names_real_pods_with_counts_equal_to_ss() {
    let (cluster, _serial) = crate::node();
    let ns = Namespace::create(&cluster, "counts");
    ns.apply(&crate::app_pod("server", None, 5));
    let pod = Pod::wait_ready(&ns, "app=server", 1, 60).remove(0);
    let mut clients = Clients::open(&cluster, format!("{}:8080", pod.ip).parse().unwrap(), 7);

    let netns = pod.netns();
    let cgroup = pod.container_cgroup("app");
    let check = |want_inbound: u64| {
        let what = format!("ss in the pod's namespace to show {want_inbound} inbound");
        let kernel = oracle::view_settled(Some(&netns), &cgroup, want_inbound, 10, &what);
        // The agent's figures settle as its events arrive: wait for them.
        let found = graceful_tests::wait_for(10, "graceful pods to show the kernel's counts", || {
            let out = cluster.agent(&["pods", "-o", "json"]);
            let pods: serde_json::Value = serde_json::from_slice(&out.stdout).ok()?;
            let p = pods
                .as_array()?
                .iter()
                .find(|p| p["namespace"] == ns.name.as_str() && p["name"] == "server")?
                .clone();
            let c = p["containers"]
                .as_array()?
                .iter()
                .find(|c| c["name"] == "app")?
                .clone();
            (c["inbound_live"] == kernel.inbound_live
                && c["listeners"] == kernel.listeners
                && c["outbound_live"] == kernel.outbound_live
                && p["inbound_live"] == kernel.inbound_live)
                .then_some(p)
        });
        assert_eq!(found["uid"], pod.uid.as_str());
        assert_eq!(found["state"], "Running");
    };
    check(7);
    clients.close_some(4);
    check(3);
    clients.close();
    check(0);
}

/// `deploy/base` as shipped (appArmorProfile, Kubernetes 1.30+, included)
/// is what the node's API server takes, field for field: no overlay stands
/// between the base and the clusters users run. Strict field validation
/// refuses an unknown field instead of dropping it with a warning.
#[test]
fn deploy_base_is_taken_as_shipped() {
    let (cluster, _serial) = crate::node();
    let base = graceful_tests::cluster::workspace().join("deploy/base");
    let out = cluster.kubectl(&[
        "apply",
        "--dry-run=server",
        "--validate=strict",
        "-k",
        &base.to_string_lossy(),
    ]);
    assert!(out.contains("daemonset.apps/graceful"), "{out}");
    // And the agent that runs carries the profile the base asks for.
    let ds = cluster.json(&[
        "-n",
        graceful_tests::cluster::AGENT_NAMESPACE,
        "get",
        "daemonset",
        "graceful",
    ]);
    let profile = &ds["spec"]["template"]["spec"]["containers"][0]["securityContext"]["appArmorProfile"];
    assert!(profile.is_object(), "the DaemonSet lost appArmorProfile: {ds}");
}
