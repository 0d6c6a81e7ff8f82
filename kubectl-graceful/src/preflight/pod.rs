//! The pod `kubectl graceful preflight` runs on each node: the agent's own
//! pod (deploy/base's DaemonSet, the chart's defaults) as admission and the
//! kubelet judge it — its priority class, hostPID, host mounts, five
//! capabilities, seccomp and AppArmor — running `graceful doctor --json`
//! once instead of the agent. It leaves out only what would change the
//! node: the gate directory (a hostPath the kubelet would create) and the
//! probes. A test keeps it equal to deploy/base field for field.

use k8s_openapi::api::core::v1::Pod;
use serde_json::json;

/// The label every preflight pod carries, with its run's id.
pub const RUN_LABEL: &str = "graceful.dev/preflight-run";

/// The agent's container, as deploy/base writes it, without its probes,
/// ports, environment and arguments: what admission and the kubelet judge.
pub fn container(image: &str) -> serde_json::Value {
    json!({
        "name": "agent",
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "command": ["/graceful", "doctor", "--json"],
        "terminationMessagePolicy": "FallbackToLogsOnError",
        "securityContext": {
            "privileged": false,
            "allowPrivilegeEscalation": false,
            "readOnlyRootFilesystem": true,
            "runAsUser": 0,
            "runAsNonRoot": false,
            "capabilities": {
                "drop": ["ALL"],
                "add": ["BPF", "PERFMON", "NET_ADMIN", "SYS_ADMIN", "SYS_PTRACE"]
            },
            "seccompProfile": {"type": "RuntimeDefault"},
            "appArmorProfile": {"type": "Unconfined"}
        },
        "resources": {
            "requests": {"cpu": "20m", "memory": "64Mi"},
            "limits": {"cpu": "1", "memory": "512Mi"}
        },
        "volumeMounts": [
            {"name": "bpffs", "mountPath": "/sys/fs/bpf", "mountPropagation": "HostToContainer"},
            {"name": "cgroup", "mountPath": "/sys/fs/cgroup", "readOnly": true},
            {"name": "btf", "mountPath": "/sys/kernel/btf", "readOnly": true}
        ]
    })
}

/// The host directories the doctor reads, as the agent mounts them.
pub fn volumes() -> serde_json::Value {
    json!([
        {"name": "bpffs", "hostPath": {"path": "/sys/fs/bpf", "type": "Directory"}},
        {"name": "cgroup", "hostPath": {"path": "/sys/fs/cgroup", "type": "Directory"}},
        {"name": "btf", "hostPath": {"path": "/sys/kernel/btf", "type": "Directory"}}
    ])
}

/// What one preflight pod is made of.
pub struct Spec<'a> {
    pub namespace: &'a str,
    pub run: &'a str,
    pub image: &'a str,
    /// Empty: none (when admission refuses the class, the checks still run).
    pub priority_class: &'a str,
    /// The node it runs on; `None` for the dry run of admission.
    pub node: Option<&'a str>,
}

/// The pod: on `node` by name (past the scheduler, as a DaemonSet's pods
/// are placed), once (`restartPolicy: Never`).
pub fn pod(s: &Spec) -> Pod {
    let mut spec = json!({
        "restartPolicy": "Never",
        "hostPID": true,
        "enableServiceLinks": false,
        "automountServiceAccountToken": false,
        "terminationGracePeriodSeconds": 5,
        "tolerations": [{"operator": "Exists"}],
        "containers": [container(s.image)],
        "volumes": volumes()
    });
    if !s.priority_class.is_empty() {
        spec["priorityClassName"] = json!(s.priority_class);
    }
    if let Some(node) = s.node {
        spec["nodeName"] = json!(node);
    }
    serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "generateName": "graceful-preflight-",
            "namespace": s.namespace,
            "labels": {
                "app.kubernetes.io/name": "graceful",
                "app.kubernetes.io/component": "preflight",
                RUN_LABEL: s.run
            }
        },
        "spec": spec
    }))
    .expect("a valid Pod")
}

/// A pod that mounts `image` as an image volume, as the socket gate's
/// pods mount the agent's image at /graceful: for a dry run only.
pub fn image_volume_pod(namespace: &str, run: &str, image: &str) -> Pod {
    serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "generateName": "graceful-preflight-image-volume-",
            "namespace": namespace,
            "labels": {RUN_LABEL: run}
        },
        "spec": {
            "containers": [{
                "name": "app",
                "image": image,
                "volumeMounts": [{"name": "graceful", "mountPath": "/graceful", "readOnly": true}]
            }],
            "volumes": [{"name": "graceful", "image": {"reference": image, "pullPolicy": "IfNotPresent"}}]
        }
    }))
    .expect("a valid Pod")
}

#[cfg(test)]
mod tests;
