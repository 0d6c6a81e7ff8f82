//! Invariants on the agent's rendered objects: nothing privileged, the
//! DaemonSet exactly as its comments say, the ClusterRole's exact rules.

use super::*;

#[test]
fn nothing_is_privileged() {
    for (owner, spec) in rendered().values().flat_map(|objs| pod_templates(objs)) {
        for c in containers(spec) {
            let sc = c.security_context.clone().unwrap_or_default();
            assert_ne!(
                sc.privileged,
                Some(true),
                "{owner}: container {} is privileged",
                c.name
            );
            assert_ne!(
                sc.allow_privilege_escalation,
                Some(true),
                "{owner}: container {} allows privilege escalation",
                c.name
            );
            // The API server's own rule: Bidirectional needs a privileged container.
            for m in c.volume_mounts.iter().flatten() {
                assert_ne!(
                    m.mount_propagation.as_deref(),
                    Some("Bidirectional"),
                    "{owner}: container {} mounts {} Bidirectional, which the API server allows only \
                     in privileged containers",
                    c.name,
                    m.mount_path
                );
            }
        }
        assert_ne!(spec.host_network, Some(true), "{owner}: hostNetwork");
        assert_ne!(spec.host_ipc, Some(true), "{owner}: hostIPC");
    }
    // Only the agent needs more than a plain pod.
    for (dir, objs) in rendered()
        .iter()
        .filter(|(d, _)| d.starts_with("deploy/examples/"))
    {
        for (owner, spec) in pod_templates(objs) {
            assert_ne!(spec.host_pid, Some(true), "{dir}: {owner} uses hostPID");
            for c in containers(spec) {
                let add = c
                    .security_context
                    .as_ref()
                    .and_then(|s| s.capabilities.as_ref()?.add.clone());
                assert!(
                    add.unwrap_or_default().is_empty(),
                    "{owner}: container {} adds capabilities",
                    c.name
                );
            }
        }
    }
}

/// The capabilities `graceful doctor` checks for, read from its source:
/// the DaemonSet must grant exactly these.
fn doctor_capabilities() -> BTreeSet<String> {
    let src = read(&root().join("graceful-daemon/src/node/doctor.rs"));
    let start = src.find("const CAPS").expect("doctor.rs has no CAPS list");
    let list = &src[start..start + src[start..].find("];").unwrap()];
    list.split('"')
        .filter_map(|s| s.strip_prefix("CAP_"))
        .map(str::to_string)
        .collect()
}

#[test]
fn the_agent_daemonset_has_what_it_needs_and_no_more() {
    let pod = agent_pod();
    let c = agent_container();
    assert_eq!(
        pod.host_pid,
        Some(true),
        "the gate reads /proc/<pid>/cgroup of host pids: hostPID"
    );

    let sc = c
        .security_context
        .as_ref()
        .expect("the agent has no securityContext");
    assert_eq!(sc.privileged, Some(false));
    assert_eq!(sc.allow_privilege_escalation, Some(false));
    assert_eq!(sc.read_only_root_filesystem, Some(true));
    assert_eq!(sc.run_as_user, Some(0));
    let caps = sc.capabilities.as_ref().expect("no capabilities");
    assert_eq!(
        caps.drop.as_deref(),
        Some(&["ALL".to_string()][..]),
        "capabilities must drop ALL"
    );
    let added: BTreeSet<String> = caps.add.iter().flatten().cloned().collect();
    let wanted = doctor_capabilities();
    assert!(
        wanted.contains("BPF") && wanted.len() >= 4,
        "doctor's list looks wrong: {wanted:?}"
    );
    assert_eq!(
        added, wanted,
        "the DaemonSet's capabilities and `graceful doctor`'s list differ"
    );
    assert!(
        !added.contains("SYS_RESOURCE"),
        "memlock is memcg-accounted on every kernel graceful runs on"
    );
    assert!(sc.seccomp_profile.is_some(), "say which seccomp profile, and why");

    // Mounts: host path, where, read-only.
    let gate = gate_dir();
    let wanted_mounts = [
        ("/sys/fs/bpf", "/sys/fs/bpf", false),
        ("/sys/fs/cgroup", "/sys/fs/cgroup", true),
        ("/sys/kernel/btf", "/sys/kernel/btf", true),
        (gate.as_str(), gate.as_str(), false),
    ];
    for (host, at, ro) in wanted_mounts {
        let m = c
            .volume_mounts
            .iter()
            .flatten()
            .find(|m| m.mount_path == at)
            .unwrap_or_else(|| panic!("the agent mounts nothing at {at}"));
        let v = pod.volumes.iter().flatten().find(|v| v.name == m.name).unwrap();
        let hp = v
            .host_path
            .as_ref()
            .unwrap_or_else(|| panic!("{at} is not a hostPath volume"));
        assert_eq!(hp.path, host, "the volume mounted at {at}");
        assert_eq!(m.read_only.unwrap_or(false), ro, "{at} read-only");
    }

    // The API socket needs a writable directory: with a read-only root
    // filesystem the agent cannot create it, goes on without the socket, and
    // `kubectl exec ds/graceful -- /graceful drains` finds no agent.
    let daemon_args = c.args.clone().unwrap_or_default();
    let socket = daemon_args
        .iter()
        .position(|a| a == "--api-socket")
        .and_then(|i| daemon_args.get(i + 1).cloned())
        .unwrap_or_else(|| graceful::serve::local_api::DEFAULT_SOCKET.to_string());
    let socket_dir = std::path::Path::new(&socket)
        .parent()
        .unwrap()
        .to_str()
        .unwrap()
        .to_string();
    if sc.read_only_root_filesystem == Some(true) {
        let m = c
            .volume_mounts
            .iter()
            .flatten()
            .find(|m| m.mount_path == socket_dir)
            .unwrap_or_else(|| panic!("the root filesystem is read-only and nothing writable is mounted at {socket_dir}, the API socket's directory"));
        assert!(!m.read_only.unwrap_or(false), "{socket_dir} is mounted read-only");
        let v = pod.volumes.iter().flatten().find(|v| v.name == m.name).unwrap();
        assert!(
            v.empty_dir.is_some(),
            "the API socket's directory is the pod's own (an emptyDir), not a host path another agent could share"
        );
    }

    // The node it watches, and its own pod (for the Events about itself).
    for (name, path) in [
        ("NODE_NAME", "spec.nodeName"),
        ("POD_NAME", "metadata.name"),
        ("POD_NAMESPACE", "metadata.namespace"),
        ("POD_UID", "metadata.uid"),
    ] {
        let env = c
            .env
            .iter()
            .flatten()
            .find(|e| e.name == name)
            .unwrap_or_else(|| panic!("no {name} env"));
        let field = env
            .value_from
            .as_ref()
            .and_then(|v| v.field_ref.as_ref())
            .map(|f| f.field_path.as_str());
        assert_eq!(field, Some(path), "{name} comes from the downward API");
    }

    let res = c.resources.as_ref().expect("no resources");
    for (what, set) in [("requests", &res.requests), ("limits", &res.limits)] {
        let set = set.as_ref().unwrap_or_else(|| panic!("no {what}"));
        assert!(
            set.contains_key("cpu") && set.contains_key("memory"),
            "{what}: cpu and memory"
        );
    }
    // The probes and Prometheus ask the metrics address, on the pod's own
    // address; the API that names pods and drains stays on loopback.
    let args = c.args.clone().unwrap_or_default();
    let flag = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .unwrap_or_else(|| panic!("the DaemonSet sets {name}"))
    };
    let port = c
        .ports
        .iter()
        .flatten()
        .find(|p| p.name.as_deref() == Some("metrics"))
        .expect("a port named metrics");
    // Every address of the pod, both families: the probes reach it on an
    // IPv4, IPv6 or dual-stack cluster alike.
    assert_eq!(flag("--metrics-addr"), &format!(":{}", port.container_port));
    let api: std::net::SocketAddr = flag("--api-addr").parse().expect("--api-addr is an address");
    assert!(
        api.ip().is_loopback(),
        "--api-addr {api}: /v1/pods must not be on the pod network"
    );
    assert_eq!(
        c.ports.iter().flatten().count(),
        1,
        "only the metrics port is declared"
    );
    for (what, probe, path) in [
        ("readiness", &c.readiness_probe, "/readyz"),
        ("liveness", &c.liveness_probe, "/healthz"),
    ] {
        let get = probe
            .as_ref()
            .and_then(|p| p.http_get.clone())
            .unwrap_or_else(|| panic!("no {what} httpGet probe"));
        assert_eq!(get.path.as_deref(), Some(path), "{what}");
        assert_eq!(
            get.port,
            k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::String("metrics".into())
        );
    }

    let tolerates_all = pod
        .tolerations
        .iter()
        .flatten()
        .any(|t| t.operator.as_deref() == Some("Exists") && t.key.is_none());
    assert!(
        tolerates_all,
        "the agent must tolerate every taint (operator Exists, no key)"
    );
    let strategy = agent()
        .spec
        .as_ref()
        .unwrap()
        .update_strategy
        .as_ref()
        .expect("no updateStrategy");
    assert_eq!(strategy.type_.as_deref(), Some("RollingUpdate"));
    assert_eq!(pod.priority_class_name.as_deref(), Some("system-node-critical"));
    assert_eq!(
        c.image.as_deref(),
        Some(format!("graceful/agent:{}", workspace().version).as_str()),
        "the agent's image tag follows the workspace version"
    );
}

#[test]
fn the_cluster_role_grants_pods_read_and_events_create_and_patch_only() {
    let roles: Vec<&Object> = all_rendered()
        .filter(|o| matches!(o.kind, Kind::ClusterRole(_)))
        .collect();
    let [role] = roles[..] else {
        panic!("expected one ClusterRole in deploy/, found {}", roles.len())
    };
    let Kind::ClusterRole(role) = &role.kind else {
        unreachable!()
    };
    assert!(
        role.aggregation_rule.is_none(),
        "an aggregated ClusterRole grants what others add"
    );
    let mut rules: Vec<(Vec<String>, Vec<String>, Vec<String>)> = Vec::new();
    for r in role.rules.iter().flatten() {
        assert!(
            r.resource_names.is_none() && r.non_resource_urls.is_none(),
            "{r:?}"
        );
        let sorted = |v: &Option<Vec<String>>| {
            let mut v = v.clone().unwrap_or_default();
            v.sort();
            v
        };
        rules.push((
            sorted(&r.api_groups),
            sorted(&r.resources),
            r.verbs
                .iter()
                .cloned()
                .collect::<BTreeSet<_>>()
                .into_iter()
                .collect(),
        ));
    }
    rules.sort();
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    assert_eq!(
        rules,
        vec![
            // patch: a repeated Event's count (the correlator).
            (s(&[""]), s(&["events"]), s(&["create", "patch"])),
            (s(&[""]), s(&["pods"]), s(&["get", "list", "watch"])),
        ]
    );

    // Bound to the agent's ServiceAccount, which the DaemonSet runs as.
    let name = role.metadata.name.clone().unwrap();
    let sa = agent_pod()
        .service_account_name
        .clone()
        .expect("the DaemonSet names no serviceAccountName");
    assert!(
        base()
            .iter()
            .any(|o| matches!(&o.kind, Kind::ServiceAccount(a) if a.metadata.name.as_deref() == Some(&sa))),
        "no ServiceAccount {sa} in deploy/base"
    );
    let bound = all_rendered().any(|o| match &o.kind {
        Kind::ClusterRoleBinding(b) => {
            b.role_ref.kind == "ClusterRole"
                && b.role_ref.name == name
                && b.subjects.iter().flatten().any(|s| {
                    s.kind == "ServiceAccount" && s.name == sa && s.namespace.as_deref() == Some(NAMESPACE)
                })
        }
        _ => false,
    });
    assert!(
        bound,
        "no ClusterRoleBinding binds ClusterRole {name} to ServiceAccount {NAMESPACE}/{sa}"
    );
}
