//! The restricted example against the Pod Security Standards' restricted
//! level (which includes baseline), on what `kubectl kustomize` renders:
//! the rules the API server's admission applies, so that a change that
//! would be rejected in such a namespace fails here first. Each rule is
//! then broken on a copy of the example's pod spec, to show that it bites.

use k8s_openapi::api::core::v1::{Namespace, Probe, SecurityContext};

use super::*;

/// The volume sources restricted allows; anything else, hostPath first,
/// is a host or driver volume it rejects.
const RESTRICTED_VOLUMES: &[&str] = &[
    "configMap",
    "csi",
    "downwardAPI",
    "emptyDir",
    "ephemeral",
    "image",
    "persistentVolumeClaim",
    "projected",
    "secret",
];

/// The one capability restricted lets a container add.
const ADDABLE: &str = "NET_BIND_SERVICE";

/// What a namespace's labels break of "enforce restricted".
pub(super) fn namespace_findings(ns: &Namespace) -> Vec<Finding> {
    let mut f = Findings::default();
    let name = ns.metadata.name.clone().unwrap_or_default();
    let labels = ns.metadata.labels.clone().unwrap_or_default();
    let label = |k: &str| {
        labels
            .get(&format!("pod-security.kubernetes.io/{k}"))
            .map(String::as_str)
    };
    for mode in ["enforce", "audit", "warn"] {
        f.check(
            Rule::NamespaceEnforcesRestricted,
            label(mode) == Some("restricted"),
            || {
                format!(
                    "namespace {name}: label pod-security.kubernetes.io/{mode} is {:?}, not \"restricted\"",
                    label(mode)
                )
            },
        );
    }
    let version = label("enforce-version");
    f.check(
        Rule::NamespaceEnforcesRestricted,
        version.is_some_and(|v| v == "latest" || v.starts_with("v1.")),
        || {
            format!(
                "namespace {name}: pod-security.kubernetes.io/enforce-version is {version:?}: \
                 pin the level's version (v1.NN) or say latest"
            )
        },
    );
    f.0
}

/// What a pod spec breaks of Pod Security restricted.
pub(super) fn restricted_findings(spec: &PodSpec) -> Vec<Finding> {
    let mut f = Findings::default();
    for v in spec.volumes.iter().flatten() {
        let value = serde_json::to_value(v).unwrap();
        let sources: Vec<&String> = value
            .as_object()
            .unwrap()
            .keys()
            .filter(|k| *k != "name")
            .collect();
        f.check(
            Rule::NoHostVolumes,
            sources.iter().all(|s| RESTRICTED_VOLUMES.contains(&s.as_str())),
            || {
                format!(
                    "volume {} is a {sources:?} volume; restricted allows only {RESTRICTED_VOLUMES:?} \
                     (never hostPath)",
                    v.name
                )
            },
        );
    }
    for (field, on) in [
        ("hostNetwork", spec.host_network),
        ("hostPID", spec.host_pid),
        ("hostIPC", spec.host_ipc),
    ] {
        f.check(Rule::NoHostNamespaces, on != Some(true), || {
            format!("the pod sets {field}: baseline forbids the host's namespaces")
        });
    }
    let pod_sc = spec.security_context.clone().unwrap_or_default();
    let pod_seccomp = pod_sc.seccomp_profile.as_ref().map(|p| p.type_.as_str());
    f.check(Rule::RunAsNonRoot, pod_sc.run_as_user != Some(0), || {
        "the pod sets runAsUser: 0".into()
    });
    f.check(
        Rule::SeccompProfile,
        matches!(pod_seccomp, None | Some("RuntimeDefault" | "Localhost")),
        || format!("the pod's seccompProfile is {pod_seccomp:?}: RuntimeDefault or Localhost"),
    );
    for c in containers(spec) {
        let n = &c.name;
        let sc: SecurityContext = c.security_context.clone().unwrap_or_default();
        f.check(Rule::NotPrivileged, sc.privileged != Some(true), || {
            format!("container {n} is privileged")
        });
        for p in c.ports.iter().flatten() {
            f.check(Rule::NoHostNamespaces, p.host_port.unwrap_or(0) == 0, || {
                format!("container {n} takes hostPort {:?}", p.host_port)
            });
        }
        // A container's own value overrides the pod's.
        let non_root = sc.run_as_non_root.or(pod_sc.run_as_non_root);
        f.check(Rule::RunAsNonRoot, non_root == Some(true), || {
            format!(
                "container {n}: runAsNonRoot is {non_root:?}; restricted needs true, on the pod or \
                 on every container"
            )
        });
        f.check(Rule::RunAsNonRoot, sc.run_as_user != Some(0), || {
            format!("container {n} sets runAsUser: 0")
        });
        f.check(
            Rule::NoPrivilegeEscalation,
            sc.allow_privilege_escalation == Some(false),
            || {
                format!(
                    "container {n}: allowPrivilegeEscalation is {:?}; restricted needs false, set \
                     explicitly",
                    sc.allow_privilege_escalation
                )
            },
        );
        let caps = sc.capabilities.clone().unwrap_or_default();
        let drop = caps.drop.unwrap_or_default();
        f.check(Rule::CapabilitiesDropAll, drop.iter().any(|d| d == "ALL"), || {
            format!("container {n}: capabilities.drop is {drop:?}; restricted needs [ALL]")
        });
        let add = caps.add.unwrap_or_default();
        f.check(
            Rule::CapabilitiesDropAll,
            add.iter().all(|a| a == ADDABLE),
            || format!("container {n}: capabilities.add is {add:?}; restricted allows only {ADDABLE}"),
        );
        let seccomp = sc.seccomp_profile.as_ref().map(|p| p.type_.clone());
        let effective = seccomp.as_deref().or(pod_seccomp);
        f.check(
            Rule::SeccompProfile,
            matches!(effective, Some("RuntimeDefault" | "Localhost")),
            || {
                format!(
                    "container {n}: seccompProfile is {effective:?}; restricted needs RuntimeDefault \
                     or Localhost, on the pod or on every container"
                )
            },
        );
        for (what, host) in host_fields(c) {
            f.check(Rule::NoHostInHooksOrProbes, host.is_none(), || {
                format!(
                    "container {n}: {what} sets host {host:?}; baseline forbids it since 1.34 \
                     (KEP-4940): leave it out, the kubelet then targets the pod's own IP"
                )
            });
        }
    }
    f.0
}

/// The `host` of every httpGet and tcpSocket action in a container's
/// hooks and probes: (where, host).
fn host_fields(c: &Container) -> Vec<(String, Option<String>)> {
    let mut out = Vec::new();
    let probes: [(&str, &Option<Probe>); 3] = [
        ("livenessProbe", &c.liveness_probe),
        ("readinessProbe", &c.readiness_probe),
        ("startupProbe", &c.startup_probe),
    ];
    for (what, p) in probes {
        if let Some(p) = p {
            if let Some(g) = &p.http_get {
                out.push((format!("{what}.httpGet"), g.host.clone()));
            }
            if let Some(t) = &p.tcp_socket {
                out.push((format!("{what}.tcpSocket"), t.host.clone()));
            }
        }
    }
    let lc = c.lifecycle.clone().unwrap_or_default();
    for (what, h) in [("postStart", lc.post_start), ("preStop", lc.pre_stop)] {
        if let Some(h) = h {
            if let Some(g) = h.http_get {
                out.push((format!("{what}.httpGet"), g.host));
            }
            if let Some(t) = h.tcp_socket {
                out.push((format!("{what}.tcpSocket"), t.host));
            }
        }
    }
    out
}

/// The restricted example's namespace and its one pod template.
fn restricted_example() -> (&'static Namespace, String, &'static PodSpec) {
    let objs = &rendered()["deploy/examples/restricted"];
    let mut nss = objs.iter().filter_map(|o| match &o.kind {
        Kind::Namespace(n) => Some(n),
        _ => None,
    });
    let ns = nss
        .next()
        .expect("deploy/examples/restricted renders no Namespace");
    assert!(nss.next().is_none(), "deploy/examples/restricted: one Namespace");
    let name = ns.metadata.name.as_deref().unwrap();
    for o in objs.iter().filter(|o| !o.cluster_scoped) {
        assert_eq!(
            o.metadata().and_then(|m| m.namespace.as_deref()),
            Some(name),
            "{}: {} must be in the restricted namespace {name}",
            o.origin,
            o.name()
        );
    }
    let mut pods = pod_templates(objs);
    assert_eq!(pods.len(), 1, "deploy/examples/restricted: one pod template");
    let (owner, spec) = pods.remove(0);
    (ns, owner, spec)
}

#[test]
fn the_restricted_example_passes_pod_security_restricted() {
    let (ns, owner, spec) = restricted_example();
    let f = namespace_findings(ns);
    assert!(f.is_empty(), "deploy/examples/restricted:{}", report(&f));
    let f = restricted_findings(spec);
    assert!(f.is_empty(), "{owner}:{}", report(&f));
    // And it reaches the drain through the httpGet gate alone.
    assert!(
        hooks(spec).is_empty(),
        "{owner}: an exec hook needs the agent's hostPath"
    );
    assert!(!http_hooks(spec).is_empty(), "{owner}: no httpGet gate hook");
}

#[test]
fn each_pod_security_rule_fails_a_broken_copy() {
    let (ns, _, spec) = restricted_example();
    type Break = fn(&mut PodSpec);
    /// The first container's securityContext.
    fn ctx(s: &mut PodSpec) -> &mut SecurityContext {
        s.containers[0].security_context.as_mut().unwrap()
    }
    let breaks: &[(Rule, &str, Break)] =
        &[
            (Rule::NoHostVolumes, "the exec gate's hostPath", |s| {
                s.volumes.get_or_insert_with(Vec::new).push(serde_json::from_value(serde_json::json!({
                "name": "graceful", "hostPath": {"path": "/var/run/graceful", "type": "DirectoryOrCreate"}
            })).unwrap())
            }),
            (Rule::NoHostNamespaces, "hostNetwork", |s| {
                s.host_network = Some(true)
            }),
            (Rule::NoHostNamespaces, "a hostPort", |s| {
                s.containers[0].ports.as_mut().unwrap()[0].host_port = Some(8080)
            }),
            (Rule::NotPrivileged, "privileged", |s| {
                ctx(s).privileged = Some(true)
            }),
            (Rule::RunAsNonRoot, "no runAsNonRoot", |s| {
                s.security_context.as_mut().unwrap().run_as_non_root = None
            }),
            (Rule::RunAsNonRoot, "a container that overrides it", |s| {
                ctx(s).run_as_non_root = Some(false)
            }),
            (Rule::RunAsNonRoot, "runAsUser 0", |s| {
                s.security_context.as_mut().unwrap().run_as_user = Some(0)
            }),
            (
                Rule::NoPrivilegeEscalation,
                "allowPrivilegeEscalation left out",
                |s| ctx(s).allow_privilege_escalation = None,
            ),
            (Rule::CapabilitiesDropAll, "drop ALL left out", |s| {
                ctx(s).capabilities.as_mut().unwrap().drop = None
            }),
            (Rule::CapabilitiesDropAll, "NET_ADMIN added", |s| {
                ctx(s).capabilities.as_mut().unwrap().add = Some(vec!["NET_ADMIN".into()])
            }),
            (Rule::SeccompProfile, "Unconfined", |s| {
                s.security_context
                    .as_mut()
                    .unwrap()
                    .seccomp_profile
                    .as_mut()
                    .unwrap()
                    .type_ = "Unconfined".into()
            }),
            (Rule::SeccompProfile, "no profile anywhere", |s| {
                s.security_context.as_mut().unwrap().seccomp_profile = None
            }),
            (
                Rule::NoHostInHooksOrProbes,
                "a host on the readiness probe",
                |s| {
                    let p = s.containers[0].readiness_probe.as_mut().unwrap();
                    p.http_get.as_mut().unwrap().host = Some("10.0.0.1".into())
                },
            ),
            (Rule::NoHostInHooksOrProbes, "a host on the preStop hook", |s| {
                pre_stop_get(s).host = Some("127.0.0.1".into())
            }),
        ];
    for (rule, what, brk) in breaks {
        let mut broken = spec.clone();
        brk(&mut broken);
        let f = restricted_findings(&broken);
        assert!(
            f.iter().any(|x| x.rule == *rule),
            "{what}: the copy should break {rule:?}, but the findings are:{}",
            report(&f)
        );
    }
    type NsBreak = fn(&mut Namespace);
    let ns_breaks: &[(&str, NsBreak)] = &[
        ("enforce baseline", |n| {
            n.metadata
                .labels
                .as_mut()
                .unwrap()
                .insert("pod-security.kubernetes.io/enforce".into(), "baseline".into());
        }),
        ("no enforce-version", |n| {
            n.metadata
                .labels
                .as_mut()
                .unwrap()
                .remove("pod-security.kubernetes.io/enforce-version");
        }),
        ("no warn", |n| {
            n.metadata
                .labels
                .as_mut()
                .unwrap()
                .remove("pod-security.kubernetes.io/warn");
        }),
    ];
    for (what, brk) in ns_breaks {
        let mut broken = ns.clone();
        brk(&mut broken);
        let f = namespace_findings(&broken);
        assert!(
            f.iter().any(|x| x.rule == Rule::NamespaceEnforcesRestricted),
            "{what}: the namespace copy should break NamespaceEnforcesRestricted"
        );
    }
}
